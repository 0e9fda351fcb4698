package watch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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

// batchOf is tr as a TriageBatchFunc that records its calls.
type batchOf struct {
	tr    TriageFunc
	mu    sync.Mutex
	calls []batchCall
}

type batchCall struct {
	pipeline string
	ids      []string
}

func (b *batchOf) triage(ctx context.Context, pipeline string, ids []string) ([]inspect.Report, error) {
	b.mu.Lock()
	b.calls = append(b.calls, batchCall{pipeline, slices.Clone(ids)})
	b.mu.Unlock()
	out := make([]inspect.Report, len(ids))
	for i, id := range ids {
		r, err := b.tr(ctx, pipeline, id)
		if err != nil {
			return nil, err // the whole batch, as CollectMany fails
		}
		out[i] = r
	}
	return out, nil
}

func (b *batchOf) get() []batchCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

// roundScenario is a round of changes over two pipelines, interleaved,
// then a second round that clears some, a deadline that flags a stuck
// one, and its events as the lines' event, pipeline, biz_id, verdict and
// cause.source.
func roundScenario(t *testing.T, batched bool) ([]string, *batchOf) {
	t.Helper()
	pay := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", Terminal: []string{"DONE"}}}
	ship := &config.Pipeline{Name: "ship"}
	var mu sync.Mutex
	cleared := map[string]bool{}
	start := time.Now()
	tr := func(_ context.Context, pipeline, id string) (inspect.Report, error) {
		mu.Lock()
		defer mu.Unlock()
		now := time.Now()
		r := inspect.Report{BizID: id, Pipeline: pipeline, DBNow: &now, Verdict: inspect.Verdict{Code: "COMPLETE", Severity: inspect.SeverityOK}}
		var n int
		fmt.Sscanf(id, "o%d", &n)
		switch {
		case cleared[id]:
		case n%3 == 0:
			r.Verdict = inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction, Summary: "s " + id}
		case n%3 == 1 && pipeline == "pay":
			// young and non-terminal: the timer flags it stuck.
			// Their deadlines 5ms apart: the timer's order is theirs.
			upd := start.Add(-50*time.Millisecond + time.Duration(n)*5*time.Millisecond)
			r.Verdict = inspect.Verdict{Code: "STATE_BEHIND", Severity: inspect.SeverityWatch}
			r.State = inspect.StateView{Found: true, Status: "WORKING", UpdatedAt: &upd}
		}
		return r, nil
	}
	b := &batchOf{tr: tr}
	src := &fakeSource{}
	var round []Change
	for i := range 30 {
		p := "pay"
		if i%2 == 1 {
			p = "ship"
		}
		round = append(round, Change{Pipeline: p, BizID: fmt.Sprintf("o%d", i), Table: "ops"})
		if i%5 == 0 {
			round = append(round, Change{Pipeline: p, BizID: fmt.Sprintf("o%d", i), Table: "ops"}) // twice in a round: looked at once
		}
	}
	round = append(round, Change{Pipeline: "gone", BizID: "o0"}) // an unwatched pipeline: nothing
	src.push(round...)
	events := &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{pay, ship}, Source: src, Interval: 10 * time.Millisecond, OlderThan: 200 * time.Millisecond,
		Settle: -1, Events: events, Triage: tr,
		Sweep: func(context.Context, func(reconcile.Result) error) error { return nil }}
	if batched {
		w.Triage, w.TriageBatch, w.Batch = nil, b.triage, 4
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	// o0..o29: every third is STRANDED (10), pay's (the even ones) o4, o10, o16,
	// o22, o28
	// become stuck when the timer looks (5).
	eventually(t, "15 flagged", func() bool { return len(events.lines()) == 15 })
	mu.Lock()
	for _, id := range []string{"o0", "o3", "o6"} {
		cleared[id] = true
	}
	mu.Unlock()
	src.push(Change{Pipeline: "pay", BizID: "o6"}, Change{Pipeline: "ship", BizID: "o3"}, Change{Pipeline: "pay", BizID: "o0"})
	eventually(t, "18 events", func() bool { return len(events.lines()) == 18 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range events.lines() {
		out = append(out, strings.Join([]string{e.Event, e.Pipeline, e.BizID, e.Verdict, e.Cause.Source}, " "))
	}
	return out, b
}

// TestBatchedRoundIsThePerKeyRound: a round of changes over two
// pipelines triaged in batches gives the same events, in the same order,
// as the triage of one operation at a time; the batches are per pipeline,
// at most Batch each, each operation once.
func TestBatchedRoundIsThePerKeyRound(t *testing.T) {
	one, _ := roundScenario(t, false)
	many, b := roundScenario(t, true)
	if !slices.Equal(one, many) {
		t.Fatalf("events in batches:\n%s\nwant (one at a time):\n%s", strings.Join(many, "\n"), strings.Join(one, "\n"))
	}
	calls := b.get()
	seen := map[string]int{}
	for _, c := range calls {
		if len(c.ids) == 0 || len(c.ids) > 4 {
			t.Errorf("a batch of %d operations (Batch 4): %+v", len(c.ids), c)
		}
		if c.pipeline == "gone" {
			t.Errorf("an unwatched pipeline triaged: %+v", c)
		}
		for _, id := range c.ids {
			var n int
			fmt.Sscanf(id, "o%d", &n)
			if want := []string{"pay", "ship"}[n%2]; c.pipeline != want {
				t.Errorf("%s of %s triaged in a batch of %s", id, want, c.pipeline)
			}
			seen[c.pipeline+"/"+id]++
		}
	}
	// The first round: 30 operations in 8 batches (windows of 4, split by
	// pipeline), each once.
	first := 0
	for k, n := range seen {
		if n < 1 {
			t.Errorf("%s not triaged", k)
		}
		first++
	}
	if first != 30 {
		t.Errorf("%d operations triaged, want the 30 changed", first)
	}
	if len(calls) >= 30 {
		t.Errorf("%d batch calls for a round of 30 operations", len(calls))
	}
}

// TestFailedBatchIsRetried: a batch that fails as a whole (MySQL down)
// keeps every operation of it for a retry, says so once (not once per
// operation), and they are all flagged when MySQL answers again, in one
// batch per pipeline.
func TestFailedBatchIsRetried(t *testing.T) {
	pay, ship := &config.Pipeline{Name: "pay"}, &config.Pipeline{Name: "ship"}
	var mu sync.Mutex
	down := true
	tr := func(_ context.Context, pipeline, id string) (inspect.Report, error) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return inspect.Report{}, &sources.ConnError{Err: errors.New("mysql 127.0.0.1:3306: connection refused")}
		}
		return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction},
			Sources: map[string]string{"mysql": sources.StatusOK}}, nil
	}
	b := &batchOf{tr: tr}
	src := &fakeSource{}
	var round []Change
	for i := range 10 {
		round = append(round, Change{Pipeline: []string{"pay", "ship"}[i%2], BizID: fmt.Sprintf("o%d", i)})
	}
	src.push(round...)
	events, logs := &syncBuf{}, &syncBuf{}
	var tmu sync.Mutex
	results := map[string]int{}
	w := &Watcher{Pipelines: []*config.Pipeline{pay, ship}, Source: src, Interval: 10 * time.Millisecond, Settle: -1, Events: events, Log: logs,
		TriageBatch: b.triage,
		Hooks:       Hooks{Triaged: func(r string) { tmu.Lock(); results[r]++; tmu.Unlock() }}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, "all 10 kept for a retry", func() bool { return len(w.Retrying()) == 10 })
	eventually(t, "retried", func() bool { return len(b.get()) >= 4 })
	if n := len(events.lines()); n != 0 {
		t.Fatalf("%d events while MySQL is down", n)
	}
	mu.Lock()
	down = false
	mu.Unlock()
	eventually(t, "all 10 flagged", func() bool { return len(events.lines()) == 10 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if r := w.Retrying(); len(r) != 0 {
		t.Fatalf("still retrying %v", r)
	}
	for _, c := range b.get() {
		if len(c.ids) != 5 {
			t.Errorf("batch %+v: want the pipeline's 5 operations in each", c)
		}
	}
	tmu.Lock()
	if results["ok"] != 10 || results["error"] < 10 || results["error"]%10 != 0 {
		t.Errorf("triages counted %v: want 10 ok and 10 errors per failed round", results)
	}
	tmu.Unlock()
	logs.mu.Lock()
	out := logs.b.String()
	logs.mu.Unlock()
	if strings.Count(out, "mysql lost") != 1 || strings.Count(out, "triage of") != 1 || !strings.Contains(out, "10 operation(s) will be triaged again") {
		t.Errorf("stderr should say MySQL lost once and not each operation:\n%s", out)
	}
}

// TestBadIDFailsAlone: a batch that fails for another reason than MySQL
// (an id the batch read refuses) is triaged one by one, so that the rest
// of it is judged.
func TestBadIDFailsAlone(t *testing.T) {
	p := &config.Pipeline{Name: "pay"}
	tr := func(_ context.Context, _, id string) (inspect.Report, error) {
		if err := sources.ValidateBizID(id); err != nil {
			return inspect.Report{}, err
		}
		return inspect.Report{BizID: id, Verdict: inspect.Verdict{Code: "STRANDED", Severity: inspect.SeverityAction}}, nil
	}
	src := &fakeSource{}
	src.push(Change{Pipeline: "pay", BizID: "a"}, Change{Pipeline: "pay", BizID: strings.Repeat("x", sources.MaxBizID+1)}, Change{Pipeline: "pay", BizID: "b"})
	events, logs := &syncBuf{}, &syncBuf{}
	w := &Watcher{Pipelines: []*config.Pipeline{p}, Source: src, Interval: 10 * time.Millisecond, Settle: -1, Events: events, Log: logs,
		Triage: tr, TriageBatch: BatchTriage(nil, []*config.Pipeline{p})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	eventually(t, "a and b flagged", func() bool { return len(events.lines()) == 2 })
	cancel()
	<-done
	if r := w.Retrying(); len(r) != 1 || r[0].BizID == "a" || r[0].BizID == "b" {
		t.Fatalf("retrying %v: want the bad id alone", r)
	}
}

// limitedDB is a batch-reading DB of a server that holds at most 4
// operations per statement: the state row of even ids is non-terminal,
// of odd ids terminal, and ids from "nf" on have none.
type limitedDB struct {
	mu      sync.Mutex
	batches [][]string
}

func (d *limitedDB) ReadOperation(_ context.Context, _ *config.Pipeline, _ string, id string) (sources.DBEvidence, error) {
	now := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	upd := now.Add(-time.Hour)
	ev := sources.DBEvidence{Now: now}
	var n int
	if _, err := fmt.Sscanf(id, "o%d", &n); err == nil {
		ev.State = sources.StateRow{Found: true, Key: id, Status: []string{"WORKING", "DONE"}[n%2], UpdatedAt: &upd, CreatedAt: &upd}
	}
	return ev, nil
}

func (d *limitedDB) ReadOperations(ctx context.Context, p *config.Pipeline, audit string, ids []string) ([]sources.DBEvidence, []error, error) {
	d.mu.Lock()
	d.batches = append(d.batches, slices.Clone(ids))
	d.mu.Unlock()
	if len(ids) > 4 {
		return nil, nil, fmt.Errorf("%d operations in one statement, at most 4", len(ids))
	}
	evs, errs := make([]sources.DBEvidence, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		evs[i], errs[i] = d.ReadOperation(ctx, p, audit, id)
	}
	return evs, errs, nil
}

func (d *limitedDB) BatchLimit(context.Context) (int, string) { return 4, "a test server" }

// TestBatchTriage: the batch triage of the watch reads each operation's
// rows by its own statements (never a batched statement, even on a
// BatchDB), and gives each operation the verdict `where` gives it
// (Collect, then Diagnose).
func TestBatchTriage(t *testing.T) {
	p := &config.Pipeline{Name: "pay", State: &config.State{Table: "ops", Key: "id", Status: "status", UpdatedAt: "updated_at", CreatedAt: "created_at",
		Initial: []string{"NEW"}, Terminal: []string{"DONE"}}}
	db := &limitedDB{}
	col := &sources.Collector{DB: db, KafkaMissing: "not configured", Timeout: time.Second}
	ids := []string{"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7", "o8", "nf1"}
	reps, err := BatchTriage(col, []*config.Pipeline{p})(context.Background(), "pay", ids)
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != len(ids) {
		t.Fatalf("%d reports for %d ids", len(reps), len(ids))
	}
	codes := map[inspect.Code]bool{}
	for i, id := range ids {
		ev, err := col.Collect(context.Background(), p, id)
		if err != nil {
			t.Fatal(err)
		}
		want := inspect.Diagnose(ev)
		if reps[i].BizID != id || !reflect.DeepEqual(reps[i].Verdict, want.Verdict) || reps[i].Partial != want.Partial || reps[i].State.Status != want.State.Status {
			t.Errorf("%s: batch %+v (partial %v), where %+v (partial %v)", id, reps[i].Verdict, reps[i].Partial, want.Verdict, want.Partial)
		}
		codes[want.Verdict.Code] = true
	}
	if len(codes) < 2 {
		t.Errorf("verdicts %v: the test wants operations that differ", codes)
	}
	db.mu.Lock()
	defer db.mu.Unlock()
	// Each operation's rows by its own statements (Collector.PerOperation):
	// a batched statement's plan may read the whole table.
	if len(db.batches) != 0 {
		t.Errorf("batch reads %v: want none, each operation read by its own statements", db.batches)
	}
	if _, err := BatchTriage(col, []*config.Pipeline{p})(context.Background(), "other", ids); err == nil {
		t.Error("a pipeline not watched: no error")
	}
}
