package plans

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
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
		return nil, inputErrorf("the observation has %d step(s); pipeline %s has %d", len(ob.Steps), pl.p.Name, len(pl.p.Steps))
	}
	for i, st := range ob.Steps {
		if st.Name != pl.p.Steps[i].Name {
			return nil, inputErrorf("observed step %d is %q; pipeline %s's step %d is %q", i+1, st.Name, pl.p.Name, i+1, pl.p.Steps[i].Name)
		}
	}
	pl.r.State.Reached = pl.reached()
	pl.observed = ob
	if err := pl.plan(); err != nil {
		return nil, err
	}
	return pl.seal()
}

// checkOptions refuses options no plan can be made with.
func checkOptions(o Options) error {
	switch {
	case strings.TrimSpace(o.Reason) == "":
		return inputErrorf("--reason is required: say why this repair is made (an incident, a ticket)")
	case len(o.Reason) > MaxReason:
		return inputErrorf("--reason is %d bytes; at most %d", len(o.Reason), MaxReason)
	case len(o.Operator) > MaxOperator:
		return inputErrorf("--operator is %d bytes; at most %d", len(o.Operator), MaxOperator)
	case o.Action != "" && !IsActionType(string(o.Action)):
		return inputErrorf("--action %q: want one of %s", o.Action, strings.Join(ActionTypeNames(), ", "))
	case o.Outcome != "" && o.Outcome != inspect.AttestApplied && o.Outcome != inspect.AttestAbsent:
		return inputErrorf("--outcome %q: want applied or absent", o.Outcome)
	case len(o.Runbook) > MaxRunLabel || len(o.RunID) > MaxRunLabel:
		return inputErrorf("runbook name and run id are at most %d bytes", MaxRunLabel)
	case o.RunID != "" && o.Runbook == "":
		return inputErrorf("a run id without its runbook: a plan made by a runbook run names both")
	case o.Force && o.Action == "":
		return inputErrorf("--force needs --action: it lets that action act on a verdict that does not call for it")
	}
	return CheckIncident(o.Incident)
}

// CheckIncident refuses an incident name a plan cannot carry: over
// MaxIncident bytes, or one a terminal could not show as it is (Shown).
func CheckIncident(s string) error {
	switch {
	case len(s) > MaxIncident:
		return inputErrorf("--incident is %d bytes; at most %d", len(s), MaxIncident)
	case Shown(s) != s:
		return inputErrorf("--incident %s: an incident name holds printable characters only", Shown(s))
	}
	return nil
}

