package plans

// The STRANDED rule: rewind (or advance) the state so that the first
// step without an effect runs next, then republish (docs/repair.md "Which
// plan each verdict gets").

import (
	"github.com/opctl-dev/opctl/inspect"
)

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
		return refusedf(CodeNoSafePlan, "every step is done by the state: nothing to republish (use {from-step})")
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
				return refusedf(CodeNoSafePlan, "{from-step %s} would skip step %s, which has no effect", pl.p.Steps[from].Name, pl.p.Steps[j].Name)
			}
			extra = append(extra, pl.effectGuards(j)...)
		}
		pl.stateWrite(AdvanceState, pl.statusAfter(from-1), pl.p.Steps[from-1].Name, extra, nil, "so that "+pl.p.Steps[from].Name+" runs next")
	}
	return nil
}
