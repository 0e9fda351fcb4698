// Package repair is opctl's write side (Service): it builds plans with the
// pure planner of repair/plans from an operation the read side
// (inspect/triage) triaged, and applies them with the executor (Applier)
// over a sources.Store: one transaction per action with its guards re-read
// under SELECT ... FOR UPDATE and its audit row; a dry run is a decorator
// of that store plus a publisher and a poster that send nothing, chosen
// once (docs/repair.md). cmd, the console, the runbooks and the lab call
// it. It links no driver: its fields are interfaces that cmd's Factory
// fills with the clients of sources/connect.
package repair

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Kafka is what repairs need from Kafka (sources/kafka.Reader): partition
// counts to place a republish, the group's members for release_lease, and
// the send itself.
type Kafka interface {
	Publisher
	GroupReader
	PartitionCounter
}

// AuditReader reads opctl's audit log on the read path
// (sources/mysql.Reader).
type AuditReader interface {
	ReadAudit(ctx context.Context, audit config.Audit, f sources.AuditFilter) (*sources.AuditLog, error)
	// PlanBody reads the plan an apply recorded with its audit rows, by
	// id or a prefix of at least 12 hex digits (docs/repair.md
	// "Finishing a plan").
	PlanBody(ctx context.Context, auditTable, planID string) (body json.RawMessage, id string, found bool, err error)
}

// Service plans and applies repairs. Its fields are interfaces so that a
// test can run it on fakes; cmd's Factory wires the real clients.
type Service struct {
	Config *config.Config
	// Triage is the read side: a plan of an id starts with its triage.
	Triage    *triage.Service
	Collector *sources.Collector
	// Kafka is nil when no broker is configured: a republish and
	// release_lease are then refused, everything else works.
	Kafka  Kafka
	Prober sources.Prober
	Poster sources.Poster
	// Store opens the write path (mysql.write_dsn) on first use.
	Store func() (sources.Store, error)
	// StoreFor, when set, opens the write path of a pipeline with its own
	// mysql block (pipelines[].mysql); nil: Store serves every pipeline.
	StoreFor func(p *config.Pipeline) (sources.Store, error)
	// Audit reads the audit log.
	AuditLog AuditReader
	// MoreAudit are the audit logs of the pipelines with their own mysql
	// block, each database once: `opctl audit` reads them all.
	MoreAudit []AuditReader
	// Now is the clock of a plan's created_at (nil: time.Now).
	Now func() time.Time
	// Timeout is --timeout: it bounds each send and call of an apply and
	// the wait for a plan's lock (0: sources.DefaultTimeout).
	Timeout time.Duration
	mu      sync.Mutex
	mirror  *Mirror
	mfile   *os.File
}

// Close closes the audit mirror file, if one was opened.
func (s *Service) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mfile == nil {
		return nil
	}
	err := s.mfile.Close()
	s.mfile, s.mirror = nil, nil
	return err
}

// StoredPlan reads a plan from the audit by its id (or a prefix of at
// least 12 hex digits): `opctl repair apply PLAN_ID` finishes a plan that
// stopped part-way without the operator's file. An id no audit row holds
// is a *plans.InputError (exit 2) saying so.
func (s *Service) StoredPlan(ctx context.Context, id string) (*plans.Plan, error) {
	body, full, found, err := s.AuditLog.PlanBody(ctx, s.Config.Audit.AuditTable(), id)
	for _, a := range s.MoreAudit {
		if found || err != nil {
			break
		}
		body, full, found, err = a.PlanBody(ctx, s.Config.Audit.AuditTable(), id)
	}
	switch {
	case err != nil:
		return nil, err
	case !found && full != "":
		return nil, &plans.InputError{Msg: fmt.Sprintf("plan %s: its audit rows were written by an earlier opctl and do not hold the plan: apply it from its file", full)}
	case !found:
		return nil, &plans.InputError{Msg: fmt.Sprintf("no plan %s in %s: a plan id is known once an apply recorded one of its actions; give the plan file instead", id, s.Config.Audit.AuditTable())}
	}
	p, err := plans.Decode(bytes.NewReader(body))
	if err != nil {
		return nil, &plans.RefusedError{Code: plans.CodeTampered, Detail: fmt.Sprintf("the plan %s recorded in %s does not decode: %v", full, s.Config.Audit.AuditTable(), err)}
	}
	return p, nil
}

