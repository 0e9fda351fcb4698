package repair

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// An effect is an action whose effect is outside the database: a
// republish writes a Kafka record, a compensate_remote POSTs to a
// downstream. Neither can share a transaction with its audit row, so every
// effect runs the same way (docs/repair.md "Crash safety and resume"):
//
//  1. Its audit row is written in flight (pending: publishing,
//     compensating), with the action's guards, in one transaction, before
//     anything is sent. The row names its owner (this apply), a lease and
//     the send's timeout.
//  2. It is sent once, bounded by the apply's timeout, while the lease is
//     renewed (TouchAudit); a lease that cannot be renewed, or a plan lock
//     that was lost, cancels the send.
//  3. An answer that says it took effect moves the row to done (published,
//     applied) with what was learnt. An answer that says it did not
//     (refused) removes the row, or marks it not sent. No answer (a
//     timeout, an interrupt, an unreachable receiver) keeps the row in
//     flight with when the send can no longer take effect: the outcome is
//     unknown, not failed.
//  4. A later apply that finds the row in flight never takes it for a
//     crashed one while it may still take effect: it waits (within its own
//     timeout) until the owner's lease and the send's timeout have passed,
//     else it refuses. Then it settles it: by sending again when the
//     receiver deduplicates by the key sent (resendSafe), else by a lookup
//     (the partition for the record, the probe for the call) that tells a
//     send that took effect from one that did not, else it refuses and
//     asks for an attestation. Never by a second blind send.
//
// A new effect type (the planned redrive: an HTTP POST of a remote step,
// keyed by {biz_id}/{request_id}, sent with an idempotency key) is one more
// constructor like compensate below: its URL and body, call as its send,
// its probe as its lookup (took effect when the count rose by one, or the
// request id's probe says applied), and the step's honours_idempotency_key
// as resendSafe.
type effect struct {
	act plans.Action
	// pending is the audit outcome while the effect is under way; done
	// the outcome once it took effect.
	pending, done Outcome
	// what names the effect in messages ("the republish to topic/3").
	what string
	// facts are the after_image facts known before the send.
	facts map[string]any
	// before is the before_image, read under the guards' locks.
	before func(g *guardEnv) (map[string]any, error)
	// prepare runs before the pending row is written; its facts join the
	// row (a republish reads where in the partition to look it up later).
	// An error stops the action before anything was recorded or sent.
	prepare func(ctx context.Context) (map[string]any, error)
	// send performs the effect once within ctx: the facts of a send that
	// took effect, or an error (a *sources.SendError says whether it may
	// have taken effect; any other error counts as may have).
	send func(ctx context.Context) (map[string]any, error)
	// lookup says whether an earlier send, which can no longer take
	// effect, took effect: took, with the facts to record; not; or an
	// error when it cannot tell (a refusal asks for an attestation).
	lookup func(ctx context.Context, inflight map[string]any) (took bool, facts map[string]any, err error)
	// resendSafe: the receiver deduplicates a second send by the key sent
	// with it, so an earlier send whose outcome is unknown is settled by
	// sending again.
	resendSafe bool
	// keepRefused keeps the row in flight, marked not sent, when the
	// receiver refused the send (a republish: apply again to send it);
	// otherwise the row is removed and the guards are checked again by
	// the next apply (a compensation).
	keepRefused bool
	// settleHint says how to settle an effect by hand, for a refusal that
	// asks for an attestation.
	settleHint string
	// written is where a republish's record is, once known (send or
	// lookup): the action's result shows it.
	written *plans.Position
}

// Facts of an action in flight, in its audit row's after_image.
const (
	factOwner     = "owner"
	factLease     = "lease_ms"
	factTimeout   = "timeout_ms"
	factSettle    = "settle_ms"   // after the row's updated_at: when the ended send can no longer take effect
	factNotSent   = "not_sent"    // the receiver refused the send: nothing took effect
	factUnknown   = "unknown"     // why the outcome is unknown
	factClaimed   = "taken_from"  // the owner of an earlier apply whose send this one settled
	factSearch    = "search_from" // a republish: the partition's end before the send
	settleMargin  = 500 * time.Millisecond
	stopRowBudget = 3 * time.Second // the row's last write after an interrupt
)

