package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
)

// isTerminal reports a terminal status of the anchored state tables
// (opctl.yaml.tmpl: terminal DONE; failed FAILED for settlement, ROLLED_BACK
// for fulfilment).
func isTerminal(status string) bool {
	switch status {
	case "DONE", "FAILED", "ROLLED_BACK":
		return true
	}
	return false
}

// anchor is docs/design.md's consumer algorithm over one state table and one
// intent table (pay_state/pay_intent, ful_state/ful_intent). Table names are
// constants of this package, never input.
type anchor struct {
	c             *Consumer
	state, intent string
	initial       string
	steps         []anchoredStep
}

// anchoredStep is one step: run does it (and its state CAS) given that every
// step before it is done.
type anchoredStep struct {
	name, doneStatus string
	run              func(ctx context.Context, d *delivery) result
}

// stateRow is what an attempt knows of the operation's state row.
type stateRow struct {
	status    string
	version   int64
	owner     sql.NullString
	leaseLive bool
	// held: this delivery holds the lease at this version.
	held bool
}

// parkError is an effect that can never succeed as things stand (an unknown
// account, a replay record without the fields a step needs): the operation is
// parked for an operator rather than retried forever.
type parkError struct{ why string }

func (e parkError) Error() string { return e.why }

func (a *anchor) stepNames() []string {
	names := make([]string, len(a.steps))
	for i, s := range a.steps {
		names[i] = s.name
	}
	return names
}

// process is one attempt: claim, resume after the last done step, finish.
func (a *anchor) process(ctx context.Context, d *delivery) result {
	c := a.c
	if r := a.claim(ctx, d); r.out != outNext {
		return r
	}
	start := 0
	if d.st.status != a.initial {
		i := slices.IndexFunc(a.steps, func(s anchoredStep) bool { return s.doneStatus == d.st.status })
		if i < 0 {
			return a.park(ctx, d, fmt.Sprintf("unknown status %q in %s", d.st.status, a.state))
		}
		start = i + 1
	}
	for i, s := range a.steps {
		if i < start {
			c.emitD(d, "step_skipped", s.name, "state is "+d.st.status)
			continue
		}
		if !c.beforeStep(d, s.name) {
			return stopped()
		}
		if r := s.run(ctx, d); r.out != outNext {
			return r
		}
		if c.afterStep(d, s.name) {
			return result{out: outDied}
		}
	}
	c.emitD(d, "done", "", "")
	return done()
}

// claim is DESIGN step 1: make sure the state row exists (inserted when
// absent), then take the lease with a CAS on the version. A terminal
// operation is done without touching anything (not even a no-op write); a live lease of another owner (or of another goroutine
// of this process: a zombie of a revoked partition) is busy.
func (a *anchor) claim(ctx context.Context, d *delivery) result {
	c := a.c
	for range 5 {
		st, err := a.load(ctx, d.m.BizID)
		if err != nil {
			return a.c.failed(ctx, err)
		}
		if st == nil {
			_, err := c.cfg.DB.ExecContext(ctx, "INSERT INTO "+a.state+
				" (biz_id, status, version, msg_id, src_partition, src_offset, attempts, created_at, updated_at)"+
				" VALUES (?, ?, 0, ?, ?, ?, 0, NOW(3), NOW(3)) ON DUPLICATE KEY UPDATE biz_id = biz_id",
				d.m.BizID, a.initial, d.m.MsgID, d.msg.Partition, d.msg.Offset)
			if err != nil {
				return a.c.failed(ctx, err)
			}
			continue
		}
		if isTerminal(st.status) {
			c.emitD(d, "already_done", "", "state is "+st.status)
			return done()
		}
		if st.owner.Valid && st.owner.String != c.cfg.ClientID && st.leaseLive {
			return busy("lease held by " + st.owner.String)
		}
		if !d.guarded {
			if !c.busy.acquire(d.m.BizID) {
				return busy("in flight in this process (" + c.cfg.ClientID + ")")
			}
			d.guarded = true
		}
		res, err := c.cfg.DB.ExecContext(ctx, "UPDATE "+a.state+
			" SET owner = ?, lease_until = NOW(3) + INTERVAL ? MICROSECOND, version = version + 1, updated_at = NOW(3)"+
			" WHERE biz_id = ? AND version = ? AND (owner IS NULL OR lease_until IS NULL OR lease_until < NOW(3) OR owner = ?)",
			c.cfg.ClientID, c.cfg.LeaseTTL.Microseconds(), d.m.BizID, st.version, c.cfg.ClientID)
		if err != nil {
			return a.c.failed(ctx, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			st.version++
			st.owner = sql.NullString{String: c.cfg.ClientID, Valid: true}
			st.held = true
			d.st = st
			return next()
		}
		// The row changed between the read and the CAS: look again.
	}
	return retryf("the state row of %s keeps changing; lease not taken", d.m.BizID)
}

// load reads the state row; nil when there is none.
func (a *anchor) load(ctx context.Context, bizID string) (*stateRow, error) {
	st := &stateRow{}
	err := a.c.cfg.DB.QueryRowContext(ctx, "SELECT status, version, owner,"+
		" (lease_until IS NOT NULL AND lease_until >= NOW(3)) FROM "+a.state+" WHERE biz_id = ?", bizID).
		Scan(&st.status, &st.version, &st.owner, &st.leaseLive)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", a.state, bizID, err)
	}
	return st, nil
}

