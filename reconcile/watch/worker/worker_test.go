package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// fakeOp is one operation of the fake write side: its verdict now, the
// verdict an apply leaves, and how its plan or apply goes.
type fakeOp struct {
	verdict inspect.Code
	after   inspect.Code
	// planErr is PlanID's error; outcome Apply's (default applied).
	planErr error
	outcome repair.Outcome
	// stored is the plan of a REPAIR_INCOMPLETE (StoredPlan).
	stored *plans.Plan
	// then are the verdicts the triages after the apply read, one each
	// after the first (after); the last stays.
	then    []inspect.Code
	applied bool
	triages int
}

// fakeService is the write side and the triage over fakeOps; every apply
// is recorded.
type fakeService struct {
	mu      sync.Mutex
	ops     map[string]*fakeOp
	applied []string
	// block, when set, makes Apply wait for ctx (a long apply).
	block bool
	// started is signalled when an apply starts.
	started chan string
}

func (s *fakeService) PlanID(_ context.Context, bizID, pipeline string, o plans.Options) (*plans.Plan, *triage.Operation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.ops[bizID]
	rep := inspect.Report{BizID: bizID, Pipeline: pipeline, Verdict: inspect.Verdict{Code: op.verdict, Severity: inspect.SeverityOf(op.verdict)}}
	if op.stored != nil && op.verdict == inspect.RepairIncomplete {
		rep.Repair = &inspect.RepairView{PlanID: op.stored.ID}
	}
	t := &triage.Operation{Report: rep}
	if op.planErr != nil {
		return nil, t, op.planErr
	}
	if len(plans.CalledFor(op.verdict)) == 0 || op.verdict == inspect.RepairIncomplete {
		return nil, t, &plans.NothingToRepairError{Verdict: op.verdict}
	}
	return &plans.Plan{ID: "plan-" + bizID + "-0123456789", BizID: bizID, Pipeline: pipeline, Verdict: op.verdict, Operator: o.Operator, Reason: o.Reason}, t, nil
}

func (s *fakeService) StoredPlan(_ context.Context, id string) (*plans.Plan, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, op := range s.ops {
		if op.stored != nil && op.stored.ID == id {
			return op.stored, nil
		}
	}
	return nil, errors.New("no such plan")
}

func (s *fakeService) Apply(ctx context.Context, p *plans.Plan, o repair.ApplyOptions) (*repair.Result, error) {
	if s.started != nil {
		s.started <- p.BizID
	}
	if s.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.ops[p.BizID]
	out := op.outcome
	if out == "" {
		out = repair.OutcomeApplied
	}
	res := &repair.Result{PlanID: p.ID, BizID: p.BizID, Pipeline: p.Pipeline, Outcome: out, Total: 2, Applied: 2}
	if out != repair.OutcomeApplied {
		res.Applied, res.Refused = 0, "stale: the state row changed"
		return res, errors.New("refused: stale")
	}
	s.applied = append(s.applied, p.BizID+" by "+o.Operator)
	op.verdict, op.applied = op.after, true
	return res, nil
}

func (s *fakeService) Triage(_ context.Context, pipeline, bizID string) (inspect.Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	op := s.ops[bizID]
	rep := inspect.Report{BizID: bizID, Pipeline: pipeline, Verdict: inspect.Verdict{Code: op.verdict, Severity: inspect.SeverityOf(op.verdict), Summary: "fake"}}
	op.triages++
	if op.applied && len(op.then) > 0 {
		op.verdict, op.then = op.then[0], op.then[1:]
	}
	return rep, nil
}

func (s *fakeService) triages(bizID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ops[bizID].triages
}

func (s *fakeService) appliedNow() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.applied)
}

// targets is a flagged set the test changes.
type targets struct {
	mu    sync.Mutex
	flags []watch.Flag
}

func (t *targets) get() []watch.Flag {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.flags)
}

