package sop

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources/config"
)

// scripted triages to the next verdict of its script (the last again once
// it ends) and refuses everything else: the steps below need no plan.
type scripted struct {
	verdicts []inspect.Code
	n        int
}

func (s *scripted) Triage(_ context.Context, biz, _ string) (*triage.Result, error) {
	v := s.verdicts[min(s.n, len(s.verdicts)-1)]
	s.n++
	r := inspect.Report{BizID: biz, Pipeline: "p", Verdict: inspect.Verdict{Code: v, Summary: "scripted"}}
	return &triage.Result{BizID: biz, Ops: []triage.Operation{{Pipeline: &config.Pipeline{Name: "p"}, Report: r}}}, nil
}

func (s *scripted) Plan(context.Context, *triage.Operation, plans.Options) (*plans.Plan, error) {
	return nil, errors.New("no plan in this test")
}

func (s *scripted) PlanTargets(context.Context, io.Reader, string, string, plans.Options) (*repair.Batch, error) {
	return nil, errors.New("no plan in this test")
}

func (s *scripted) Apply(context.Context, *plans.Plan, repair.ApplyOptions) (*repair.Result, error) {
	return nil, errors.New("no apply in this test")
}

func (s *scripted) StoredPlan(context.Context, string) (*plans.Plan, error) {
	return nil, errors.New("none")
}

func TestWaitProbeNote(t *testing.T) {
	const head = "name: w\ntitle: t\nverdicts: [WILL_REDELIVER]\nsteps:\n"
	for _, c := range []struct {
		name     string
		steps    string
		verdicts []inspect.Code
		outcome  string // the summary's
		last     string // the last step's detail holds it
		triaged  int
	}{
		{"wait until reached", "  - type: wait\n    until: [COMPLETE]\n    timeout: 1m\n",
			[]inspect.Code{inspect.WillRedeliver, inspect.InFlight, inspect.Complete}, "done", "reached [COMPLETE]", 3},
		{"wait until times out", "  - type: wait\n    until: [COMPLETE]\n    timeout: 1s\n",
			[]inspect.Code{inspect.WillRedeliver}, "stopped", "after 1s: o-1 (p) is WILL_REDELIVER", 0},
		{"wait for", "  - type: wait\n    for: 1s\n", []inspect.Code{inspect.Complete}, "done", "waited 1s", 0},
		{"probe expects", "  - type: probe\n    expect: [UNKNOWN_OUTCOME]\n", []inspect.Code{inspect.StateBehind}, "stopped",
			"o-1 (p) is STATE_BEHIND, the runbook expects [UNKNOWN_OUTCOME]", 1},
		{"note", "  - type: note\n    text: |\n      call the risk team\n      then come back\n", []inspect.Code{inspect.Complete}, "done", "call the risk team\nthen come back", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rb, err := Parse("w.yaml", []byte(head+c.steps))
			if err != nil {
				t.Fatal(err)
			}
			svc := &scripted{verdicts: c.verdicts}
			r := &Runner{Triage: svc, Service: svc, Config: &config.Config{}, Records: Records{Dir: t.TempDir()}}
			var evs []Event
			sum, _ := r.Start(context.Background(), rb, Options{BizID: "o-1", PollEvery: 10 * time.Millisecond, Emit: func(ev Event) error { evs = append(evs, ev); return nil }})
			if sum == nil || sum.Outcome != c.outcome || len(evs) == 0 || !strings.Contains(evs[len(evs)-1].Detail, c.last) {
				t.Fatalf("summary %+v events %+v", sum, evs)
			}
			if c.triaged > 0 && svc.n != c.triaged {
				t.Fatalf("triaged %d times, want %d", svc.n, c.triaged)
			}
		})
	}
}

// Ctrl-C during a wait stops the run there: interrupted, resumable.
func TestWaitInterrupted(t *testing.T) {
	rb, err := Parse("w.yaml", []byte("name: w\ntitle: t\nverdicts: [COMPLETE]\nsteps:\n  - type: note\n    text: hi\n  - type: wait\n    for: 1h\n"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &scripted{verdicts: []inspect.Code{inspect.Complete}}
	r := &Runner{Triage: sc, Service: sc, Config: &config.Config{}, Records: Records{Dir: t.TempDir()}}
	sum, err := r.Start(ctx, rb, Options{BizID: "o-1", Emit: func(ev Event) error {
		if ev.Type == StepNote {
			time.AfterFunc(20*time.Millisecond, cancel)
		}
		return nil
	}})
	if !errors.Is(err, context.Canceled) || sum.Outcome != "interrupted" || sum.Done != 1 || sum.StoppedAt != "2-wait" || sum.Exit != 130 {
		t.Fatalf("%v %+v", err, sum)
	}
	rec, err := r.Records.Load(sum.RunID)
	if err != nil {
		t.Fatal(err)
	}
	evs := rec.Events()
	if len(evs) != 2 || evs[1].Outcome != OutcomeInterrupted {
		t.Fatalf("record %+v", evs)
	}
}

// A step that stopped the run and then finished on a resume counts as
// finished: a second resume has nothing left to do.
func TestResumeAfterAStop(t *testing.T) {
	rb, err := Parse("r.yaml", []byte("name: r\ntitle: t\nverdicts: [STRANDED]\nsteps:\n  - type: where\n  - type: verify\n    expect: [COMPLETE]\n"))
	if err != nil {
		t.Fatal(err)
	}
	lib := &Library{Runbooks: []*Runbook{rb}}
	svc := &scripted{verdicts: []inspect.Code{inspect.Stranded, inspect.Stranded, inspect.Complete}}
	r := &Runner{Triage: svc, Service: svc, Config: &config.Config{}, Records: Records{Dir: t.TempDir()}}
	sum, err := r.Start(context.Background(), rb, Options{BizID: "o-1"})
	var stop *StopError
	if !errors.As(err, &stop) || sum.StoppedAt != "2-verify" || sum.Done != 1 {
		t.Fatalf("%v %+v", err, sum)
	}
	sum2, _, err := r.Resume(context.Background(), lib, sum.RunID, Options{})
	if err != nil || sum2.Outcome != "done" || svc.n != 3 {
		t.Fatalf("resume: %v %+v (triaged %d)", err, sum2, svc.n)
	}
	sum3, _, err := r.Resume(context.Background(), lib, sum.RunID, Options{})
	if err != nil || !strings.Contains(sum3.Detail, "nothing to resume") || svc.n != 3 {
		t.Fatalf("second resume: %v %+v (triaged %d)", err, sum3, svc.n)
	}
	// A run of a runbook whose steps changed does not resume.
	rb2, _ := Parse("r.yaml", []byte("name: r\ntitle: t\nverdicts: [STRANDED]\nsteps:\n  - type: where\n  - type: verify\n    expect: [COMPLETE, WILL_REDELIVER]\n"))
	if _, _, err := r.Resume(context.Background(), &Library{Runbooks: []*Runbook{rb2}}, sum.RunID, Options{}); err == nil || !strings.Contains(err.Error(), "changed since the run started") {
		t.Fatalf("resume with a changed runbook: %v", err)
	}
}
