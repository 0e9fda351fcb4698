package repair

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func wantRefused(t *testing.T, err error, code string) *plans.RefusedError {
	t.Helper()
	var rf *plans.RefusedError
	if !errors.As(err, &rf) || rf.Code != code {
		t.Fatalf("err %v, want a refusal %s", err, code)
	}
	return rf
}

func TestApplyRefusesTamperedPlan(t *testing.T) {
	e := settlementEnv(t)
	p := e.mustPlan("settlement", "PAY-6", plans.Options{})
	var buf bytes.Buffer
	if err := plans.Encode(&buf, p); err != nil {
		t.Fatal(err)
	}
	// Any edit of the body: the reversed row, the reason, a guard.
	for _, edit := range []struct{ from, to string }{
		{`"identity": "9"`, `"identity": "7"`},
		{`"reason": "test repair"`, `"reason": "something else"`},
		{`"value": "3"`, `"value": "4"`},
	} {
		text := strings.Replace(buf.String(), edit.from, edit.to, 1)
		if text == buf.String() {
			t.Fatalf("edit %q not found in\n%s", edit.from, buf.String())
		}
		q, err := plans.Decode(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		res, err := e.apply(q)
		wantRefused(t, err, plans.CodeTampered)
		if res.Applied != 0 || res.Outcome != "refused" {
			t.Fatalf("result %+v", res)
		}
	}
	if n := e.count("SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL'"); n != 0 {
		t.Fatalf("%d reversals after tampered plans", n)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit_attempt WHERE outcome = 'tampered' AND JSON_EXTRACT(detail, '$.code') = 'tampered'"); n != 3 {
		t.Fatalf("%d tamper attempts recorded", n)
	}
	// An added field is a changed body too.
	_, err := plans.Decode(strings.NewReader(strings.Replace(buf.String(), `"plan_version": 1,`, `"plan_version": 1, "extra": true,`, 1)))
	if err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Fatalf("decode with an extra field: %v", err)
	}
	// Reformatting is not tampering: the id is the hash of the canonical body.
	q, err := plans.Decode(strings.NewReader(strings.ReplaceAll(buf.String(), "\n  ", "\n    ")))
	if err != nil || q.Verify() != nil {
		t.Fatalf("reformatted plan: %v %v", err, q.Verify())
	}
}

