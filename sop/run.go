package sop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Triager is what a run reads with (*triage.Service): the triage of
// `opctl where`.
type Triager interface {
	Triage(ctx context.Context, bizID, pipeline string) (*triage.Result, error)
}

// Service is what a run needs of the repair service (*repair.Service):
// the same planning and apply `opctl repair` uses.
type Service interface {
	Plan(ctx context.Context, op *triage.Operation, o plans.Options) (*plans.Plan, error)
	PlanTargets(ctx context.Context, r io.Reader, name, pipeline string, o plans.Options) (*repair.Batch, error)
	Apply(ctx context.Context, plan *plans.Plan, o repair.ApplyOptions) (*repair.Result, error)
	StoredPlan(ctx context.Context, id string) (*plans.Plan, error)
}

// Step outcomes (docs/runbooks.md "Output").
const (
	OutcomeOK          = "ok"
	OutcomeNothing     = "nothing"     // plan: nothing to repair; apply: no plan left
	OutcomeSkipped     = "skipped"     // verify or wait in a dry run
	OutcomeUnexpected  = "unexpected"  // a verdict the step does not expect: the run stops, exit 5
	OutcomeRefused     = "refused"     // a plan or an apply was refused, or the person said no: exit 5
	OutcomeFailed      = "failed"      // an error: exit 1 (or the error's code)
	OutcomeInterrupted = "interrupted" // Ctrl-C: exit 130
)

// Event is one step that ended (`-o json` prints one per step).
type Event struct {
	Step    string       `json:"step"`
	Type    StepType     `json:"type"`
	Outcome string       `json:"outcome"`
	Verdict inspect.Code `json:"verdict"`
	PlanID  string       `json:"plan_id"`
	Detail  string       `json:"detail"`
	// Index is the step's 1-based position in the runbook.
	Index int `json:"index"`
	// Verdicts counts the verdicts of a step over many operations.
	Verdicts map[inspect.Code]int `json:"verdicts,omitempty"`
	// PlanIDs are the plans a step made or applied when there are several.
	PlanIDs []string `json:"plan_ids,omitempty"`
	// Partial counts the operations the step triaged from part of their
	// sources (a source unreachable): their verdicts are not the whole
	// answer.
	Partial int `json:"partial,omitempty"`
	// Text is the step's text (a note's, or what it tells the person).
	Text string `json:"text,omitempty"`
	// Elapsed is the step's duration in seconds.
	Elapsed float64 `json:"elapsed"`
}

