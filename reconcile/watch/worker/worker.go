// Package worker is the recovery worker of `opctl watch --repair`
// (docs/watch.md#recovery): it repairs the flagged operations whose verdict
// it was given, one at a time, through exactly the path of `opctl repair
// plan` and `opctl repair apply` (repair.Service: plan, re-derivation,
// guarded apply, audit), only once a flag has lasted RepairAfter (a
// consumer without a lease is seen mid-way for a moment), staged like a
// canary and stopped at the first failed apply or at a verdict after a
// repair that is still unexpected once Settle has passed, with a pause file, and
// only while it holds the repair lock of its pipelines (a MySQL GET_LOCK:
// two watchers both detect, one repairs). It links no driver: the service,
// the triage, the lock and the flagged set are given by the wiring
// (cmd/watch_repair.go).
package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// Event kinds of the worker (docs/watch.md#events).
const (
	Repaired     = "repaired"
	RepairFailed = "repair_failed"
	Paused       = "paused"
)

// SourceRepair is the cause.source of a paused line that no operation's
// change caused (the pause file, a stop).
const SourceRepair = "repair"

// Outcomes of one repair: the outcome label of opctl_watch_repairs_total.
const (
	// OutcomeRepaired: applied (or finished, or found already applied),
	// and the verdict after it is one the verdict's runbook expects.
	OutcomeRepaired = "repaired"
	// OutcomeFailed: the apply was refused or failed; repairs stop.
	OutcomeFailed = "failed"
	// OutcomeUnexpected: applied, but the verdict after it is still not
	// an expected one once Settle has passed (or could not be read);
	// repairs stop.
	OutcomeUnexpected = "unexpected"
	// OutcomeSkipped: no plan was applied (it would need an attestation,
	// the planner refused, the verdict changed); repairs go on.
	OutcomeSkipped = "skipped"
)

// States of the worker: the state label of opctl_watch_repair_state.
const (
	// StateStandby: another watch holds the repair lock; this one only
	// detects and asks for the lock again every Retry.
	StateStandby = "standby"
	// StateRepairing: it holds the lock and repairs.
	StateRepairing = "repairing"
	// StatePaused: the pause file exists; no repair starts.
	StatePaused = "paused"
	// StateStopped: a repair failed or left an unexpected verdict; no
	// repair starts until the watch is restarted.
	StateStopped = "stopped"
)

// States lists the states in the documented order.
func States() []string { return []string{StateStandby, StateRepairing, StatePaused, StateStopped} }

// Stop reasons: the reason label of opctl_watch_repairs_stopped.
const (
	ReasonApplyFailed = "apply_failed"
	ReasonUnexpected  = "unexpected_verdict"
)

// OperatorPrefix starts the operator of every plan the worker makes and
// applies ("opctl-watch@host"): the audit says which repairs a watch made,
// and a plan of the worker's that stopped part-way is the only kind it
// finishes by itself.
const OperatorPrefix = "opctl-watch@"

// DefaultPerMinute is --max-repairs-per-minute's default.
const DefaultPerMinute = 6

// DefaultRepairAfter is --repair-after's default: how long an operation
// must have been flagged before the worker repairs it, and how long the
// verdict after a repair may take to settle on an expected one. It must be
// longer than the slowest operation of the consumers: a consumer without a
// lease is seen between two of its statements (its effect done, its state
// not yet updated) as STATE_BEHIND for as long as that takes, and a repair
// must race neither that nor the consumer's redelivery of a republished
// record (docs/watch.md#recovery, "Why wait").
const DefaultRepairAfter = 10 * time.Second

// DefaultPoll is how often the verdict after a repair is triaged again
// while it settles.
const DefaultPoll = 250 * time.Millisecond

// DefaultRetry is how often a standby watch asks for the repair lock again,
// and a paused one looks at the pause file.
const DefaultRetry = time.Second

// Repairable are the verdicts --repair accepts: those whose plan is made of
// guarded actions with no operator's attestation. A DUPLICATE_EFFECT whose
// step has neither reverse nor compensate (or whose extra effects cannot be
// told apart), and a republish that would redo a non-idempotent effect,
// still get a manual plan: such an operation is skipped at run time.
func Repairable() []inspect.Code {
	return []inspect.Code{inspect.StateBehind, inspect.Stranded, inspect.MissingEffect, inspect.WronglySkipped, inspect.DuplicateEffect}
}

