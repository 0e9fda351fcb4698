package inspect

import (
	"fmt"
	"strings"

	"github.com/opctl-dev/opctl/sources"
)

// Attestation outcomes an applied repair action can record in its
// after_image "attested" object (docs/verdicts.md; see package repair).
const (
	// AttestApplied: an unknown call took effect (probe confirmed, or an
	// operator attested it with `repair plan --action manual --attest`).
	AttestApplied = "applied"
	// AttestAbsent: an unknown call never took effect.
	AttestAbsent = "absent"
	// AttestCompensated: an effect was reversed at the downstream
	// (compensate_remote, or by hand): it no longer counts.
	AttestCompensated = "compensated"
	// AttestReversed: an evidence row was reversed by hand (manual): it no
	// longer counts, like a row an applied reverse action names.
	AttestReversed = "reversed"
)

// AttestAll is the key that attests a step as a whole (a step whose only
// evidence is a probe keyed by {biz_id}).
const AttestAll = "*"

// AttestUndonePrefix starts the attested keys of a step whose effects are
// counted by the downstream ({biz_id} probe with a count) and have no
// identity of their own: "undone#1" ... "undone#n" attest that n of its
// effects were undone by hand (a manual action closing a
// DUPLICATE_EFFECT), so the count stops including them
// (docs/verdicts.md#counting-a-steps-effects).
const AttestUndonePrefix = "undone#"

// Attestation is one attested fact and the plan that recorded it.
type Attestation struct {
	Outcome string
	PlanID  string
}

// Attestations are the facts opctl's applied repair actions attested about
// each step's effects: step → request id / evidence identity / "*" →
// attestation. The newest action wins.
type Attestations map[string]map[string]Attestation

// AuditAttestations collects what the applied repair actions of an
// operation's audit established (docs/verdicts.md: what opctl did must not
// come back as a finding): the rows applied reverse actions reversed, and
// the attestations of manual, advance_state and compensate_remote actions.
// It is the hook Diagnose uses:
//
//   - an evidence row reversed by an applied reverse, or attested reversed,
//     no longer counts;
//   - an unknown intent attested applied counts as an effect, attested
//     absent as none (so UNKNOWN_OUTCOME repaired with `--action manual
//     --attest` does not come back);
//   - an intent attested compensated no longer counts, acked or not (a
//     duplicate the downstream reversed);
//   - "*" applies to a step without intents whose probe is inconclusive.
//
// Actions with another outcome (publishing, compensating) attest nothing.
func AuditAttestations(audit []sources.AuditAction) Attestations {
	out := Attestations{}
	set := func(step, id, outcome, plan string) {
		m := out[step]
		if m == nil {
			m = map[string]Attestation{}
			out[step] = m
		}
		m[id] = Attestation{Outcome: outcome, PlanID: plan}
	}
	for _, a := range audit {
		if a.Outcome != sources.AuditApplied || a.Step == "" {
			continue
		}
		switch a.Action {
		case sources.AuditReverse:
			// The evidence row an applied reverse names stops counting
			// (docs/verdicts.md): two reversals of one row are impossible.
			if a.ReversedID != "" {
				set(a.Step, a.ReversedID, AttestReversed, a.PlanID)
			}
		case sources.AuditManual, sources.AuditAdvanceState, sources.AuditCompensateRemote:
			for id, o := range a.Attested {
				if strings.HasPrefix(id, AttestUndonePrefix) {
					// One per effect undone by hand, whatever plan: keyed
					// by plan so that a second plan's do not replace them.
					id += "@" + a.PlanID
				}
				set(a.Step, id, o, a.PlanID)
			}
		}
	}
	return out
}

// Of returns the attestation for id of step, if any.
func (a Attestations) Of(step, id string) (Attestation, bool) {
	x, ok := a[step][id]
	return x, ok
}

// undone is how many effects of step the audit attests were undone by
// hand without an identity (AttestUndonePrefix).
func (a Attestations) undone(step string) int {
	n := 0
	for id, x := range a[step] {
		if strings.HasPrefix(id, AttestUndonePrefix) && x.Outcome == AttestCompensated {
			n++
		}
	}
	return n
}

// is reports whether id of step is attested with outcome.
func (a Attestations) is(step, id, outcome string) bool {
	x, ok := a.Of(step, id)
	return ok && x.Outcome == outcome
}

// note is the text shown with an intent whose outcome comes from an
// attestation.
func (a Attestations) note(step, id string) string {
	x, _ := a.Of(step, id)
	return fmt.Sprintf("attested %s by opctl plan %.12s", x.Outcome, x.PlanID)
}

func joinNote(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// RepairView is opctl's newest plan of the operation when it stopped
// part-way (REPAIR_INCOMPLETE, docs/verdicts.md): an action left
// publishing or compensating, or fewer of its actions took effect than it
// has.
type RepairView struct {
	PlanID string `json:"plan_id"`
	// Actions is how many actions the plan has; Done how many took effect.
	Actions int `json:"actions"`
	Done    int `json:"done"`
	// Left are the actions the audit shows under way (publishing,
	// compensating).
	Left []RepairAction `json:"left,omitempty"`
}

// RepairAction is one audit row of a plan.
type RepairAction struct {
	Index   int    `json:"index"`
	Action  string `json:"action"`
	Outcome string `json:"outcome"`
}

// IncompleteRepair returns the operation's newest plan (the plan of the
// last audit row) when it stopped part-way, nil otherwise. A plan an
// older opctl recorded without its number of actions is judged by its
// rows under way only.
func IncompleteRepair(audit []sources.AuditAction) *RepairView {
	if len(audit) == 0 {
		return nil
	}
	last := audit[len(audit)-1].PlanID
	v := &RepairView{PlanID: last}
	for _, a := range audit {
		if a.PlanID != last {
			continue
		}
		if a.PlanActions > v.Actions {
			v.Actions = a.PlanActions
		}
		switch a.Outcome {
		case sources.AuditApplied, sources.AuditPublished:
			v.Done++
		case sources.AuditPublishing, sources.AuditCompensating, sources.AuditRedriving:
			v.Left = append(v.Left, RepairAction{Index: a.ActionIndex, Action: a.Action, Outcome: a.Outcome})
		}
	}
	if len(v.Left) == 0 && v.Done >= v.Actions {
		return nil
	}
	return v
}

// detail says how the plan stopped.
func (v *RepairView) detail() string {
	id := v.PlanID
	if len(id) > 12 {
		id = id[:12]
	}
	s := fmt.Sprintf("opctl's plan %s stopped part-way", id)
	if v.Actions > 0 {
		s += fmt.Sprintf(": %d of its %d actions took effect", v.Done, v.Actions)
	}
	for _, a := range v.Left {
		what := "the record may not have been sent"
		switch a.Outcome {
		case sources.AuditCompensating:
			what = "the compensation's outcome is not recorded"
		case sources.AuditRedriving:
			what = "the redrive's outcome is not recorded"
		}
		s += fmt.Sprintf("; action %d (%s) was left '%s': %s", a.Index, a.Action, a.Outcome, what)
	}
	return s
}