func flag(biz string, v inspect.Code, since time.Time) watch.Flag {
	return watch.Flag{Event: watch.Event{Event: watch.Flagged, Pipeline: "pay", BizID: biz, Verdict: string(v), Severity: "action",
		Cause: watch.Cause{Source: watch.SourcePoll}}, Since: since}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) { b.mu.Lock(); defer b.mu.Unlock(); return b.b.Write(p) }
func (b *syncBuf) String() string              { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// lines are the event lines written so far.
func (b *syncBuf) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("event line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func kinds(ls []map[string]any) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l["event"].(string)+" "+l["biz_id"].(string))
	}
	return out
}

// waitFor polls cond (the worker runs in its own goroutine) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

// clock is a test clock the test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

type fixture struct {
	svc    *fakeService
	tg     *targets
	events *syncBuf
	log    *syncBuf
	w      *Worker
	clock  *clock
	states []string
	counts map[string]int
	mu     sync.Mutex
}

func newFixture(ops map[string]*fakeOp, order ...string) *fixture {
	f := &fixture{svc: &fakeService{ops: ops}, tg: &targets{}, events: &syncBuf{}, log: &syncBuf{},
		clock: &clock{now: time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)}, counts: map[string]int{}}
	for i, biz := range order {
		f.tg.flags = append(f.tg.flags, flag(biz, ops[biz].verdict, f.clock.now.Add(time.Duration(i)*time.Millisecond)))
	}
	f.w = &Worker{Verdicts: []inspect.Code{inspect.StateBehind, inspect.Stranded}, PerMinute: 2, Operator: OperatorPrefix + "test",
		Service: f.svc, Triage: f.svc.Triage, Targets: f.tg.get, Retry: 10 * time.Millisecond,
		Expect: func(inspect.Code) []inspect.Code {
			return []inspect.Code{inspect.WillRedeliver, inspect.InFlight, inspect.CompleteUncommitted, inspect.Complete}
		},
		Events: f.events, Log: f.log, Now: f.clock.Now,
		Hooks: Hooks{
			Repair: func(v, o string) { f.mu.Lock(); f.counts[v+" "+o]++; f.mu.Unlock() },
			State:  func(s, r string) { f.mu.Lock(); f.states = append(f.states, s+"/"+r); f.mu.Unlock() },
		}}
	return f
}

func (f *fixture) count(k string) int { f.mu.Lock(); defer f.mu.Unlock(); return f.counts[k] }

func (f *fixture) run(t *testing.T) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.w.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func behind(after inspect.Code) *fakeOp {
	return &fakeOp{verdict: inspect.StateBehind, after: after}
}

