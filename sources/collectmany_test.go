package sources

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// fakeDB answers from a map; ids starting with "partial" get a partial
// error, "down" makes every read fail at the connection level.
type fakeDB struct {
	rows  map[string]DBEvidence
	down  bool
	reads atomic.Int64
}

type partialErr struct{}

func (partialErr) Error() string { return "audit query failed" }
func (partialErr) Partial() bool { return true }

func (f *fakeDB) ReadOperation(_ context.Context, _ *config.Pipeline, _ string, id string) (DBEvidence, error) {
	f.reads.Add(1)
	if f.down {
		return DBEvidence{}, errors.New("connection refused")
	}
	ev := f.rows[id]
	if len(id) >= 7 && id[:7] == "partial" {
		return ev, partialErr{}
	}
	return ev, nil
}

// fakeBatchDB is a fakeDB that reads batches.
type fakeBatchDB struct {
	*fakeDB
	batches atomic.Int64
}

func (f *fakeBatchDB) ReadOperations(ctx context.Context, p *config.Pipeline, audit string, ids []string) ([]DBEvidence, []error, error) {
	f.batches.Add(1)
	if f.down {
		return nil, nil, errors.New("connection refused")
	}
	evs := make([]DBEvidence, len(ids))
	errs := make([]error, len(ids))
	for i, id := range ids {
		evs[i], errs[i] = f.fakeDB.ReadOperation(ctx, p, audit, id)
	}
	return evs, errs, nil
}

// fakeKafka counts the group reads and locates at the stored position.
type fakeKafka struct {
	groups atomic.Int64
}

func (k *fakeKafka) Group(context.Context, string, string) (GroupView, error) {
	k.groups.Add(1)
	return GroupView{GroupState: "Stable", GroupExists: true, Partitions: map[int32]PartitionView{0: {Committed: 5, LogEnd: 9}}}, nil
}

func (k *fakeKafka) Locate(_ context.Context, req LocateRequest) (Location, error) {
	return Location{Partition: req.Partition, Offset: req.Offset, Located: LocatedStored}, nil
}

// TestCollectMany: CollectMany returns for every id what Collect returns,
// reads the group once per call, and uses the batch read when the DB has
// one; a DB that cannot be reached is a *ConnError.
func TestCollectMany(t *testing.T) {
	p := &config.Pipeline{Name: "p", Topic: "t", Group: "g", MessageKey: "{biz_id}"}
	part, off := int32(0), int64(7)
	rows := map[string]DBEvidence{}
	var ids []string
	for i := range 40 {
		id := fmt.Sprintf("op-%02d", i)
		if i%10 == 3 {
			id = "partial-" + id
		}
		st := StateRow{Found: i%4 != 0, Status: "DONE"}
		if i%2 == 0 {
			st.Partition, st.Offset = &part, &off
		}
		rows[id] = DBEvidence{State: st, Now: time.Unix(int64(i), 0)}
		ids = append(ids, id)
	}
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprintf("batched=%v", batched), func(t *testing.T) {
			fd := &fakeDB{rows: rows}
			var db DB = fd
			var bd *fakeBatchDB
			if batched {
				bd = &fakeBatchDB{fakeDB: fd}
				db = bd
			}
			k := &fakeKafka{}
			c := &Collector{DB: db, Kafka: k, Timeout: time.Second}
			evs, err := c.CollectMany(context.Background(), p, ids)
			if err != nil {
				t.Fatal(err)
			}
			if n := k.groups.Load(); n != 1 {
				t.Errorf("group read %d times for one batch, want 1", n)
			}
			if batched && bd.batches.Load() != 1 {
				t.Errorf("%d batch reads, want 1", bd.batches.Load())
			}
			for i, id := range ids {
				one, err := c.Collect(context.Background(), p, id)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(evs[i], one) {
					t.Errorf("%s: CollectMany\n%+v\nCollect\n%+v", id, evs[i], one)
				}
			}
			if evs[3].Sources["mysql"] == StatusOK || evs[2].Sources["mysql"] != StatusOK {
				t.Errorf("partial read not recorded: %v / %v", evs[3].Sources, evs[2].Sources)
			}
			fd.down = true
			var ce *ConnError
			if _, err := c.CollectMany(context.Background(), p, ids); !errors.As(err, &ce) {
				t.Errorf("MySQL down: err = %v, want a *ConnError", err)
			}
		})
	}
}

// fakeHybridDB is a fakeBatchDB that also reads hybrid batches.
type fakeHybridDB struct {
	*fakeBatchDB
	hybrid atomic.Int64
}

func (f *fakeHybridDB) ReadOperationsHybrid(ctx context.Context, p *config.Pipeline, audit string, ids []string) ([]DBEvidence, []error, error) {
	f.hybrid.Add(1)
	f.batches.Add(-1) // ReadOperations below counts only the batched form
	return f.fakeBatchDB.ReadOperations(ctx, p, audit, ids)
}

// TestCollectManyPerOperation: with PerOperation, a HybridDB's rows come
// from one ReadOperationsHybrid call per CollectMany (never the batched
// form), a BatchDB's from one ReadOperation per operation, and a hybrid
// read that cannot reach MySQL is a *ConnError.
func TestCollectManyPerOperation(t *testing.T) {
	p := &config.Pipeline{Name: "p", Topic: "t", Group: "g", MessageKey: "{biz_id}"}
	rows := map[string]DBEvidence{}
	var ids []string
	for i := range 20 {
		id := fmt.Sprintf("op-%02d", i)
		rows[id] = DBEvidence{State: StateRow{Found: i%3 != 0, Status: "DONE"}, Now: time.Unix(int64(i), 0)}
		ids = append(ids, id)
	}
	for _, tc := range []struct {
		name                   string
		hybrid                 bool
		wantReads, wantHybrids int64
	}{
		{"BatchDB", false, 20, 0},
		{"HybridDB", true, 20, 1}, // the fake's hybrid read calls ReadOperation per id
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd := &fakeDB{rows: rows}
			bd := &fakeBatchDB{fakeDB: fd}
			var db DB = bd
			hd := &fakeHybridDB{fakeBatchDB: bd}
			if tc.hybrid {
				db = hd
			}
			c := &Collector{DB: db, Kafka: &fakeKafka{}, Timeout: time.Second, PerOperation: true}
			evs, err := c.CollectMany(context.Background(), p, ids)
			if err != nil {
				t.Fatal(err)
			}
			if n := bd.batches.Load(); n != 0 {
				t.Errorf("%d batched reads with PerOperation, want 0", n)
			}
			if n := hd.hybrid.Load(); n != tc.wantHybrids {
				t.Errorf("%d hybrid reads, want %d", n, tc.wantHybrids)
			}
			if n := fd.reads.Load(); n != tc.wantReads {
				t.Errorf("%d operation reads, want %d", n, tc.wantReads)
			}
			for i, id := range ids {
				one, err := c.Collect(context.Background(), p, id)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(evs[i], one) {
					t.Errorf("%s: CollectMany\n%+v\nCollect\n%+v", id, evs[i], one)
				}
			}
			fd.down = true
			var ce *ConnError
			if _, err := c.CollectMany(context.Background(), p, ids); !errors.As(err, &ce) {
				t.Errorf("MySQL down: err = %v, want a *ConnError", err)
			}
		})
	}
}
