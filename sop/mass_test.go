package sop_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sop"
	"github.com/opctl-dev/opctl/sources"
)

// strandedEnv is a broker blip's aftermath: n settlement operations whose
// debit and ledger are done, whose notify never ran, and past whose
// messages the group committed (STRANDED).
func strandedEnv(t *testing.T, n int) *env {
	e := newEnv(t, td("config", "settlement.yaml"), []string{td("schema", "settlement.sql")}, []string{"settlement-event"}, "")
	var now time.Time
	if err := e.db.SQL.QueryRow("SELECT NOW(3)").Scan(&now); err != nil {
		t.Fatal(err)
	}
	created := now.Add(-10 * time.Minute)
	high := map[int32]int64{}
	for i := range n {
		biz, msg := fmt.Sprintf("M-%03d", i), fmt.Sprintf("m-m%03d", i)
		p, off := e.k.ProduceOp(t, "settlement-event", biz, msg, created, e.parts, false)
		e.db.Exec(t, "INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at) VALUES (?, 'LEDGER_DONE', 3, ?, ?, ?, NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE)", biz, msg, p, off)
		e.db.Exec(t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES (?, ?, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE)", biz, 5000+i)
		e.db.Exec(t, "INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', 10.00, NOW(3) - INTERVAL 10 MINUTE)", biz)
		high[p] = max(high[p], off+1)
	}
	for p, off := range high {
		e.k.Commit(t, "settlement-consumer", "settlement-event", p, off)
	}
	return e
}

// mass-redelivery on 200 stranded operations: reconcile finds them all,
// every one gets a plan, and the plans go out in stages (1, 10, the
// rest) with a verify between. When one operation is broken again after
// the canary's verify, the next verify sees it and the run stops there:
// 11 plans applied, the other 189 untouched. Otherwise it finishes with
// every operation WILL_REDELIVER.
func TestMassRedeliveryStages(t *testing.T) {
	const n = 200
	lib, err := sop.Builtins()
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := lib.Get("mass-redelivery")
	for _, tc := range []struct {
		name   string
		break_ bool
	}{{"finishes", false}, {"stops at the first violated verify", true}} {
		t.Run(tc.name, func(t *testing.T) {
			e := strandedEnv(t, n)
			r := e.runner()
			var evs []sop.Event
			broken := ""
			o := sop.Options{Pipeline: "settlement", Operator: "tester", Yes: true, Plan: plans.Options{Reason: "INC-9 broker blip", Operator: "tester"},
				Emit: func(ev sop.Event) error {
					evs = append(evs, ev)
					if ev.Step == "canary" && ev.Outcome == sop.OutcomeOK {
						var biz string
						if err := e.db.SQL.QueryRow("SELECT biz_id FROM opctl_audit WHERE plan_id = ? LIMIT 1", ev.PlanID).Scan(&biz); err != nil {
							t.Errorf("the canary's audit: %v", err)
						}
						broken = biz
					}
					if tc.break_ && ev.Step == "verify-canary" && ev.Outcome == sop.OutcomeOK {
						// The canary's debit runs again (a consumer replaying by
						// hand): the operation is broken between the stages.
						e.db.Exec(t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES (?, 1, -10.00, 'DEBIT', NOW(3))", broken)
					}
					return nil
				}}
			sum, err := r.Start(context.Background(), rb, o)
			if sum == nil {
				t.Fatalf("no summary: %v", err)
			}
			byStep := map[string]sop.Event{}
			for _, ev := range evs {
				byStep[ev.Step] = ev
			}
			if got := byStep["find"].Verdicts[inspect.Stranded]; got != n {
				t.Fatalf("reconcile found %d stranded operations, want %d: %+v", got, n, byStep["find"])
			}
			if got := len(byStep["plan-all"].PlanIDs); got != n {
				t.Fatalf("%d plans, want %d: %s", got, n, byStep["plan-all"].Detail)
			}
			applied := e.count("SELECT COUNT(DISTINCT plan_id) FROM opctl_audit")
			if !tc.break_ {
				if err != nil || sum.Outcome != "done" || sum.Exit != 0 {
					t.Fatalf("run: %v %+v", err, sum)
				}
				if applied != n {
					t.Fatalf("%d plans applied, want %d", applied, n)
				}
				if v := byStep["verify-all"]; v.Verdicts[inspect.WillRedeliver] != n {
					t.Fatalf("verify-all: %+v", v)
				}
				return
			}
			var stop *sop.StopError
			if !errors.As(err, &stop) || sum.Exit != sources.ExitRefused || sum.StoppedAt != "verify-10" {
				t.Fatalf("run: %v, summary %+v; want a stop at verify-10 with exit 5", err, sum)
			}
			v := byStep["verify-10"]
			if v.Outcome != sop.OutcomeUnexpected || v.Verdict != inspect.DuplicateEffect || !strings.Contains(v.Detail, broken) {
				t.Fatalf("verify-10 %+v: want it to name %s and DUPLICATE_EFFECT", v, broken)
			}
			if _, ran := byStep["the-rest"]; ran {
				t.Fatalf("the last stage ran after a failed verify")
			}
			if applied != 11 {
				t.Fatalf("%d plans applied, want 11 (the canary and the stage of 10)", applied)
			}
			if sum.Resume == "" || !strings.Contains(sum.Resume, sum.RunID) {
				t.Fatalf("summary names no resume: %+v", sum)
			}
		})
	}
}

// The same through the command: opctl sop run mass-redelivery --yes on 12
// stranded operations applies all of them in the three stages.
func TestMassRedeliveryCommand(t *testing.T) {
	e := strandedEnv(t, 12)
	code, out, errOut := e.opctl("sop", "run", "mass-redelivery", "--pipeline", "settlement", "--reason", "INC-9", "--yes", "-o", "json")
	evs, sum := events(t, out)
	if code != 0 || sum.Outcome != "done" || len(evs) != 9 {
		t.Fatalf("exit %d %+v\n%s\n%s", code, sum, out, errOut)
	}
	applied := 0
	for _, ev := range evs {
		if ev.Type == sop.StepApply {
			applied += max(len(ev.PlanIDs), 1)
		}
	}
	if applied != 12 || evs[8].Verdicts[inspect.WillRedeliver] != 12 {
		t.Fatalf("applied %d; last %+v", applied, evs[8])
	}
	if n := e.count("SELECT COUNT(DISTINCT plan_id) FROM opctl_audit WHERE JSON_VALUE(after_image, '$.run_id') = ?", sum.RunID); n != 12 {
		t.Fatalf("%d plans of run %s in the audit, want 12", n, sum.RunID)
	}
}
