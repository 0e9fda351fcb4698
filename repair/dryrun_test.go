package repair

import (
	"context"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources/config"
)

// A dry run sends nothing and leaves nothing, whatever the action: for
// every action type, a plan that has it is dry-run against the real
// MariaDB, kfake and an httptest downstream, and afterwards every table
// of the database holds what it held (CHECKSUM TABLE), no partition grew,
// no POST reached the downstream, the audit has no row, and exactly one
// dry_run attempt was recorded (docs/repair.md "Dry run": the one row a
// dry run writes for real).
func TestDryRunSendsNothingAndLeavesNothingPerAction(t *testing.T) {
	type setup func(t *testing.T) (e *tenv, p *plans.Plan, posts func() int)
	none := func() int { return 0 }
	cases := []struct {
		name  string
		types []plans.ActionType
		setup setup
	}{
		{"reverse+manual", []plans.ActionType{plans.Reverse, plans.Manual}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			e := settlementEnv(t)
			return e, e.mustPlan("settlement", "PAY-1", plans.Options{Attest: "risk team lifted the freeze"}), none
		}},
		{"advance_state+republish", []plans.ActionType{plans.AdvanceState, plans.Republish}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			e := settlementEnv(t)
			e.anchor("PAY-4", true)
			return e, e.mustPlan("settlement", "PAY-4", plans.Options{}), none
		}},
		{"rewind_state+republish", []plans.ActionType{plans.RewindState, plans.Republish}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			e := settlementEnv(t)
			e.anchor("PAY-5", true)
			return e, e.mustPlan("settlement", "PAY-5", plans.Options{}), none
		}},
		{"republish", []plans.ActionType{plans.Republish}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			e := settlementEnv(t)
			e.anchor("PAY-3", true)
			return e, e.mustPlan("settlement", "PAY-3", plans.Options{}), none
		}},
		{"release_lease", []plans.ActionType{plans.ReleaseLease}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			e := settlementEnv(t)
			e.anchor("PAY-8", true)
			return e, e.mustPlan("settlement", "PAY-8", plans.Options{Action: plans.ReleaseLease}), none
		}},
		{"compensate_remote", []plans.ActionType{plans.CompensateRemote}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			w := newWMS(t, map[string]int{"F-1": 2})
			e := newTenv(t, td("repair", "fulfilment.yaml"),
				[]string{td("schema", "fulfilment.sql"), td("incidents", "fulfilment.sql")},
				[]string{"order-fulfilment"}, map[string]string{"OPCTL_WMS_URL": w.srv.URL})
			return e, e.mustPlan("fulfilment", "F-1", plans.Options{}), func() int { w.mu.Lock(); defer w.mu.Unlock(); return w.posts }
		}},
		{"flip_skipped(pending)+republish", []plans.ActionType{plans.FlipSkipped, plans.Republish}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			e := newTenv(t, td("config", "skip.yaml"),
				[]string{td("schema", "skip.sql"), td("incidents", "skip.sql")},
				[]string{"order-event"}, nil)
			ts, err := time.Parse("2006-01-02 15:04:05", e.str("SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s') FROM consumer_idempotency WHERE msg_id = 'm-7391'"))
			if err != nil {
				t.Fatal(err)
			}
			part, off := e.produce("order-event", "8821", "m-7391", ts)
			e.k.Commit(t, "order-consumer", "order-event", part, off+1)
			return e, e.mustPlan("orders", "8821", plans.Options{}), none
		}},
		{"flip_skipped(delete)+republish", []plans.ActionType{plans.FlipSkipped, plans.Republish}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			s, _ := newSeed003Reopen(t)
			p := s.mustPlan("orders", "8821", plans.Options{})
			if !p.Actions[0].Flip.Delete {
				t.Fatalf("the flip does not delete: %+v", p.Actions[0].Flip)
			}
			return s.tenv, p, s.points.postCount
		}},
		{"redrive", []plans.ActionType{plans.Redrive}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			s := newSeed003Skipped(t)
			return s.tenv, s.mustPlan("orders", "8821", plans.Options{}), s.points.postCount
		}},
		{"restore_record", []plans.ActionType{plans.RestoreRecord}, func(t *testing.T) (*tenv, *plans.Plan, func() int) {
			s, _ := newSeed003Reopen(t)
			s.mustApply(s.mustPlan("orders", "8821", plans.Options{}))
			return s.tenv, s.mustPlan("orders", "8821", plans.Options{Action: plans.RestoreRecord, Force: true}), s.points.postCount
		}},
	}
	covered := map[plans.ActionType]bool{}
	for _, c := range cases {
		for _, typ := range c.types {
			covered[typ] = true
		}
	}
	for _, typ := range plans.ActionTypes() {
		if !covered[typ] {
			t.Errorf("action type %s has no dry-run case", typ)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, p, posts := c.setup(t)
			var got []plans.ActionType
			for _, a := range p.Actions {
				got = append(got, a.Type)
			}
			if !slices.Equal(got, c.types) {
				t.Fatalf("plan actions %v, want %v", got, c.types)
			}
			tables, ends, sent := e.tableSums(), e.logEnds(), posts()
			audits := e.count("SELECT COUNT(*) FROM opctl_audit")
			attempts := e.count("SELECT COUNT(*) FROM opctl_audit_attempt")

			res, err := e.dryRun(p)
			if err != nil || res.Outcome != OutcomeWouldApply || !res.DryRun || res.Applied != len(p.Actions) {
				t.Fatalf("dry run: %v %+v", err, res)
			}
			for _, a := range res.Actions {
				if a.Outcome != OutcomeWouldApply {
					t.Errorf("action %d (%s): %s %s", a.Index, a.Type, a.Outcome, a.Detail)
				}
				if a.Published != nil && a.Published.Offset != -1 {
					t.Errorf("action %d says it was written at %+v", a.Index, a.Published)
				}
			}
			if now := e.tableSums(); now != tables {
				t.Errorf("the dry run changed the database:\nbefore %s\nafter  %s", tables, now)
			}
			if now := e.logEnds(); !slices.Equal(now, ends) {
				t.Errorf("the dry run wrote to Kafka: log ends %v → %v", ends, now)
			}
			if now := posts(); now != sent {
				t.Errorf("the dry run POSTed %d time(s) to the downstream", now-sent)
			}
			if n := e.count("SELECT COUNT(*) FROM opctl_audit"); n != audits {
				t.Errorf("%d audit rows after the dry run, %d before", n, audits)
			}
			if n := e.count("SELECT COUNT(*) FROM opctl_audit_attempt"); n != attempts+1 {
				t.Errorf("%d attempt rows after the dry run, want %d", n, attempts+1)
			}
			if n := e.count("SELECT COUNT(*) FROM opctl_audit_attempt WHERE outcome = 'dry_run' AND plan_id = ?", p.ID); n != 1 {
				t.Errorf("%d dry_run attempts of the plan, want 1", n)
			}
		})
	}
}