func TestWorker(t *testing.T) {
	t.Run("staging: the first alone, then up to the rate", func(t *testing.T) {
		f := newFixture(map[string]*fakeOp{"a": behind(inspect.WillRedeliver), "b": behind(inspect.Complete), "c": behind(inspect.WillRedeliver)}, "a", "b", "c")
		stop := f.run(t)
		defer stop()
		waitFor(t, "two repairs", func() bool { return len(f.svc.appliedNow()) == 2 })
		// The third waits for the minute of the first: a few loops later
		// it has not started.
		time.Sleep(100 * time.Millisecond)
		if got := f.svc.appliedNow(); len(got) != 2 || got[0] != "a by opctl-watch@test" || got[1] != "b by opctl-watch@test" {
			t.Fatalf("applied %v: want a then b, by the worker's operator, and c held by the rate", got)
		}
		f.clock.add(61 * time.Second)
		waitFor(t, "the third after a minute", func() bool { return len(f.svc.appliedNow()) == 3 })
		waitFor(t, "three repaired lines", func() bool { return len(f.events.lines(t)) == 3 })
		ls := f.events.lines(t)
		if !slices.Equal(kinds(ls), []string{"repaired a", "repaired b", "repaired c"}) || ls[0]["verdict"] != "WILL_REDELIVER" || ls[1]["verdict"] != "COMPLETE" {
			t.Errorf("events %v", f.events)
		}
		if f.count("STATE_BEHIND repaired") != 3 {
			t.Errorf("counts %v", f.counts)
		}
		if !strings.Contains(f.log.String(), "the first repair is verified: up to 2 a minute") {
			t.Errorf("stderr %s", f.log)
		}
	})
	t.Run("the canary fails: nothing after it", func(t *testing.T) {
		f := newFixture(map[string]*fakeOp{"a": behind(inspect.StateBehind), "b": behind(inspect.Complete)}, "a", "b")
		stop := f.run(t)
		defer stop()
		waitFor(t, "stopped", func() bool { s, _ := f.w.State(); return s == StateStopped })
		time.Sleep(100 * time.Millisecond)
		if got := f.svc.appliedNow(); len(got) != 1 {
			t.Fatalf("applied %v: want only the canary", got)
		}
		ls := f.events.lines(t)
		if !slices.Equal(kinds(ls), []string{"repair_failed a", "paused "}) || !strings.Contains(ls[0]["summary"].(string), "the verdict after it is STATE_BEHIND, not one of WILL_REDELIVER") {
			t.Errorf("events %s", f.events)
		}
		if _, reason := f.w.State(); reason != ReasonUnexpected || f.count("STATE_BEHIND unexpected") != 1 {
			t.Errorf("reason %q counts %v", reason, f.counts)
		}
		if !strings.Contains(f.log.String(), "repairs stopped (unexpected_verdict)") {
			t.Errorf("stderr %s", f.log)
		}
	})
	t.Run("stop at the first failed apply", func(t *testing.T) {
		ops := map[string]*fakeOp{"a": behind(inspect.Complete), "b": behind(inspect.Complete), "c": behind(inspect.Complete)}
		ops["b"].outcome = repair.OutcomeRefused
		f := newFixture(ops, "a", "b", "c")
		f.w.PerMinute = 10
		lock := &fakeLock{lost: make(chan struct{})}
		f.w.Lock = func(context.Context) (sources.Lock, error) { return lock, nil }
		stop := f.run(t)
		waitFor(t, "stopped", func() bool { s, _ := f.w.State(); return s == StateStopped })
		time.Sleep(100 * time.Millisecond)
		// A stopped worker keeps the lock: the other watch does not carry
		// on with what stopped this one; it gives it back when it ends.
		if lock.released() {
			t.Error("the lock was released by the stop")
		}
		stop()
		if !lock.released() {
			t.Error("the lock was not released when the worker ended")
		}
		if got := f.svc.appliedNow(); len(got) != 1 || got[0] != "a by opctl-watch@test" {
			t.Fatalf("applied %v: want a only (b refused, c never tried)", got)
		}
		ls := f.events.lines(t)
		if !slices.Equal(kinds(ls), []string{"repaired a", "repair_failed b", "paused "}) || !strings.Contains(ls[1]["summary"].(string), "did not apply: refused: stale") {
			t.Errorf("events %s", f.events)
		}
		if _, reason := f.w.State(); reason != ReasonApplyFailed || f.count("STATE_BEHIND failed") != 1 {
			t.Errorf("reason %q counts %v", reason, f.counts)
		}
	})
	t.Run("pause file", func(t *testing.T) {
		f := newFixture(map[string]*fakeOp{"a": behind(inspect.Complete)}, "a")
		f.w.PauseFile = filepath.Join(t.TempDir(), "pause")
		if err := os.WriteFile(f.w.PauseFile, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		stop := f.run(t)
		defer stop()
		waitFor(t, "paused", func() bool { s, _ := f.w.State(); return s == StatePaused })
		time.Sleep(100 * time.Millisecond)
		if got := f.svc.appliedNow(); len(got) != 0 {
			t.Fatalf("applied %v while paused", got)
		}
		if ls := f.events.lines(t); !slices.Equal(kinds(ls), []string{"paused "}) || !strings.Contains(ls[0]["summary"].(string), "pause file") {
			t.Fatalf("events while paused (one paused line): %s", f.events)
		}
		if err := os.Remove(f.w.PauseFile); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "repaired after the pause", func() bool { return len(f.svc.appliedNow()) == 1 })
		if !strings.Contains(f.log.String(), "repairs resume") {
			t.Errorf("stderr %s", f.log)
		}
	})
	t.Run("needs an attestation: skipped, the next one repaired", func(t *testing.T) {
		ops := map[string]*fakeOp{"a": behind(inspect.Complete), "b": behind(inspect.Complete)}
		ops["a"].planErr = &plans.InputError{Msg: "this plan has a manual action", Option: plans.OptAttest}
		f := newFixture(ops, "a", "b")
		stop := f.run(t)
		defer stop()
		waitFor(t, "b repaired", func() bool { return len(f.svc.appliedNow()) == 1 })
		if got := f.svc.appliedNow(); got[0] != "b by opctl-watch@test" || f.count("STATE_BEHIND skipped") != 1 {
			t.Errorf("applied %v counts %v", got, f.counts)
		}
		if !strings.Contains(f.log.String(), "a: not repaired: its plan needs an operator's attestation") {
			t.Errorf("stderr %s", f.log)
		}
	})
	t.Run("a verdict not given is not repaired", func(t *testing.T) {
		ops := map[string]*fakeOp{"a": {verdict: inspect.MissingEffect, after: inspect.Complete}, "b": behind(inspect.Complete)}
		f := newFixture(ops, "a", "b")
		stop := f.run(t)
		defer stop()
		waitFor(t, "b repaired", func() bool { return len(f.svc.appliedNow()) == 1 })
		time.Sleep(50 * time.Millisecond)
		if got := f.svc.appliedNow(); len(got) != 1 || got[0] != "b by opctl-watch@test" {
			t.Errorf("applied %v", got)
		}
	})
	t.Run("REPAIR_INCOMPLETE: its own plan finished, another's left", func(t *testing.T) {
		ops := map[string]*fakeOp{
			"a": {verdict: inspect.RepairIncomplete, after: inspect.WillRedeliver, stored: &plans.Plan{ID: "own-plan-0123456789", BizID: "a", Pipeline: "pay", Verdict: inspect.StateBehind, Operator: OperatorPrefix + "other-host"}},
			"b": {verdict: inspect.RepairIncomplete, after: inspect.WillRedeliver, stored: &plans.Plan{ID: "alice-plan-0123456789", BizID: "b", Pipeline: "pay", Verdict: inspect.StateBehind, Operator: "alice"}},
		}
		f := newFixture(ops, "a", "b")
		stop := f.run(t)
		defer stop()
		waitFor(t, "a finished", func() bool { return len(f.events.lines(t)) == 1 })
		waitFor(t, "b left", func() bool {
			return strings.Contains(f.log.String(), "b: REPAIR_INCOMPLETE: plan alice-plan-0 (STATE_BEHIND, by alice) is not a repair of this worker's")
		})
		if got := f.svc.appliedNow(); len(got) != 1 || got[0] != "a by opctl-watch@test" {
			t.Errorf("applied %v", got)
		}
		if ls := f.events.lines(t); !strings.Contains(ls[0]["summary"].(string), "finished, applied 2/2") {
			t.Errorf("events %s", f.events)
		}
	})
	t.Run("leadership: standby, then leader, and a lost lock stops at once", func(t *testing.T) {
		f := newFixture(map[string]*fakeOp{"a": behind(inspect.Complete), "b": behind(inspect.Complete)}, "a", "b")
		f.svc.block, f.svc.started = true, make(chan string, 10)
		var mu sync.Mutex
		free := false
		var held *fakeLock
		f.w.Lock = func(context.Context) (sources.Lock, error) {
			mu.Lock()
			defer mu.Unlock()
			if !free {
				return nil, &sources.LockHeldError{Name: "opctl-watch:x", Holder: sources.LockHolder{Connection: 7}}
			}
			free = false
			held = &fakeLock{lost: make(chan struct{})}
			return held, nil
		}
		stop := f.run(t)
		defer stop()
		waitFor(t, "standby", func() bool { s, _ := f.w.State(); return s == StateStandby })
		if !strings.Contains(f.log.String(), "another watch holds the repair lock opctl-watch:x (MySQL connection 7)") {
			t.Errorf("stderr %s", f.log)
		}
		select {
		case b := <-f.svc.started:
			t.Fatalf("an apply (%s) started without the lock", b)
		case <-time.After(50 * time.Millisecond):
		}
		mu.Lock()
		free = true
		mu.Unlock()
		var first string
		select {
		case first = <-f.svc.started:
		case <-time.After(10 * time.Second):
			t.Fatal("no apply once the lock was free")
		}
		mu.Lock()
		close(held.lost)
		mu.Unlock()
		waitFor(t, "standby after the loss", func() bool { s, _ := f.w.State(); return s == StateStandby })
		select {
		case b := <-f.svc.started:
			t.Fatalf("an apply (%s) started after the lock was lost", b)
		case <-time.After(100 * time.Millisecond):
		}
		if first != "a" || !strings.Contains(f.log.String(), "was lost") || !held.released() {
			t.Errorf("first %q released %v stderr %s", first, held.released(), f.log)
		}
	})
}

