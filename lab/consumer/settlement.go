package consumer

import (
	"context"
	"database/sql"
	"fmt"
)

// Settlement steps and statuses (opctl.yaml.tmpl, pipelines settlement and
// settlement_anchored).
const (
	stepDebit  = "debit"
	stepLedger = "ledger"
	stepNotify = "notify"
)

// settlementPayload is what the risk/clearing notify receives.
func settlementPayload(m Message) map[string]any {
	return map[string]any{"account_id": m.AccountID, "amount": m.Amount}
}

func settlementFields(m Message) error {
	if m.AccountID == 0 || m.Amount == "" {
		return fmt.Errorf("settlement message %s of %s lacks account_id or amount", m.MsgID, m.BizID)
	}
	return nil
}

// settlementNaive is seed 000's consumer: an unguarded debit, a state row
// written after each effect in its own statement and never read back, a
// ledger insert stopped by its unique key, a notify with a new request id
// every time. A redelivered (or retried) record runs again from the top.
type settlementNaive struct{ c *Consumer }

func (p *settlementNaive) steps() []string {
	return []string{stepDebit, stepLedger, stepNotify}
}
func (p *settlementNaive) release(context.Context, *delivery) {}

func (p *settlementNaive) process(ctx context.Context, d *delivery) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	if err := settlementFields(m); err != nil {
		return invalid(err.Error())
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO biz_operation (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at)"+
		" VALUES (?, 'INIT', 0, ?, ?, ?, NOW(3), NOW(3)) ON DUPLICATE KEY UPDATE biz_id = biz_id",
		m.BizID, m.MsgID, d.msg.Partition, d.msg.Offset); err != nil {
		return c.failed(ctx, err)
	}
	status := func(s string) func() error {
		return func() error {
			_, err := db.ExecContext(ctx, "UPDATE biz_operation SET status = ?, version = version + 1, updated_at = NOW(3) WHERE biz_id = ?", s, m.BizID)
			return err
		}
	}
	// debit: balance and debit_log in one transaction, no idempotency guard.
	debit := func() (string, bool, error) {
		return "-" + m.Amount, false, inTx(ctx, db, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(18,2)) WHERE account_id = ?", m.Amount, m.AccountID); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, "INSERT INTO debit_log (biz_id, account_id, delta, kind, reverses_id, created_at)"+
				" VALUES (?, ?, -CAST(? AS DECIMAL(18,2)), 'DEBIT', 0, NOW(3))", m.BizID, m.AccountID, m.Amount)
			return err
		})
	}
	ledger, notify := seedLedger(ctx, db, m), seedNotify(ctx, c, m)
	for _, s := range []struct {
		name, done string
		effect     func() (string, bool, error)
	}{
		{stepDebit, "DEBIT_DONE", debit},
		{stepLedger, "LEDGER_DONE", ledger},
		{stepNotify, "DONE", notify},
	} {
		if r := c.naiveStep(ctx, d, s.name, s.effect, status(s.done)); r.out != outNext {
			return r
		}
	}
	c.emitD(d, "done", "", "")
	return done()
}

// seedLedger is seed 000's ledger step: the unique key (biz_order_id,
// direction) stops a second row, which is taken as "already done".
func seedLedger(ctx context.Context, db *sql.DB, m Message) func() (string, bool, error) {
	return func() (string, bool, error) {
		_, err := db.ExecContext(ctx, "INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', CAST(? AS DECIMAL(18,2)), NOW(3))", m.BizID, m.Amount)
		if isDup(err) {
			return "unique key uk_biz_dir: already written", true, nil
		}
		return "", false, err
	}
}

// seedNotify is seed 000's notify step: a new request id on every attempt,
// no intent.
func seedNotify(ctx context.Context, c *Consumer, m Message) func() (string, bool, error) {
	return c.freshCall(ctx, c.cfg.Services.Notify, stepNotify, m, settlementPayload(m))
}

// settlementSeed is seed 000's consumer on the seed's own tables: the debit
// is the seed's statement, `UPDATE account_balance SET balance = balance - ?
// WHERE account_id = ? AND balance >= ?` (guarded against overdraft, not
// against a second run), then the ledger insert, whose unique key
// (biz_order_id, direction) stops a second row and is taken as "already
// done", then the notify with a new request id. No journal, no state row:
// a redelivered record debits again.
type settlementSeed struct{ c *Consumer }

func (p *settlementSeed) steps() []string {
	return []string{stepDebit, stepLedger, stepNotify}
}
func (p *settlementSeed) release(context.Context, *delivery) {}

