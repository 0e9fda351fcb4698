package sop_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sop"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/connect"
)

func skipEnv(t *testing.T) *env {
	e := newEnv(t, td("config", "skip.yaml"),
		[]string{td("schema", "skip.sql"), td("incidents", "skip.sql")},
		[]string{"order-event"}, "")
	var created string
	if err := e.db.SQL.QueryRow("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'").Scan(&created); err != nil {
		t.Fatal(err)
	}
	ts, _ := time.Parse("2006-01-02 15:04:05", created)
	part, off := e.k.ProduceOp(t, "order-event", "8821", "m-7391", ts, e.parts, false)
	e.k.Commit(t, "order-consumer", "order-event", part, off+1)
	return e
}

// brokenPublisher is a Kafka that refuses every send.
type brokenPublisher struct{}

func (brokenPublisher) Publish(context.Context, string, int32, []byte, []byte, map[string]string) (int32, int64, error) {
	return 0, 0, &sources.SendError{Source: "Kafka", Err: errors.New("kafka: broker not available")}
}

func (brokenPublisher) LogEnd(context.Context, string, int32) (int64, error) { return 0, nil }

func (brokenPublisher) FindPublished(context.Context, string, int32, int64, map[string]string) (int64, bool, error) {
	return -1, false, nil
}

// halfRepaired leaves 8821's flip+republish plan stopped after the flip
// (REPAIR_INCOMPLETE), as a Kafka outage in the middle of an apply does.
func halfRepaired(t *testing.T, e *env) {
	cl, err := connect.Open(e.cfg, connect.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	svc := cmd.NewRepairService(cl, cl.Triage())
	p, _, err := svc.PlanID(context.Background(), "8821", "orders", plans.Options{Reason: "INC-1", Operator: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := svc.Store()
	if err != nil {
		t.Fatal(err)
	}
	a := &repair.Applier{Config: e.cfg, Store: st, Collector: cl.Collector, Publisher: brokenPublisher{}, Group: cl.Kafka, Partitions: cl.Kafka, Operator: "tester"}
	if _, err := a.Apply(context.Background(), p); err == nil || !strings.Contains(err.Error(), "broker not available") {
		t.Fatalf("the half apply: %v", err)
	}
}

// Every built-in runbook for one operation, run scripted (--yes) on the
// seed fixtures: it starts at the verdict it is for and ends in the
// verdicts its verify step expects, with where agreeing; its plans and
// audit rows carry the runbook and the run id.
func TestBuiltinsRunScripted(t *testing.T) {
	cases := []struct {
		runbook  string // "" : sop run without NAME picks it from the verdict
		want     string // the runbook that must run
		pipeline string
		biz      string
		setup    func(t *testing.T) *env
		args     []string
		// after is the verdict where gives at the end.
		after string
	}{
		{"stranded", "stranded", "settlement", "PAY-3", func(t *testing.T) *env { e := settlementEnv(t); e.anchor("PAY-3", true); return e }, nil, "WILL_REDELIVER"},
		{"", "state-behind", "settlement", "PAY-4", func(t *testing.T) *env { e := settlementEnv(t); e.anchor("PAY-4", true); return e }, nil, "WILL_REDELIVER"},
		{"missing-effect", "missing-effect", "settlement", "PAY-5", func(t *testing.T) *env { e := settlementEnv(t); e.anchor("PAY-5", true); return e }, nil, "WILL_REDELIVER"},
		{"duplicate-effect", "duplicate-effect", "settlement", "PAY-1", settlementEnv,
			[]string{"--attest", "risk team lifted the freeze caused by PAY-1:notify:2"}, "COMPLETE"},
		{"unknown-outcome", "unknown-outcome", "settlement", "PAY-7", func(t *testing.T) *env { e := settlementEnv(t); e.anchor("PAY-7", true); return e },
			[]string{"--action", "manual", "--outcome", "applied", "--attest", "risk team confirms PAY-7:notify:1 took effect"}, "COMPLETE"},
		{"wrongly-skipped", "wrongly-skipped", "orders", "8821", skipEnv, nil, "WILL_REDELIVER"},
		{"", "repair-incomplete", "orders", "8821", func(t *testing.T) *env { e := skipEnv(t); halfRepaired(t, e); return e }, nil, "WILL_REDELIVER"},
		{"read-error", "read-error", "settlement", "PAY-2", func(t *testing.T) *env {
			e := settlementEnv(t)
			e.db.Exec(t, "DROP TABLE ledger_entry")
			return e
		}, nil, "READ_ERROR"},
	}
	for _, c := range cases {
		t.Run(c.want, func(t *testing.T) {
			e := c.setup(t)
			args := []string{"sop", "run"}
			if c.runbook != "" {
				args = append(args, c.runbook)
			}
			args = append(args, "--biz-id", c.biz, "--pipeline", c.pipeline, "--reason", "INC-42", "--yes", "-o", "json")
			args = append(args, c.args...)
			code, out, errOut := e.opctl(args...)
			evs, sum := events(t, out)
			if code != 0 || sum.Outcome != "done" || sum.Runbook != c.want {
				t.Fatalf("exit %d, summary %+v\nstdout:\n%s\nstderr:\n%s", code, sum, out, errOut)
			}
			if len(evs) != sum.Steps || sum.Done != sum.Steps {
				t.Fatalf("%d step objects, summary %+v", len(evs), sum)
			}
			last := evs[len(evs)-1]
			if c.want != "read-error" && (last.Type != sop.StepVerify || string(last.Verdict) != c.after) {
				t.Fatalf("last step %+v, want a verify that saw %s", last, c.after)
			}
			if got := e.where(c.pipeline, c.biz); got != c.after {
				t.Fatalf("where says %s after the run, want %s", got, c.after)
			}
			if c.want == "read-error" {
				return
			}
			// The plan and every audit row of it name the run (the plan of
			// repair-incomplete is the one that stopped: made outside a run).
			var planID string
			for _, ev := range evs {
				if ev.Type == sop.StepApply {
					planID = ev.PlanID
				}
			}
			if planID == "" {
				t.Fatalf("no plan applied: %+v", evs)
			}
			if c.want == "repair-incomplete" {
				return
			}
			rows, err := e.db.SQL.Query("SELECT after_image FROM opctl_audit WHERE plan_id = ?", planID)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			n := 0
			for rows.Next() {
				var img []byte
				if err := rows.Scan(&img); err != nil {
					t.Fatal(err)
				}
				var a struct {
					Runbook string `json:"runbook"`
					RunID   string `json:"run_id"`
					Plan    struct {
						Runbook string `json:"runbook"`
						RunID   string `json:"run_id"`
					} `json:"plan"`
				}
				if err := json.Unmarshal(img, &a); err != nil {
					t.Fatal(err)
				}
				if a.Runbook != c.want || a.RunID != sum.RunID || a.Plan.Runbook != c.want || a.Plan.RunID != sum.RunID {
					t.Fatalf("audit row %s: want runbook %s run %s", img, c.want, sum.RunID)
				}
				n++
			}
			if n == 0 {
				t.Fatalf("no audit row for plan %s", planID)
			}
			// opctl audit shows which run did it.
			if _, out, _ := e.opctl("audit", "--biz-id", c.biz); !strings.Contains(out, "runbook="+c.want+" run_id="+sum.RunID) {
				t.Fatalf("opctl audit does not name the run:\n%s", out)
			}
		})
	}
}
