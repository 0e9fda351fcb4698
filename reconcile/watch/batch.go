package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// TriageBatchFunc triages operations of one pipeline in one batch with the
// rules of `opctl where` (triage.Judge, as reconcile triages its
// candidates): reps[i] is bizIDs[i]'s report. Its error is for the whole
// batch (MySQL down: a *sources.ConnError); what one operation could not
// read is in its report, marked partial, as Triage gives it.
type TriageBatchFunc func(ctx context.Context, pipeline string, bizIDs []string) ([]inspect.Report, error)

// DefaultBatch is Watcher.Batch's default: the operations of one
// TriageBatch call, sources.MaxBatch (a round's changes in as few batches
// as a statement may hold).
const DefaultBatch = sources.MaxBatch

// BatchTriage is the TriageBatchFunc of pipelines on col: triage.Judge,
// the Kafka group view read once per batch (a fresh one each batch: col
// caches none), the MySQL rows by the hybrid read (Collector.PerOperation:
// the key lookups once per batch, every other query per operation, since
// a batched statement's plan may read the whole table:
// docs/watch.md#how-it-works), the messages by one LocateMany, the probes
// concurrently. An id `opctl where` would refuse fails the batch with a
// *sources.BadIDError, which the Watcher then triages one by one.
//
// Before a report that is a target (Judge, by opts' OlderThan) is
// returned, its operation is triaged again in one consistent snapshot
// (when col's DB reads one) and that report is returned instead: what a
// batch's statements read tens of milliseconds apart may be a consumer's
// transaction half, which the snapshot never is (confirm.go). opts, at
// most one, are the watch's (a caller without them: reconcile's default
// --older-than, nothing said).
func BatchTriage(col *sources.Collector, pipelines []*config.Pipeline, opts ...BatchOptions) TriageBatchFunc {
	conf := newConfirmer(opts)
	return func(ctx context.Context, pipeline string, bizIDs []string) ([]inspect.Report, error) {
		var p *config.Pipeline
		for _, q := range pipelines {
			if q.Name == pipeline {
				p = q
			}
		}
		if p == nil {
			return nil, fmt.Errorf("pipeline %q is not watched", pipeline)
		}
		for _, id := range bizIDs {
			if err := sources.ValidateBizID(id); err != nil {
				return nil, err
			}
		}
		pc := *col.For(p)
		pc.PerOperation = true
		if fr := fencesFrom(ctx); fr != nil {
			// The fences first: reads that end before the triage
			// starts, those not proven read again after a few
			// milliseconds (fence.go). One that fails proves nothing.
			if kr, ok := pc.DB.(KeyReader); ok {
				fctx, cancel := ctx, context.CancelFunc(func() {})
				if pc.Timeout > 0 {
					fctx, cancel = context.WithTimeout(ctx, pc.Timeout)
				}
				_ = fr.proveAll(fctx, kr, fenceWaits)
				cancel()
			}
		}
		reps, err := triage.Judge(ctx, &pc, p, bizIDs)
		if err != nil {
			return nil, err
		}
		conf.confirm(ctx, &pc, p, bizIDs, reps)
		return reps, nil
	}
}

// lookup is one operation to look at and the cause that brought it.
type lookup struct {
	k     Key
	cause Cause
}

func (w *Watcher) batch() int {
	switch {
	case w.Batch <= 0:
		return DefaultBatch
	case w.Batch > sources.MaxBatch:
		return sources.MaxBatch
	}
	return w.Batch
}

// lookAll looks at each of ls as look does, in their order. With
// TriageBatch, Batch of them at a time are triaged with one call per
// pipeline and the results then applied one by one in order: the
// flag/clear state machine, the deadlines, the retry set and the events
// are exactly look's (docs/watch.md#how-it-works); without, one at a time,
// Batch per window. Between two windows the deadlines that came due are
// served (serveDue), so that a long round does not hold them back. It
// reports whether every triage of ls answered.
func (w *Watcher) lookAll(ctx context.Context, ls []lookup) bool {
	ok := true
	n := w.batch()
	var rest map[Key]int // each key's last index in ls, built when first needed
	for off := 0; off < len(ls); {
		win := ls[off:min(off+n, len(ls))]
		if !w.lookWindow(ctx, win) {
			ok = false
		}
		off += len(win)
		if off < len(ls) {
			w.serveDue(ctx, func(k Key) bool {
				if rest == nil {
					rest = make(map[Key]int, len(ls))
					for i, l := range ls {
						rest[l.k] = i
					}
				}
				i, in := rest[k]
				return in && i >= off
			})
		}
	}
	return ok
}

