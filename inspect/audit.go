package inspect

import (
	"fmt"

	"github.com/opctl-dev/opctl/sources"
)

// Attestation outcomes an applied repair action can record in its
// after_image "attested" object (SPEC §7; see repair).
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

// Attestation is one attested fact and the plan that recorded it.
type Attestation struct {
	Outcome string
	PlanID  string
}

// Attestations are the facts opctl's applied repair actions attested about
// each step's effects: step → request id / evidence identity / "*" →
// attestation. The newest action wins.
type Attestations map[string]map[string]Attestation

// AuditAttestations collects the attestations of the applied manual,
// advance_state and compensate_remote actions of an operation's audit (SPEC
// §7: what opctl did must not come back as a finding). It is the hook
// Diagnose uses:
//
//   - an unknown intent attested applied counts as an effect, attested
//     absent as none (so UNKNOWN_OUTCOME repaired with `--action manual
//     --attest` does not come back);
//   - an intent attested compensated no longer counts, acked or not (a
//     duplicate the downstream reversed);
//   - an evidence row attested reversed no longer counts;
//   - "*" applies to a step without intents whose probe is inconclusive.
//
// Actions with another outcome (publishing, compensating) attest nothing.
func AuditAttestations(audit []sources.AuditAction) Attestations {
	out := Attestations{}
	for _, a := range audit {
		if a.Outcome != "applied" || a.Step == "" || len(a.Attested) == 0 {
			continue
		}
		switch a.Action {
		case "manual", "advance_state", "compensate_remote":
		default:
			continue
		}
		m := out[a.Step]
		if m == nil {
			m = map[string]Attestation{}
			out[a.Step] = m
		}
		for id, o := range a.Attested {
			m[id] = Attestation{Outcome: o, PlanID: a.PlanID}
		}
	}
	return out
}

// Of returns the attestation for id of step, if any.
func (a Attestations) Of(step, id string) (Attestation, bool) {
	x, ok := a[step][id]
	return x, ok
}

// is reports whether id of step is attested with outcome.
func (a Attestations) is(step, id, outcome string) bool {
	x, ok := a.Of(step, id)
	return ok && x.Outcome == outcome
}

// markReversed adds the evidence rows attested reversed to the reversed set
// (keyed like reversedIDs).
func (a Attestations) markReversed(reversed map[string]bool) {
	for step, m := range a {
		for id, x := range m {
			if x.Outcome == AttestReversed && id != AttestAll {
				reversed[step+"\x00"+id] = true
			}
		}
	}
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
