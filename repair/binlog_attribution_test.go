package repair

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// txDebit is a consumer that debits and writes its ledger row in one
// transaction (binlog.transaction ties the debit to its operation); a
// redelivery's ledger insert is ignored by the unique key.
func (e *tenv) txDebit(biz string, account int, amount string) {
	e.t.Helper()
	tx, err := e.db.SQL.Begin()
	testenv.Must(e.t, err, "begin")
	defer tx.Rollback() //nolint:errcheck // after Commit: a no-op
	_, err = tx.Exec("UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(18,2)) WHERE account_id = ? AND balance >= CAST(? AS DECIMAL(18,2))", amount, account, amount)
	testenv.Must(e.t, err, "debit")
	_, err = tx.Exec("INSERT IGNORE INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', ?, NOW(3))", biz, amount)
	testenv.Must(e.t, err, "ledger")
	testenv.Must(e.t, tx.Commit(), "commit")
}

// noReverse fails when the plan reverses a change.
func noReverse(t *testing.T, p *plans.Plan) {
	t.Helper()
	if p == nil {
		return
	}
	for _, a := range p.Actions {
		if a.Type == plans.Reverse {
			t.Fatalf("the plan reverses %s, a change another operation may own: %+v", a.Reverse.Identity, a)
		}
	}
}

// Two operations that each debited account 1001 by 30 once, inside each
// other's windows (a merchant account, a fixed fee): one change each, never
// DUPLICATE_EFFECT, and no plan reverses the other customer's debit. The
// seed's own autocommit consumer, which cannot tie a debit to its
// operation, is as exact as a consumer with binlog.transaction. Each read
// DUPLICATE_EFFECT, and its plan reversed a debit, before.
func TestSeed000SameAccountSameAmount(t *testing.T) {
	for _, c := range []struct {
		name, cfg string
		tied      bool
	}{{"autocommit, no binlog.transaction", "seed000_autocommit.yaml", false}, {"one transaction, binlog.transaction", "seed000.yaml", true}} {
		t.Run(c.name, func(t *testing.T) {
			e := seed000Env(t, c.cfg)
			debit := e.seedDebit
			if c.tied {
				debit = e.txDebit
			}
			e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00)")
			e.seedMessage("PAY-1", 1001, "30.00")
			e.seedMessage("PAY-2", 1001, "30.00")
			debit("PAY-1", 1001, "30.00")
			debit("PAY-2", 1001, "30.00")
			for _, biz := range []string{"PAY-1", "PAY-2"} {
				other := map[string]string{"PAY-1": "PAY-2", "PAY-2": "PAY-1"}[biz]
				r := e.where("settlement", biz)
				d := debitView(t, r)
				if r.Verdict.Code == inspect.DuplicateEffect || d.Status != inspect.StepApplied || d.EvidenceCount != 1 || r.Partial {
					js, _ := json.MarshalIndent(r, "", "  ")
					t.Fatalf("%s: verdict %s, debit %s count %d; want one debit each\n%s", biz, r.Verdict.Code, d.Status, d.EvidenceCount, js)
				}
				b := d.Binlog
				switch {
				case b == nil || b.CountMin != 1 || b.CountMax != 1:
					t.Fatalf("%s: attribution %+v", biz, b)
				case !c.tied && (len(b.Competitors) != 1 || b.Competitors[0].BizID != other || b.Competitors[0].Found != sources.AttributedMessage):
					t.Fatalf("%s: competitors %+v, want %s by its message", biz, b.Competitors, other)
				case c.tied && len(b.Shared) != 0:
					t.Fatalf("%s: shared %+v: a tied debit is its operation's", biz, b.Shared)
				}
				if how, _ := d.Evidence[0].Get("attribution"); c.tied != (how == sources.AttributedTransaction) {
					t.Fatalf("%s: attribution %v", biz, how)
				}
				p, _, err := e.plan("settlement", biz, plans.Options{})
				noReverse(t, p)
				var nothing *plans.NothingToRepairError
				if err != nil && !errors.As(err, &nothing) {
					t.Logf("%s: plan: %v", biz, err)
				}
			}

			// PAY-1 is redelivered: one of the two has a duplicate, and the
			// binlog cannot tell whose (it was a duplicate of PAY-1 for
			// certain before, and the plan reversed the newest debit).
			debit("PAY-1", 1001, "30.00")
			r := e.where("settlement", "PAY-1")
			d := debitView(t, r)
			wantVerdict(t, r, inspect.UnknownOutcome)
			if d.Status != inspect.StepAmbiguous || d.Binlog.CountMin != 1 || d.Binlog.CountMax != 2 {
				t.Fatalf("debit %s %+v, want ambiguous 1 to 2", d.Status, d.Binlog)
			}
			if !strings.Contains(r.Verdict.Summary, "PAY-2") {
				t.Errorf("the verdict does not name the competitor: %s", r.Verdict.Summary)
			}
			p, _, err := e.plan("settlement", "PAY-1", plans.Options{})
			noReverse(t, p)
			var rf *plans.RefusedError
			if !errors.As(err, &rf) {
				t.Fatalf("plan of an ambiguous step: %v, want a refusal asking for an attestation", err)
			}
			// The operator finds out (PAY-1's redelivery), undoes it by hand,
			// and attests PAY-1's debit applied exactly once.
			p = e.mustPlan("settlement", "PAY-1", plans.Options{Action: plans.Manual, Outcome: inspect.AttestApplied, Attest: "ops: PAY-1's redelivery debited 1001 at 10:02, refunded by hand"})
			noReverse(t, p)
			if len(p.Actions) != 1 || p.Actions[0].Type != plans.Manual || p.Actions[0].Attested[inspect.AttestAll] != inspect.AttestApplied {
				t.Fatalf("actions %+v", p.Actions)
			}
			e.db.Exec(t, "UPDATE account_balance SET balance = balance + 30.00 WHERE account_id = 1001")
			e.mustApply(p)
			if r := e.where("settlement", "PAY-1"); debitView(t, r).Status != inspect.StepApplied {
				t.Fatalf("after the attestation: debit %+v", debitView(t, r))
			}
			if b := e.str("SELECT balance FROM account_balance WHERE account_id = 1001"); b != "440.00" {
				t.Fatalf("balance %s, want 440.00 (two debits of 30 left)", b)
			}
		})
	}
}

