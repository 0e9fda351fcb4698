package plans

// The MISSING_EFFECT rule: rewind the state to before the first claimed
// step with no effect, then republish from it (docs/repair.md "Which plan
// each verdict gets").

import (
	"strings"

	"github.com/opctl-dev/opctl/inspect"
)

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
