package watch

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
)

// TestStopMidRoundKeepsTheRestOfTheRound: a stop (Ctrl-C, SIGTERM) that
// comes while a round's changes are being triaged ends the looks, but the
// position saved is after the round; the operations not judged yet must be
// in the state file (as deadlines already passed) so that the restart
// triages them, or a change the watch has read is never looked at
// (docs/watch.md#state-file: nothing flagged is lost).
func TestStopMidRoundKeepsTheRestOfTheRound(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	src := &fakeSource{}
	src.push(Change{Pipeline: "pay", BizID: "x"}, Change{Pipeline: "pay", BizID: "y"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var saved []State
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, OlderThan: time.Minute,
		Triage: func(ctx context.Context, _, id string) (inspect.Report, error) {
			if id == "x" {
				cancel() // the stop arrives while x is being triaged
			}
			if err := ctx.Err(); err != nil {
				return inspect.Report{}, err
			}
			now := time.Now()
			return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction}, DBNow: &now}, nil
		},
		Save: func(st State) error { mu.Lock(); saved = append(saved, st); mu.Unlock(); return nil }}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(saved) == 0 {
		t.Fatal("no state saved at the stop")
	}
	last := saved[len(saved)-1]
	if last.Position != "0+" {
		t.Fatalf("saved position %q, want the round's (0+)", last.Position)
	}
	kept := map[string]bool{}
	for _, d := range last.Deadlines {
		kept[d.BizID] = true
	}
	for _, f := range last.Flags {
		kept[f.Event.BizID] = true
	}
	if !kept["x"] || !kept["y"] {
		t.Errorf("state saved at the stop: flags %+v, deadlines %+v; want x and y kept (their change is behind the saved position)", last.Flags, last.Deadlines)
	}
}
