package repair

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// The tampered corpus (docs/repair.md "Integrity"): real plans of the seed
// incidents, each edited the way an attacker or a tired operator would and
// sealed again so that its id matches its body. Every one must be refused
// before anything changes — no row, no audit row, no record sent — and
// leave a 'tampered' attempt.

// tamper is one edit of a plan; it reports false when the plan has nothing
// it could edit (the case is then not counted).
type tamper struct {
	name string
	// want is the refusal code (tampered unless said otherwise); "observed"
	// is tampered, or stale when the edit leaves the actions as they were
	// (what the plan observed is then compared with the database).
	want string
	edit func(p *plans.Plan) bool
}

// each applies f to every action of type t; false when there is none.
func each(p *plans.Plan, t plans.ActionType, f func(a *plans.Action)) bool {
	ok := false
	for i := range p.Actions {
		if p.Actions[i].Type == t {
			f(&p.Actions[i])
			ok = true
		}
	}
	return ok
}

func tamperCorpus() []tamper {
	steal := "UPDATE account_balance SET balance = balance + 1000000 WHERE account_id = 1001"
	return []tamper{
		{"reverse statements replaced", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) { a.Reverse.Statements = []string{steal} })
		}},
		{"reverse statement appended", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) { a.Reverse.Statements = append(a.Reverse.Statements, steal) })
		}},
		{"reverse statements emptied", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) { a.Reverse.Statements = []string{} })
		}},
		{"reverse statements nil", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) { a.Reverse.Statements = nil })
		}},
		{"DROP TABLE", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) { a.Reverse.Statements = []string{"DROP TABLE balance_journal"} })
		}},
		{"reverse of another row", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) { a.Reverse.Identity = "1" })
		}},
		{"reverse row image changed", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) {
				v := "-30000.00"
				a.Reverse.Row = append(a.Reverse.Row, plans.Field{Name: "delta", Value: &v})
			})
		}},
		{"reverse spec removed", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) { a.Reverse = nil })
		}},
		{"guards emptied", "", func(p *plans.Plan) bool {
			for i := range p.Actions {
				p.Actions[i].Guards = []plans.Guard{}
			}
			return len(p.Actions) > 0
		}},
		{"guards nil", "", func(p *plans.Plan) bool {
			for i := range p.Actions {
				p.Actions[i].Guards = nil
			}
			return len(p.Actions) > 0
		}},
		{"last guard dropped", "", func(p *plans.Plan) bool {
			a := &p.Actions[0]
			if len(a.Guards) == 0 {
				return false
			}
			a.Guards = a.Guards[:len(a.Guards)-1]
			return true
		}},
		{"guard value changed", "", func(p *plans.Plan) bool {
			a := &p.Actions[0]
			if len(a.Guards) == 0 {
				return false
			}
			a.Guards[0].Value += "x"
			return true
		}},
		{"guard check renamed", "", func(p *plans.Plan) bool {
			a := &p.Actions[0]
			if len(a.Guards) == 0 {
				return false
			}
			a.Guards[0].Check = "state.nothing"
			return true
		}},
		{"guard added", "", func(p *plans.Plan) bool {
			p.Actions[0].Guards = append(p.Actions[0].Guards, plans.Guard{Check: plans.CheckStateFound, Op: "==", Value: "true"})
			return true
		}},
		{"action removed", "", func(p *plans.Plan) bool {
			if len(p.Actions) < 2 {
				return false
			}
			p.Actions = p.Actions[:1]
			return true
		}},
		{"first action removed", "", func(p *plans.Plan) bool {
			if len(p.Actions) < 2 {
				return false
			}
			p.Actions = p.Actions[1:]
			p.Actions[0].Index = 1
			return true
		}},
		{"action duplicated", "", func(p *plans.Plan) bool {
			a := p.Actions[0]
			a.Index = len(p.Actions) + 1
			p.Actions = append(p.Actions, a)
			return true
		}},
		{"actions reordered", "", func(p *plans.Plan) bool {
			if len(p.Actions) < 2 {
				return false
			}
			p.Actions[0], p.Actions[1] = p.Actions[1], p.Actions[0]
			p.Actions[0].Index, p.Actions[1].Index = 1, 2
			return true
		}},
		{"actions emptied", "", func(p *plans.Plan) bool {
			p.Actions = []plans.Action{}
			return true
		}},
		{"manual turned into a reverse", "", func(p *plans.Plan) bool {
			return each(p, plans.Manual, func(a *plans.Action) {
				a.Type = plans.Reverse
				a.Manual = nil
				a.Reverse = &plans.ReverseSpec{Identity: "1", Statements: []string{steal}}
			})
		}},
		{"manual spec removed", "", func(p *plans.Plan) bool {
			return each(p, plans.Manual, func(a *plans.Action) { a.Manual = nil })
		}},
		{"reverse turned into a manual", "", func(p *plans.Plan) bool {
			return each(p, plans.Reverse, func(a *plans.Action) {
				a.Type = plans.Manual
				a.Reverse = nil
				a.Manual = &plans.ManualSpec{Instructions: "nothing", Attest: "done"}
			})
		}},
		{"attested map changed", "", func(p *plans.Plan) bool {
			return each(p, plans.Manual, func(a *plans.Action) { a.Attested = map[string]string{"*": inspect.AttestApplied} })
		}},
		{"summary rewritten", "", func(p *plans.Plan) bool {
			p.Actions[0].Summary = "harmless no-op"
			return true
		}},
		{"step renamed", "", func(p *plans.Plan) bool {
			p.Actions[0].Step = "ledger"
			return true
		}},
		{"republish to another topic", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) { a.Publish.Topic = "payments-out" })
		}},
		{"republish to another partition", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) { a.Publish.Partition = (a.Publish.Partition + 1) % 4 })
		}},
		{"republish with another key", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) { a.Publish.Key = []byte("PAY-999") })
		}},
		{"republish with another value", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) { a.Publish.Value = []byte(`{"amount":1000000}`) })
		}},
		{"republish with a forced effect", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) { a.Publish.Headers[plans.HeaderForceEffect] = "debit" })
		}},
		{"republish of another msg id", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) {
				a.Publish.MsgID = "m-other"
				a.Publish.Headers[plans.HeaderMsgID] = "m-other"
			})
		}},
		{"republish from an earlier step", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) {
				a.Publish.FromStep = "debit"
				a.Publish.ForceEffect = ""
				a.Publish.Headers[plans.HeaderFromStep] = "debit"
			})
		}},
		{"republish spec removed", "", func(p *plans.Plan) bool {
			return each(p, plans.Republish, func(a *plans.Action) { a.Publish = nil })
		}},
		{"flip of another key", "", func(p *plans.Plan) bool {
			return each(p, plans.FlipSkipped, func(a *plans.Action) { a.Flip.Key = "m-0001" })
		}},
		{"flip to DONE", "", func(p *plans.Plan) bool {
			return each(p, plans.FlipSkipped, func(a *plans.Action) { a.Flip.To = "DONE" })
		}},
		{"flip of another table", "", func(p *plans.Plan) bool {
			return each(p, plans.FlipSkipped, func(a *plans.Action) { a.Flip.Table = "points_grant" })
		}},
		{"a republish added", "", func(p *plans.Plan) bool {
			p.Actions = append(p.Actions, plans.Action{Index: len(p.Actions) + 1, Type: plans.Republish, Summary: "send",
				Guards: []plans.Guard{}, Publish: &plans.PublishSpec{Topic: "settlement-event", Key: []byte(p.BizID), Value: []byte("{}"), Headers: map[string]string{}}})
			return true
		}},
		{"a state write added", "", func(p *plans.Plan) bool {
			p.Actions = append(p.Actions, plans.Action{Index: len(p.Actions) + 1, Type: plans.AdvanceState, Summary: "done",
				Guards: []plans.Guard{}, State: &plans.StateChange{Table: "biz_operation", ToStatus: "DONE"}})
			return true
		}},
		{"observed evidence dropped", "observed", func(p *plans.Plan) bool {
			for i := range p.Observed.Steps {
				if len(p.Observed.Steps[i].Evidence) > 0 {
					p.Observed.Steps[i].Evidence = p.Observed.Steps[i].Evidence[:len(p.Observed.Steps[i].Evidence)-1]
					p.Observed.Steps[i].Count--
					return true
				}
			}
			return false
		}},
		{"observed verdict changed", "observed", func(p *plans.Plan) bool {
			p.Observed.Verdict = inspect.MissingEffect
			return true
		}},
		{"verdict changed", "", func(p *plans.Plan) bool {
			p.Verdict = inspect.Complete
			return true
		}},
		{"forced flag set", "", func(p *plans.Plan) bool {
			p.Forced = true
			return true
		}},
		{"request turned into a forced action", "", func(p *plans.Plan) bool {
			p.Request = plans.Request{Action: plans.Reverse, FromStep: "debit", Force: true}
			return true
		}},
		{"notes rewritten", "", func(p *plans.Plan) bool {
			p.Notes = append(p.Notes, "reviewed by the risk team")
			return true
		}},
		{"index out of order", "", func(p *plans.Plan) bool {
			p.Actions[0].Index = 7
			return true
		}},
		{"plan_version changed", "", func(p *plans.Plan) bool {
			p.PlanVersion = 2
			return true
		}},
		{"reason emptied", "", func(p *plans.Plan) bool {
			p.Reason = " "
			return true
		}},
		{"run id without its runbook", "", func(p *plans.Plan) bool {
			p.Runbook, p.RunID = "", "r-20260101-000000-abcdef"
			return true
		}},
		{"runbook name over the limit", "", func(p *plans.Plan) bool {
			p.Runbook, p.RunID = strings.Repeat("x", plans.MaxRunLabel+1), "r-1"
			return true
		}},
		{"incident with a terminal escape", "", func(p *plans.Plan) bool {
			p.Incident = "INC-1\x1b[2J"
			return true
		}},
		{"incident over its limit", "", func(p *plans.Plan) bool {
			p.Incident = strings.Repeat("I", plans.MaxIncident+1)
			return true
		}},
		{"created_at removed", "", func(p *plans.Plan) bool {
			p.CreatedAt = time.Time{}
			return true
		}},
		{"config fingerprint changed", plans.CodeConfigChanged, func(p *plans.Plan) bool {
			p.ConfigFingerprint = strings.Repeat("0", 64)
			return true
		}},
		{"pipeline changed", plans.CodeConfigChanged, func(p *plans.Plan) bool {
			p.Pipeline = "other"
			return true
		}},
	}
}

