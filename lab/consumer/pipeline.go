package consumer

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-sql-driver/mysql"
)

// pipeline is one kind × design: how one attempt at a record goes.
type pipeline interface {
	// process makes one attempt at d's operation.
	process(ctx context.Context, d *delivery) result
	// steps are the pipeline's step names, in order.
	steps() []string
	// release gives back what an abandoned attempt holds (an anchored
	// lease) when the consumer stops or the partition is revoked.
	release(ctx context.Context, d *delivery)
}

func newPipeline(c *Consumer) pipeline {
	switch {
	case c.cfg.Kind == Settlement && c.cfg.Design == Naive:
		return &settlementNaive{c: c}
	case c.cfg.Kind == Settlement && c.cfg.Design == Seed:
		return &settlementSeed{c: c}
	case c.cfg.Kind == Settlement:
		return newSettlementAnchored(c)
	case c.cfg.Kind == Fulfilment && c.cfg.Design == Naive:
		return &fulfilmentNaive{c: c}
	case c.cfg.Kind == Fulfilment && c.cfg.Design == Seed:
		return &fulfilmentSeed{c: c}
	case c.cfg.Kind == Fulfilment:
		return newFulfilmentAnchored(c)
	case c.cfg.Design == Naive:
		return &ordersNaive{c: c}
	case c.cfg.Design == Seed:
		return &ordersSeed{c: c}
	default:
		return &ordersAnchored{c: c}
	}
}

// decoder is a pipeline whose records are not the lab's Message JSON
// (seed 003's order events): it decodes its own.
type decoder interface {
	decode(msg *sarama.ConsumerMessage) (Message, error)
}

// delivery is one record being handled.
type delivery struct {
	msg  *sarama.ConsumerMessage
	sess sarama.ConsumerGroupSession
	h    *handler
	m    Message

	// opctl replay headers (anchored consumers only act on them).
	plan, fromStep, forceEffect string

	// abandoned is set when the claim stopped waiting for this record.
	abandoned atomic.Bool

	// st is the anchored state row this delivery holds the lease on.
	st *stateRow
	// guarded: d holds its biz id in the consumer's busy set.
	guarded bool
	// sent holds the request ids this delivery itself called (their calls
	// have returned, so they are not in flight any more).
	sent map[string]bool
	// lastBusy is the last lease_busy detail emitted, to emit changes only.
	lastBusy string
}

// outcome is how an attempt (or a step) ended.
type outcome int

const (
	// outNext: the step is done, go on (the zero value).
	outNext outcome = iota
	// outDone: the operation needs nothing more; commit.
	outDone
	// outParked: left for an operator; commit.
	outParked
	// outInvalid: the record cannot be processed (poison); commit.
	outInvalid
	// outRetry: failed; try again after Timings.RetryBackoff (doubling);
	// no commit.
	outRetry
	// outBusy: someone else holds the operation; look again after
	// Timings.LeaseRecheck; no commit.
	outBusy
	// outDied: a fault killed the consumer.
	outDied
	// outStopped: the consumer is stopping or dead; abandon the record.
	outStopped
)

type result struct {
	out    outcome
	detail string
}

func next() result              { return result{} }
func done() result              { return result{out: outDone} }
func stopped() result           { return result{out: outStopped} }
func retry(err error) result    { return result{out: outRetry, detail: err.Error()} }
func busy(who string) result    { return result{out: outBusy, detail: who} }
func invalid(why string) result { return result{out: outInvalid, detail: why} }
func retryf(f string, a ...any) result {
	return result{out: outRetry, detail: fmt.Sprintf(f, a...)}
}