// unknownError is an action whose send may have taken effect without an
// answer saying so: its row stays in flight (exit status: the cause's).
type unknownError struct {
	act  plans.Action
	what string
	err  error
}

func (e *unknownError) Error() string {
	return fmt.Sprintf("%s: %v; the audit row of action %d stays in flight, and applying the plan again settles it (once the send can no longer take effect) before anything is sent again",
		e.what, e.err, e.act.Index)
}

func (e *unknownError) Unwrap() error { return e.err }

// newOwner names one apply: who, on which host, its pid and a random
// suffix (two applies never share it).
func newOwner(operator string) string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s@%s pid %d %s", cut(operator, 64), cut(host, 64), os.Getpid(), hex.EncodeToString(b))
}

// cut is s in at most n bytes, valid UTF-8.
func cut(s string, n int) string {
	if len(s) > n {
		s = s[:n]
	}
	return strings.ToValidUTF8(s, "")
}

// effect runs e (see effect). prior is its audit row from an earlier
// apply, zero when there is none.
func (x *applyRun) effect(ctx context.Context, e *effect, prior sources.AuditDone, ar *ActionResult) error {
	if err := x.w.missingSender(e.act); err != nil {
		return err // run refuses the plan before any action; kept for safety
	}
	var inflight map[string]any
	switch Outcome(prior.Outcome) {
	case "":
		facts := map[string]any{}
		for k, v := range e.facts {
			facts[k] = v
		}
		if e.prepare != nil {
			more, err := e.prepare(ctx)
			if err != nil {
				return err
			}
			for k, v := range more {
				facts[k] = v
			}
		}
		x.own(facts)
		err := x.sqlAction(ctx, e.act, e.pending, ar, func(g *guardEnv, _ plans.Action, _ *ActionResult) (map[string]any, map[string]any, error) {
			before, err := e.before(g)
			return before, facts, err
		})
		if err != nil || ar.Outcome == OutcomeAlready {
			return err
		}
		inflight = facts
	case e.pending:
		var err error
		var settled bool
		inflight, settled, err = x.settleInFlight(ctx, e, prior, ar)
		if err != nil || settled {
			return err
		}
		switch {
		case inflight[factNotSent] == true:
			ar.Detail = "sent again: the receiver had refused an earlier apply's send"
		case e.resendSafe:
			ar.Detail = "sent again with the same idempotency key: the receiver deduplicates it, an earlier apply's send whose outcome was unknown takes effect once"
		default:
			took, facts, err := e.lookup(ctx, inflight)
			if err != nil {
				// Nothing was sent: the earlier send can no longer take
				// effect, so the next apply need not wait again.
				inflight[factSettle] = 0
				inflight[factUnknown] = err.Error()
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopRowBudget)
				defer cancel()
				return errors.Join(err, x.update(rctx, e, inflight))
			}
			if took {
				for k, v := range facts {
					inflight[k] = v
				}
				if err := x.finish(ctx, e.act, e.pending, e.done, inflight); err != nil {
					return err
				}
				ar.Outcome, ar.Published = e.done, e.written
				ar.Detail = "an earlier apply's send took effect: recorded, not sent again"
				return nil
			}
			ar.Detail = "sent again: an earlier apply's send did not take effect"
		}
	default:
		return fmt.Errorf("action %d has audit outcome %q", e.act.Index, prior.Outcome)
	}
	return x.send(ctx, e, inflight, ar)
}

// own makes facts this apply's: its owner, lease and timeout.
func (x *applyRun) own(facts map[string]any) {
	facts[factOwner] = x.owner
	facts[factLease] = x.lease.Milliseconds()
	facts[factTimeout] = x.timeout.Milliseconds()
	delete(facts, factSettle)
	delete(facts, factNotSent)
	delete(facts, factUnknown)
}

