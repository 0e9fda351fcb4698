package watch

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
)

// BenchmarkRound is the watch's own work per changed operation: rounds of
// 1,000 changes over two pipelines through lookAll, their triage a fake
// batch that answers at once (half of them flag, then clear, then flag
// again: an event line each time), so what is measured is the batching,
// the state machine, the deadlines and the event lines, not the sources:
// go test -run '^$' -bench Round -benchtime 20x ./reconcile/watch/
func BenchmarkRound(b *testing.B) {
	state := &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}
	ps := []*config.Pipeline{{Name: "pay", State: state}, {Name: "ship", State: state}}
	ls := make([]lookup, 1000)
	for i := range ls {
		ls[i] = lookup{Key{ps[i%2].Name, "B-" + strconv.Itoa(i)}, Cause{Source: SourcePoll}}
	}
	round := 0
	w := &Watcher{Pipelines: ps, OlderThan: time.Minute, Settle: -1, Events: io.Discard,
		TriageBatch: func(_ context.Context, _ string, ids []string) ([]inspect.Report, error) {
			now := time.Now()
			upd := now.Add(-time.Second)
			out := make([]inspect.Report, len(ids))
			for i, id := range ids {
				out[i] = inspect.Report{BizID: id, DBNow: &now, Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK},
					State: inspect.StateView{Found: true, Status: "DONE", UpdatedAt: &upd}}
				switch {
				case i%2 == 0 && round%2 == 0:
					out[i].Verdict = inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction, Summary: "s"}
				case i%4 == 1:
					out[i].State.Status = "WORKING" // a deadline
				}
			}
			return out, nil
		}}
	w.tracker, w.deadlines = NewTracker(), NewDeadlines()
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if !w.lookAll(ctx, ls) {
			b.Fatal("a look failed")
		}
		round++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(len(ls)*b.N), "ns/change")
}

// BenchmarkStuckDelay is how long a stuck operation waits after crossing
// --older-than for its flagged line while the watch is busy with long
// rounds: a source that always has 5,120 more changes (ten batches, each
// triaged in a fixed 100 ms: one-second rounds, the next at once), and
// 20 operations per round whose first look gives them a deadline 0.3 to
// 2.3 s later. What is reported is the flagged lines' latency_ms (from
// the deadline crossed) over a few seconds of real time: p50, p99, max;
// and the batch calls per round.
// Run once: go test -run '^$' -bench StuckDelay -benchtime 1x ./reconcile/watch/
func BenchmarkStuckDelay(b *testing.B) {
	const (
		perRound  = 5120
		perBatch  = 100 * time.Millisecond
		olderThan = 2 * time.Second
		runFor    = 8 * time.Second
	)
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	src := &endlessSource{perRound: perRound, stuck: 20}
	var mu sync.Mutex
	firstSeen := map[string]time.Time{}
	var delays []int64
	calls := 0
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: time.Millisecond, OlderThan: olderThan, Settle: -1,
		TriageBatch: func(_ context.Context, _ string, ids []string) ([]inspect.Report, error) {
			time.Sleep(perBatch)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			calls++
			out := make([]inspect.Report, len(ids))
			for i, id := range ids {
				done := now.Add(-time.Second)
				out[i] = inspect.Report{BizID: id, DBNow: &now, Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK},
					State: inspect.StateView{Found: true, Status: "DONE", UpdatedAt: &done}}
				if !strings.HasPrefix(id, "s-") {
					continue
				}
				// Its deadline 0.3 to 2.3 s after its first look.
				if _, ok := firstSeen[id]; !ok {
					n, _ := strconv.Atoi(id[strings.LastIndex(id, "-")+1:])
					firstSeen[id] = now.Add(-olderThan + 300*time.Millisecond + time.Duration(n%5)*500*time.Millisecond)
				}
				upd := firstSeen[id]
				out[i].Verdict = inspect.Verdict{Code: "STATE_BEHIND", Severity: inspect.SeverityWatch}
				out[i].State = inspect.StateView{Found: true, Status: "WORKING", UpdatedAt: &upd}
			}
			return out, nil
		},
		Hooks: Hooks{Event: func(e Event) {
			if e.Event == Flagged && e.Cause.Source == SourceTimer && e.LatencyMS != nil {
				mu.Lock()
				delays = append(delays, *e.LatencyMS)
				mu.Unlock()
			}
		}}}
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), runFor)
		if err := w.Run(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(delays) == 0 {
		b.Fatal("no stuck operation flagged")
	}
	slices.Sort(delays)
	b.ReportMetric(float64(delays[len(delays)/2]), "p50-ms")
	b.ReportMetric(float64(delays[len(delays)*99/100]), "p99-ms")
	b.ReportMetric(float64(delays[len(delays)-1]), "max-ms")
	b.ReportMetric(float64(len(delays)), "flagged")
	// What serving the deadlines between batches costs: more, smaller
	// batch calls (each 100 ms here, whatever its size).
	b.ReportMetric(float64(calls)/float64(src.round), "calls/round")
}

// endlessSource has perRound more changes at every read, stuck of them
// operations that will be stuck (s-<round>-<i>).
type endlessSource struct {
	perRound, stuck int
	round           int
}

func (s *endlessSource) Name() string                         { return SourcePoll }
func (s *endlessSource) Head(context.Context) (string, error) { return "0", nil }
func (s *endlessSource) Changes(_ context.Context, from string) ([]Change, string, error) {
	s.round++
	cs := make([]Change, s.perRound)
	for i := range cs {
		id := fmt.Sprintf("c-%d-%d", s.round, i)
		if i < s.stuck {
			id = fmt.Sprintf("s-%d-%d", s.round, i)
		}
		cs[i] = Change{Pipeline: "pay", BizID: id, Table: "ops"}
	}
	return cs, strconv.Itoa(s.round), nil
}
