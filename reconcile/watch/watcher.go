package watch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Change is one row change a ChangeSource saw, mapped to the operation it
// touches.
type Change struct {
	Pipeline, BizID string
	// Table is the changed table; Position the source's position of the
	// change ("" for none).
	Table, Position string
	// CommittedAt is the change's commit time (a poll: the row's time
	// column); nil when unknown.
	CommittedAt *time.Time
	// Source is the cause.source when it is not the ChangeSource's Name
	// (a MultiSource's part); "" otherwise.
	Source string

	// A binlog change's part in its operation's fence (fence.go): seq is
	// its transaction's order in the Changes call (0: none), cand the
	// fence its row offers, del whether it deleted the operation's own
	// row; fence is the operation's round fence (markFences).
	seq   int
	cand  *fence
	del   bool
	fence *fence
}

// ChangeSource is where the watch learns of changes after its first sweep:
// the keyset poller (PollSource) today, the binlog follower when it is
// wired (docs/watch.md#sources).
type ChangeSource interface {
	// Name is the cause.source of its changes ("poll", "binlog").
	Name() string
	// Head is the position to follow from, taken before the first sweep so
	// that no change committed during the sweep is missed.
	Head(ctx context.Context) (string, error)
	// Changes returns the changes after from and the position after them;
	// it returns promptly (one poll) and the Watcher paces the calls.
	Changes(ctx context.Context, from string) ([]Change, string, error)
}

// TriageFunc triages one operation in one pipeline with the rules of
// `opctl where`.
type TriageFunc func(ctx context.Context, pipeline, bizID string) (inspect.Report, error)

// SweepFunc runs reconcile's checks over --since and emits every result
// (only targets are acted on).
type SweepFunc func(ctx context.Context, emit func(reconcile.Result) error) error

// Hooks are told what the watch does (the metrics); every field may be nil.
type Hooks struct {
	Event    func(Event)
	RowsRead func(source string, n int)
	Triaged  func(result string)
	Up       func(source string, up bool)
	// SecondLook is told, for each binlog look whose triage found no
	// target while second looks are on, whether it is looked at again
	// (SecondLookLooked) or its fence proved the triage saw the change
	// (SecondLookFenced, fence.go).
	SecondLook func(result string)
}

// The results of Hooks.SecondLook (docs/watch.md#metrics).
const (
	SecondLookLooked = "looked"
	SecondLookFenced = "fenced"
)

// Watcher keeps the set of flagged operations current (docs/watch.md).
type Watcher struct {
	Pipelines []*config.Pipeline
	Triage    TriageFunc
	// TriageBatch, when set, triages the operations a round looks at
	// (its changes, the deadlines due, the retry set, the first sweep's
	// targets) Batch at a time, one call per pipeline; nil: Triage, one
	// operation at a time (docs/watch.md#how-it-works).
	TriageBatch TriageBatchFunc
	// Batch bounds the operations of one TriageBatch call (default
	// DefaultBatch, at most sources.MaxBatch).
	Batch int
	Sweep SweepFunc
	// Source follows changes after the sweep; nil: the timer only.
	Source ChangeSource
	// Interval paces Source.Changes (default 1s).
	Interval time.Duration
	// RoundGap is the least time between the starts of two rounds that a
	// source's Wake brings on (the binlog: default DefaultRoundGap;
	// negative: none): the transactions of an operation that commit a few
	// milliseconds apart are then read by one round and triaged once, a
	// round's fixed reads (the Kafka group view and log bounds, the batch
	// statements) are shared by more operations, and a change's commit is
	// more often visible by the time its fence is read
	// (docs/watch.md#how-it-works).
	RoundGap time.Duration
	// Timeout bounds each read of the source (its head, one round of
	// changes), as --timeout bounds every read of every command: a server
	// that stops answering makes the round fail and the source read as
	// lost, never a loop that waits forever (0: only the context).
	Timeout   time.Duration
	OlderThan time.Duration
	// Settle is when an operation a change flagged is looked at once
	// more (default DefaultSettle; negative: never): a triage a few
	// milliseconds after a commit can see an operation mid-flight (seed
	// 000's has no state row to say it is in flight) as a target that
	// its next step or its offset commit, which no table shows, settles.
	Settle time.Duration
	// Events receives one JSON line per transition; Log the progress and a
	// source lost or regained.
	Events, Log io.Writer
	Hooks       Hooks
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Resume is the saved state of an earlier run (nil: none): its flags
	// and deadlines are restored and, when its source is this one, the
	// watch follows from its position without a sweep.
	Resume *State
	// Save, when set, is given the state after a poll that moved the
	// position or changed a flag (at most once a second) and when Run
	// ends.
	Save func(State) error

	mu        sync.Mutex
	tracker   *Tracker
	deadlines *Deadlines
	// unsettled are the binlog changes that triaged to no target, to be
	// triaged once more at their deadline with their own cause (look).
	unsettled map[Key]Cause
	ready     bool
	sourceUp  bool
	// dirty is true when a flag or deadline changed since the last save.
	dirty bool
	// health is MySQL's and Kafka's, and the operations to triage again
	// (health.go).
	health health
}

