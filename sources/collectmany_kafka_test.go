package sources_test

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	kafkasrc "github.com/opctl-dev/opctl/sources/kafka"
)

// stateRows is a DB that answers each operation's state row from a map.
type stateRows map[string]sources.StateRow

func (s stateRows) ReadOperation(_ context.Context, _ *config.Pipeline, _ string, id string) (sources.DBEvidence, error) {
	return sources.DBEvidence{Now: time.Date(2025, 3, 1, 11, 0, 0, 0, time.UTC), State: s[id]}, nil
}

// TestCollectManyLocateMany: with a Kafka that is a BatchLocator (the
// Reader, on kfake), CollectMany reads the stored positions of a batch with
// one LocateMany (the log bounds once, the searches of a partition with one
// read) and returns for every operation what Collect returns: stored
// positions that hold the operation's message, that hold another's, past
// the log end, and operations without a stored position, searched.
func TestCollectManyLocateMany(t *testing.T) {
	const topic = "settlement-event"
	k := testenv.NewKafka(t, map[string]int32{topic: 3})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	rows := stateRows{}
	var ids []string
	offs := map[string][2]int64{}
	for i := range 60 {
		id := fmt.Sprintf("op-%02d", i)
		p, err := sources.PartitionFor("murmur2", []byte(id), 3)
		if err != nil {
			t.Fatal(err)
		}
		ts := at.Add(time.Duration(i) * time.Second)
		off := k.Produce(t, topic, p, id, `{"amount":30}`, map[string]string{"msg_id": "m-" + id}, ts)
		offs[id] = [2]int64{int64(p), off}
		ids = append(ids, id)
	}
	searched := 0
	for i, id := range ids {
		created := at.Add(time.Duration(i) * time.Second)
		st := sources.StateRow{Found: true, Status: "PENDING", MsgID: "m-" + id, CreatedAt: &created}
		p, off := int32(offs[id][0]), offs[id][1]
		switch {
		case i%6 == 0:
			searched++ // no stored position
		case i%6 == 1:
			other := ids[(i+1)%len(ids)] // another operation's record
			p, off = int32(offs[other][0]), offs[other][1]
			st.Partition, st.Offset = &p, &off
		case i%6 == 2:
			off += 1000 // past the log end
			st.Partition, st.Offset = &p, &off
		default:
			st.Partition, st.Offset = &p, &off
		}
		rows[id] = st
	}

	kr := kafkasrc.New(config.Kafka{Brokers: k.Brokers, Version: "3.5.0", ClientID: "opctl-test"}, 5*time.Second)
	t.Cleanup(func() { _ = kr.Close() })
	p := &config.Pipeline{Name: "settle", Topic: topic, Group: "g", Partitioner: "murmur2", MessageKey: "{biz_id}"}
	c := &sources.Collector{DB: rows, Kafka: kr, Timeout: 5 * time.Second}
	ctx := context.Background()
	if _, err := c.Collect(ctx, p, ids[0]); err != nil { // metadata warmed up
		t.Fatal(err)
	}

	var mu sync.Mutex
	listOffsets, fetches := 0, 0
	k.Cluster.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		switch req.Key() {
		case int16(kmsg.ListOffsets):
			listOffsets++
		case int16(kmsg.Fetch):
			fetches++
		}
		return nil, nil, false
	})
	evs, err := c.CollectMany(ctx, p, ids)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	got, fetched := listOffsets, fetches
	mu.Unlock()
	// Each partition's stored positions in one fetch, its searches in one
	// read: at most two fetches a partition (one Locate each: 50 and more).
	if fetched > 6 {
		t.Errorf("CollectMany sent %d fetches, want at most 6", fetched)
	}
	// The group view's two; LocateMany's two for the stored positions
	// (start and end of every partition, one broker), and for the
	// searches one (end) and one per search (its window's start).
	if want := 5 + searched; got != want {
		t.Errorf("CollectMany sent %d ListOffsets, want %d (one Locate per stored position would send %d)", got, want, 2+2*len(ids))
	}
	found := 0
	for i, id := range ids {
		one, err := c.Collect(ctx, p, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(evs[i], one) {
			t.Errorf("%s: CollectMany\n%+v\nCollect\n%+v", id, evs[i].Kafka, one.Kafka)
		}
		if evs[i].Kafka.Message != nil {
			found++
		}
	}
	if want := len(ids) * 4 / 6; found != want {
		t.Errorf("%d messages read back, want %d (the valid stored positions and the searched ones)", found, want)
	}
}