// newPlanner starts a planner at the state the report read.
func newPlanner(in Input) (*planner, error) {
	if in.Config == nil {
		return nil, inputErrorf("repair: no configuration")
	}
	r := in.Report
	p := in.Config.Pipeline(r.Pipeline)
	if p == nil {
		return nil, inputErrorf("pipeline %q is not in the configuration", r.Pipeline)
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
		return &RefusedError{Code: CodeInFlight, Detail: fmt.Sprintf("%s: %s; no plan while the lease is live (--force never bypasses it). Wait for lease_until, or if the owner is gone from the group: --action release_lease", verdict, r.Verdict.Summary)}
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
			return inputErrorf("this plan has a manual action (%s): do it by hand, then plan again with --attest \"what was done\"", a.Summary)
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
			return &RefusedError{Code: CodeNotCalledFor, Detail: fmt.Sprintf("%s calls for no repair; --action %s acts on it only with --force", verdict, o.Action)}
		}
		return &RefusedError{Code: CodeNotCalledFor, Detail: fmt.Sprintf("%s calls for %s, not %s; add --force to do it anyway", verdict, joinTypes(called), o.Action)}
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

// stepArg resolves --from-step: a step name or a 1-based index.
func stepArg(p *config.Pipeline, s string) (int, error) {
	if k := p.StepIndex(s); k >= 0 {
		return k, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(p.Steps) {
		return n - 1, nil
	}
	names := make([]string, len(p.Steps))
	for i, st := range p.Steps {
		names[i] = fmt.Sprintf("%d %s", i+1, st.Name)
	}
	return -1, inputErrorf("--from-step %q: pipeline %s has steps %s", s, p.Name, strings.Join(names, ", "))
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

func (pl *planner) hasLease() bool {
	return pl.p.State != nil && pl.p.State.Owner != "" && pl.p.State.LeaseUntil != ""
}

// stateGuards are the guards of every action while the plan runs: the state
// row as the earlier actions leave it, and no live lease.
func (pl *planner) stateGuards() []Guard {
	if pl.p.State == nil {
		return nil
	}
	if !pl.found {
		return []Guard{{Check: CheckStateFound, Op: "==", Value: "false"}}
	}
	g := []Guard{{Check: CheckStateFound, Op: "==", Value: "true"}}
	if pl.p.State.Version != "" && pl.version != nil {
		g = append(g, Guard{Check: CheckStateVersion, Op: "==", Value: strconv.FormatInt(*pl.version, 10)})
	}
	g = append(g, Guard{Check: CheckStateStatus, Op: "==", Value: pl.status})
	if pl.hasLease() {
		g = append(g, Guard{Check: CheckLease, Op: "inactive"})
	}
	return g
}

// idemGuards guard every idempotency record's action as the plan expects it
// (for pipelines without a state row).
func (pl *planner) idemGuard(key string) Guard {
	a, ok := pl.idem[key]
	if !ok {
		// Deleted by an earlier action of the plan (reopen: delete).
		return Guard{Check: CheckIdemAction, Key: key, Op: "absent"}
	}
	return Guard{Check: CheckIdemAction, Key: key, Op: "==", Value: a}
}

func (pl *planner) isTerminalStatus(s string) bool {
	return pl.p.State != nil && (slices.Contains(pl.p.State.Terminal, s) || slices.Contains(pl.p.State.Failed, s))
}

func (pl *planner) isFailedStatus(s string) bool {
	return pl.p.State != nil && slices.Contains(pl.p.State.Failed, s)
}

// statusBefore is the status of an operation about to run step k: the
// done_status of the step before, or the first initial status.
func (pl *planner) statusBefore(k int) (string, error) {
	// A step without a done_status of its own (seed 001's order row holds
	// PROCESSING through WMS and logistics) is before the nearest earlier
	// step that has one.
	for j := k - 1; j >= 0; j-- {
		if s := pl.p.Steps[j].DoneStatus; s != "" {
			return s, nil
		}
	}
	if len(pl.p.State.Initial) == 0 {
		return "", &RefusedError{Code: CodeNoSafePlan, Detail: "state.initial is empty: there is no status to rewind to"}
	}
	return pl.p.State.Initial[0], nil
}

// statusAfter is the status once step k is done; past the last step it is
// the first terminal status when the last step's done_status is not one.
func (pl *planner) statusAfter(k int) string {
	s := pl.p.Steps[k].DoneStatus
	if k == len(pl.p.Steps)-1 && !pl.isTerminalStatus(s) && len(pl.p.State.Terminal) > 0 {
		return pl.p.State.Terminal[0]
	}
	if s == "" {
		// No status of its own: the state row can record no more than
		// the nearest earlier step's.
		st, _ := pl.statusBefore(k)
		return st
	}
	return s
}

// reached is how many steps the current (planned) status claims done.
func (pl *planner) reached() int {
	if !pl.found || pl.p.State == nil {
		return -1
	}
	st := pl.p.State
	if slices.Contains(st.Terminal, pl.status) {
		return len(pl.p.Steps)
	}
	if slices.Contains(st.Initial, pl.status) {
		return 0
	}
	for i, s := range pl.p.Steps {
		if s.DoneStatus != "" && s.DoneStatus == pl.status {
			return i + 1
		}
	}
	return -1
}

// stateWrite adds an advance_state or rewind_state to status to.
func (pl *planner) stateWrite(typ ActionType, to, step string, extra []Guard, attested map[string]string, why string) {
	if !pl.allow(typ) {
		return
	}
	sc := &StateChange{Table: pl.p.State.Table, FromStatus: pl.status, ToStatus: to}
	guards := append(pl.stateGuards(), extra...)
	if !pl.found {
		sc.Insert = true
		sc.FromStatus = ""
		sc.MsgID = pl.msgID("")
		if k := pl.r.Kafka; k.Located == sources.LocatedStored || k.Located == sources.LocatedSearched {
			sc.Partition, sc.Offset = k.Partition, k.Offset
		}
		if pl.p.State.Version != "" {
			sc.ToVersion = i64(1)
		}
	} else if pl.p.State.Version != "" && pl.version != nil {
		sc.FromVersion = i64(*pl.version)
		sc.ToVersion = i64(*pl.version + 1)
	}
	verb := "advance"
	if typ == RewindState {
		verb = "rewind"
	}
	summary := fmt.Sprintf("%s the state %s → %s", verb, orNone(sc.FromStatus), to)
	if sc.Insert {
		summary = fmt.Sprintf("create the missing state row with status %s", to)
	}
	if why != "" {
		summary += " (" + why + ")"
	}
	pl.add(Action{Type: typ, Step: step, Summary: summary, Guards: guards, State: sc, Attested: attested})
	pl.found, pl.status, pl.version = true, to, sc.ToVersion
}

func orNone(s string) string {
	if s == "" {
		return "(no row)"
	}
	return s
}

// effectGuards pin a step's effects as the report saw them.
func (pl *planner) effectGuards(k int) []Guard {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	switch {
	case s.Kind != config.KindRemote:
		return []Guard{{Check: CheckEvidenceN, Step: s.Name, Op: "==", Value: strconv.Itoa(pl.live[s.Name])}}
	case v.Probe != nil && v.Probe.Count != nil:
		return []Guard{{Check: CheckProbeCount, Step: s.Name, Op: "==", Value: strconv.Itoa(*v.Probe.Count)}}
	case s.Intent != "":
		n := 0
		for _, in := range v.Intents {
			if in.AckedAt != nil {
				n++
			}
		}
		return []Guard{{Check: CheckIntentsAcked, Step: s.Name, Op: "==", Value: strconv.Itoa(n)}}
	}
	return nil
}

func hasEffect(status inspect.StepStatus) bool {
	return status == inspect.StepApplied || status == inspect.StepAhead || status == inspect.StepDuplicated
}

// --- rules ---------------------------------------------------------------

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

// duplicates: one reverse / compensate_remote / manual per extra effect.
func (pl *planner) duplicates() error {
	any := false
	for k, v := range pl.r.Steps {
		if v.Status != inspect.StepDuplicated || (pl.from >= 0 && pl.from != k) {
			continue
		}
		s := pl.p.Steps[k]
		extra := v.EvidenceCount - 1
		switch {
		case s.Kind == config.KindLocal && len(s.Reverse) > 0 && pl.o.Action != Manual && len(reversible(v)) < extra && s.Binlog != nil:
			// A binlog step whose extra changes another operation may own,
			// or its own transaction ties: no reversal picks one
			// (docs/where.md#binlog-evidence).
			if !pl.allow(Manual) {
				pl.note("step %s: %d extra change(s), but no reversal can pick one: %s", s.Name, extra, sharedWhy(v))
				continue
			}
			pl.manualDuplicate(k, extra)
		case s.Kind == config.KindLocal && len(s.Reverse) > 0 && pl.o.Action != Manual:
			if !pl.allow(Reverse) {
				continue
			}
			if err := pl.reverseNewest(k, extra); err != nil {
				return err
			}
		case s.Kind == config.KindRemote && s.Compensate != "" && pl.o.Action != Manual:
			if !pl.allow(CompensateRemote) {
				continue
			}
			if err := pl.compensateNewest(k, extra); err != nil {
				return err
			}
		default:
			if !pl.allow(Manual) {
				pl.note("step %s: %d extra effect(s) are not in this plan (no %s configured)", s.Name, extra, map[bool]string{true: "reverse", false: "compensate"}[s.Kind != config.KindRemote])
				continue
			}
			pl.manualDuplicate(k, extra)
		}
		any = true
	}
	if !any {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no duplicated step can be repaired with --action " + string(pl.o.Action)}
	}
	return nil
}

// reversible returns the live evidence rows a reversal may pick, oldest
// identity first: every live row, except that of a binlog step's changes
// only those no other operation may own and no transaction ties to this
// one (attribution "message": docs/where.md#binlog-evidence) — the first
// change a transaction tied is the operation's own, never its duplicate.
func reversible(v inspect.StepView) []inspect.EvidenceRow {
	return slices.DeleteFunc(liveRows(v), func(e inspect.EvidenceRow) bool {
		if !e.IsBinlogChange() {
			return false
		}
		how, _ := e.Get("attribution")
		return how != sources.AttributedMessage
	})
}

// undoable returns the live rows a manual undo attests, newest first:
// those a reversal may pick, then (a binlog step's) the changes another
// operation may own in this one's place — interchangeable: the same row,
// the same delta — never a change its transaction ties to it.
func undoable(v inspect.StepView) []inspect.EvidenceRow {
	var out, shared []inspect.EvidenceRow
	rows := liveRows(v)
	for i := len(rows) - 1; i >= 0; i-- {
		e := rows[i]
		how, _ := e.Get("attribution")
		switch {
		case !e.IsBinlogChange() || how == sources.AttributedMessage:
			out = append(out, e)
		case how == sources.AttributedShared:
			shared = append(shared, e)
		}
	}
	return append(out, shared...)
}

// sharedWhy says why no change of a binlog step may be reversed.
func sharedWhy(v inspect.StepView) string {
	var with []string
	if v.Binlog != nil {
		for _, c := range v.Binlog.Competitors {
			with = append(with, c.BizID)
		}
	}
	if len(with) == 0 {
		return "its changes are tied to it by its transaction, or operations that were not found may own them; undo the extra one by hand (--action manual --attest)"
	}
	return "other operations (" + strings.Join(with, ", ") + ") may own its changes; undo the extra one by hand (--action manual --attest)"
}

// liveRows returns a step's live evidence rows, oldest identity first.
func liveRows(v inspect.StepView) []inspect.EvidenceRow {
	var out []inspect.EvidenceRow
	for _, e := range v.Evidence {
		if !e.Reversed {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		return identityLess(inspect.IdentityString(out[i].Identity()), inspect.IdentityString(out[j].Identity()))
	})
	return out
}

// identityLess orders identities numerically when both are integers, else
// as strings whose runs of digits compare as numbers: a binlog change's
// "0-1-9#0" is older than "0-1-10#0", "bin.000002:120#0" than
// "bin.000002:1024#0" (docs/repair.md#binlog-evidence).
func identityLess(a, b string) bool {
	x, ea := strconv.ParseInt(a, 10, 64)
	y, eb := strconv.ParseInt(b, 10, 64)
	if ea == nil && eb == nil {
		return x < y
	}
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da > 0 && db > 0 {
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

// digitRun is the length of s's leading run of ASCII digits.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// ImageOf converts an evidence row to plain text (values as ValueText
// renders them).
func ImageOf(row sources.Row) Image {
	im := make(Image, len(row.Columns))
	for i, c := range row.Columns {
		im[i].Name = c
		if row.Values[i] != nil {
			s := text(ValueText(row.Values[i]))
			im[i].Value = &s
		}
	}
	return im
}

// ValueText renders a value the way plans and guards compare it: times by
// wall clock (microseconds), everything else as inspect shows identities.
func ValueText(v any) string {
	if t, ok := v.(time.Time); ok {
		return wall(t)
	}
	return inspect.IdentityString(v)
}

func (pl *planner) reverseNewest(k, n int) error {
	s := pl.p.Steps[k]
	rows := reversible(pl.r.Steps[k])
	if n <= 0 || len(rows) == 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "step " + s.Name + " has no live evidence row to reverse"}
	}
	for i := 0; i < n && i < len(rows); i++ {
		row := rows[len(rows)-1-i]
		id := inspect.IdentityString(row.Identity())
		if err := checkReverseParams(s, row.Row); err != nil {
			return err
		}
		guards := append(pl.stateGuards(),
			Guard{Check: CheckEvidenceN, Step: s.Name, Op: "==", Value: strconv.Itoa(pl.live[s.Name])},
			Guard{Check: CheckEvidenceRow, Step: s.Name, Key: id, Op: "live"})
		pl.add(Action{Type: Reverse, Step: s.Name,
			Summary: fmt.Sprintf("reverse %s row %s (the newest of %d live rows)", s.Name, id, pl.live[s.Name]),
			Guards:  guards,
			Reverse: &ReverseSpec{Identity: id, Row: ImageOf(row.Row), Statements: slices.Clone(s.Reverse)}})
		pl.live[s.Name]--
	}
	return nil
}

// checkReverseParams refuses reverse statements naming a :param the evidence
// row does not have.
func checkReverseParams(s config.Step, row sources.Row) error {
	for _, st := range s.Reverse {
		_, names, err := config.NamedParams(st)
		if err != nil {
			return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s: reverse statement %q: %v", s.Name, st, err)}
		}
		for _, n := range names {
			if n == "biz_id" {
				continue
			}
			if _, ok := row.Get(n); !ok {
				return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s: reverse statement binds :%s, but the evidence query returns no such column (it returns %s)", s.Name, n, strings.Join(row.Columns, ", "))}
			}
		}
	}
	return nil
}

// effectIntents are a remote step's intents that count as effects, oldest
// first (by sent_at, then request id).
func effectIntents(v inspect.StepView) []inspect.IntentView {
	var out []inspect.IntentView
	for _, in := range v.Intents {
		if in.Outcome.Counts() {
			out = append(out, in)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.SentAt != nil && b.SentAt != nil && !a.SentAt.Equal(*b.SentAt) {
			return a.SentAt.Before(*b.SentAt)
		}
		return a.RequestID < b.RequestID
	})
	return out
}

func probeByRequest(s config.Step) bool {
	return s.Probe != "" && strings.Contains(s.Probe, "{request_id}")
}

func (pl *planner) compensateNewest(k, n int) error {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	byRequest := strings.Contains(s.Compensate, "{request_id}")
	if byRequest {
		ints := effectIntents(v)
		if len(ints) < n+1 {
			pl.note("step %s: %d effects but only %d known calls: compensating by request id is not possible; undo them by hand", s.Name, v.EvidenceCount, len(ints))
			if !pl.allow(Manual) {
				return &RefusedError{Code: CodeNoSafePlan, Detail: "step " + s.Name + ": cannot tell which calls to compensate"}
			}
			pl.manualDuplicate(k, n)
			return nil
		}
		for i := 0; i < n; i++ {
			in := ints[len(ints)-1-i]
			guards := pl.stateGuards()
			if in.AckedAt != nil {
				guards = append(guards, Guard{Check: CheckIntentAcked, Step: s.Name, Key: in.RequestID, Op: "==", Value: "true"})
			}
			if probeByRequest(s) {
				guards = append(guards, Guard{Check: CheckProbeOutcome, Step: s.Name, Key: in.RequestID, Op: "==", Value: sources.ProbeApplied})
			}
			url := sources.RedactURL(sources.Expand(s.Compensate, map[string]string{"request_id": in.RequestID, "biz_id": pl.r.BizID}, true))
			pl.add(Action{Type: CompensateRemote, Step: s.Name,
				Summary:    fmt.Sprintf("compensate %s call %s (the newest of %d effects) at the downstream", s.Name, in.RequestID, pl.live[s.Name]),
				Guards:     guards,
				Compensate: &CompensateSpec{URL: url, RequestID: in.RequestID},
				Attested:   map[string]string{in.RequestID: inspect.AttestCompensated}})
			pl.live[s.Name]--
		}
		return nil
	}
	for i := 0; i < n; i++ {
		guards := pl.stateGuards()
		spec := &CompensateSpec{URL: sources.RedactURL(sources.Expand(s.Compensate, map[string]string{"biz_id": pl.r.BizID}, true))}
		if v.Probe != nil && v.Probe.Count != nil {
			c := pl.live[s.Name]
			spec.ProbeCount = &c
			guards = append(guards, Guard{Check: CheckProbeCount, Step: s.Name, Op: "==", Value: strconv.Itoa(c)})
		}
		pl.add(Action{Type: CompensateRemote, Step: s.Name,
			Summary:    fmt.Sprintf("compensate one %s effect of %s at the downstream (%d → %d)", s.Name, pl.r.BizID, pl.live[s.Name], pl.live[s.Name]-1),
			Guards:     guards,
			Compensate: spec})
		pl.live[s.Name]--
	}
	return nil
}

// manualDuplicate asks the operator to undo n extra effects by hand and
// attests it: the newest extra calls (compensated) or rows (reversed) stop
// counting.
func (pl *planner) manualDuplicate(k, n int) {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	guards := append(pl.stateGuards(), pl.effectGuards(k)...)
	att := map[string]string{}
	var what []string
	if s.Kind == config.KindRemote {
		if v.Probe == nil || v.Probe.Count == nil {
			ints := effectIntents(v)
			for i := 0; i < n && i < len(ints); i++ {
				id := ints[len(ints)-1-i].RequestID
				att[id] = inspect.AttestCompensated
				what = append(what, id)
			}
		} else {
			// The downstream's journal counts the effects and names none:
			// the audit attests n of them undone, and the step's count is
			// the journal's less those (docs/verdicts.md#counting-a-steps-effects).
			for i := 1; i <= n; i++ {
				att[fmt.Sprintf("%s%d", inspect.AttestUndonePrefix, i)] = inspect.AttestCompensated
			}
		}
	} else {
		rows := undoable(v)
		for i := 0; i < n && i < len(rows); i++ {
			id := inspect.IdentityString(rows[i].Identity())
			att[id] = inspect.AttestReversed
			guards = append(guards, Guard{Check: CheckEvidenceRow, Step: s.Name, Key: id, Op: "live"})
			what = append(what, "row "+id)
		}
	}
	instr := fmt.Sprintf("undo %d extra effect(s) of step %s by hand", n, s.Name)
	if len(what) > 0 {
		instr += " (" + strings.Join(what, ", ") + ")"
	} else if s.Kind == config.KindRemote {
		instr += " at the downstream (its journal is the count opctl reads)"
	}
	if len(att) == 0 {
		att = nil
	}
	pl.add(Action{Type: Manual, Step: s.Name, Summary: instr, Guards: guards,
		Manual: &ManualSpec{Instructions: instr, Attest: pl.o.Attest}, Attested: att})
	pl.live[s.Name] -= n
}

// unknown: UNKNOWN_OUTCOME.
func (pl *planner) unknown() error {
	k := -1
	for i, v := range pl.r.Steps {
		if (v.Status == inspect.StepUnknown || v.Status == inspect.StepAmbiguous) && (pl.from < 0 || pl.from == i) {
			k = i
			break
		}
	}
	if k < 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no step with an unknown outcome"}
	}
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	if v.Status == inspect.StepAmbiguous {
		if err := pl.ambiguous(k); err != nil {
			return err
		}
		return pl.afterAttest(k, map[string]string{inspect.AttestAll: pl.o.Outcome})
	}
	if pl.o.Action != Manual {
		if s.Probe != "" {
			return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s: the probe was inconclusive (%s); retry once the downstream answers, or ask its team and attest the answer: --action manual --attest \"...\" --outcome applied|absent", s.Name, probeDetail(v))}
		}
		return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s: a call was sent and nothing says whether it took effect, and no probe is configured: ask the downstream team, then plan with --action manual --attest \"what they said\" --outcome applied|absent", s.Name)}
	}
	if pl.o.Outcome == "" {
		return inputErrorf("--action manual on UNKNOWN_OUTCOME needs --outcome applied|absent: what the downstream says about step %s", s.Name)
	}
	att := map[string]string{}
	guards := pl.stateGuards()
	for _, in := range v.Intents {
		if in.Outcome == inspect.IntentUnknown {
			att[in.RequestID] = pl.o.Outcome
			guards = append(guards, Guard{Check: CheckIntentAcked, Step: s.Name, Key: in.RequestID, Op: "==", Value: "false"})
		}
	}
	if len(att) == 0 {
		att[inspect.AttestAll] = pl.o.Outcome
	}
	instr := fmt.Sprintf("ask the downstream whether step %s took effect for %s", s.Name, pl.r.BizID)
	pl.add(Action{Type: Manual, Step: s.Name,
		Summary:  fmt.Sprintf("attest that the unknown %s call(s) %s", s.Name, map[string]string{inspect.AttestApplied: "took effect", inspect.AttestAbsent: "never took effect"}[pl.o.Outcome]),
		Guards:   guards,
		Manual:   &ManualSpec{Instructions: instr, Attest: pl.o.Attest},
		Attested: att})
	return pl.afterAttest(k, att)
}

