package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
)

// The sources behind the triage, as opctl_watch_up names them beside the
// change source (docs/watch.md#when-mysql-or-kafka-is-down).
const (
	UpMySQL = "mysql"
	UpKafka = "kafka"
)

// health is what the watch knows of each source it reads: whether it
// answered its last read, since when it does not, and why. It lives
// under Watcher.mu.
type health struct {
	down map[string]downState
	// retry holds the operations whose last triage failed (or read Kafka
	// while it was down), with the cause that made the watch look: they
	// are triaged again each round until one answers (retryDue), so a
	// change seen during an outage is not forgotten.
	retry map[Key]retryEntry
	seq   int
}

type downState struct {
	since time.Time
	why   string
	// byChanges: the change source's read failed (not a triage); its next
	// answer says the source is back. A source a triage found down is back
	// only when a triage answers: a poll of a replica that answers says
	// nothing of the primary the triage reads.
	byChanges bool
}

type retryEntry struct {
	cause Cause
	seq   int
}

// triageHealth reads from one triage which of MySQL and Kafka answered:
// a failed triage is MySQL's when it is connection-level or ran out of
// time (Kafka's failures never fail a triage: they make the report
// partial, sources.kafka saying what failed). A source the triage did not
// read (Kafka not configured) is left as it was (nil).
func triageHealth(rep inspect.Report, err error) (mysql, kafka *bool, why string) {
	no, yes := false, true
	if err != nil {
		if sources.IsConnError(err) || errors.Is(err, context.DeadlineExceeded) {
			return &no, nil, err.Error()
		}
		return nil, nil, ""
	}
	mysql = &yes
	switch v, ok := rep.Sources["kafka"]; {
	case !ok || v == sources.StatusSkipped || strings.HasPrefix(v, "not configured"):
		// No Kafka configured (sources.Collector.KafkaMissing): nothing
		// to be up or down.
	case v == sources.StatusOK:
		kafka = &yes
	default:
		kafka, why = &no, v
	}
	return mysql, kafka, why
}

// kafkaUnread reports whether rep's Kafka reads failed (Kafka configured,
// not answering): such a report may flag (what MySQL proves stands) but
// never clears a flag.
func kafkaUnread(rep inspect.Report) bool {
	_, kafka, _ := triageHealth(rep, nil)
	return kafka != nil && !*kafka
}

// noteTriage records what one triage of k said of the sources, keeps k
// for a retry when its triage failed or read Kafka while it was down, and
// says a source lost or regained on the log. It reports whether the
// report may be judged (the triage answered).
func (w *Watcher) noteTriage(k Key, cause Cause, rep inspect.Report, err error) bool {
	mysql, kafka, why := triageHealth(rep, err)
	if err != nil || (kafka != nil && !*kafka) {
		w.keepForRetry(k, cause)
	} else {
		w.mu.Lock()
		delete(w.health.retry, k)
		w.mu.Unlock()
	}
	w.mu.Lock()
	n := len(w.health.retry)
	w.mu.Unlock()
	if mysql != nil {
		w.setSourceUp(UpMySQL, *mysql, false, why, n)
	}
	if kafka != nil {
		w.setSourceUp(UpKafka, *kafka, false, why, n)
	}
	return err == nil
}

// keepForRetry keeps k to be triaged again (retryDue), with the first
// cause that made the watch look (its latency counts the wait); it is
// saved in the state file, so a restart tries it again (state.go).
func (w *Watcher) keepForRetry(k Key, cause Cause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := &w.health
	if h.retry == nil {
		h.retry = map[Key]retryEntry{}
	}
	if e, ok := h.retry[k]; ok {
		cause = e.cause
	}
	h.seq++
	h.retry[k] = retryEntry{cause: cause, seq: h.seq}
	w.dirty = true
}

// setSourceUp records whether a source behind the triage answers (byChanges:
// as the change source's read found it), tells the Up hook, and says on
// the log when that changed.
func (w *Watcher) setSourceUp(name string, up, byChanges bool, why string, retries int) {
	// One line on stderr and in /readyz: a driver's message may hold
	// several (sarama's "run out of brokers" chains).
	why = strings.Join(strings.Fields(why), " ")
	w.mu.Lock()
	if w.health.down == nil {
		w.health.down = map[string]downState{}
	}
	d, wasDown := w.health.down[name]
	if up && wasDown && byChanges && !d.byChanges {
		w.mu.Unlock()
		return // only a triage that answers says so
	}
	if up {
		delete(w.health.down, name)
	} else if !wasDown {
		w.health.down[name] = downState{since: w.now(), why: why, byChanges: byChanges}
	}
	w.mu.Unlock()
	if w.Hooks.Up != nil {
		w.Hooks.Up(name, up)
	}
	switch {
	case !up && !wasDown:
		w.logf("%s lost: %s; %d operation(s) will be triaged again when it answers", name, why, retries)
	case up && wasDown:
		w.logf("%s regained (%d operation(s) still to triage again)", name, retries)
	}
}