// The run: another operation's untied debit of the same account
// and amount, then this operation's debit tied to it by its transaction.
// The untied one is not this operation's (its first change is the tied
// one), so there is no duplicate — before, it read DUPLICATE_EFFECT and
// the plan reversed the newest change: this operation's own tied debit.
func TestSeed000TiedDebitNeverReversed(t *testing.T) {
	e := seed000Env(t, "seed000.yaml")
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00)")
	e.seedMessage("PAY-2", 1001, "30.00")
	e.seedMessage("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-2", 1001, "30.00") // its ledger row in a transaction of its own
	e.txDebit("PAY-1", 1001, "30.00")
	r := e.where("settlement", "PAY-1")
	d := debitView(t, r)
	if r.Verdict.Code == inspect.DuplicateEffect || d.Status != inspect.StepApplied || d.EvidenceCount != 1 {
		t.Fatalf("verdict %s, debit %s count %d; want PAY-1's one tied debit", r.Verdict.Code, d.Status, d.EvidenceCount)
	}
	if how, _ := d.Evidence[0].Get("attribution"); how != sources.AttributedTransaction {
		t.Fatalf("attribution %v", how)
	}
	p, _, _ := e.plan("settlement", "PAY-1", plans.Options{})
	noReverse(t, p)
	if r := e.where("settlement", "PAY-2"); debitView(t, r).EvidenceCount != 1 || r.Verdict.Code == inspect.DuplicateEffect {
		t.Fatalf("PAY-2: verdict %s, debit %+v", r.Verdict.Code, debitView(t, r))
	}
}

// A binlog server that accepts the connection and stops answering (here
// in the middle of the handshake, behind a proxy): `where` returns within
// the timeout with the debit unknown and the report partial, never hangs
// (it hung forever before, past --timeout and SIGINT).
func TestSeed000BinlogServerStalls(t *testing.T) {
	srv := binlogSrv.Get(t)
	notify := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"status":"APPLIED","count":1}`)
	}))
	t.Cleanup(notify.Close)
	db := srv.MySQL(t)
	target := strings.SplitN(strings.SplitN(db.DSN, "tcp(", 2)[1], ")", 2)[0]
	p := testenv.NewStallProxy(t, target, 300)
	e := newTenvOn(t, db, td("config", "seed000.yaml"), []string{td("schema", "seed000.sql")}, []string{"settlement-event"},
		map[string]string{"OPCTL_NOTIFY_URL": notify.URL, "OPCTL_BINLOG_DSN": strings.Replace(db.DSN, target, p.Addr, 1)})
	e.db.Exec(t, "INSERT INTO account_balance (account_id, balance) VALUES (1001, 500.00)")
	e.seedMessage("PAY-1", 1001, "30.00")
	e.seedDebit("PAY-1", 1001, "30.00")
	done := make(chan inspect.Report, 1)
	go func() { done <- e.where("settlement", "PAY-1") }()
	select {
	case r := <-done:
		d := debitView(t, r)
		if d.Status != inspect.StepUnknown || !r.Partial || !strings.Contains(r.Sources["binlog"], "no answer within") {
			t.Fatalf("debit %s partial %v sources %v", d.Status, r.Partial, r.Sources)
		}
		if code := inspect.ExitCode([]inspect.Report{r}); code != 6 {
			t.Fatalf("exit %d, want 6 (partial)", code)
		}
	case <-time.After(hangLimit):
		t.Fatalf("where did not return within %s: it hangs", hangLimit)
	}
}

// hangLimit bounds a triage through a stalled server (far past its
// timeout: a bound on a hang, not a measure of speed).
const hangLimit = 60 * time.Second
