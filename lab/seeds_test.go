package lab_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/consumer"
	"github.com/opctl-dev/opctl/lab/testenv"
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
	env, err := lab.Start(ctx, lab.Options{MySQLDSN: testenv.RootDSN(), Timings: consumer.FastTimings()})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	pipelines := []string{"fulfilment_seed"}
	incidents := []string{"one WMS lock for SO-7001:PAID"}
	if lab.Seed003Ready {
		pipelines = append(pipelines, "orders_seed")
		incidents = append(incidents, "one points grant for paid order 8821")
	}
	for _, p := range pipelines {
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
	for _, c := range checks {
		var f []string
		for _, x := range c.Report.Findings {
			f = append(f, x.String())
		}
		t.Logf("%s %s (%s): %s, want %s; %s; findings: %s", c.Scenario, c.BizID, c.Pipeline, c.Verdict, c.Expectation.Verdict, c.Report.Verdict.Summary, strings.Join(f, " | "))
		if !c.OK || c.Report.Partial {
			t.Errorf("%s %s (%s): where says %s (partial %v), want %s; sources %v", c.Scenario, c.BizID, c.Pipeline, c.Verdict, c.Report.Partial, c.Expectation.Verdict, c.Report.Sources)
		}
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
	repairs, err := env.Repair(ctx, checks, func(s string) { t.Log(s) })
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range repairs {
		t.Logf("repair %s %s: %s → %s (plan %.12s %s %s)\n%s", r.Scenario, r.BizID, r.Before, r.After, r.PlanID, r.Applied, r.Why, r.PlanText)
		if !r.OK {
			t.Errorf("%s %s: %s → %s after the repair (plan %q, %s %s)", r.Scenario, r.BizID, r.Before, r.After, r.PlanID, r.Applied, r.Why)
		}
	}
	invs, err = env.Invariants(ctx, results)
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
