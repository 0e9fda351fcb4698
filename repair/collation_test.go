package repair

import (
	"testing"
	"time"

	"github.com/opctl-dev/opctl/repair/plans"
)

// Under a case- and accent-insensitive collation (utf8mb4_general_ci, PAD
// SPACE) an id typed differently finds the operation; the plan is made for
// the id as stored, and the republish keeps the stored key and its
// partition, never the typed id's (docs/repair.md "Keys and partitions").
func TestTypedIDUnderInsensitiveCollation(t *testing.T) {
	e := settlementEnv(t)
	for _, tb := range []string{"biz_operation", "balance_journal", "ledger_entry", "step_intent", "opctl_audit"} {
		e.db.Exec(t, "ALTER TABLE "+tb+" CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
	}
	part, _ := e.anchor("PAY-3", true)
	for _, typed := range []string{"pay-3", "pÁy-3", "PAY-3 "} {
		t.Run(typed, func(t *testing.T) {
			if r := e.where("settlement", typed); r.BizID != "PAY-3" {
				t.Fatalf("where %q: biz_id %q, want the stored PAY-3", typed, r.BizID)
			}
			p := e.mustPlan("settlement", typed, plans.Options{})
			if p.BizID != "PAY-3" {
				t.Fatalf("plan for %q has biz_id %q, want PAY-3", typed, p.BizID)
			}
			ps := p.Actions[len(p.Actions)-1].Publish
			if ps == nil || string(ps.Key) != "PAY-3" || ps.Partition != part {
				t.Fatalf("republish %+v: want key PAY-3 on partition %d", ps, part)
			}
		})
	}
	res := e.mustApply(e.mustPlan("settlement", "pay-3", plans.Options{}))
	m := e.published(res)
	if string(m.Key) != "PAY-3" || m.Partition != part {
		t.Fatalf("published key %q partition %d, want PAY-3 on %d", m.Key, m.Partition, part)
	}
	if n := e.count("SELECT COUNT(*) FROM opctl_audit WHERE BINARY biz_id = 'PAY-3'"); n != 1 {
		t.Fatalf("%d audit rows under the stored id", n)
	}
}

// A pipeline without a state row: the idempotency record's stored biz_id.
func TestTypedIDWithoutStateRow(t *testing.T) {
	e := newTenv(t, td("config", "skip.yaml"),
		[]string{td("schema", "skip.sql"), td("incidents", "skip.sql")},
		[]string{"order-event"}, nil)
	for _, tb := range []string{"consumer_idempotency", "orders", "points_grant"} {
		e.db.Exec(t, "ALTER TABLE "+tb+" CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
	}
	ts, _ := time.Parse("2006-01-02 15:04:05", e.str("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'"))
	part, off := e.produce("order-event", "8821", "m-7391", ts)
	e.k.Commit(t, "order-consumer", "order-event", part, off+1)
	p := e.mustPlan("orders", "8821 ", plans.Options{})
	if p.BizID != "8821" {
		t.Fatalf("plan biz_id %q, want 8821", p.BizID)
	}
	ps := p.Actions[len(p.Actions)-1].Publish
	if ps == nil || string(ps.Key) != "8821" || ps.Partition != part || !ps.Copy {
		t.Fatalf("republish %+v: want a copy keyed 8821 on partition %d", ps, part)
	}
}
