package plans_test

import (
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// TestNextSteps: the planner says what to do next for every verdict but
// the ok ones, as data: an id no pipeline knows is looked for in every
// pipeline, a stopped plan is finished by its id, a verdict that calls
// for a plan the planner cannot make (here: no configuration) is a triage
// again that carries the refusal, and the watch verdicts say when to look
// again. cmd's TestNextLines and TestNextLinesPasteAsPrinted hold the
// lines; TestNextPlansAsPrinted holds every plan step against Build.
func TestNextSteps(t *testing.T) {
	for _, code := range inspect.Precedence() {
		r := inspect.Report{BizID: "PAY-1", Pipeline: "settlement", Verdict: inspect.Verdict{Code: code},
			Repair: &inspect.RepairView{PlanID: "abc"}}
		steps := plans.Next(plans.Input{Report: r})
		if code == inspect.Complete || code == inspect.SkippedOK {
			if len(steps) != 0 {
				t.Errorf("%s: steps %+v, want none", code, steps)
			}
			continue
		}
		if len(steps) == 0 {
			t.Errorf("%s: no step", code)
			continue
		}
		first := steps[0]
		switch code {
		case inspect.NotFound:
			if first.Kind != plans.StepWhere || first.Pipeline != "" || first.Again != plans.AgainAnywhere {
				t.Errorf("%s: %+v, want where in every pipeline", code, first)
			}
		case inspect.RepairIncomplete:
			if first.Kind != plans.StepFinish || first.PlanID != "abc" {
				t.Errorf("%s: %+v, want the plan abc finished", code, first)
			}
		case inspect.InFlight:
			if first.Kind != plans.StepWhere || first.Again != plans.AgainLease {
				t.Errorf("%s: %+v, want where after the lease", code, first)
			}
		case inspect.DuplicateEffect, inspect.WronglySkipped, inspect.MissingEffect, inspect.StateBehind, inspect.Stranded:
			if first.Kind != plans.StepWhere || first.Refused == nil || first.Again != "" {
				t.Errorf("%s: %+v, want where with the planner's refusal", code, first)
			}
		}
		if last := steps[len(steps)-1]; code != inspect.NotFound && (last.Kind != plans.StepExplain || last.Verdict != code) {
			t.Errorf("%s: last step %+v, want explain %s", code, last, code)
		}
	}
}