// tableSums is every table of the test database but the attempt table (a
// dry run's one real write), with its checksum: any row changed shows.
func (e *tenv) tableSums() string {
	e.t.Helper()
	rows, err := e.db.SQL.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name <> 'opctl_audit_attempt' ORDER BY table_name")
	if err != nil {
		e.t.Fatal(err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		names = append(names, config.QuoteIdent(n))
	}
	if err := rows.Err(); err != nil {
		e.t.Fatal(err)
	}
	rows.Close()
	if len(names) == 0 {
		e.t.Fatal("no tables")
	}
	rows, err = e.db.SQL.Query("CHECKSUM TABLE " + strings.Join(names, ", "))
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		var sum *string
		if err := rows.Scan(&name, &sum); err != nil {
			e.t.Fatal(err)
		}
		if sum == nil {
			e.t.Fatalf("no checksum for %s", name)
		}
		out = append(out, name+"="+*sum)
	}
	return strings.Join(out, " ")
}

// logEnds is the log end offset of every partition of the test's topics.
func (e *tenv) logEnds() []int64 {
	e.t.Helper()
	var out []int64
	for _, topic := range e.topics {
		for part := range e.parts {
			end, err := e.cl.Kafka.LogEnd(context.Background(), topic, part)
			if err != nil {
				e.t.Fatalf("log end of %s/%d: %v", topic, part, err)
			}
			out = append(out, end)
		}
	}
	return out
}

// postCount is how many POSTs the journal received.
func (j *journal) postCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.posts
}

