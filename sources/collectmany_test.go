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