// ambiguous plans the manual action that settles a binlog step whose count
// depends on which changes other operations own
// (docs/where.md#binlog-evidence): the operator finds out, undoes any
// extra change by hand, and attests the step applied (exactly once now) or
// absent (none of the changes is this operation's). No reversal is
// planned: any of the changes may be another operation's.
func (pl *planner) ambiguous(k int) error {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	b := v.Binlog
	var shared []string
	for _, sc := range b.Shared {
		shared = append(shared, sc.ID)
	}
	what := fmt.Sprintf("%d to %d of the changes of %s %s by %s are %s's; %s", b.CountMin, b.CountMax, s.Binlog.Table, b.Key, b.Delta, pl.r.BizID, sharedWhy(v))
	if pl.o.Action != Manual {
		return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s: %s; then plan with --action manual --attest \"how you know\" --outcome applied|absent", s.Name, what)}
	}
	if pl.o.Outcome == "" {
		return inputErrorf("--action manual on an ambiguous step needs --outcome applied|absent: whether step %s of %s has exactly one effect now (applied) or none (absent)", s.Name, pl.r.BizID)
	}
	instr := fmt.Sprintf("find out which of the changes %s of %s %s are %s's and undo any extra one by hand", strings.Join(shared, ", "), s.Binlog.Table, b.Key, pl.r.BizID)
	pl.add(Action{Type: Manual, Step: s.Name,
		Summary:  fmt.Sprintf("attest that step %s of %s is %s", s.Name, pl.r.BizID, map[string]string{inspect.AttestApplied: "applied exactly once", inspect.AttestAbsent: "absent"}[pl.o.Outcome]),
		Guards:   append(pl.stateGuards(), pl.effectGuards(k)...),
		Manual:   &ManualSpec{Instructions: instr, Attest: pl.o.Attest},
		Attested: map[string]string{inspect.AttestAll: pl.o.Outcome}})
	return nil
}