// head reads the source's head position ("" without a source).
func (w *Watcher) head(ctx context.Context) (string, error) {
	if w.Source == nil {
		return "", nil
	}
	rctx, cancel := w.bounded(ctx)
	defer cancel()
	p, err := w.Source.Head(rctx)
	if err != nil {
		return "", fmt.Errorf("%s: reading the head position: %w", w.Source.Name(), err)
	}
	w.setUp(true)
	return p, nil
}

// bounded is ctx with the Timeout of one read of the source.
func (w *Watcher) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if w.Timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, w.Timeout)
}

// Targets returns the flagged operations (what /targets serves).
func (w *Watcher) Targets() []Flag {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tracker == nil {
		return nil
	}
	return w.tracker.Targets()
}

// Ready reports whether the first sweep is done and every source answers.
func (w *Watcher) Ready() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ready && (w.Source == nil || w.sourceUp) && len(w.health.down) == 0
}

func (w *Watcher) settle() time.Duration {
	if w.Settle == 0 {
		return DefaultSettle
	}
	return w.Settle
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

func (w *Watcher) logf(format string, a ...any) {
	if w.Log != nil {
		fmt.Fprintf(w.Log, "watch: "+format+"\n", a...)
	}
}

func (w *Watcher) pipeline(name string) *config.Pipeline {
	for _, p := range w.Pipelines {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// Run sweeps, then follows the source and the deadlines until ctx ends;
// it returns nil when ctx is cancelled.
func (w *Watcher) Run(ctx context.Context) error {
	w.mu.Lock()
	w.tracker, w.deadlines, w.unsettled = NewTracker(), NewDeadlines(), map[Key]Cause{}
	w.mu.Unlock()
	interval := w.Interval
	if interval <= 0 {
		interval = time.Second
	}
	var pos string
	var restored []Key
	if st := w.Resume; st != nil {
		w.mu.Lock()
		w.restore(st)
		w.mu.Unlock()
		for _, f := range st.Flags {
			restored = append(restored, Key{f.Event.Pipeline, f.Event.BizID})
		}
		if w.Source != nil && st.Version == StateVersion && st.Source == w.Source.Name() && st.Position != "" {
			pos = st.Position
		}
	}
	if pos != "" {
		w.logf("resumed from the saved position (%d flags, %d deadlines restored); no sweep", len(restored), len(w.Resume.Deadlines))
		w.setUp(true)
	} else {
		if w.Resume != nil {
			w.logf("the state file holds no position of this source: sweeping --since again (%d flags restored)", len(restored))
		}
		p, err := w.start(ctx, interval)
		if err != nil || ctx.Err() != nil {
			return err
		}
		pos = p
	}
	// A restored flag is looked at again: it may have cleared while the
	// watch was down.
	ls := make([]lookup, len(restored))
	for i, k := range restored {
		ls[i] = lookup{k, Cause{Source: SourceSweep}}
	}
	w.lookAll(ctx, ls)
	w.mu.Lock()
	w.ready = true
	w.mu.Unlock()
	saved, lastSave := pos, time.Time{}
	save := func(force bool) {
		if w.Save == nil {
			return
		}
		w.mu.Lock()
		dirty := pos != saved || w.dirty
		if !force && (!dirty || time.Since(lastSave) < time.Second) {
			w.mu.Unlock()
			return
		}
		st := w.snapshot(pos)
		w.dirty = false
		w.mu.Unlock()
		if err := w.Save(st); err != nil {
			w.logf("saving the state: %v", err)
			return
		}
		saved, lastSave = pos, time.Now()
	}
	defer save(true)
	poll := time.NewTimer(0)
	defer poll.Stop()
	var lastRound time.Time
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		w.mu.Lock()
		next, ok := w.deadlines.Next()
		w.mu.Unlock()
		timer.Stop()
		if ok {
			timer.Reset(max(0, next.Sub(w.now())))
		}
		var pollC <-chan time.Time
		var wakeC <-chan struct{}
		if w.Source != nil {
			pollC = poll.C
			// A source that knows when it has changes (the binlog) is
			// read at once, not at the next --interval.
			if wk, ok := w.Source.(interface{ Wake() <-chan struct{} }); ok {
				wakeC = wk.Wake()
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-wakeC:
			poll.Reset(max(0, w.roundGap()-time.Since(lastRound)))
		case <-timer.C:
			w.mu.Lock()
			keys, ats := w.deadlines.Due(w.now())
			w.mu.Unlock()
			w.lookAll(ctx, w.dueLookups(keys, ats))
		case <-pollC:
			roundStart := time.Now()
			lastRound = roundStart
			rctx, cancel := w.bounded(ctx)
			changes, np, err := w.Source.Changes(rctx, pos)
			cancel()
			if errors.Is(err, ErrPositionGone) {
				w.logf("%s: %v: sweeping --since again", w.Source.Name(), err)
				p, herr := w.head(ctx)
				if herr == nil {
					herr = w.sweep(ctx)
				}
				switch {
				case herr == nil:
					pos = p
					w.setSourceUp(UpMySQL, true, true, "", len(w.Retrying()))
				case ctx.Err() == nil:
					// The position stays the one gone: the next round finds
					// it gone again and sweeps again (what changed meanwhile
					// is in the sweep's window), not a head nothing swept up to.
					w.logf("%v: sweeping again next round", herr)
					if sources.IsConnError(herr) || errors.Is(herr, context.DeadlineExceeded) {
						w.setSourceUp(UpMySQL, false, true, herr.Error(), len(w.Retrying()))
					}
				}
			} else {
				// A source that failed part-way returns what it read before
				// the failure and the position after it (BinlogSource: its
				// follow restarts there); a poll returns none.
				if err != nil {
					if ctx.Err() != nil {
						return nil
					}
					if w.setUp(false) {
						w.logf("%s lost: %v", w.Source.Name(), err)
					}
					// Every change source reads MySQL (its tables, its binlog).
					w.setSourceUp(UpMySQL, false, true, err.Error(), len(w.Retrying()))
				} else {
					if w.setUp(true) {
						w.logf("%s regained", w.Source.Name())
					}
					w.setSourceUp(UpMySQL, true, true, "", len(w.Retrying()))
				}
				if np != "" {
					pos = np
				}
				if w.Hooks.RowsRead != nil {
					n := len(changes)
					if rr, ok := w.Source.(interface{ RowsRead() int }); ok {
						n = rr.RowsRead()
					}
					w.Hooks.RowsRead(w.Source.Name(), n)
				}
				w.round(ctx, changes)
			}
			save(false)
			// Polls start every --interval: a round's own time (its read,
			// its triage) is not added to the wait, or the watch would fall
			// behind as the load grows (docs/watch.md#how-it-works).
			poll.Reset(max(0, interval-time.Since(roundStart)))
		}
	}
}

// round looks at a round's changes, then triages again the operations
// whose triage failed (retryDue), then serves the deadlines due (at most
// a batch, as between two batches of the round): the next round may start
// at once (a binlog that has more), and the loop's select takes the
// timer or the next round at random when both are ready, so without it a
// deadline could wait behind several rounds (docs/watch.md#how-it-works).
func (w *Watcher) round(ctx context.Context, changes []Change) {
	w.lookAll(ctx, roundLookups(w.Source.Name(), changes))
	w.retryDue(ctx)
	w.serveDue(ctx, nil)
}

// roundLookups are a round's changes as the operations to look at, each
// once, with the cause of its first change (source: the ChangeSource's
// Name unless the change names its own) and its round fence (fence.go).
func roundLookups(source string, changes []Change) []lookup {
	seen := map[Key]bool{}
	var ls []lookup
	for _, c := range changes {
		k := Key{c.Pipeline, c.BizID}
		if seen[k] {
			continue
		}
		seen[k] = true
		cause := Cause{Source: source, CommittedAt: c.CommittedAt, fence: c.fence}
		if c.Source != "" {
			cause.Source = c.Source
		}
		if c.Table != "" {
			cause.Table = &c.Table
		}
		if c.Position != "" {
			cause.Position = &c.Position
		}
		ls = append(ls, lookup{k, cause})
	}
	return ls
}

// setUp records whether the source answers; it returns true when that
// changed.
func (w *Watcher) setUp(up bool) bool {
	w.mu.Lock()
	changed := w.sourceUp != up
	w.sourceUp = up
	w.mu.Unlock()
	if w.Hooks.Up != nil && w.Source != nil {
		w.Hooks.Up(w.Source.Name(), up)
	}
	return changed
}

// sweep is the first sweep: reconcile's checks, then each target triaged
// again and flagged with cause "sweep".
func (w *Watcher) sweep(ctx context.Context) error {
	if w.Sweep == nil {
		return nil
	}
	var keys []Key
	err := w.Sweep(ctx, func(r reconcile.Result) error {
		if r.IsTarget() {
			keys = append(keys, Key{r.Pipeline, r.BizID})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("first sweep: %w", err)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		if a.Pipeline != b.Pipeline {
			return cmpStr(a.Pipeline, b.Pipeline)
		}
		return cmpStr(a.BizID, b.BizID)
	})
	keys = slices.Compact(keys)
	w.logf("first sweep done: %d targets", len(keys))
	ls := make([]lookup, len(keys))
	for i, k := range keys {
		ls[i] = lookup{k, Cause{Source: SourceSweep}}
	}
	w.lookAll(ctx, ls)
	return nil
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// look triages one operation and applies the result: an event on a
// transition, a deadline while it is non-terminal and not yet a target. A
// triage that fails is kept to be tried again (health.go's retryDue), never
// forgotten; look then reports false.
func (w *Watcher) look(ctx context.Context, k Key, cause Cause) bool {
	p := w.pipeline(k.Pipeline)
	if p == nil || w.Triage == nil {
		return true
	}
	rep, err := w.Triage(ctx, k.Pipeline, k.BizID)
	ok, say := w.apply(ctx, p, k, cause, rep, err)
	if say {
		w.logf("triage %s %s: %v (tried again next round)", k.Pipeline, k.BizID, err)
	}
	return ok
}

// apply applies one triage's result to k as look does; say reports
// whether the failure of a triage should be said on the log (not while
// MySQL stays down: its lost line said it once).
func (w *Watcher) apply(ctx context.Context, p *config.Pipeline, k Key, cause Cause, rep inspect.Report, err error) (ok, say bool) {
	if ctx.Err() != nil {
		// Stopping: the change that brought k here may be behind the
		// position the state file keeps (a round's position is taken
		// before its looks); kept for a retry, it is saved as a deadline
		// already passed and triaged at the restart (state.go).
		w.keepForRetry(k, cause)
		return false, false
	}
	mysqlWasDown := w.sourceDown(UpMySQL)
	if !w.noteTriage(k, cause, rep, err) {
		if w.Hooks.Triaged != nil {
			w.Hooks.Triaged("error")
		}
		// While MySQL is down its lost line said it once.
		return false, !mysqlWasDown || !w.sourceDown(UpMySQL)
	}
	if w.Hooks.Triaged != nil {
		w.Hooks.Triaged("ok")
	}
	now := w.now()
	dbNow := now
	if rep.DBNow != nil {
		dbNow = *rep.DBNow
	}
	obs, due := Judge(p, rep, dbNow, w.OlderThan)
	w.mu.Lock()
	if _, flagged := w.tracker.flags[k]; flagged && !obs.Target && kafkaUnread(rep) {
		// A flag is not cleared by a triage that could not read Kafka: it
		// is triaged again when Kafka answers (health.go).
		w.mu.Unlock()
		return true, false
	}
	ev := w.tracker.Observe(obs, cause, now)
	w.dirty = true
	_, pending := w.unsettled[k]
	delete(w.unsettled, k)
	second := ""
	if !obs.Target && cause.Source == SourceBinlog && !cause.again && w.settle() > 0 {
		second = SecondLookFenced
		if !cause.fenced || pending {
			second = SecondLookLooked
		}
	}
	switch {
	case second == SecondLookLooked:
		// The server writes a transaction to its binlog before its
		// engine commit is visible to other sessions, so a triage right
		// after the follower delivered it can read the rows as they were
		// before it (seen in the lab: seed 003's order 8822 back to
		// PAID, read still REFUNDED, once in seven runs). It is looked at
		// once more a little later with this change's cause; that look
		// sets the deadline Judge gives (docs/watch.md#how-it-works).
		// The window is the server's group commit (milliseconds), so
		// the look comes after binlogRecheck, not after the settle look's
		// seconds: a target it finds is still flagged within a second.
		// Not when the fence read before the triage proved it sees the
		// change (fence.go), unless an earlier round's change still
		// waits for its own second look (pending), which is kept: an
		// inserted row's fence cannot tell the row from an older life
		// whose delete that look waits for.
		w.deadlines.Set(k, now.Add(min(w.settle(), binlogRecheck)))
		cause.again = true
		if w.unsettled == nil {
			w.unsettled = map[Key]Cause{}
		}
		w.unsettled[k] = cause
	case due != nil && !obs.Target:
		w.deadlines.Set(k, now.Add(due.Sub(dbNow)))
	case ev != nil && ev.Event == Flagged && (cause.Source == SourceBinlog || cause.Source == SourcePoll) && w.settle() > 0:
		// Flagged by a change a few milliseconds after its commit: the
		// operation may be mid-flight, its next step or its offset
		// commit (which no table shows) about to settle it. It is looked
		// at once more a little later (docs/watch.md#binlog-mode).
		w.deadlines.Set(k, now.Add(w.settle()))
	default:
		w.deadlines.Remove(k)
	}
	w.mu.Unlock()
	if second != "" && w.Hooks.SecondLook != nil {
		w.Hooks.SecondLook(second)
	}
	if ev == nil {
		return true, false
	}
	// The metrics first: whoever reads the line finds them counted.
	if w.Hooks.Event != nil {
		w.Hooks.Event(*ev)
	}
	if w.Events != nil {
		b, err := json.Marshal(ev)
		if err == nil {
			_, _ = w.Events.Write(append(b, '\n'))
		}
	}
	return true, false
}

// DefaultRoundGap is Watcher.RoundGap's default: a fifth of a second
// added at most to a change's detection, against one triage per operation
// rather than one per transaction (docs/performance.md).
const DefaultRoundGap = 200 * time.Millisecond

func (w *Watcher) roundGap() time.Duration {
	switch {
	case w.RoundGap < 0:
		return 0
	case w.RoundGap == 0:
		return DefaultRoundGap
	}
	return w.RoundGap
}

// DefaultSettle is Watcher.Settle's default.
const DefaultSettle = 5 * time.Second

// binlogRecheck is when a binlog change that triaged to no target is looked
// at once more: after the server's engine commit, which follows its binlog
// write by milliseconds.
const binlogRecheck = 500 * time.Millisecond

// Judge decides whether rep is a target as reconcile does (a verdict of
// severity action, or stuck: reconcile.StuckTarget, its severity then
// raised to action) and, for a non-terminal state row, when it should be
// looked at again (the database clock): when it crosses olderThan or its
// lease ends, whichever is later. due is nil when no look is needed.
func Judge(p *config.Pipeline, rep inspect.Report, dbNow time.Time, olderThan time.Duration) (Observation, *time.Time) {
	o := Observation{Pipeline: p.Name, BizID: rep.BizID, Verdict: rep.Verdict.Code, Severity: rep.Verdict.Severity, Summary: rep.Verdict.Summary}
	o.Target = rep.Verdict.Severity == inspect.SeverityAction
	if !o.Target && reconcile.StuckTarget(p, rep, dbNow, olderThan) {
		o.Target, o.Severity = true, inspect.SeverityAction
	}
	st := rep.State
	if p.State == nil || !st.Found || slices.Contains(p.State.Terminal, st.Status) || slices.Contains(p.State.Failed, st.Status) {
		return o, nil
	}
	var due time.Time
	if st.UpdatedAt != nil {
		due = st.UpdatedAt.Add(olderThan)
	}
	if st.LeaseUntil != nil && st.LeaseUntil.After(due) {
		due = *st.LeaseUntil
	}
	if due.IsZero() {
		return o, nil
	}
	// A deadline the triage already saw pass without a target (a lease
	// just ended, clocks apart) is looked at again a second later, so the
	// heap never spins on it.
	if !due.After(dbNow) {
		if o.Target {
			return o, nil
		}
		due = dbNow.Add(time.Second)
	}
	return o, &due
}
