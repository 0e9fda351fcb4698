package repair

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// The seed incidents, each planned, applied and triaged again: the verdict
// afterwards is COMPLETE or SKIPPED_OK (after the consumer handled a
// republished record, played here by the test), and the scenario's
// invariants hold.

func TestSettlementDuplicateReverse(t *testing.T) {
	e := settlementEnv(t)
	wantVerdict(t, e.where("settlement", "PAY-1"), inspect.DuplicateEffect)

	// The notify RPC ran twice too and has no compensate: the plan needs
	// the operator's attestation.
	_, _, err := e.plan("settlement", "PAY-1", plans.Options{})
	var ie *plans.InputError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "--attest") {
		t.Fatalf("plan without --attest: %v, want an input error naming --attest", err)
	}
	p := e.mustPlan("settlement", "PAY-1", plans.Options{Attest: "risk team lifted the freeze caused by PAY-1:notify:2"})
	if len(p.Actions) != 2 || p.Actions[0].Type != plans.Reverse || p.Actions[1].Type != plans.Manual {
		t.Fatalf("actions: %+v", p.Actions)
	}
	if id := p.Actions[0].Reverse.Identity; id != "3" {
		t.Fatalf("reverse row %s, want the newest duplicate 3", id)
	}
	if got := p.Actions[1].Attested["PAY-1:notify:2"]; got != inspect.AttestCompensated {
		t.Fatalf("manual attests %v", p.Actions[1].Attested)
	}
	res := e.mustApply(p)
	if res.Outcome != "applied" || res.Applied != 2 {
		t.Fatalf("result %+v", res)
	}
	wantVerdict(t, e.where("settlement", "PAY-1"), inspect.Complete)
	if b := e.str("SELECT balance FROM account_balance WHERE account_id = 1001"); b != "970.00" {
		t.Fatalf("balance %s, want 970.00 (one debit of 30 reversed)", b)
	}
	if n := e.count("SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL' AND reverses_id = 3"); n != 1 {
		t.Fatalf("%d reversals of row 3", n)
	}
	// Applying again changes nothing.
	res = e.mustApply(p)
	if res.Outcome != "already_applied" {
		t.Fatalf("second apply: %+v", res)
	}
	if n := e.count("SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL'"); n != 1 {
		t.Fatalf("%d reversals after a second apply", n)
	}
	// A new plan: nothing to repair.
	_, _, err = e.plan("settlement", "PAY-1", plans.Options{})
	var nr *plans.NothingToRepairError
	if !errors.As(err, &nr) || nr.Verdict != inspect.Complete {
		t.Fatalf("plan after the repair: %v", err)
	}
}

func TestSettlementTripleDebitTwoReversals(t *testing.T) {
	e := settlementEnv(t)
	p := e.mustPlan("settlement", "PAY-6", plans.Options{})
	if len(p.Actions) != 2 || p.Actions[0].Reverse.Identity != "9" || p.Actions[1].Reverse.Identity != "8" {
		t.Fatalf("actions: %+v", p.Actions)
	}
	if g := p.Actions[1].Guards; g[len(g)-2].Value != "2" {
		t.Fatalf("the second reversal's guards are written for the state the first leaves: %v", g)
	}
	e.mustApply(p)
	wantVerdict(t, e.where("settlement", "PAY-6"), inspect.Complete)
	if b := e.str("SELECT balance FROM account_balance WHERE account_id = 1006"); b != "990.00" {
		t.Fatalf("balance %s, want 990.00", b)
	}
}

func TestFulfilmentCompensate(t *testing.T) {
	w := newWMS(t, map[string]int{"F-1": 2, "F-2": 1})
	e := newTenv(t, td("repair", "fulfilment.yaml"),
		[]string{td("schema", "fulfilment.sql"), td("incidents", "fulfilment.sql")},
		[]string{"order-fulfilment"}, map[string]string{"OPCTL_WMS_URL": w.srv.URL})
	wantVerdict(t, e.where("fulfilment", "F-1"), inspect.DuplicateEffect)
	p := e.mustPlan("fulfilment", "F-1", plans.Options{})
	if len(p.Actions) != 1 || p.Actions[0].Type != plans.CompensateRemote || *p.Actions[0].Compensate.ProbeCount != 2 {
		t.Fatalf("actions: %+v", p.Actions)
	}
	// A dry run posts nothing.
	res, err := e.dryRun(p)
	if err != nil || res.Outcome != "would_apply" || w.posts != 0 {
		t.Fatalf("dry run: %v %+v posts %d", err, res, w.posts)
	}
	res = e.mustApply(p)
	if w.posts != 1 || w.count("F-1") != 1 || !strings.HasPrefix(w.keys[0], p.ID+":1") {
		t.Fatalf("posts %d keys %v locks %d", w.posts, w.keys, w.count("F-1"))
	}
	wantVerdict(t, e.where("fulfilment", "F-1"), inspect.Complete)
	if res, _ := e.apply(p); res.Outcome != "already_applied" || w.posts != 1 {
		t.Fatalf("second apply: %+v posts %d", res, w.posts)
	}
	_, _, err = e.plan("fulfilment", "F-2", plans.Options{})
	var nr *plans.NothingToRepairError
	if !errors.As(err, &nr) {
		t.Fatalf("F-2: %v", err)
	}
}