// clonePlan deep-copies a plan through its file format.
func clonePlan(t *testing.T, p *plans.Plan) *plans.Plan {
	t.Helper()
	var b bytes.Buffer
	if err := plans.Encode(&b, p); err != nil {
		t.Fatal(err)
	}
	q, err := plans.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// snapshot is every table's checksum but the attempt table's, and the end
// offset of every partition of the topics.
func (e *tenv) snapshot(topics ...string) string {
	e.t.Helper()
	rows, err := e.db.SQL.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name <> 'opctl_audit_attempt'")
	if err != nil {
		e.t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	sort.Strings(tables)
	var b strings.Builder
	for _, tb := range tables {
		var name string
		var sum *int64
		if err := e.db.SQL.QueryRow("CHECKSUM TABLE `"+tb+"`").Scan(&name, &sum); err != nil {
			e.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%v ", tb, *sum)
	}
	for _, tp := range topics {
		g, err := e.cl.Kafka.Group(context.Background(), tp, "snapshot")
		if err != nil {
			e.t.Fatal(err)
		}
		for p := int32(0); p < int32(len(g.Partitions)); p++ {
			fmt.Fprintf(&b, "%s/%d@%d ", tp, p, g.Partitions[p].LogEnd)
		}
	}
	return b.String()
}

func TestTamperedCorpusIsRefused(t *testing.T) {
	settle := settlementEnv(t)
	settle.anchor("PAY-3", true)
	skip := newTenv(t, td("config", "skip.yaml"),
		[]string{td("schema", "skip.sql"), td("incidents", "skip.sql")},
		[]string{"order-event"}, nil)
	ts, _ := time.Parse("2006-01-02 15:04:05", skip.str("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'"))
	part, off := skip.produce("order-event", "8821", "m-7391", ts)
	skip.k.Commit(t, "order-consumer", "order-event", part, off+1)

	cases := []struct {
		name  string
		e     *tenv
		topic string
		plan  *plans.Plan
	}{
		{"PAY-1 reverse+manual", settle, "settlement-event", settle.mustPlan("settlement", "PAY-1", plans.Options{Attest: "risk team lifted the freeze"})},
		{"PAY-3 republish", settle, "settlement-event", settle.mustPlan("settlement", "PAY-3", plans.Options{})},
		{"8821 flip+republish", skip, "order-event", skip.mustPlan("orders", "8821", plans.Options{})},
	}
	refused := 0
	for _, c := range cases {
		// The untouched plan is what opctl makes: it rederives.
		if err := plans.Rederive(c.e.cfg, c.plan); err != nil {
			t.Fatalf("%s: the plan as made does not rederive: %v", c.name, err)
		}
		for _, tc := range tamperCorpus() {
			q := clonePlan(t, c.plan)
			if !tc.edit(q) {
				continue
			}
			if err := q.Seal(); err != nil {
				t.Fatal(err)
			}
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				before := c.e.snapshot(c.topic)
				attempts := func(outcome, code string) int {
					return c.e.count("SELECT COUNT(*) FROM opctl_audit_attempt WHERE plan_id = ? AND outcome = ? AND JSON_EXTRACT(detail, '$.code') = ?", q.ID, outcome, code)
				}
				var want string
				for _, dry := range []bool{true, false} {
					run := c.e.apply
					if dry {
						run = c.e.dryRun
					}
					res, err := run(q)
					want = tc.want
					switch want {
					case "":
						want = plans.CodeTampered
					case "observed":
						want = plans.CodeTampered
						if rf := (*plans.RefusedError)(nil); errors.As(err, &rf) && rf.Code == plans.CodeStale {
							want = plans.CodeStale
						}
					}
					wantRefused(t, err, want)
					if res.Applied != 0 || res.Outcome != OutcomeRefused {
						t.Fatalf("dry run %v: result %+v", dry, res)
					}
				}
				if after := c.e.snapshot(c.topic); after != before {
					t.Fatalf("a refused plan changed something:\nbefore %s\nafter  %s", before, after)
				}
				// The real apply records its refusal, the dry run a dry_run
				// attempt with the same code.
				outcome := AttemptTampered
				if want == plans.CodeStale || want == plans.CodeConfigChanged {
					outcome = AttemptStale
				}
				if n, d := attempts(outcome, want), attempts(AttemptDryRun, want); n != 1 || d != 1 {
					t.Fatalf("%d %s and %d dry_run attempts with code %s, want 1 and 1", n, outcome, d, want)
				}
			})
			refused++
		}
	}
	t.Logf("tampered corpus: %d plans refused", refused)
	if refused < 40 {
		t.Fatalf("the corpus has %d tampered plans; at least 40 are asked for", refused)
	}
	// The originals still apply after all of that.
	// The originals still apply after all of that, and the snapshot sees
	// what they change.
	for _, c := range cases {
		before := c.e.snapshot(c.topic)
		if res := c.e.mustApply(c.plan); res.Outcome != OutcomeApplied {
			t.Fatalf("%s after the corpus: %+v", c.name, res)
		}
		if c.e.snapshot(c.topic) == before {
			t.Fatalf("%s: the snapshot did not see the repair", c.name)
		}
	}
}
