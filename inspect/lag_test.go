package inspect_test

import (
	"testing"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
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