// Plan builds the plan of an operation the read side triaged (it does not
// read or diagnose it again), with the redrive topic's partition count the
// triage read (it reads it for every verdict that needs action), read here
// only when the triage did not. Errors: those of plans.Build.
func (s *Service) Plan(ctx context.Context, op *triage.Operation, o plans.Options) (*plans.Plan, error) {
	parts := op.RedrivePartitions
	if parts == 0 {
		parts = redrivePartitions(ctx, s.Kafka, op.Pipeline, op.Evidence)
	}
	s.Collector.ReadActionColumn(ctx, &op.Evidence)
	if o.Now.IsZero() && s.Now != nil {
		o.Now = s.Now()
	}
	return plans.Build(plans.Input{Config: s.Config, Report: op.Report, Evidence: &op.Evidence, RedrivePartitions: parts, Options: o})
}

// PartitionCounter reads a topic's partition count (sources/kafka.Reader).
type PartitionCounter = triage.PartitionCounter

// redrivePartitions is triage.RedrivePartitions: the partition count of
// the pipeline's redrive topic, 0 when unknown.
func redrivePartitions(ctx context.Context, k PartitionCounter, p *config.Pipeline, ev sources.Evidence) int32 {
	return triage.RedrivePartitions(ctx, k, p, ev)
}

// PlanID triages bizID and builds its plan: `opctl repair plan <biz_id>`.
// The operation is returned with every outcome but a failed triage, so that
// a caller can say why there is no plan.
func (s *Service) PlanID(ctx context.Context, bizID, pipeline string, o plans.Options) (*plans.Plan, *triage.Operation, error) {
	t, err := s.Triage.Triage(ctx, bizID, pipeline)
	if err != nil {
		return nil, nil, err
	}
	op, err := t.One()
	if err != nil {
		return nil, nil, err
	}
	p, err := s.Plan(ctx, op, o)
	return p, op, err
}

// Skip is a target that got no plan, and why.
type Skip struct {
	// Line is the target's line in the targets file (1-based).
	Line     int    `json:"line"`
	BizID    string `json:"biz_id"`
	Pipeline string `json:"pipeline"`
	// Verdict is what the target was triaged to now; "" when it was not
	// triaged (a bad line, a pipeline that is gone, ...).
	Verdict inspect.Code `json:"verdict"`
	Why     string       `json:"why"`
}

// Batch is what PlanTargets made of a targets file.
type Batch struct {
	// File is the targets file's name, as messages give it (File:Line).
	File    string
	Plans   []*plans.Plan
	Skipped []Skip
	// Lines is the number of lines read: all of them, or the line a
	// stopped batch stopped at.
	Lines int
}

// MaxTargetLine bounds a line of a targets file: a longer one is skipped
// as not a target (an id is at most sources.MaxBizID bytes).
const MaxTargetLine = 1 << 20