// afterAttest plans what follows the outcome of step k attested as att:
// the state moved past it (applied) or back before it (absent), and the
// message republished from where the consumer must resume.
func (pl *planner) afterAttest(k int, att map[string]string) error {
	s := pl.p.Steps[k]
	if pl.p.State == nil || !pl.found {
		if pl.o.Outcome == inspect.AttestAbsent {
			return pl.maybeRepublish(k, "the call never took effect", true)
		}
		return nil
	}
	reached := pl.reached()
	if reached < 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("state %s claims no step (a failed status?): no state change is safe", pl.status)}
	}
	if pl.o.Outcome == inspect.AttestApplied {
		if reached <= k {
			for j := reached; j < k; j++ {
				if !hasEffect(pl.r.Steps[j].Status) {
					return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s before %s has no effect: advancing past it would lose it", pl.p.Steps[j].Name, s.Name)}
				}
			}
			var extra []Guard
			for j := reached; j < k; j++ {
				extra = append(extra, pl.effectGuards(j)...)
			}
			pl.stateWrite(AdvanceState, pl.statusAfter(k), s.Name, extra, att, "past "+s.Name+", attested applied")
		}
		if k+1 < len(pl.p.Steps) && !pl.isTerminalStatus(pl.status) {
			return pl.maybeRepublish(k+1, "", false)
		}
		return nil
	}
	if reached > k {
		to, err := pl.statusBefore(k)
		if err != nil {
			return err
		}
		pl.stateWrite(RewindState, to, s.Name, nil, nil, "to before "+s.Name+", attested absent")
	}
	return pl.maybeRepublish(k, "", false)
}

