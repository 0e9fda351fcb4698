package consumer

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Fulfilment steps (opctl.yaml.tmpl, pipelines fulfilment and
// fulfilment_anchored).
const (
	stepOrderRow  = "order_row"
	stepWMSLock   = "wms_lock"
	stepLogistics = "logistics"
	stepNotice    = "notice"
)

func fulfilmentSteps() []string {
	return []string{stepOrderRow, stepWMSLock, stepLogistics, stepNotice}
}

// fulfilmentPayload is what WMS and logistics receive.
func fulfilmentPayload(m Message) map[string]any {
	return map[string]any{"sku": m.SKU, "qty": m.Qty}
}

// noticePayload is the outbox row's payload.
func noticePayload(m Message) string {
	b, _ := json.Marshal(map[string]any{"biz_id": m.BizID, "msg_id": m.MsgID, "text": "order " + m.BizID + " is on its way"})
	return string(b)
}

// fulfilmentNaive is seed 001's consumer: the order row guarded by a unique
// key, WMS and logistics called with a new request id on every attempt, no
// intents; an RPC timeout fails the attempt, which is retried from the top
// by the same member (so WMS is called again: the double lock).
type fulfilmentNaive struct{ c *Consumer }

func (p *fulfilmentNaive) steps() []string                    { return fulfilmentSteps() }
func (p *fulfilmentNaive) release(context.Context, *delivery) {}

func (p *fulfilmentNaive) process(ctx context.Context, d *delivery) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	if _, err := db.ExecContext(ctx, "INSERT INTO fulfil_state (biz_id, status, version, msg_id, src_partition, src_offset, created_at, updated_at)"+
		" VALUES (?, 'RECEIVED', 0, ?, ?, ?, NOW(3), NOW(3)) ON DUPLICATE KEY UPDATE biz_id = biz_id",
		m.BizID, m.MsgID, d.msg.Partition, d.msg.Offset); err != nil {
		return c.failed(ctx, err)
	}
	status := func(s string) func() error {
		return func() error {
			_, err := db.ExecContext(ctx, "UPDATE fulfil_state SET status = ?, version = version + 1, updated_at = NOW(3) WHERE biz_id = ?", s, m.BizID)
			return err
		}
	}
	remote := func(base, name string) func() (string, bool, error) {
		return c.freshCall(ctx, base, name, m, fulfilmentPayload(m))
	}
	for _, s := range []struct {
		name, done string
		effect     func() (string, bool, error)
	}{
		{stepOrderRow, "DB_WRITTEN", func() (string, bool, error) {
			_, err := db.ExecContext(ctx, "INSERT INTO fulfil_order (biz_id, status, created_at) VALUES (?, 'CREATED', NOW(3))", m.BizID)
			if isDup(err) {
				return "unique key uk_biz: already written", true, nil
			}
			return "", false, err
		}},
		{stepWMSLock, "WMS_CONFIRMED", remote(c.cfg.Services.WMS, stepWMSLock)},
		{stepLogistics, "LOGISTICS_CONFIRMED", remote(c.cfg.Services.Logistics, stepLogistics)},
		{stepNotice, "DONE", func() (string, bool, error) {
			_, err := db.ExecContext(ctx, "INSERT INTO fulfil_outbox (biz_id, kind, payload, created_at) VALUES (?, 'notice', ?, NOW(3))", m.BizID, noticePayload(m))
			return "", false, err
		}},
	} {
		if r := c.naiveStep(ctx, d, s.name, s.effect, status(s.done)); r.out != outNext {
			return r
		}
	}
	c.emitD(d, "done", "", "")
	return done()
}

// fulfilmentAnchored is docs/design.md over ful_state, ful_order, ful_intent and
// ful_outbox. WMS can be probed; the logistics provider cannot, so an
// unknown logistics outcome is parked for an operator, never called twice.
type fulfilmentAnchored struct{ a *anchor }

func newFulfilmentAnchored(c *Consumer) *fulfilmentAnchored {
	p := &fulfilmentAnchored{}
	p.a = &anchor{c: c, state: "ful_state", intent: "ful_intent", initial: "RECEIVED"}
	p.a.steps = []anchoredStep{
		{name: stepOrderRow, doneStatus: "DB_WRITTEN", run: p.orderRow},
		{name: stepWMSLock, doneStatus: "WMS_CONFIRMED", run: p.wmsLock},
		{name: stepLogistics, doneStatus: "LOGISTICS_CONFIRMED", run: p.logistics},
		{name: stepNotice, doneStatus: "DONE", run: p.notice},
	}
	return p
}

func (p *fulfilmentAnchored) steps() []string { return p.a.stepNames() }
func (p *fulfilmentAnchored) release(ctx context.Context, d *delivery) {
	p.a.release(ctx, d)
}
func (p *fulfilmentAnchored) process(ctx context.Context, d *delivery) result {
	return p.a.process(ctx, d)
}

