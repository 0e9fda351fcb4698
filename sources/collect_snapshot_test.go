package sources

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// fakeSnapshotDB is a fakeHybridDB that also reads one operation in a
// snapshot: its rows say so (State.Owner "snapshot").
type fakeSnapshotDB struct {
	*fakeHybridDB
	snaps atomic.Int64
}

func (f *fakeSnapshotDB) ReadOperationSnapshot(ctx context.Context, p *config.Pipeline, audit, id string) (DBEvidence, error) {
	f.snaps.Add(1)
	ev, err := f.fakeDB.ReadOperation(ctx, p, audit, id)
	f.reads.Add(-1) // counted as a snapshot read only
	ev.State.Owner = "snapshot"
	return ev, err
}

// TestCollectSnapshot: with Snapshot, Collect and CollectMany read each
// operation's rows with one ReadOperationSnapshot (never the batched, the
// hybrid or the concurrent read) and the Kafka group once per CollectMany;
// without it, a SnapshotDB is read as before; a DB that reads no snapshot
// is read as without Snapshot.
func TestCollectSnapshot(t *testing.T) {
	p := &config.Pipeline{Name: "p", Topic: "t", Group: "g", MessageKey: "{biz_id}"}
	rows := map[string]DBEvidence{}
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("op-%02d", i)
		rows[id] = DBEvidence{State: StateRow{Found: true, Status: "DONE"}, Now: time.Unix(int64(i), 0)}
		ids = append(ids, id)
	}
	for _, tc := range []struct {
		name                  string
		snapshot, perOp       bool
		snapDB                bool
		wantSnaps, wantReads  int64
		wantHybrid, wantBatch int64
		wantOwner             string
	}{
		{name: "snapshot", snapshot: true, perOp: true, snapDB: true, wantSnaps: 13, wantOwner: "snapshot"},
		{name: "snapshot without PerOperation", snapshot: true, snapDB: true, wantSnaps: 13, wantOwner: "snapshot"},
		{name: "no snapshot: the hybrid read", perOp: true, snapDB: true, wantReads: 13, wantHybrid: 1},
		{name: "no snapshot: the batched read", snapDB: true, wantReads: 13, wantBatch: 1},
		{name: "a DB that reads no snapshot", snapshot: true, perOp: true, wantReads: 13, wantHybrid: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd := &fakeDB{rows: rows}
			bd := &fakeBatchDB{fakeDB: fd}
			hd := &fakeHybridDB{fakeBatchDB: bd}
			sd := &fakeSnapshotDB{fakeHybridDB: hd}
			var db DB = hd
			if tc.snapDB {
				db = sd
			}
			k := &fakeKafka{}
			c := &Collector{DB: db, Kafka: k, Timeout: time.Second, PerOperation: tc.perOp, Snapshot: tc.snapshot}
			evs, err := c.CollectMany(context.Background(), p, ids)
			if err != nil {
				t.Fatal(err)
			}
			one, err := c.Collect(context.Background(), p, ids[5])
			if err != nil {
				t.Fatal(err)
			}
			if n := k.groups.Load(); n != 2 {
				t.Errorf("group read %d times for one CollectMany and one Collect, want 2", n)
			}
			for name, got := range map[string][2]int64{
				"snapshot": {sd.snaps.Load(), tc.wantSnaps}, "operation": {fd.reads.Load(), tc.wantReads},
				"hybrid": {hd.hybrid.Load(), tc.wantHybrid}, "batched": {bd.batches.Load(), tc.wantBatch},
			} {
				if got[0] != got[1] {
					t.Errorf("%d %s reads, want %d", got[0], name, got[1])
				}
			}
			for _, ev := range append(evs, one) {
				if ev.DB.State.Owner != tc.wantOwner {
					t.Fatalf("%s: read by %q, want %q", ev.BizID, ev.DB.State.Owner, tc.wantOwner)
				}
			}
		})
	}
}
