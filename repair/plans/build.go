package plans

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Limits of the audit columns (docs/repair.md).
const (
	MaxReason   = 1024
	MaxOperator = sources.MaxOperator
	// MaxRunLabel bounds a plan's runbook name and run id.
	MaxRunLabel = 128
	// MaxIncident bounds an incident name (opctl tui --incident).
	MaxIncident = 128
)

// Options are the operator's choices for one plan (the flags of `opctl
// repair plan`).
type Options struct {
	// Reason is required: why the repair is made (a ticket, an incident).
	Reason string
	// Operator is who makes the plan.
	Operator string
	// Action forces a plan of that action type (--action). Without Force it
	// must be one the verdict calls for.
	Action ActionType
	// FromStep is a step name or 1-based index: the step a republish resumes
	// from, or the step a reverse, compensate_remote or manual acts on.
	FromStep string
	// Force lets Action act on a verdict that does not call for it. It
	// never bypasses a live lease.
	Force bool
	// Attest is the operator's statement of what was done by hand; required
	// when the plan has a manual action.
	Attest string
	// Outcome is what a manual action attests about a step's unknown calls:
	// applied or absent.
	Outcome string
	// Runbook and RunID name the runbook run that makes the plan (opctl sop
	// run); recorded in the plan and so in its audit rows.
	Runbook string
	RunID   string
	// Incident names the incident the plan is made in (opctl tui
	// --incident); recorded in the plan and its audit rows.
	Incident string
	// Now is the plan's created_at (the caller's clock; zero: time.Now).
	Now time.Time
}

// Input is what Build reads.
type Input struct {
	Config *config.Config
	// Report is the triage the plan repairs (inspect.Diagnose).
	Report inspect.Report
	// Evidence is what the report was computed from. Optional: without it a
	// republish publishes a replay record (the original record is not
	// known) and release_lease is refused (group membership unknown).
	Evidence *sources.Evidence
	// RedrivePartitions is the partition count of the pipeline's redrive
	// topic (0: unknown; a republish is then refused unless the
	// partitioner is "stored").
	RedrivePartitions int32
	Options           Options
}

// CalledFor returns the action types the verdict's rule of docs/repair.md uses;
// --action without --force must be one of them.
func CalledFor(verdict inspect.Code) []ActionType {
	switch verdict {
	case inspect.DuplicateEffect:
		return []ActionType{Reverse, CompensateRemote, Manual}
	case inspect.UnknownOutcome:
		return []ActionType{Manual, AdvanceState, RewindState, Republish}
	case inspect.WronglySkipped:
		return []ActionType{FlipSkipped, Republish, Redrive, Manual}
	case inspect.MissingEffect:
		return []ActionType{RewindState, Republish, Manual}
	case inspect.StateBehind:
		return []ActionType{AdvanceState, Republish, Manual}
	case inspect.Stranded:
		return []ActionType{RewindState, Republish, Manual}
	case inspect.InFlight:
		return []ActionType{ReleaseLease}
	}
	return nil
}

// Build makes the plan for a report (docs/repair.md "Which plan a verdict gets").
// It does no I/O. Errors: *InputError (bad options: exit 2), *inspect.NotFoundError
// (exit 4), *NothingToRepairError (exit 0, no plan), *RefusedError (exit
// 5: IN_FLIGHT, no safe plan, an action the verdict does not call for).
//
// The rules:
//   - DUPLICATE_EFFECT: a local step with reverse statements → one reverse
//     per extra live row, newest (greatest identity) first; a remote step
//     with compensate → one compensate_remote per extra effect, newest
//     first; otherwise manual (the operator undoes the extra effects by
//     hand and attests it with --attest).
//   - UNKNOWN_OUTCOME: the collector already probed; a probe that was
//     inconclusive refuses (retry later); without a probe --action manual
//     --attest TEXT --outcome applied|absent attests the downstream's
//     answer: applied → advance_state past the step, absent → rewind_state
//     to before it; then republish from the step to run next.
//   - STATE_BEHIND → advance_state over the contiguous steps that took
//     effect (creating the state row when there is none); then republish
//     if not terminal.
//   - STRANDED → rewind_state to the first missing step when needed, then
//     republish with opctl-from-step.
//   - WRONGLY_SKIPPED → flip_skipped (SKIPPED → PENDING) then republish
//     with opctl-force-effect.
//   - MISSING_EFFECT → rewind_state to before the first missing step, then
//     republish.
//   - IN_FLIGHT → refused; only --action release_lease, when the owner is
//     no longer a member of the consumer group.
//
// A republish that follows a state change is left out when Kafka will
// redeliver the message anyway (the plan notes it): the consumer resumes
// from the repaired state, and a second copy would be processed twice by a
// consumer without opctl's replay dedupe.
func Build(in Input) (*Plan, error) {
	if err := checkOptions(in.Options); err != nil {
		return nil, err
	}
	if !utf8.ValidString(in.Report.BizID) {
		return nil, &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("the stored biz_id %q is not valid UTF-8: a plan file cannot carry it exactly", in.Report.BizID)}
	}
	if r := in.Report.Repair; r != nil && in.Report.Verdict.Code == inspect.RepairIncomplete {
		return nil, &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("REPAIR_INCOMPLETE: opctl's plan %s stopped part-way; finish it rather than plan again: opctl repair apply %s --dry-run, then without --dry-run", short(r.PlanID), r.PlanID)}
	}
	ob := Observe(in.Report, in.Evidence, in.RedrivePartitions)
	p, err := buildFrom(in.Config, in.Report.BizID, in.Report.Pipeline, in.Report.Verdict.Summary, ob, in.Options)
	if err != nil {
		return nil, err
	}
	// No plan is written that apply would call tampered: the plan, read
	// back from its file, must rebuild to itself.
	var b bytes.Buffer
	if err := Encode(&b, p); err != nil {
		return nil, err
	}
	back, err := Decode(&b)
	if err == nil {
		err = Rederive(in.Config, back)
	}
	if err != nil {
		return nil, fmt.Errorf("internal error: the plan made for %s does not rebuild from its file (%v): please report it", p.BizID, err)
	}
	return p, nil
}

