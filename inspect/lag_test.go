package inspect_test

import (
	"maps"
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func TestPartitionLag(t *testing.T) {
	for _, tc := range []struct {
		name string
		pv   sources.PartitionView
		want int64
	}{
		{"committed inside the log", sources.PartitionView{Committed: 7, LogStart: 0, LogEnd: 10}, 3},
		{"committed at the end", sources.PartitionView{Committed: 10, LogStart: 0, LogEnd: 10}, 0},
		{"no committed offset: every retained record", sources.PartitionView{Committed: -1, LogStart: 4, LogEnd: 10}, 6},
		{"committed below the log start", sources.PartitionView{Committed: 2, LogStart: 4, LogEnd: 10}, 6},
		{"committed past the end (inconsistent read)", sources.PartitionView{Committed: 12, LogStart: 0, LogEnd: 10}, 0},
		{"empty partition", sources.PartitionView{Committed: -1, LogStart: 0, LogEnd: 0}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inspect.PartitionLag(tc.pv); got != tc.want {
				t.Errorf("PartitionLag(%+v) = %d, want %d", tc.pv, got, tc.want)
			}
		})
	}
}

func TestGroupLag(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    sources.GroupView
		want int64
	}{
		{"no partitions", sources.GroupView{}, 0},
		{"sum of partitions", sources.GroupView{Partitions: map[int32]sources.PartitionView{
			0: {Committed: 5, LogEnd: 9}, 1: {Committed: -1, LogStart: 2, LogEnd: 4}, 2: {Committed: 3, LogEnd: 3}}}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := inspect.GroupLag(tc.g); got != tc.want {
				t.Errorf("GroupLag = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestKafkaViewPerField: a field a request could not answer is unknown and
// named with why; every other field read is shown, and redelivery is
// decided only from fields that were read (docs/where.md "When a Kafka
// request fails").
func TestKafkaViewPerField(t *testing.T) {
	const offFetch, listOffs, describe = "offset fetch: timeout", "list offsets: broken", "describe group: The version of API is not supported"
	for _, tc := range []struct {
		name       string
		logStart   int64
		unknown    []sources.UnknownField
		committed  bool // shown
		bounds     bool // log_start and log_end shown
		redelivery inspect.RedeliveryAnswer
		want       map[string]string
	}{
		{"DescribeGroups unsupported: the rest is kept", 0, []sources.UnknownField{{Field: sources.FieldGroup, Why: describe}},
			true, true, inspect.RedeliveryYes, map[string]string{"group_state": describe, "partition_owner": describe}},
		{"committed unknown: no redelivery from it", 0, []sources.UnknownField{{Field: sources.FieldCommitted, Why: offFetch}},
			false, true, inspect.RedeliveryUnknown,
			map[string]string{"committed": offFetch, "lag": offFetch, "group_lag": offFetch, "redelivery": offFetch}},
		{"committed unknown, message below the log start: gone", 200, []sources.UnknownField{{Field: sources.FieldCommitted, Why: offFetch}},
			false, true, inspect.RedeliveryNo, map[string]string{"committed": offFetch, "lag": offFetch, "group_lag": offFetch}},
		{"log bounds unknown", 0, []sources.UnknownField{{Field: sources.FieldLogStart, Why: listOffs}, {Field: sources.FieldLogEnd, Why: listOffs}},
			true, false, inspect.RedeliveryUnknown,
			map[string]string{"log_start": listOffs, "log_end": listOffs, "lag": listOffs, "group_lag": listOffs, "redelivery": listOffs}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := settlementForKafka()
			ev := sources.Evidence{BizID: "PAY-1", Pipeline: p, Sources: map[string]string{"mysql": "ok", "kafka": "kafka: partial read"},
				DB: sources.DBEvidence{Steps: make([]sources.StepEvidence, len(p.Steps))},
				Kafka: sources.KafkaEvidence{Partition: 3, Offset: 100, Located: sources.LocatedStored, Group: sources.GroupView{
					Topic: p.Topic, Unknown: tc.unknown,
					Partitions: map[int32]sources.PartitionView{3: {Partition: 3, Committed: 90, LogStart: tc.logStart, LogEnd: 500, Owner: "c-1"}}}}}
			for _, u := range tc.unknown {
				if u.Field == sources.FieldCommitted {
					pv := ev.Kafka.Group.Partitions[3]
					pv.Committed = -1
					ev.Kafka.Group.Partitions[3] = pv
				}
			}
			k := inspect.Diagnose(ev).Kafka
			if (k.Committed != nil) != tc.committed || (k.LogStart != nil) != tc.bounds || (k.LogEnd != nil) != tc.bounds {
				t.Errorf("committed %v, log %v..%v; want committed shown %v, bounds shown %v", k.Committed, k.LogStart, k.LogEnd, tc.committed, tc.bounds)
			}
			if k.Redelivery != tc.redelivery {
				t.Errorf("redelivery %s, want %s", k.Redelivery, tc.redelivery)
			}
			if !maps.Equal(k.Unknown, tc.want) {
				t.Errorf("unknown %v, want %v", k.Unknown, tc.want)
			}
		})
	}
}

func settlementForKafka() *config.Pipeline {
	return &config.Pipeline{Name: "settlement", Topic: "settlement-event", Group: "settlement-consumer", OffsetReset: "latest",
		Steps: []config.Step{{Name: "debit", Kind: config.KindLocal}}}
}