func TestSkipFlipAndRepublish(t *testing.T) {
	e := newTenv(t, td("config", "skip.yaml"),
		[]string{td("schema", "skip.sql"), td("incidents", "skip.sql")},
		[]string{"order-event"}, nil)
	ts, _ := time.Parse("2006-01-02 15:04:05", e.str("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'"))
	part, off := e.produce("order-event", "8821", "m-7391", ts)
	e.k.Commit(e.t, "order-consumer", "order-event", part, off+1)
	wantVerdict(t, e.where("orders", "8821"), inspect.WronglySkipped)
	wantVerdict(t, e.where("orders", "8822"), inspect.SkippedOK)

	p := e.mustPlan("orders", "8821", plans.Options{})
	if len(p.Actions) != 2 || p.Actions[0].Type != plans.FlipSkipped || p.Actions[1].Type != plans.Republish {
		t.Fatalf("actions: %+v", p.Actions)
	}
	ps := p.Actions[1].Publish
	if !ps.Copy || ps.Headers[plans.HeaderForceEffect] != "points" || ps.Headers[plans.HeaderMsgID] != "m-7391" || ps.Partition != part {
		t.Fatalf("publish spec: %+v", ps)
	}
	res := e.mustApply(p)
	if a := e.str("SELECT action FROM consumer_idempotency WHERE msg_id = 'm-7391'"); a != "PENDING" {
		t.Fatalf("record is %s", a)
	}
	// The republished record is the operation's newest message: Kafka will
	// deliver it (not STRANDED, not SKIPPED again).
	wantVerdict(t, e.where("orders", "8821"), inspect.WillRedeliver)
	m := e.published(res)
	if m.Headers[plans.HeaderPlan] != p.ID || m.Headers[plans.HeaderForceEffect] != "points" || m.Headers["msg_id"] != "m-7391" || string(m.Key) != "8821" {
		t.Fatalf("published headers %v key %q", m.Headers, m.Key)
	}
	// The consumer grants the points and records DONE.
	e.db.Exec(t, "INSERT INTO points_grant (order_id, msg_id, points, created_at) VALUES ('8821', 'm-7391', 100, NOW(3))")
	e.db.Exec(t, "UPDATE consumer_idempotency SET action = 'DONE' WHERE msg_id = 'm-7391'")
	e.k.Commit(t, "order-consumer", "order-event", m.Partition, m.Offset+1)
	wantVerdict(t, e.where("orders", "8821"), inspect.Complete)
	if n := e.count("SELECT COUNT(*) FROM points_grant WHERE order_id = '8821'"); n != 1 {
		t.Fatalf("%d grants", n)
	}
}

func TestStrandedRepublish(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-3", true)
	wantVerdict(t, e.where("settlement", "PAY-3"), inspect.Stranded)
	p := e.mustPlan("settlement", "PAY-3", plans.Options{})
	if len(p.Actions) != 1 || p.Actions[0].Type != plans.Republish || p.Actions[0].Publish.FromStep != "notify" || !p.Actions[0].Publish.Copy {
		t.Fatalf("actions: %+v", p.Actions)
	}
	res := e.mustApply(p)
	rep := e.where("settlement", "PAY-3")
	wantVerdict(t, rep, inspect.WillRedeliver)
	if rep.Kafka.Located != "republished" {
		t.Fatalf("kafka %+v", rep.Kafka)
	}
	e.consumeSettlement(e.published(res))
	wantVerdict(t, e.where("settlement", "PAY-3"), inspect.Complete)
}

