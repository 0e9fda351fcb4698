package watch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// upRecorder keeps the last value the Up hook set per source.
type upRecorder struct {
	mu sync.Mutex
	up map[string]bool
}

func (u *upRecorder) set(s string, v bool) { u.mu.Lock(); u.up[s] = v; u.mu.Unlock() }
func (u *upRecorder) get(s string) (bool, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	v, ok := u.up[s]
	return v, ok
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	for range 1000 {
		if f() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("after 5s: %s", what)
}

// TestOutageRetriesTheTriage: MySQL down (the triage fails connection-
// level) while a change of "m" is seen, then Kafka down (the report's
// sources.kafka says a read failed) while a change of "k" is seen. Each
// outage turns opctl_watch_up{source} to 0 and /readyz's reason names it;
// the operations seen during it are triaged again each round, and flagged
// when the source is back (before this, a failed triage was only logged:
// "m" was never flagged).
func TestOutageRetriesTheTriage(t *testing.T) {
	p := &config.Pipeline{Name: "pay"}
	var mu sync.Mutex
	mysqlDown, kafkaDown := false, false
	triages := map[string]int{}
	src := &fakeSource{}
	ups := &upRecorder{up: map[string]bool{}}
	events, logs := &syncBuf{}, &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, Events: events, Log: logs,
		Hooks: Hooks{Up: ups.set},
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			mu.Lock()
			defer mu.Unlock()
			triages[id]++
			if mysqlDown {
				return inspect.Report{}, &sources.ConnError{Err: errors.New("mysql 127.0.0.1:3306: connection refused")}
			}
			r := inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction, Summary: "s"},
				Sources: map[string]string{"mysql": sources.StatusOK, "kafka": sources.StatusOK}}
			if kafkaDown {
				// What the collector reads with the brokers down: the
				// report is partial and its verdict not the real one.
				r.Partial, r.Sources["kafka"] = true, "kafka: dial tcp 127.0.0.1:9092: connection refused"
				r.Verdict = inspect.Verdict{Code: "UNKNOWN", Severity: inspect.SeverityWatch}
			}
			return r, nil
		},
		Sweep: func(context.Context, func(reconcile.Result) error) error { return nil }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, "ready", w.Ready)
	if v, ok := ups.get(UpMySQL); !ok || !v {
		t.Fatalf("opctl_watch_up{source=mysql} after the sweep: %v %v", v, ok)
	}

	// MySQL down: the poll answers (another replica, say), the triage not.
	mu.Lock()
	mysqlDown = true
	mu.Unlock()
	src.push(Change{Pipeline: "pay", BizID: "m", Table: "ops"})
	eventually(t, "mysql said down", func() bool { v, ok := ups.get(UpMySQL); return ok && !v })
	if w.Ready() || !strings.Contains(w.NotReady(), "mysql does not answer") {
		t.Fatalf("ready %v, reason %q", w.Ready(), w.NotReady())
	}
	// It is tried again each round, and stays waiting while MySQL is down.
	eventually(t, "m retried", func() bool { mu.Lock(); defer mu.Unlock(); return triages["m"] >= 3 })
	// Eventually: a retry takes m out of the set while it looks (retryDue),
	// and the failed look puts it back.
	eventually(t, "m waiting for a retry", func() bool { got := w.Retrying(); return len(got) == 1 && got[0].BizID == "m" })
	if len(events.lines()) != 0 {
		t.Fatalf("events while MySQL is down: %+v", events.lines())
	}
	mu.Lock()
	mysqlDown = false
	mu.Unlock()
	eventually(t, "m flagged after MySQL is back", func() bool { return len(events.lines()) == 1 })
	if ev := events.lines()[0]; ev.Event != Flagged || ev.BizID != "m" || ev.Cause.Source != SourcePoll {
		t.Fatalf("event %+v", ev)
	}
	eventually(t, "ready again", w.Ready)
	if v, _ := ups.get(UpMySQL); !v {
		t.Fatal("mysql still 0")
	}

	// Kafka down: the report is judged as where gives it (partial), and
	// triaged again until Kafka answers.
	mu.Lock()
	kafkaDown = true
	mu.Unlock()
	src.push(Change{Pipeline: "pay", BizID: "k", Table: "ops"})
	eventually(t, "kafka said down", func() bool { v, ok := ups.get(UpKafka); return ok && !v })
	if w.Ready() || !strings.Contains(w.NotReady(), "kafka does not answer") || !strings.Contains(w.NotReady(), "connection refused") {
		t.Fatalf("ready %v, reason %q", w.Ready(), w.NotReady())
	}
	if len(events.lines()) != 1 {
		t.Fatalf("k flagged from a partial report: %+v", events.lines())
	}
	mu.Lock()
	kafkaDown = false
	mu.Unlock()
	eventually(t, "k flagged after Kafka is back", func() bool { return len(events.lines()) == 2 })
	if ev := events.lines()[1]; ev.Event != Flagged || ev.BizID != "k" {
		t.Fatalf("event %+v", ev)
	}
	eventually(t, "ready again", w.Ready)
	if len(w.Retrying()) != 0 {
		t.Fatalf("still retrying %v", w.Retrying())
	}
	out := func() string { logs.mu.Lock(); defer logs.mu.Unlock(); return logs.b.String() }()
	for _, want := range []string{"mysql lost: ", "mysql regained", "kafka lost: ", "kafka regained"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("stderr should say %q once:\n%s", want, out)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A first sweep that cannot reach MySQL does not end the watch: it is
// tried again until MySQL answers, not ready meanwhile.
func TestFirstSweepWaitsForMySQL(t *testing.T) {
	p := &config.Pipeline{Name: "pay"}
	var mu sync.Mutex
	fails := 3
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: &fakeSource{}, Interval: 10 * time.Millisecond, Events: &syncBuf{}, Log: &syncBuf{},
		Triage: func(context.Context, string, string) (inspect.Report, error) { return inspect.Report{}, nil },
		Sweep: func(context.Context, func(reconcile.Result) error) error {
			mu.Lock()
			defer mu.Unlock()
			if fails > 0 {
				fails--
				return &sources.ConnError{Err: errors.New("mysql 127.0.0.1:3306: connection refused")}
			}
			return nil
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, "ready after the sweep answered", w.Ready)
	mu.Lock()
	if fails != 0 {
		t.Fatalf("%d failures left", fails)
	}
	mu.Unlock()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Any other failure still ends it.
	w2 := &Watcher{Pipelines: []*config.Pipeline{p}, Interval: 10 * time.Millisecond,
		Sweep: func(context.Context, func(reconcile.Result) error) error { return errors.New("reading the config") }}
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "reading the config") {
		t.Fatalf("err %v", err)
	}
}