// send sends e once, with its row in flight as inflight, and records what
// the answer says.
func (x *applyRun) send(ctx context.Context, e *effect, inflight map[string]any, ar *ActionResult) error {
	start := time.Now()
	facts, err := x.withLease(ctx, e, func(ctx context.Context) (map[string]any, error) { return e.send(ctx) })
	if err == nil {
		for k, v := range facts {
			inflight[k] = v
		}
		if err := x.finish(ctx, e.act, e.pending, e.done, inflight); err != nil {
			return err
		}
		ar.Outcome, ar.Published = e.done, e.written
		return nil
	}
	// The row's last write: with the caller's context gone (an interrupt)
	// too, the truth is still recorded.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopRowBudget)
	defer cancel()
	var se *sources.SendError
	if errors.As(err, &se) && !se.MayHaveSent {
		if !e.keepRefused {
			derr := x.w.st.Do(rctx, func(tx sources.Tx) error {
				return tx.DeleteAudit(rctx, x.audit, x.plan.ID, e.act.Index, string(e.pending))
			})
			if derr != nil {
				return errors.Join(err, fmt.Errorf("the %q audit row could not be removed: %w", e.pending, derr))
			}
			return fmt.Errorf("%s: %w (nothing took effect)", e.what, err)
		}
		inflight[factNotSent] = true
		inflight[factUnknown] = err.Error()
		if uerr := x.update(rctx, e, inflight); uerr != nil {
			return errors.Join(err, uerr)
		}
		return fmt.Errorf("%s: %w (nothing took effect; the audit row stays %q: apply the plan again to send it)", e.what, err, e.pending)
	}
	// It may have taken effect: the row stays in flight, with when it can
	// no longer do so (what is left of the send's timeout).
	left := x.timeout - time.Since(start)
	inflight[factSettle] = (max(left, 0) + settleMargin).Milliseconds()
	inflight[factUnknown] = err.Error()
	uerr := x.update(rctx, e, inflight)
	return errors.Join(&unknownError{act: e.act, what: e.what, err: err}, uerr)
}

// update rewrites the after_image of an action in flight (the outcome
// stays): what its send said.
func (x *applyRun) update(ctx context.Context, e *effect, inflight map[string]any) error {
	img, err := x.afterImage(inflight)
	if err != nil {
		return err
	}
	err = x.w.st.Do(ctx, func(tx sources.Tx) error {
		return tx.SetAuditOutcome(ctx, x.audit, x.plan.ID, e.act.Index, string(e.pending), string(e.pending), img)
	})
	if err != nil {
		return fmt.Errorf("the in-flight audit row of action %d could not be updated: %w", e.act.Index, err)
	}
	return nil
}

// withLease runs send within the apply's timeout while it renews the
// lease of the action's row every Lease/3 (TouchAudit: updated_at), so
// that the row shows a live owner for as long as the send is under way.
// A renewal that fails is tried again at the next tick and never stops the
// send: no other apply settles the row before the later of its last
// renewal plus the lease and its send's timeout (inFlightFor), and the send
// cannot outlast its timeout, so a live send is never taken for a crashed
// one even when every renewal fails. The renewals stop the moment the
// send returns (an interrupt is not held up by a slow database).
func (x *applyRun) withLease(ctx context.Context, e *effect, send func(context.Context) (map[string]any, error)) (map[string]any, error) {
	sctx, cancel := context.WithTimeout(withAction(ctx, e.act.Index), x.timeout)
	defer cancel()
	every := x.lease / 3
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
			tctx, tcancel := context.WithTimeout(rctx, every)
			ok, err := x.w.st.TouchAudit(tctx, x.audit, x.plan.ID, e.act.Index, string(e.pending), x.owner)
			tcancel()
			if err == nil && !ok {
				return // no longer this apply's row: nothing to renew
			}
		}
	}()
	facts, err := send(sctx)
	stop()
	<-done
	return facts, err
}

