package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
)

// fakeSource hands out queued changes, one batch per call.
type fakeSource struct {
	mu      sync.Mutex
	batches [][]Change
	fail    bool
}

func (f *fakeSource) Name() string                         { return SourcePoll }
func (f *fakeSource) Head(context.Context) (string, error) { return "0", nil }
func (f *fakeSource) push(c ...Change)                     { f.mu.Lock(); f.batches = append(f.batches, c); f.mu.Unlock() }
func (f *fakeSource) Changes(_ context.Context, from string) ([]Change, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, from, context.DeadlineExceeded
	}
	if len(f.batches) == 0 {
		return nil, from, nil
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	return b, from + "+", nil
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) lines() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Event
	for _, l := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		if l == "" {
			continue
		}
		var e struct {
			Event, Pipeline, Verdict string
			BizID                    string `json:"biz_id"`
			Cause                    struct{ Source string }
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			panic(err)
		}
		out = append(out, Event{Event: e.Event, Pipeline: e.Pipeline, BizID: e.BizID, Verdict: e.Verdict, Cause: Cause{Source: e.Cause.Source}})
	}
	return out
}

// TestWatcher drives the loop with a fake sweep, source and triage: the
// sweep's target is flagged (sweep), a change clears it (poll), a
// non-terminal operation is flagged stuck by the timer when it crosses
// --older-than, and a lost source makes it not ready.
func TestWatcher(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	var mu sync.Mutex
	verdicts := map[string]inspect.Report{}
	set := func(id string, r inspect.Report) { mu.Lock(); r.BizID = id; verdicts[id] = r; mu.Unlock() }
	start := time.Now()
	set("a", inspect.Report{Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction, Summary: "s"}})
	upd := start.Add(-100 * time.Millisecond)
	set("s", inspect.Report{Verdict: inspect.Verdict{Code: "STATE_BEHIND", Severity: inspect.SeverityWatch}, State: inspect.StateView{Found: true, Status: "WORKING", UpdatedAt: &upd}})
	src := &fakeSource{}
	events := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, OlderThan: 300 * time.Millisecond, Events: events,
		Triage: func(_ context.Context, pipeline, id string) (inspect.Report, error) {
			mu.Lock()
			defer mu.Unlock()
			r := verdicts[id]
			now := time.Now()
			r.DBNow = &now
			return r, nil
		},
		Sweep: func(_ context.Context, emit func(reconcile.Result) error) error {
			r := reconcile.Result{Severity: inspect.SeverityAction}
			r.BizID, r.Pipeline, r.Verdict = "a", "pay", "STRANDED"
			return emit(r)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	wait := func(n int) []Event {
		t.Helper()
		for range 300 {
			if ev := events.lines(); len(ev) >= n {
				return ev
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("events %+v, want %d", events.lines(), n)
		return nil
	}
	ev := wait(1)
	if ev[0].Event != Flagged || ev[0].BizID != "a" || ev[0].Cause.Source != SourceSweep {
		t.Fatalf("first event %+v", ev[0])
	}
	for range 100 {
		if w.Ready() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !w.Ready() {
		t.Fatal("not ready after the sweep")
	}
	// "s" is seen by a poll, then crosses --older-than: the timer flags it.
	src.push(Change{Pipeline: "pay", BizID: "s", Table: "ops"})
	ev = wait(2)
	if ev[1].Event != Flagged || ev[1].BizID != "s" || ev[1].Cause.Source != SourceTimer || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("second event %+v after %s", ev[1], time.Since(start))
	}
	set("a", inspect.Report{Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}})
	src.push(Change{Pipeline: "pay", BizID: "a", Table: "ops"})
	ev = wait(3)
	if ev[2].Event != Cleared || ev[2].BizID != "a" || ev[2].Cause.Source != SourcePoll {
		t.Fatalf("third event %+v", ev[2])
	}
	if tg := w.Targets(); len(tg) != 1 || tg[0].BizID != "s" {
		t.Fatalf("targets %+v", tg)
	}
	src.mu.Lock()
	src.fail = true
	src.mu.Unlock()
	for range 100 {
		if !w.Ready() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if w.Ready() {
		t.Fatal("ready with its source failing")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("Run did not stop within 1s of cancel")
	}
}

func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	p := &config.Pipeline{Name: "pay", State: &config.State{UpdatedAt: "u", Terminal: []string{"DONE"}, Failed: []string{"FAILED"}}}
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	for _, tc := range []struct {
		name   string
		rep    inspect.Report
		target bool
		due    *time.Time
	}{
		{"action verdict", inspect.Report{Verdict: inspect.Verdict{Code: "DUPLICATE_EFFECT", Severity: inspect.SeverityAction}, State: inspect.StateView{Found: true, Status: "DONE"}}, true, nil},
		{"young non-terminal gets a deadline", inspect.Report{Verdict: inspect.Verdict{Code: "STATE_BEHIND", Severity: inspect.SeverityWatch}, State: inspect.StateView{Found: true, Status: "W", UpdatedAt: at(-time.Minute)}}, false, at(4 * time.Minute)},
		{"old non-terminal is stuck", inspect.Report{Verdict: inspect.Verdict{Code: "STATE_BEHIND", Severity: inspect.SeverityWatch}, State: inspect.StateView{Found: true, Status: "W", UpdatedAt: at(-time.Hour)}}, true, nil},
		{"in flight is never stuck; looked at when the lease ends", inspect.Report{Verdict: inspect.Verdict{Code: inspect.InFlight, Severity: inspect.SeverityOK}, State: inspect.StateView{Found: true, Status: "W", UpdatedAt: at(-time.Hour), LeaseActive: true, LeaseUntil: at(time.Minute)}}, false, at(time.Minute)},
		{"terminal healthy: nothing", inspect.Report{Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}, State: inspect.StateView{Found: true, Status: "DONE", UpdatedAt: at(-time.Hour)}}, false, nil},
		{"failed: nothing", inspect.Report{Verdict: inspect.Verdict{Code: "FAILED", Severity: inspect.SeverityOK}, State: inspect.StateView{Found: true, Status: "FAILED", UpdatedAt: at(-time.Hour)}}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, due := Judge(p, tc.rep, now, 5*time.Minute)
			if o.Target != tc.target || (due == nil) != (tc.due == nil) || (due != nil && !due.Equal(*tc.due)) {
				t.Fatalf("target %v due %v; want %v %v", o.Target, due, tc.target, tc.due)
			}
			if o.Target && o.Severity != inspect.SeverityAction {
				t.Fatalf("a target of severity %q", o.Severity)
			}
		})
	}
}

