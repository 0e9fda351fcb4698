package lab_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
)

// TestSeedScenarios runs seeds 001's and 003's incidents on the seeds' own
// schemas, with the consumers their teams wrote, and triages every
// operation with the code of `opctl where`: the incident's verdict for the
// affected one, the healthy one's and the look-alike's for the others;
// then repairs the incidents as the demo does and requires every invariant
// to hold.
func TestSeedScenarios(t *testing.T) {
	testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := startSeedLab(ctx, t, testenv.RootDSN())
	incidents := []string{"one WMS lock for SO-7001:PAID", "one points grant for paid order 8821"}
	for _, p := range []string{"fulfilment_seed", "orders_seed"} {
		if env.Config.Pipeline(p) == nil {
			t.Fatalf("the lab config has no pipeline %s", p)
		}
	}
	results, err := env.Run(ctx, lab.SeedScenarios(), func(p lab.Progress) {
		if p.Done {
			t.Logf("scenario %s: %v in %s", p.Scenario, p.Err, p.Elapsed)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Err != nil {
			t.Fatalf("scenario %s: %v", r.Scenario.Name, r.Err)
		}
		t.Logf("%s: %s", r.Scenario.Name, strings.Join(r.Story, "; "))
	}
	checks, err := env.Check(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	// Where each incident is: the step a seed's on-call engineer looks at.
	wantStep := map[string]string{"SO-7001:PAID": "wms_lock", "8821": "points"}
	for _, c := range checks {
		if step, ok := wantStep[c.BizID]; ok && (len(c.Report.Findings) == 0 || c.Report.Findings[0].Step != step) {
			t.Errorf("%s: the verdict's finding is not on step %s: %+v", c.BizID, step, c.Report.Findings)
		}
		var f []string
		for _, x := range c.Report.Findings {
			f = append(f, x.String())
		}
		t.Logf("%s %s (%s): %s, want %s; %s; findings: %s", c.Scenario, c.BizID, c.Pipeline, c.Verdict, c.Expectation.Verdict, c.Report.Verdict.Summary, strings.Join(f, " | "))
		if !c.OK || c.Report.Partial {
			t.Errorf("%s %s (%s): where says %s (partial %v), want %s; sources %v", c.Scenario, c.BizID, c.Pipeline, c.Verdict, c.Report.Partial, c.Expectation.Verdict, c.Report.Sources)
		}
	}
	// reconcile over each seed pipeline: never a target that where does
	// not flag (the healthy operations, the look-alikes), no check failed.
	for _, r := range results {
		seedReconcile(ctx, t, env, r)
	}
	invs, err := env.Invariants(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	broken := map[string]bool{}
	for _, inv := range invs {
		if !inv.Holds {
			broken[inv.Name] = true
		}
	}
	// Before the repair, each incident breaks its own invariant, and only it.
	for _, name := range incidents {
		if !broken[name] {
			t.Errorf("the incident did not happen: %q holds", name)
		}
	}
	if len(broken) != len(incidents) {
		t.Errorf("broken before the repair: %v, want only the incidents' %v", broken, incidents)
	}
	repairSeeds(ctx, t, env, results, checks)
}

// repairSeeds repairs the affected operations of checks as the demo does
// (lab.Env.Repair) and requires each to end COMPLETE or SKIPPED_OK, every
// invariant of results to hold, and every untouched operation to keep its
// verdict.
func repairSeeds(ctx context.Context, t *testing.T, env *lab.Env, results []lab.Result, checks []lab.Check) {
	t.Helper()
	repairs, err := env.Repair(ctx, checks, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range repairs {
		t.Logf("repair %s %s: %s → %s (plan %.12s %s %s)\n%s", r.Scenario, r.BizID, r.Before, r.After, r.PlanID, r.Applied, r.Why, r.PlanText)
		if !r.OK {
			t.Errorf("%s %s: %s → %s after the repair (plan %.12s, %s %s)", r.Scenario, r.BizID, r.Before, r.After, r.PlanID, r.Applied, r.Why)
		}
	}
	invs, err := env.Invariants(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, inv := range invs {
		if !inv.Holds {
			t.Errorf("after the repair: %s: %s", inv.Name, inv.Detail)
		}
	}
	after, err := env.Check(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range after {
		if !c.Affected && !c.OK {
			t.Errorf("untouched %s became %s", c.BizID, c.Verdict)
		}
	}
}

// startSeedLab starts the lab on dsn with FastTimings, closed when the test
// ends.
func startSeedLab(ctx context.Context, t *testing.T, dsn string) *lab.Env {
	t.Helper()
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: dsn, Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env
}

// seedReconcile runs `opctl reconcile --pipeline P` over a seed scenario's
// pipeline, every check, the window the scenario ran in: no check may fail,
// its targets are exactly the scenario's affected operations (none of the
// healthy ones or the look-alikes), each with where's verdict, and it
// exits 3. The seeds' incidents live in steps without a scan block (a
// downstream's journal, the binlog) and in SKIPPED records without a
// biz_id (docs/reconcile.md).
func seedReconcile(ctx context.Context, t *testing.T, env *lab.Env, r lab.Result) {
	t.Helper()
	pipeline := r.Expect[0].Pipeline
	ios, _, out, errOut := iostreams.Test()
	code := cmd.Run(ctx, ios, []string{"--config", env.ConfigPath, "reconcile", "--pipeline", pipeline, "-o", "json",
		"--older-than", "0s", "--since", "1d", "--allow-full-scan"})
	var rep struct {
		Summary reconcile.Summary `json:"summary"`
		Targets []struct {
			BizID   string `json:"biz_id"`
			Check   string `json:"check"`
			Verdict string `json:"verdict"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("reconcile --pipeline %s: exit %d, not JSON: %v\n%s\n%s", pipeline, code, err, out, errOut)
	}
	for _, c := range rep.Summary.Checks {
		t.Logf("reconcile %s/%s: %s %s; notes %v", c.Pipeline, c.Check, c.Status, c.Reason, c.Notes)
		if c.Status == reconcile.StatusFailed {
			t.Errorf("reconcile %s/%s failed: %s", c.Pipeline, c.Check, c.Reason)
		}
	}
	want := map[string]lab.Expectation{}
	for _, x := range r.Expect {
		want[x.BizID] = x
	}
	found := map[string]bool{}
	for _, tg := range rep.Targets {
		x, ok := want[tg.BizID]
		switch {
		case !ok || !x.Affected:
			t.Errorf("reconcile %s: false positive %s (%s, %s)", pipeline, tg.BizID, tg.Check, tg.Verdict)
		case tg.Verdict != string(x.Verdict):
			t.Errorf("reconcile %s: %s reads %s, where %s", pipeline, tg.BizID, tg.Verdict, x.Verdict)
		}
		found[tg.BizID] = true
	}
	for _, x := range r.Expect {
		if x.Affected && !found[x.BizID] {
			t.Errorf("reconcile %s (exit %d) does not find %s (%s)", pipeline, code, x.BizID, x.Verdict)
		}
	}
	if len(found) > 0 && code != 3 {
		t.Errorf("reconcile %s: exit %d with targets, want 3", pipeline, code)
	}
}

// TestSeed003Repair: on seed 003's own schema, 8821's repair
// (WRONGLY_SKIPPED, a consumer that ignores opctl's headers, a points step
// with a redrive template) is the points service's redrive, never a
// republish the consumer would skip again (docs/repair.md). Its dry run
// sends nothing, its apply grants once, a second apply grants nothing more,
// and 8821 reads COMPLETE.
func TestSeed003Repair(t *testing.T) {
	testenv.MySQL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := startSeedLab(ctx, t, testenv.RootDSN())
	scenario, err := lab.Select([]string{"order-wrongly-skipped-seed"})
	if err != nil {
		t.Fatal(err)
	}
	results, err := env.Run(ctx, scenario, nil)
	if err != nil || results[0].Err != nil {
		t.Fatalf("scenario: %v %v", err, results[0].Err)
	}
	svc, closeFn, err := env.Service(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	plan, _, err := svc.PlanID(ctx, "8821", "orders_seed", plans.Options{Reason: "INC-8821", Operator: "test"})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	var sb strings.Builder
	_ = plans.Render(&sb, plan, plans.RenderOptions{})
	t.Logf("plan:\n%s", sb.String())
	var types []plans.ActionType
	for _, a := range plan.Actions {
		types = append(types, a.Type)
	}
	if len(types) != 1 || types[0] != plans.Redrive {
		t.Fatalf("8821's plan is %v, want one redrive of points", types)
	}
	dry, err := svc.Apply(ctx, plan, repair.ApplyOptions{DryRun: true, Operator: "test"})
	if err != nil || dry.Outcome != repair.OutcomeWouldApply {
		t.Fatalf("dry run: %v; %+v", err, dry)
	}
	if n := env.Seeds.Points.Net("8821"); n != 0 {
		t.Fatalf("the dry run granted %d time(s)", n)
	}
	for i, want := range []repair.Outcome{repair.OutcomeApplied, repair.OutcomeAlreadyApplied} {
		res, err := svc.Apply(ctx, plan, repair.ApplyOptions{Operator: "test"})
		if err != nil || res.Outcome != want {
			t.Fatalf("apply %d: %v; want %s, got %+v", i+1, err, want, res)
		}
	}
	r, err := env.Triage(ctx, svc, "orders_seed", "8821")
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict.Code != "COMPLETE" {
		t.Errorf("8821 after the repair: %s (%s)", r.Verdict.Code, r.Verdict.Summary)
	}
	if n := env.Seeds.Points.Net("8821"); n != 1 {
		t.Errorf("points grants of 8821: %d, want 1", n)
	}
	// The grant went through POST /grant, with the plan's Idempotency-Key.
	if calls := env.Seeds.Points.Calls("8821"); len(calls) != 1 || !strings.HasPrefix(calls[0].RequestID, plan.ID+":") {
		t.Errorf("points journal of 8821: %+v, want one grant keyed by plan %s", calls, plan.ID)
	}
}

// TestSeed000Stranded runs settlement-stranded-seed on seed 000's own
// tables (no state, no idempotency table; the debit only in the binlog):
// where places PAY-ST-1's message by its key although no row anchors the
// search, and says STRANDED (debited, no ledger row, committed past);
// PAY-ST-4, debited and not committed, WILL_REDELIVER with the warning
// that the redelivery debits again; the healthy PAY-ST-2 and the
// look-alike PAY-ST-3 (committed before its ledger row existed, then
// finished) COMPLETE; an id no message has stays NOT_FOUND and says how
// far it searched. reconcile's stuck check finds PAY-ST-1 from the
// committed messages and the ledger, and nothing else.
func TestSeed000Stranded(t *testing.T) {
	srv := binlogSrv.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := startSeedLab(ctx, t, srv.RootDSN)
	if !env.Binlog || env.Config.Pipeline("settlement_seed") == nil {
		t.Fatalf("the lab on a ROW binlog server has no seed pipeline (binlog %v)", env.Binlog)
	}
	scenario, err := lab.Select([]string{"settlement-stranded-seed"})
	if err != nil {
		t.Fatal(err)
	}
	results, err := env.Run(ctx, scenario, nil)
	if err != nil || results[0].Err != nil {
		t.Fatalf("scenario: %v %v", err, results[0].Err)
	}
	checks, err := env.Check(ctx, results)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		t.Logf("%s: %s (%s); kafka %s %s", c.BizID, c.Verdict, c.Report.Verdict.Summary, c.Report.Kafka.Located, c.Report.Kafka.Detail)
		if !c.OK || c.Report.Partial {
			t.Errorf("%s: where says %s (partial %v), want %s; sources %v", c.BizID, c.Verdict, c.Report.Partial, c.Expectation.Verdict, c.Report.Sources)
		}
		switch c.BizID {
		case "PAY-ST-1", "PAY-ST-4":
			if !strings.HasPrefix(c.Report.Kafka.Detail, "no row anchors the search") {
				t.Errorf("%s: the search detail does not say what was searched: %q", c.BizID, c.Report.Kafka.Detail)
			}
		}
		if c.BizID == "PAY-ST-4" && !strings.Contains(c.Report.Verdict.Summary, "debit") {
			t.Errorf("PAY-ST-4: the summary does not warn that the redelivery debits again: %q", c.Report.Verdict.Summary)
		}
	}
	// An id of no message: NOT_FOUND (exit 4), the search named.
	ios, _, out, errOut := iostreams.Test()
	code := cmd.Run(ctx, ios, []string{"--config", env.ConfigPath, "where", "PAY-ST-404", "--pipeline", "settlement_seed", "-o", "json"})
	var nf struct {
		Verdict struct{ Code string }   `json:"verdict"`
		Kafka   struct{ Detail string } `json:"kafka"`
	}
	if err := json.Unmarshal(out.Bytes(), &nf); err != nil || code != 4 || nf.Verdict.Code != "NOT_FOUND" || !strings.Contains(nf.Kafka.Detail, "not found: scanned") {
		t.Errorf("where PAY-ST-404: exit %d, %+v (%v)\n%s\n%s", code, nf, err, out, errOut)
	}
	seedReconcile(ctx, t, env, results[0])
	// The plan for PAY-ST-1 is by hand: the seed's consumer, reading a
	// republished record as a plain redelivery, would debit again.
	svc, closeFn, err := env.Service(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	plan, _, err := svc.PlanID(ctx, "PAY-ST-1", "settlement_seed", plans.Options{Reason: "INC-ST-1", Operator: "test", Attest: "ledger row written by hand"})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	if len(plan.Actions) == 0 {
		t.Error("PAY-ST-1's plan has no action")
	}
	for _, a := range plan.Actions {
		if a.Type != plans.Manual {
			t.Errorf("PAY-ST-1's plan has a %s action, want only manual (a republish would debit again): %+v", a.Type, plan.Actions)
		}
	}
}
