package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// binlogSrv is the package's binlog test server (a second MariaDB with a ROW
// binlog), started by the first test that needs it.
var binlogSrv testenv.SharedBinlog

func TestMain(m *testing.M) { os.Exit(binlogSrv.Main(m)) }

// seed000Env is seed 000 on its own schema (no journal, no state table) on
// the binlog server, with a notify downstream that saw one call per
// operation.
func seed000Env(t *testing.T, cfg string, sqlFiles ...string) *tenv {
	t.Helper()
	return seed000EnvOn(t, binlogSrv.Get(t), cfg, sqlFiles...)
}

// seed000EnvOn is seed000Env on the binlog server srv.
func seed000EnvOn(t *testing.T, srv *testenv.BinlogServer, cfg string, sqlFiles ...string) *tenv {
	t.Helper()
	notify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"APPLIED","count":1}`)
	}))
	t.Cleanup(notify.Close)
	files := []string{td("schema", "seed000.sql")}
	for _, f := range sqlFiles {
		files = append(files, td("schema", f))
	}
	return newTenvOn(t, srv.MySQL(t), td("config", cfg), files, []string{"settlement-event"},
		map[string]string{"OPCTL_NOTIFY_URL": notify.URL})
}

// seedDebit is the seed consumer's debit and ledger insert, each its own
// statement; a second run's ledger insert is stopped by the unique key.
func (e *tenv) seedDebit(biz string, account int, amount string) {
	e.t.Helper()
	res, err := e.db.SQL.Exec("UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(18,2)) WHERE account_id = ? AND balance >= CAST(? AS DECIMAL(18,2))", amount, account, amount)
	testenv.Must(e.t, err, "debit")
	if n, _ := res.RowsAffected(); n != 1 {
		e.t.Fatalf("debit changed %d rows", n)
	}
	_, err = e.db.SQL.Exec("INSERT IGNORE INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', ?, NOW(3))", biz, amount)
	testenv.Must(e.t, err, "ledger")
}

// seedMessage produces the operation's settlement-event record.
func (e *tenv) seedMessage(biz string, account int, amount string) {
	e.t.Helper()
	p, err := sources.PartitionFor("murmur2", []byte(biz), e.parts)
	testenv.Must(e.t, err, "partition")
	e.k.Produce(e.t, "settlement-event", p, biz, fmt.Sprintf(`{"biz_id":%q,"account_id":%d,"amount":%q}`, biz, account, amount), nil, time.Now())
}

func debitView(t *testing.T, r inspect.Report) inspect.StepView {
	t.Helper()
	for _, s := range r.Steps {
		if s.Name == "debit" {
			return s
		}
	}
	t.Fatalf("no debit step in %+v", r.Steps)
	return inspect.StepView{}
}

// TestSeed000DoubleDebitFromBinlog: the incident on the seed's own tables.
// Only the binlog shows the second debit; the plan reverses the newest
// change, and after apply the reversed change no longer counts.
func TestSeed000DoubleDebitFromBinlog(t *testing.T) {
	e := seed000Env(t, "seed000.yaml")
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00), (1002, 500.00)")
	e.seedMessage("PAY-1", 1001, "30.00")
	e.seedMessage("PAY-2", 1002, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-2", 1002, "30.00") // another account, same amount
	e.seedDebit("PAY-1", 1001, "30.00") // the redelivery: debit again, ledger stopped

	r := e.where("settlement", "PAY-1")
	wantVerdict(t, r, inspect.DuplicateEffect)
	d := debitView(t, r)
	if d.Status != inspect.StepDuplicated || d.EvidenceCount != 2 || r.Partial {
		t.Fatalf("debit %+v partial %v sources %v", d, r.Partial, r.Sources)
	}
	if r.Sources["binlog"] != sources.StatusOK {
		t.Fatalf("sources %v", r.Sources)
	}
	for _, ev := range d.Evidence {
		if at, _ := ev.Get("attribution"); at != sources.AttributedMessage {
			t.Errorf("attribution %v", at)
		}
		if k, _ := ev.Get("key"); k != int64(1001) {
			t.Errorf("key %v (%T)", k, k)
		}
	}

	// where -o json (docs/where.md#binlog-evidence): each change an evidence
	// object, DECIMALs as strings, the binlog a source.
	js, err := json.Marshal(r)
	testenv.Must(t, err, "marshal")
	for _, want := range []string{`"key":1001,"delta":"-30.00","before":"500.00","after":"470.00","at":"`, `"attribution":"message"}`, `"binlog":"ok"`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("where JSON lacks %s:\n%s", want, js)
		}
	}
	p := e.mustPlan("settlement", "PAY-1", plans.Options{})
	if len(p.Actions) != 1 || p.Actions[0].Type != plans.Reverse {
		t.Fatalf("actions %+v", p.Actions)
	}
	newest := inspect.IdentityString(d.Evidence[1].Identity())
	if got := p.Actions[0].Reverse.Identity; got != newest {
		t.Fatalf("reverses %s, want the newest change %s", got, newest)
	}
	if _, err := e.dryRun(p); err != nil {
		t.Fatalf("dry run: %v", err)
	}
	if b := e.str("SELECT balance FROM account_balance WHERE account_id = 1001"); b != "440.00" {
		t.Fatalf("balance after a dry run %s, want 440.00", b)
	}
	res := e.mustApply(p)
	if res.Applied != 1 {
		t.Fatalf("result %+v", res)
	}
	if b := e.str("SELECT balance FROM account_balance WHERE account_id = 1001"); b != "470.00" {
		t.Fatalf("balance %s, want 470.00 (one debit of 30 reversed)", b)
	}
	r = e.where("settlement", "PAY-1")
	if r.Verdict.Code == inspect.DuplicateEffect {
		t.Fatalf("still %s after the reversal: %+v", r.Verdict.Code, debitView(t, r))
	}
	d = debitView(t, r)
	if d.EvidenceCount != 1 || len(d.Evidence) != 2 || !d.Evidence[1].Reversed {
		t.Fatalf("debit after apply %+v", d)
	}
	if res := e.mustApply(p); res.Outcome != "already_applied" {
		t.Fatalf("second apply %+v", res)
	}
	// PAY-2 debited once, next to PAY-1's debits of the same amount.
	if d := debitView(t, e.where("settlement", "PAY-2")); d.EvidenceCount != 1 {
		t.Fatalf("PAY-2 debit %+v", d)
	}
}