func TestApplyRefusesStalePlan(t *testing.T) {
	e := settlementEnv(t)
	p := e.mustPlan("settlement", "PAY-6", plans.Options{})
	// A redelivery debits once more after the plan was made.
	e.db.Exec(t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-6', 1006, -10.00, 'DEBIT', NOW(3))")
	res, err := e.apply(p)
	rf := wantRefused(t, err, plans.CodeStale)
	found := false
	for _, c := range rf.Diff {
		if strings.HasPrefix(c.Field, "steps.debit.evidence[") && c.From == "" && c.To == "live" {
			found = strings.Contains(err.Error(), c.Field+": (none) → live")
		}
	}
	if !found {
		t.Fatalf("diff %v\n%s", rf.Diff, err)
	}
	if len(res.Stale) == 0 || res.Applied != 0 {
		t.Fatalf("result %+v", res)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit_attempt WHERE outcome = 'stale'"); n != 1 {
		t.Fatalf("%d stale attempts", n)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit"); n != 0 {
		t.Fatalf("%d audit rows", n)
	}
}

func TestApplyRefusesOtherPipelineOrConfig(t *testing.T) {
	e := settlementEnv(t)
	p := e.mustPlan("settlement", "PAY-6", plans.Options{})

	// The same file with a changed evidence query: the pipeline's
	// configuration is not the one the plan was made for.
	data, _ := os.ReadFile(td("config", "settlement.yaml"))
	changed := strings.Replace(string(data), "done_status: LEDGER_DONE", "done_status: BOOKED", 1)
	env := func(n string) (string, bool) {
		return map[string]string{"OPCTL_MYSQL_DSN": e.db.DSN, "OPCTL_BROKERS": e.k.Brokers[0]}[n], true
	}
	cfg2, err := config.ParseWithEnv("changed.yaml", []byte(changed), env)
	if err != nil {
		t.Fatal(err)
	}
	ap := e.applier()
	ap.Config = cfg2
	_, err = ap.Apply(context.Background(), p)
	wantRefused(t, err, plans.CodeConfigChanged)

	// A config without the plan's pipeline.
	skip, _ := os.ReadFile(td("config", "skip.yaml"))
	cfg3, err := config.ParseWithEnv("skip.yaml", skip, env)
	if err != nil {
		t.Fatal(err)
	}
	ap.Config = cfg3
	_, err = ap.Apply(context.Background(), p)
	if rf := wantRefused(t, err, plans.CodeConfigChanged); !strings.Contains(rf.Detail, `pipeline "settlement"`) {
		t.Fatalf("detail %s", rf.Detail)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit"); n != 0 {
		t.Fatalf("%d audit rows", n)
	}
}

func TestApplyReplayedOnRepairedDatabase(t *testing.T) {
	e := settlementEnv(t)
	p1 := e.mustPlan("settlement", "PAY-6", plans.Options{})
	p2 := e.mustPlan("settlement", "PAY-6", plans.Options{Reason: "the same repair, planned twice"})
	e.mustApply(p1)
	// The same plan again: already applied, nothing changes.
	res := e.mustApply(p1)
	if res.Outcome != "already_applied" || res.Applied != 0 {
		t.Fatalf("replay: %+v", res)
	}
	// Another plan made before the repair: stale, not a second reversal.
	_, err := e.apply(p2)
	wantRefused(t, err, plans.CodeStale)
	if n := e.count("SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL'"); n != 2 {
		t.Fatalf("%d reversals", n)
	}
}

type crashed struct{ point string }

// crashAfterCommit is a store that panics (as a killed process stops) right
// after the transaction of action n committed.
type crashAfterCommit struct {
	sources.Store
	n int
}

func (c crashAfterCommit) Do(ctx context.Context, fn func(sources.Tx) error) error {
	err := c.Store.Do(ctx, fn)
	if err == nil && actionOf(ctx) == c.n {
		panic(crashed{fmt.Sprintf("after-commit:%d", c.n)})
	}
	return err
}

func TestApplyResumesAndRefusesLiveLease(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-4", true)
	p := e.mustPlan("settlement", "PAY-4", plans.Options{})
	ap := e.applier()
	ap.Store = crashAfterCommit{Store: ap.Store, n: 1}
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Fatal("no crash")
			}
		}()
		_, _ = ap.Apply(context.Background(), p)
	}()
	// A consumer takes the lease (without touching the version) before the
	// plan is applied again: the resumed republish is refused by its lease
	// guard, and --force does not exist at apply.
	e.db.Exec(t, "UPDATE biz_operation SET owner = 'c-5', lease_until = NOW(3) + INTERVAL 1 HOUR WHERE biz_id = 'PAY-4'")
	res, err := e.apply(p)
	rf := wantRefused(t, err, plans.CodeLiveLease)
	if rf.Action != 2 || res.Previously != 1 || res.Actions[1].Outcome != OutcomeRefused {
		t.Fatalf("refusal %+v result %+v", rf, res)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit WHERE action = 'republish'"); n != 0 {
		t.Fatalf("%d republish rows", n)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit_attempt WHERE outcome = 'guard_failed'"); n != 1 {
		t.Fatalf("%d guard_failed attempts", n)
	}
	// The lease expires: the same plan continues where it stopped.
	e.db.Exec(t, "UPDATE biz_operation SET lease_until = NOW(3) - INTERVAL 1 SECOND WHERE biz_id = 'PAY-4'")
	res = e.mustApply(p)
	if res.Outcome != "applied" || res.Previously != 1 || res.Applied != 1 {
		t.Fatalf("resume: %+v", res)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-4", true)
	for _, biz := range []string{"PAY-6", "PAY-4"} {
		p := e.mustPlan("settlement", biz, plans.Options{})
		before := e.str("SELECT CONCAT((SELECT COUNT(*) FROM balance_journal), '/', (SELECT GROUP_CONCAT(CONCAT(biz_id, status, version)) FROM biz_operation), '/', (SELECT GROUP_CONCAT(balance) FROM account_balance))")
		g, _ := e.cl.Kafka.Group(context.Background(), "settlement-event", "settlement-consumer")
		res, err := e.dryRun(p)
		if err != nil || res.Outcome != "would_apply" || res.Applied != len(p.Actions) {
			t.Fatalf("%s dry run: %v %+v", biz, err, res)
		}
		for _, a := range res.Actions {
			if a.Outcome != OutcomeWouldApply {
				t.Fatalf("%s action %d: %s", biz, a.Index, a.Outcome)
			}
			for _, s := range a.Statements {
				if s.Rows != 1 {
					t.Fatalf("%s: %s affected %d rows in the rolled-back transaction", biz, s.SQL, s.Rows)
				}
			}
		}
		after := e.str("SELECT CONCAT((SELECT COUNT(*) FROM balance_journal), '/', (SELECT GROUP_CONCAT(CONCAT(biz_id, status, version)) FROM biz_operation), '/', (SELECT GROUP_CONCAT(balance) FROM account_balance))")
		g2, _ := e.cl.Kafka.Group(context.Background(), "settlement-event", "settlement-consumer")
		if before != after {
			t.Fatalf("%s: dry run changed %s → %s", biz, before, after)
		}
		for part, pv := range g.Partitions {
			if g2.Partitions[part].LogEnd != pv.LogEnd {
				t.Fatalf("%s: dry run published to partition %d", biz, part)
			}
		}
		if n := e.count("SELECT COUNT(*) FROM opctl_audit"); n != 0 {
			t.Fatalf("%s: %d audit rows after a dry run", biz, n)
		}
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit_attempt WHERE outcome = 'dry_run'"); n != 2 {
		t.Fatalf("%d dry_run attempts", n)
	}
}