// cas advances the state row inside tx (DESIGN step 2): status, version+1,
// the lease renewed, or cleared when final. Zero rows is errFenced.
func (a *anchor) cas(ctx context.Context, tx *sql.Tx, d *delivery, status string, final bool) error {
	if d.st == nil || !d.st.held {
		return errFenced
	}
	if final {
		return execOne(ctx, tx, "UPDATE "+a.state+
			" SET status = ?, version = version + 1, updated_at = NOW(3), owner = NULL, lease_until = NULL"+
			" WHERE biz_id = ? AND version = ? AND owner = ?",
			status, d.m.BizID, d.st.version, a.c.cfg.ClientID)
	}
	return execOne(ctx, tx, "UPDATE "+a.state+
		" SET status = ?, version = version + 1, updated_at = NOW(3), lease_until = NOW(3) + INTERVAL ? MICROSECOND"+
		" WHERE biz_id = ? AND version = ? AND owner = ?",
		status, a.c.cfg.LeaseTTL.Microseconds(), d.m.BizID, d.st.version, a.c.cfg.ClientID)
}

// advanced records a committed cas in d.
func (a *anchor) advanced(d *delivery, status string, final bool) {
	d.st.version++
	d.st.status = status
	if final {
		d.st.held = false
		d.st.owner = sql.NullString{}
	}
}

// local runs effect and the CAS to status in one transaction; a lost CAS
// rolls the effect back. effect's note is the step_done detail.
func (a *anchor) local(ctx context.Context, d *delivery, step, status string, final bool, effect func(tx *sql.Tx) (note string, err error)) result {
	note := ""
	err := inTx(ctx, a.c.cfg.DB, func(tx *sql.Tx) error {
		n, err := effect(tx)
		if err != nil {
			return err
		}
		note = n
		return a.cas(ctx, tx, d, status, final)
	})
	if err != nil {
		return a.txErr(ctx, d, step, err)
	}
	a.advanced(d, status, final)
	a.c.emitD(d, "step_done", step, note)
	return next()
}

// txErr turns a failed transaction into the attempt's result.
func (a *anchor) txErr(ctx context.Context, d *delivery, step string, err error) result {
	var pe parkError
	switch {
	case errors.Is(err, errFenced):
		if d.st != nil {
			d.st.held = false
		}
		a.c.emitD(d, "fenced", step, "state CAS lost; the transaction was rolled back")
		return retryf("%s: %v", step, err)
	case errors.As(err, &pe):
		return a.park(ctx, d, pe.why)
	default:
		return a.c.failed(ctx, fmt.Errorf("%s: %w", step, err))
	}
}

// park leaves the operation to an operator: last_error says why, attempts+1,
// lease cleared, status unchanged. The record is then committed.
func (a *anchor) park(ctx context.Context, d *delivery, why string) result {
	if len(why) > 512 {
		why = why[:512]
	}
	err := inTx(ctx, a.c.cfg.DB, func(tx *sql.Tx) error {
		if d.st == nil || !d.st.held {
			return errFenced
		}
		return execOne(ctx, tx, "UPDATE "+a.state+
			" SET last_error = ?, attempts = attempts + 1, owner = NULL, lease_until = NULL, version = version + 1, updated_at = NOW(3)"+
			" WHERE biz_id = ? AND version = ? AND owner = ?",
			why, d.m.BizID, d.st.version, a.c.cfg.ClientID)
	})
	if errors.Is(err, errFenced) {
		if d.st != nil {
			d.st.held = false
		}
		a.c.emitD(d, "fenced", "", "park: state CAS lost")
		return retryf("park: %v", err)
	}
	if err != nil {
		return a.c.failed(ctx, fmt.Errorf("park: %w", err))
	}
	d.st.version++
	d.st.held = false
	a.c.emitD(d, "parked", "", why)
	return result{out: outParked, detail: why}
}

// release gives the lease back (a stopping or revoked consumer).
func (a *anchor) release(ctx context.Context, d *delivery) {
	if d.st == nil || !d.st.held {
		return
	}
	res, err := a.c.cfg.DB.ExecContext(ctx, "UPDATE "+a.state+
		" SET owner = NULL, lease_until = NULL, version = version + 1, updated_at = NOW(3)"+
		" WHERE biz_id = ? AND version = ? AND owner = ?",
		d.m.BizID, d.st.version, a.c.cfg.ClientID)
	if err != nil {
		return
	}
	if n, _ := res.RowsAffected(); n == 1 {
		d.st.version++
		d.st.held = false
		a.c.emitD(d, "lease_released", "", "")
	}
}