// buildFrom plans from what a plan records and nothing else: the report and
// evidence the planner reads are rebuilt from ob, at plan time as at apply
// (Rederive), so the same record always gives the same actions.
func buildFrom(cfg *config.Config, bizID, pipeline, summary string, ob Observed, o Options) (*Plan, error) {
	in := Input{Config: cfg, Report: ob.report(bizID, pipeline, summary), Evidence: ob.evidence(),
		RedrivePartitions: ob.Kafka.RedrivePartitions, Options: o}
	pl, err := newPlanner(in)
	if err != nil {
		return nil, err
	}
	// The observation must be of this pipeline's steps, in order, and what
	// the status claims is the configuration's to say, not the record's.
	if len(ob.Steps) != len(pl.p.Steps) {
		return nil, inputErrorf("", "the observation has %d step(s); pipeline %s has %d", len(ob.Steps), pl.p.Name, len(pl.p.Steps))
	}
	for i, st := range ob.Steps {
		if st.Name != pl.p.Steps[i].Name {
			return nil, inputErrorf("", "observed step %d is %q; pipeline %s's step %d is %q", i+1, st.Name, pl.p.Name, i+1, pl.p.Steps[i].Name)
		}
	}
	pl.r.State.Reached = pl.reached()
	pl.observed = ob
	if err := pl.plan(); err != nil {
		return nil, err
	}
	return pl.seal()
}

// newPlanner starts a planner at the state the report read.
func newPlanner(in Input) (*planner, error) {
	if in.Config == nil {
		return nil, inputErrorf("", "repair: no configuration")
	}
	r := in.Report
	p := in.Config.Pipeline(r.Pipeline)
	if p == nil {
		return nil, inputErrorf("", "pipeline %q is not in the configuration", r.Pipeline)
	}
	pl := &planner{in: in, p: p, r: r, o: in.Options, from: -1, idem: map[string]string{}, live: map[string]int{},
		found: r.State.Found, status: r.State.Status}
	if in.Options.FromStep != "" {
		k, err := stepArg(p, in.Options.FromStep)
		if err != nil {
			return nil, err
		}
		pl.from = k
	}
	if r.State.Version != nil {
		v := *r.State.Version
		pl.version = &v
	}
	for _, x := range r.Idempotency {
		pl.idem[x.Key] = x.Action
	}
	for _, s := range r.Steps {
		pl.live[s.Name] = s.EvidenceCount
	}
	return pl, nil
}

// plan adds the actions the verdict calls for (or --action forces), or
// says why there are none.
func (pl *planner) plan() error {
	r, o := pl.r, pl.o
	verdict := r.Verdict.Code
	var err error
	switch {
	case verdict == inspect.NotFound:
		return &inspect.NotFoundError{BizID: r.BizID, Pipeline: r.Pipeline}
	case o.Action == ReleaseLease:
		pl.forced = verdict != inspect.InFlight
		err = pl.releaseLease()
	case verdict == inspect.InFlight || r.State.LeaseActive:
		return refusedf(CodeInFlight, "%s: %s; no plan while the lease is live ({force} never bypasses it). Wait for lease_until, or if the owner is gone from the group: {action release_lease}", verdict, r.Verdict.Summary)
	default:
		err = pl.calledFor(verdict)
	}
	if err != nil {
		return err
	}
	if len(pl.acts) == 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("%s: no action of the requested kind applies", verdict)}
	}
	for _, a := range pl.acts {
		if a.Type == Manual && strings.TrimSpace(o.Attest) == "" {
			return inputErrorf(OptAttest, "this plan has a manual action (%s): do it by hand, then plan again with {attest \"what was done\"}", a.Summary)
		}
	}
	return nil
}