func TestStateBehindAdvance(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-4", true)
	wantVerdict(t, e.where("settlement", "PAY-4"), inspect.StateBehind)
	p := e.mustPlan("settlement", "PAY-4", plans.Options{})
	if len(p.Actions) != 2 || p.Actions[0].Type != plans.AdvanceState || p.Actions[0].State.ToStatus != "LEDGER_DONE" || p.Actions[1].Publish.FromStep != "notify" {
		t.Fatalf("actions: %+v", p.Actions)
	}
	res := e.mustApply(p)
	if s := e.str("SELECT CONCAT(status, '/', version) FROM biz_operation WHERE biz_id = 'PAY-4'"); s != "LEDGER_DONE/3" {
		t.Fatalf("state %s", s)
	}
	e.consumeSettlement(e.published(res))
	wantVerdict(t, e.where("settlement", "PAY-4"), inspect.Complete)
	if n := e.count("SELECT COUNT(*) FROM ledger_entry WHERE biz_order_id = 'PAY-4'"); n != 1 {
		t.Fatalf("%d ledger rows", n)
	}
}

func TestMissingEffectRewind(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-5", true)
	wantVerdict(t, e.where("settlement", "PAY-5"), inspect.MissingEffect)
	p := e.mustPlan("settlement", "PAY-5", plans.Options{})
	if len(p.Actions) != 2 || p.Actions[0].Type != plans.RewindState || p.Actions[0].State.ToStatus != "DEBIT_DONE" || p.Actions[1].Publish.FromStep != "ledger" {
		t.Fatalf("actions: %+v", p.Actions)
	}
	res := e.mustApply(p)
	e.consumeSettlement(e.published(res))
	wantVerdict(t, e.where("settlement", "PAY-5"), inspect.Complete)
}

func TestUnknownOutcomeManualAttest(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-7", true)
	wantVerdict(t, e.where("settlement", "PAY-7"), inspect.UnknownOutcome)
	_, _, err := e.plan("settlement", "PAY-7", plans.Options{})
	var rf *plans.RefusedError
	if !errors.As(err, &rf) || rf.Code != plans.CodeNoSafePlan || !strings.Contains(err.Error(), "--action manual") {
		t.Fatalf("plan: %v", err)
	}
	_, _, err = e.plan("settlement", "PAY-7", plans.Options{Action: plans.Manual, Attest: "risk team: applied"})
	var ie *plans.InputError
	if !errors.As(err, &ie) {
		t.Fatalf("manual without --outcome: %v", err)
	}
	p := e.mustPlan("settlement", "PAY-7", plans.Options{Action: plans.Manual, Attest: "risk team confirms PAY-7:notify:1 took effect", Outcome: "applied"})
	if len(p.Actions) != 2 || p.Actions[0].Type != plans.Manual || p.Actions[1].Type != plans.AdvanceState || p.Actions[1].State.ToStatus != "DONE" {
		t.Fatalf("actions: %+v", p.Actions)
	}
	e.mustApply(p)
	// The attestation sticks: UNKNOWN_OUTCOME does not come back.
	rep := e.where("settlement", "PAY-7")
	wantVerdict(t, rep, inspect.Complete)
	if in := rep.Steps[2].Intents[0]; in.Outcome != "applied" || !strings.Contains(in.Probe, "attested") {
		t.Fatalf("intent %+v", in)
	}
}

func TestInFlightRefused(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-8", true)
	wantVerdict(t, e.where("settlement", "PAY-8"), inspect.InFlight)
	for _, o := range []plans.Options{{}, {Action: plans.Republish, Force: true}, {Action: plans.Reverse, Force: true, FromStep: "debit"}} {
		_, _, err := e.plan("settlement", "PAY-8", o)
		var rf *plans.RefusedError
		if !errors.As(err, &rf) || rf.Code != plans.CodeInFlight {
			t.Fatalf("%+v: %v, want in_flight", o, err)
		}
	}
	// c-9 is not a member of the group: its lease may be released.
	p := e.mustPlan("settlement", "PAY-8", plans.Options{Action: plans.ReleaseLease})
	e.mustApply(p)
	if s := e.str("SELECT CONCAT(IFNULL(owner, 'NULL'), '/', version) FROM biz_operation WHERE biz_id = 'PAY-8'"); s != "NULL/3" {
		t.Fatalf("state after release: %s", s)
	}
	wantVerdict(t, e.where("settlement", "PAY-8"), inspect.Stranded)
}

func TestReleaseLeaseRefusedForLiveMember(t *testing.T) {
	e := settlementEnv(t)
	e.anchor("PAY-8", false)
	stop := e.k.JoinGroup(t, "settlement-consumer", []string{"settlement-event"}, "c-9")
	defer stop()
	_, _, err := e.plan("settlement", "PAY-8", plans.Options{Action: plans.ReleaseLease, Force: true})
	var rf *plans.RefusedError
	if !errors.As(err, &rf) || rf.Code != plans.CodeInFlight || !strings.Contains(err.Error(), "live member") {
		t.Fatalf("release with a live owner: %v", err)
	}
}
