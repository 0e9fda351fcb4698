package consumer

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// Orders steps: the points grant tied to PAID (the pipeline's effect_step)
// and the status update of SHIPPED.
const (
	stepPoints = "points"
	stepShip   = "ship"
)

// Idempotency actions (order_idem.action, idempotent.action).
const (
	actionDone          = "DONE"
	actionSkipped       = "SKIPPED"
	actionPendingReview = "SKIPPED_PENDING_REVIEW"
	actionPending       = "PENDING"
)

// reviewAfterSeconds is how long an early event waits before it is looked at
// again (order_idem.review_after).
const reviewAfterSeconds = 30

func ordersSteps() []string { return []string{stepPoints, stepShip} }

func pointsPayload(m Message) map[string]any {
	return map[string]any{"points": m.Points, "msg_id": m.MsgID, "event": m.Event}
}

func checkEvent(m Message) error {
	if m.Event != EventPaid && m.Event != EventShipped {
		return fmt.Errorf("order event %s of %s: event %q is neither PAID nor SHIPPED", m.MsgID, m.BizID, m.Event)
	}
	return nil
}

// orderStatus reads the entity; found is false when the order has no row.
func orderStatus(ctx context.Context, db *sql.DB, orderID string) (status string, found bool, err error) {
	err = db.QueryRowContext(ctx, "SELECT status FROM orders WHERE order_id = ?", orderID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("read order %s: %w", orderID, err)
	}
	return status, true, nil
}

// ordersNaive is seed 003's consumer: the skip is decided by status
// equality and recorded forever; the points grant has no intent.
type ordersNaive struct{ c *Consumer }

func (p *ordersNaive) steps() []string                    { return ordersSteps() }
func (p *ordersNaive) release(context.Context, *delivery) {}

func (p *ordersNaive) process(ctx context.Context, d *delivery) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	if err := checkEvent(m); err != nil {
		return invalid(err.Error())
	}
	var action string
	pending := false
	err := db.QueryRowContext(ctx, "SELECT action FROM idempotent WHERE msg_id = ?", m.MsgID).Scan(&action)
	switch {
	case err == nil && c.cfg.ResumeFromState && action == actionPending:
		pending = true // flipped by opctl: decide again
	case err == nil:
		c.emitD(d, "already_done", "", "idempotent: "+action)
		return done()
	case !errors.Is(err, sql.ErrNoRows):
		return c.failed(ctx, err)
	}
	status, _, err := orderStatus(ctx, db, m.BizID)
	if err != nil {
		return c.failed(ctx, err)
	}
	record := func(action string) error {
		if pending {
			_, err := db.ExecContext(ctx, "UPDATE idempotent SET action = ? WHERE msg_id = ? AND action = ?", action, m.MsgID, actionPending)
			return err
		}
		_, err := db.ExecContext(ctx, "INSERT INTO idempotent (msg_id, biz_id, action, created_at) VALUES (?, ?, ?, NOW(3))", m.MsgID, m.BizID, action)
		if isDup(err) {
			return nil
		}
		return err
	}
	forced := c.cfg.ResumeFromState && m.Event == EventPaid && d.forceEffect == stepPoints
	if forced {
		c.emitD(d, "forced", stepPoints, "opctl-force-effect: the order is "+status)
	}
	if status != "PAID" && !forced {
		if err := record(actionSkipped); err != nil {
			return c.failed(ctx, err)
		}
		c.emitD(d, "skipped", "", fmt.Sprintf("order %s is %q, event %s expects PAID", m.BizID, status, m.Event))
		return done()
	}
	effect := c.freshCall(ctx, c.cfg.Services.Points, stepPoints, m, pointsPayload(m))
	step := stepPoints
	if m.Event == EventShipped {
		step = stepShip
		effect = func() (string, bool, error) {
			_, err := db.ExecContext(ctx, "UPDATE orders SET status = 'SHIPPED', updated_at = NOW(3) WHERE order_id = ?", m.BizID)
			return "order SHIPPED", false, err
		}
	}
	if r := c.naiveStep(ctx, d, step, effect, func() error { return record(actionDone) }); r.out != outNext {
		return r
	}
	c.emitD(d, "done", "", "")
	return done()
}

