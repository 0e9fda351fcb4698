package sop

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// massService is a broker blip's aftermath without a database: reconcile
// finds n stranded operations, each gets a plan of about 2.5 KB (the size
// of a republish plan with its observed fingerprint), applies record
// themselves, and a verify sees WILL_REDELIVER — except the operations of
// broken, which the next verify finds STRANDED still.
type massService struct {
	n       int
	applied map[string]int
	broken  map[string]bool
	// partial: a triage of an operation whose number is a multiple of it
	// reads without Kafka (0: never).
	partial int
}

func (m *massService) reconcile(_ context.Context, _ reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
	for i := range m.n {
		r := reconcile.Result{Target: reconcile.Target{BizID: fmt.Sprintf("M-%06d", i), Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded},
			Severity: inspect.SeverityAction}
		if err := emit(r); err != nil {
			return nil, err
		}
	}
	return &reconcile.Summary{Targets: int64(m.n)}, nil
}

func (m *massService) Triage(_ context.Context, biz, _ string) (*triage.Result, error) {
	v := inspect.WillRedeliver
	if m.broken[biz] {
		v = inspect.Stranded
	}
	r := inspect.Report{BizID: biz, Pipeline: "settlement", Verdict: inspect.Verdict{Code: v, Summary: "scripted"},
		Sources: map[string]string{"mysql": sources.StatusOK, "kafka": sources.StatusOK}}
	var i int
	if _, err := fmt.Sscanf(biz, "M-%d", &i); err == nil && m.partial > 0 && i%m.partial == 0 {
		r.Partial, r.Sources["kafka"] = true, "unreachable"
	}
	return &triage.Result{BizID: biz, Ops: []triage.Operation{{Pipeline: &config.Pipeline{Name: "settlement"}, Report: r}}}, nil
}

// TestMassVerifySaysPartial: a verify over several operations says how
// many were triaged from part of their sources, and which sources, beside
// its counts. ("N COMPLETE" hid that every triage was partial.)
func TestMassVerifySaysPartial(t *testing.T) {
	lib, err := Builtins()
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := lib.Get("mass-redelivery")
	svc := &massService{n: 40, applied: map[string]int{}, broken: map[string]bool{}, partial: 4}
	r := &Runner{Triage: svc, Service: svc, Reconcile: svc.reconcile, Config: &config.Config{Pipelines: []config.Pipeline{{Name: "settlement"}}}, Records: Records{Dir: t.TempDir()}}
	evs := map[string]Event{}
	sum, err := r.Start(context.Background(), rb, Options{Pipeline: "settlement", Yes: true, Plan: plans.Options{Reason: "INC-9"},
		Emit: func(ev Event) error { evs[ev.Step] = ev; return nil }})
	if err != nil || sum.Outcome != "done" {
		t.Fatalf("%v %+v", err, sum)
	}
	v := evs["verify-all"]
	if v.Partial != 10 || v.Detail != "40 operations: 40 WILL_REDELIVER; PARTIAL: 10 of them triaged without kafka" {
		t.Errorf("verify-all: partial %d, %q", v.Partial, v.Detail)
	}
	if v := evs["verify-10"]; v.Partial != 3 || !strings.Contains(v.Detail, "PARTIAL: 3 of them") {
		t.Errorf("verify-10: partial %d, %q", v.Partial, v.Detail)
	}
}

func (m *massService) Plan(context.Context, *triage.Operation, plans.Options) (*plans.Plan, error) {
	return nil, errors.New("a mass run plans its targets")
}

func (m *massService) PlanTargets(_ context.Context, r io.Reader, _, _ string, o plans.Options) (*repair.Batch, error) {
	b := &repair.Batch{}
	dec := json.NewDecoder(r)
	for {
		var t Target
		if err := dec.Decode(&t); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		p := &plans.Plan{PlanVersion: plans.PlanVersion, Pipeline: t.Pipeline, BizID: t.BizID, Verdict: inspect.Stranded, Reason: o.Reason,
			Runbook: o.Runbook, RunID: o.RunID, Actions: []plans.Action{{Index: 1, Type: plans.Republish,
				Summary: "republish " + t.BizID + " from step notify: " + strings.Repeat("observed ", 270)}}}
		if err := p.Seal(); err != nil {
			return nil, err
		}
		b.Plans = append(b.Plans, p)
	}
	return b, nil
}

func (m *massService) Apply(_ context.Context, p *plans.Plan, _ repair.ApplyOptions) (*repair.Result, error) {
	m.applied[p.BizID]++
	return &repair.Result{PlanID: p.ID, Outcome: repair.OutcomeApplied, Applied: 1, Total: 1}, nil
}

