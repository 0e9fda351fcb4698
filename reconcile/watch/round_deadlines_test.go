package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// fakeClock is the Watcher's Now: time moves only when the fake triage
// moves it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestDeadlinesBetweenBatches: the deadlines that come due while a long
// look runs (a round's changes, the first sweep's targets, the retries)
// are looked at between its batches, and after a round (its retries
// first), at most a batch at a time, earliest first, none while MySQL is
// down; a due operation still in the look's rest, or waiting for a
// retry, is left to that look (one triage, its own cause); a binlog
// second look due mid-round keeps its change's cause. Each triaged operation moves the fake clock by
// step: which deadlines are due after which batch is decided, no timer
// runs.
func TestDeadlinesBetweenBatches(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	round := []string{"r1", "r2", "r3", "r4", "r5", "r6"}
	for _, tc := range []struct {
		name string
		// how the operations of round come: a poll's changes, a binlog's,
		// the first sweep's targets, or the retry set.
		how string
		// perKey: Triage one operation at a time (no TriageBatch).
		perKey bool
		// deadlines set before the look (ms after t0).
		deadlines map[string]int
		// verdicts by operation and look ("ok" when none): ok, stuck, wrongly.
		verdicts map[string][]string
		// want is the triages in order, a batch call per element
		// (per key: one operation each); events "event id cause.source".
		want       []string
		wantEvents []string
		// left is the deadlines still in the heap after the look.
		left []string
		// toRetry are kept for a retry before the look; retry those kept
		// after it.
		toRetry, retry []string
	}{
		{name: "due during the first batch: looked at before the second", how: SourcePoll,
			deadlines: map[string]int{"d": 1500}, verdicts: map[string][]string{"d": {"stuck"}},
			want:       []string{"r1 r2", "d", "r3 r4", "r5 r6"},
			wantEvents: []string{"flagged d timer"}},
		{name: "not due before the round ends: left to the timer", how: SourcePoll,
			deadlines: map[string]int{"d": 6500}, verdicts: map[string][]string{"d": {"stuck"}},
			want: []string{"r1 r2", "r3 r4", "r5 r6"}, left: []string{"d"}},
		{name: "due after the last batch: left to the timer", how: SourcePoll,
			deadlines: map[string]int{"d": 5500}, verdicts: map[string][]string{"d": {"stuck"}},
			want: []string{"r1 r2", "r3 r4", "r5 r6"}, left: []string{"d"}},
		{name: "more due than a batch: a batch of them between two of the round's", how: SourcePoll,
			deadlines: map[string]int{"d3": 1000, "d1": 500, "d2": 500}, verdicts: map[string][]string{"d1": {"stuck"}, "d2": {"stuck"}, "d3": {"stuck"}},
			want:       []string{"r1 r2", "d1 d2", "r3 r4", "d3", "r5 r6"},
			wantEvents: []string{"flagged d1 timer", "flagged d2 timer", "flagged d3 timer"}},
		{name: "due, but in the round's rest: triaged once, by the round, with its change's cause", how: SourcePoll,
			deadlines: map[string]int{"r5": 500, "d": 500}, verdicts: map[string][]string{"r5": {"stuck"}, "d": {"stuck"}},
			want:       []string{"r1 r2", "d", "r3 r4", "r5 r6"},
			wantEvents: []string{"flagged d timer", "flagged r5 poll"}},
		{name: "due and in the batch just triaged: its deadline moved by that triage, not looked at again", how: SourcePoll,
			deadlines: map[string]int{"r2": 500},
			want:      []string{"r1 r2", "r3 r4", "r5 r6"}},
		{name: "a binlog second look due mid-round: with its change's cause, after the change's own look", how: SourceBinlog,
			verdicts: map[string][]string{"r1": {"ok", "wrongly"}, "r2": {"ok", "ok"}},
			// Each binlog look that finds no target is looked at again
			// 500 ms after it is applied: r1's and r2's (applied at 2 s)
			// are due after the second batch (4 s); the others' are left
			// to the timer, and r1's flag has its settle look.
			want:       []string{"r1 r2", "r3 r4", "r1 r2", "r5 r6"},
			wantEvents: []string{"flagged r1 binlog"},
			left:       []string{"r1", "r3", "r4", "r5", "r6"}},
		{name: "one at a time (no TriageBatch): served at the same points", how: SourcePoll, perKey: true,
			deadlines: map[string]int{"d1": 1500, "d2": 1500, "d3": 1500}, verdicts: map[string][]string{"d1": {"stuck"}, "d2": {"stuck"}, "d3": {"stuck"}},
			want:       []string{"r1", "r2", "d1", "d2", "r3", "r4", "d3", "r5", "r6"},
			wantEvents: []string{"flagged d1 timer", "flagged d2 timer", "flagged d3 timer"}},
		{name: "the first sweep's targets", how: SourceSweep,
			deadlines: map[string]int{"d": 1500}, verdicts: map[string][]string{"d": {"stuck"}},
			want:       []string{"r1 r2", "d", "r3 r4", "r5 r6"},
			wantEvents: []string{"flagged d timer"}},
		{name: "after a batch that failed (MySQL down): not served", how: SourcePoll,
			deadlines: map[string]int{"d": 1500}, verdicts: map[string][]string{"d": {"stuck"}, "r1": {"down"}},
			want:       []string{"r1 r2", "r3 r4", "d", "r5 r6"},
			wantEvents: []string{"flagged d timer"}, retry: []string{"r1", "r2"}},
		{name: "due, but waiting for a retry of its triage: left to the retry after the round", how: SourcePoll,
			deadlines: map[string]int{"x": 500, "d": 500}, verdicts: map[string][]string{"d": {"stuck"}},
			toRetry:    []string{"x"},
			want:       []string{"r1 r2", "d", "r3 r4", "r5 r6"},
			wantEvents: []string{"flagged d timer"}, left: []string{"x"}, retry: []string{"x"}},
		{name: "a whole round: one due during its last batch is looked at before the next round", how: "round",
			deadlines: map[string]int{"d": 5500}, verdicts: map[string][]string{"d": {"stuck"}},
			want:       []string{"r1 r2", "r3 r4", "r5 r6", "d"},
			wantEvents: []string{"flagged d timer"}},
		{name: "a whole round: the retries first, then the deadlines", how: "round",
			deadlines: map[string]int{"d": 5500}, verdicts: map[string][]string{"d": {"stuck"}},
			toRetry:    []string{"x"},
			want:       []string{"r1 r2", "r3 r4", "r5 r6", "x", "d"},
			wantEvents: []string{"flagged d timer"}},
		{name: "a whole round whose last batch failed and whose retry failed: the deadlines wait for the timer", how: "round",
			deadlines: map[string]int{"d": 5500}, verdicts: map[string][]string{"d": {"stuck"}, "r5": {"down", "down"}, "r6": {"ok", "ok"}},
			want: []string{"r1 r2", "r3 r4", "r5 r6", "r5 r6"},
			left: []string{"d"}, retry: []string{"r5", "r6"}},
		{name: "a whole round whose last batch failed, its retry answered: served", how: "round",
			deadlines: map[string]int{"d": 5500}, verdicts: map[string][]string{"d": {"stuck"}, "r5": {"down", "ok"}, "r6": {"ok", "ok"}},
			want:       []string{"r1 r2", "r3 r4", "r5 r6", "r5 r6", "d"},
			wantEvents: []string{"flagged d timer"}},
		{name: "the retries, and a due one still to retry is left to its retry", how: "retry",
			deadlines: map[string]int{"d": 1500, "r6": 1500}, verdicts: map[string][]string{"d": {"stuck"}, "r6": {"stuck"}},
			want:       []string{"r1 r2", "d", "r3 r4", "r5 r6"},
			wantEvents: []string{"flagged d timer", "flagged r6 poll"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const step = time.Second
			clock := &fakeClock{t: t0}
			p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
			var mu sync.Mutex
			var calls []string
			looks := map[string]int{}
			triage := func(id string) inspect.Report {
				looks[id]++
				now := clock.now()
				r := inspect.Report{BizID: id, DBNow: &now, Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}}
				done := now.Add(-time.Second)
				r.State = inspect.StateView{Found: true, Status: "DONE", UpdatedAt: &done}
				v := "ok"
				if vs := tc.verdicts[id]; len(vs) > 0 {
					v = vs[min(looks[id], len(vs))-1]
				}
				switch v {
				case "stuck":
					old := now.Add(-time.Hour)
					r.Verdict = inspect.Verdict{Code: "STATE_BEHIND", Severity: inspect.SeverityWatch}
					r.State = inspect.StateView{Found: true, Status: "WORKING", UpdatedAt: &old}
				case "wrongly":
					r.Verdict = inspect.Verdict{Code: "WRONGLY_SKIPPED", Severity: inspect.SeverityAction}
				}
				clock.advance(step)
				return r
			}
			var events []string
			w := &Watcher{Pipelines: []*config.Pipeline{p}, OlderThan: time.Minute, Batch: 2, Now: clock.now,
				Hooks: Hooks{Event: func(e Event) { events = append(events, e.Event+" "+e.BizID+" "+e.Cause.Source) }}}
			if tc.how != SourceBinlog {
				w.Settle = -1
			}
			if tc.perKey {
				w.Triage = func(_ context.Context, _, id string) (inspect.Report, error) {
					mu.Lock()
					defer mu.Unlock()
					calls = append(calls, id)
					return triage(id), nil
				}
			} else {
				w.TriageBatch = func(_ context.Context, _ string, ids []string) ([]inspect.Report, error) {
					mu.Lock()
					defer mu.Unlock()
					calls = append(calls, strings.Join(ids, " "))
					for _, id := range ids {
						if vs := tc.verdicts[id]; len(vs) > looks[id] && vs[looks[id]] == "down" {
							// The whole batch fails, as a batch read does.
							for _, id := range ids {
								looks[id]++
								clock.advance(step)
							}
							return nil, &sources.ConnError{Err: errors.New("mysql: connection refused")}
						}
					}
					reps := make([]inspect.Report, len(ids))
					for i, id := range ids {
						reps[i] = triage(id)
					}
					return reps, nil
				}
			}
			w.tracker, w.deadlines, w.unsettled = NewTracker(), NewDeadlines(), map[Key]Cause{}
			for id, ms := range tc.deadlines {
				w.deadlines.Set(Key{"pay", id}, at(ms))
			}
			for _, id := range tc.toRetry {
				w.keepForRetry(Key{"pay", id}, Cause{Source: SourcePoll})
			}
			ctx := context.Background()
			switch tc.how {
			case SourcePoll, SourceBinlog:
				var cs []Change
				for _, id := range round {
					cs = append(cs, Change{Pipeline: "pay", BizID: id, Table: "ops"})
				}
				w.lookAll(ctx, roundLookups(tc.how, cs))
			case "round":
				var cs []Change
				for _, id := range round {
					cs = append(cs, Change{Pipeline: "pay", BizID: id, Table: "ops"})
				}
				w.Source = &fakeSource{}
				w.round(ctx, cs)
			case SourceSweep:
				w.Sweep = func(_ context.Context, emit func(reconcile.Result) error) error {
					for _, id := range round {
						r := reconcile.Result{Severity: inspect.SeverityAction}
						r.Pipeline, r.BizID = "pay", id
						if err := emit(r); err != nil {
							return err
						}
					}
					return nil
				}
				if err := w.sweep(ctx); err != nil {
					t.Fatal(err)
				}
			case "retry":
				for _, id := range round {
					w.keepForRetry(Key{"pay", id}, Cause{Source: SourcePoll})
				}
				w.retryDue(ctx)
			}
			var retry []string
			for _, k := range w.Retrying() {
				retry = append(retry, k.BizID)
			}
			if !slices.Equal(retry, tc.retry) {
				t.Errorf("kept for a retry %q, want %q", retry, tc.retry)
			}
			if !slices.Equal(calls, tc.want) {
				t.Errorf("triages %q, want %q", calls, tc.want)
			}
			if !slices.Equal(events, tc.wantEvents) {
				t.Errorf("events %q, want %q", events, tc.wantEvents)
			}
			var left []string
			for _, d := range w.deadlines.items {
				left = append(left, d.key.BizID)
			}
			slices.Sort(left)
			if !slices.Equal(left, tc.left) {
				t.Errorf("deadlines left %q, want %q", left, tc.left)
			}
			// One look per operation at a time, in the order of the
			// triages: every operation but a second look's is triaged once.
			for id, n := range looks {
				if want := max(1, len(tc.verdicts[id])); n != want {
					t.Errorf("%s triaged %d times, want %d", id, n, want)
				}
			}
		})
	}
}