// An operation waiting for a retry is in the saved state (as a deadline
// already passed): a restart during an outage does not forget it.
func TestRetrySurvivesARestart(t *testing.T) {
	w := &Watcher{Pipelines: []*config.Pipeline{{Name: "pay"}}}
	w.tracker, w.deadlines = NewTracker(), NewDeadlines()
	w.noteTriage(Key{"pay", "m"}, Cause{Source: SourcePoll}, inspect.Report{}, &sources.ConnError{Err: errors.New("down")})
	st := w.snapshot("p")
	if len(st.Deadlines) != 1 || st.Deadlines[0].BizID != "m" || st.Deadlines[0].At.After(time.Now()) {
		t.Fatalf("saved deadlines %+v", st.Deadlines)
	}
}

// Recheck: a flagged operation whose repair touched no followed table is
// triaged again at the next round and cleared, with the given cause.
func TestRecheckClearsARepairedFlag(t *testing.T) {
	var mu sync.Mutex
	code := inspect.Verdict{Code: "DUPLICATE_EFFECT", Severity: inspect.SeverityAction}
	events := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{{Name: "pay"}}, Source: &fakeSource{}, Interval: 10 * time.Millisecond, Events: events,
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			mu.Lock()
			defer mu.Unlock()
			return inspect.Report{BizID: id, Verdict: code}, nil
		},
		Sweep: func(_ context.Context, emit func(reconcile.Result) error) error {
			r := reconcile.Result{Severity: inspect.SeverityAction}
			r.BizID, r.Pipeline, r.Verdict = "d", "pay", "DUPLICATE_EFFECT"
			return emit(r)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	eventually(t, "flagged", func() bool { return len(events.lines()) == 1 })
	mu.Lock()
	code = inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}
	mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	if n := len(events.lines()); n != 1 {
		t.Fatalf("%d events before the recheck: nothing changed that the source sees", n)
	}
	w.Recheck(Key{"pay", "d"}, Cause{Source: "repair"})
	eventually(t, "cleared", func() bool { return len(events.lines()) == 2 })
	if ev := events.lines()[1]; ev.Event != Cleared || ev.Cause.Source != "repair" {
		t.Fatalf("event %+v", ev)
	}
}

