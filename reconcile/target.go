package reconcile

import (
	"slices"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
)

// StuckTarget reports whether rep is stuck as docs/reconcile.md#targets
// defines it: its state row, as the triage read it, is neither terminal nor
// failed, was last updated before now - olderThan (now is the database
// clock), and holds no live lease, whatever Kafka says or could not say.
// IN_FLIGHT is never a stuck target. The stuck check and opctl watch
// (docs/watch.md) share this one definition.
func StuckTarget(p *config.Pipeline, rep inspect.Report, now time.Time, olderThan time.Duration) bool {
	st := rep.State
	if p.State == nil || !st.Found || st.LeaseActive || rep.Verdict.Code == inspect.InFlight {
		return false
	}
	if slices.Contains(p.State.Terminal, st.Status) || slices.Contains(p.State.Failed, st.Status) {
		return false
	}
	if p.State.UpdatedAt != "" && (st.UpdatedAt == nil || !st.UpdatedAt.Before(now.Add(-olderThan))) {
		return false
	}
	return true
}
