// Package repair is opctl's one way to find and triage an operation and to
// repair it (Service): cmd and the lab call it, and so will the console
// and the runbooks. It triages exactly as `opctl where` does, builds plans
// with the pure planner of repair/plans, and applies them with the
// executor (Applier) over a sources.Store: one transaction per action with
// its guards re-read under SELECT ... FOR UPDATE and its audit row; a dry
// run is a decorator of that store plus a publisher and a poster that send
// nothing, chosen once (docs/repair.md).
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
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
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

// Service triages operations and repairs them. Its fields are interfaces so
// that a test can run it on fakes; NewService wires the real clients.
type Service struct {
	Config    *config.Config
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
	// NextFlags go after the "opctl" of every next command Where returns
	// (inspect.WithFlags): the global flags of the command line that asked,
	// so that each line runs as printed (docs/README.md#next-commands).
	NextFlags string

	mu     sync.Mutex
	mirror *Mirror
	mfile  *os.File
}

// NewService wires a Service on the clients of one configuration.
func NewService(c *connect.Clients) *Service {
	s := &Service{Config: c.Config, Collector: c.Collector, Prober: c.Prober, Poster: c.Prober, AuditLog: c.Reader, Timeout: c.Timeout,
		Store:    func() (sources.Store, error) { return c.Writer() },
		StoreFor: func(p *config.Pipeline) (sources.Store, error) { return c.WriterFor(p) }}
	for _, r := range c.Readers()[1:] {
		s.MoreAudit = append(s.MoreAudit, r)
	}
	if c.Kafka != nil {
		s.Kafka = c.Kafka
	}
	return s
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

// Operation is one operation in one pipeline, as read and diagnosed.
type Operation struct {
	Pipeline *config.Pipeline
	Evidence sources.Evidence
	Report   inspect.Report
}

// Triage is one id triaged in the pipelines asked for.
type Triage struct {
	BizID string
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
func (s *Service) Triage(ctx context.Context, bizID, pipeline string) (*Triage, error) {
	if err := sources.ValidateBizID(bizID); err != nil {
		return nil, err
	}
	ps, err := s.Config.Select(pipeline)
	if err != nil {
		return nil, err
	}
	t := &Triage{BizID: bizID, Pipeline: pipeline, Ops: make([]Operation, len(ps)), Names: s.Config.PipelineNames()}
	errs := make([]error, len(ps))
	var wg sync.WaitGroup
	for i, p := range ps {
		wg.Go(func() {
			ev, err := s.Collector.Collect(ctx, p, bizID)
			if err != nil {
				errs[i] = err
				return
			}
			t.Ops[i] = Operation{Pipeline: p, Evidence: ev, Report: inspect.Diagnose(ev)}
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

// Where triages bizID as `opctl where` shows it: Triage, then each
// verdict that calls for a plan gets the NEXT the planner makes of it
// (next). Repairs call Triage: they make the plan itself, not its NEXT.
func (s *Service) Where(ctx context.Context, bizID, pipeline string) (*Triage, error) {
	t, err := s.Triage(ctx, bizID, pipeline)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for i := range t.Ops {
		wg.Go(func() { s.next(ctx, &t.Ops[i]) })
	}
	wg.Wait()
	for i := range t.Ops {
		for j, n := range t.Ops[i].Report.Verdict.Next {
			t.Ops[i].Report.Verdict.Next[j] = inspect.WithFlags(n, s.NextFlags)
		}
	}
	return t, nil
}

// next replaces the NEXT of a verdict that calls for a plan with what the
// planner makes of the operation (plans.Next): a line that would need
// --attest says so, one the planner would refuse becomes `where` again
// with its reason. It reads the redrive topic's partition count, as a plan
// would.
func (s *Service) next(ctx context.Context, op *Operation) {
	if len(plans.CalledFor(op.Report.Verdict.Code)) == 0 || op.Report.Verdict.Code == inspect.InFlight {
		return
	}
	parts := redrivePartitions(ctx, s.Kafka, op.Pipeline, op.Evidence)
	op.Report.Verdict.Next = plans.Next(plans.Input{Config: s.Config, Report: op.Report, Evidence: &op.Evidence, RedrivePartitions: parts})
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

// Reports are the reports `opctl where` shows: with --pipeline or a single
// pipeline, that report; otherwise those of the pipelines that know the
// id, or, when none does, one NOT_FOUND report for all of them.
func (t *Triage) Reports() []inspect.Report {
	out := make([]inspect.Report, 0, len(t.Ops))
	for _, op := range t.Ops {
		out = append(out, op.Report)
	}
	if t.Pipeline != "" || len(out) <= 1 {
		return out
	}
	var known []inspect.Report
	for _, r := range out {
		if r.Verdict.Code != inspect.NotFound {
			known = append(known, r)
		}
	}
	if len(known) > 0 {
		return known
	}
	nf := out[0]
	nf.Pipeline = ""
	nf.Steps = []inspect.StepView{}
	nf.Kafka = inspect.KafkaView{Redelivery: inspect.RedeliveryUnknown, Located: sources.LocatedUnknown}
	nf.Verdict.Summary = fmt.Sprintf("%s is not known to any pipeline (%s)", t.BizID, strings.Join(t.Names, ", "))
	return []inspect.Report{nf}
}

// One is the operation a repair acts on: the one pipeline that knows the
// id (with --pipeline, that pipeline whatever it knows). None is a
// *plans.NotFoundError (exit 4); several are an *plans.InputError asking
// for --pipeline (exit 2).
func (t *Triage) One() (*Operation, error) {
	var known []int
	for i, op := range t.Ops {
		if t.Pipeline != "" || op.Report.Verdict.Code != inspect.NotFound {
			known = append(known, i)
		}
	}
	switch len(known) {
	case 0:
		return nil, &plans.NotFoundError{BizID: t.BizID, Pipelines: t.Names}
	case 1:
		return &t.Ops[known[0]], nil
	}
	names := make([]string, len(known))
	for i, k := range known {
		names[i] = t.Ops[k].Pipeline.Name
	}
	return nil, &plans.InputError{Msg: fmt.Sprintf("%s is known to pipelines %s: pass --pipeline", t.BizID, strings.Join(names, ", "))}
}

// Plan builds the plan of an operation triaged by Triage (it does not read
// or diagnose it again), reading the redrive topic's partition count when
// Kafka answered. Errors: those of plans.Build.
func (s *Service) Plan(ctx context.Context, op *Operation, o plans.Options) (*plans.Plan, error) {
	parts := redrivePartitions(ctx, s.Kafka, op.Pipeline, op.Evidence)
	s.Collector.ReadActionColumn(ctx, &op.Evidence)
	if o.Now.IsZero() && s.Now != nil {
		o.Now = s.Now()
	}
	return plans.Build(plans.Input{Config: s.Config, Report: op.Report, Evidence: &op.Evidence, RedrivePartitions: parts, Options: o})
}

// PartitionCounter reads a topic's partition count (sources/kafka.Reader).
type PartitionCounter interface {
	PartitionCount(ctx context.Context, topic string) (int32, error)
}

// redrivePartitions is the partition count of the pipeline's redrive topic
// a plan is built with and the stale check compares: read when Kafka
// answered the operation's read, else 0 (unknown).
func redrivePartitions(ctx context.Context, k PartitionCounter, p *config.Pipeline, ev sources.Evidence) int32 {
	if k == nil || ev.Sources["kafka"] != sources.StatusOK {
		return 0
	}
	n, err := k.PartitionCount(ctx, p.EffectiveRedriveTopic())
	if err != nil {
		return 0
	}
	return n
}

// PlanID triages bizID and builds its plan: `opctl repair plan <biz_id>`.
// The operation is returned with every outcome but a failed triage, so that
// a caller can say why there is no plan.
func (s *Service) PlanID(ctx context.Context, bizID, pipeline string, o plans.Options) (*plans.Plan, *Operation, error) {
	t, err := s.Triage(ctx, bizID, pipeline)
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
	t, err := s.Triage(ctx, tg.BizID, pipeline)
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
