package repair

import (
	"testing"
	"time"

	"github.com/opctl-dev/opctl/repair/plans"
)

// applyCase is one plan of the seed fixtures the latency benchmark applies
// again and again: reset puts the operation back as it was.
type applyCase struct {
	name, pipeline, biz string
	o                   plans.Options
	env                 *tenv
	reset               func()
}

// applyCases starts the fixtures (settlement, fulfilment with a fake WMS,
// the skip incident) and returns one case per kind of plan.
func applyCases(tb testing.TB) []applyCase {
	w := newWMS(tb, map[string]int{"F-1": 2})
	e := settlementEnv(tb)
	f := newTenv(tb, td("repair", "fulfilment.yaml"), []string{td("schema", "fulfilment.sql"), td("incidents", "fulfilment.sql")},
		[]string{"order-fulfilment"}, map[string]string{"OPCTL_WMS_URL": w.srv.URL})
	for _, id := range []string{"PAY-4", "PAY-5", "PAY-7", "PAY-8"} {
		e.anchor(id, true)
	}
	sk := newTenv(tb, td("config", "skip.yaml"), []string{td("schema", "skip.sql"), td("incidents", "skip.sql")}, []string{"order-event"}, nil)
	ts, _ := time.Parse("2006-01-02 15:04:05", sk.str("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'"))
	part, off := sk.produce("order-event", "8821", "m-7391", ts)
	sk.k.Commit(tb, "order-consumer", "order-event", part, off+1)
	sql := func(env *tenv, q string) func() { return func() { env.db.Exec(tb, q) } }
	return []applyCase{
		{"reverse×2", "settlement", "PAY-6", plans.Options{}, e,
			sql(e, "DELETE FROM opctl_audit; DELETE FROM balance_journal WHERE kind = 'REVERSAL'; UPDATE account_balance SET balance = 970.00 WHERE account_id = 1006")},
		{"advance+republish", "settlement", "PAY-4", plans.Options{}, e,
			sql(e, "DELETE FROM opctl_audit; UPDATE biz_operation SET status = 'DEBIT_DONE', version = 2 WHERE biz_id = 'PAY-4'")},
		{"rewind+republish", "settlement", "PAY-5", plans.Options{}, e,
			sql(e, "DELETE FROM opctl_audit; UPDATE biz_operation SET status = 'LEDGER_DONE', version = 3 WHERE biz_id = 'PAY-5'")},
		{"manual+advance", "settlement", "PAY-7", plans.Options{Action: plans.Manual, Attest: "ok", Outcome: "applied"}, e,
			sql(e, "DELETE FROM opctl_audit; UPDATE biz_operation SET status = 'LEDGER_DONE', version = 3 WHERE biz_id = 'PAY-7'")},
		{"release_lease", "settlement", "PAY-8", plans.Options{Action: plans.ReleaseLease}, e,
			sql(e, "DELETE FROM opctl_audit; UPDATE biz_operation SET owner = 'c-9', lease_until = NOW(3) + INTERVAL 1 HOUR, version = 2 WHERE biz_id = 'PAY-8'")},
		{"compensate", "fulfilment", "F-1", plans.Options{}, f, func() {
			f.db.Exec(tb, "DELETE FROM opctl_audit")
			w.mu.Lock()
			w.locks["F-1"] = 2
			w.mu.Unlock()
		}},
		{"flip+republish", "orders", "8821", plans.Options{}, sk,
			sql(sk, "DELETE FROM opctl_audit; UPDATE consumer_idempotency SET action = 'SKIPPED' WHERE msg_id = 'm-7391'")},
	}
}

// Every kind of plan applies, and applies again once its operation is
// reset: what BenchmarkApply measures works.
func TestEveryPlanKindReapplies(t *testing.T) {
	for _, c := range applyCases(t) {
		for i := 0; i < 2; i++ {
			c.reset()
			res := c.env.mustApply(c.env.mustPlan(c.pipeline, c.biz, c.o))
			if res.Outcome != OutcomeApplied || res.Applied != len(res.Actions) {
				t.Fatalf("%s, apply %d: %+v", c.name, i+1, res)
			}
		}
	}
}

// BenchmarkApply measures a whole apply of each kind of plan on MariaDB and
// kfake (the rebuild, the stale check's read, each action's guards under FOR
// UPDATE, its writes, its audit row and commit; a republish's two audit
// transactions and the send; a compensation's POST to a local fake), and
// reports each action type's own time as <type>-ms/action:
//
//	go test ./repair -run '^$' -bench Apply -benchtime 50x
func BenchmarkApply(b *testing.B) {
	for _, c := range applyCases(b) {
		b.Run(c.name, func(b *testing.B) {
			per := map[plans.ActionType]time.Duration{}
			count := map[plans.ActionType]int{}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				c.reset()
				p := c.env.mustPlan(c.pipeline, c.biz, c.o)
				b.StartTimer()
				res := c.env.mustApply(p)
				for _, a := range res.Actions {
					per[a.Type] += a.Elapsed
					count[a.Type]++
				}
			}
			for t, d := range per {
				b.ReportMetric(float64(d.Microseconds())/1000/float64(count[t]), string(t)+"-ms/action")
			}
		})
	}
}