// stalledSource answers its head, then never answers a round of changes
// until its context ends (a MySQL that stops answering mid-poll).
type stalledSource struct{ rounds atomic.Int32 }

func (s *stalledSource) Name() string                         { return SourcePoll }
func (s *stalledSource) Head(context.Context) (string, error) { return "0", nil }
func (s *stalledSource) Changes(ctx context.Context, from string) ([]Change, string, error) {
	s.rounds.Add(1)
	<-ctx.Done()
	return nil, from, ctx.Err()
}

// A source that stops answering is bounded by Timeout: each round fails,
// the source is said lost once, and the watch goes on polling instead of
// waiting forever (without Timeout it would be stuck in its first round).
func TestStalledSourceIsBoundedByTimeout(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	src := &stalledSource{}
	logs := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, Timeout: 30 * time.Millisecond,
		Events: &syncBuf{}, Log: logs,
		Triage: func(context.Context, string, string) (inspect.Report, error) { return inspect.Report{}, nil },
		Sweep:  func(context.Context, func(reconcile.Result) error) error { return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for src.rounds.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	if n := src.rounds.Load(); n < 3 {
		t.Fatalf("%d rounds of changes: a stalled round was not bounded by Timeout", n)
	}
	logs.mu.Lock()
	out := logs.b.String()
	logs.mu.Unlock()
	if strings.Count(out, "poll lost") != 1 || strings.Count(out, "mysql lost") != 1 {
		t.Errorf("the stalled source (and MySQL behind it) should be said lost once:\n%s", out)
	}
}

// An operation a change flags is looked at once more Settle later: one
// seen mid-flight (its offset commit, which no table shows, settles it)
// is cleared by the timer instead of staying flagged until a restart.
func TestWatcherSettle(t *testing.T) {
	p := &config.Pipeline{Name: "pay"}
	var mu sync.Mutex
	verdict := inspect.Verdict{Code: "UNKNOWN_OUTCOME", Severity: inspect.SeverityAction}
	var looks atomic.Int32
	src := &fakeSource{}
	events := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, Settle: 50 * time.Millisecond, Events: events,
		Triage: func(_ context.Context, pipeline, id string) (inspect.Report, error) {
			looks.Add(1)
			mu.Lock()
			defer mu.Unlock()
			return inspect.Report{BizID: id, Verdict: verdict}, nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	src.push(Change{Pipeline: "pay", BizID: "m", Table: "ops"})
	wait := func(n int) []Event {
		t.Helper()
		for range 300 {
			if ev := events.lines(); len(ev) >= n {
				return ev
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("events %+v, want %d", events.lines(), n)
		return nil
	}
	ev := wait(1)
	if ev[0].Event != Flagged || ev[0].Cause.Source != SourcePoll {
		t.Fatalf("first event %+v", ev[0])
	}
	mu.Lock()
	verdict = inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}
	mu.Unlock()
	ev = wait(2)
	if ev[1].Event != Cleared || ev[1].Cause.Source != SourceTimer {
		t.Fatalf("second event %+v: want cleared by the recheck", ev[1])
	}
	// Once: a target that stays one is not looked at again and again.
	mu.Lock()
	verdict = inspect.Verdict{Code: "UNKNOWN_OUTCOME", Severity: inspect.SeverityAction}
	mu.Unlock()
	src.push(Change{Pipeline: "pay", BizID: "m", Table: "ops"})
	wait(3)
	// The recheck is due Settle after the change: wait for it (bounded,
	// the machine may be loaded), then long enough for a fifth look to
	// show if there were one.
	for i := 0; i < 300 && looks.Load() < 4; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	if n := looks.Load(); n != 4 {
		t.Errorf("%d triages, want 4 (a change, its recheck, a change, its recheck)", n)
	}
	cancel()
	<-done
}

// A binlog change reaches the watch before its commit is visible (the
// server writes the binlog before the engine commits): the first triage
// reads the rows as they were and finds no target. The change is looked
// at once more Settle later with its own cause, and flagged then; a
// second look that finds no target either is the last.
func TestWatcherBinlogChangeBeforeItsCommitIsVisible(t *testing.T) {
	p := &config.Pipeline{Name: "orders"}
	var mu sync.Mutex
	var looks atomic.Int32
	verdicts := []inspect.Verdict{{Code: "SKIPPED_OK", Severity: inspect.SeverityOK}} // the read before the commit
	src := &fakeSource{}
	events := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, Settle: 50 * time.Millisecond, Events: events,
		Triage: func(_ context.Context, pipeline, id string) (inspect.Report, error) {
			looks.Add(1)
			mu.Lock()
			defer mu.Unlock()
			v := verdicts[0]
			if len(verdicts) > 1 {
				verdicts = verdicts[1:]
			}
			return inspect.Report{BizID: id, Verdict: v}, nil
		}}
	mu.Lock()
	verdicts = append(verdicts, inspect.Verdict{Code: "WRONGLY_SKIPPED", Severity: inspect.SeverityAction})
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	src.push(Change{Source: SourceBinlog, Pipeline: "orders", BizID: "8822", Table: "orders"})
	wait := func(n int) []Event {
		t.Helper()
		for range 500 {
			if ev := events.lines(); len(ev) >= n {
				return ev
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("events %+v after %d triages, want %d", events.lines(), looks.Load(), n)
		return nil
	}
	ev := wait(1)
	if ev[0].Event != Flagged || ev[0].Cause.Source != SourceBinlog || ev[0].Verdict != "WRONGLY_SKIPPED" {
		t.Fatalf("first event %+v: want flagged WRONGLY_SKIPPED by the binlog change, at its second look", ev[0])
	}
	if n := looks.Load(); n != 2 {
		t.Errorf("%d triages before the flag, want 2", n)
	}
	// Back to a rightly skipped order: the change clears it, and the
	// second look of that change finds no target either: no third.
	mu.Lock()
	verdicts = []inspect.Verdict{{Code: "SKIPPED_OK", Severity: inspect.SeverityOK}}
	mu.Unlock()
	src.push(Change{Source: SourceBinlog, Pipeline: "orders", BizID: "8822", Table: "orders"})
	ev = wait(2)
	if ev[1].Event != Cleared || ev[1].Cause.Source != SourceBinlog {
		t.Fatalf("second event %+v", ev[1])
	}
	for deadline := time.Now().Add(5 * time.Second); looks.Load() < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(10 * 50 * time.Millisecond) // ten Settles: room for a third look
	if n := looks.Load(); n != 4 {
		t.Errorf("%d triages, want 4 (a change, its second look, a change, its second look)", n)
	}
	cancel()
	<-done
}
