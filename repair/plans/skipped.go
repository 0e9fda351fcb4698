package plans

// The WRONGLY_SKIPPED rule: reopen the SKIPPED record and republish, or,
// for a consumer that ignores opctl's headers, redrive the effect at the
// downstream or make it by hand (docs/repair.md "Which plan each verdict
// gets", "Reopening a skipped record", "Redrive").

import (
	"fmt"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// wronglySkipped: flip SKIPPED → PENDING, then republish with
// opctl-force-effect.
func (pl *planner) wronglySkipped() error {
	key := pl.skippedKey()
	if key == "" {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no SKIPPED record"}
	}
	if !pl.p.HonoursOpctlHeaders {
		// The consumer's skip is its own code: a republish, even with
		// opctl-force-effect, would be skipped again (seed 003). The
		// effect is made at the downstream, or by hand; the record stays.
		return pl.skippedEffect(key)
	}
	if err := pl.flip(key); err != nil {
		return err
	}
	eff := pl.p.Entity.EffectStep
	return pl.republishMsg(-1, eff, key)
}

// skippedEffect plans the swallowed effect of a WRONGLY_SKIPPED operation
// whose consumer does not honour opctl's headers: done by hand (manual),
// the SKIPPED record left as it is (docs/repair.md#consumers-that-ignore-opctls-headers).
func (pl *planner) skippedEffect(key string) error {
	eff := pl.p.Entity.EffectStep
	k := pl.p.StepIndex(eff)
	if k < 0 {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "entity.effect_step " + eff + " is not a step"}
	}
	why := fmt.Sprintf("pipeline %s does not declare honours_opctl_headers: its consumer's own skip rule would skip a republished record again", pl.p.Name)
	s := pl.p.Steps[k]
	if s.Redrive != "" && pl.o.Action != Manual && pl.allow(Redrive) {
		return pl.redrive(k, key, why)
	}
	if !pl.allow(Manual) {
		return refusedf(CodeNoSafePlan, "%s; make the effect of %s by hand and plan {action manual} {attest}", why, eff)
	}
	pl.note("%s, so no flip and no republish: the effect of %s is made by hand; record %s stays SKIPPED, and with the effect in place the skip no longer reads wrong", why, eff, key)
	guards := append(pl.stateGuards(), pl.idemGuard(key))
	if e := pl.r.Entity; e != nil {
		guards = append(guards, Guard{Check: CheckEntityStatus, Op: "==", Value: e.Status})
	}
	// No guard on the effect itself: the operator makes it before the
	// plan is applied. The action attests it, for a downstream whose count
	// does not show an effect made by hand.
	instr := fmt.Sprintf("make the effect of %s by hand (the one record %s skipped)", eff, key)
	pl.add(Action{Type: Manual, Step: eff, Summary: instr, Guards: guards,
		Manual: &ManualSpec{Instructions: instr, Attest: pl.o.Attest}, Attested: map[string]string{inspect.AttestAll: inspect.AttestApplied}})
	return nil
}

// redrive plans the POST to step k's redrive URL that makes the effect a
// SKIPPED record (key) swallowed: guarded by the record, the entity's
// status and the step's effects as read, the probe read after it
// (docs/repair.md#redrive).
func (pl *planner) redrive(k int, key, why string) error {
	s := pl.p.Steps[k]
	v := pl.r.Steps[k]
	if s.Probe == "" {
		return refusedf(CodeNoSafePlan, "step %s has a redrive URL but no probe: opctl could not tell whether a redrive whose answer was lost took effect; add a probe, or plan {action manual} {attest}", s.Name)
	}
	guards := append(pl.stateGuards(), pl.idemGuard(key))
	if e := pl.r.Entity; e != nil {
		guards = append(guards, Guard{Check: CheckEntityStatus, Op: "==", Value: e.Status})
	}
	guards = append(guards, pl.effectGuards(k)...)
	spec := &RedriveSpec{URL: sources.RedactURL(sources.Expand(s.Redrive, map[string]string{"biz_id": pl.r.BizID}, true))}
	if v.Probe != nil && v.Probe.Count != nil {
		c := *v.Probe.Count
		spec.ProbeCount = &c
	}
	pl.note("%s, so no flip and no republish: the effect of %s is made at the downstream (redrive); record %s stays SKIPPED, and with the effect in place the skip no longer reads wrong", why, s.Name, key)
	pl.add(Action{Type: Redrive, Step: s.Name,
		Summary: fmt.Sprintf("redrive %s at the downstream: the effect record %s skipped", s.Name, key),
		Guards:  guards, Redrive: spec})
	pl.live[s.Name]++
	return nil
}

func (pl *planner) skippedKey() string {
	key := ""
	for _, x := range pl.r.Idempotency {
		if x.Action == inspect.ActionSkipped {
			key = x.Key
		}
	}
	return key
}

func (pl *planner) flip(key string) error {
	if pl.p.Idempotency == nil {
		return &RefusedError{Code: CodeNoSafePlan, Detail: "no idempotency table configured"}
	}
	if !pl.allow(FlipSkipped) {
		return nil
	}
	guards := append(pl.stateGuards(), pl.idemGuard(key))
	if e := pl.r.Entity; e != nil && pl.p.Entity != nil {
		st := e.Status
		if !e.Found {
			st = "(not found)"
		}
		guards = append(guards, Guard{Check: CheckEntityStatus, Op: "==", Value: st})
		if k := pl.p.StepIndex(pl.p.Entity.EffectStep); k >= 0 {
			guards = append(guards, pl.effectGuards(k)...)
		}
	}
	column := ""
	if pl.in.Evidence != nil {
		column = pl.in.Evidence.DB.ActionColumn
	}
	mode, problem := config.ReopenFor(pl.p.Idempotency, column)
	if problem != "" {
		return &RefusedError{Code: CodeNoSafePlan, Detail: problem}
	}
	if mode == config.ReopenDelete {
		// The action column cannot hold PENDING (seed 003's
		// ENUM('DONE','SKIPPED')), or the config says delete: the record
		// goes, its row kept whole in the audit, and a redelivery of the
		// message is processed again (docs/repair.md#reopening-a-skipped-record).
		pl.add(Action{Type: FlipSkipped, Step: stepOfEntity(pl.p),
			Summary: fmt.Sprintf("reopen idempotency record %s: delete it (SKIPPED; its row is kept in the audit)", key),
			Guards:  guards,
			Flip:    &FlipSpec{Table: pl.p.Idempotency.Table, Key: key, From: inspect.ActionSkipped, Delete: true}})
		delete(pl.idem, key)
		return nil
	}
	pl.add(Action{Type: FlipSkipped, Step: stepOfEntity(pl.p),
		Summary: fmt.Sprintf("flip idempotency record %s SKIPPED → PENDING", key),
		Guards:  guards,
		Flip:    &FlipSpec{Table: pl.p.Idempotency.Table, Key: key, From: inspect.ActionSkipped, To: inspect.ActionPending}})
	pl.idem[key] = inspect.ActionPending
	return nil
}

func stepOfEntity(p *config.Pipeline) string {
	if p.Entity != nil {
		return p.Entity.EffectStep
	}
	return ""
}
