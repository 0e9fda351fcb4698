package inspect

import "github.com/opctl-dev/opctl/sources"

// Reversed reports whether an evidence row of step no longer counts as an
// effect: opctl's audit names it reversed (an applied reverse action, or a
// manual one attesting it), or the row's own `reversed` column is true
// (docs/verdicts.md). `opctl where` and a repair's guards both decide it
// here.
func (a Attestations) Reversed(step string, row sources.Row) bool {
	if a.is(step, IdentityString(row.Identity()), AttestReversed) {
		return true
	}
	v, ok := row.Get("reversed")
	return ok && sources.Truthy(v)
}