// PlanTargets makes one plan per line of a targets file (name is its name
// for messages; blank lines are ignored): each target is triaged again and
// planned. pipeline overrides the targets' own. A target that gets no plan
// is skipped, with its line and why, and the batch goes on: a line that is
// not a target (not JSON, no biz_id, longer than MaxTargetLine), an id
// sources.ValidateBizID refuses, a pipeline that is not configured, an id
// no pipeline knows, a verdict with nothing to repair, a refused plan, or
// a plan the options cannot make (a *plans.InputError, such as a manual
// action without --attest). Only a MySQL that cannot be reached at all
// (a *sources.ConnError), an error reading r, or the end of ctx (an
// interrupt: ctx's error) stop the batch; the batch so far is returned
// with the error.
func (s *Service) PlanTargets(ctx context.Context, r io.Reader, name, pipeline string, o plans.Options) (*Batch, error) {
	b := &Batch{File: name}
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		if err := ctx.Err(); err != nil {
			return b, err
		}
		raw, long, err := readLine(br, MaxTargetLine)
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, fmt.Errorf("read %s at line %d: %w", name, line, err)
		}
		b.Lines = line
		bad := func(tg inspect.Target, why string) {
			p := pipeline
			if p == "" {
				p = tg.Pipeline
			}
			b.Skipped = append(b.Skipped, Skip{Line: line, BizID: tg.BizID, Pipeline: p, Why: why})
		}
		if long {
			bad(inspect.Target{}, fmt.Sprintf("not a target line: longer than %d bytes", MaxTargetLine))
			continue
		}
		text := bytes.TrimSpace(raw)
		if len(text) == 0 {
			continue
		}
		var tg inspect.Target
		if err := json.Unmarshal(text, &tg); err != nil {
			bad(inspect.Target{}, fmt.Sprintf("not a target line (%v): want one JSON object {\"biz_id\",\"pipeline\",...} a line, as opctl reconcile --out writes", err))
			continue
		}
		if tg.BizID == "" {
			bad(tg, "not a target line: no \"biz_id\"")
			continue
		}
		if err := sources.ValidateBizID(tg.BizID); err != nil {
			bad(tg, err.Error())
			continue
		}
		if err := s.planTarget(ctx, b, line, tg, pipeline, o); err != nil {
			if ctx.Err() != nil {
				return b, err
			}
			return b, fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

// readLine reads one line, without its end ("\n"), of at most max bytes;
// a longer line is read to its end and reported long, its text dropped.
// The error is io.EOF after the last line.
func readLine(br *bufio.Reader, max int) (line []byte, long bool, err error) {
	read := false
	for {
		chunk, err := br.ReadSlice('\n')
		read = read || len(chunk) > 0
		if !long {
			line = append(line, chunk...)
			if n := len(bytes.TrimSuffix(line, []byte("\n"))); n > max {
				line, long = nil, true
			}
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case err == io.EOF && read:
			return line, long, nil // a last line without "\n"
		case err != nil:
			return nil, false, err
		}
		return bytes.TrimSuffix(line, []byte("\n")), long, nil
	}
}

// planTarget plans one target into b, or records why it is skipped. Its
// error stops the batch (see PlanTargets).
func (s *Service) planTarget(ctx context.Context, b *Batch, line int, tg inspect.Target, pipeline string, o plans.Options) error {
	if pipeline == "" {
		pipeline = tg.Pipeline
	}
	skip := func(p string, v inspect.Code, err error) {
		b.Skipped = append(b.Skipped, Skip{Line: line, BizID: tg.BizID, Pipeline: p, Verdict: v, Why: err.Error()})
	}
	t, err := s.Triage.Triage(ctx, tg.BizID, pipeline)
	if stop := stopsBatch(ctx, err); stop != nil {
		return stop
	}
	if err != nil {
		skip(pipeline, "", err) // the pipeline triaged: --pipeline, else the line's
		return nil
	}
	op, err := t.One()
	if err != nil {
		skip(pipeline, "", err)
		return nil
	}
	if o.FromStep == "" && tg.Step != "" && o.Action != "" {
		o.FromStep = tg.Step
	}
	p, err := s.Plan(ctx, op, o)
	if err := ctx.Err(); err != nil {
		return err // a read cut short by the interrupt makes no plan, and no skip
	}
	if err != nil {
		skip(op.Pipeline.Name, op.Report.Verdict.Code, err)
		return nil
	}
	b.Plans = append(b.Plans, p)
	return nil
}

// stopsBatch is the error that stops a batch of targets: the end of ctx
// (an interrupt), or err when MySQL cannot be reached at all; nil for
// anything else (the target is skipped).
func stopsBatch(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	var ce *sources.ConnError
	if errors.As(err, &ce) {
		return err
	}
	return nil
}

// ApplyOptions are the choices of one apply.
type ApplyOptions struct {
	// DryRun runs every SQL action in a transaction that is rolled back and
	// sends nothing.
	DryRun bool
	// Operator is recorded in the audit (who applies).
	Operator string
	// Progress, when set, is called after each action.
	Progress func(ActionResult)
}

// Apply applies (or dry-runs) a plan on the write path; see Applier.
//
// A panic of the apply (a bug) is an *sources.InternalError recorded as an
// error attempt with its stack, never a trace for the operator.
func (s *Service) Apply(ctx context.Context, plan *plans.Plan, o ApplyOptions) (res *Result, err error) {
	st, err := s.storeFor(plan.Pipeline)
	if err != nil {
		return nil, err
	}
	defer func() {
		if r := recover(); r != nil {
			res, err = s.recordPanic(ctx, st, plan, o, r)
		}
	}()
	mirror, err := s.auditMirror()
	if err != nil {
		return nil, err
	}
	a := &Applier{Config: s.Config, Store: st, Collector: s.Collector, Prober: s.Prober, Poster: s.Poster,
		Operator: o.Operator, Mirror: mirror, Progress: o.Progress, Timeout: s.Timeout}
	if s.Kafka != nil {
		a.Publisher, a.Group, a.Partitions = s.Kafka, s.Kafka, s.Kafka
	}
	if o.DryRun {
		return a.DryRun(ctx, plan)
	}
	return a.Apply(ctx, plan)
}

// Lock takes the named lock on the write database (see sources.Store's
// Lock): `opctl sop run` holds one per run, so that a run is never worked
// by two processes at once. wait 0 refuses at once when another process
// holds it (a *sources.LockHeldError naming the holder, exit 5).
func (s *Service) Lock(ctx context.Context, name string, wait time.Duration) (sources.Lock, error) {
	st, err := s.Store()
	if err != nil {
		return nil, err
	}
	return st.Lock(ctx, name, wait)
}

// recordPanic turns a panic of an apply into its failed result and an
// error attempt that keeps the stack.
func (s *Service) recordPanic(ctx context.Context, st sources.Store, plan *plans.Plan, o ApplyOptions, r any) (*Result, error) {
	ie := &sources.InternalError{Value: r, Stack: string(debug.Stack())}
	res := &Result{PlanID: plan.ID, BizID: plan.BizID, Pipeline: plan.Pipeline, DryRun: o.DryRun, Total: len(plan.Actions), Outcome: OutcomeFailed, Error: ie.Error()}
	d := map[string]any{"error": ie.Error(), "stack": ie.Stack, "result": OutcomeFailed}
	if plan.Incident != "" {
		d["incident"] = plan.Incident
	}
	detail, _ := json.Marshal(d)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	at := sources.Attempt{PlanID: plan.ID, BizID: plan.BizID, Operator: operatorOf(o.Operator, plan.Operator), Outcome: AttemptError, Detail: detail}
	if err := st.RecordAttempt(cctx, s.Config.Audit.AttemptTable(), at); err != nil {
		return res, errors.Join(ie, fmt.Errorf("the attempt could not be recorded: %w", err))
	}
	return res, ie
}

// auditMirror opens audit.file (appending) on first use.
func (s *Service) auditMirror() (*Mirror, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.Config.Audit.File == "" || s.mirror != nil {
		return s.mirror, nil
	}
	f, err := os.OpenFile(s.Config.Audit.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit.file: %w", err)
	}
	s.mfile, s.mirror = f, NewMirror(f)
	return s.mirror, nil
}

// Audit reads the audit log (`opctl audit`).
func (s *Service) Audit(ctx context.Context, f sources.AuditFilter) (*sources.AuditLog, error) {
	log, err := s.AuditLog.ReadAudit(ctx, s.Config.Audit, f)
	if err != nil || len(s.MoreAudit) == 0 {
		return log, err
	}
	// The pipelines on other servers keep their audit there: one log, in
	// time order (docs/repair.md#audit).
	for _, a := range s.MoreAudit {
		more, err := a.ReadAudit(ctx, s.Config.Audit, f)
		if err != nil {
			return nil, err
		}
		log.Actions = append(log.Actions, more.Actions...)
		log.Attempts = append(log.Attempts, more.Attempts...)
	}
	sort.SliceStable(log.Actions, func(i, j int) bool { return log.Actions[i].CreatedAt.Before(log.Actions[j].CreatedAt) })
	sort.SliceStable(log.Attempts, func(i, j int) bool { return log.Attempts[i].CreatedAt.Before(log.Attempts[j].CreatedAt) })
	return log, nil
}

// storeFor is the write path of the named pipeline (StoreFor), else Store.
func (s *Service) storeFor(pipeline string) (sources.Store, error) {
	if s.StoreFor != nil {
		if p := s.Config.Pipeline(pipeline); p != nil {
			return s.StoreFor(p)
		}
	}
	return s.Store()
}