type fakeLock struct {
	mu   sync.Mutex
	lost chan struct{}
	rel  bool
}

func (l *fakeLock) Name() string          { return "opctl-watch:x" }
func (l *fakeLock) Contended() string     { return "" }
func (l *fakeLock) Lost() <-chan struct{} { return l.lost }
func (l *fakeLock) Release() error        { l.mu.Lock(); l.rel = true; l.mu.Unlock(); return nil }
func (l *fakeLock) released() bool        { l.mu.Lock(); defer l.mu.Unlock(); return l.rel }

func TestParseVerdicts(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "STATE_BEHIND,stranded", want: "STATE_BEHIND STRANDED"},
		{in: "STATE_BEHIND, STATE_BEHIND", want: "STATE_BEHIND"},
		{in: "UNKNOWN_OUTCOME", err: "UNKNOWN_OUTCOME is not repaired by the worker: its plan always needs an operator's attestation"},
		{in: "IN_FLIGHT", err: "release_lease is an operator's decision"},
		{in: "COMPLETE", err: "COMPLETE is not repaired by the worker: it calls for no repair; it repairs STATE_BEHIND, STRANDED, MISSING_EFFECT, WRONGLY_SKIPPED, DUPLICATE_EFFECT"},
		{in: "STRANDD", err: `"STRANDD" is not a verdict`},
		{in: ",", err: "no verdict given"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseVerdicts(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			var s []string
			for _, c := range got {
				s = append(s, string(c))
			}
			if err != nil || strings.Join(s, " ") != tc.want {
				t.Fatalf("%v %v, want %s", s, err, tc.want)
			}
		})
	}
}