// settleInFlight waits until an action an earlier apply left in flight can
// no longer take effect (its owner's lease ended and its send's timeout
// passed), within what this apply may wait, and makes it this apply's.
// settled is true when the row turned out done meanwhile (another apply
// finished it). A wait longer than this apply's own lease and timeout is
// refused (exit 5) with when to apply again.
func (x *applyRun) settleInFlight(ctx context.Context, e *effect, prior sources.AuditDone, ar *ActionResult) (map[string]any, bool, error) {
	maxWait := max(x.lease, x.timeout) + settleMargin
	for range 3 {
		img := map[string]any{}
		if len(prior.After) > 0 {
			if err := json.Unmarshal(prior.After, &img); err != nil {
				return nil, false, fmt.Errorf("action %d: the in-flight audit row's after_image does not decode: %w", e.act.Index, err)
			}
		}
		at := prior.UpdatedAt.Add(inFlightFor(img, x.timeout))
		wait := at.Sub(prior.Now)
		if wait > maxWait {
			owner, _ := img[factOwner].(string)
			if owner == "" {
				owner = "an earlier apply"
			}
			return nil, false, &plans.RefusedError{Code: plans.CodeInFlight, Action: e.act.Index,
				Detail: fmt.Sprintf("%s of action %d, left in flight by %s, may still take effect until %s (database time, in %s): apply the plan again after that",
					e.what, e.act.Index, plans.Printable(owner), at.Format("2006-01-02 15:04:05.000"), wait.Round(time.Second))}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, false, ctx.Err()
			case <-t.C:
			}
			rows, err := x.w.st.AuditDone(ctx, x.audit, x.plan.ID)
			if err != nil {
				return nil, false, err
			}
			var now sources.AuditDone
			for _, r := range rows {
				if r.ActionIndex == e.act.Index {
					now = r
				}
			}
			switch Outcome(now.Outcome) {
			case e.done:
				ar.Outcome, ar.Detail = OutcomeAlready, "finished by another apply while this one waited"
				return nil, true, nil
			case e.pending:
				prior = now
				continue // check again: renewed meanwhile, or now past
			default:
				return nil, false, fmt.Errorf("action %d: its audit row went away while this apply waited (now %q): apply the plan again", e.act.Index, now.Outcome)
			}
		}
		// Past: take it over, unless somebody renewed it since it was read.
		prev, _ := img[factOwner].(string)
		notSent := img[factNotSent] == true
		x.own(img)
		if prev != "" {
			img[factClaimed] = prev
		}
		if notSent {
			img[factNotSent] = true // what the earlier apply learnt stays
		}
		b, err := x.afterImage(img)
		if err != nil {
			return nil, false, err
		}
		ok, err := x.w.st.ClaimAudit(ctx, x.audit, x.plan.ID, e.act.Index, string(e.pending), prior.UpdatedAt, b)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return img, false, nil
		}
		rows, err := x.w.st.AuditDone(ctx, x.audit, x.plan.ID)
		if err != nil {
			return nil, false, err
		}
		for _, r := range rows {
			if r.ActionIndex == e.act.Index {
				prior = r
			}
		}
		if Outcome(prior.Outcome) == e.done {
			ar.Outcome, ar.Detail = OutcomeAlready, "finished by another apply while this one waited"
			return nil, true, nil
		}
	}
	return nil, false, &plans.RefusedError{Code: plans.CodeInFlight, Action: e.act.Index,
		Detail: fmt.Sprintf("%s of action %d is being renewed by another apply: it is in flight; wait for that apply to finish", e.what, e.act.Index)}
}

// inFlightFor is how long after its row's updated_at an action in flight
// may still take effect: 0 when the receiver refused it; what was left of
// its send's timeout when its apply saw the send end without an answer;
// else (the apply died, or still runs) the longer of its lease and its
// timeout, from its last renewal. A row of an opctl that recorded none of
// this counts with timeout.
func inFlightFor(img map[string]any, timeout time.Duration) time.Duration {
	ms := func(k string) (time.Duration, bool) {
		f, ok := img[k].(float64)
		return time.Duration(f) * time.Millisecond, ok
	}
	if img[factNotSent] == true {
		return 0
	}
	if d, ok := ms(factSettle); ok {
		return d
	}
	lease, _ := ms(factLease)
	if t, ok := ms(factTimeout); ok {
		timeout = t
	}
	return max(lease, timeout) + settleMargin
}

