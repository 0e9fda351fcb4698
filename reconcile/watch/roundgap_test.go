package watch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
)

// wakeSource is a source that wakes the watch when a change is pushed (as
// the binlog follower does) and hands out everything pushed since the last
// read in one round; rounds records each non-empty round's biz_ids.
type wakeSource struct {
	mu      sync.Mutex
	pending []Change
	rounds  [][]string
	wake    chan struct{}
}

func (s *wakeSource) Name() string                         { return SourceBinlog }
func (s *wakeSource) Head(context.Context) (string, error) { return "0", nil }
func (s *wakeSource) Wake() <-chan struct{}                { return s.wake }
func (s *wakeSource) push(c Change) {
	s.mu.Lock()
	s.pending = append(s.pending, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
func (s *wakeSource) Changes(_ context.Context, from string) ([]Change, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.pending
	s.pending = nil
	if len(out) > 0 {
		var ids []string
		for _, c := range out {
			ids = append(ids, c.BizID)
		}
		s.rounds = append(s.rounds, ids)
	}
	return out, from + "+", nil
}

func (s *wakeSource) snapshot() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.rounds...)
}

// TestRoundGap: the transactions of one operation that commit 50 ms apart
// are read by one round when the round gap is longer (one triage), and by
// two without a gap (docs/watch.md#how-it-works).
func TestRoundGap(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gap    time.Duration
		rounds int
	}{
		{"gap 400ms: one round", 400 * time.Millisecond, 1},
		{"no gap: a round per wake", -1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
			src := &wakeSource{wake: make(chan struct{}, 1)}
			var mu sync.Mutex
			triages := 0
			w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: time.Hour, RoundGap: tc.gap, OlderThan: time.Hour, Settle: -1,
				Triage: func(_ context.Context, _, id string) (inspect.Report, error) {
					mu.Lock()
					triages++
					mu.Unlock()
					now := time.Now()
					return inspect.Report{BizID: id, DBNow: &now, Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK},
						State: inspect.StateView{Found: true, Status: "DONE", UpdatedAt: &now}}, nil
				}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx) }()
			defer func() { cancel(); <-done }()
			eventually(t, "the watch ready", func() bool { return w.Ready() })
			// The first round (at start) has passed: the next wake is the
			// operation's first transaction, its second 50 ms later.
			src.push(Change{Pipeline: "pay", BizID: "A", Table: "ops"})
			time.Sleep(50 * time.Millisecond)
			src.push(Change{Pipeline: "pay", BizID: "A", Table: "ops"})
			eventually(t, "both changes read", func() bool {
				n := 0
				for _, r := range src.snapshot() {
					n += len(r)
				}
				return n == 2
			})
			// Whatever comes next is another round's: wait for the gap.
			time.Sleep(max(tc.gap, 0) + 100*time.Millisecond)
			if got := src.snapshot(); len(got) != tc.rounds {
				t.Errorf("rounds %v, want %d", got, tc.rounds)
			}
			mu.Lock()
			defer mu.Unlock()
			if triages != tc.rounds {
				t.Errorf("%d triages, want %d (one per round)", triages, tc.rounds)
			}
		})
	}
}
