package tui

import (
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
)

// TestNextInTheConsolesWords: the planner's steps and refusals reach the
// console in its words: its keys where it has one, never opctl's flags
// for what the console itself asks (the attestation, the downstream's
// answer, the reason).
func TestNextInTheConsolesWords(t *testing.T) {
	k := DefaultKeyMap()
	refused := &plans.RefusedError{Code: plans.CodeNoSafePlan}
	m := plans.Message{Format: "step %s: ask the downstream team, then plan with {action manual} {attest \"what they said\"} {outcome applied|absent}", Args: []any{"notify"}}
	refused.Detail, refused.Text = m.Phrase(plans.Flags), m
	got := hints([]plans.Step{
		{Kind: plans.StepPlan, BizID: "PAY-1", Pipeline: "settlement", Attest: true, Undo: "undo 1 extra effect(s) of step notify by hand"},
		{Kind: plans.StepDryRun},
		{Kind: plans.StepWhere, BizID: "PAY-1", Pipeline: "settlement", Refused: refused, IfOutcome: inspect.AttestAbsent},
		{Kind: plans.StepWhere, BizID: "PAY-1", Pipeline: "settlement", Again: plans.AgainLease},
		{Kind: plans.StepExplain, Verdict: inspect.DuplicateEffect},
	}, k)
	want := []string{
		"p  plan the repair (the diff to review); first undo 1 extra effect(s) of step notify by hand, then t to attest what was done",
		"d  dry-run it; a to apply",
		`r  triage again (if the downstream says absent: no plan: step notify: ask the downstream team, then plan with the action manual an attestation (t) the downstream's answer, applied|absent (t))`,
		"r  triage again after lease_until: repair is refused while the lease is live",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hints:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if strings.Contains(strings.Join(got, "\n"), "--") {
		t.Errorf("a flag in the console's words: %q", got)
	}
	if s := plans.Phrase(refused, k.words()); strings.Contains(s, "--attest") || !strings.HasPrefix(s, "refused: step notify") {
		t.Errorf("refusal in the console's words: %q", s)
	}
}