// TestDueAtMost: the bounded Due takes at most n, earliest first, and
// leaves those kept where they were.
func TestDueAtMost(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		n    int
		keep []string
		want []string
		left []string
	}{
		{"all", 0, nil, []string{"a", "b", "c"}, []string{"d"}},
		{"at most 2", 2, nil, []string{"a", "b"}, []string{"c", "d"}},
		{"kept ones skipped, not counted", 2, []string{"a"}, []string{"b", "c"}, []string{"a", "d"}},
		{"all kept", 0, []string{"a", "b", "c"}, nil, []string{"a", "b", "c", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDeadlines()
			for i, id := range []string{"d", "c", "b", "a"} {
				d.Set(Key{"p", id}, t0.Add(time.Duration(3-i)*time.Second))
			}
			keys, ats := d.DueAtMost(t0.Add(2*time.Second), tc.n, func(k Key) bool { return slices.Contains(tc.keep, k.BizID) })
			var got []string
			for i, k := range keys {
				got = append(got, k.BizID)
				if want := t0.Add(time.Duration(k.BizID[0]-'a') * time.Second); !ats[i].Equal(want) {
					t.Errorf("%s due at %v, want %v", k.BizID, ats[i], want)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("due %v, want %v", got, tc.want)
			}
			var left []string
			for {
				ks, _ := d.Due(t0.Add(time.Hour))
				if len(ks) == 0 {
					break
				}
				for _, k := range ks {
					left = append(left, k.BizID)
				}
			}
			if fmt.Sprint(left) != fmt.Sprint(tc.left) {
				t.Errorf("left in order %v, want %v", left, tc.left)
			}
		})
	}
}
