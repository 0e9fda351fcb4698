package plans

import (
	"bytes"
	"encoding/json"
	"time"
)

// Equivalent reports whether a and b are the same repair: equal in every
// field that says what the plan does and what it was made from — pipeline,
// id of the operation, verdict, configuration fingerprint, request,
// attestation, incident, runbook run, notes, the observation (the stale
// check's fingerprint) and every action with its guards — and differing
// at most in the fields that say who made it, when and why: ID, Operator,
// Reason and CreatedAt (docs/tui.md "Repair": the console applies the plan
// it showed and dry-ran under the reason typed at apply). A nil plan is
// equivalent to none.
func Equivalent(a, b *Plan) bool {
	if a == nil || b == nil {
		return false
	}
	what := func(p *Plan) []byte {
		c := *p
		c.ID, c.Operator, c.Reason, c.CreatedAt = "", "", "", time.Time{}
		j, err := json.Marshal(&c)
		if err != nil {
			return nil
		}
		return j
	}
	ja, jb := what(a), what(b)
	return ja != nil && jb != nil && bytes.Equal(ja, jb)
}