func probeDetail(v inspect.StepView) string {
	for _, in := range v.Intents {
		if in.Outcome == inspect.IntentUnknown && in.Probe != "" {
			return in.Probe
		}
	}
	if v.Probe != nil {
		return v.Probe.Outcome + ": " + v.Probe.Detail
	}
	return "no answer"
}

// stateBehind: advance over the contiguous steps that took effect.
func (pl *planner) stateBehind() error {
	if pl.p.State == nil {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no state table configured"}
	}
	start := 0
	if pl.found {
		start = pl.reached()
	}
	j := start
	for j < len(pl.p.Steps) && hasEffect(pl.r.Steps[j].Status) {
		j++
	}
	if j == start {
		return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("the step after state %s has no effect: nothing to advance over", orNone(pl.status))}
	}
	var extra []Guard
	att := map[string]string{}
	for i := start; i < j; i++ {
		extra = append(extra, pl.effectGuards(i)...)
	}
	last := pl.p.Steps[j-1]
	for _, in := range pl.r.Steps[j-1].Intents {
		if in.Outcome == inspect.IntentApplied && in.AckedAt == nil {
			att[in.RequestID] = inspect.AttestApplied // confirmed by the probe only
		}
	}
	if len(att) == 0 {
		att = nil
	}
	pl.stateWrite(AdvanceState, pl.statusAfter(j-1), last.Name, extra, att, "past "+last.Name+", whose effect exists")
	if j < len(pl.p.Steps) && !pl.isTerminalStatus(pl.status) {
		return pl.maybeRepublish(j, "", false)
	}
	return nil
}

// stranded: rewind to the first missing step if needed, then republish.
func (pl *planner) stranded() error {
	if !pl.found || pl.p.State == nil {
		return pl.republish(pl.forceStep(), true)
	}
	reached := pl.reached()
	from := reached
	for i := 0; i < reached && i < len(pl.r.Steps); i++ {
		if pl.r.Steps[i].Status == inspect.StepAbsent {
			from = i
			break
		}
	}
	if pl.from >= 0 {
		from = pl.from
	}
	if err := pl.moveTo(from); err != nil {
		return err
	}
	if from >= len(pl.p.Steps) {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "every step is done by the state: nothing to republish (use --from-step)"}
	}
	return pl.republish(from, false)
}

// moveTo rewinds or advances the planned state so that step from runs next.
func (pl *planner) moveTo(from int) error {
	reached := pl.reached()
	switch {
	case from < reached:
		to, err := pl.statusBefore(from)
		if err != nil {
			return err
		}
		pl.stateWrite(RewindState, to, pl.p.Steps[from].Name, nil, nil, "so that "+pl.p.Steps[from].Name+" runs again")
	case from > reached:
		var extra []Guard
		for j := reached; j < from; j++ {
			if !hasEffect(pl.r.Steps[j].Status) && !pl.forced {
				return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("--from-step %s would skip step %s, which has no effect", pl.p.Steps[from].Name, pl.p.Steps[j].Name)}
			}
			extra = append(extra, pl.effectGuards(j)...)
		}
		pl.stateWrite(AdvanceState, pl.statusAfter(from-1), pl.p.Steps[from-1].Name, extra, nil, "so that "+pl.p.Steps[from].Name+" runs next")
	}
	return nil
}

// missing: rewind to before the first missing step, then republish.
func (pl *planner) missing() error {
	reached := pl.reached()
	k := -1
	for i := 0; i < reached && i < len(pl.r.Steps); i++ {
		if pl.r.Steps[i].Status == inspect.StepAbsent {
			k = i
			break
		}
	}
	if pl.from >= 0 {
		k = pl.from
	}
	if k < 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no missing step found"}
	}
	var later []string
	for i := k + 1; i < len(pl.r.Steps); i++ {
		if hasEffect(pl.r.Steps[i].Status) {
			later = append(later, pl.p.Steps[i].Name)
		}
	}
	if len(later) > 0 {
		pl.note("steps after %s took effect (%s): a replay from %s must not redo them (an anchored consumer resumes from the state and its steps' own guards)", pl.p.Steps[k].Name, strings.Join(later, ", "), pl.p.Steps[k].Name)
	}
	to, err := pl.statusBefore(k)
	if err != nil {
		return err
	}
	pl.stateWrite(RewindState, to, pl.p.Steps[k].Name, []Guard{{Check: CheckEvidenceN, Step: pl.p.Steps[k].Name, Op: "==", Value: "0"}}, nil, "so that "+pl.p.Steps[k].Name+" runs again")
	return pl.maybeRepublish(k, "", false)
}

// wronglySkipped: flip SKIPPED → PENDING, then republish with
// opctl-force-effect.
func (pl *planner) wronglySkipped() error {
	key := pl.skippedKey()
	if key == "" {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no SKIPPED record"}
	}
	if !pl.p.HonoursOpctlHeaders {
		// The consumer's skip is its own code: a republish, even with
		// opctl-force-effect, would be skipped again (seed 003). The
		// effect is made at the downstream, or by hand; the record stays.
		return pl.skippedEffect(key)
	}
	if err := pl.flip(key); err != nil {
		return err
	}
	eff := pl.p.Entity.EffectStep
	return pl.republishMsg(-1, eff, key)
}

