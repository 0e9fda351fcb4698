package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
)

// goneSource fails its first Changes with ErrPositionGone.
type goneSource struct {
	fakeSource
	once sync.Once
}

func (g *goneSource) Changes(ctx context.Context, from string) ([]Change, string, error) {
	var gone bool
	g.once.Do(func() { gone = true })
	if gone {
		return nil, from, fmt.Errorf("binlog purged: %w", ErrPositionGone)
	}
	return g.fakeSource.Changes(ctx, from)
}

// TestRestart: a watch saves its state when it stops; a second one given
// that state resumes from the position without a sweep, keeps the flag it
// restored (no second flagged line) and clears one that recovered while it
// was down; a source that lost the position makes it sweep again.
func TestRestart(t *testing.T) {
	p := &config.Pipeline{Name: "pay"}
	var mu sync.Mutex
	code := map[string]inspect.Code{"a": "STRANDED", "b": "DUPLICATE_EFFECT"}
	triage := func(_ context.Context, _, id string) (inspect.Report, error) {
		mu.Lock()
		defer mu.Unlock()
		sev := inspect.SeverityAction
		if code[id] == "COMPLETE" {
			sev = inspect.SeverityOK
		}
		return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: code[id], Severity: sev}}, nil
	}
	var sweeps atomic.Int32
	sweep := func(_ context.Context, emit func(reconcile.Result) error) error {
		sweeps.Add(1)
		for _, id := range []string{"a", "b"} {
			r := reconcile.Result{Severity: inspect.SeverityAction}
			r.BizID, r.Pipeline = id, "pay"
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}
	var saved []byte
	run := func(src ChangeSource, resume *State) *syncBuf {
		t.Helper()
		events := &syncBuf{}
		w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 5 * time.Millisecond, Triage: triage, Sweep: sweep,
			Events: events, Resume: resume, Save: func(st State) error {
				b, err := json.Marshal(st)
				saved = b
				return err
			}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Run(ctx) }()
		for i := 0; i < 200 && !w.Ready(); i++ {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return events
	}
	ev := run(&fakeSource{}, nil)
	if n := len(ev.lines()); n != 2 || sweeps.Load() != 1 {
		t.Fatalf("first run: %d events, %d sweeps", n, sweeps.Load())
	}
	var st State
	if err := json.Unmarshal(saved, &st); err != nil || len(st.Flags) != 2 || st.Position == "" || st.Source != SourcePoll {
		t.Fatalf("saved state %s: %v", saved, err)
	}
	if st.Flags[0].Event.At.IsZero() || st.Flags[0].Since.IsZero() {
		t.Fatalf("saved flag without its times: %s", saved)
	}
	mu.Lock()
	code["b"] = "COMPLETE"
	mu.Unlock()
	ev = run(&fakeSource{}, &st)
	got := ev.lines()
	if sweeps.Load() != 1 || len(got) != 1 || got[0].Event != Cleared || got[0].BizID != "b" {
		t.Fatalf("resumed run: %d sweeps, events %+v; want no sweep and b cleared", sweeps.Load(), got)
	}
	var st2 State
	if err := json.Unmarshal(saved, &st2); err != nil || len(st2.Flags) != 1 || st2.Flags[0].Event.BizID != "a" || !st2.Flags[0].Since.Equal(st.Flags[0].Since) && !st2.Flags[0].Since.Equal(st.Flags[1].Since) {
		t.Fatalf("state after the resumed run %s: %v", saved, err)
	}
	// The position is gone: it sweeps again, and a stays flagged once.
	ev = run(&goneSource{}, &st2)
	if sweeps.Load() != 2 || len(ev.lines()) != 0 {
		t.Fatalf("position gone: %d sweeps, events %+v; want a second sweep and no new line", sweeps.Load(), ev.lines())
	}
}
