package plans

// The state as the plan's earlier actions leave it: the guards of each
// state write are written for it (docs/repair.md "Guards are written for
// the state the earlier actions leave").

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func (pl *planner) hasLease() bool {
	return pl.p.State != nil && pl.p.State.Owner != "" && pl.p.State.LeaseUntil != ""
}

// stateGuards are the guards of every action while the plan runs: the state
// row as the earlier actions leave it, and no live lease.
func (pl *planner) stateGuards() []Guard {
	if pl.p.State == nil {
		return nil
	}
	if !pl.found {
		return []Guard{{Check: CheckStateFound, Op: "==", Value: "false"}}
	}
	g := []Guard{{Check: CheckStateFound, Op: "==", Value: "true"}}
	if pl.p.State.Version != "" && pl.version != nil {
		g = append(g, Guard{Check: CheckStateVersion, Op: "==", Value: strconv.FormatInt(*pl.version, 10)})
	}
	g = append(g, Guard{Check: CheckStateStatus, Op: "==", Value: pl.status})
	if pl.hasLease() {
		g = append(g, Guard{Check: CheckLease, Op: "inactive"})
	}
	return g
}

// idemGuards guard every idempotency record's action as the plan expects it
// (for pipelines without a state row).
func (pl *planner) idemGuard(key string) Guard {
	a, ok := pl.idem[key]
	if !ok {
		// Deleted by an earlier action of the plan (reopen: delete).
		return Guard{Check: CheckIdemAction, Key: key, Op: "absent"}
	}
	return Guard{Check: CheckIdemAction, Key: key, Op: "==", Value: a}
}

func (pl *planner) isTerminalStatus(s string) bool {
	return pl.p.State != nil && (slices.Contains(pl.p.State.Terminal, s) || slices.Contains(pl.p.State.Failed, s))
}

func (pl *planner) isFailedStatus(s string) bool {
	return pl.p.State != nil && slices.Contains(pl.p.State.Failed, s)
}

// statusBefore is the status of an operation about to run step k: the
// done_status of the step before, or the first initial status.
func (pl *planner) statusBefore(k int) (string, error) {
	// A step without a done_status of its own (seed 001's order row holds
	// PROCESSING through WMS and logistics) is before the nearest earlier
	// step that has one.
	for j := k - 1; j >= 0; j-- {
		if s := pl.p.Steps[j].DoneStatus; s != "" {
			return s, nil
		}
	}
	if len(pl.p.State.Initial) == 0 {
		return "", &RefusedError{Code: CodeNoSafePlan, Detail: "state.initial is empty: there is no status to rewind to"}
	}
	return pl.p.State.Initial[0], nil
}

// statusAfter is the status once step k is done; past the last step it is
// the first terminal status when the last step's done_status is not one.
func (pl *planner) statusAfter(k int) string {
	s := pl.p.Steps[k].DoneStatus
	if k == len(pl.p.Steps)-1 && !pl.isTerminalStatus(s) && len(pl.p.State.Terminal) > 0 {
		return pl.p.State.Terminal[0]
	}
	if s == "" {
		// No status of its own: the state row can record no more than
		// the nearest earlier step's.
		st, _ := pl.statusBefore(k)
		return st
	}
	return s
}

// reached is how many steps the current (planned) status claims done.
func (pl *planner) reached() int {
	if !pl.found || pl.p.State == nil {
		return -1
	}
	st := pl.p.State
	if slices.Contains(st.Terminal, pl.status) {
		return len(pl.p.Steps)
	}
	if slices.Contains(st.Initial, pl.status) {
		return 0
	}
	for i, s := range pl.p.Steps {
		if s.DoneStatus != "" && s.DoneStatus == pl.status {
			return i + 1
		}
	}
	return -1
}

// stateWrite adds an advance_state or rewind_state to status to.
func (pl *planner) stateWrite(typ ActionType, to, step string, extra []Guard, attested map[string]string, why string) {
	if !pl.allow(typ) {
		return
	}
	sc := &StateChange{Table: pl.p.State.Table, FromStatus: pl.status, ToStatus: to}
	guards := append(pl.stateGuards(), extra...)
	if !pl.found {
		sc.Insert = true
		sc.FromStatus = ""
		sc.MsgID = pl.msgID("")
		if k := pl.r.Kafka; k.Located == sources.LocatedStored || k.Located == sources.LocatedSearched {
			sc.Partition, sc.Offset = k.Partition, k.Offset
		}
		if pl.p.State.Version != "" {
			sc.ToVersion = i64(1)
		}
	} else if pl.p.State.Version != "" && pl.version != nil {
		sc.FromVersion = i64(*pl.version)
		sc.ToVersion = i64(*pl.version + 1)
	}
	verb := "advance"
	if typ == RewindState {
		verb = "rewind"
	}
	summary := fmt.Sprintf("%s the state %s → %s", verb, orNone(sc.FromStatus), to)
	if sc.Insert {
		summary = fmt.Sprintf("create the missing state row with status %s", to)
	}
	if why != "" {
		summary += " (" + why + ")"
	}
	pl.add(Action{Type: typ, Step: step, Summary: summary, Guards: guards, State: sc, Attested: attested})
	pl.found, pl.status, pl.version = true, to, sc.ToVersion
}

func orNone(s string) string {
	if s == "" {
		return "(no row)"
	}
	return s
}

// effectGuards pin a step's effects as the report saw them.
func (pl *planner) effectGuards(k int) []Guard {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	switch {
	case s.Kind != config.KindRemote:
		return []Guard{{Check: CheckEvidenceN, Step: s.Name, Op: "==", Value: strconv.Itoa(pl.live[s.Name])}}
	case v.Probe != nil && v.Probe.Count != nil:
		return []Guard{{Check: CheckProbeCount, Step: s.Name, Op: "==", Value: strconv.Itoa(*v.Probe.Count)}}
	case s.Intent != "":
		n := 0
		for _, in := range v.Intents {
			if in.AckedAt != nil {
				n++
			}
		}
		return []Guard{{Check: CheckIntentsAcked, Step: s.Name, Op: "==", Value: strconv.Itoa(n)}}
	}
	return nil
}

func hasEffect(status inspect.StepStatus) bool {
	return status == inspect.StepApplied || status == inspect.StepAhead || status == inspect.StepDuplicated
}

// --- rules ---------------------------------------------------------------
