package plans

// Forced actions: --action A --force on a verdict that does not call for
// A, release_lease, and restore_record (docs/repair.md "Which plan each
// verdict gets").

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// restore puts back the idempotency records opctl's flip_skipped deleted
// and that are not there again: each from its audit image, guarded by its
// absence (docs/repair.md#reopening-a-skipped-record).
func (pl *planner) restore() error {
	if pl.p.Idempotency == nil || pl.in.Evidence == nil {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no idempotency table configured"}
	}
	n := 0
	for _, a := range pl.in.Evidence.DB.Audit {
		d := a.Deleted
		if d == nil || a.Outcome != sources.AuditApplied {
			continue
		}
		if _, there := pl.idem[d.Key]; there {
			continue // a record of that key exists again
		}
		row := Image{}
		for i, c := range d.Columns {
			f := Field{Name: c}
			if i < len(d.Values) {
				f.Value = d.Values[i]
			}
			row = append(row, f)
		}
		guards := append(pl.stateGuards(), Guard{Check: CheckIdemAction, Key: d.Key, Op: "absent"})
		pl.add(Action{Type: RestoreRecord, Step: stepOfEntity(pl.p),
			Summary: fmt.Sprintf("put back idempotency record %s as opctl's audit kept it", d.Key),
			Guards:  guards, Restore: &RestoreSpec{Table: pl.p.Idempotency.Table, Key: d.Key, Row: row}})
		n++
	}
	if n == 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "opctl's audit holds no deleted idempotency record of this operation that is not there again"}
	}
	return nil
}

// releaseLease: clear the lease of an owner that left the group.
func (pl *planner) releaseLease() error {
	st := pl.r.State
	if pl.p.State == nil || pl.p.State.Owner == "" || !st.Found {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "release_lease: no state row with an owner column"}
	}
	if st.Owner == "" {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "release_lease: no owner holds the lease"}
	}
	ev := pl.in.Evidence
	if ev == nil || ev.Sources["kafka"] != sources.StatusOK {
		return &RefusedError{Code: CodeInFlight, Detail: fmt.Sprintf("release_lease: the consumer group %s could not be read, so opctl cannot tell whether owner %s is alive", pl.p.Group, st.Owner)}
	}
	if IsMember(ev.Kafka.Group, st.Owner) {
		return refusedf(CodeInFlight, "owner %s is a live member of group %s: the lease stays ({force} never bypasses a live lease)", st.Owner, pl.p.Group)
	}
	guards := []Guard{{Check: CheckStateFound, Op: "==", Value: "true"}}
	sc := &StateChange{Table: pl.p.State.Table, FromStatus: st.Status, ToStatus: st.Status, ReleaseOwner: st.Owner}
	if pl.p.State.Version != "" && pl.version != nil {
		guards = append(guards, Guard{Check: CheckStateVersion, Op: "==", Value: strconv.FormatInt(*pl.version, 10)})
		sc.FromVersion, sc.ToVersion = i64(*pl.version), i64(*pl.version+1)
	}
	guards = append(guards,
		Guard{Check: CheckStateOwner, Op: "==", Value: st.Owner},
		Guard{Check: CheckOwnerMember, Key: st.Owner, Op: "not_member", Value: pl.p.Group})
	pl.add(Action{Type: ReleaseLease, Summary: fmt.Sprintf("release the lease of %s (no longer a member of group %s)", st.Owner, pl.p.Group), Guards: guards, State: sc})
	pl.version = sc.ToVersion
	pl.note("after the release, plan again: the operation's own verdict shows once the lease is gone")
	return nil
}

// IsMember reports whether owner names a member of the group: its client id
// or member id.
func IsMember(g sources.GroupView, owner string) bool {
	for _, m := range g.Members {
		if owner != "" && (m.ClientID == owner || m.MemberID == owner) {
			return true
		}
	}
	return false
}

// forcedAction builds --action A --force on a verdict that does not call
// for A.
func (pl *planner) forcedAction() error {
	p := pl.p
	stepNeeded := func(kinds ...string) (int, error) {
		if pl.from < 0 {
			return -1, inputErrorf(OptFromStep, "{action %s} {force} needs {from-step}: the step to act on", pl.o.Action)
		}
		if len(kinds) > 0 && !slices.Contains(kinds, p.Steps[pl.from].Kind) {
			return -1, inputErrorf(OptFromStep, "{action %s}: step %s is %s", pl.o.Action, p.Steps[pl.from].Name, p.Steps[pl.from].Kind)
		}
		return pl.from, nil
	}
	switch pl.o.Action {
	case Republish:
		if p.State == nil || !pl.found {
			return pl.republish(pl.forceStep(), true)
		}
		from := pl.from
		if from < 0 {
			from = pl.reached()
		}
		if from < 0 || from >= len(p.Steps) {
			return inputErrorf(OptFromStep, "{action republish}: the state %s claims every step: pass {from-step}", pl.status)
		}
		return pl.republish(from, false)
	case RewindState, AdvanceState:
		if p.State == nil || !pl.found {
			return &RefusedError{Code: CodeNoSafePlan, Detail: "no state row to " + strings.TrimSuffix(string(pl.o.Action), "_state")}
		}
		k, err := stepNeeded()
		if err != nil {
			return err
		}
		r := pl.reached()
		if (pl.o.Action == RewindState) != (k < r) || k == r {
			return inputErrorf(OptFromStep, "{action %s} {from-step %s}: the state %s already has step %s run next or %s", pl.o.Action, p.Steps[k].Name, pl.status, p.Steps[k].Name, map[bool]string{true: "later", false: "earlier"}[pl.o.Action == RewindState])
		}
		return pl.moveTo(k)
	case Reverse:
		k, err := stepNeeded(config.KindLocal)
		if err != nil {
			return err
		}
		if len(p.Steps[k].Reverse) == 0 {
			return inputErrorf(OptAction, "{action reverse}: step %s has no reverse statements in the config", p.Steps[k].Name)
		}
		return pl.reverseNewest(k, 1)
	case CompensateRemote:
		k, err := stepNeeded(config.KindRemote)
		if err != nil {
			return err
		}
		if p.Steps[k].Compensate == "" {
			return inputErrorf(OptAction, "{action compensate_remote}: step %s has no compensate URL in the config", p.Steps[k].Name)
		}
		return pl.compensateNewest(k, 1)
	case FlipSkipped:
		key := pl.skippedKey()
		if key == "" {
			return &RefusedError{Code: CodeNoSafePlan, Detail: "no SKIPPED record to flip"}
		}
		return pl.flip(key)
	case RestoreRecord:
		return pl.restore()
	case Manual:
		step := ""
		var att map[string]string
		guards := pl.stateGuards()
		if pl.from >= 0 {
			step = p.Steps[pl.from].Name
			if pl.o.Outcome != "" {
				att = map[string]string{}
				for _, in := range pl.r.Steps[pl.from].Intents {
					if in.Outcome == inspect.IntentUnknown {
						att[in.RequestID] = pl.o.Outcome
					}
				}
				if len(att) == 0 {
					att[inspect.AttestAll] = pl.o.Outcome
				}
			}
		}
		pl.add(Action{Type: Manual, Step: step, Summary: "record what was done by hand", Guards: guards,
			Manual: &ManualSpec{Instructions: "record what was done by hand", Attest: pl.o.Attest}, Attested: att})
		return nil
	}
	return inputErrorf(OptAction, "{action %s} cannot be forced on %s", pl.o.Action, pl.r.Verdict.Code)
}

// joinTypes lists action types for a message.
func joinTypes(ts []ActionType) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, ", ")
}
