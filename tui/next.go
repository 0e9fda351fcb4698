package tui

import (
	"context"

	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair/plans"
)

// where triages one id with the read side and gives each operation the
// NEXT the planner makes of it (plans.Next), in the console's words: its
// keys where it has one, the command to run elsewhere where it has none.
func where(ctx context.Context, tr Triager, keys KeyMap, bizID, pipeline string) (*triage.Result, error) {
	t, err := tr.Triage(ctx, bizID, pipeline)
	if err != nil {
		return nil, err
	}
	for i := range t.Ops {
		op := &t.Ops[i]
		steps := plans.Next(plans.Input{Config: t.Config, Report: op.Report, Evidence: &op.Evidence, RedrivePartitions: op.RedrivePartitions})
		op.Report.Verdict.Next = hints(steps, keys)
	}
	return t, nil
}

// hints are the planner's steps as the console says them: a plan is its
// plan key (and the attest key when it needs an attestation), a dry run
// its dry-run key, a triage again its refresh key, an id to look for in
// every pipeline its go-to key; a probe is the GET to make; a stopped plan
// is the command that finishes it. The verdict's explanation is above
// NEXT already, and a plan per downstream answer is one key: the console
// asks for the answer.
func hints(steps []plans.Step, k KeyMap) []string {
	out := []string{}
	planned := false
	for _, s := range steps {
		var h string
		switch s.Kind {
		case plans.StepPlan:
			if planned {
				continue
			}
			planned = true
			h = k.Plan.Help().Key + "  plan the repair (the diff to review)"
			switch {
			case s.Shared:
				h += "; first find out which of the shared changes of step " + s.FromStep + " are this operation's, then " + k.Attest.Help().Key + " to attest how you know"
			case s.Outcome != "":
				h += " once the downstream says whether the call took effect: " + k.Attest.Help().Key + " to attest its answer"
			case s.Undo != "":
				h += "; first " + s.Undo + ", then " + k.Attest.Help().Key + " to attest what was done"
			}
		case plans.StepDryRun:
			h = k.DryRun.Help().Key + "  dry-run it; " + k.Apply.Help().Key + " to apply"
		case plans.StepWhere:
			h = k.Refresh.Help().Key + "  triage again" + againHint(s, k)
		case plans.StepProbe:
			h = "probe the downstream: GET " + s.URL
			if s.Redacted {
				h += " (the configured credentials removed)"
			}
		case plans.StepFinish:
			h = "finish the stopped plan: opctl repair apply --dry-run -- " + s.PlanID + ", then without --dry-run"
		case plans.StepExplain:
			continue
		}
		out = append(out, h)
	}
	return out
}

// againHint says when a triage again is worth it, or why there is no plan.
func againHint(s plans.Step, k KeyMap) string {
	if s.Refused != nil {
		why := "no plan: " + plans.Why(s.Refused, k.words())
		if s.IfOutcome != "" {
			why = "if the downstream says " + s.IfOutcome + ": " + why
		}
		return " (" + why + ")"
	}
	switch s.Again {
	case plans.AgainAnywhere:
		return " in every pipeline: " + k.GoTo.Help().Key + " and the id"
	case plans.AgainLease:
		return " after lease_until: repair is refused while the lease is live"
	case plans.AgainRead:
		return " once every query reads: fix the failed query PARTIAL names"
	case plans.AgainConsumer:
		return " once the consumer has caught up"
	}
	return ""
}

// words spell the planner's options as the console offers them
// (plans.Phrase): the attestation and the downstream's answer are entered
// with its attest key, the reason when it applies; an action, a step to
// start from and forcing are the command line's (opctl repair plan), which
// the console does not set.
func (k KeyMap) words() plans.Words {
	attest := k.Attest.Help().Key
	return func(o plans.Option, v string) string {
		switch o {
		case plans.OptAttest:
			return "an attestation (" + attest + ")"
		case plans.OptOutcome:
			if v != "" {
				return "the downstream's answer, " + v + " (" + attest + ")"
			}
			return "the downstream's answer (" + attest + ")"
		case plans.OptReason:
			return "a reason (asked at apply)"
		case plans.OptAction:
			if v != "" {
				return "the action " + v
			}
			return "an action"
		case plans.OptFromStep:
			if v != "" {
				return "starting from step " + v
			}
			return "the step to start from"
		}
		return "opctl repair plan " + plans.Flags(o, v) + " (not in the console)"
	}
}