// remoteSpec is one remote step of an anchored pipeline.
type remoteSpec struct {
	step, status string
	base         string
	// probe: the downstream answers GET /status?request_id=.
	probe bool
	// final: the last step; its CAS clears the lease.
	final   bool
	payload any
}

// intentRow is a step intent as read.
type intentRow struct {
	found, acked bool
}

func loadIntent(ctx context.Context, db *sql.DB, table, requestID string) (intentRow, error) {
	var acked sql.NullTime
	err := db.QueryRowContext(ctx, "SELECT acked_at FROM "+table+" WHERE request_id = ?", requestID).Scan(&acked)
	if errors.Is(err, sql.ErrNoRows) {
		return intentRow{}, nil
	}
	if err != nil {
		return intentRow{}, fmt.Errorf("read %s %s: %w", table, requestID, err)
	}
	return intentRow{found: true, acked: acked.Valid}, nil
}

// remote is DESIGN step 3. Request id biz_id:step, reused on every attempt.
// Transaction A writes the intent (or bumps its attempt) under a state CAS, so
// that only the lease holder at the current version may send; the call;
// transaction B acks the intent and advances the state. An unacked intent
// found by a later attempt is an unknown outcome: probed when the service can
// be asked (APPLIED → ack and advance, NOT_FOUND → call again with the same
// request id, anything else → park), parked when it cannot. A call that fails
// leaves the intent unacked: retried (and so probed) when the service can be
// asked, parked when it cannot.
func (a *anchor) remote(ctx context.Context, d *delivery, rs remoteSpec) result {
	c := a.c
	rid := d.m.BizID + ":" + rs.step
	in, err := loadIntent(ctx, c.cfg.DB, a.intent, rid)
	if err != nil {
		return a.c.failed(ctx, err)
	}
	switch {
	case in.acked:
		// Confirmed earlier; only the state is behind (opctl rewound it).
		if r := a.local(ctx, d, rs.step, rs.status, rs.final, func(*sql.Tx) (string, error) {
			return "intent " + rid + " was already acked", nil
		}); r.out != outNext {
			return r
		}
		return next()
	case in.found:
		if !rs.probe {
			return a.park(ctx, d, fmt.Sprintf("unknown outcome: %s %s", rs.step, rid))
		}
		ans, perr := c.probe(ctx, rs.base, rid)
		if c.killed.Load() {
			return stopped()
		}
		if perr != nil {
			c.emitD(d, "probe", rs.step, perr.Error())
		} else {
			c.emitD(d, "probe", rs.step, ans)
		}
		switch {
		case perr == nil && ans == probeApplied:
			return a.ack(ctx, d, rs, rid, "APPLIED (probe)")
		case perr == nil && ans == probeNotFound:
			err := inTx(ctx, c.cfg.DB, func(tx *sql.Tx) error {
				if err := execOne(ctx, tx, "UPDATE "+a.intent+" SET attempt = attempt + 1, sent_at = NOW(3)"+
					" WHERE request_id = ? AND acked_at IS NULL", rid); err != nil {
					return err
				}
				return a.cas(ctx, tx, d, d.st.status, false)
			})
			if err != nil {
				return a.txErr(ctx, d, rs.step, err)
			}
			a.advanced(d, d.st.status, false)
		default:
			said := ans
			if perr != nil {
				said = perr.Error()
			}
			return a.park(ctx, d, fmt.Sprintf("unknown outcome: %s %s (probe: %s)", rs.step, rid, said))
		}
	default:
		err := inTx(ctx, c.cfg.DB, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+a.intent+
				" (request_id, biz_id, step, attempt, sent_at) VALUES (?, ?, ?, 1, NOW(3))",
				rid, d.m.BizID, rs.step); err != nil {
				if isDup(err) {
					return errFenced
				}
				return err
			}
			return a.cas(ctx, tx, d, d.st.status, false)
		})
		if err != nil {
			return a.txErr(ctx, d, rs.step, err)
		}
		a.advanced(d, d.st.status, false)
	}

	ans, err := c.call(ctx, rs.base, rid, d.m.BizID, rs.payload)
	if err != nil {
		if c.killed.Load() {
			return stopped()
		}
		if !rs.probe {
			return a.park(ctx, d, fmt.Sprintf("unknown outcome: %s %s", rs.step, rid))
		}
		return retryf("%s: %v (intent %s left unacked)", rs.step, err, rid)
	}
	return a.ack(ctx, d, rs, rid, ans.Status)
}

// ack is transaction B: ack the intent, advance the state.
func (a *anchor) ack(ctx context.Context, d *delivery, rs remoteSpec, rid, res string) result {
	return a.local(ctx, d, rs.step, rs.status, rs.final, func(tx *sql.Tx) (string, error) {
		if err := execOne(ctx, tx, "UPDATE "+a.intent+" SET acked_at = NOW(3), result = ?"+
			" WHERE request_id = ? AND acked_at IS NULL", res, rid); err != nil {
			return "", err
		}
		return res, nil
	})
}