// handle is one record's whole life: decode, attempts until it is done (or
// the consumer stops, dies, or loses the partition), then the commit. It
// reports whether the claim may go on.
func (c *Consumer) handle(d *delivery) (keep bool) {
	decode := func() (Message, error) { return Decode(d.msg.Value) }
	if dec, ok := c.pipe.(decoder); ok {
		decode = func() (Message, error) { return dec.decode(d.msg) }
	}
	m, err := decode()
	if err != nil {
		d.m = Message{BizID: string(d.msg.Key)}
		c.emitD(d, "poison", "", err.Error())
		return c.commit(d, "poison")
	}
	for _, hdr := range d.msg.Headers {
		if hdr == nil {
			continue
		}
		switch string(hdr.Key) {
		case HeaderMsgID:
			if m.MsgID == "" {
				m.MsgID = string(hdr.Value)
			}
		case HeaderPlan:
			d.plan = string(hdr.Value)
		case HeaderFromStep:
			d.fromStep = string(hdr.Value)
		case HeaderForceEffect:
			d.forceEffect = string(hdr.Value)
		}
	}
	d.m = m
	c.emitD(d, "received", "", "")
	defer func() {
		if d.guarded {
			c.busy.release(d.m.BizID)
		}
	}()
	if m.MsgID == "" {
		c.emitD(d, "poison", "", "no msg_id in the value or the headers")
		return c.commit(d, "poison")
	}

	replayKey := ""
	if (c.cfg.Design == Anchored || c.cfg.ResumeFromState) && d.plan != "" {
		replayKey = d.plan + "\x00" + m.MsgID
		if c.replays.has(replayKey) {
			c.emitD(d, "replay_duplicate", "", d.plan)
			return c.commit(d, "")
		}
		c.emitD(d, "replay", d.fromStep+d.forceEffect, d.plan)
		if d.fromStep != "" && !slices.Contains(c.pipe.steps(), d.fromStep) {
			c.emitD(d, "replay_invalid", d.fromStep, "opctl-from-step names no step of the "+string(c.cfg.Kind)+" pipeline; resuming from the state")
			d.fromStep = ""
		}
		if d.forceEffect != "" && !slices.Contains(c.pipe.steps(), d.forceEffect) {
			c.emitD(d, "replay_invalid", d.forceEffect, "opctl-force-effect names no step of the "+string(c.cfg.Kind)+" pipeline; ignored")
			d.forceEffect = ""
		}
	}

	if c.cfg.Faults.takeCommitEarly(m.BizID) {
		if !c.commit(d, "early") {
			return false
		}
	}

	tm := c.cfg.Timings
	backoff := tm.RetryBackoff
	for {
		r := c.pipe.process(c.life, d)
		switch r.out {
		case outDone, outParked, outInvalid:
			if r.out == outInvalid {
				c.emitD(d, "poison", "", r.detail)
			}
			if replayKey != "" {
				c.replays.add(replayKey)
			}
			if c.cfg.Faults.takeDieBeforeCommit(m.BizID) {
				c.die(d, "commit")
				return false
			}
			return c.commit(d, "")
		case outDied:
			return false
		case outStopped:
			c.abandon(d)
			return false
		case outRetry, outBusy:
			wait := backoff
			if r.out == outBusy {
				wait = tm.LeaseRecheck
				if r.detail != d.lastBusy {
					c.emitD(d, "lease_busy", "", r.detail)
					d.lastBusy = r.detail
				}
			} else {
				c.emitD(d, "retry", "", r.detail)
				backoff = min(2*backoff, tm.MaxRetryBackoff)
			}
			if !c.pause(d, wait) {
				c.abandon(d)
				return false
			}
		default:
			panic(fmt.Sprintf("consumer: outcome %d", r.out))
		}
	}
}

// pause waits before another attempt; false when the attempt must not come:
// the consumer stops or dies, or the partition was revoked (another member
// owns the record now).
func (c *Consumer) pause(d *delivery, wait time.Duration) bool {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return !c.ending() && !d.abandoned.Load()
	case <-c.life.Done():
	case <-c.stopping:
	case <-d.sess.Context().Done():
	}
	return false
}