// skippedEffect plans the swallowed effect of a WRONGLY_SKIPPED operation
// whose consumer does not honour opctl's headers: done by hand (manual),
// the SKIPPED record left as it is (docs/repair.md#consumers-that-ignore-opctls-headers).
func (pl *planner) skippedEffect(key string) error {
	eff := pl.p.Entity.EffectStep
	k := pl.p.StepIndex(eff)
	if k < 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "entity.effect_step " + eff + " is not a step"}
	}
	why := fmt.Sprintf("pipeline %s does not declare honours_opctl_headers: its consumer's own skip rule would skip a republished record again", pl.p.Name)
	s := pl.p.Steps[k]
	if s.Redrive != "" && pl.o.Action != Manual && pl.allow(Redrive) {
		return pl.redrive(k, key, why)
	}
	if !pl.allow(Manual) {
		return &RefusedError{Code: CodeNoSafePlan, Detail: why + "; make the effect of " + eff + " by hand and plan --action manual --attest"}
	}
	pl.note("%s, so no flip and no republish: the effect of %s is made by hand; record %s stays SKIPPED, and with the effect in place the skip no longer reads wrong", why, eff, key)
	guards := append(pl.stateGuards(), pl.idemGuard(key))
	if e := pl.r.Entity; e != nil {
		guards = append(guards, Guard{Check: CheckEntityStatus, Op: "==", Value: e.Status})
	}
	// No guard on the effect itself: the operator makes it before the
	// plan is applied. The action attests it, for a downstream whose count
	// does not show an effect made by hand.
	instr := fmt.Sprintf("make the effect of %s by hand (the one record %s skipped)", eff, key)
	pl.add(Action{Type: Manual, Step: eff, Summary: instr, Guards: guards,
		Manual: &ManualSpec{Instructions: instr, Attest: pl.o.Attest}, Attested: map[string]string{inspect.AttestAll: inspect.AttestApplied}})
	return nil
}

// redrive plans the POST to step k's redrive URL that makes the effect a
// SKIPPED record (key) swallowed: guarded by the record, the entity's
// status and the step's effects as read, the probe read after it
// (docs/repair.md#redrive).
func (pl *planner) redrive(k int, key, why string) error {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	if s.Probe == "" {
		return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("step %s has a redrive URL but no probe: opctl could not tell whether a redrive whose answer was lost took effect; add a probe, or plan --action manual --attest", s.Name)}
	}
	guards := append(pl.stateGuards(), pl.idemGuard(key))
	if e := pl.r.Entity; e != nil {
		guards = append(guards, Guard{Check: CheckEntityStatus, Op: "==", Value: e.Status})
	}
	guards = append(guards, pl.effectGuards(k)...)
	spec := &RedriveSpec{URL: sources.RedactURL(sources.Expand(s.Redrive, map[string]string{"biz_id": pl.r.BizID}, true))}
	if v.Probe != nil && v.Probe.Count != nil {
		c := *v.Probe.Count
		spec.ProbeCount = &c
	}
	pl.note("%s, so no flip and no republish: the effect of %s is made at the downstream (redrive); record %s stays SKIPPED, and with the effect in place the skip no longer reads wrong", why, s.Name, key)
	pl.add(Action{Type: Redrive, Step: s.Name,
		Summary: fmt.Sprintf("redrive %s at the downstream: the effect record %s skipped", s.Name, key),
		Guards:  guards, Redrive: spec})
	pl.live[s.Name]++
	return nil
}

// restore puts back the idempotency records opctl's flip_skipped deleted
// and that are not there again: each from its audit image, guarded by its
// absence (docs/repair.md#reopening-a-skipped-record).
func (pl *planner) restore() error {
	if pl.p.Idempotency == nil || pl.in.Evidence == nil {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no idempotency table configured"}
	}
	n := 0
	for _, a := range pl.in.Evidence.DB.Audit {
		d := a.Deleted
		if d == nil || a.Outcome != sources.AuditApplied {
			continue
		}
		if _, there := pl.idem[d.Key]; there {
			continue // a record of that key exists again
		}
		row := Image{}
		for i, c := range d.Columns {
			f := Field{Name: c}
			if i < len(d.Values) {
				f.Value = d.Values[i]
			}
			row = append(row, f)
		}
		guards := append(pl.stateGuards(), Guard{Check: CheckIdemAction, Key: d.Key, Op: "absent"})
		pl.add(Action{Type: RestoreRecord, Step: stepOfEntity(pl.p),
			Summary: fmt.Sprintf("put back idempotency record %s as opctl's audit kept it", d.Key),
			Guards:  guards, Restore: &RestoreSpec{Table: pl.p.Idempotency.Table, Key: d.Key, Row: row}})
		n++
	}
	if n == 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "opctl's audit holds no deleted idempotency record of this operation that is not there again"}
	}
	return nil
}

func (pl *planner) skippedKey() string {
	key := ""
	for _, x := range pl.r.Idempotency {
		if x.Action == inspect.ActionSkipped {
			key = x.Key
		}
	}
	return key
}

func (pl *planner) flip(key string) error {
	if pl.p.Idempotency == nil {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no idempotency table configured"}
	}
	if !pl.allow(FlipSkipped) {
		return nil
	}
	guards := append(pl.stateGuards(), pl.idemGuard(key))
	if e := pl.r.Entity; e != nil && pl.p.Entity != nil {
		st := e.Status
		if !e.Found {
			st = "(not found)"
		}
		guards = append(guards, Guard{Check: CheckEntityStatus, Op: "==", Value: st})
		if k := pl.p.StepIndex(pl.p.Entity.EffectStep); k >= 0 {
			guards = append(guards, pl.effectGuards(k)...)
		}
	}
	column := ""
	if pl.in.Evidence != nil {
		column = pl.in.Evidence.DB.ActionColumn
	}
	mode, problem := config.ReopenFor(pl.p.Idempotency, column)
	if problem != "" {
		return &RefusedError{Code: CodeNoSafePlan, Detail: problem}
	}
	if mode == config.ReopenDelete {
		// The action column cannot hold PENDING (seed 003's
		// ENUM('DONE','SKIPPED')), or the config says delete: the record
		// goes, its row kept whole in the audit, and a redelivery of the
		// message is processed again (docs/repair.md#reopening-a-skipped-record).
		pl.add(Action{Type: FlipSkipped, Step: stepOfEntity(pl.p),
			Summary: fmt.Sprintf("reopen idempotency record %s: delete it (SKIPPED; its row is kept in the audit)", key),
			Guards:  guards,
			Flip:    &FlipSpec{Table: pl.p.Idempotency.Table, Key: key, From: inspect.ActionSkipped, Delete: true}})
		delete(pl.idem, key)
		return nil
	}
	pl.add(Action{Type: FlipSkipped, Step: stepOfEntity(pl.p),
		Summary: fmt.Sprintf("flip idempotency record %s SKIPPED → PENDING", key),
		Guards:  guards,
		Flip:    &FlipSpec{Table: pl.p.Idempotency.Table, Key: key, From: inspect.ActionSkipped, To: inspect.ActionPending}})
	pl.idem[key] = inspect.ActionPending
	return nil
}

func stepOfEntity(p *config.Pipeline) string {
	if p.Entity != nil {
		return p.Entity.EffectStep
	}
	return ""
}

// forceStep is the step a republish of a pipeline without a state row
// forces: --from-step, else the entity's effect step, else none.
func (pl *planner) forceStep() int {
	if pl.from >= 0 {
		return pl.from
	}
	if pl.p.Entity != nil {
		return pl.p.StepIndex(pl.p.Entity.EffectStep)
	}
	return -1
}

