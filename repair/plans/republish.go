package plans

// Republish placement: whether a republish follows a state change, what
// it copies or replays, where it goes, and the manual action that replaces
// one a consumer ignoring opctl's headers would redo an effect with
// (docs/repair.md "Rules that apply to every plan", "Consumers that ignore
// opctl's headers").

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// forceStep is the step a republish of a pipeline without a state row
// forces: --from-step, else the entity's effect step, else none.
func (pl *planner) forceStep() int {
	if pl.from >= 0 {
		return pl.from
	}
	if pl.p.Entity != nil {
		return pl.p.StepIndex(pl.p.Entity.EffectStep)
	}
	return -1
}

// maybeRepublish adds the republish that follows a state change, unless
// Kafka will redeliver the message anyway.
func (pl *planner) maybeRepublish(from int, why string, force bool) error {
	if !pl.allow(Republish) {
		return nil
	}
	if pl.r.Kafka.Redelivery == inspect.RedeliveryYes {
		pl.note("no republish: Kafka will redeliver the message (committed offset ≤ its offset); the consumer resumes from the repaired state. To send a copy anyway: --action republish --force")
		return nil
	}
	_ = why
	return pl.republish(from, force)
}

// republish adds a republish resuming at step from (opctl-from-step), or
// with force, forcing its effect (opctl-force-effect).
func (pl *planner) republish(from int, force bool) error {
	if force {
		name := ""
		if from >= 0 {
			name = pl.p.Steps[from].Name
		}
		return pl.republishMsg(-1, name, "")
	}
	return pl.republishMsg(from, "", "")
}

// msgID is the message id of the operation's message: the state row's, the
// given idempotency key, else the record opctl locates.
func (pl *planner) msgID(key string) string {
	if key != "" {
		return key
	}
	if pl.r.State.MsgID != "" {
		return pl.r.State.MsgID
	}
	rows := make([]sources.IdempotencyRow, len(pl.r.Idempotency))
	for i, x := range pl.r.Idempotency {
		rows[i] = sources.IdempotencyRow{Key: x.Key, Action: x.Action}
	}
	if rec := sources.MessageRecord(rows); rec != nil {
		return rec.Key
	}
	if m := pl.message(); m != nil {
		return m.Headers[HeaderMsgID]
	}
	return ""
}

func (pl *planner) message() *sources.Message {
	if pl.in.Evidence == nil {
		return nil
	}
	return pl.in.Evidence.Kafka.Message
}