// notRepairable says why a verdict is not accepted by --repair; "" when it
// is.
func notRepairable(c inspect.Code) string {
	switch {
	case slices.Contains(Repairable(), c):
		return ""
	case c == inspect.UnknownOutcome:
		return "its plan always needs an operator's attestation of what the downstream says (--action manual --attest)"
	case c == inspect.InFlight:
		return "a live owner holds the lease; release_lease is an operator's decision"
	case c == inspect.RepairIncomplete:
		return "a plan that stopped part-way is finished by whoever made it; the worker finishes its own by itself"
	case c == inspect.ReadError:
		return "no plan is made from a partial read"
	}
	return "it calls for no repair"
}

// ParseVerdicts parses --repair's list ("STATE_BEHIND,STRANDED"): every
// name must be a Repairable verdict; an error names the ones allowed.
func ParseVerdicts(s string) ([]inspect.Code, error) {
	var out []inspect.Code
	allowed := make([]string, 0, len(Repairable()))
	for _, c := range Repairable() {
		allowed = append(allowed, string(c))
	}
	for _, f := range strings.Split(s, ",") {
		c := inspect.Code(strings.ToUpper(strings.TrimSpace(f)))
		if c == "" {
			continue
		}
		if why := notRepairable(c); why != "" {
			if !inspect.IsVerdict(c) {
				return nil, fmt.Errorf("%q is not a verdict; the worker repairs %s", f, strings.Join(allowed, ", "))
			}
			return nil, fmt.Errorf("%s is not repaired by the worker: %s; it repairs %s", c, why, strings.Join(allowed, ", "))
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no verdict given; the worker repairs %s", strings.Join(allowed, ", "))
	}
	return out, nil
}

// LockName is the repair lock of a set of pipelines on a database:
// "opctl-watch:" and a digest of the database's name and the pipelines'
// sorted names, so that two watches of the same pipelines ask for one
// lock whatever order their configuration lists them in, and watches of
// pipelines of the same names on two databases of one server (GET_LOCK
// names are the server's, not a database's) never wait for each other
// (docs/watch.md#recovery).
func LockName(database string, pipelines []string) string {
	ps := slices.Clone(pipelines)
	sort.Strings(ps)
	sum := sha256.Sum256([]byte(fmt.Sprintf("%d:%s\x00", len(database), database) + strings.Join(ps, "\x00")))
	return "opctl-watch:" + hex.EncodeToString(sum[:])[:32]
}

// Service is the write side the worker repairs through: *repair.Service,
// as `opctl repair plan` and `opctl repair apply` use it.
type Service interface {
	PlanID(ctx context.Context, bizID, pipeline string, o plans.Options) (*plans.Plan, *triage.Operation, error)
	StoredPlan(ctx context.Context, id string) (*plans.Plan, error)
	Apply(ctx context.Context, plan *plans.Plan, o repair.ApplyOptions) (*repair.Result, error)
}

// Hooks are told what the worker does (the metrics); every field may be
// nil.
type Hooks struct {
	// Repair is called once per repair tried, with the plan's verdict and
	// the outcome.
	Repair func(verdict, outcome string)
	// State is called when the state changes; reason is the stop reason
	// with StateStopped, "" otherwise.
	State func(state, reason string)
	// Event is given every line the worker writes (cmd/watch_repair.go:
	// the watch triages a repaired operation again).
	Event func(watch.Event)
}

// Worker repairs flagged operations (docs/watch.md#recovery). Run it
// beside the Watcher; Offer wakes it when an operation is flagged.
type Worker struct {
	// Verdicts are --repair's (ParseVerdicts).
	Verdicts []inspect.Code
	// PerMinute bounds the repairs started in any minute once the first
	// one is verified (default DefaultPerMinute).
	PerMinute int
	// PauseFile: while it exists, no repair starts ("": none).
	PauseFile string
	// Operator is recorded in the plans and the audit (OperatorPrefix +
	// host).
	Operator string
	// Reason is the plans' reason.
	Reason  string
	Service Service
	// Triage triages one operation as `opctl where` does: the verdict
	// after a repair.
	Triage watch.TriageFunc
	// Expect returns the verdicts a repair of a verdict may leave (the
	// verify step of its runbook, docs/runbooks.md).
	Expect func(inspect.Code) []inspect.Code
	// Targets returns the flagged operations (Watcher.Targets).
	Targets func() []watch.Flag
	// Lock takes the repair lock without waiting (a
	// *sources.LockHeldError when another process holds it); nil: this
	// worker always leads.
	Lock func(ctx context.Context) (sources.Lock, error)
	// RepairAfter: a flag is repaired only once the operation has been
	// flagged continuously this long (Flag.Since) and its verdict has not
	// changed for as long (the At of its last changed line), and only when
	// the planner's own triage, just before the plan, still gives the
	// flag's verdict (else it is looked at again after RepairAfter). 0: at
	// once.
	RepairAfter time.Duration
	// Settle: after an apply, the operation is triaged again every Poll
	// until its verdict is an expected one (repaired) or Settle has passed
	// since the apply (the last verdict is the unexpected one: repairs
	// stop). 0: one triage.
	Settle time.Duration
	// Poll is the cadence of those triages (default DefaultPoll).
	Poll time.Duration
	// Retry is how often a standby worker asks for the lock again and a
	// paused one looks at the pause file (default DefaultRetry).
	Retry time.Duration
	// Events receives the repaired, repair_failed and paused lines; Log
	// the rest.
	Events, Log io.Writer
	Hooks       Hooks
	// Now is the clock (default time.Now).
	Now func() time.Time

	mu       sync.Mutex
	wake     chan struct{}
	handled  map[watch.Key]handled
	starts   []time.Time
	verified bool
	state    string
	stopped  string // the stop's reason label, "" while not stopped
	paused   bool
	// terms counts the times the lock was taken.
	terms int
}

// handled is what the worker did with a flag: memo identifies the flag
// (first flagged at, verdict); until retryAt, it is not tried again.
type handled struct {
	memo    string
	retryAt time.Time
}

func (w *Worker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Worker) retry() time.Duration {
	if w.Retry > 0 {
		return w.Retry
	}
	return DefaultRetry
}

func (w *Worker) poll() time.Duration {
	if w.Poll > 0 {
		return w.Poll
	}
	return DefaultPoll
}

func (w *Worker) perMinute() int {
	if w.PerMinute > 0 {
		return w.PerMinute
	}
	return DefaultPerMinute
}

func (w *Worker) logf(format string, a ...any) {
	if w.Log != nil {
		fmt.Fprintf(w.Log, "watch: repair: "+format+"\n", a...)
	}
}

func (w *Worker) wakeC() chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	return w.wake
}

