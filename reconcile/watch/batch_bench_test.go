package watch

import (
	"context"
	"io"
	"strconv"
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