// TestSeed000StateVariant: the seed's proposed biz_operation table beside
// the binlog: the debit and its status advance in one transaction, ledger
// in another; a redelivery that debits again is still seen.
func TestSeed000StateVariant(t *testing.T) {
	e := seed000Env(t, "seed000_state.yaml", "seed000_state.sql")
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00)")
	e.db.Exec(t, "INSERT INTO biz_operation (biz_id, status, idempotency_key, created_at, updated_at) VALUES ('PAY-1', 'NOTIFY_DONE', 'm-1', NOW(3), NOW(3))")
	e.seedMessage("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	r := e.where("settlement", "PAY-1")
	wantVerdict(t, r, inspect.DuplicateEffect)
	if d := debitView(t, r); d.EvidenceCount != 2 {
		t.Fatalf("debit %+v", d)
	}
}

// TestSeed000WindowPurged: the binlog no longer holds the operation's
// window: the debit is unknown and the report partial, with the reason.
func TestSeed000WindowPurged(t *testing.T) {
	// Its own server: purging the shared one's binlog would take the other
	// tests' windows with it.
	srv := testenv.BinlogServerFor(t, testenv.BinlogOptions{ServerID: 12})
	e := seed000EnvOn(t, srv, "seed000.yaml")
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00)")
	e.seedMessage("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	time.Sleep(1100 * time.Millisecond)
	testenv.PurgeBinlogs(t, e.db.SQL)
	r := e.where("settlement", "PAY-1")
	d := debitView(t, r)
	if !r.Partial || d.Status != inspect.StepUnknown || !strings.Contains(r.Sources["binlog"], "purged") {
		t.Fatalf("partial %v debit %+v sources %v", r.Partial, d, r.Sources)
	}
	if r.Verdict.Code == inspect.Complete || r.Verdict.Code == inspect.DuplicateEffect {
		t.Fatalf("verdict %s from a binlog that was not read", r.Verdict.Code)
	}
	// Nothing to reverse is known: no plan reverses a change it cannot see.
	if p, _, err := e.plan("settlement", "PAY-1", plans.Options{}); err == nil {
		for _, a := range p.Actions {
			if a.Type == plans.Reverse {
				t.Fatalf("plan reverses %+v from an unread binlog", a)
			}
		}
	}
}