func TestLockName(t *testing.T) {
	a, b := LockName("shop", []string{"pay", "orders"}), LockName("shop", []string{"orders", "pay"})
	if a != b || len(a) > sources.MaxLockName || !strings.HasPrefix(a, "opctl-watch:") || a == LockName("shop", []string{"pay"}) {
		t.Fatalf("%q %q", a, b)
	}
	// Another database of the same server: another lock.
	if c := LockName("shop_staging", []string{"pay", "orders"}); c == a {
		t.Fatalf("databases shop and shop_staging share the lock %q", c)
	}
}

// TestWorkerSettle: the verdict after a repair is triaged again until it is
// an expected one or the settle window has passed (docs/watch.md#recovery):
// a consumer reading the republished record is seen mid-way for a moment
// (seed 000's naive settlement consumer: STATE_BEHIND between its ledger
// insert and its state update), which is no failed repair.
func TestWorkerSettle(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after inspect.Code
		then  []inspect.Code
		// pass moves the clock past the window once the worker has
		// triaged this many times; 0: never.
		pass      int
		wantState string
		wantKinds []string
		wantText  string
		// wantTriages, when set, is how many times a is triaged.
		wantTriages int
	}{
		{name: "a transient unexpected verdict that turns expected: repaired, repairs go on",
			after: inspect.StateBehind, then: []inspect.Code{inspect.StateBehind, inspect.CompleteUncommitted},
			wantState: StateRepairing, wantKinds: []string{"repaired a", "repaired b"}, wantText: "settled: STATE_BEHIND at first, COMPLETE_UNCOMMITTED"},
		{name: "an unexpected verdict that stays for the window: stopped",
			after: inspect.StateBehind, pass: 5,
			wantState: StateStopped, wantKinds: []string{"repair_failed a", "paused "}, wantText: "the verdict after it is STATE_BEHIND, not one of WILL_REDELIVER, IN_FLIGHT, COMPLETE_UNCOMMITTED, COMPLETE (still after 10s"},
		{name: "expected at once: repaired after one triage",
			after: inspect.CompleteUncommitted, then: []inspect.Code{inspect.StateBehind}, wantState: StateRepairing,
			wantKinds: []string{"repaired a", "repaired b"}, wantTriages: 1},
		{name: "unexpected, another unexpected at the window's end: that one stops",
			after: inspect.StateBehind, then: []inspect.Code{inspect.DuplicateEffect}, pass: 5,
			wantState: StateStopped, wantKinds: []string{"repair_failed a", "paused "}, wantText: "the verdict after it is DUPLICATE_EFFECT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ops := map[string]*fakeOp{"a": {verdict: inspect.StateBehind, after: tc.after, then: tc.then}, "b": behind(inspect.Complete)}
			f := newFixture(ops, "a", "b")
			f.w.Settle, f.w.Poll = 10*time.Second, time.Millisecond
			stop := f.run(t)
			defer stop()
			if tc.pass > 0 {
				waitFor(t, "triages while it settles", func() bool { return f.svc.triages("a") >= tc.pass })
				if s, _ := f.w.State(); s == StateStopped || len(f.events.lines(t)) != 0 {
					t.Fatalf("state %s, events %s before the settle window passed", s, f.events)
				}
				f.clock.add(10*time.Second + time.Millisecond)
			}
			waitFor(t, "the event lines", func() bool { return len(f.events.lines(t)) == len(tc.wantKinds) })
			if s, _ := f.w.State(); s != tc.wantState {
				t.Errorf("state %s, want %s; stderr %s", s, tc.wantState, f.log)
			}
			ls := f.events.lines(t)
			if !slices.Equal(kinds(ls), tc.wantKinds) {
				t.Errorf("events %s", f.events)
			}
			if n := f.svc.triages("a"); tc.wantTriages > 0 && n != tc.wantTriages {
				t.Errorf("a triaged %d times, want %d", n, tc.wantTriages)
			}
			if !strings.Contains(f.log.String(), tc.wantText) {
				t.Errorf("stderr %s, want %q", f.log, tc.wantText)
			}
		})
	}
}

