package repair

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/probe"
)

// TestApplyRacesConsumer applies a two-action plan (two reversals of a
// triple debit) while a consumer works the same operation, 200 times. The
// consumer, at a random moment, either advances the state with a CAS and
// writes the ledger row in the same transaction, or runs the debit once
// more (a naive redelivery), or takes the lease, or does nothing. Every
// apply must either complete or stop with a refusal (exit 5) having applied
// a prefix of the plan, each action whole; the money and audit invariants
// hold after every iteration.
func TestApplyRacesConsumer(t *testing.T) {
	e := newTenv(t, td("config", "settlement.yaml"),
		[]string{td("schema", "settlement.sql")}, []string{"settlement-event"}, nil)
	// Kafka is left out: the read is partial on Kafka only, which a
	// duplicate-effect plan does not need; each iteration stays fast.
	col := &sources.Collector{DB: e.cl.Reader, Prober: probe.New(time.Second), AuditTable: e.cfg.Audit.AuditTable(), Timeout: 5 * time.Second, KafkaMissing: "left out by the test"}
	svc := &Service{Config: e.cfg, Triage: &triage.Service{Config: e.cfg, Collector: col}, Collector: col, Prober: col.Prober, AuditLog: e.cl.Reader, Store: e.svc.Store}
	st, err := svc.Store()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	const iterations = 200
	counts := map[string]int{}
	for it := 0; it < iterations; it++ {
		e.db.Exec(t, `DELETE FROM biz_operation; DELETE FROM balance_journal; DELETE FROM ledger_entry; DELETE FROM account_balance; DELETE FROM opctl_audit; DELETE FROM opctl_audit_attempt;
INSERT INTO account_balance VALUES (1, 970.00);
INSERT INTO biz_operation (biz_id, status, version, msg_id, created_at, updated_at) VALUES ('R-1', 'DEBIT_DONE', 2, 'm-r', NOW(3), NOW(3));
INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('R-1', 1, -10.00, 'DEBIT', NOW(3)), ('R-1', 1, -10.00, 'DEBIT', NOW(3)), ('R-1', 1, -10.00, 'DEBIT', NOW(3));`)
		plan, op, err := svc.PlanID(ctx, "R-1", "settlement", plans.Options{Reason: "race", Operator: "race"})
		if err != nil {
			t.Fatalf("iteration %d: plan (%+v): %v", it, op, err)
		}
		if len(plan.Actions) != 2 {
			t.Fatalf("iteration %d: %d actions", it, len(plan.Actions))
		}
		mode := it % 4
		var wg sync.WaitGroup
		var consumerErr error
		delay := time.Duration(rand.IntN(5000)) * time.Microsecond
		wg.Go(func() {
			time.Sleep(delay)
			consumerErr = consumer(ctx, e, mode)
		})
		ap := &Applier{Config: e.cfg, Store: st, Collector: col, Operator: "race"}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		res, err := ap.Apply(ctx, plan)
		wg.Wait()
		if consumerErr != nil {
			t.Fatalf("iteration %d: consumer: %v", it, consumerErr)
		}
		var rf *plans.RefusedError
		name := [...]string{"cas-advance", "double-debit", "lease", "idle"}[mode]
		switch {
		case err == nil && res.Outcome == "applied":
			counts["completed"]++
			counts[name+": completed"]++
		case errors.As(err, &rf):
			counts["refused"]++
			counts[name+": refused "+rf.Code+" at action "+itoa(rf.Action)]++
		default:
			t.Fatalf("iteration %d (consumer mode %d): neither applied nor refused: %v %+v", it, mode, err, res)
		}
		checkRaceInvariants(t, e, it, res)
	}
	t.Logf("%d iterations: %v", iterations, counts)
	if counts["completed"] == 0 || counts["completed"] == iterations {
		t.Errorf("the race never went one way or the other: %v", counts)
	}
}