// republish is the effect of a republish action: the record, recorded
// 'publishing' with the partition's end before the send and 'published'
// with where it was written after; an unknown send is looked up in the
// partition (by its opctl-plan and msg_id headers, from that end) before
// it is ever sent again.
func (x *applyRun) republish(act plans.Action) *effect {
	spec := act.Publish
	headers := make(map[string]string, len(spec.Headers)+1)
	for k, v := range spec.Headers {
		headers[k] = v
	}
	headers[plans.HeaderPlan] = x.plan.ID
	e := &effect{act: act, pending: OutcomePublishing, done: OutcomePublished, keepRefused: true,
		what:       fmt.Sprintf("republish to %s/%d", spec.Topic, spec.Partition),
		facts:      map[string]any{"step": act.Step, "topic": spec.Topic, "partition": spec.Partition, "headers": headers, "copy": spec.Copy},
		settleHint: fmt.Sprintf("look for a record with header %s=%s in %s partition %d", plans.HeaderPlan, x.plan.ID, spec.Topic, spec.Partition)}
	e.before = x.stateImage
	e.prepare = func(ctx context.Context) (map[string]any, error) {
		end, err := x.w.pub.LogEnd(ctx, spec.Topic, spec.Partition)
		if err != nil {
			return nil, fmt.Errorf("republish: read the end of %s/%d, where the record would go, before sending it: %w (nothing was sent)", spec.Topic, spec.Partition, err)
		}
		return map[string]any{factSearch: end}, nil
	}
	published := func(part int32, off int64) map[string]any {
		e.written = &plans.Position{Topic: spec.Topic, Partition: part, Offset: off}
		f := map[string]any{"partition": part, "offset": off, "key": plans.BytesText(spec.Key)}
		if spec.FromStep != "" {
			f["from_step"] = spec.FromStep
		}
		if spec.ForceEffect != "" {
			f["force_effect"] = spec.ForceEffect
		}
		return f
	}
	e.send = func(ctx context.Context) (map[string]any, error) {
		part, off, err := x.w.pub.Publish(ctx, spec.Topic, spec.Partition, spec.Key, spec.Value, headers)
		if err != nil {
			return nil, err
		}
		return published(part, off), nil
	}
	e.lookup = func(ctx context.Context, inflight map[string]any) (bool, map[string]any, error) {
		from, ok := inflight[factSearch].(float64)
		if !ok {
			// A row of an opctl that did not record where to look: sent
			// again, as it did (consumers dedupe by opctl-plan + msg_id).
			return false, nil, nil
		}
		off, found, err := x.w.pub.FindPublished(ctx, spec.Topic, spec.Partition, int64(from), headers)
		if err != nil {
			return false, nil, fmt.Errorf("republish: an earlier apply's send may have written the record, and %s/%d could not be searched for it: %w; nothing was sent: apply the plan again when Kafka answers", spec.Topic, spec.Partition, err)
		}
		if !found {
			return false, nil, nil
		}
		return true, published(spec.Partition, off), nil
	}
	return e
}