// lookWindow looks at ls (at most Batch): one TriageBatch call per
// pipeline, or one look each without TriageBatch.
func (w *Watcher) lookWindow(ctx context.Context, ls []lookup) bool {
	if w.TriageBatch != nil {
		return w.lookBatch(ctx, ls)
	}
	ok := true
	for _, l := range ls {
		if !w.look(ctx, l.k, l.cause) {
			ok = false
		}
	}
	return ok
}

// serveDue looks at the operations whose deadline has passed (a stuck
// operation crossing --older-than, a settle look, a binlog second look),
// at most Batch of them, earliest first, with the cause the timer gives
// them (dueLookups): what a long look (a round's changes, the first
// sweep's targets, the retries) does between two of its windows, so that
// a deadline waits for one window, not for the whole look
// (docs/watch.md#how-it-works). An operation that rest reports (the
// rest of that look holds it) stays in the heap: the look comes to it
// soon and applies its result as it did when the whole look came first,
// one triage with its own cause, not a timer's triage followed by the
// change's. So does one waiting for a retry of its triage (the retry
// after the round comes to it first). Those beyond Batch stay for the
// next window, or the timer after the look. None while MySQL is known
// down (a batch just failed): their triage would fail too, each a bounded
// read more; the timer takes them when it fires.
func (w *Watcher) serveDue(ctx context.Context, rest func(Key) bool) {
	if ctx.Err() != nil || w.sourceDown(UpMySQL) {
		return
	}
	w.mu.Lock()
	if w.deadlines == nil {
		w.mu.Unlock()
		return
	}
	now := w.now()
	var keys []Key
	var ats []time.Time
	if next, ok := w.deadlines.Next(); ok && !next.After(now) {
		keys, ats = w.deadlines.DueAtMost(now, w.batch(), func(k Key) bool {
			if _, retry := w.health.retry[k]; retry {
				return true
			}
			return rest != nil && rest(k)
		})
	}
	w.mu.Unlock()
	if len(keys) == 0 {
		return
	}
	w.lookWindow(ctx, w.dueLookups(keys, ats))
}

// dueLookups are the operations whose deadline passed (keys, their
// deadlines ats) as lookups: a binlog change's second look with that
// change's cause (unsettled), any other with cause "timer" and the
// deadline crossed.
func (w *Watcher) dueLookups(keys []Key, ats []time.Time) []lookup {
	w.mu.Lock()
	defer w.mu.Unlock()
	ls := make([]lookup, len(keys))
	for i, k := range keys {
		at := ats[i]
		cause := Cause{Source: SourceTimer, CommittedAt: &at}
		if c, ok := w.unsettled[k]; ok {
			cause = c
			delete(w.unsettled, k)
		}
		ls[i] = lookup{k, cause}
	}
	return ls
}

// lookBatch triages ls (at most Batch) with one TriageBatch call per
// pipeline and applies each result in order. A batch that fails as a
// whole because MySQL does not answer (connection-level, out of time) or
// the watch stops keeps every operation of it for a retry, as as many
// failed looks would, and says so once; any other failure of a batch (an
// id the batch read refuses) has its operations triaged one by one with
// Triage, when set, so that one bad id fails alone.
func (w *Watcher) lookBatch(ctx context.Context, ls []lookup) bool {
	reps := make([]inspect.Report, len(ls))
	errs := make([]error, len(ls))
	var order []string
	groups := map[string][]int{}
	for i, l := range ls {
		if w.pipeline(l.k.Pipeline) == nil {
			continue // nothing to triage: look's "true"
		}
		if _, ok := groups[l.k.Pipeline]; !ok {
			order = append(order, l.k.Pipeline)
		}
		groups[l.k.Pipeline] = append(groups[l.k.Pipeline], i)
	}
	// The pipelines' batches run concurrently (each its own group view,
	// its own statements, perhaps its own server); each writes only its
	// operations' slots.
	failed := map[string]error{}
	var fmu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range order {
		idx := groups[name]
		wg.Go(func() {
			if err := w.triageGroup(ctx, name, ls, idx, reps, errs); err != nil {
				fmu.Lock()
				failed[name] = err
				fmu.Unlock()
			}
		})
	}
	wg.Wait()
	// The operations of a failed batch are all kept before the first is
	// applied: the line that says MySQL lost counts them all.
	for _, l := range ls {
		if _, whole := failed[l.k.Pipeline]; whole {
			w.keepForRetry(l.k, l.cause)
		}
	}
	ok := true
	said := map[string]bool{}
	for i, l := range ls {
		p := w.pipeline(l.k.Pipeline)
		if p == nil {
			continue
		}
		judged, say := w.apply(ctx, p, l.k, l.cause, reps[i], errs[i])
		if judged {
			continue
		}
		ok = false
		if !say {
			continue
		}
		if err, whole := failed[l.k.Pipeline]; whole {
			if !said[l.k.Pipeline] {
				said[l.k.Pipeline] = true
				w.logf("triage of %d operation(s) of pipeline %s (%s...): %v (tried again next round)", len(groups[l.k.Pipeline]), l.k.Pipeline, l.k.BizID, err)
			}
			continue
		}
		w.logf("triage %s %s: %v (tried again next round)", l.k.Pipeline, l.k.BizID, errs[i])
	}
	return ok
}