// abandon gives back what d holds, unless the consumer died (a dead process
// releases nothing: its lease runs out).
func (c *Consumer) abandon(d *delivery) {
	if !c.killed.Load() {
		c.pipe.release(c.life, d)
	}
}

// die is a fault's death: emit, then shut down like Kill (without waiting).
func (c *Consumer) die(d *delivery, step string) result {
	c.emitD(d, "died", step, "fault")
	what := "died before committing " + d.m.BizID
	if step != "commit" {
		what = "died after step " + step + " of " + d.m.BizID
	}
	c.kill(what)
	return result{out: outDied}
}

// beforeStep applies a StepDelay fault; false when the consumer stops or
// dies during it.
func (c *Consumer) beforeStep(d *delivery, step string) bool {
	if dl := c.cfg.Faults.takeDelay(d.m.BizID, step); dl > 0 {
		c.emitD(d, "delay", step, dl.String())
		if !c.sleep(dl) {
			return false
		}
	}
	return !c.killed.Load()
}

// afterStep applies a DieAfterStep fault; true when the consumer died.
func (c *Consumer) afterStep(d *delivery, step string) bool {
	if c.cfg.Faults.takeDieAfter(d.m.BizID, step) {
		c.die(d, step)
		return true
	}
	return false
}

// naiveStep is one step of a naive consumer: the StepDelay fault, the
// effect, the DieAfterStep fault (after the effect, before the state update:
// the window that leaves the state behind), the state update in its own
// statement, then the step_done (or step_skipped, when the effect reports it
// found itself already there) event.
func (c *Consumer) naiveStep(ctx context.Context, d *delivery, name string, effect func() (note string, skipped bool, err error), update func() error) result {
	if !c.beforeStep(d, name) {
		return stopped()
	}
	if c.cfg.ResumeFromState {
		done, why, err := c.naiveDone(ctx, d, name)
		if err != nil {
			return c.failed(ctx, fmt.Errorf("%s: state read: %w", name, err))
		}
		if done {
			c.emitD(d, "step_skipped", name, why)
			return next()
		}
	}
	note, skipped, err := effect()
	if err != nil {
		return c.failed(ctx, fmt.Errorf("%s: %w", name, err))
	}
	if c.afterStep(d, name) {
		return result{out: outDied}
	}
	if err := update(); err != nil {
		return c.failed(ctx, fmt.Errorf("%s: state update: %w", name, err))
	}
	if skipped {
		c.emitD(d, "step_skipped", name, note)
	} else {
		c.emitD(d, "step_done", name, note)
	}
	return next()
}

// failed is the result of an attempt that failed with err: retried (a naive
// consumer from the top, an anchored one from its state), unless the
// consumer is dying or stopping and the failure is its own doing.
func (c *Consumer) failed(ctx context.Context, err error) result {
	if ctx.Err() != nil || c.killed.Load() {
		return stopped()
	}
	return retry(err)
}

func (c *Consumer) emitD(d *delivery, what, step, detail string) {
	c.emit(Event{BizID: d.m.BizID, MsgID: d.m.MsgID, Step: step, What: what, Detail: detail,
		Partition: d.msg.Partition, Offset: d.msg.Offset})
}

// ---- MySQL helpers ----

// errFenced is a lost CAS: someone else changed the row.
var errFenced = errors.New("state CAS lost (fenced)")

