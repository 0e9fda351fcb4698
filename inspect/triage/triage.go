// Package triage is opctl's read side: it reads operations from every
// source (sources.Collector) and diagnoses them (inspect), for `opctl
// where`, the console, the runbooks and reconcile alike. It never writes
// and links no driver: the Collector's readers and the partition counter
// are interfaces that sources/connect fills with the real clients
// (docs/architecture.md). The write side, plan, apply and audit, is
// repair.Service.
package triage

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// PartitionCounter reads a topic's partition count (sources/kafka.Reader).
type PartitionCounter interface {
	PartitionCount(ctx context.Context, topic string) (int32, error)
}

// Service triages operations. Its fields are interfaces so that a test
// runs it on fakes; sources/connect wires the real clients.
type Service struct {
	Config    *config.Config
	Collector *sources.Collector
	// Partitions reads the redrive topic's partition count of an
	// operation that needs a repair (the planner places a republish with
	// it); nil without Kafka.
	Partitions PartitionCounter
}

// Operation is one operation in one pipeline, as read and diagnosed.
type Operation struct {
	Pipeline *config.Pipeline
	Evidence sources.Evidence
	Report   inspect.Report
	// RedrivePartitions is the partition count of the pipeline's redrive
	// topic, read when Kafka answered the operation's read and its
	// verdict needs action; 0: unknown (RedrivePartitions).
	RedrivePartitions int32
}

// Result is one id triaged in the pipelines asked for.
type Result struct {
	// Config is the configuration the id was triaged with.
	Config *config.Config
	BizID  string
	// Pipeline is the pipeline asked for ("": every configured pipeline).
	Pipeline string
	// Ops has one operation per pipeline triaged, in configuration order.
	Ops []Operation
	// Names are every configured pipeline's name (a NOT_FOUND summary
	// lists them).
	Names []string
}

// Triage reads and diagnoses bizID in pipeline (every pipeline when
// empty), the pipelines concurrently, each exactly once. It fails only on
// a bad id or pipeline and when MySQL cannot be reached at all (a
// *sources.ConnError); every other failure is in the reports, marked
// partial.
func (s *Service) Triage(ctx context.Context, bizID, pipeline string) (*Result, error) {
	if err := sources.ValidateBizID(bizID); err != nil {
		return nil, err
	}
	ps, err := s.Config.Select(pipeline)
	if err != nil {
		return nil, err
	}
	t := &Result{Config: s.Config, BizID: bizID, Pipeline: pipeline, Ops: make([]Operation, len(ps)), Names: s.Config.PipelineNames()}
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			ev, err := s.Collector.Collect(ctx, p, bizID)
			if err != nil {
				errs[i] = err
				return
			}
			op := Operation{Pipeline: p, Evidence: ev, Report: inspect.Diagnose(ev)}
			if op.Report.Verdict.Severity == inspect.SeverityAction {
				op.RedrivePartitions = RedrivePartitions(ctx, s.Partitions, p, ev)
			}
			t.Ops[i] = op
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // the same server for every pipeline: one message
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return t, nil
}

// Judge reads the operations bizIDs of pipeline p in one batch
// (Collector.CollectMany) and judges each (inspect.Judge: no timeline):
// reconcile's triage of its candidates, through col, the Collector of the
// run (whose Kafka answers from the group views read once). It fails only
// when MySQL cannot be reached at all (a *sources.ConnError).
func Judge(ctx context.Context, col *sources.Collector, p *config.Pipeline, bizIDs []string) ([]inspect.Report, error) {
	evs, err := col.CollectMany(ctx, p, bizIDs)
	if err != nil {
		return nil, err
	}
	out := make([]inspect.Report, len(evs))
	for i, ev := range evs {
		out[i] = inspect.Judge(ev)
	}
	return out, nil
}

// RedrivePartitions is the partition count of the pipeline's redrive
// topic a plan is built with and the stale check compares: read when
// Kafka answered the operation's read, else 0 (unknown).
func RedrivePartitions(ctx context.Context, k PartitionCounter, p *config.Pipeline, ev sources.Evidence) int32 {
	if k == nil || ev.Sources["kafka"] != sources.StatusOK {
		return 0
	}
	n, err := k.PartitionCount(ctx, p.EffectiveRedriveTopic())
	if err != nil {
		return 0
	}
	return n
}

// Reports are the reports `opctl where` shows: with --pipeline or a single
// pipeline, that report; otherwise those of the pipelines that know the
// id, or, when none does, one NOT_FOUND report for all of them.
func (t *Result) Reports() []inspect.Report {
	ops := t.Shown()
	out := make([]inspect.Report, len(ops))
	for i, op := range ops {
		out[i] = op.Report
	}
	return out
}

// Shown are the operations whose reports Reports returns, in the same
// order (the NOT_FOUND of every pipeline is the first pipeline's
// operation with that report).
func (t *Result) Shown() []Operation {
	if t.Pipeline != "" || len(t.Ops) <= 1 {
		return t.Ops
	}
	var known []Operation
	for _, op := range t.Ops {
		if op.Report.Verdict.Code != inspect.NotFound {
			known = append(known, op)
		}
	}
	if len(known) > 0 {
		return known
	}
	nf := t.Ops[0]
	nf.Report.Pipeline = ""
	nf.Report.Steps = []inspect.StepView{}
	nf.Report.Kafka = inspect.KafkaView{Redelivery: inspect.RedeliveryUnknown, Located: sources.LocatedUnknown}
	nf.Report.Verdict.Summary = fmt.Sprintf("%s is not known to any pipeline (%s)", t.BizID, strings.Join(t.Names, ", "))
	return []Operation{nf}
}

// One is the operation a repair acts on: the one pipeline that knows the
// id (with a pipeline asked for, that pipeline whatever it knows). None
// is an *inspect.NotFoundError (exit 4); several are an *AmbiguousError (exit 2).
func (t *Result) One() (*Operation, error) {
	var known []int
	for i, op := range t.Ops {
		if t.Pipeline != "" || op.Report.Verdict.Code != inspect.NotFound {
			known = append(known, i)
		}
	}
	switch len(known) {
	case 0:
		return nil, &inspect.NotFoundError{BizID: t.BizID, Pipelines: t.Names}
	case 1:
		return &t.Ops[known[0]], nil
	}
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = t.Ops[k].Pipeline.Name
	}
	return nil, &AmbiguousError{BizID: t.BizID, Pipelines: names}
}

// AmbiguousError says that several pipelines know the id, and a repair
// must be told which one (exit 2). Error phrases it for the command line
// (--pipeline); the console, which asks with its own keys, reads
// Pipelines.
type AmbiguousError struct {
	BizID     string
	Pipelines []string
}

// Error reads "X is known to pipelines a, b: pass --pipeline".
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%s is known to pipelines %s: pass --pipeline", e.BizID, strings.Join(e.Pipelines, ", "))
}

// ExitCode is exit 2: a usage error.
func (e *AmbiguousError) ExitCode() int { return sources.ExitUsage }