// triageGroup triages the operations idx of ls, all of pipeline name,
// with one TriageBatch call, into reps and errs; it returns the error of a
// batch that failed as a whole (every errs[i] is then that error).
func (w *Watcher) triageGroup(ctx context.Context, name string, ls []lookup, idx []int, reps []inspect.Report, errs []error) error {
	ids := make([]string, len(idx))
	for j, i := range idx {
		ids[j] = ls[i].k.BizID
	}
	// The binlog changes' fences go with the call (fence.go): those the
	// batch triage proves visible before it reads need no second look.
	var fr *fenceRequest
	for _, i := range idx {
		if f := ls[i].cause.fence; f != nil && ls[i].cause.Source == SourceBinlog && !ls[i].cause.again {
			if fr == nil {
				fr = &fenceRequest{fences: map[string]*fence{}}
			}
			fr.fences[ls[i].k.BizID] = f
		}
	}
	var rs []inspect.Report
	err := ctx.Err()
	if err == nil {
		tctx := ctx
		if fr != nil {
			tctx = withFences(ctx, fr)
		}
		rs, err = w.TriageBatch(tctx, name, ids)
		if err == nil && fr != nil {
			for _, i := range idx {
				ls[i].cause.fenced = fr.proven[ls[i].k.BizID]
			}
		}
		if err == nil && len(rs) != len(ids) {
			err = fmt.Errorf("pipeline %s: %d reports for a batch of %d operations", name, len(rs), len(ids))
		}
	}
	if err != nil && w.Triage != nil && ctx.Err() == nil && !sources.IsConnError(err) && !errors.Is(err, context.DeadlineExceeded) {
		for _, i := range idx {
			reps[i], errs[i] = w.Triage(ctx, name, ls[i].k.BizID)
		}
		return nil
	}
	for j, i := range idx {
		if err != nil {
			errs[i] = err
		} else {
			reps[i] = rs[j]
		}
	}
	return err
}

// retryBatched is retryDue with TriageBatch: the operations due, oldest
// failure first, Batch at a time; it stops after a batch of which any
// failed again (the source is still down: one bounded read per round).
func (w *Watcher) retryBatched(ctx context.Context, due []Key, causes []Cause) {
	n := w.batch()
	for len(due) > 0 {
		if ctx.Err() != nil {
			return
		}
		m := min(n, len(due))
		ls := make([]lookup, m)
		w.mu.Lock()
		for i := range m {
			ls[i] = lookup{due[i], causes[i]}
			// Taken out first: a look that fails puts it back (with this
			// cause), one that answers leaves it out.
			delete(w.health.retry, due[i])
		}
		w.mu.Unlock()
		due, causes = due[m:], causes[m:]
		if !w.lookBatch(ctx, ls) {
			return
		}
		w.mu.Lock()
		again := false
		for _, l := range ls {
			if _, ok := w.health.retry[l.k]; ok {
				again = true
			}
		}
		w.mu.Unlock()
		if again {
			return
		}
		if len(due) > 0 {
			// Between two batches, the deadlines due, as lookAll serves
			// them; those still to retry (in the retry set) are left to
			// the retry.
			w.serveDue(ctx, nil)
		}
	}
}