// ordersAnchored is docs/design.md (skip decisions) over orders, order_idem and order_intent:
// skips are decided against the lifecycle CREATED < PAID < SHIPPED <
// DELIVERED (cancelled by REFUNDED, CANCELLED), say why and what they saw,
// and an early event waits for review instead of being skipped forever.
type ordersAnchored struct{ c *Consumer }

func (p *ordersAnchored) steps() []string                    { return ordersSteps() }
func (p *ordersAnchored) release(context.Context, *delivery) {}

// lifecycleRank orders the entity's statuses; -1 for a cancelling or unknown
// status.
func lifecycleRank(status string) int {
	switch status {
	case "CREATED":
		return 0
	case "PAID":
		return 1
	case "SHIPPED":
		return 2
	case "DELIVERED":
		return 3
	}
	return -1
}

func cancels(status string) bool { return status == "REFUNDED" || status == "CANCELLED" }

func (p *ordersAnchored) process(ctx context.Context, d *delivery) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	if err := checkEvent(m); err != nil {
		return invalid(err.Error())
	}
	if !d.guarded {
		if !c.busy.acquire(m.BizID) {
			return busy("in flight in this process (" + c.cfg.ClientID + ")")
		}
		d.guarded = true
	}
	var action string
	err := db.QueryRowContext(ctx, "SELECT action FROM order_idem WHERE msg_id = ?", m.MsgID).Scan(&action)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return p.c.failed(ctx, err)
	case action == actionPending || action == actionPendingReview:
		// Not terminal: flipped by opctl, or waiting for review.
	default:
		c.emitD(d, "already_done", "", "order_idem: "+action)
		return done()
	}
	status, found, err := orderStatus(ctx, db, m.BizID)
	if err != nil {
		return p.c.failed(ctx, err)
	}
	seen := sql.NullString{String: status, Valid: found}
	shown := status
	if !found {
		shown = "not found"
	}

	if m.Event == EventPaid {
		switch {
		case d.forceEffect == stepPoints:
			return p.grant(ctx, d, seen, "forced by opctl plan "+d.plan)
		case cancels(status):
			return p.decide(ctx, d, actionSkipped, fmt.Sprintf("order %s, event PAID: cancelled, no points", status), seen)
		case lifecycleRank(status) >= lifecycleRank("PAID"):
			return p.grant(ctx, d, seen, "order "+status+" is at or past PAID")
		default:
			return p.decide(ctx, d, actionPendingReview, fmt.Sprintf("order %s, event PAID: the event is early; review later", shown), seen)
		}
	}
	switch {
	case status == "PAID":
		if !c.beforeStep(d, stepShip) {
			return stopped()
		}
		err := inTx(ctx, db, func(tx *sql.Tx) error {
			if err := execOne(ctx, tx, "UPDATE orders SET status = 'SHIPPED', updated_at = NOW(3) WHERE order_id = ? AND status = 'PAID'", m.BizID); err != nil {
				return err
			}
			return p.record(ctx, tx, d, actionDone, "order PAID → SHIPPED", seen)
		})
		if err != nil {
			return p.txErr(ctx, d, stepShip, err)
		}
		c.emitD(d, "step_done", stepShip, "order SHIPPED")
		if c.afterStep(d, stepShip) {
			return result{out: outDied}
		}
		c.emitD(d, "done", "", "")
		return done()
	case cancels(status):
		return p.decide(ctx, d, actionSkipped, fmt.Sprintf("order %s, event SHIPPED: cancelled", status), seen)
	default:
		return p.decide(ctx, d, actionDone, fmt.Sprintf("order %s, event SHIPPED: nothing to change", shown), seen)
	}
}

// decide records a decision that needs no effect.
func (p *ordersAnchored) decide(ctx context.Context, d *delivery, action, reason string, seen sql.NullString) result {
	err := inTx(ctx, p.c.cfg.DB, func(tx *sql.Tx) error {
		return p.record(ctx, tx, d, action, reason, seen)
	})
	if err != nil {
		return p.txErr(ctx, d, "", err)
	}
	if action == actionDone {
		p.c.emitD(d, "done", "", reason)
	} else {
		p.c.emitD(d, "skipped", "", action+": "+reason)
	}
	return done()
}