// maybeRepublish adds the republish that follows a state change, unless
// Kafka will redeliver the message anyway.
func (pl *planner) maybeRepublish(from int, why string, force bool) error {
	if !pl.allow(Republish) {
		return nil
	}
	if pl.r.Kafka.Redelivery == inspect.RedeliveryYes {
		pl.note("no republish: Kafka will redeliver the message (committed offset ≤ its offset); the consumer resumes from the repaired state. To send a copy anyway: --action republish --force")
		return nil
	}
	_ = why
	return pl.republish(from, force)
}

// republish adds a republish resuming at step from (opctl-from-step), or
// with force, forcing its effect (opctl-force-effect).
func (pl *planner) republish(from int, force bool) error {
	if force {
		name := ""
		if from >= 0 {
			name = pl.p.Steps[from].Name
		}
		return pl.republishMsg(-1, name, "")
	}
	return pl.republishMsg(from, "", "")
}

// msgID is the message id of the operation's message: the state row's, the
// given idempotency key, else the record opctl locates.
func (pl *planner) msgID(key string) string {
	if key != "" {
		return key
	}
	if pl.r.State.MsgID != "" {
		return pl.r.State.MsgID
	}
	rows := make([]sources.IdempotencyRow, len(pl.r.Idempotency))
	for i, x := range pl.r.Idempotency {
		rows[i] = sources.IdempotencyRow{Key: x.Key, Action: x.Action}
	}
	if rec := sources.MessageRecord(rows); rec != nil {
		return rec.Key
	}
	if m := pl.message(); m != nil {
		return m.Headers[HeaderMsgID]
	}
	return ""
}

func (pl *planner) message() *sources.Message {
	if pl.in.Evidence == nil {
		return nil
	}
	return pl.in.Evidence.Kafka.Message
}

func (pl *planner) republishMsg(from int, forceEffect, key string) error {
	if !pl.allow(Republish) {
		return nil
	}
	if redo := pl.redoneBy(); len(redo) > 0 {
		return pl.byHand(from, forceEffect, redo)
	}
	p := pl.p
	msgID := pl.msgID(key)
	spec := &PublishSpec{Topic: p.EffectiveRedriveTopic(), MsgID: msgID, Headers: map[string]string{}}
	m := pl.message()
	if m != nil && msgID != "" && m.Headers[HeaderMsgID] != "" && m.Headers[HeaderMsgID] != msgID {
		m = nil // the record read is another message of the operation
	}
	if m != nil {
		spec.Copy = true
		spec.Key, spec.Value = slices.Clone(m.Key), slices.Clone(m.Value)
		for k, v := range m.Headers {
			if !strings.HasPrefix(k, "opctl-") {
				spec.Headers[k] = v
			}
		}
		spec.Source = &Position{Topic: p.Topic, Partition: m.Partition, Offset: m.Offset}
	} else {
		spec.Key = []byte(sources.Expand(p.MessageKey, map[string]string{"biz_id": pl.r.BizID, "msg_id": msgID}, false))
		spec.Value, _ = json.Marshal(struct {
			BizID  string `json:"biz_id"`
			MsgID  string `json:"msg_id"`
			Replay bool   `json:"replay"`
		}{pl.r.BizID, msgID, true})
		pl.note("the original record could not be read (%s): the republish is a replay record {biz_id, msg_id, replay: true}", orDash(pl.r.Kafka.Detail))
	}
	if msgID != "" {
		spec.Headers[HeaderMsgID] = msgID
	}
	if forceEffect != "" {
		spec.ForceEffect = forceEffect
		spec.Headers[HeaderForceEffect] = forceEffect
	} else if from >= 0 {
		spec.FromStep = p.Steps[from].Name
		spec.Headers[HeaderFromStep] = spec.FromStep
	}
	switch part := p.Partitioner; part {
	case config.PartitionerStored:
		if spec.Topic != p.Topic || pl.r.Kafka.Partition == nil {
			return &RefusedError{Code: CodeNoSafePlan, Detail: "partitioner stored: the partition of the republished record is not known (no stored partition, or redrive_topic differs from topic)"}
		}
		spec.Partition = *pl.r.Kafka.Partition
		spec.PartitionRule = "the stored partition"
	default:
		if part == "" {
			part = config.PartitionerMurmur2
		}
		if pl.in.RedrivePartitions <= 0 {
			return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("the partition count of topic %s is unknown (Kafka unreachable?): cannot place the republished record", spec.Topic)}
		}
		n, err := sources.PartitionFor(part, spec.Key, pl.in.RedrivePartitions)
		if err != nil {
			return &RefusedError{Code: CodeNoSafePlan, Detail: err.Error()}
		}
		spec.Partition = n
		spec.PartitionRule = fmt.Sprintf("%s of the key over %d partitions", part, pl.in.RedrivePartitions)
	}
	guards := pl.stateGuards()
	if !pl.found || pl.p.State == nil {
		if key != "" {
			guards = append(guards, pl.idemGuard(key))
		} else if msgID != "" {
			if _, ok := pl.idem[msgID]; ok {
				guards = append(guards, pl.idemGuard(msgID))
			}
		}
	}
	what := "copy of the original record"
	if !spec.Copy {
		what = "replay record"
	}
	step := spec.FromStep
	summary := fmt.Sprintf("republish a %s to %s partition %d", what, spec.Topic, spec.Partition)
	if forceEffect != "" {
		step = forceEffect
		summary += ", forcing the effect of " + forceEffect
	} else if step != "" {
		summary += ", resuming at " + step
	}
	pl.add(Action{Type: Republish, Step: step, Summary: summary, Guards: guards, Publish: spec})
	return nil
}

// redoneBy lists what a republish would make the consumer do again
// (inspect.Redone) when its consumer does not honour opctl's replay
// headers: it reads the record as a plain redelivery and resumes where its
// own state says (the first step the planned state row does not claim), or
// without a state row from the first step (docs/repair.md#consumers-that-ignore-opctls-headers).
func (pl *planner) redoneBy() []string {
	if pl.p.HonoursOpctlHeaders {
		return nil
	}
	start := max(pl.reached(), 0)
	return inspect.Redone(pl.p, pl.r.Steps, func(i int) bool { return i >= start })
}

