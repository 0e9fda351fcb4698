package plans

// The checks of the operator's options (Options) before anything is planned.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
)

// checkOptions refuses options no plan can be made with.
func checkOptions(o Options) error {
	switch {
	case strings.TrimSpace(o.Reason) == "":
		return inputErrorf(OptReason, "{reason} is required: say why this repair is made (an incident, a ticket)")
	case len(o.Reason) > MaxReason:
		return inputErrorf(OptReason, "{reason} is %d bytes; at most %d", len(o.Reason), MaxReason)
	case len(o.Operator) > MaxOperator:
		return inputErrorf(OptOperator, "{operator} is %d bytes; at most %d", len(o.Operator), MaxOperator)
	case o.Action != "" && !IsActionType(string(o.Action)):
		return inputErrorf(OptAction, "{action %q}: want one of %s", o.Action, strings.Join(ActionTypeNames(), ", "))
	case o.Outcome != "" && o.Outcome != inspect.AttestApplied && o.Outcome != inspect.AttestAbsent:
		return inputErrorf(OptOutcome, "{outcome %q}: want applied or absent", o.Outcome)
	case len(o.Runbook) > MaxRunLabel || len(o.RunID) > MaxRunLabel:
		return inputErrorf("", "runbook name and run id are at most %d bytes", MaxRunLabel)
	case o.RunID != "" && o.Runbook == "":
		return inputErrorf("", "a run id without its runbook: a plan made by a runbook run names both")
	case o.Force && o.Action == "":
		return inputErrorf(OptForce, "{force} needs {action}: it lets that action act on a verdict that does not call for it")
	}
	return CheckIncident(o.Incident)
}

// CheckIncident refuses an incident name a plan cannot carry: over
// MaxIncident bytes, or one a terminal could not show as it is (Shown).
func CheckIncident(s string) error {
	switch {
	case len(s) > MaxIncident:
		return inputErrorf(OptIncident, "{incident} is %d bytes; at most %d", len(s), MaxIncident)
	case Shown(s) != s:
		return inputErrorf(OptIncident, "{incident %s}: an incident name holds printable characters only", Shown(s))
	}
	return nil
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
	return -1, inputErrorf(OptFromStep, "{from-step %q}: pipeline %s has steps %s", s, p.Name, strings.Join(names, ", "))
}