func isDup(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// inTx runs fn in a transaction, committed when fn returns nil.
func inTx(ctx context.Context, db *sql.DB, fn func(tx *sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// execOne runs a statement that must change exactly one row; else errFenced.
func execOne(ctx context.Context, tx *sql.Tx, q string, args ...any) error {
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return errFenced
	}
	return nil
}

// ---- downstream HTTP ----

// callAnswer is a downstream's answer to POST /call.
type callAnswer struct {
	Status   string `json:"status"`
	EffectID int64  `json:"effect_id"`
}

// call POSTs {request_id, biz_id, payload} to base/call within RPCTimeout.
// Any answer but 200 is an error; so is no answer in time (the effect may
// nevertheless have happened).
func (c *Consumer) call(ctx context.Context, base, requestID, bizID string, payload any) (callAnswer, error) {
	body, err := json.Marshal(map[string]any{"request_id": requestID, "biz_id": bizID, "payload": payload})
	if err != nil {
		return callAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RPCTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/call", bytes.NewReader(body))
	if err != nil {
		return callAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return callAnswer{}, fmt.Errorf("POST %s/call %s: %w", base, requestID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return callAnswer{}, fmt.Errorf("POST %s/call %s: %w", base, requestID, err)
	}
	if resp.StatusCode != http.StatusOK {
		return callAnswer{}, fmt.Errorf("POST %s/call %s: HTTP %d %s", base, requestID, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var a callAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return callAnswer{}, fmt.Errorf("POST %s/call %s: %w", base, requestID, err)
	}
	if a.Status == "" {
		a.Status = "APPLIED"
	}
	return a, nil
}

// Probe answers.
const (
	probeApplied  = "APPLIED"
	probeNotFound = "NOT_FOUND"
)

// probe asks base/status about a request id: "APPLIED", "NOT_FOUND" (HTTP
// 404 or that status), another status the service gave, or an error
// (inconclusive).
func (c *Consumer) probe(ctx context.Context, base, requestID string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RPCTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status?request_id="+url.QueryEscape(requestID), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s/status %s: %w", base, requestID, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode == http.StatusNotFound {
		return probeNotFound, nil
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/status %s: HTTP %d", base, requestID, resp.StatusCode)
	}
	var a struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status == "" {
		return "", fmt.Errorf("GET %s/status %s: unreadable answer %q", base, requestID, strings.TrimSpace(string(b)))
	}
	return a.Status, nil
}

// freshCall is a naive or seed consumer's remote step: one call of base
// with a new request id on every attempt, and no intent.
func (c *Consumer) freshCall(ctx context.Context, base, step string, m Message, payload any) func() (string, bool, error) {
	return func() (string, bool, error) {
		rid := freshRequestID(m.BizID, step)
		_, err := c.call(ctx, base, rid, m.BizID, payload)
		return rid, false, err
	}
}

// freshRequestID is a naive consumer's request id: new on every attempt.
func freshRequestID(bizID, step string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return bizID + ":" + step + ":" + hex.EncodeToString(b)
}

// naiveStatuses are the state statuses a naive pipeline writes, in order:
// the initial one, then each step's done status (opctl.yaml.tmpl).
var naiveStatuses = map[Kind]struct {
	table    string
	statuses []string
}{
	Settlement: {"biz_operation", []string{"INIT", "DEBIT_DONE", "LEDGER_DONE", "DONE"}},
	Fulfilment: {"fulfil_state", []string{"RECEIVED", "DB_WRITTEN", "WMS_CONFIRMED", "LOGISTICS_CONFIRMED", "DONE"}},
}

// naiveDone reports whether a patched naive consumer must skip step name:
// an opctl replay starts at a later step, or the state row already claims
// the step done.
func (c *Consumer) naiveDone(ctx context.Context, d *delivery, name string) (bool, string, error) {
	steps := c.pipe.steps()
	i := slices.Index(steps, name)
	if d.fromStep != "" {
		if j := slices.Index(steps, d.fromStep); j >= 0 && i < j {
			return true, "opctl-from-step " + d.fromStep, nil
		}
		return false, "", nil
	}
	ns, ok := naiveStatuses[c.cfg.Kind]
	if !ok || i < 0 {
		return false, "", nil
	}
	var status string
	err := c.cfg.DB.QueryRowContext(ctx, "SELECT status FROM "+ns.table+" WHERE biz_id = ?", d.m.BizID).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", err
	}
	if k := slices.Index(ns.statuses, status); k > i {
		return true, "state " + status + " claims it done", nil
	}
	return false, "", nil
}
