package inspect

import (
	"fmt"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Redelivery decides whether Kafka will hand a message to the group again
// (docs/where.md). Inputs: the message offset (-1 unknown), the group's
// committed offset on the partition (-1 none), the partition's log start and
// end, and the consumer's auto.offset.reset. Fetch them with
// sources.Kafka.Group and Locate.
//
//   - a message below the log start is gone: "no";
//   - with no committed offset, or one below the log start, the consumer
//     restarts from offset_reset: "earliest" redelivers every retained
//     message, "latest" none;
//   - otherwise "yes" when committed ≤ offset.
func Redelivery(offset, committed, logStart, logEnd int64, offsetReset string) RedeliveryAnswer {
	if offset < 0 {
		return RedeliveryUnknown
	}
	if offset < logStart {
		return RedeliveryNo
	}
	if logEnd >= 0 && offset >= logEnd {
		return RedeliveryUnknown // the log does not hold this offset yet: inconsistent read
	}
	if committed < 0 || committed < logStart {
		if offsetReset == "earliest" {
			return RedeliveryYes
		}
		return RedeliveryNo
	}
	if committed <= offset {
		return RedeliveryYes
	}
	return RedeliveryNo
}

// PartitionLag is how many records of a partition the group has not
// committed past (docs/where.md): log end − committed; with no committed
// offset, or one below the log start, every retained record (log end −
// log start), as kadm.CalculateGroupLag counts it. Inputs: one partition
// of sources.Kafka.Group.
func PartitionLag(pv sources.PartitionView) int64 {
	from := pv.Committed
	if from < pv.LogStart {
		from = pv.LogStart
	}
	if pv.LogEnd <= from {
		return 0
	}
	return pv.LogEnd - from
}

// GroupLag is the group's total lag on its topic: PartitionLag summed over
// every partition of g (sources.Kafka.Group).
func GroupLag(g sources.GroupView) int64 {
	var n int64
	for _, pv := range g.Partitions {
		n += PartitionLag(pv)
	}
	return n
}

// kafkaView builds the Kafka section: the newest message opctl knows for the
// operation (a published republish from the audit wins over the original),
// the group's view of its partition, and the redelivery decision.
func kafkaView(p *config.Pipeline, ev sources.Evidence) KafkaView {
	k := ev.Kafka
	v := KafkaView{Topic: p.Topic, Redelivery: RedeliveryUnknown, Located: k.Located, Detail: k.SearchDetail,
		GroupState: k.Group.GroupState}
	if v.Located == "" {
		v.Located = sources.LocatedUnknown
	}
	part, off := k.Partition, k.Offset
	// A message opctl republished is the operation's newest message
	// (docs/where.md).
	if a := lastRepublish(ev.DB.Audit); a != nil {
		part, off = *a.Partition, *a.Offset
		v.Located = sources.LocatedRepublished
		v.Topic = p.EffectiveRedriveTopic()
		v.Detail = fmt.Sprintf("republished by opctl plan %.12s", a.PlanID)
	}
	if part >= 0 {
		pp := part
		v.Partition = &pp
	}
	if off >= 0 {
		oo := off
		v.Offset = &oo
	}
	// Every field read is shown, whatever else failed; one a request could
	// not answer is null and named in Unknown (docs/where.md "When a
	// Kafka request fails").
	g := k.Group
	for _, u := range g.Unknown {
		for _, f := range viewFields[u.Field] {
			v.unknown(f, u.Why)
		}
	}
	if len(g.Partitions) > 0 && g.Known(sources.FieldCommitted) && g.Known(sources.FieldLogStart) && g.Known(sources.FieldLogEnd) {
		gl := GroupLag(g)
		v.GroupLag = &gl
	}
	pv, havePart := g.Partitions[part]
	if part >= 0 && havePart {
		v.position(p, g, pv, off)
	}
	return v
}

// viewFields are the fields of the Kafka view each unknown field of the
// group view leaves unknown.
var viewFields = map[string][]string{
	sources.FieldCommitted: {"committed", "lag", "group_lag", "redelivery"},
	sources.FieldLogStart:  {"log_start", "lag", "group_lag", "redelivery"},
	sources.FieldLogEnd:    {"log_end", "lag", "group_lag", "redelivery"},
	sources.FieldGroup:     {"group_state", "partition_owner"},
}

// unknown records that field of the view is unknown, and why (the first
// reason given).
func (v *KafkaView) unknown(field, why string) {
	if v.Unknown == nil {
		v.Unknown = map[string]string{}
	}
	if _, ok := v.Unknown[field]; !ok {
		v.Unknown[field] = why
	}
}

// lastRepublish returns the newest republish of the audit that was
// published, nil when there is none.
func lastRepublish(audit []sources.AuditAction) *sources.AuditAction {
	var out *sources.AuditAction
	for i, a := range audit {
		if a.Action == sources.AuditRepublish && a.Outcome == sources.AuditPublished && a.Partition != nil && a.Offset != nil {
			out = &audit[i]
		}
	}
	return out
}

// position fills in the group's and the log's view of the message's
// partition, each field only when it was read, and decides redelivery when
// the group reads the topic the message is in (g.Topic "" means it does)
// and every input of the decision was read.
func (v *KafkaView) position(p *config.Pipeline, g sources.GroupView, pv sources.PartitionView, off int64) {
	haveCommitted := g.Known(sources.FieldCommitted)
	haveStart, haveEnd := g.Known(sources.FieldLogStart), g.Known(sources.FieldLogEnd)
	if haveCommitted && pv.Committed >= 0 {
		c := pv.Committed
		v.Committed = &c
	}
	if haveStart {
		ls := pv.LogStart
		v.LogStart = &ls
	}
	if haveEnd {
		le := pv.LogEnd
		v.LogEnd = &le
	}
	if g.Known(sources.FieldGroup) {
		v.PartitionOwner = pv.Owner
	}
	if v.Topic == g.Topic || g.Topic == "" {
		switch {
		case haveCommitted && haveStart && haveEnd:
			lag := PartitionLag(pv)
			v.Lag = &lag
			v.Redelivery = Redelivery(off, pv.Committed, pv.LogStart, pv.LogEnd, p.EffectiveOffsetReset())
		case haveStart && off >= 0 && off < pv.LogStart:
			// Below the log start the message is gone, whatever the
			// group committed.
			v.Redelivery = RedeliveryNo
			delete(v.Unknown, "redelivery")
		}
	}
	if haveStart && off >= 0 && off < pv.LogStart && v.Detail == "" {
		v.Detail = fmt.Sprintf("offset %d is below log start %d: deleted by retention", off, pv.LogStart)
	}
}

// CommittedPast reports whether the group has committed past the
// operation's message: its offset and the committed offset are known and
// committed > offset. Under commit: after_steps that is the consumer's own
// statement that every step ran (docs/verdicts.md#terminal).
// Only a position of the topic the group reads counts (a republish to
// another topic is not what the group commits).
func (v KafkaView) CommittedPast() bool {
	return v.Redelivery == RedeliveryNo && v.Offset != nil && v.Committed != nil && *v.Committed > *v.Offset
}
