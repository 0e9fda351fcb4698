// Package watch is opctl watch's core (docs/watch.md): the flag/clear state
// machine over triage results, the deadline heap of non-terminal
// operations, the event lines, and the Watcher that drives them from a
// first reconcile sweep, a ChangeSource and the heap's timer. It links no
// driver: the sources, the triage and the sweep are functions and
// interfaces the wiring (cmd/watch.go) fills.
package watch

import (
	"encoding/json"
	"sort"
	"time"

	"github.com/opctl-dev/opctl/inspect"
)

// Event kinds (docs/watch.md#events). The worker's kinds (repaired,
// repair_failed, paused) are named by the contract but not emitted yet: the
// recovery worker is not built.
const (
	Flagged = "flagged"
	Changed = "changed"
	Cleared = "cleared"
)

// Cause sources.
const (
	SourceSweep  = "sweep"
	SourcePoll   = "poll"
	SourceTimer  = "timer"
	SourceBinlog = "binlog"
)

// Cause is what made the watch look at an operation again.
type Cause struct {
	Source string `json:"source"`
	// Table is the table whose change was seen (nil: a sweep or a timer).
	Table *string `json:"table"`
	// Position is the source's position of the change (a binlog position,
	// a poll's keyset position), nil when none.
	Position *string `json:"position"`
	// CommittedAt is the commit time of the change (a poll: the row's time
	// column), nil when unknown.
	CommittedAt *time.Time `json:"committed_at"`
	// again marks the second look of a binlog change that triaged to no
	// target (Watcher.look): it is not looked at a third time.
	again bool
	// fence is the row the look reads back before its triage (fence.go);
	// fenced is set when that read proved the triage sees the change, which
	// then needs no second look.
	fence  *fence
	fenced bool
}

// Event is one line of the event stream: one transition of one operation.
// The field order is the contract's (docs/watch.md#events).
type Event struct {
	Event    string    `json:"event"`
	At       time.Time `json:"-"`
	Pipeline string    `json:"pipeline"`
	BizID    string    `json:"biz_id"`
	Verdict  string    `json:"verdict"`
	Severity string    `json:"severity"`
	Summary  string    `json:"summary"`
	Cause    Cause     `json:"cause"`
	// LatencyMS is from the cause's commit time (a timer: the deadline) to
	// At; nil when there is none (a sweep).
	LatencyMS *int64 `json:"latency_ms"`
}

// TimeFormat is RFC 3339 with milliseconds, in UTC.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON writes the fields in the contract's order, at as RFC 3339
// with milliseconds.
func (e Event) MarshalJSON() ([]byte, error) {
	type cause struct {
		Source      string  `json:"source"`
		Table       *string `json:"table"`
		Position    *string `json:"position"`
		CommittedAt *string `json:"committed_at"`
	}
	var c *string
	if e.Cause.CommittedAt != nil {
		s := e.Cause.CommittedAt.UTC().Format(TimeFormat)
		c = &s
	}
	return json.Marshal(struct {
		Event     string `json:"event"`
		At        string `json:"at"`
		Pipeline  string `json:"pipeline"`
		BizID     string `json:"biz_id"`
		Verdict   string `json:"verdict"`
		Severity  string `json:"severity"`
		Summary   string `json:"summary"`
		Cause     cause  `json:"cause"`
		LatencyMS *int64 `json:"latency_ms"`
	}{e.Event, e.At.UTC().Format(TimeFormat), e.Pipeline, e.BizID, e.Verdict, e.Severity, e.Summary,
		cause{e.Cause.Source, e.Cause.Table, e.Cause.Position, c}, e.LatencyMS})
}

// Observation is one triage of one operation, judged: whether it is what
// reconcile reports as a target now.
type Observation struct {
	Pipeline, BizID string
	Target          bool
	Verdict         inspect.Code
	Severity        inspect.Severity
	Summary         string
}

// Key identifies an operation across pipelines.
type Key struct{ Pipeline, BizID string }

// Flag is a flagged operation: the fields of its last flagged or changed
// line, and when it was first flagged.
type Flag struct {
	Event
	Since time.Time `json:"-"`
}

// Tracker is the flag/clear state machine (docs/watch.md#events): an
// operation is flagged when it becomes a target, changed when its verdict
// changes while flagged, cleared when it stops being one. It is not safe
// for concurrent use; the Watcher serialises it.
type Tracker struct {
	flags map[Key]Flag
}

// NewTracker returns an empty tracker.
func NewTracker() *Tracker { return &Tracker{flags: map[Key]Flag{}} }

// Observe applies one observation and returns the transition's event, or
// nil when the operation's flag does not change. latency is nil or the
// time since the cause's commit.
func (t *Tracker) Observe(o Observation, cause Cause, at time.Time) *Event {
	k := Key{o.Pipeline, o.BizID}
	cur, flagged := t.flags[k]
	ev := Event{At: at, Pipeline: o.Pipeline, BizID: o.BizID, Verdict: string(o.Verdict), Severity: string(o.Severity),
		Summary: o.Summary, Cause: cause}
	if cause.CommittedAt != nil {
		ms := at.Sub(*cause.CommittedAt).Milliseconds()
		ev.LatencyMS = &ms
	}
	switch {
	case o.Target && !flagged:
		ev.Event = Flagged
		t.flags[k] = Flag{Event: ev, Since: at}
	case o.Target && flagged && (cur.Verdict != ev.Verdict || cur.Severity != ev.Severity):
		ev.Event = Changed
		t.flags[k] = Flag{Event: ev, Since: cur.Since}
	case !o.Target && flagged:
		ev.Event = Cleared
		delete(t.flags, k)
	default:
		return nil
	}
	return &ev
}

// Flagged reports whether the operation is flagged.
func (t *Tracker) Flagged(k Key) bool { _, ok := t.flags[k]; return ok }

// Targets returns the flagged operations, oldest flag first (then by
// pipeline and id): what /targets serves.
func (t *Tracker) Targets() []Flag {
	out := make([]Flag, 0, len(t.flags))
	for _, f := range t.flags {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.Since.Equal(b.Since) {
			return a.Since.Before(b.Since)
		}
		if a.Pipeline != b.Pipeline {
			return a.Pipeline < b.Pipeline
		}
		return a.BizID < b.BizID
	})
	return out
}