func (p *settlementSeed) process(ctx context.Context, d *delivery) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	if err := settlementFields(m); err != nil {
		return invalid(err.Error())
	}
	none := func() error { return nil } // no state to advance
	debit := func() (string, bool, error) {
		res, err := db.ExecContext(ctx, "UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(18,2)) WHERE account_id = ? AND balance >= CAST(? AS DECIMAL(18,2))",
			m.Amount, m.AccountID, m.Amount)
		if err != nil {
			return "", false, err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return "", false, fmt.Errorf("account %d: insufficient balance for %s", m.AccountID, m.Amount)
		}
		return "-" + m.Amount, false, nil
	}
	ledger, notify := seedLedger(ctx, db, m), seedNotify(ctx, c, m)
	for _, s := range []struct {
		name   string
		effect func() (string, bool, error)
	}{{stepDebit, debit}, {stepLedger, ledger}, {stepNotify, notify}} {
		if r := c.naiveStep(ctx, d, s.name, s.effect, none); r.out != outNext {
			return r
		}
	}
	c.emitD(d, "done", "", "")
	return done()
}

// settlementAnchored is docs/design.md over pay_state, balance_journal,
// pay_ledger and pay_intent.
type settlementAnchored struct{ a *anchor }

func newSettlementAnchored(c *Consumer) *settlementAnchored {
	p := &settlementAnchored{}
	p.a = &anchor{c: c, state: "pay_state", intent: "pay_intent", initial: "INIT"}
	p.a.steps = []anchoredStep{
		{name: stepDebit, doneStatus: "DEBIT_DONE", run: p.debit},
		{name: stepLedger, doneStatus: "LEDGER_DONE", run: p.ledger},
		{name: stepNotify, doneStatus: "DONE", run: p.notify},
	}
	return p
}

func (p *settlementAnchored) steps() []string { return p.a.stepNames() }
func (p *settlementAnchored) release(ctx context.Context, d *delivery) {
	p.a.release(ctx, d)
}
func (p *settlementAnchored) process(ctx context.Context, d *delivery) result {
	return p.a.process(ctx, d)
}

// debit: the journal row (its unique key makes the debit idempotent), the
// balance update and the CAS to DEBIT_DONE in one transaction.
func (p *settlementAnchored) debit(ctx context.Context, d *delivery) result {
	m := d.m
	return p.a.local(ctx, d, stepDebit, "DEBIT_DONE", false, func(tx *sql.Tx) (string, error) {
		if err := settlementFields(m); err != nil {
			return "", parkError{err.Error()}
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, reverses_id, created_at)"+
			" VALUES (?, ?, -CAST(? AS DECIMAL(18,2)), 'DEBIT', 0, NOW(3))", m.BizID, m.AccountID, m.Amount)
		if isDup(err) {
			// The unique key allows one DEBIT row per operation. One that
			// opctl reversed cannot be redone by a second row: an
			// operator decides.
			var reversed bool
			if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM balance_journal j JOIN balance_journal r"+
				" ON r.kind = 'REVERSAL' AND r.reverses_id = j.id WHERE j.biz_id = ? AND j.kind = 'DEBIT')", m.BizID).Scan(&reversed); err != nil {
				return "", err
			}
			if reversed {
				return "", parkError{fmt.Sprintf("debit of %s was reversed; the journal holds one DEBIT row per operation", m.BizID)}
			}
			return "journal row already there: balance not touched", nil
		}
		if err != nil {
			return "", err
		}
		res, err := tx.ExecContext(ctx, "UPDATE account_balance SET balance = balance - CAST(? AS DECIMAL(18,2)) WHERE account_id = ?", m.Amount, m.AccountID)
		if err != nil {
			return "", err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return "", parkError{fmt.Sprintf("debit: account %d not found", m.AccountID)}
		}
		return "-" + m.Amount, nil
	})
}

// ledger: the pay_ledger row and the CAS to LEDGER_DONE in one transaction.
func (p *settlementAnchored) ledger(ctx context.Context, d *delivery) result {
	m := d.m
	return p.a.local(ctx, d, stepLedger, "LEDGER_DONE", false, func(tx *sql.Tx) (string, error) {
		if err := settlementFields(m); err != nil {
			return "", parkError{err.Error()}
		}
		_, err := tx.ExecContext(ctx, "INSERT INTO pay_ledger (biz_order_id, direction, amount, created_at) VALUES (?, 'OUT', CAST(? AS DECIMAL(18,2)), NOW(3))", m.BizID, m.Amount)
		if isDup(err) {
			return "ledger row already there", nil
		}
		return "", err
	})
}

// notify: remote, with an intent and a probe; its CAS to DONE clears the lease.
func (p *settlementAnchored) notify(ctx context.Context, d *delivery) result {
	return p.a.remote(ctx, d, remoteSpec{step: stepNotify, status: "DONE", base: p.a.c.cfg.Services.Notify,
		probe: true, final: true, payload: settlementPayload(d.m)})
}