// calledFor plans what the verdict calls for, or the action --action asks
// for (--force lets it act on a verdict that does not call for it).
func (pl *planner) calledFor(verdict inspect.Code) error {
	if err := pl.checkComplete(); err != nil {
		return err
	}
	o := pl.o
	called := CalledFor(verdict)
	switch {
	case o.Action != "" && !slices.Contains(called, o.Action) && !o.Force:
		if len(called) == 0 {
			return refusedf(CodeNotCalledFor, "%s calls for no repair; {action %s} acts on it only with {force}", verdict, o.Action)
		}
		return refusedf(CodeNotCalledFor, "%s calls for %s, not %s; add {force} to do it anyway", verdict, joinTypes(called), o.Action)
	case o.Action == "" && len(called) == 0:
		return &NothingToRepairError{Verdict: verdict, Summary: pl.r.Verdict.Summary}
	case o.Action != "" && !slices.Contains(called, o.Action):
		pl.forced = true
		return pl.forcedAction()
	}
	return pl.rule(verdict)
}

// seal makes the plan of the actions planned, with its id.
func (pl *planner) seal() (*Plan, error) {
	o, r := pl.o, pl.r
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	plan := &Plan{
		PlanVersion:       PlanVersion,
		CreatedAt:         now.UTC().Truncate(time.Millisecond),
		Operator:          o.Operator,
		Reason:            o.Reason,
		Pipeline:          pl.p.Name,
		BizID:             r.BizID,
		Verdict:           r.Verdict.Code,
		ConfigFingerprint: ConfigFingerprint(pl.p, pl.in.Config.Audit.AuditTable()),
		Forced:            pl.forced,
		Notes:             pl.notes,
		Request:           Request{Action: o.Action, FromStep: o.FromStep, Force: o.Force, Outcome: o.Outcome},
		Observed:          pl.observed,
		Actions:           pl.acts,
	}
	if pl.hasManual() {
		plan.Attest = o.Attest
	}
	plan.Runbook, plan.RunID = o.Runbook, o.RunID
	plan.Incident = o.Incident
	if err := plan.Seal(); err != nil {
		return nil, err
	}
	return plan, nil
}

// planner accumulates actions and the state they leave, so that each
// action's guards are written for the state the earlier ones leave.
type planner struct {
	in       Input
	observed Observed
	p        *config.Pipeline
	r        inspect.Report
	o        Options
	acts     []Action
	notes    []string
	forced   bool
	from     int // --from-step, -1 when not given

	found   bool
	status  string
	version *int64
	idem    map[string]string
	live    map[string]int // effect count per step, after the actions so far
}

func (pl *planner) note(format string, args ...any) {
	pl.notes = append(pl.notes, fmt.Sprintf(format, args...))
}

func (pl *planner) hasManual() bool {
	for _, a := range pl.acts {
		if a.Type == Manual {
			return true
		}
	}
	return false
}

// allow reports whether the plan may contain an action of type t: every
// type without --action; with --action, that type (manual on
// UNKNOWN_OUTCOME keeps the state change and republish that follow it).
func (pl *planner) allow(t ActionType) bool {
	switch {
	case pl.o.Action == "":
		return true
	case pl.o.Action == Manual && pl.r.Verdict.Code == inspect.UnknownOutcome:
		return true
	}
	return pl.o.Action == t
}

func (pl *planner) add(a Action) {
	a.Index = len(pl.acts) + 1
	if a.Guards == nil {
		a.Guards = []Guard{}
	}
	pl.acts = append(pl.acts, a)
}

// checkComplete refuses a plan made from a partial MySQL read: guards would
// be written against rows that were not read.
func (pl *planner) checkComplete() error {
	if s := pl.r.Sources["mysql"]; s != "" && s != sources.StatusOK {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "MySQL was read only partly (" + s + "): no plan from a partial read"}
	}
	for _, s := range pl.r.Steps {
		if s.Error != "" {
			return &RefusedError{Code: CodeNoSafePlan, Detail: "step " + s.Name + " could not be read (" + s.Error + "): no plan from a partial read"}
		}
	}
	if pl.r.State.Found && pl.r.State.Reached < 0 && !pl.isFailedStatus(pl.r.State.Status) {
		return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("state status %q is in no list of the config: opctl cannot tell which steps it claims", pl.r.State.Status)}
	}
	return nil
}

// --- state helpers -------------------------------------------------------

func (pl *planner) rule(verdict inspect.Code) error {
	switch verdict {
	case inspect.DuplicateEffect:
		return pl.duplicates()
	case inspect.UnknownOutcome:
		return pl.unknown()
	case inspect.StateBehind:
		return pl.stateBehind()
	case inspect.Stranded:
		return pl.stranded()
	case inspect.WronglySkipped:
		return pl.wronglySkipped()
	case inspect.MissingEffect:
		return pl.missing()
	}
	return &NothingToRepairError{Verdict: verdict, Summary: pl.r.Verdict.Summary}
}
