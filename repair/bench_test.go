package repair

import (
	"os"
	"sort"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/repair/plans"
)

// TestApplyLatency measures the wall time of each action type on MariaDB
// (guards under FOR UPDATE, the writes, the audit row, the commit; for a
// republish both audit transactions and the send to kfake; for a
// compensation the POST to a local fake), and checks that every action type
// re-applies cleanly after its state is reset. It repeats each plan 3 times
// in CI and 50 times with OPCTL_MEASURE=1, logging the medians:
//
//	OPCTL_MEASURE=1 go test ./repair -run ApplyLatency -v
func TestApplyLatency(t *testing.T) {
	n := 3
	if os.Getenv("OPCTL_MEASURE") != "" {
		n = 50
	}
	w := newWMS(t, map[string]int{"F-1": 2})
	e := settlementEnv(t)
	f := newTenv(t, td("repair", "fulfilment.yaml"), []string{td("schema", "fulfilment.sql"), td("incidents", "fulfilment.sql")},
		[]string{"order-fulfilment"}, map[string]string{"OPCTL_WMS_URL": w.srv.URL})
	e.anchor("PAY-4", true)
	e.anchor("PAY-5", true)
	e.anchor("PAY-7", true)
	e.anchor("PAY-8", true)
	samples := map[string][]time.Duration{}
	whole := map[string][]time.Duration{}
	run := func(env *tenv, name, pipeline, biz string, o plans.Options, reset string) {
		for i := 0; i < n; i++ {
			env.db.Exec(t, reset)
			p := env.mustPlan(pipeline, biz, o)
			start := time.Now()
			res := env.mustApply(p)
			whole[name] = append(whole[name], time.Since(start))
			for _, a := range res.Actions {
				samples[string(a.Type)] = append(samples[string(a.Type)], a.Elapsed)
			}
		}
	}
	run(e, "reverse ×2 (PAY-6)", "settlement", "PAY-6", plans.Options{},
		"DELETE FROM opctl_audit; DELETE FROM balance_journal WHERE kind = 'REVERSAL'; UPDATE account_balance SET balance = 970.00 WHERE account_id = 1006")
	run(e, "advance + republish (PAY-4)", "settlement", "PAY-4", plans.Options{},
		"DELETE FROM opctl_audit; UPDATE biz_operation SET status = 'DEBIT_DONE', version = 2 WHERE biz_id = 'PAY-4'")
	run(e, "rewind + republish (PAY-5)", "settlement", "PAY-5", plans.Options{},
		"DELETE FROM opctl_audit; UPDATE biz_operation SET status = 'LEDGER_DONE', version = 3 WHERE biz_id = 'PAY-5'")
	run(e, "manual + advance (PAY-7)", "settlement", "PAY-7", plans.Options{Action: plans.Manual, Attest: "ok", Outcome: "applied"},
		"DELETE FROM opctl_audit; UPDATE biz_operation SET status = 'LEDGER_DONE', version = 3 WHERE biz_id = 'PAY-7'")
	run(e, "release_lease (PAY-8)", "settlement", "PAY-8", plans.Options{Action: plans.ReleaseLease},
		"DELETE FROM opctl_audit; UPDATE biz_operation SET owner = 'c-9', lease_until = NOW(3) + INTERVAL 1 HOUR, version = 2 WHERE biz_id = 'PAY-8'")
	for i := 0; i < n; i++ {
		f.db.Exec(t, "DELETE FROM opctl_audit")
		w.mu.Lock()
		w.locks["F-1"] = 2
		w.mu.Unlock()
		p := f.mustPlan("fulfilment", "F-1", plans.Options{})
		start := time.Now()
		res := f.mustApply(p)
		whole["compensate (F-1)"] = append(whole["compensate (F-1)"], time.Since(start))
		samples[string(res.Actions[0].Type)] = append(samples[string(res.Actions[0].Type)], res.Actions[0].Elapsed)
	}
	sk := newTenv(t, td("config", "skip.yaml"), []string{td("schema", "skip.sql"), td("incidents", "skip.sql")}, []string{"order-event"}, nil)
	ts, _ := time.Parse("2006-01-02 15:04:05", sk.str("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'"))
	part, off := sk.produce("order-event", "8821", "m-7391", ts)
	sk.k.Commit(t, "order-consumer", "order-event", part, off+1)
	run(sk, "flip + republish (8821)", "orders", "8821", plans.Options{},
		"DELETE FROM opctl_audit; UPDATE consumer_idempotency SET action = 'SKIPPED' WHERE msg_id = 'm-7391'")
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	var keys []string
	for k := range samples {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("action %-18s median %8s  p90 %8s  (n=%d)", k, med(samples[k]).Round(10*time.Microsecond), samples[k][len(samples[k])*9/10].Round(10*time.Microsecond), len(samples[k]))
	}
	keys = keys[:0]
	for k := range whole {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Logf("whole apply %-28s median %8s (stale check included)", k, med(whole[k]).Round(10*time.Microsecond))
	}
}