// Summary is the end of a run (the last object of `-o json`).
type Summary struct {
	RunID   string `json:"run_id"`
	Runbook string `json:"runbook"`
	// Outcome is done, stopped (an unexpected verdict or a refusal),
	// failed or interrupted.
	Outcome string `json:"outcome"`
	// Done is the number of steps that ended ok; Steps the runbook's.
	Done  int `json:"steps_done"`
	Steps int `json:"steps"`
	// StoppedAt is the step the run stopped at ("" when done).
	StoppedAt string `json:"stopped_at,omitempty"`
	DryRun    bool   `json:"dry_run"`
	// Resume is the command that resumes the run, when it did not finish.
	Resume string `json:"resume,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Exit is the exit status of the run.
	Exit int `json:"exit"`
}

// Options are one run's choices.
type Options struct {
	// BizID and Pipeline are the operation (a runbook for one operation);
	// Pipeline also narrows a reconcile step.
	BizID    string
	Pipeline string
	DryRun   bool
	// Plan is the plan options (reason, operator, --action, --attest,
	// --outcome); the run adds its runbook and id.
	Plan plans.Options
	// Operator is who applies (the audit).
	Operator string
	// Yes runs the run scripted (--yes): review steps pass without a
	// person.
	Yes bool
	// Review is a person on a terminal: called by a review step with the
	// plans to look at, and by an apply step that no review step answered
	// in this run, before it applies. An error stops the run. A run
	// applies only with Yes, or with Review answered (docs/runbooks.md
	// "Running"): without either, a review or an apply step is refused.
	Review func(ctx context.Context, s Step, ps []*plans.Plan) error
	// Before is called before each step (--step); an error stops the run.
	Before func(ctx context.Context, index int, s Step) error
	// Emit gets each step that ended.
	Emit func(Event) error
	// PollEvery is how often a wait until polls (default 2s).
	PollEvery time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Runner runs runbooks.
type Runner struct {
	Triage    Triager
	Service   Service
	Reconcile reconcile.Func
	Config    *config.Config
	Records   Records
	// Lock takes a lock on the write database (repair.Service.Lock): a run
	// holds "opctl-run-<run id>" from its start (or resume) to its end, so
	// that two processes never work one run (docs/runbooks.md "Run records
	// and resume"). nil takes none (tests on fakes).
	Lock func(ctx context.Context, name string, wait time.Duration) (sources.Lock, error)
}

// lockRun takes run id's lock, refusing at once (exit 5, naming the
// holder) when another process holds it; release gives it back.
func (r *Runner) lockRun(ctx context.Context, id string) (release func(), err error) {
	if r.Lock == nil {
		return func() {}, nil
	}
	lk, err := r.Lock(ctx, "opctl-run-"+id, 0)
	if err != nil {
		var held *sources.LockHeldError
		if errors.As(err, &held) {
			held.What = "run " + id + " (being run)"
			return nil, held
		}
		return nil, fmt.Errorf("take the lock of run %s: %w", id, err)
	}
	return func() { _ = lk.Release() }, nil
}

// StopError is a step that saw what it did not expect, or a refusal: the
// run stopped there (exit 5).
type StopError struct {
	Step   string
	Detail string
}

// Error says where the run stopped and what it saw.
func (e *StopError) Error() string { return fmt.Sprintf("step %s: %s", e.Step, e.Detail) }

// ExitCode is 5.
func (e *StopError) ExitCode() int { return sources.ExitRefused }

// state is what the steps so far produced.
type state struct {
	targets []Target
	plans   []*plans.Plan
	// reviewed: a person accepted the plans in this run (a review step
	// or the confirmation of an apply step).
	reviewed bool
	applied  map[string]bool
	verdict  map[string]inspect.Code // by biz_id/pipeline: the last triage
}

func key(biz, pipeline string) string { return pipeline + "\x00" + biz }

// Start runs rb from its first step. The run is recorded (see Records)
// before its first step; its id is in the summary.
func (r *Runner) Start(ctx context.Context, rb *Runbook, o Options) (*Summary, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	if !rb.Mass() && o.BizID == "" {
		return nil, &InputError{Msg: fmt.Sprintf("runbook %s works on one operation: pass --biz-id", rb.Name)}
	}
	if rb.Mass() && o.BizID != "" {
		return nil, &InputError{Msg: fmt.Sprintf("runbook %s works on reconcile's targets, not on one --biz-id", rb.Name)}
	}
	if o.BizID != "" {
		if err := sources.ValidateBizID(o.BizID); err != nil {
			return nil, err
		}
	}
	h := Header{RunID: NewRunID(now()), Runbook: rb.Name, Source: rb.Source, Digest: digest(rb), BizID: o.BizID, Pipeline: o.Pipeline,
		DryRun: o.DryRun, Reason: o.Plan.Reason, Operator: o.Operator, Action: string(o.Plan.Action), Attest: o.Plan.Attest, Outcome: o.Plan.Outcome,
		StartedAt: now().UTC()}
	if err := checkPlanOptions(rb, o.Plan); err != nil {
		return nil, err
	}
	release, err := r.lockRun(ctx, h.RunID)
	if err != nil {
		return nil, err
	}
	defer release()
	rec, err := r.Records.create(h)
	if err != nil {
		return nil, err
	}
	defer rec.close()
	st := &state{applied: map[string]bool{}, verdict: map[string]inspect.Code{}}
	if o.BizID != "" {
		st.targets = []Target{{BizID: o.BizID, Pipeline: o.Pipeline}}
	}
	return r.run(ctx, rb, h, o, st, rec, 0)
}

// Resume continues run id from the first step that did not finish, with
// the options it started with (o gives only the interaction: Review,
// Before, Emit). The runbook must be the one it started with.
func (r *Runner) Resume(ctx context.Context, lib *Library, id string, o Options) (*Summary, *Runbook, error) {
	if ValidRunID(id) {
		// One process works a run at a time: the record read below is
		// final, and nobody else appends to it while this one runs.
		release, err := r.lockRun(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		defer release()
	}
	rec, err := r.Records.Load(id)
	if err != nil {
		return nil, nil, err
	}
	h := rec.Header
	rb, ok := lib.Get(h.Runbook)
	if (!ok || rb.Source != h.Source) && !strings.HasPrefix(h.Source, BuiltinPrefix) {
		// A run of a file given to sop run, or of a runbook of sop.dir
		// that moved: the file the run started with.
		if f, err := ReadFile(h.Source); err == nil && f.Name == h.Runbook {
			rb, ok = f, true
		}
	}
	if !ok {
		return nil, nil, &InputError{Msg: fmt.Sprintf("--resume %s: the run's runbook %s is no longer known (%s)", id, h.Runbook, strings.Join(lib.Names(), ", "))}
	}
	if digest(rb) != h.Digest {
		return nil, nil, &InputError{Msg: fmt.Sprintf("--resume %s: runbook %s changed since the run started (%s): start a new run", id, h.Runbook, rb.Source)}
	}
	st := &state{applied: map[string]bool{}, verdict: map[string]inspect.Code{}}
	if h.BizID != "" {
		st.targets = []Target{{BizID: h.BizID, Pipeline: h.Pipeline}}
	}
	// The lines are in the order the steps ended; a step that did not
	// finish and was resumed appears again later. The run continues after
	// the last step of the unbroken chain of finished steps.
	from := 0
	for _, s := range rec.steps {
		if s.Event.Index != from+1 || !finished(s.Event.Outcome) {
			continue
		}
		if s.SetTargets {
			st.targets = s.Targets
		}
		if s.SetPlans {
			st.plans = s.Plans
		}
		for _, id := range s.Applied {
			st.applied[id] = true
		}
		from++
	}
	if from >= len(rb.Steps) {
		return &Summary{RunID: id, Runbook: rb.Name, Outcome: "done", Done: len(rb.Steps), Steps: len(rb.Steps), DryRun: h.DryRun,
			Detail: "the run had finished: nothing to resume"}, rb, nil
	}
	o.BizID, o.Pipeline, o.DryRun, o.Operator = h.BizID, h.Pipeline, h.DryRun, h.Operator
	o.Plan = plans.Options{Reason: h.Reason, Operator: h.Operator, Action: plans.ActionType(h.Action), Attest: h.Attest, Outcome: h.Outcome}
	w, err := r.Records.reopen(id)
	if err != nil {
		return nil, nil, err
	}
	defer w.close()
	sum, err := r.run(ctx, rb, h, o, st, w, from)
	return sum, rb, err
}

// RunbookFor triages bizID and returns the runbook for its current
// verdict (Library.For), or nil with the operation when no runbook is for
// it (`opctl sop run` without a name).
func (r *Runner) RunbookFor(ctx context.Context, lib *Library, bizID, pipeline string) (*Runbook, *triage.Operation, error) {
	t, err := r.Triage.Triage(ctx, bizID, pipeline)
	if err != nil {
		return nil, nil, err
	}
	op, err := t.One()
	if err != nil {
		return nil, nil, err
	}
	rb, _ := lib.For(op.Report.Verdict.Code)
	return rb, op, nil
}

// InputError is a run that cannot start as asked (exit 2).
type InputError struct{ Msg string }

// Error is the message.
func (e *InputError) Error() string { return e.Msg }

// ExitCode is 2.
func (e *InputError) ExitCode() int { return sources.ExitUsage }

// checkPlanOptions refuses, before anything runs, options no plan could be
// made with (a missing --reason).
func checkPlanOptions(rb *Runbook, o plans.Options) error {
	for _, s := range rb.Steps {
		if s.Type == StepPlan && strings.TrimSpace(o.Reason) == "" {
			return &InputError{Msg: fmt.Sprintf("runbook %s makes plans: --reason is required (an incident, a ticket)", rb.Name)}
		}
	}
	return nil
}

func (r *Runner) run(ctx context.Context, rb *Runbook, h Header, o Options, st *state, rec *recorder, from int) (*Summary, error) {
	sum := &Summary{RunID: h.RunID, Runbook: rb.Name, Steps: len(rb.Steps), Done: from, DryRun: h.DryRun}
	o.Plan.Runbook, o.Plan.RunID = rb.Name, h.RunID
	emit := func(ev Event) error {
		if o.Emit != nil {
			return o.Emit(ev)
		}
		return nil
	}
	stop := func(s Step, outcome, detail string, err error) (*Summary, error) {
		sum.StoppedAt, sum.Detail = s.Name, detail
		sum.Resume = "opctl sop run --resume " + h.RunID
		switch outcome {
		case OutcomeInterrupted:
			sum.Outcome, sum.Exit = "interrupted", sources.ExitInterrupted
		case OutcomeUnexpected, OutcomeRefused:
			sum.Outcome, sum.Exit = "stopped", sources.ExitRefused
		default:
			sum.Outcome, sum.Exit = "failed", sources.ExitError
			var c interface{ ExitCode() int }
			if errors.As(err, &c) {
				sum.Exit = c.ExitCode()
			}
		}
		return sum, err
	}
	for i := from; i < len(rb.Steps); i++ {
		s := rb.Steps[i]
		if err := ctx.Err(); err != nil {
			return stop(s, OutcomeInterrupted, fmt.Sprintf("interrupted before step %d (%s); %d of %d steps done", i+1, s.Name, sum.Done, len(rb.Steps)), err)
		}
		if o.Before != nil {
			if err := o.Before(ctx, i+1, s); err != nil {
				if ctx.Err() != nil {
					return stop(s, OutcomeInterrupted, fmt.Sprintf("interrupted before step %d (%s)", i+1, s.Name), ctx.Err())
				}
				return stop(s, OutcomeRefused, fmt.Sprintf("stopped before step %d (%s): %v", i+1, s.Name, err), &StopError{Step: s.Name, Detail: err.Error()})
			}
		}
		start := time.Now()
		x := &exec{r: r, o: o, st: st, s: s, ev: Event{Step: s.Name, Type: s.Type, Index: i + 1, Text: s.Text}}
		err := x.do(ctx)
		x.ev.Elapsed = time.Since(start).Seconds()
		if err != nil && x.ev.Outcome == "" {
			x.ev.Outcome = OutcomeFailed
			if ctx.Err() != nil {
				x.ev.Outcome = OutcomeInterrupted
			}
			if x.ev.Detail == "" {
				x.ev.Detail = err.Error()
			}
		}
		if x.ev.Outcome == "" {
			x.ev.Outcome = OutcomeOK
		}
		sr := stepRecord{Event: x.ev}
		if finished(x.ev.Outcome) {
			sr.Targets, sr.Plans, sr.Applied, sr.SetTargets, sr.SetPlans = x.targets, x.plans, x.applied, x.setTargets, x.setPlans
		}
		if werr := rec.step(sr); werr != nil {
			return stop(s, OutcomeFailed, werr.Error(), werr)
		}
		if eerr := emit(x.ev); eerr != nil {
			return stop(s, OutcomeFailed, eerr.Error(), eerr)
		}
		if finished(x.ev.Outcome) {
			sum.Done++
			continue
		}
		switch x.ev.Outcome {
		case OutcomeUnexpected, OutcomeRefused:
			if err == nil {
				err = &StopError{Step: s.Name, Detail: x.ev.Detail}
			}
		}
		return stop(s, x.ev.Outcome, fmt.Sprintf("step %d of %d (%s, %s) %s: %s", i+1, len(rb.Steps), s.Name, s.Type, x.ev.Outcome, x.ev.Detail), err)
	}
	sum.Outcome = "done"
	return sum, nil
}

// finished reports whether a step with outcome ended as the runbook wants:
// the run goes on to the next step (and a resume starts after it).
func finished(outcome string) bool {
	return outcome == OutcomeOK || outcome == OutcomeNothing || outcome == OutcomeSkipped
}

// exec runs one step.
type exec struct {
	r  *Runner
	o  Options
	st *state
	s  Step
	ev Event
	// what the step adds to the state, recorded with it
	targets              []Target
	plans                []*plans.Plan
	applied              []string
	setTargets, setPlans bool // the step set the run's targets, its plans
}

func (x *exec) do(ctx context.Context) error {
	switch x.s.Type {
	case StepNote:
		x.ev.Detail = strings.TrimSpace(x.s.Text)
		return nil
	case StepReconcile:
		return x.reconcile(ctx)
	case StepWhere, StepProbe:
		return x.triage(ctx, x.st.targets, x.s.Expect)
	case StepVerify:
		if x.o.DryRun {
			x.ev.Outcome, x.ev.Detail = OutcomeSkipped, "dry run: nothing was applied, nothing to verify"
			return nil
		}
		return x.triage(ctx, x.appliedTargets(), x.s.Expect)
	case StepPlan:
		return x.plan(ctx)
	case StepReview:
		return x.review(ctx)
	case StepApply:
		return x.apply(ctx)
	case StepWait:
		return x.wait(ctx)
	}
	return fmt.Errorf("step type %q is not known", x.s.Type)
}

// appliedTargets are the operations whose plans the run applied.
func (x *exec) appliedTargets() []Target {
	var out []Target
	for _, p := range x.st.plans {
		if x.st.applied[p.ID] {
			out = append(out, Target{BizID: p.BizID, Pipeline: p.Pipeline})
		}
	}
	if len(out) == 0 && x.o.BizID != "" {
		return x.st.targets // nothing applied (nothing to repair): the operation itself
	}
	return out
}

// triage triages targets and checks their verdicts against expect (any
// verdict when expect is empty).
func (x *exec) triage(ctx context.Context, ts []Target, expect []inspect.Code) error {
	if len(ts) == 0 {
		x.ev.Outcome, x.ev.Detail = OutcomeNothing, "no operation to triage"
		return nil
	}
	counts := map[inspect.Code]int{}
	partial, unread := 0, map[string]bool{} // operations triaged from part of their sources
	for _, t := range ts {
		if err := ctx.Err(); err != nil {
			return err
		}
		tr, err := x.r.Triage.Triage(ctx, t.BizID, t.Pipeline)
		if err != nil {
			return err
		}
		op, err := tr.One()
		if err != nil {
			var nf *inspect.NotFoundError
			if errors.As(err, &nf) {
				x.ev.Verdict = inspect.NotFound
				if len(expect) > 0 && !slices.Contains(expect, inspect.NotFound) {
					x.ev.Outcome = OutcomeUnexpected
					x.ev.Detail = fmt.Sprintf("%s: NOT_FOUND (%v); the runbook expects %s", t.BizID, err, codes(expect))
					return nil
				}
				counts[inspect.NotFound]++
				continue
			}
			return err
		}
		v := op.Report.Verdict
		x.st.verdict[key(t.BizID, op.Pipeline.Name)] = v.Code
		counts[v.Code]++
		if len(ts) == 1 {
			x.ev.Verdict = v.Code
			x.ev.Detail = fmt.Sprintf("%s (%s): %s: %s", t.BizID, op.Pipeline.Name, v.Code, v.Summary)
		}
		if op.Report.Partial {
			partial++
			for _, u := range op.Report.Unread() {
				unread[u] = true
			}
			if len(ts) == 1 {
				x.ev.Detail += " (partial: " + strings.Join(op.Report.Unread(), ", ") + " not read)"
			}
		}
		if len(expect) > 0 && !slices.Contains(expect, v.Code) {
			x.ev.Outcome, x.ev.Verdict = OutcomeUnexpected, v.Code
			x.ev.Detail = fmt.Sprintf("%s (%s) is %s, the runbook expects %s: %s", t.BizID, op.Pipeline.Name, v.Code, codes(expect), v.Summary)
			if len(ts) > 1 {
				x.ev.Verdicts = counts
			}
			return nil
		}
	}
	if len(ts) > 1 {
		x.ev.Verdicts = counts
		x.ev.Detail = fmt.Sprintf("%d operations: %s", len(ts), countText(counts))
		x.ev.Partial = partial
		if partial > 0 {
			// A verdict drawn from part of the sources is not the whole
			// answer: said, whatever the counts.
			x.ev.Detail += fmt.Sprintf("; PARTIAL: %d of them triaged without %s", partial, strings.Join(slices.Sorted(maps.Keys(unread)), ", "))
		}
	}
	return nil
}

func (x *exec) reconcile(ctx context.Context) error {
	if x.r.Reconcile == nil {
		return errors.New("reconcile is not available")
	}
	ps, err := x.r.Config.Select(x.o.Pipeline)
	if err != nil {
		return err
	}
	ro := reconcile.Options{Pipelines: ps, Checks: x.s.Checks, Since: x.s.Since, OlderThan: x.s.OlderThan}
	seen := map[string]bool{}
	var ts []Target
	sum, err := x.r.Reconcile(ctx, ro, func(res reconcile.Result) error {
		if !res.IsTarget() || seen[key(res.BizID, res.Pipeline)] {
			return nil
		}
		seen[key(res.BizID, res.Pipeline)] = true
		ts = append(ts, Target{BizID: res.BizID, Pipeline: res.Pipeline, Check: res.Check, Verdict: res.Verdict, Step: res.Step})
		return nil
	})
	if err != nil {
		return err
	}
	counts := map[inspect.Code]int{}
	for _, t := range ts {
		counts[t.Verdict]++
	}
	x.targets, x.st.targets, x.setTargets = ts, ts, true
	x.ev.Verdicts = counts
	x.ev.Detail = fmt.Sprintf("%d target(s): %s", len(ts), countText(counts))
	if sum != nil && sum.Refused {
		var refused []string
		for _, c := range sum.Checks {
			if c.Status == reconcile.StatusRefused {
				refused = append(refused, c.Pipeline+"/"+c.Check+": "+c.Reason)
			}
		}
		x.ev.Detail += "; refused: " + strings.Join(refused, "; ")
	}
	if sum != nil && sum.Partial {
		x.ev.Detail += "; partial: " + strings.Join(sum.PartialWhy, "; ")
	}
	if len(ts) == 0 {
		x.ev.Outcome = OutcomeNothing
	}
	return nil
}

func (x *exec) plan(ctx context.Context) error {
	if x.o.BizID == "" {
		return x.planTargets(ctx)
	}
	tr, err := x.r.Triage.Triage(ctx, x.o.BizID, x.o.Pipeline)
	if err != nil {
		return err
	}
	op, err := tr.One()
	if err != nil {
		return err
	}
	x.ev.Verdict = op.Report.Verdict.Code
	var p *plans.Plan
	if r := op.Report.Repair; op.Report.Verdict.Code == inspect.RepairIncomplete && r != nil {
		// The verdict's own next command: finish the plan that stopped.
		p, err = x.r.Service.StoredPlan(ctx, r.PlanID)
	} else {
		p, err = x.r.Service.Plan(ctx, op, x.o.Plan)
	}
	var nothing *plans.NothingToRepairError
	var refused *plans.RefusedError
	switch {
	case errors.As(err, &nothing):
		x.ev.Outcome, x.ev.Detail = OutcomeNothing, err.Error()
		x.setPlans = true
		x.st.plans = nil
		return nil
	case errors.As(err, &refused):
		x.ev.Outcome, x.ev.Detail = OutcomeRefused, err.Error()
		return err
	case err != nil:
		return err
	}
	x.plans, x.st.plans, x.setPlans = []*plans.Plan{p}, []*plans.Plan{p}, true
	x.ev.PlanID = p.ID
	x.ev.Detail = fmt.Sprintf("plan %s for %s: %s", p.Short(), p.BizID, actionList(p))
	return nil
}

func (x *exec) planTargets(ctx context.Context) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, t := range x.st.targets {
		if err := enc.Encode(t); err != nil {
			return err
		}
	}
	b, err := x.r.Service.PlanTargets(ctx, &buf, "the reconcile step's targets", "", x.o.Plan)
	if err != nil {
		return err
	}
	x.plans, x.st.plans, x.setPlans = b.Plans, b.Plans, true
	for _, p := range b.Plans {
		x.ev.PlanIDs = append(x.ev.PlanIDs, p.ID)
	}
	x.ev.Detail = fmt.Sprintf("%d plan(s), %d target(s) skipped", len(b.Plans), len(b.Skipped))
	for i, sk := range b.Skipped {
		if i == 3 {
			x.ev.Detail += fmt.Sprintf("; and %d more", len(b.Skipped)-3)
			break
		}
		x.ev.Detail += fmt.Sprintf("; %s: %s", sk.BizID, sk.Why)
	}
	if len(b.Plans) == 0 {
		x.ev.Outcome = OutcomeNothing
	}
	return nil
}

func (x *exec) review(ctx context.Context) error {
	pending := x.pending(0)
	if len(pending) == 0 {
		x.ev.Outcome, x.ev.Detail = OutcomeNothing, "no plan to review"
		return nil
	}
	switch {
	case x.o.Yes:
		x.ev.Detail = fmt.Sprintf("%d plan(s) passed without a person (--yes)", len(pending))
		return nil
	case x.o.DryRun && x.o.Review == nil:
		x.ev.Detail = fmt.Sprintf("%d plan(s) passed without a person (--dry-run: nothing is applied)", len(pending))
		return nil
	}
	if err := x.confirm(ctx, pending); err != nil {
		return err
	}
	x.ev.Detail = fmt.Sprintf("%d plan(s) reviewed", len(pending))
	return nil
}

// confirm has a person accept ps (Options.Review); without one (no --yes
// and stdin not a terminal) the step is refused.
func (x *exec) confirm(ctx context.Context, ps []*plans.Plan) error {
	if x.o.Review == nil {
		msg := "nobody to accept the plans: pass --yes to run it scripted; nothing was applied"
		x.ev.Outcome, x.ev.Detail = OutcomeRefused, msg
		return &StopError{Step: x.s.Name, Detail: msg}
	}
	if err := x.o.Review(ctx, x.s, ps); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		x.ev.Outcome, x.ev.Detail = OutcomeRefused, err.Error()
		return &StopError{Step: x.s.Name, Detail: err.Error()}
	}
	x.st.reviewed = true
	return nil
}

// pending are the plans not yet applied, at most n (0: all).
func (x *exec) pending(n int) []*plans.Plan {
	var out []*plans.Plan
	for _, p := range x.st.plans {
		if !x.st.applied[p.ID] {
			out = append(out, p)
			if n > 0 && len(out) == n {
				break
			}
		}
	}
	return out
}

func (x *exec) apply(ctx context.Context) error {
	ps := x.pending(x.s.Count)
	if len(ps) == 0 {
		x.ev.Outcome, x.ev.Detail = OutcomeNothing, "no plan left to apply"
		return nil
	}
	verb := "applied"
	if x.o.DryRun {
		verb = "dry-ran"
	} else if !x.o.Yes && !x.st.reviewed {
		// No review step answered in this run (a runbook without one, a
		// resumed run): a person confirms before anything is applied.
		if err := x.confirm(ctx, ps); err != nil {
			return err
		}
	}
	for i, p := range ps {
		res, err := x.r.Service.Apply(ctx, p, repair.ApplyOptions{DryRun: x.o.DryRun, Operator: x.o.Operator})
		if len(ps) == 1 {
			x.ev.PlanID = p.ID
		} else {
			x.ev.PlanIDs = append(x.ev.PlanIDs, p.ID)
		}
		if err != nil {
			x.ev.PlanID = p.ID
			done := fmt.Sprintf("%d of %d plan(s) %s before it", i, len(ps), verb)
			var rf *plans.RefusedError
			switch {
			case ctx.Err() != nil:
				x.ev.Outcome = OutcomeInterrupted
				x.ev.Detail = fmt.Sprintf("interrupted during plan %s (%s); %s; resuming applies it again from its first action that did not take effect", p.Short(), p.BizID, done)
			case errors.As(err, &rf):
				x.ev.Outcome = OutcomeRefused
				x.ev.Detail = fmt.Sprintf("plan %s (%s) refused: %v; %s", p.Short(), p.BizID, err, done)
			default:
				x.ev.Detail = fmt.Sprintf("plan %s (%s): %v; %s", p.Short(), p.BizID, err, done)
			}
			return err
		}
		x.st.applied[p.ID] = true
		x.applied = append(x.applied, p.ID)
		if len(ps) == 1 {
			x.ev.Detail = fmt.Sprintf("plan %s (%s): %s %d/%d action(s)", p.Short(), p.BizID, res.Outcome, res.Applied+res.Previously, res.Total)
		}
	}
	if len(ps) > 1 {
		x.ev.Detail = fmt.Sprintf("%d plan(s) %s; %d left", len(ps), verb, len(x.pending(0)))
	}
	return nil
}

func (x *exec) wait(ctx context.Context) error {
	if x.o.DryRun && len(x.s.Until) > 0 {
		x.ev.Outcome, x.ev.Detail = OutcomeSkipped, "dry run: nothing was applied, nothing to wait for"
		return nil
	}
	if x.s.For > 0 {
		t := time.NewTimer(x.s.For)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		x.ev.Detail = "waited " + x.s.For.String()
		return nil
	}
	every := x.o.PollEvery
	if every <= 0 {
		every = 2 * time.Second
	}
	deadline := time.Now().Add(x.s.Timeout)
	ts := x.appliedTargets()
	for {
		y := &exec{r: x.r, o: x.o, st: x.st, s: x.s, ev: Event{}}
		if err := y.triage(ctx, ts, x.s.Until); err != nil {
			return err
		}
		x.ev.Verdict, x.ev.Verdicts = y.ev.Verdict, y.ev.Verdicts
		if y.ev.Outcome != OutcomeUnexpected {
			x.ev.Detail = "reached " + codes(x.s.Until) + ": " + y.ev.Detail
			return nil
		}
		if time.Now().After(deadline) {
			x.ev.Outcome = OutcomeUnexpected
			x.ev.Detail = fmt.Sprintf("after %s: %s", x.s.Timeout, y.ev.Detail)
			return nil
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func codes(cs []inspect.Code) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func countText(m map[inspect.Code]int) string {
	if len(m) == 0 {
		return "none"
	}
	var ks []string
	for k := range m {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	for i, k := range ks {
		ks[i] = fmt.Sprintf("%d %s", m[inspect.Code(k)], k)
	}
	return strings.Join(ks, ", ")
}

func actionList(p *plans.Plan) string {
	s := make([]string, len(p.Actions))
	for i, a := range p.Actions {
		s[i] = string(a.Type)
	}
	return strings.Join(s, " → ")
}