func (pl *planner) republishMsg(from int, forceEffect, key string) error {
	if !pl.allow(Republish) {
		return nil
	}
	if redo := pl.redoneBy(); len(redo) > 0 {
		return pl.byHand(from, forceEffect, redo)
	}
	p := pl.p
	msgID := pl.msgID(key)
	spec := &PublishSpec{Topic: p.EffectiveRedriveTopic(), MsgID: msgID, Headers: map[string]string{}}
	m := pl.message()
	if m != nil && msgID != "" && m.Headers[HeaderMsgID] != "" && m.Headers[HeaderMsgID] != msgID {
		m = nil // the record read is another message of the operation
	}
	if m != nil {
		spec.Copy = true
		spec.Key, spec.Value = slices.Clone(m.Key), slices.Clone(m.Value)
		for k, v := range m.Headers {
			if !strings.HasPrefix(k, "opctl-") {
				spec.Headers[k] = v
			}
		}
		spec.Source = &Position{Topic: p.Topic, Partition: m.Partition, Offset: m.Offset}
	} else {
		spec.Key = []byte(sources.Expand(p.MessageKey, map[string]string{"biz_id": pl.r.BizID, "msg_id": msgID}, false))
		spec.Value, _ = json.Marshal(struct {
			BizID  string `json:"biz_id"`
			MsgID  string `json:"msg_id"`
			Replay bool   `json:"replay"`
		}{pl.r.BizID, msgID, true})
		pl.note("the original record could not be read (%s): the republish is a replay record {biz_id, msg_id, replay: true}", orDash(pl.r.Kafka.Detail))
	}
	if msgID != "" {
		spec.Headers[HeaderMsgID] = msgID
	}
	if forceEffect != "" {
		spec.ForceEffect = forceEffect
		spec.Headers[HeaderForceEffect] = forceEffect
	} else if from >= 0 {
		spec.FromStep = p.Steps[from].Name
		spec.Headers[HeaderFromStep] = spec.FromStep
	}
	switch part := p.Partitioner; part {
	case config.PartitionerStored:
		if spec.Topic != p.Topic || pl.r.Kafka.Partition == nil {
			return &RefusedError{Code: CodeNoSafePlan, Detail: "partitioner stored: the partition of the republished record is not known (no stored partition, or redrive_topic differs from topic)"}
		}
		spec.Partition = *pl.r.Kafka.Partition
		spec.PartitionRule = "the stored partition"
	default:
		if part == "" {
			part = config.PartitionerMurmur2
		}
		if pl.in.RedrivePartitions <= 0 {
			return &RefusedError{Code: CodeNoSafePlan, Detail: fmt.Sprintf("the partition count of topic %s is unknown (Kafka unreachable?): cannot place the republished record", spec.Topic)}
		}
		n, err := sources.PartitionFor(part, spec.Key, pl.in.RedrivePartitions)
		if err != nil {
			return &RefusedError{Code: CodeNoSafePlan, Detail: err.Error()}
		}
		spec.Partition = n
		spec.PartitionRule = fmt.Sprintf("%s of the key over %d partitions", part, pl.in.RedrivePartitions)
	}
	guards := pl.stateGuards()
	if !pl.found || pl.p.State == nil {
		if key != "" {
			guards = append(guards, pl.idemGuard(key))
		} else if msgID != "" {
			if _, ok := pl.idem[msgID]; ok {
				guards = append(guards, pl.idemGuard(msgID))
			}
		}
	}
	what := "copy of the original record"
	if !spec.Copy {
		what = "replay record"
	}
	step := spec.FromStep
	summary := fmt.Sprintf("republish a %s to %s partition %d", what, spec.Topic, spec.Partition)
	if forceEffect != "" {
		step = forceEffect
		summary += ", forcing the effect of " + forceEffect
	} else if step != "" {
		summary += ", resuming at " + step
	}
	pl.add(Action{Type: Republish, Step: step, Summary: summary, Guards: guards, Publish: spec})
	return nil
}

// redoneBy lists what a republish would make the consumer do again
// (inspect.Redone) when its consumer does not honour opctl's replay
// headers: it reads the record as a plain redelivery and resumes where its
// own state says (the first step the planned state row does not claim), or
// without a state row from the first step (docs/repair.md#consumers-that-ignore-opctls-headers).
func (pl *planner) redoneBy() []string {
	if pl.p.HonoursOpctlHeaders {
		return nil
	}
	start := max(pl.reached(), 0)
	return inspect.Redone(pl.p, pl.r.Steps, func(i int) bool { return i >= start })
}

// byHand replaces a republish that would redo effects (redo) with a manual
// action: the operator finishes the operation by hand from step from (or
// makes forceEffect's effect) and attests it.
func (pl *planner) byHand(from int, forceEffect string, redo []string) error {
	name, k := forceEffect, -1
	if name == "" && from >= 0 {
		name, k = pl.p.Steps[from].Name, from
	} else if name != "" {
		k = pl.p.StepIndex(name)
	}
	why := fmt.Sprintf("pipeline %s does not declare honours_opctl_headers: its consumer would read a republished record as a plain redelivery and %s", pl.p.Name, strings.Join(redo, ", "))
	if !pl.allow(Manual) {
		return refusedf(CodeNoSafePlan, "%s; no republish is planned: finish the operation by hand and plan {action manual} {attest}", why)
	}
	var missing []string
	for i := max(k, 0); i < len(pl.r.Steps); i++ {
		if st := pl.r.Steps[i].Status; st == inspect.StepAbsent || (i == k && forceEffect != "") {
			missing = append(missing, pl.p.Steps[i].Name)
		}
	}
	instr := "finish the operation by hand"
	if len(missing) > 0 {
		instr = "make the effect of " + strings.Join(missing, ", ") + " by hand"
	}
	pl.note("%s; so the plan asks for it by hand instead of a republish", why)
	guards := pl.stateGuards()
	if k >= 0 {
		guards = append(guards, pl.effectGuards(k)...)
	}
	pl.add(Action{Type: Manual, Step: name, Summary: instr, Guards: guards,
		Manual: &ManualSpec{Instructions: instr, Attest: pl.o.Attest}})
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