// record writes the idempotency decision for d's message inside tx, as a CAS
// on the action it finds: a new row, or an update of a PENDING /
// SKIPPED_PENDING_REVIEW row. A terminal row (someone else decided) is
// errFenced.
func (p *ordersAnchored) record(ctx context.Context, tx *sql.Tx, d *delivery, action, reason string, seen sql.NullString) error {
	if len(reason) > 255 {
		reason = reason[:255]
	}
	review := "NULL"
	if action == actionPendingReview {
		review = fmt.Sprintf("NOW(3) + INTERVAL %d SECOND", reviewAfterSeconds)
	}
	var cur string
	err := tx.QueryRowContext(ctx, "SELECT action FROM order_idem WHERE msg_id = ? FOR UPDATE", d.m.MsgID).Scan(&cur)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err := tx.ExecContext(ctx, "INSERT INTO order_idem (msg_id, biz_id, action, reason, entity_status_seen, review_after, created_at, updated_at)"+
			" VALUES (?, ?, ?, ?, ?, "+review+", NOW(3), NOW(3))", d.m.MsgID, d.m.BizID, action, reason, seen)
		if isDup(err) {
			return errFenced
		}
		return err
	case err != nil:
		return err
	case cur == actionPending || cur == actionPendingReview:
		return execOne(ctx, tx, "UPDATE order_idem SET action = ?, reason = ?, entity_status_seen = ?, review_after = "+review+", updated_at = NOW(3)"+
			" WHERE msg_id = ? AND action = ?", action, reason, seen, d.m.MsgID, cur)
	default:
		return errFenced
	}
}

// grant is the points step: remote, with an intent (request id
// biz_id:points:msg_id) and a probe; DONE is recorded in the transaction that
// acks the intent.
func (p *ordersAnchored) grant(ctx context.Context, d *delivery, seen sql.NullString, why string) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	if !c.beforeStep(d, stepPoints) {
		return stopped()
	}
	rid := m.BizID + ":" + stepPoints + ":" + m.MsgID
	var acked sql.NullTime
	var recent bool
	err := db.QueryRowContext(ctx, "SELECT acked_at, sent_at > NOW(3) - INTERVAL ? MICROSECOND FROM order_intent WHERE request_id = ?",
		(2*c.cfg.RPCTimeout).Microseconds(), rid).Scan(&acked, &recent)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return p.c.failed(ctx, err)
	}
	switch {
	case found && acked.Valid:
		return p.ack(ctx, d, rid, "", seen, "intent "+rid+" was already acked")
	case found:
		// Unknown outcome. Without a state row there is no lease: a call
		// sent moments ago by another member may still be on its way.
		if recent && !d.sent[rid] {
			return busy("points call " + rid + " in flight")
		}
		ans, perr := c.probe(ctx, c.cfg.Services.Points, rid)
		if c.killed.Load() {
			return stopped()
		}
		said := ans
		if perr != nil {
			said = perr.Error()
		}
		c.emitD(d, "probe", stepPoints, said)
		switch {
		case perr == nil && ans == probeApplied:
			return p.ack(ctx, d, rid, "APPLIED (probe)", seen, why)
		case perr == nil && ans == probeNotFound:
			_, err := db.ExecContext(ctx, "UPDATE order_intent SET attempt = attempt + 1, sent_at = NOW(3) WHERE request_id = ? AND acked_at IS NULL", rid)
			if err != nil {
				return p.c.failed(ctx, err)
			}
		default:
			// No state row to park in: the unacked intent is the record
			// (opctl: UNKNOWN_OUTCOME).
			c.emitD(d, "parked", stepPoints, fmt.Sprintf("unknown outcome: points %s (probe: %s)", rid, said))
			return result{out: outParked}
		}
	default:
		_, err := db.ExecContext(ctx, "INSERT INTO order_intent (request_id, biz_id, step, attempt, sent_at) VALUES (?, ?, ?, 1, NOW(3))", rid, m.BizID, stepPoints)
		if isDup(err) {
			return retryf("intent %s appeared meanwhile", rid)
		}
		if err != nil {
			return p.c.failed(ctx, err)
		}
	}
	ans, err := c.call(ctx, c.cfg.Services.Points, rid, m.BizID, pointsPayload(m))
	if d.sent == nil {
		d.sent = map[string]bool{}
	}
	d.sent[rid] = true
	if err != nil {
		if c.killed.Load() {
			return stopped()
		}
		return retryf("points: %v (intent %s left unacked)", err, rid)
	}
	return p.ack(ctx, d, rid, ans.Status, seen, why)
}