func (p *fulfilmentAnchored) orderRow(ctx context.Context, d *delivery) result {
	return p.a.local(ctx, d, stepOrderRow, "DB_WRITTEN", false, func(tx *sql.Tx) (string, error) {
		_, err := tx.ExecContext(ctx, "INSERT INTO ful_order (biz_id, status, created_at) VALUES (?, 'CREATED', NOW(3))", d.m.BizID)
		if isDup(err) {
			return "order row already there", nil
		}
		return "", err
	})
}

func (p *fulfilmentAnchored) wmsLock(ctx context.Context, d *delivery) result {
	return p.a.remote(ctx, d, remoteSpec{step: stepWMSLock, status: "WMS_CONFIRMED", base: p.a.c.cfg.Services.WMS,
		probe: true, payload: fulfilmentPayload(d.m)})
}

func (p *fulfilmentAnchored) logistics(ctx context.Context, d *delivery) result {
	return p.a.remote(ctx, d, remoteSpec{step: stepLogistics, status: "LOGISTICS_CONFIRMED", base: p.a.c.cfg.Services.Logistics,
		probe: false, payload: fulfilmentPayload(d.m)})
}

// notice: the outbox row in the same transaction as the CAS to DONE, which
// clears the lease.
func (p *fulfilmentAnchored) notice(ctx context.Context, d *delivery) result {
	return p.a.local(ctx, d, stepNotice, "DONE", true, func(tx *sql.Tx) (string, error) {
		_, err := tx.ExecContext(ctx, "INSERT INTO ful_outbox (biz_id, kind, payload, created_at) VALUES (?, 'notice', ?, NOW(3))", d.m.BizID, noticePayload(d.m))
		return "", err
	})
}

// Seed 001's statuses of fulfil_order.status (its attempt 3).
const (
	seedProcessing = "PROCESSING"
	seedDone       = "DONE"
)

// fulfilmentSeed is seed 001's consumer on the seed's own tables
// (testdata/schema/seed001.sql), with their attempt 3: step 1 writes the
// business row with status PROCESSING (its unique biz_id, order number +
// event type, stops a second row, which is taken as "already written"),
// WMS and logistics are called with a new request id on every attempt and
// nothing records them, and the outbox notice is written with the update
// to DONE in one transaction. A redelivered record whose row is DONE is
// left alone; one whose row is PROCESSING runs again from the top ("only
// the whole message can be rerun"), so WMS is called again: the double
// lock. The offset is committed after the last step.
type fulfilmentSeed struct{ c *Consumer }

func (p *fulfilmentSeed) steps() []string                    { return fulfilmentSteps() }
func (p *fulfilmentSeed) release(context.Context, *delivery) {}

// seedOrder splits a seed 001 biz id, order number + ":" + event type.
func seedOrder(bizID string) (orderNo, event string, err error) {
	orderNo, event, ok := strings.Cut(bizID, ":")
	if !ok || orderNo == "" || event == "" {
		return "", "", fmt.Errorf("seed 001 biz_id %q is not <order number>:<event type>", bizID)
	}
	return orderNo, event, nil
}

func (p *fulfilmentSeed) process(ctx context.Context, d *delivery) result {
	c, db, m := p.c, p.c.cfg.DB, d.m
	orderNo, event, err := seedOrder(m.BizID)
	if err != nil {
		return invalid(err.Error())
	}
	var status string
	err = db.QueryRowContext(ctx, "SELECT status FROM fulfil_order WHERE biz_id = ?", m.BizID).Scan(&status)
	switch {
	case err == nil && status == seedDone:
		c.emitD(d, "already_done", "", "fulfil_order status DONE")
		return done()
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return c.failed(ctx, err)
	}
	none := func() error { return nil } // the row is the only marker
	remote := func(base, name string) func() (string, bool, error) {
		return c.freshCall(ctx, base, name, m, fulfilmentPayload(m))
	}
	for _, s := range []struct {
		name   string
		effect func() (string, bool, error)
	}{
		{stepOrderRow, func() (string, bool, error) {
			_, err := db.ExecContext(ctx, "INSERT INTO fulfil_order (biz_id, order_no, event_type, order_status, status, created_at, updated_at)"+
				" VALUES (?, ?, ?, ?, ?, NOW(3), NOW(3))", m.BizID, orderNo, event, event, seedProcessing)
			if isDup(err) {
				return "unique key uk_biz: already written", true, nil
			}
			return "PROCESSING", false, err
		}},
		{stepWMSLock, remote(c.cfg.Services.WMS, stepWMSLock)},
		{stepLogistics, remote(c.cfg.Services.Logistics, stepLogistics)},
		{stepNotice, func() (string, bool, error) {
			return "DONE", false, inTx(ctx, db, func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, "INSERT INTO outbox (biz_id, kind, payload, created_at) VALUES (?, 'notice', ?, NOW(3))", m.BizID, noticePayload(m)); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "UPDATE fulfil_order SET status = ?, updated_at = NOW(3) WHERE biz_id = ?", seedDone, m.BizID)
				return err
			})
		}},
	} {
		if r := c.naiveStep(ctx, d, s.name, s.effect, none); r.out != outNext {
			return r
		}
	}
	c.emitD(d, "done", "", "")
	return done()
}