// TestSeed000TamperedBinlogPlan: a plan that reverses a binlog change is
// rebuilt from the configuration and what it observed, as any other: each
// edit of the tamper corpus (another change's identity, a different delta,
// other statements, fewer guards, ...) is refused and changes nothing.
func TestSeed000TamperedBinlogPlan(t *testing.T) {
	e := seed000Env(t, "seed000.yaml")
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00)")
	e.seedMessage("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	p := e.mustPlan("settlement", "PAY-1", plans.Options{})
	if err := plans.Rederive(e.cfg, p); err != nil {
		t.Fatalf("the plan as made does not rederive: %v", err)
	}
	older := inspect.IdentityString(debitView(t, e.where("settlement", "PAY-1")).Evidence[0].Identity())
	corpus := append(tamperCorpus(), tamper{name: "reverse of the older change", edit: func(q *plans.Plan) bool {
		return each(q, plans.Reverse, func(a *plans.Action) { a.Reverse.Identity = older })
	}})
	n := 0
	for _, tc := range corpus {
		if tc.name == "request turned into a forced action" {
			// --action reverse --from-step debit --force makes this very
			// plan (one reverse of the newest change): the edit changes
			// nothing that would run, and is not a tamper here.
			continue
		}
		q := clonePlan(t, p)
		if !tc.edit(q) {
			continue
		}
		if err := q.Seal(); err != nil {
			t.Fatal(err)
		}
		n++
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.apply(q)
			var rf *plans.RefusedError
			if !errors.As(err, &rf) {
				t.Fatalf("apply of a tampered plan: %v, want a refusal", err)
			}
			if b := e.str("SELECT balance FROM account_balance WHERE account_id = 1001"); b != "440.00" {
				t.Fatalf("balance %s after a refused apply, want 440.00", b)
			}
			if c := e.count("SELECT COUNT(*) FROM opctl_audit"); c != 0 {
				t.Fatalf("%d audit rows after a refused apply", c)
			}
		})
	}
	if n < 5 {
		t.Fatalf("only %d tamper cases applied to the binlog plan", n)
	}
}

// TestSeed000ReconcileFromBinlog: reconcile's duplicates check reads the
// binlog over --since and triages the operations whose transaction tied a
// debit that a later untied debit of the same row and amount repeats.
func TestSeed000ReconcileFromBinlog(t *testing.T) {
	e := seed000Env(t, "seed000.yaml")
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00), (1002, 500.00)")
	txDebit := func(biz string, account int, amount string) {
		tx, err := e.db.SQL.Begin()
		testenv.Must(t, err, "begin")
		defer tx.Rollback() //nolint:errcheck // after Commit: a no-op
		_, err = tx.Exec("UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(18,2)) WHERE account_id = ? AND balance >= CAST(? AS DECIMAL(18,2))", amount, account, amount)
		testenv.Must(t, err, "debit")
		_, err = tx.Exec("INSERT IGNORE INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', ?, NOW(3))", biz, amount)
		testenv.Must(t, err, "ledger")
		testenv.Must(t, tx.Commit(), "commit")
	}
	for _, op := range []struct {
		biz     string
		account int
	}{{"PAY-1", 1001}, {"PAY-2", 1002}} {
		e.seedMessage(op.biz, op.account, "30.00")
		txDebit(op.biz, op.account, "30.00")
	}
	txDebit("PAY-1", 1001, "30.00") // the redelivery: its ledger row is ignored
	var got []reconcile.Result
	sum, err := reconcile.Run(context.Background(), reconcile.Deps{DB: e.cl.Reader, Collector: e.svc.Collector},
		reconcile.Options{Pipelines: []*config.Pipeline{e.cfg.Pipeline("settlement")}, Checks: []string{reconcile.CheckDuplicates}, Since: time.Hour},
		func(res reconcile.Result) error { got = append(got, res); return nil })
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, r := range got {
		if r.IsTarget() {
			targets = append(targets, r.BizID+":"+string(r.Verdict))
		}
	}
	if strings.Join(targets, ",") != "PAY-1:DUPLICATE_EFFECT" {
		t.Fatalf("targets %v (results %+v, summary %+v)", targets, got, sum.Checks)
	}
	// Over more than 24 hours the last 24 hours of the binlog are scanned,
	// and the note says so.
	got = nil
	sum, err = reconcile.Run(context.Background(), reconcile.Deps{DB: e.cl.Reader, Collector: e.svc.Collector},
		reconcile.Options{Pipelines: []*config.Pipeline{e.cfg.Pipeline("settlement")}, Checks: []string{reconcile.CheckDuplicates}, Since: 48 * time.Hour},
		func(res reconcile.Result) error { got = append(got, res); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(sum.Checks), "only the last 24h0m0s of the binlog were scanned") {
		t.Fatalf("checks %+v", sum.Checks)
	}
	if len(got) != 1 || got[0].BizID != "PAY-1" || got[0].Verdict != inspect.DuplicateEffect {
		t.Fatalf("--since 48h: results %+v", got)
	}
}
