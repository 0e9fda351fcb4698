package plans

// The STATE_BEHIND rule: advance the state over the steps that took
// effect, then republish from the next (docs/repair.md "Which plan each
// verdict gets").

import (
	"fmt"

	"github.com/opctl-dev/opctl/inspect"
)

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