// Offer tells the worker of an event of the watch: a flagged or changed
// operation wakes it (it reads the flagged set itself). It never blocks.
func (w *Worker) Offer(e watch.Event) {
	if e.Event != watch.Flagged && e.Event != watch.Changed {
		return
	}
	select {
	case w.wakeC() <- struct{}{}:
	default:
	}
}

// State returns the worker's state and, when stopped, why.
func (w *Worker) State() (string, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state, w.stopped
}

func (w *Worker) setState(state, reason string) {
	w.mu.Lock()
	changed := w.state != state
	w.state = state
	w.mu.Unlock()
	if changed && w.Hooks.State != nil {
		w.Hooks.State(state, reason)
	}
}

func (w *Worker) emit(ev watch.Event) {
	if w.Hooks.Event != nil {
		w.Hooks.Event(ev)
	}
	if w.Events == nil {
		return
	}
	b, err := json.Marshal(ev)
	if err == nil {
		_, _ = w.Events.Write(append(b, '\n'))
	}
}

// Run repairs until ctx ends (it returns nil then): it takes the repair
// lock (asking again every Retry while another watch holds it), repairs
// while it holds it, and stops at once when the lock is lost.
func (w *Worker) Run(ctx context.Context) error {
	w.wakeC()
	for ctx.Err() == nil {
		lock, ok := w.lead(ctx)
		if !ok {
			return nil
		}
		lctx, cancel := context.WithCancel(ctx)
		lost := make(chan struct{})
		if lock != nil {
			go func() {
				select {
				case <-lock.Lost():
					close(lost)
					cancel()
				case <-lctx.Done():
				}
			}()
		}
		w.repairLoop(lctx)
		if _, reason := w.State(); reason != "" {
			// Stopped: the lock is kept until the watch ends, so that the
			// other watch does not carry on with what made this one stop.
			<-ctx.Done()
		}
		cancel()
		if lock != nil {
			select {
			case <-lost:
				if _, reason := w.State(); reason == "" {
					w.setState(StateStandby, "")
				}
				w.logf("the repair lock %s was lost (its connection failed): no repair starts until it is taken again", lock.Name())
			default:
			}
			_ = lock.Release()
		}
	}
	return nil
}