// TestWorkerRepairAfter: a flag is repaired only once it has lasted
// RepairAfter; one that clears before is never repaired.
func TestWorkerRepairAfter(t *testing.T) {
	t.Run("a flag younger than RepairAfter waits, an older one is repaired", func(t *testing.T) {
		f := newFixture(map[string]*fakeOp{"old": behind(inspect.Complete), "young": behind(inspect.Complete)})
		now := f.clock.Now()
		f.tg.flags = []watch.Flag{flag("old", inspect.StateBehind, now.Add(-11*time.Second)), flag("young", inspect.StateBehind, now.Add(-time.Second))}
		f.w.RepairAfter = 10 * time.Second
		stop := f.run(t)
		defer stop()
		waitFor(t, "the old flag repaired", func() bool { return len(f.svc.appliedNow()) >= 1 })
		time.Sleep(100 * time.Millisecond) // ten rounds of the worker
		if got := f.svc.appliedNow(); len(got) != 1 || got[0] != "old by opctl-watch@test" {
			t.Fatalf("applied %v: want the old flag only", got)
		}
		f.clock.add(9 * time.Second)
		waitFor(t, "the young flag repaired once 10s old", func() bool { return len(f.svc.appliedNow()) == 2 })
	})
	t.Run("a verdict changed less than RepairAfter ago waits", func(t *testing.T) {
		f := newFixture(map[string]*fakeOp{"a": behind(inspect.Complete)})
		now := f.clock.Now()
		fl := flag("a", inspect.StateBehind, now.Add(-time.Minute))
		fl.Event.Event, fl.At = watch.Changed, now.Add(-time.Second) // STRANDED, then STATE_BEHIND a second ago
		f.tg.flags = []watch.Flag{fl}
		f.w.RepairAfter = 10 * time.Second
		stop := f.run(t)
		defer stop()
		time.Sleep(100 * time.Millisecond) // ten rounds of the worker
		if got := f.svc.appliedNow(); len(got) != 0 {
			t.Fatalf("applied %v: the verdict is a second old", got)
		}
		f.clock.add(9 * time.Second)
		waitFor(t, "repaired once the verdict is 10s old", func() bool { return len(f.svc.appliedNow()) == 1 })
	})
	t.Run("the planner's triage differs from the flag: not now, looked at again after RepairAfter", func(t *testing.T) {
		// Flagged STATE_BEHIND long ago; the planner's triage reads
		// STRANDED (a consumer mid-way, the watch has not seen it yet).
		ops := map[string]*fakeOp{"a": {verdict: inspect.Stranded, after: inspect.Complete}}
		f := newFixture(ops)
		f.tg.flags = []watch.Flag{flag("a", inspect.StateBehind, f.clock.Now().Add(-time.Minute))}
		f.w.RepairAfter = 10 * time.Second
		stop := f.run(t)
		defer stop()
		waitFor(t, "said", func() bool {
			return strings.Contains(f.log.String(), "pay a: not repaired now: flagged STATE_BEHIND, triaged STRANDED just now (a consumer may be mid-way); looking again in 10s")
		})
		time.Sleep(100 * time.Millisecond)
		if got := f.svc.appliedNow(); len(got) != 0 {
			t.Fatalf("applied %v on a verdict the flag does not have", got)
		}
		f.svc.mu.Lock()
		ops["a"].verdict = inspect.StateBehind
		f.svc.mu.Unlock()
		f.clock.add(10 * time.Second)
		waitFor(t, "repaired when looked at again", func() bool { return len(f.svc.appliedNow()) == 1 })
	})
	t.Run("a flag that clears before RepairAfter is never repaired", func(t *testing.T) {
		f := newFixture(map[string]*fakeOp{"gone": behind(inspect.Complete), "b": behind(inspect.Complete)}, "gone")
		f.w.RepairAfter = 10 * time.Second
		stop := f.run(t)
		defer stop()
		time.Sleep(50 * time.Millisecond) // five rounds of the worker
		// The consumer finished: the watch cleared it.
		f.tg.mu.Lock()
		f.tg.flags = nil
		f.tg.mu.Unlock()
		f.clock.add(11 * time.Second)
		// Another operation, flagged 10s ago, shows the worker ran after.
		f.tg.mu.Lock()
		f.tg.flags = []watch.Flag{flag("b", inspect.StateBehind, f.clock.Now().Add(-10*time.Second))}
		f.tg.mu.Unlock()
		f.w.Offer(watch.Event{Event: watch.Flagged})
		waitFor(t, "b repaired", func() bool { return len(f.svc.appliedNow()) == 1 })
		if got := f.svc.appliedNow(); got[0] != "b by opctl-watch@test" {
			t.Fatalf("applied %v: the cleared flag was repaired", got)
		}
	})
}