func (m *massService) StoredPlan(context.Context, string) (*plans.Plan, error) {
	return nil, errors.New("none")
}

// TestMassRunOf30000TargetsResumes: a mass-redelivery run of 30,000
// targets, stopped by its second verify, resumes from there and applies
// the 29,989 plans left, each once; its record's plan step is 30,000 lines
// of one plan each, not one line of 75 MB. (A record line over 64 MiB — 30,000
// targets — printed its --resume command and could not be resumed:
// "bufio.Scanner: token too long".) BenchmarkMassRunRecord measures it.
func TestMassRunOf30000TargetsResumes(t *testing.T) {
	n := 30000
	if testing.Short() {
		n = 3000
	}
	start := time.Now()
	runs, sum1, svc := massRun(t, n)
	t.Logf("%d targets: run to the stop and resume in %v", n, time.Since(start).Round(time.Millisecond))
	if sum1.StoppedAt != "verify-10" {
		t.Fatalf("first run stopped at %q", sum1.StoppedAt)
	}
	if len(svc.applied) != n {
		t.Fatalf("%d operations applied, want %d", len(svc.applied), n)
	}
	for biz, k := range svc.applied {
		if k != 1 {
			t.Fatalf("%s applied %d times", biz, k)
		}
	}
	// The record: one plan a line.
	f, err := os.Open(Records{Dir: runs}.path(sum1.RunID))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in := bufio.NewReader(f)
	longest, lines := 0, 0
	for {
		b, err := in.ReadBytes('\n')
		if len(b) > 0 {
			lines++
			longest = max(longest, len(b))
		}
		if err != nil {
			break
		}
	}
	if lines < 2*n || longest > 4<<20 {
		t.Errorf("the record has %d lines, the longest %d bytes: want a line a target and a plan, none over 4 MiB", lines, longest)
	}
}

// massRun runs mass-redelivery on n targets until the verify after the
// stage of 10 stops it (one operation of that stage is broken), mends it,
// and resumes the run to its end.
func massRun(t testing.TB, n int) (runs string, first *Summary, svc *massService) {
	lib, err := Builtins()
	if err != nil {
		t.Fatal(err)
	}
	rb, _ := lib.Get("mass-redelivery")
	svc = &massService{n: n, applied: map[string]int{}, broken: map[string]bool{}}
	runs = t.TempDir()
	r := &Runner{Triage: svc, Service: svc, Reconcile: svc.reconcile, Config: &config.Config{Pipelines: []config.Pipeline{{Name: "settlement"}}}, Records: Records{Dir: runs}}
	o := Options{Pipeline: "settlement", Operator: "tester", Yes: true, Plan: plans.Options{Reason: "INC-9", Operator: "tester"},
		Emit: func(ev Event) error {
			if ev.Step == "stage-10" {
				svc.broken[fmt.Sprintf("M-%06d", 5)] = true // in the stage of 10
			}
			return nil
		}}
	first, err = r.Start(context.Background(), rb, o)
	var stop *StopError
	if !errors.As(err, &stop) || first.StoppedAt != "verify-10" {
		t.Fatalf("run: %v %+v", err, first)
	}
	if len(svc.applied) != 11 {
		t.Fatalf("%d applied before the stop, want 11", len(svc.applied))
	}
	svc.broken = map[string]bool{} // mended
	sum, _, err := r.Resume(context.Background(), lib, first.RunID, Options{Yes: true})
	if err != nil || sum.Outcome != "done" {
		t.Fatalf("resume: %v %+v", err, sum)
	}
	return runs, first, svc
}

// BenchmarkMassRunRecord: a mass run of 30,000 targets, stopped and
// resumed (fake sources: what is measured is the runner and its record);
// -benchmem gives the bytes allocated, the heap's peak is reported.
//
//	go test ./sop -run '^$' -bench MassRunRecord -benchtime 1x -benchmem
func BenchmarkMassRunRecord(b *testing.B) {
	for b.Loop() {
		done, peak := make(chan struct{}), make(chan uint64)
		go func() {
			var m runtime.MemStats
			var p uint64
			for {
				select {
				case <-done:
					peak <- p
					return
				case <-time.After(20 * time.Millisecond):
					runtime.ReadMemStats(&m)
					p = max(p, m.HeapInuse)
				}
			}
		}()
		massRun(b, 30000)
		close(done)
		b.ReportMetric(float64(<-peak>>20), "peak-heap-MiB")
	}
}