func TestCompensateRefusedByDownstream(t *testing.T) {
	w := newWMS(t, map[string]int{"F-1": 2})
	e := newTenv(t, td("repair", "fulfilment.yaml"),
		[]string{td("schema", "fulfilment.sql"), td("incidents", "fulfilment.sql")},
		[]string{"order-fulfilment"}, map[string]string{"OPCTL_WMS_URL": w.srv.URL})
	p := e.mustPlan("fulfilment", "F-1", plans.Options{})
	w.failing = true
	_, err := e.apply(p)
	if err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("apply: %v", err)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit"); n != 0 {
		t.Fatalf("%d audit rows after a refused compensation", n)
	}
	w.failing = false
	e.mustApply(p)
	if w.count("F-1") != 1 {
		t.Fatalf("locks %d", w.count("F-1"))
	}
}

func TestPlanNeedsReason(t *testing.T) {
	e := settlementEnv(t)
	_, _, err := e.svc.PlanID(context.Background(), "PAY-6", "settlement", plans.Options{Reason: "  "})
	var ie *plans.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "--reason") {
		t.Fatalf("no reason: %v", err)
	}
}

// TestConcurrentAppliesOfOnePlan: two applies of the same plan at once
// reverse each row once; the loser is refused by a guard or finds the
// actions recorded by the winner.
func TestConcurrentAppliesOfOnePlan(t *testing.T) {
	e := settlementEnv(t)
	for round := 0; round < 10; round++ {
		e.db.Exec(t, "DELETE FROM opctl_audit; DELETE FROM opctl_audit_attempt; DELETE FROM balance_journal WHERE kind = 'REVERSAL'; UPDATE account_balance SET balance = 970.00 WHERE account_id = 1006")
		p := e.mustPlan("settlement", "PAY-6", plans.Options{})
		type out struct {
			res *Result
			err error
		}
		ch := make(chan out, 2)
		for i := 0; i < 2; i++ {
			go func() {
				res, err := e.apply(p)
				ch <- out{res, err}
			}()
		}
		a, b := <-ch, <-ch
		for _, o := range []out{a, b} {
			var rf *plans.RefusedError
			if o.err != nil && !errors.As(o.err, &rf) {
				t.Fatalf("round %d: %v", round, o.err)
			}
		}
		if n := e.count("SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL'"); n != 2 {
			t.Fatalf("round %d: %d reversals", round, n)
		}
		if b := e.str("SELECT balance FROM account_balance WHERE account_id = 1006"); b != "990.00" {
			t.Fatalf("round %d: balance %s", round, b)
		}
	}
}