// compensate is the effect of a compensate_remote action: the POST to the
// step's compensate URL with the Idempotency-Key <plan id>:<action index>,
// recorded 'compensating' before it and 'applied' after a 2xx answer. An
// unknown POST is settled by sending it again when the step's downstream
// honours the key (honours_idempotency_key), else by the probe, after the
// POST's timeout.
func (x *applyRun) compensate(act plans.Action) (*effect, error) {
	spec := act.Compensate
	k := x.p.StepIndex(act.Step)
	if k < 0 || x.p.Steps[k].Compensate == "" || spec == nil {
		return nil, fmt.Errorf("compensate_remote: step %s has no compensate URL in the configuration", act.Step)
	}
	s := x.p.Steps[k]
	e := x.post(act, s, "compensate_remote", s.Compensate, spec.URL, spec.RequestID, spec.ProbeCount, OutcomeCompensating)
	if len(act.Attested) > 0 {
		e.facts["attested"] = act.Attested
	}
	e.lookup = func(ctx context.Context, _ map[string]any) (bool, map[string]any, error) {
		took, known := x.compensated(ctx, act, s)
		if !known {
			return false, nil, &plans.RefusedError{Code: plans.CodeUnknownOutcome, Action: act.Index,
				Detail: fmt.Sprintf("an earlier apply stopped during the compensation POST of step %s and no probe can tell whether it took effect: %s, then record the outcome with a manual plan (opctl repair plan --action manual --attest ... -- %s)", act.Step, e.settleHint, x.plan.BizID)}
		}
		return took, nil, nil
	}
	return e, nil
}

// post is the effect of a POST to one of step s's templates (tmpl:
// compensate or redrive; shown is its URL without userinfo, as the plan
// holds it) with the body {plan_id, action_index, biz_id, step,
// request_id} and the Idempotency-Key <plan id>:<action index>, recorded
// pending before it; the caller sets its lookup.
func (x *applyRun) post(act plans.Action, s config.Step, name, tmpl, shown, requestID string, probeCount *int, pending Outcome) *effect {
	url := sources.Expand(tmpl, map[string]string{"request_id": requestID, "biz_id": x.plan.BizID}, true)
	facts := map[string]any{"step": act.Step, "url": shown}
	if requestID != "" {
		facts["request_id"] = requestID
	}
	body, _ := json.Marshal(map[string]any{"plan_id": x.plan.ID, "action_index": act.Index, "biz_id": x.plan.BizID, "step": act.Step, "request_id": requestID})
	key := fmt.Sprintf("%s:%d", x.plan.ID, act.Index)
	e := &effect{act: act, pending: pending, done: OutcomeApplied, facts: facts, resendSafe: s.HonoursIdempotencyKey,
		what:       name + ": POST " + sources.RedactURL(url),
		settleHint: fmt.Sprintf("ask the downstream of step %s whether the POST with Idempotency-Key %s took effect", act.Step, key)}
	e.before = func(g *guardEnv) (map[string]any, error) {
		before, err := x.stateImage(g)
		if err == nil && probeCount != nil {
			before["probe_count"] = *probeCount
		}
		return before, err
	}
	e.send = func(ctx context.Context) (map[string]any, error) {
		return call(ctx, x.w.post, url, body, key)
	}
	return e
}

// redrive is the effect of a redrive action: the POST to the step's
// redrive URL with the Idempotency-Key <plan id>:<action index>, the
// probe read after it (docs/repair.md#redrive). An earlier POST whose
// outcome is unknown is settled by sending it again when the downstream
// honours the key (honours_idempotency_key), else by the probe: the count
// one above the count the plan was guarded by, or the request id applied.
func (x *applyRun) redrive(act plans.Action) (*effect, error) {
	spec := act.Redrive
	k := x.p.StepIndex(act.Step)
	if k < 0 || x.p.Steps[k].Redrive == "" || spec == nil {
		return nil, fmt.Errorf("redrive: step %s has no redrive URL in the configuration", act.Step)
	}
	s := x.p.Steps[k]
	e := x.post(act, s, "redrive", s.Redrive, spec.URL, spec.RequestID, spec.ProbeCount, OutcomeRedriving)
	send := e.send
	e.send = func(ctx context.Context) (map[string]any, error) {
		facts, err := send(ctx)
		if err == nil {
			// The probe read after it, for the record.
			if r, ok := x.redriveProbe(ctx, s, spec); ok && r.Count != nil {
				facts["probe_count_after"] = *r.Count
			}
		}
		return facts, err
	}
	e.lookup = func(ctx context.Context, _ map[string]any) (bool, map[string]any, error) {
		r, ok := x.redriveProbe(ctx, s, spec)
		switch {
		case ok && spec.ProbeCount != nil && r.Count != nil && *r.Count == *spec.ProbeCount+1:
			return true, map[string]any{"probe_count_after": *r.Count}, nil
		case ok && spec.ProbeCount != nil && r.Count != nil && *r.Count == *spec.ProbeCount:
			return false, nil, nil
		case ok && spec.ProbeCount == nil && r.Outcome == sources.ProbeApplied:
			return true, nil, nil
		case ok && spec.ProbeCount == nil && r.Outcome == sources.ProbeAbsent:
			return false, nil, nil
		}
		return false, nil, &plans.RefusedError{Code: plans.CodeUnknownOutcome, Action: act.Index,
			Detail: fmt.Sprintf("an earlier apply stopped during the redrive POST of step %s and the probe cannot tell whether it took effect: %s, then record the outcome with a manual plan (opctl repair plan --action manual --attest ... -- %s)", act.Step, e.settleHint, x.plan.BizID)}
	}
	return e, nil
}