// consumer plays one concurrent consumer action on R-1.
func consumer(ctx context.Context, e *tenv, mode int) error {
	db := e.db.SQL
	for attempt := 0; attempt < 20; attempt++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		var version int64
		var status string
		if err := tx.QueryRowContext(ctx, "SELECT status, version FROM biz_operation WHERE biz_id = 'R-1'").Scan(&status, &version); err != nil {
			tx.Rollback()
			return err
		}
		switch mode {
		case 0: // the anchored consumer resumes: ledger + state CAS in one transaction
			if _, err = tx.ExecContext(ctx, "INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES ('R-1', 'OUT', 10.00, NOW(3))"); err == nil {
				var n int64
				r, err2 := tx.ExecContext(ctx, "UPDATE biz_operation SET status = 'LEDGER_DONE', version = version + 1, updated_at = NOW(3) WHERE biz_id = 'R-1' AND version = ?", version)
				if err2 == nil {
					n, _ = r.RowsAffected()
					if n == 0 {
						tx.Rollback()
						continue // lost the CAS: re-read
					}
				}
				err = err2
			}
		case 1: // a naive redelivery debits once more
			if _, err = tx.ExecContext(ctx, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('R-1', 1, -10.00, 'DEBIT', NOW(3))"); err == nil {
				_, err = tx.ExecContext(ctx, "UPDATE account_balance SET balance = balance - 10.00 WHERE account_id = 1")
			}
		case 2: // a consumer takes the lease
			_, err = tx.ExecContext(ctx, "UPDATE biz_operation SET owner = 'c-race', lease_until = NOW(3) + INTERVAL 2 SECOND, version = version + 1 WHERE biz_id = 'R-1' AND version = ?", version)
		case 3:
		}
		if err != nil {
			tx.Rollback()
			if isRetryable(err) {
				continue
			}
			return err
		}
		if err := tx.Commit(); err != nil {
			if isRetryable(err) {
				continue
			}
			return err
		}
		return nil
	}
	return errors.New("consumer: gave up after 20 deadlocks")
}

func isRetryable(err error) bool {
	return err != nil && (errors.Is(err, context.DeadlineExceeded) || containsAny(err.Error(), "1213", "1205"))
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if len(s) >= len(x) {
			for i := 0; i+len(x) <= len(s); i++ {
				if s[i:i+len(x)] == x {
					return true
				}
			}
		}
	}
	return false
}

func checkRaceInvariants(t *testing.T, e *tenv, it int, res *Result) {
	t.Helper()
	debits := e.count("SELECT COUNT(*) FROM balance_journal WHERE kind = 'DEBIT'")
	reversals := e.count("SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL'")
	distinct := e.count("SELECT COUNT(DISTINCT reverses_id) FROM balance_journal WHERE kind = 'REVERSAL'")
	audited := e.count("SELECT COUNT(*) FROM opctl_audit WHERE action = 'reverse' AND outcome = 'applied'")
	matched := e.count(`SELECT COUNT(*) FROM opctl_audit a JOIN balance_journal j
		ON j.kind = 'REVERSAL' AND j.reverses_id = CAST(JSON_UNQUOTE(JSON_EXTRACT(a.after_image, '$.reversed_id')) AS UNSIGNED)`)
	balance := e.str("SELECT balance FROM account_balance WHERE account_id = 1")
	want := 1000 - 10*debits + 10*reversals
	if balance != itoa(want)+".00" {
		t.Fatalf("iteration %d: balance %s, want %d (%d debits, %d reversals)", it, balance, want, debits, reversals)
	}
	if reversals != distinct || reversals != audited || matched != audited {
		t.Fatalf("iteration %d: %d reversals (%d distinct rows), %d audited, %d matched", it, reversals, distinct, audited, matched)
	}
	// The applied actions are a prefix of the plan, each one whole.
	applied := 0
	for i, a := range res.Actions {
		if a.Outcome == OutcomeApplied {
			if i != applied {
				t.Fatalf("iteration %d: action %d applied after an unapplied one: %+v", it, a.Index, res.Actions)
			}
			applied++
		}
	}
	if applied != audited {
		t.Fatalf("iteration %d: %d actions reported applied, %d audited", it, applied, audited)
	}
	if res.Outcome == "applied" && applied != 2 {
		t.Fatalf("iteration %d: applied with %d actions", it, applied)
	}
	// The operation is never left with a live reversal of a row it no
	// longer has: every reversed row is a DEBIT of R-1.
	if n := e.count("SELECT COUNT(*) FROM balance_journal r LEFT JOIN balance_journal d ON d.id = r.reverses_id AND d.kind = 'DEBIT' WHERE r.kind = 'REVERSAL' AND d.id IS NULL"); n != 0 {
		t.Fatalf("iteration %d: %d reversals of no debit", it, n)
	}
	_ = inspect.Complete
}