// byHand replaces a republish that would redo effects (redo) with a manual
// action: the operator finishes the operation by hand from step from (or
// makes forceEffect's effect) and attests it.
func (pl *planner) byHand(from int, forceEffect string, redo []string) error {
	name, k := forceEffect, -1
	if name == "" && from >= 0 {
		name, k = pl.p.Steps[from].Name, from
	} else if name != "" {
		k = pl.p.StepIndex(name)
	}
	why := fmt.Sprintf("pipeline %s does not declare honours_opctl_headers: its consumer would read a republished record as a plain redelivery and %s", pl.p.Name, strings.Join(redo, ", "))
	if !pl.allow(Manual) {
		return &RefusedError{Code: CodeNoSafePlan, Detail: why + "; no republish is planned: finish the operation by hand and plan --action manual --attest"}
	}
	var missing []string
	for i := max(k, 0); i < len(pl.r.Steps); i++ {
		if st := pl.r.Steps[i].Status; st == inspect.StepAbsent || (i == k && forceEffect != "") {
			missing = append(missing, pl.p.Steps[i].Name)
		}
	}
	instr := "finish the operation by hand"
	if len(missing) > 0 {
		instr = "make the effect of " + strings.Join(missing, ", ") + " by hand"
	}
	pl.note("%s; so the plan asks for it by hand instead of a republish", why)
	guards := pl.stateGuards()
	if k >= 0 {
		guards = append(guards, pl.effectGuards(k)...)
	}
	pl.add(Action{Type: Manual, Step: name, Summary: instr, Guards: guards,
		Manual: &ManualSpec{Instructions: instr, Attest: pl.o.Attest}})
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// releaseLease: clear the lease of an owner that left the group.
func (pl *planner) releaseLease() error {
	st := pl.r.State
	if pl.p.State == nil || pl.p.State.Owner == "" || !st.Found {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "release_lease: no state row with an owner column"}
	}
	if st.Owner == "" {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "release_lease: no owner holds the lease"}
	}
	ev := pl.in.Evidence
	if ev == nil || ev.Sources["kafka"] != sources.StatusOK {
		return &RefusedError{Code: CodeInFlight, Detail: fmt.Sprintf("release_lease: the consumer group %s could not be read, so opctl cannot tell whether owner %s is alive", pl.p.Group, st.Owner)}
	}
	if IsMember(ev.Kafka.Group, st.Owner) {
		return &RefusedError{Code: CodeInFlight, Detail: fmt.Sprintf("owner %s is a live member of group %s: the lease stays (--force never bypasses a live lease)", st.Owner, pl.p.Group)}
	}
	guards := []Guard{{Check: CheckStateFound, Op: "==", Value: "true"}}
	sc := &StateChange{Table: pl.p.State.Table, FromStatus: st.Status, ToStatus: st.Status, ReleaseOwner: st.Owner}
	if pl.p.State.Version != "" && pl.version != nil {
		guards = append(guards, Guard{Check: CheckStateVersion, Op: "==", Value: strconv.FormatInt(*pl.version, 10)})
		sc.FromVersion, sc.ToVersion = i64(*pl.version), i64(*pl.version+1)
	}
	guards = append(guards,
		Guard{Check: CheckStateOwner, Op: "==", Value: st.Owner},
		Guard{Check: CheckOwnerMember, Key: st.Owner, Op: "not_member", Value: pl.p.Group})
	pl.add(Action{Type: ReleaseLease, Summary: fmt.Sprintf("release the lease of %s (no longer a member of group %s)", st.Owner, pl.p.Group), Guards: guards, State: sc})
	pl.version = sc.ToVersion
	pl.note("after the release, plan again: the operation's own verdict shows once the lease is gone")
	return nil
}

// IsMember reports whether owner names a member of the group: its client id
// or member id.
func IsMember(g sources.GroupView, owner string) bool {
	for _, m := range g.Members {
		if owner != "" && (m.ClientID == owner || m.MemberID == owner) {
			return true
		}
	}
	return false
}

// forcedAction builds --action A --force on a verdict that does not call
// for A.
func (pl *planner) forcedAction() error {
	p := pl.p
	stepNeeded := func(kinds ...string) (int, error) {
		if pl.from < 0 {
			return -1, inputErrorf("--action %s --force needs --from-step: the step to act on", pl.o.Action)
		}
		if len(kinds) > 0 && !slices.Contains(kinds, p.Steps[pl.from].Kind) {
			return -1, inputErrorf("--action %s: step %s is %s", pl.o.Action, p.Steps[pl.from].Name, p.Steps[pl.from].Kind)
		}
		return pl.from, nil
	}
	switch pl.o.Action {
	case Republish:
		if p.State == nil || !pl.found {
			return pl.republish(pl.forceStep(), true)
		}
		from := pl.from
		if from < 0 {
			from = pl.reached()
		}
		if from < 0 || from >= len(p.Steps) {
			return inputErrorf("--action republish: the state %s claims every step: pass --from-step", pl.status)
		}
		return pl.republish(from, false)
	case RewindState, AdvanceState:
		if p.State == nil || !pl.found {
			return &RefusedError{Code: CodeNoSafePlan, Detail: "no state row to " + strings.TrimSuffix(string(pl.o.Action), "_state")}
		}
		k, err := stepNeeded()
		if err != nil {
			return err
		}
		r := pl.reached()
		if (pl.o.Action == RewindState) != (k < r) || k == r {
			return inputErrorf("--action %s --from-step %s: the state %s already has step %s run next or %s", pl.o.Action, p.Steps[k].Name, pl.status, p.Steps[k].Name, map[bool]string{true: "later", false: "earlier"}[pl.o.Action == RewindState])
		}
		return pl.moveTo(k)
	case Reverse:
		k, err := stepNeeded(config.KindLocal)
		if err != nil {
			return err
		}
		if len(p.Steps[k].Reverse) == 0 {
			return inputErrorf("--action reverse: step %s has no reverse statements in the config", p.Steps[k].Name)
		}
		return pl.reverseNewest(k, 1)
	case CompensateRemote:
		k, err := stepNeeded(config.KindRemote)
		if err != nil {
			return err
		}
		if p.Steps[k].Compensate == "" {
			return inputErrorf("--action compensate_remote: step %s has no compensate URL in the config", p.Steps[k].Name)
		}
		return pl.compensateNewest(k, 1)
	case FlipSkipped:
		key := pl.skippedKey()
		if key == "" {
			return &RefusedError{Code: CodeNoSafePlan, Detail: "no SKIPPED record to flip"}
		}
		return pl.flip(key)
	case RestoreRecord:
		return pl.restore()
	case Manual:
		step := ""
		var att map[string]string
		guards := pl.stateGuards()
		if pl.from >= 0 {
			step = p.Steps[pl.from].Name
			if pl.o.Outcome != "" {
				att = map[string]string{}
				for _, in := range pl.r.Steps[pl.from].Intents {
					if in.Outcome == inspect.IntentUnknown {
						att[in.RequestID] = pl.o.Outcome
					}
				}
				if len(att) == 0 {
					att[inspect.AttestAll] = pl.o.Outcome
				}
			}
		}
		pl.add(Action{Type: Manual, Step: step, Summary: "record what was done by hand", Guards: guards,
			Manual: &ManualSpec{Instructions: "record what was done by hand", Attest: pl.o.Attest}, Attested: att})
		return nil
	}
	return inputErrorf("--action %s cannot be forced on %s", pl.o.Action, pl.r.Verdict.Code)
}

// joinTypes lists action types for a message.
func joinTypes(ts []ActionType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