// An operation waiting for a retry whose pipeline is not watched (any
// more) leaves the retry set instead of blocking it every round.
func TestRetryOfAnUnwatchedPipelineIsDropped(t *testing.T) {
	w := &Watcher{Pipelines: []*config.Pipeline{{Name: "pay"}},
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}}, nil
		}}
	w.tracker, w.deadlines = NewTracker(), NewDeadlines()
	w.Recheck(Key{"gone", "x"}, Cause{Source: SourceTimer})
	w.Recheck(Key{"pay", "y"}, Cause{Source: SourceTimer})
	w.retryDue(context.Background())
	if got := w.Retrying(); len(got) != 0 {
		t.Fatalf("still retrying %v", got)
	}
}

// A flagged operation whose triage cannot read Kafka is not cleared by
// that partial report (it would be flagged again when Kafka answers); it
// is triaged again, and cleared when Kafka answers.
func TestKafkaDownDoesNotClear(t *testing.T) {
	var mu sync.Mutex
	kafkaDown := false
	verdict := inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction}
	events := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{{Name: "pay"}}, Source: &fakeSource{}, Interval: 10 * time.Millisecond, Events: events,
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			mu.Lock()
			defer mu.Unlock()
			r := inspect.Report{BizID: id, Verdict: verdict, Sources: map[string]string{"kafka": sources.StatusOK}}
			if kafkaDown {
				r.Sources["kafka"], r.Partial = "EOF", true
				r.Verdict = inspect.Verdict{Code: "UNKNOWN", Severity: inspect.SeverityWatch}
			}
			return r, nil
		},
		Sweep: func(_ context.Context, emit func(reconcile.Result) error) error {
			r := reconcile.Result{Severity: inspect.SeverityAction}
			r.BizID, r.Pipeline, r.Verdict = "s", "pay", "STRANDED"
			return emit(r)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	eventually(t, "flagged", func() bool { return len(events.lines()) == 1 })
	mu.Lock()
	kafkaDown = true
	mu.Unlock()
	w.Recheck(Key{"pay", "s"}, Cause{Source: SourcePoll})
	eventually(t, "kafka down", func() bool { return !w.Ready() })
	time.Sleep(50 * time.Millisecond)
	if n := len(events.lines()); n != 1 {
		t.Fatalf("a partial report changed the flag: %+v", events.lines())
	}
	mu.Lock()
	kafkaDown, verdict = false, inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}
	mu.Unlock()
	eventually(t, "cleared once Kafka answers", func() bool { return len(events.lines()) == 2 })
	if ev := events.lines()[1]; ev.Event != Cleared {
		t.Fatalf("event %+v", ev)
	}
}

// alwaysGone says the position is gone until the watch follows from the
// head a sweep gave it ("1").
type alwaysGone struct{ fakeSource }

func (g *alwaysGone) Head(context.Context) (string, error) { return "1", nil }
func (g *alwaysGone) Changes(ctx context.Context, from string) ([]Change, string, error) {
	if from != "1" {
		return nil, from, fmt.Errorf("binlog purged: %w", ErrPositionGone)
	}
	return nil, from, nil
}

// A sweep again after the position is gone that fails (MySQL down) is
// tried again next round, from the gone position, instead of following
// from a head no sweep covered; MySQL is said down meanwhile.
func TestResweepIsRetried(t *testing.T) {
	var mu sync.Mutex
	sweeps := 0
	ups := &upRecorder{up: map[string]bool{}}
	events := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{{Name: "pay"}}, Source: &alwaysGone{}, Interval: 10 * time.Millisecond,
		Events: events, Log: &syncBuf{}, Hooks: Hooks{Up: ups.set},
		Resume: &State{Version: StateVersion, Source: SourcePoll, Position: "0"},
		Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
			return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction}}, nil
		},
		Sweep: func(_ context.Context, emit func(reconcile.Result) error) error {
			mu.Lock()
			sweeps++
			n := sweeps
			mu.Unlock()
			if n == 1 {
				return &sources.ConnError{Err: errors.New("mysql: connection refused")}
			}
			r := reconcile.Result{Severity: inspect.SeverityAction}
			r.BizID, r.Pipeline, r.Verdict = "s", "pay", "STRANDED"
			return emit(r)
		}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx) }()
	eventually(t, "mysql down after the failed sweep", func() bool { v, ok := ups.get(UpMySQL); return ok && !v })
	eventually(t, "flagged by the second sweep", func() bool { return len(events.lines()) == 1 })
	eventually(t, "mysql up again", func() bool { v, _ := ups.get(UpMySQL); return v })
	mu.Lock()
	defer mu.Unlock()
	if sweeps != 2 {
		t.Fatalf("%d sweeps, want 2", sweeps)
	}
}