// lead takes the repair lock, asking again every Retry while another
// process holds it; false when ctx ended first.
func (w *Worker) lead(ctx context.Context) (sources.Lock, bool) {
	if w.Lock == nil {
		return nil, true
	}
	said := ""
	for {
		lock, err := w.Lock(ctx)
		if err == nil {
			w.mu.Lock()
			w.terms++
			again := w.terms > 1
			w.mu.Unlock()
			switch {
			case said != "" || again:
				w.logf("took the repair lock %s: this watch repairs now", lock.Name())
			default:
				w.logf("holding the repair lock %s: this watch repairs", lock.Name())
			}
			return lock, true
		}
		if ctx.Err() != nil {
			return nil, false
		}
		w.setState(StateStandby, "")
		var held *sources.LockHeldError
		msg := err.Error()
		if errors.As(err, &held) {
			msg = fmt.Sprintf("another watch holds the repair lock %s (%s): this one only detects, and asks again every %s", held.Name, held.Holder, w.retry())
		} else {
			msg = fmt.Sprintf("cannot take the repair lock (%v): asking again every %s", err, w.retry())
		}
		if msg != said {
			w.logf("%s", msg)
			said = msg
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(w.retry()):
		}
	}
}

// repairLoop repairs one flagged operation after another until ctx ends or
// the worker stops.
func (w *Worker) repairLoop(ctx context.Context) {
	w.setState(StateRepairing, "")
	tick := time.NewTicker(w.retry())
	defer tick.Stop()
	for ctx.Err() == nil {
		if _, reason := w.State(); reason != "" {
			return
		}
		wait := time.Duration(0)
		if w.pausedNow() {
			wait = w.retry()
		} else if f, ok, young := w.next(); ok {
			if d := w.rateWait(); d > 0 {
				wait = d
			} else {
				w.repair(ctx, f)
				continue
			}
		} else if young > 0 {
			wait = young // until the youngest flag is old enough
		} else {
			wait = -1 // until woken or the tick
		}
		var after <-chan time.Time
		var t *time.Timer
		if wait > 0 {
			t = time.NewTimer(wait)
			after = t.C
		}
		select {
		case <-ctx.Done():
		case <-w.wakeC():
		case <-tick.C:
		case <-after:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// pausedNow reports whether the pause file exists, saying so (an event
// and stderr) when it appears and when it goes.
func (w *Worker) pausedNow() bool {
	if w.PauseFile == "" {
		return false
	}
	_, err := os.Stat(w.PauseFile)
	paused := err == nil
	w.mu.Lock()
	was := w.paused
	w.paused = paused
	w.mu.Unlock()
	if paused {
		// Also after a new leadership term began as repairing.
		w.setState(StatePaused, "")
	}
	switch {
	case paused && !was:
		msg := fmt.Sprintf("repairs paused: the pause file %s exists; remove it to resume", w.PauseFile)
		w.logf("%s", msg)
		w.emit(watch.Event{Event: Paused, At: w.now(), Summary: msg, Cause: watch.Cause{Source: SourceRepair}})
	case !paused && was:
		w.setState(StateRepairing, "")
		w.logf("the pause file %s is gone: repairs resume", w.PauseFile)
	}
	return paused
}

// rateWait is how long to wait before the next repair may start: 0 when it
// may start now. The stages of a canary come from the order: repairs are
// one at a time and each is verified (triaged again) before the next
// starts, so the first is alone and nothing follows it unless it left an
// expected verdict; after it, at most PerMinute start in any minute.
func (w *Worker) rateWait() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	kept := w.starts[:0]
	for _, s := range w.starts {
		if now.Sub(s) < time.Minute {
			kept = append(kept, s)
		}
	}
	w.starts = kept
	if len(w.starts) < w.perMinute() {
		return 0
	}
	return w.starts[0].Add(time.Minute).Sub(now)
}

// next is the oldest flagged operation the worker may repair and has not
// handled yet, flagged for at least RepairAfter. When there is none, young
// is how long until a flag it would repair is old enough (0: none waits).
func (w *Worker) next() (f watch.Flag, ok bool, young time.Duration) {
	if w.Targets == nil {
		return watch.Flag{}, false, 0
	}
	now := w.now()
	targets := w.Targets()
	w.mu.Lock()
	defer w.mu.Unlock()
	// What was done with a flag that is gone is forgotten: a new flag of
	// the operation is a new memo anyway.
	if len(w.handled) > len(targets) {
		live := make(map[watch.Key]bool, len(targets))
		for _, f := range targets {
			live[watch.Key{Pipeline: f.Pipeline, BizID: f.BizID}] = true
		}
		for k := range w.handled {
			if !live[k] {
				delete(w.handled, k)
			}
		}
	}
	for _, f := range targets {
		c := inspect.Code(f.Verdict)
		if !slices.Contains(w.Verdicts, c) && c != inspect.RepairIncomplete {
			continue
		}
		k := watch.Key{Pipeline: f.Pipeline, BizID: f.BizID}
		if h, ok := w.handled[k]; ok && h.memo == memo(f) && (h.retryAt.IsZero() || now.Before(h.retryAt)) {
			continue
		}
		// A flag younger than RepairAfter may be a consumer seen between
		// two statements: it is left until it has lasted that long (a
		// transient one clears before), and so is a verdict that changed
		// less than RepairAfter ago (its changed line's time, At): a
		// consumer redelivering a flagged operation is seen mid-way too.
		held := f.At
		if f.Since.After(held) {
			held = f.Since
		}
		if left := held.Add(w.RepairAfter).Sub(now); w.RepairAfter > 0 && left > 0 {
			if young == 0 || left < young {
				young = left
			}
			continue
		}
		return f, true, 0
	}
	return watch.Flag{}, false, young
}

// memo identifies one flag of an operation: a new flag, or a changed
// verdict, is tried again.
func memo(f watch.Flag) string {
	return f.Since.UTC().Format(time.RFC3339Nano) + "/" + f.Verdict
}

// done records what was done with a flag; retry > 0 tries it again after
// that long.
func (w *Worker) done(f watch.Flag, retry time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.handled == nil {
		w.handled = map[watch.Key]handled{}
	}
	h := handled{memo: memo(f)}
	if retry > 0 {
		h.retryAt = w.now().Add(retry)
	}
	w.handled[watch.Key{Pipeline: f.Pipeline, BizID: f.BizID}] = h
}

func (w *Worker) count(verdict inspect.Code, outcome string) {
	if w.Hooks.Repair != nil {
		w.Hooks.Repair(string(verdict), outcome)
	}
}

// repair plans, applies and verifies one flagged operation.
func (w *Worker) repair(ctx context.Context, f watch.Flag) {
	o := plans.Options{Reason: w.Reason, Operator: w.Operator}
	if o.Reason == "" {
		o.Reason = "opctl watch --repair: " + f.Verdict + " flagged at " + f.Since.UTC().Format(watch.TimeFormat)
	}
	plan, op, err := w.Service.PlanID(ctx, f.BizID, f.Pipeline, o)
	if ctx.Err() != nil {
		return
	}
	var nothing *plans.NothingToRepairError
	var input *plans.InputError
	finishing := false
	switch {
	case op != nil && op.Report.Verdict.Code == inspect.RepairIncomplete && op.Report.Repair != nil:
		plan, err = w.Service.StoredPlan(ctx, op.Report.Repair.PlanID)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.logf("%s %s: REPAIR_INCOMPLETE: reading its plan %s: %v; trying again in %s", f.Pipeline, f.BizID, op.Report.Repair.PlanID, err, w.retry())
			w.done(f, w.retry())
			return
		}
		if !strings.HasPrefix(plan.Operator, OperatorPrefix) || !slices.Contains(w.Verdicts, plan.Verdict) {
			w.logf("%s %s: REPAIR_INCOMPLETE: plan %s (%s, by %s) is not a repair of this worker's: finish it by hand (opctl repair apply %s --dry-run)", f.Pipeline, f.BizID, plan.Short(), plan.Verdict, plan.Operator, plan.ID)
			w.count(plan.Verdict, OutcomeSkipped)
			w.done(f, 0)
			return
		}
		finishing = true
	case errors.As(err, &nothing):
		// It stopped needing a repair since it was flagged; the watch
		// clears it.
		w.done(f, 0)
		return
	case errors.As(err, &input) && input.Option == plans.OptAttest:
		w.logf("%s %s: not repaired: its plan needs an operator's attestation (%s); repair it by hand: opctl repair plan %s --pipeline %s", f.Pipeline, f.BizID, plans.Why(err, plans.Flags), f.BizID, f.Pipeline)
		w.count(inspect.Code(f.Verdict), OutcomeSkipped)
		w.done(f, 0)
		return
	case err != nil && op == nil:
		// The triage failed (MySQL unreachable, ...): not a refusal.
		w.logf("%s %s: triage for the plan: %v; trying again in %s", f.Pipeline, f.BizID, err, w.retry())
		w.done(f, w.retry())
		return
	case err != nil:
		w.logf("%s %s: not repaired: %s", f.Pipeline, f.BizID, plans.Why(err, plans.Flags))
		w.count(op.Report.Verdict.Code, OutcomeSkipped)
		w.done(f, 0)
		return
	case plan.Verdict != inspect.Code(f.Verdict):
		// The verdict moved since the flag's line (a consumer may be
		// mid-way): not now. The watch's changed line is a new flag to
		// wait RepairAfter on; without one, it is looked at again after
		// RepairAfter.
		again := max(w.RepairAfter, w.retry())
		w.logf("%s %s: not repaired now: flagged %s, triaged %s just now (a consumer may be mid-way); looking again in %s", f.Pipeline, f.BizID, f.Verdict, plan.Verdict, again)
		w.done(f, again)
		return
	}
	w.mu.Lock()
	w.starts = append(w.starts, w.now())
	w.mu.Unlock()
	res, err := w.Service.Apply(ctx, plan, repair.ApplyOptions{Operator: w.Operator})
	if ctx.Err() != nil {
		// The lock was lost or the watch stops: the apply was cut short
		// where the audit says; whoever repairs next finishes it.
		return
	}
	if err != nil || res == nil || (res.Outcome != repair.OutcomeApplied && res.Outcome != repair.OutcomeAlready) {
		why := "no result"
		switch {
		case err != nil:
			why = err.Error()
		case res.Refused != "":
			why = string(res.Outcome) + ": " + res.Refused
		case res.Error != "":
			why = string(res.Outcome) + ": " + res.Error
		case res != nil:
			why = string(res.Outcome)
		}
		w.stop(f, plan, OutcomeFailed, ReasonApplyFailed, fmt.Sprintf("plan %s (%s) did not apply: %s", plan.Short(), plan.Verdict, why), nil)
		return
	}
	applied := fmt.Sprintf("applied %d/%d", res.Applied+res.Previously, res.Total)
	if res.Outcome == repair.OutcomeAlready {
		applied = "already applied"
	}
	if finishing {
		applied = "finished, " + applied
	}
	expect := w.expect(plan.Verdict)
	rep, s, err := w.settle(ctx, f, expect)
	if ctx.Err() != nil {
		return
	}
	switch {
	case err != nil:
		w.stop(f, plan, OutcomeUnexpected, ReasonUnexpected, fmt.Sprintf("plan %s (%s) %s, but the verdict after it could not be read: %v", plan.Short(), plan.Verdict, applied, err), nil)
		return
	case !slices.Contains(expect, rep.Verdict.Code):
		still := ""
		if w.Settle > 0 {
			still = fmt.Sprintf(" (still after %s, %d triages)", w.Settle, s.triages)
		}
		w.stop(f, plan, OutcomeUnexpected, ReasonUnexpected, fmt.Sprintf("plan %s (%s) %s, but the verdict after it is %s, not %s%s: %s", plan.Short(), plan.Verdict, applied, rep.Verdict.Code, joinCodes(expect), still, rep.Verdict.Summary), &rep)
		return
	}
	if s.triages > 1 {
		w.logf("%s %s: the verdict after the repair settled: %s at first, %s %s after the apply (%d triages)", f.Pipeline, f.BizID, s.first, rep.Verdict.Code, s.took.Round(time.Millisecond), s.triages)
	}
	w.mu.Lock()
	first := !w.verified
	w.verified = true
	w.mu.Unlock()
	w.count(plan.Verdict, OutcomeRepaired)
	w.done(f, 0)
	ev := w.event(Repaired, f, fmt.Sprintf("plan %s (%s) %s; now %s: %s", plan.Short(), plan.Verdict, applied, rep.Verdict.Code, rep.Verdict.Summary), &rep)
	w.emit(ev)
	w.logf("%s %s: %s", f.Pipeline, f.BizID, ev.Summary)
	if first {
		w.logf("the first repair is verified: up to %d a minute from now on", w.perMinute())
	}
}

// settled is how the verdict after a repair settled: the first verdict
// read, the number of triages, the time from the first to the last.
type settled struct {
	first   inspect.Code
	triages int
	took    time.Duration
}

// settle triages the operation after a repair every Poll until its verdict
// is one of expect or Settle has passed since the first triage; the last
// report is returned. A consumer that reads a republished record (or was
// between two statements when the repair applied) is seen mid-way for a
// moment: a verdict such as STATE_BEHIND that turns COMPLETE_UNCOMMITTED
// milliseconds later is not a failed repair (docs/watch.md#recovery).
func (w *Worker) settle(ctx context.Context, f watch.Flag, expect []inspect.Code) (inspect.Report, settled, error) {
	var s settled
	start := w.now()
	for {
		rep, err := w.verify(ctx, f)
		if err != nil {
			return rep, s, err
		}
		s.triages++
		if s.triages == 1 {
			s.first = rep.Verdict.Code
		}
		s.took = w.now().Sub(start)
		if slices.Contains(expect, rep.Verdict.Code) || s.took >= w.Settle {
			return rep, s, nil
		}
		select {
		case <-ctx.Done():
			return rep, s, ctx.Err()
		case <-time.After(w.poll()):
		}
	}
}

// verify triages the operation again (three tries, a second apart, when
// the triage fails).
func (w *Worker) verify(ctx context.Context, f watch.Flag) (inspect.Report, error) {
	var err error
	for i := 0; i < 3; i++ {
		var rep inspect.Report
		rep, err = w.Triage(ctx, f.Pipeline, f.BizID)
		if err == nil || ctx.Err() != nil {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return inspect.Report{}, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return inspect.Report{}, err
}

func (w *Worker) expect(c inspect.Code) []inspect.Code {
	if w.Expect == nil {
		return nil
	}
	return w.Expect(c)
}

// stop stops repairing: a repair_failed line for the operation, a paused
// line for the worker, stderr, the metrics.
func (w *Worker) stop(f watch.Flag, plan *plans.Plan, outcome, reason, why string, rep *inspect.Report) {
	w.count(plan.Verdict, outcome)
	w.done(f, 0)
	w.mu.Lock()
	w.stopped = reason
	w.mu.Unlock()
	w.setState(StateStopped, reason)
	w.emit(w.event(RepairFailed, f, why, rep))
	msg := fmt.Sprintf("repairs stopped (%s): %s %s: %s; look at it (opctl where %s --pipeline %s), then restart the watch to repair again", reason, f.Pipeline, f.BizID, why, f.BizID, f.Pipeline)
	w.logf("%s", msg)
	w.emit(watch.Event{Event: Paused, At: w.now(), Summary: msg, Cause: watch.Cause{Source: SourceRepair}})
}

// event is a line about one operation: its verdict now when rep is set,
// else the flag's; the flag's cause, and the time since its commit.
func (w *Worker) event(kind string, f watch.Flag, summary string, rep *inspect.Report) watch.Event {
	ev := watch.Event{Event: kind, At: w.now(), Pipeline: f.Pipeline, BizID: f.BizID, Verdict: f.Verdict, Severity: f.Severity,
		Summary: summary, Cause: f.Cause}
	if rep != nil {
		ev.Verdict, ev.Severity = string(rep.Verdict.Code), string(rep.Verdict.Severity)
	}
	if f.Cause.CommittedAt != nil {
		ms := ev.At.Sub(*f.Cause.CommittedAt).Milliseconds()
		ev.LatencyMS = &ms
	}
	return ev
}

func joinCodes(cs []inspect.Code) string {
	if len(cs) == 0 {
		return "any expected verdict (none is known)"
	}
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return "one of " + strings.Join(s, ", ")
}
