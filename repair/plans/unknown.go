package plans

// The UNKNOWN_OUTCOME rule: refused until the operator attests the
// downstream's outcome, then the state change and republish that follow
// (docs/repair.md "Which plan each verdict gets").

import (
	"fmt"
	"strings"

	"github.com/opctl-dev/opctl/inspect"
)

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
			return refusedf(CodeNoSafePlan, "step %s: the probe was inconclusive (%s); retry once the downstream answers, or ask its team and attest the answer: {action manual} {attest \"...\"} {outcome applied|absent}", s.Name, probeDetail(v))
		}
		return refusedf(CodeNoSafePlan, "step %s: a call was sent and nothing says whether it took effect, and no probe is configured: ask the downstream team, then plan with {action manual} {attest \"what they said\"} {outcome applied|absent}", s.Name)
	}
	if pl.o.Outcome == "" {
		return inputErrorf(OptOutcome, "{action manual} on UNKNOWN_OUTCOME needs {outcome applied|absent}: what the downstream says about step %s", s.Name)
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
		return refusedf(CodeNoSafePlan, "step %s: %s; then plan with {action manual} {attest \"how you know\"} {outcome applied|absent}", s.Name, what)
	}
	if pl.o.Outcome == "" {
		return inputErrorf(OptOutcome, "{action manual} on an ambiguous step needs {outcome applied|absent}: whether step %s of %s has exactly one effect now (applied) or none (absent)", s.Name, pl.r.BizID)
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