// No transaction is open while a downstream is called, in a dry run or an
// apply: the probes a later action's guards read are read before the
// locks are taken (a dry run reads them all before its one transaction),
// and the POST of an effect is sent after its in-flight audit row
// committed. The downstream here asks the server, at every request,
// whether any connection to the test's database has a transaction open
// (information_schema.INNODB_TRX), on a plan whose first action (a
// reverse) locks rows and whose second (a compensation) probes and POSTs.
func TestNoTransactionOpenAcrossADownstreamCall(t *testing.T) {
	w := newWMS(t, map[string]int{"F-1": 2})
	cfgText, err := os.ReadFile(td("repair", "fulfilment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// order_row gets a reverse, and F-1 two order rows: the plan reverses
	// the newer one, then compensates the extra WMS lock.
	const ev = `evidence: "SELECT id, status, created_at FROM fulfil_order WHERE biz_id = ?"`
	if !strings.Contains(string(cfgText), ev) {
		t.Fatal("fulfilment.yaml changed: update this test")
	}
	path := t.TempDir() + "/fulfilment.yaml"
	cfgText = []byte(strings.Replace(string(cfgText), ev, `evidence: "SELECT id, status, created_at FROM fulfil_order WHERE biz_id = ? AND status <> 'REVERSED'"
        reverse:
          - "UPDATE fulfil_order SET status = 'REVERSED' WHERE id = :id"`, 1))
	if err := os.WriteFile(path, cfgText, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newTenv(t, path, []string{td("schema", "fulfilment.sql"), td("incidents", "fulfilment.sql")},
		[]string{"order-fulfilment"}, map[string]string{"OPCTL_WMS_URL": w.srv.URL})
	e.db.Exec(t, "ALTER TABLE fulfil_order DROP INDEX uk_biz")
	e.db.Exec(t, "INSERT INTO fulfil_order (biz_id, status, created_at) VALUES ('F-1', 'CREATED', NOW(3) - INTERVAL 9 MINUTE)")

	// The downstream, as the WMS, after a look at the database's
	// transactions.
	var mu sync.Mutex
	var calls []string
	var open []string
	inner := w.srv.Config.Handler
	w.srv.Config.Handler = http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		trx := openTransactions(t, e)
		mu.Lock()
		calls = append(calls, r.Method+" "+r.URL.Path)
		if trx != "" {
			open = append(open, r.Method+" "+r.URL.Path+": "+trx)
		}
		mu.Unlock()
		inner.ServeHTTP(rw, r)
	})

	p := e.mustPlan("fulfilment", "F-1", plans.Options{})
	if len(p.Actions) != 2 || p.Actions[0].Type != plans.Reverse || p.Actions[1].Type != plans.CompensateRemote {
		t.Fatalf("actions %+v: want reverse then compensate_remote", p.Actions)
	}
	hasProbe := false
	for _, g := range p.Actions[1].Guards {
		hasProbe = hasProbe || g.Check == plans.CheckProbeCount
	}
	if !hasProbe {
		t.Fatalf("the compensation has no probe guard: %v", p.Actions[1].Guards)
	}
	for _, run := range []struct {
		name string
		do   func(*plans.Plan) (*Result, error)
		want Outcome
	}{{"dry run", e.dryRun, OutcomeWouldApply}, {"apply", e.apply, OutcomeApplied}} {
		mu.Lock()
		calls, open = nil, nil
		mu.Unlock()
		res, err := run.do(p)
		if err != nil || res.Outcome != run.want {
			t.Fatalf("%s: %v %+v", run.name, err, res)
		}
		mu.Lock()
		if len(calls) == 0 {
			t.Errorf("%s: the downstream was never called", run.name)
		}
		for _, o := range open {
			t.Errorf("%s: a transaction was open during %s", run.name, o)
		}
		mu.Unlock()
	}
	if w.count("F-1") != 1 || e.count("SELECT COUNT(*) FROM fulfil_order WHERE biz_id = 'F-1' AND status = 'REVERSED'") != 1 {
		t.Fatalf("the apply did not repair: %d locks", w.count("F-1"))
	}
}

// openTransactions lists the transactions open on connections to e's
// database, but this one's ("" when none). The server refreshes
// INNODB_TRX at most every 100 ms, on a read: the caller has been waiting
// on this downstream for longer than that when it is read, so what it
// shows is the caller's state.
func openTransactions(t *testing.T, e *tenv) string {
	time.Sleep(150 * time.Millisecond)
	rows, err := e.db.SQL.Query(`SELECT CONCAT(t.trx_mysql_thread_id, ' ', t.trx_state, ' locks ', t.trx_lock_structs, ' rows ', t.trx_rows_locked)
		FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		WHERE p.DB = ? AND t.trx_mysql_thread_id <> CONNECTION_ID()`, e.db.Name)
	if err != nil {
		t.Errorf("read INNODB_TRX: %v", err)
		return ""
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Errorf("read INNODB_TRX: %v", err)
			return ""
		}
		out = append(out, "trx "+s)
	}
	return strings.Join(out, "; ")
}