// ack acks the points intent (unless res is empty: already acked) and
// records DONE, in one transaction.
func (p *ordersAnchored) ack(ctx context.Context, d *delivery, rid, res string, seen sql.NullString, why string) result {
	c := p.c
	err := inTx(ctx, c.cfg.DB, func(tx *sql.Tx) error {
		if res != "" {
			if err := execOne(ctx, tx, "UPDATE order_intent SET acked_at = NOW(3), result = ? WHERE request_id = ? AND acked_at IS NULL", res, rid); err != nil {
				return err
			}
		}
		return p.record(ctx, tx, d, actionDone, "points granted: "+why, seen)
	})
	if err != nil {
		return p.txErr(ctx, d, stepPoints, err)
	}
	if res == "" {
		c.emitD(d, "step_skipped", stepPoints, why)
	} else {
		c.emitD(d, "step_done", stepPoints, res)
	}
	if c.afterStep(d, stepPoints) {
		return result{out: outDied}
	}
	c.emitD(d, "done", "", "")
	return done()
}

func (p *ordersAnchored) txErr(ctx context.Context, d *delivery, step string, err error) result {
	if errors.Is(err, errFenced) {
		p.c.emitD(d, "fenced", step, "the order or its idempotency record changed; rolled back")
		return retryf("%s: %v", step, err)
	}
	return p.c.failed(ctx, err)
}

// ordersSeed is seed 003's consumer on the seed's own tables
// (testdata/schema/seed003.sql), its pseudo-code as written:
//
//	Order order = orderDao.selectById(msg.orderId);
//	if (order.status == msg.expectedStatus) {
//	    doSideEffect(msg);                                // PAID: the points RPC; SHIPPED: the status update
//	    idempotentDao.markProcessed(msg.msgId, Action.DONE);
//	} else {
//	    idempotentDao.markProcessed(msg.msgId, Action.SKIPPED);
//	}
//	// commit the offset
//
// after the usual look-up of msg_id in idempotent (uk_msg_id): a message
// already recorded, DONE or SKIPPED, is not processed again. It reads no
// opctl header: a republished message is decided again by status, and a
// SKIPPED record stays SKIPPED.
type ordersSeed struct{ c *Consumer }

func (p *ordersSeed) steps() []string                    { return ordersSteps() }
func (p *ordersSeed) release(context.Context, *delivery) {}

func (p *ordersSeed) decode(msg *sarama.ConsumerMessage) (Message, error) {
	return DecodeOrderEvent(msg.Value)
}

func (p *ordersSeed) process(ctx context.Context, d *delivery) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	if err := checkEvent(m); err != nil {
		return invalid(err.Error())
	}
	var action string
	err := db.QueryRowContext(ctx, "SELECT action FROM idempotent WHERE msg_id = ?", m.MsgID).Scan(&action)
	switch {
	case err == nil:
		c.emitD(d, "already_done", "", "idempotent: "+action)
		return done()
	case !errors.Is(err, sql.ErrNoRows):
		return c.failed(ctx, err)
	}
	status, _, err := orderStatus(ctx, db, m.BizID)
	if err != nil {
		return c.failed(ctx, err)
	}
	mark := func(action string) error {
		_, err := db.ExecContext(ctx, "INSERT INTO idempotent (msg_id, action, created_at) VALUES (?, ?, NOW(3))", m.MsgID, action)
		if isDup(err) {
			return nil
		}
		return err
	}
	if status != m.ExpectedStatus {
		if err := mark(actionSkipped); err != nil {
			return c.failed(ctx, err)
		}
		c.emitD(d, "skipped", "", fmt.Sprintf("order %s is %q, event %s expects %s", m.BizID, status, m.Event, m.ExpectedStatus))
		return done()
	}
	step, effect := stepPoints, c.freshCall(ctx, c.cfg.Services.Points, stepPoints, m, pointsPayload(m))
	if m.Event == EventShipped {
		step, effect = stepShip, func() (string, bool, error) {
			_, err := db.ExecContext(ctx, "UPDATE orders SET status = 'SHIPPED', updated_at = NOW(3) WHERE order_id = ?", m.BizID)
			return "order SHIPPED", false, err
		}
	}
	if r := c.naiveStep(ctx, d, step, effect, func() error { return mark(actionDone) }); r.out != outNext {
		return r
	}
	c.emitD(d, "done", "", "")
	return done()
}