// redriveProbe reads the step's probe for a redrive; ok is false when
// there is none to read.
func (x *applyRun) redriveProbe(ctx context.Context, s config.Step, spec *plans.RedriveSpec) (sources.ProbeResult, bool) {
	if s.Probe == "" || x.rd.prober == nil {
		return sources.ProbeResult{}, false
	}
	return x.rd.prober.Probe(ctx, x.probeURL(s, spec.RequestID), s.ProbeApplied, s.ProbeAbsent), true
}

// call POSTs body to url with the idempotency key (the header
// Idempotency-Key) and reads what the answer says: a 2xx took effect; an
// error answer did not, except a gateway's 502 or 504 (the request may
// have reached the service); no answer may have.
func call(ctx context.Context, post sources.Poster, url string, body []byte, key string) (map[string]any, error) {
	pr := post.Post(ctx, url, body, map[string]string{"Idempotency-Key": key})
	switch {
	case pr.OK():
		return map[string]any{"http_status": pr.Status}, nil
	case !pr.Answered:
		return nil, &sources.SendError{Source: "the downstream", MayHaveSent: true, Err: fmt.Errorf("POST %s: %s", pr.URL, pr.Detail)}
	case pr.Status == 502 || pr.Status == 504:
		return nil, &sources.SendError{Source: "the downstream", MayHaveSent: true, Err: fmt.Errorf("POST %s answered %s from a gateway: %s", pr.URL, pr.Detail, clip(pr.Body))}
	}
	return nil, &sources.SendError{Source: "the downstream", Err: fmt.Errorf("POST %s answered %s: %s", pr.URL, pr.Detail, clip(pr.Body))}
}

// compensated asks the probe whether an earlier compensation took effect,
// once it can no longer do so: a {biz_id} count one below the count the
// plan was guarded by, or a {request_id} probe that no longer says
// applied. known is false when the probe cannot tell.
func (x *applyRun) compensated(ctx context.Context, act plans.Action, s config.Step) (took, known bool) {
	spec := act.Compensate
	if s.Probe == "" || x.rd.prober == nil {
		return false, false
	}
	r := x.rd.prober.Probe(ctx, x.probeURL(s, spec.RequestID), s.ProbeApplied, s.ProbeAbsent)
	switch {
	case spec.ProbeCount != nil && r.Count != nil && *r.Count == *spec.ProbeCount-1:
		return true, true
	case spec.ProbeCount != nil && r.Count != nil && *r.Count == *spec.ProbeCount:
		return false, true
	case spec.ProbeCount == nil && spec.RequestID != "" && r.Outcome == sources.ProbeApplied:
		return false, true
	case spec.ProbeCount == nil && spec.RequestID != "" && (r.Outcome == sources.ProbeAbsent || r.Status != ""):
		return true, true
	}
	return false, false
}