// sourceDown reports whether a source behind the triage is known down.
func (w *Watcher) sourceDown(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.health.down[name]
	return ok
}

// retryDue triages again the operations whose last triage failed, oldest
// failure first, each with the cause that first made the watch look. It
// stops at the first that fails again (the source is still down: one
// bounded read per round, not one per operation); that one goes to the
// back, so that an operation that always fails never starves the others.
func (w *Watcher) retryDue(ctx context.Context) {
	w.mu.Lock()
	type kc struct {
		k Key
		e retryEntry
	}
	var due []kc
	for k, e := range w.health.retry {
		due = append(due, kc{k, e})
	}
	w.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].e.seq < due[j].e.seq })
	if w.TriageBatch != nil {
		keys, causes := make([]Key, len(due)), make([]Cause, len(due))
		for i, d := range due {
			keys[i], causes[i] = d.k, d.e.cause
		}
		w.retryBatched(ctx, keys, causes)
		return
	}
	for _, d := range due {
		if ctx.Err() != nil {
			return
		}
		// Taken out first: a look that fails puts it back (with this
		// cause), one that answers, or that has nothing to triage (its
		// pipeline is no longer watched), leaves it out.
		w.mu.Lock()
		delete(w.health.retry, d.k)
		w.mu.Unlock()
		if !w.look(ctx, d.k, d.e.cause) {
			w.mu.Lock()
			if _, ok := w.health.retry[d.k]; !ok {
				w.health.retry[d.k] = d.e // stopping: the state file keeps it
			}
			w.mu.Unlock()
			return
		}
		w.mu.Lock()
		_, again := w.health.retry[d.k]
		w.mu.Unlock()
		if again {
			return
		}
	}
}

// Retrying returns the operations waiting for a retry of their triage,
// sorted.
func (w *Watcher) Retrying() []Key {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.retryKeys()
}

// retryKeys is Retrying with w.mu held.
func (w *Watcher) retryKeys() []Key {
	out := make([]Key, 0, len(w.health.retry))
	for k := range w.health.retry {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Key) int {
		if c := cmpStr(a.Pipeline, b.Pipeline); c != 0 {
			return c
		}
		return cmpStr(a.BizID, b.BizID)
	})
	return out
}

// NotReady says why the watch is not ready ("" when it is): the first
// sweep is not done, or which source does not answer, since when and
// why (what /readyz answers with 503).
func (w *Watcher) NotReady() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var why []string
	if !w.ready {
		why = append(why, "the first sweep is not done")
	}
	if w.Source != nil && !w.sourceUp && w.ready {
		why = append(why, w.Source.Name()+" does not answer")
	}
	names := make([]string, 0, len(w.health.down))
	for n := range w.health.down {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		d := w.health.down[n]
		why = append(why, fmt.Sprintf("%s does not answer (since %s: %s)", n, d.since.UTC().Format(TimeFormat), d.why))
	}
	if len(why) > 0 && len(w.health.retry) > 0 {
		why = append(why, fmt.Sprintf("%d operation(s) to triage again", len(w.health.retry)))
	}
	return strings.Join(why, "; ")
}

// start reads the head and runs the first sweep. A MySQL that does not
// answer (connection-level, or out of time) does not end the watch: it is
// said lost, /readyz says so, and both are tried again every interval
// until they answer or ctx ends. Any other failure is returned.
func (w *Watcher) start(ctx context.Context, interval time.Duration) (string, error) {
	for {
		p, err := w.head(ctx)
		if err == nil {
			err = w.sweep(ctx)
		}
		if ctx.Err() != nil {
			return "", nil
		}
		if err == nil {
			w.setSourceUp(UpMySQL, true, true, "", len(w.Retrying()))
			return p, nil
		}
		if !sources.IsConnError(err) && !errors.Is(err, context.DeadlineExceeded) {
			return "", err
		}
		if w.Source != nil {
			w.setUp(false)
		}
		w.setSourceUp(UpMySQL, false, true, err.Error(), len(w.Retrying()))
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", nil
		case <-t.C:
		}
	}
}

// Recheck has k triaged again at the next round, with cause (safe from any
// goroutine): what the recovery worker asks after a repair, whose writes
// (a reversal, a compensation, a republished message) may touch no table
// the change source reads, so that the flag clears when the repair landed
// instead of staying until the next sweep.
func (w *Watcher) Recheck(k Key, cause Cause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := &w.health
	if h.retry == nil {
		h.retry = map[Key]retryEntry{}
	}
	if _, ok := h.retry[k]; ok {
		return
	}
	h.seq++
	h.retry[k] = retryEntry{cause: cause, seq: h.seq}
}
