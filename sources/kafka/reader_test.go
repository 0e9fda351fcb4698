package kafka_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/kafka"
)

const topic = "settlement-event"

func newReader(t testing.TB, brokers []string, timeout time.Duration) *kafka.Reader {
	t.Helper()
	r := kafka.New(config.Kafka{Brokers: brokers, Version: "3.5.0", ClientID: "opctl-test"}, timeout)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func setup(t testing.TB) (*testenv.Kafka, *kafka.Reader) {
	t.Helper()
	k := testenv.NewKafka(t, map[string]int32{topic: 3, "other": 1})
	return k, newReader(t, k.Brokers, 5*time.Second)
}

// countFetches counts the Fetch requests the cluster receives, without
// changing how they are answered.
func countFetches(k *testenv.Kafka) *atomic.Int64 {
	var n atomic.Int64
	k.Cluster.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

func TestGroupDoesNotExist(t *testing.T) {
	k, r := setup(t)
	k.Produce(t, topic, 0, "a", "1", nil, time.Time{})
	k.Produce(t, topic, 0, "b", "2", nil, time.Time{})
	k.Produce(t, topic, 2, "c", "3", nil, time.Time{})

	v, err := r.Group(context.Background(), topic, "nobody")
	if err != nil {
		t.Fatal(err)
	}
	if v.GroupExists {
		t.Errorf("GroupExists = true for a group the broker has never seen (state %q)", v.GroupState)
	}
	if v.GroupState != "Dead" {
		t.Errorf("GroupState = %q, want Dead", v.GroupState)
	}
	if len(v.Members) != 0 {
		t.Errorf("members = %+v", v.Members)
	}
	want := map[int32]sources.PartitionView{
		0: {Partition: 0, Committed: -1, LogStart: 0, LogEnd: 2},
		1: {Partition: 1, Committed: -1, LogStart: 0, LogEnd: 0},
		2: {Partition: 2, Committed: -1, LogStart: 0, LogEnd: 1},
	}
	if !mapsEqual(v.Partitions, want) {
		t.Errorf("partitions = %+v, want %+v", v.Partitions, want)
	}
}

func TestGroupNeverCommitted(t *testing.T) {
	// A live group that has not committed anything yet: every partition
	// reads Committed -1, and that is not an error.
	k, r := setup(t)
	k.Produce(t, topic, 1, "a", "1", nil, time.Time{})
	stop := k.JoinGroup(t, "fresh", []string{topic}, "worker-a")
	defer stop()

	v, err := r.Group(context.Background(), topic, "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if !v.GroupExists {
		t.Error("GroupExists = false for a group with a live member")
	}
	for p, pv := range v.Partitions {
		if pv.Committed != -1 {
			t.Errorf("partition %d: Committed = %d, want -1", p, pv.Committed)
		}
	}
	if v.Partitions[1].LogEnd != 1 {
		t.Errorf("partition 1 LogEnd = %d, want 1", v.Partitions[1].LogEnd)
	}
}

func TestGroupCommitted(t *testing.T) {
	k, r := setup(t)
	for i := range 6 {
		k.Produce(t, topic, 0, fmt.Sprint("k", i), "v", nil, time.Time{})
	}
	k.Produce(t, topic, 2, "x", "v", nil, time.Time{})
	k.Commit(t, "settlement-consumer", topic, 0, 4)
	k.Commit(t, "settlement-consumer", topic, 2, 1)

	v, err := r.Group(context.Background(), topic, "settlement-consumer")
	if err != nil {
		t.Fatal(err)
	}
	if !v.GroupExists {
		t.Error("GroupExists = false for a group with committed offsets")
	}
	if v.GroupState != "Empty" {
		t.Errorf("GroupState = %q, want Empty", v.GroupState)
	}
	want := map[int32]sources.PartitionView{
		0: {Partition: 0, Committed: 4, LogStart: 0, LogEnd: 6},
		1: {Partition: 1, Committed: -1, LogStart: 0, LogEnd: 0},
		2: {Partition: 2, Committed: 1, LogStart: 0, LogEnd: 1},
	}
	if !mapsEqual(v.Partitions, want) {
		t.Errorf("partitions = %+v, want %+v", v.Partitions, want)
	}
	if v.Topic != topic || v.Group != "settlement-consumer" {
		t.Errorf("topic/group = %q/%q", v.Topic, v.Group)
	}
}

func TestGroupCommittedOnOtherTopicOnly(t *testing.T) {
	// The group exists (it has offsets), just none on this topic.
	k, r := setup(t)
	k.Produce(t, "other", 0, "a", "1", nil, time.Time{})
	k.Commit(t, "g", "other", 0, 1)
	v, err := r.Group(context.Background(), topic, "g")
	if err != nil {
		t.Fatal(err)
	}
	if !v.GroupExists {
		t.Errorf("GroupExists = false, state %q", v.GroupState)
	}
	for p, pv := range v.Partitions {
		if pv.Committed != -1 {
			t.Errorf("partition %d: Committed = %d, want -1", p, pv.Committed)
		}
	}
}

func TestGroupActiveMembers(t *testing.T) {
	k, r := setup(t)
	stopA := k.JoinGroup(t, "live", []string{topic}, "worker-a")
	defer stopA()

	v, err := r.Group(context.Background(), topic, "live")
	if err != nil {
		t.Fatal(err)
	}
	if v.GroupState != "Stable" || !v.GroupExists {
		t.Fatalf("state %q exists %v, want Stable", v.GroupState, v.GroupExists)
	}
	if len(v.Members) != 1 {
		t.Fatalf("members = %+v", v.Members)
	}
	m := v.Members[0]
	if m.ClientID != "worker-a" || m.MemberID == "" || m.ClientHost == "" {
		t.Errorf("member = %+v", m)
	}
	if !slices.Equal(m.Partitions, []int32{0, 1, 2}) {
		t.Errorf("member partitions = %v, want [0 1 2]", m.Partitions)
	}
	for p, pv := range v.Partitions {
		if pv.Owner != "worker-a" {
			t.Errorf("partition %d owner = %q, want worker-a", p, pv.Owner)
		}
	}

	// A second member: the range assignor splits the partitions, and each
	// partition's owner is the member whose decoded assignment holds it.
	stopB := k.JoinGroup(t, "live", []string{topic}, "worker-b")
	defer stopB()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v, err = r.Group(context.Background(), topic, "live")
		if err != nil {
			t.Fatal(err)
		}
		assigned := 0
		for _, m := range v.Members {
			assigned += len(m.Partitions)
		}
		if v.GroupState == "Stable" && len(v.Members) == 2 && assigned == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("group never rebalanced to two members: %+v", v)
		}
		time.Sleep(100 * time.Millisecond)
	}
	owners := map[string][]int32{}
	for _, m := range v.Members {
		owners[m.ClientID] = m.Partitions
		for _, p := range m.Partitions {
			if got := v.Partitions[p].Owner; got != m.ClientID {
				t.Errorf("partition %d owner = %q, member %s holds it", p, got, m.ClientID)
			}
		}
	}
	if len(owners["worker-a"]) == 0 || len(owners["worker-b"]) == 0 {
		t.Errorf("assignment = %v, want both members to hold partitions", owners)
	}
}

// countRequests records the request keys the cluster receives.
func countRequests(k *testenv.Kafka) func() map[string]int {
	var mu sync.Mutex
	seen := map[string]int{}
	k.Cluster.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		seen[kmsg.NameForKey(req.Key())]++
		mu.Unlock()
		return nil, nil, false
	})
	return func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := maps.Clone(seen)
		clear(seen)
		return out
	}
}

func TestGroupRequestPattern(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 12})
	r := newReader(t, k.Brokers, 5*time.Second)
	k.Commit(t, "g", topic, 3, 0)
	requests := countRequests(k)
	if _, err := r.Group(context.Background(), topic, "g"); err != nil {
		t.Fatal(err)
	}
	first := requests()
	if _, err := r.Group(context.Background(), topic, "g"); err != nil {
		t.Fatal(err)
	}
	warm := requests()
	t.Logf("first call: %v; warm call: %v", first, warm)
	// Warm: one concurrent round, 12 partitions batched per request.
	want := map[string]int{"OffsetFetch": 1, "DescribeGroups": 1, "ListOffsets": 2}
	if !maps.Equal(warm, want) {
		t.Errorf("warm Group requests = %v, want %v", warm, want)
	}
	if first["Metadata"] != 1 || first["FindCoordinator"] != 1 || first["ListOffsets"] != 2 {
		t.Errorf("first Group requests = %v", first)
	}
}

func TestGroupUnknownTopic(t *testing.T) {
	_, r := setup(t)
	_, err := r.Group(context.Background(), "no-such-topic", "g")
	if err == nil {
		t.Fatal("Group on a missing topic succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-topic") {
		t.Errorf("error does not name the topic: %v", err)
	}
}

func TestLocateStored(t *testing.T) {
	k, r := setup(t)
	ts := time.Date(2025, 3, 1, 10, 0, 0, 123_000_000, time.UTC)
	k.Produce(t, topic, 1, "PAY-0", "before", nil, ts.Add(-time.Second))
	off := k.Produce(t, topic, 1, "PAY-1", `{"amount":30}`, map[string]string{"msg_id": "m-1", "trace": "t"}, ts)
	k.Produce(t, topic, 1, "PAY-2", "after", nil, ts.Add(time.Second))

	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Partitioner: "murmur2", Key: []byte("PAY-1"), MsgID: "m-1", Partition: 1, Offset: off,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedStored || loc.Partition != 1 || loc.Offset != off || loc.Message == nil {
		t.Fatalf("location = %+v", loc)
	}
	m := loc.Message
	if string(m.Key) != "PAY-1" || string(m.Value) != `{"amount":30}` || m.Partition != 1 || m.Offset != off {
		t.Errorf("message = %+v", m)
	}
	if m.Headers["msg_id"] != "m-1" || m.Headers["trace"] != "t" || len(m.Headers) != 2 {
		t.Errorf("headers = %v", m.Headers)
	}
	if !m.Timestamp.Equal(ts) {
		t.Errorf("timestamp = %v, want %v", m.Timestamp, ts)
	}
}

func TestLocateStoredMismatch(t *testing.T) {
	k, r := setup(t)
	off := k.Produce(t, topic, 0, "PAY-9", "v", map[string]string{"msg_id": "m-9"}, time.Time{})
	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Key: []byte("PAY-1"), MsgID: "m-1", Partition: 0, Offset: off,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedStored || loc.Partition != 0 || loc.Offset != off {
		t.Errorf("the stored position was not kept: %+v", loc)
	}
	if loc.Message != nil {
		t.Errorf("a record that is not the operation's was returned: %+v", loc.Message)
	}
	if !strings.Contains(loc.Detail, "does not match") || !strings.Contains(loc.Detail, "PAY-9") {
		t.Errorf("detail = %q", loc.Detail)
	}
}

func TestLocateInsideCompressedBatch(t *testing.T) {
	// A batching producer: the fetch returns the whole batch, starting
	// before the stored offset; records before it must be skipped.
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	k.Produce(t, topic, 1, "X", "x", nil, at.Add(-time.Hour))
	offs := k.ProduceBatch(t, topic, 1, []string{"PAY-1", "PAY-2", "PAY-3", "PAY-4"}, at)
	if offs[2] != offs[0]+2 {
		t.Fatalf("offsets %v", offs)
	}
	loc, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte("PAY-3"), Partition: 1, Offset: offs[2]})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Message == nil || string(loc.Message.Key) != "PAY-3" || string(loc.Message.Value) != "v-PAY-3" || loc.Message.Offset != offs[2] {
		t.Errorf("stored: %+v", loc)
	}
	loc, err = r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte("PAY-4"), Partition: 1, Offset: -1, Around: at})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedSearched || loc.Offset != offs[3] || !strings.HasPrefix(loc.Detail, "found after scanning 4 records") {
		t.Errorf("searched: %+v", loc)
	}
}

func TestLocateSearchAcrossFetches(t *testing.T) {
	// Values of 400 KB: a 2 MiB fetch holds a handful of records, so the
	// search takes several fetch round trips.
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	big := strings.Repeat("x", 400<<10)
	for i := range 20 {
		k.Produce(t, topic, 2, fmt.Sprint("OTHER-", i), big, nil, at.Add(time.Duration(i-10)*10*time.Second))
	}
	target := k.Produce(t, topic, 2, "PAY-1", "the one", nil, at.Add(100*time.Second))
	fetches := countFetches(k)
	loc, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 2, Offset: -1, Around: at})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Offset != target || loc.Message == nil || !strings.HasPrefix(loc.Detail, "found after scanning 21 records from offset 0") {
		t.Errorf("location = %+v", loc)
	}
	if n := fetches.Load(); n < 3 {
		t.Errorf("%d fetches; expected the scan to need several", n)
	}
}

func TestLocateStoredPastEnd(t *testing.T) {
	k, r := setup(t)
	k.Produce(t, topic, 0, "PAY-1", "v", nil, time.Time{})
	loc, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: 7})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedStored || loc.Offset != 7 || loc.Message != nil || !strings.Contains(loc.Detail, "log end 1") {
		t.Errorf("location = %+v", loc)
	}
}

func TestLocateStoredBelowLogStart(t *testing.T) {
	k, r := setup(t)
	var offs []int64
	for i := range 5 {
		offs = append(offs, k.Produce(t, topic, 2, fmt.Sprint("PAY-", i), "v", nil, time.Time{}))
	}
	k.DeleteRecords(t, topic, 2, 3)

	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Partitioner: "murmur2", Key: []byte("PAY-1"), Partition: 2, Offset: offs[1],
	})
	if err != nil {
		t.Fatal(err)
	}
	want := sources.Location{
		Partition: 2, Offset: 1, Located: sources.LocatedStored,
		Detail: "offset 1 is below log start 3: deleted by retention",
	}
	if !reflect.DeepEqual(loc, want) {
		t.Errorf("location = %+v\nwant       %+v", loc, want)
	}
	v, err := r.Group(context.Background(), topic, "g")
	if err != nil {
		t.Fatal(err)
	}
	if pv := v.Partitions[2]; pv.LogStart != 3 || pv.LogEnd != 5 {
		t.Errorf("partition 2 log = %d..%d, want 3..5", pv.LogStart, pv.LogEnd)
	}
}

// seedWindow writes, to partition p, records of other keys spread over an
// hour around at (one every 30s), with the target record (when target is
// not "") at at+targetAt. It returns the target's offset and the offset of
// the first record at or after at−5m.
func seedWindow(t testing.TB, k *testenv.Kafka, p int32, at time.Time, target string, targetAt time.Duration, headers map[string]string) (targetOff, windowStart int64) {
	t.Helper()
	targetOff, windowStart = -1, -1
	placed := target == ""
	for ts := at.Add(-30 * time.Minute); ts.Before(at.Add(30 * time.Minute)); ts = ts.Add(30 * time.Second) {
		if !placed && !ts.Before(at.Add(targetAt)) {
			targetOff = k.Produce(t, topic, p, target, "the one", headers, at.Add(targetAt))
			placed = true
			if windowStart < 0 && !at.Add(targetAt).Before(at.Add(-5*time.Minute)) {
				windowStart = targetOff
			}
		}
		off := k.Produce(t, topic, p, fmt.Sprintf("OTHER-%d", ts.Unix()), "noise", map[string]string{"msg_id": fmt.Sprint("n-", ts.Unix())}, ts)
		if windowStart < 0 && !ts.Before(at.Add(-5*time.Minute)) {
			windowStart = off
		}
	}
	return targetOff, windowStart
}

func TestLocateSearchByKey(t *testing.T) {
	k, r := setup(t)
	key := []byte("PAY-7")
	p, err := sources.PartitionFor("murmur2", key, 3)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	targetOff, windowStart := seedWindow(t, k, p, at, "PAY-7", 95*time.Second, map[string]string{"msg_id": "m-7"})
	fetches := countFetches(k)

	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Partitioner: "murmur2", Key: key, Partition: -1, Offset: -1, Around: at,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedSearched || loc.Partition != p || loc.Offset != targetOff || loc.Message == nil {
		t.Fatalf("location = %+v (target at %d)", loc, targetOff)
	}
	if string(loc.Message.Key) != "PAY-7" || string(loc.Message.Value) != "the one" || loc.Message.Headers["msg_id"] != "m-7" {
		t.Errorf("message = %+v", loc.Message)
	}
	scanned := targetOff - windowStart + 1
	if want := fmt.Sprintf("found after scanning %d records from offset %d", scanned, windowStart); !strings.HasPrefix(loc.Detail, want) {
		t.Errorf("detail = %q, want prefix %q (the search must start at the window, not the head)", loc.Detail, want)
	}
	if windowStart == 0 {
		t.Fatal("test setup: the window starts at the partition head")
	}
	if n := fetches.Load(); n != 1 {
		t.Errorf("%d fetches, want 1 (all records fit in one fetch)", n)
	}
}

func TestLocateSearchByMsgID(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	// The producer keyed the record by something else; the stored
	// partition is known but not the offset.
	targetOff, _ := seedWindow(t, k, 0, at, "ACCOUNT-3", -2*time.Minute, map[string]string{"msg_id": "m-42"})

	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Partitioner: "stored", Key: []byte("PAY-42"), MsgID: "m-42", Partition: 0, Offset: -1, Around: at,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedSearched || loc.Partition != 0 || loc.Offset != targetOff {
		t.Fatalf("location = %+v (target at %d)", loc, targetOff)
	}
	if loc.Message.Headers["msg_id"] != "m-42" || string(loc.Message.Key) != "ACCOUNT-3" {
		t.Errorf("message = %+v", loc.Message)
	}
}

func TestLocateSameKeyTwoMessages(t *testing.T) {
	// One order, two events with the same key (seed 003: PAID and
	// SHIPPED). The msg id picks the right one; the key alone finds the
	// first.
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	shipped := k.Produce(t, topic, 0, "ORDER-1", "SHIPPED", map[string]string{"msg_id": "m-shipped"}, at.Add(-time.Minute))
	paid := k.Produce(t, topic, 0, "ORDER-1", "PAID", map[string]string{"msg_id": "m-paid"}, at)
	ctx := context.Background()
	req := sources.LocateRequest{Topic: topic, Key: []byte("ORDER-1"), MsgID: "m-paid", Partition: 0, Offset: -1, Around: at}
	loc, err := r.Locate(ctx, req)
	if err != nil || loc.Offset != paid || string(loc.Message.Value) != "PAID" {
		t.Errorf("by msg id: %+v, %v", loc, err)
	}
	req.MsgID = ""
	loc, err = r.Locate(ctx, req)
	if err != nil || loc.Offset != shipped {
		t.Errorf("by key: %+v, %v", loc, err)
	}
	// A stored position pointing at the other event of the same key.
	stored := sources.LocateRequest{Topic: topic, Key: []byte("ORDER-1"), MsgID: "m-paid", Partition: 0, Offset: shipped}
	loc, err = r.Locate(ctx, stored)
	if err != nil || loc.Message != nil || !strings.Contains(loc.Detail, `msg_id "m-shipped", expected "m-paid"`) {
		t.Errorf("stored mismatch: %+v, %v", loc, err)
	}
}

func TestLocateNotFoundInWindow(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	// The only record with the key is 10 minutes after the operation.
	_, windowStart := seedWindow(t, k, 1, at, "PAY-5", 10*time.Minute, nil)

	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Partitioner: "murmur2", Key: []byte("PAY-5"), Partition: 1, Offset: -1, Around: at,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedUnknown || loc.Partition != 1 || loc.Offset != -1 || loc.Message != nil {
		t.Fatalf("location = %+v", loc)
	}
	// 10 minutes of noise at one record per 30s, from at−5m to at+5m, then
	// the 16 records stamped after the window's end that end it (the key's
	// record at at+10m among them does not count: it is past the window).
	end := windowStart + 21
	want := fmt.Sprintf("not found: scanned 37 records from offset %d (timestamp 2025-03-01T09:55:00Z, 5m0s before the operation) to %d; stopped: record timestamps passed 2025-03-01T10:05:00Z (5m0s after the operation) from offset %d on", windowStart, end+15, end)
	if loc.Detail != want {
		t.Errorf("detail = %q\nwant     %q", loc.Detail, want)
	}
}

func TestLocateLimit(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	seedWindow(t, k, 1, at, "PAY-5", 0, nil) // 10 noise records before it in the window
	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Key: []byte("PAY-5"), Partition: 1, Offset: -1, Around: at, Limit: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedUnknown || !strings.HasPrefix(loc.Detail, "not found: scanned 3 records") || !strings.HasSuffix(loc.Detail, "stopped: limit of 3 records reached") {
		t.Errorf("location = %+v", loc)
	}
}

func TestLocateSmallWindowSkipsEverythingBefore(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	targetOff, _ := seedWindow(t, k, 2, at, "PAY-8", 0, nil)
	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Key: []byte("PAY-8"), Partition: 2, Offset: -1, Around: at, Window: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Offset != targetOff || !strings.HasPrefix(loc.Detail, "found after scanning 1 records from offset "+fmt.Sprint(targetOff)) {
		t.Errorf("location = %+v", loc)
	}
}

func TestLocateNothingAfterWindowStart(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	k.Produce(t, topic, 0, "PAY-1", "old", nil, at.Add(-time.Hour))
	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: -1, Around: at,
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedUnknown || loc.Message != nil || !strings.Contains(loc.Detail, "nothing to search") {
		t.Errorf("location = %+v", loc)
	}
}

func TestLocateNoTimestampReadsNothing(t *testing.T) {
	k, r := setup(t)
	key := []byte("PAY-3")
	p, _ := sources.PartitionFor("fnv1a", key, 3)
	k.Produce(t, topic, p, "PAY-3", "v", nil, time.Time{})
	fetches := countFetches(k)

	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Partitioner: "fnv1a", Key: key, Partition: -1, Offset: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := sources.Location{
		Partition: p, Offset: -1, Located: sources.LocatedUnknown,
		Detail: "no timestamp known for the operation; the search never starts at the partition head",
	}
	if !reflect.DeepEqual(loc, want) {
		t.Errorf("location = %+v\nwant       %+v", loc, want)
	}
	if n := fetches.Load(); n != 0 {
		t.Errorf("%d fetch requests; a search without a timestamp must read nothing", n)
	}
}

func TestLocateRequestPattern(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	targetOff, _ := seedWindow(t, k, 0, at, "PAY-1", time.Minute, nil)
	ctx := context.Background()
	if _, err := r.Group(ctx, topic, "warm-up"); err != nil {
		t.Fatal(err)
	}
	requests := countRequests(k)

	stored := sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: targetOff}
	if loc, err := r.Locate(ctx, stored); err != nil || loc.Message == nil {
		t.Fatal(loc, err)
	}
	// One concurrent round: log start, log end, the record.
	if got, want := requests(), map[string]int{"ListOffsets": 2, "Fetch": 1}; !maps.Equal(got, want) {
		t.Errorf("stored Locate requests = %v, want %v", got, want)
	}

	searched := sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: -1, Around: at}
	if loc, err := r.Locate(ctx, searched); err != nil || loc.Offset != targetOff {
		t.Fatal(loc, err)
	}
	// One concurrent round (offset for the timestamp, log end), then one
	// fetch per ~2 MiB scanned.
	if got, want := requests(), map[string]int{"ListOffsets": 2, "Fetch": 1}; !maps.Equal(got, want) {
		t.Errorf("searched Locate requests = %v, want %v", got, want)
	}

	searched.Around = time.Time{}
	if loc, err := r.Locate(ctx, searched); err != nil || loc.Located != sources.LocatedUnknown {
		t.Fatal(loc, err)
	}
	if got := requests(); len(got) != 0 {
		t.Errorf("Locate without a timestamp sent %v; want nothing (metadata is cached)", got)
	}
}

func TestLocateStoredPartitionerWithoutPosition(t *testing.T) {
	_, r := setup(t)
	loc, err := r.Locate(context.Background(), sources.LocateRequest{
		Topic: topic, Partitioner: "stored", Key: []byte("PAY-3"), Partition: -1, Offset: -1, Around: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Located != sources.LocatedUnknown || loc.Partition != -1 || loc.Detail == "" {
		t.Errorf("location = %+v", loc)
	}
}

func TestPublishAndHelpers(t *testing.T) {
	_, r := setup(t)
	ctx := context.Background()
	p, off, err := r.Publish(ctx, topic, 2, []byte("PAY-1"), []byte(`{"replay":true}`), map[string]string{"msg_id": "m-1", "opctl-plan": "abc"})
	if err != nil {
		t.Fatal(err)
	}
	if p != 2 || off != 0 {
		t.Errorf("published to %d@%d, want 2@0", p, off)
	}
	loc, err := r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), MsgID: "m-1", Partition: p, Offset: off})
	if err != nil {
		t.Fatal(err)
	}
	if loc.Message == nil || loc.Message.Headers["opctl-plan"] != "abc" || string(loc.Message.Value) != `{"replay":true}` {
		t.Errorf("read back %+v", loc)
	}
	if _, off2, err := r.Publish(ctx, topic, 2, nil, []byte("x"), nil); err != nil || off2 != 1 {
		t.Errorf("second publish: offset %d, %v", off2, err)
	}

	topics, err := r.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(topics, topic) || !slices.Contains(topics, "other") || !slices.IsSorted(topics) {
		t.Errorf("topics = %v", topics)
	}
	n, err := r.PartitionCount(ctx, topic)
	if err != nil || n != 3 {
		t.Errorf("PartitionCount = %d, %v", n, err)
	}
	if _, err := r.PartitionCount(ctx, "missing"); err == nil {
		t.Error("PartitionCount of a missing topic succeeded")
	}
}

func TestConcurrentUse(t *testing.T) {
	k, r := setup(t)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	targetOff, _ := seedWindow(t, k, 0, at, "PAY-1", 0, nil)
	k.Commit(t, "g", topic, 0, 3)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			v, err := r.Group(context.Background(), topic, "g")
			if err == nil && v.Partitions[0].Committed != 3 {
				err = fmt.Errorf("goroutine %d: committed %d", i, v.Partitions[0].Committed)
			}
			errs <- err
		}()
		go func() {
			defer wg.Done()
			loc, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: -1, Around: at})
			if err == nil && loc.Offset != targetOff {
				err = fmt.Errorf("goroutine %d: located %+v", i, loc)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

func unusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestKafkaDownUnusedPort(t *testing.T) {
	addr := unusedAddr(t)
	r := newReader(t, []string{addr}, 2*time.Second)
	ctx := context.Background()

	_, err := r.Group(ctx, topic, "g")
	if err == nil {
		t.Fatal("Group against a closed port succeeded")
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("error does not name the broker %s: %v", addr, err)
	}
	_, err = r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("k"), Partition: 0, Offset: 5})
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Errorf("Locate: %v", err)
	}
	if _, _, err := r.Publish(ctx, topic, 0, []byte("k"), []byte("v"), nil); err == nil {
		t.Error("Publish against a closed port succeeded")
	}
}

func TestKafkaDownAfterUse(t *testing.T) {
	k, r := setup(t)
	k.Produce(t, topic, 0, "PAY-1", "v", nil, time.Time{})
	if _, err := r.Group(context.Background(), topic, "g"); err != nil {
		t.Fatal(err)
	}
	k.Cluster.Close()

	_, err := r.Group(context.Background(), topic, "g")
	if err == nil {
		t.Fatal("Group against a closed cluster succeeded")
	}
	if !strings.Contains(err.Error(), k.Brokers[0]) {
		t.Errorf("error does not name the broker: %v", err)
	}
	if _, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: 0}); err == nil {
		t.Error("Locate against a closed cluster succeeded")
	}
}

func TestKafkaUnresponsiveHonoursContext(t *testing.T) {
	// A listener that accepts and never answers: the call must end with
	// the context (here well before the reader's own timeout).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	r := newReader(t, []string{l.Addr().String()}, time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = r.Group(ctx, topic, "g")
	if err == nil {
		t.Fatal("Group against a silent broker succeeded")
	}
	if !strings.Contains(err.Error(), l.Addr().String()) {
		t.Errorf("error does not name the broker: %v", err)
	}

	// And the reader's own timeout, with a background context.
	r2 := newReader(t, []string{l.Addr().String()}, 300*time.Millisecond)
	_, err = r2.Group(context.Background(), topic, "g")
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Errorf("err = %v", err)
	}
}

func TestSCRAM(t *testing.T) {
	for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.EnableSASL(), kfake.Superuser(mech, "ops", "s3cr=t,x"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			good := kafka.New(config.Kafka{Brokers: c.ListenAddrs(), SASL: &config.SASL{Mechanism: mech, User: "ops", Password: "s3cr=t,x"}}, 5*time.Second)
			defer good.Close()
			if _, err := good.Group(context.Background(), topic, "g"); err != nil {
				t.Fatalf("with the right password: %v", err)
			}
			bad := kafka.New(config.Kafka{Brokers: c.ListenAddrs(), SASL: &config.SASL{Mechanism: mech, User: "ops", Password: "wrong"}}, 2*time.Second)
			defer bad.Close()
			_, err = bad.Group(context.Background(), topic, "g")
			if err == nil {
				t.Fatal("a wrong password was accepted")
			}
			if strings.Contains(err.Error(), "wrong") {
				t.Errorf("the error leaks the password: %v", err)
			}
		})
	}
}

func TestProtocolVersions(t *testing.T) {
	// The same answers whichever protocol generation the configuration
	// names (request versions differ: OffsetFetch v3..v8, Fetch v5..v12,
	// ListOffsets v2..v6, DescribeGroups v1..v5).
	k := testenv.NewKafka(t, map[string]int32{topic: 2})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	targetOff, _ := seedWindow(t, k, 1, at, "PAY-1", time.Minute, map[string]string{"msg_id": "m-1"})
	k.Commit(t, "g", topic, 1, 7)
	stop := k.JoinGroup(t, "live", []string{topic}, "worker-a")
	defer stop()
	for _, version := range []string{"0.11.0.2", "1.1.0", "2.0.0", "2.4.0", "2.8.0", "3.5.0", "4.1.0"} {
		t.Run(version, func(t *testing.T) {
			r := kafka.New(config.Kafka{Brokers: k.Brokers, Version: version}, 5*time.Second)
			defer r.Close()
			ctx := context.Background()
			v, err := r.Group(ctx, topic, "g")
			if err != nil {
				t.Fatal(err)
			}
			if v.Partitions[1].Committed != 7 || v.Partitions[1].LogEnd != 121 || !v.GroupExists {
				t.Errorf("group g = %+v", v)
			}
			v, err = r.Group(ctx, topic, "live")
			if err != nil {
				t.Fatal(err)
			}
			if v.GroupState != "Stable" || v.Partitions[0].Owner != "worker-a" || v.Partitions[1].Owner != "worker-a" {
				t.Errorf("group live = %+v", v)
			}
			loc, err := r.Locate(ctx, sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 1, Offset: -1, Around: at})
			if err != nil || loc.Offset != targetOff || loc.Message.Headers["msg_id"] != "m-1" {
				t.Errorf("searched = %+v, %v", loc, err)
			}
			loc, err = r.Locate(ctx, sources.LocateRequest{Topic: topic, MsgID: "m-1", Partition: 1, Offset: targetOff})
			if err != nil || loc.Message == nil || !loc.Message.Timestamp.Equal(at.Add(time.Minute)) {
				t.Errorf("stored = %+v, %v", loc, err)
			}
		})
	}
}

func TestTLS(t *testing.T) {
	caFile, serverTLS := selfSignedTLS(t)
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic), kfake.TLS(serverTLS))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok := kafka.New(config.Kafka{Brokers: c.ListenAddrs(), TLS: &config.TLS{Enabled: true, CAFile: caFile}}, 5*time.Second)
	defer ok.Close()
	if _, err := ok.Group(context.Background(), topic, "g"); err != nil {
		t.Fatalf("TLS with the CA: %v", err)
	}
	untrusted := kafka.New(config.Kafka{Brokers: c.ListenAddrs(), TLS: &config.TLS{Enabled: true}}, 2*time.Second)
	defer untrusted.Close()
	if _, err := untrusted.Group(context.Background(), topic, "g"); err == nil {
		t.Error("TLS without the CA succeeded")
	}
	missing := kafka.New(config.Kafka{Brokers: c.ListenAddrs(), TLS: &config.TLS{Enabled: true, CAFile: filepath.Join(t.TempDir(), "none.pem")}}, 2*time.Second)
	defer missing.Close()
	if _, err := missing.Group(context.Background(), topic, "g"); err == nil || !strings.Contains(err.Error(), "ca_file") {
		t.Errorf("missing CA file: %v", err)
	}
}

// selfSignedTLS makes a CA-less self-signed certificate for 127.0.0.1 and
// returns its PEM file and a server configuration using it.
func selfSignedTLS(t *testing.T) (string, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kfake"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return caFile, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}

func mapsEqual(a, b map[int32]sources.PartitionView) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func BenchmarkGroup(b *testing.B) {
	k := testenv.NewKafka(b, map[string]int32{topic: 12})
	for p := range int32(12) {
		k.Produce(b, topic, p, "k", "v", nil, time.Time{})
		k.Commit(b, "g", topic, p, 1)
	}
	r := newReader(b, k.Brokers, 5*time.Second)
	ctx := context.Background()
	if _, err := r.Group(ctx, topic, "g"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Group(ctx, topic, "g"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLocate(b *testing.B) {
	k := testenv.NewKafka(b, map[string]int32{topic: 3})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	targetOff, _ := seedWindow(b, k, 0, at, "PAY-1", 4*time.Minute, nil)
	r := newReader(b, k.Brokers, 5*time.Second)
	ctx := context.Background()
	req := sources.LocateRequest{Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: -1, Around: at}
	b.Run("searched", func(b *testing.B) {
		for b.Loop() {
			loc, err := r.Locate(ctx, req)
			if err != nil || loc.Offset != targetOff {
				b.Fatal(loc, err)
			}
		}
	})
	b.Run("stored", func(b *testing.B) {
		stored := req
		stored.Offset = targetOff
		for b.Loop() {
			loc, err := r.Locate(ctx, stored)
			if err != nil || loc.Message == nil {
				b.Fatal(loc, err)
			}
		}
	})
}

// TestNotKafka: a broker address where another service listens (an SSH
// server, MariaDB's port) is an error that names the address and what it
// sent, at once, without a buffer sized by the banner (before: sarama
// allocated 1.4 GB for "SSH-" and waited for it until the timeout;
// `fatal error: out of memory` under a memory limit).
func TestNotKafka(t *testing.T) {
	ssh := testenv.BannerServer(t, []byte(testenv.SSHBanner))
	cases := []struct{ name, addr, first string }{{"ssh", ssh, "SSH-2.0-"}}
	if testenv.MySQL(t) != nil {
		cases = append(cases, struct{ name, addr, first string }{"mariadb", "127.0.0.1:3306", `\x00\x00\x00\n`})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newReader(t, []string{tc.addr}, 20*time.Second)
			_, err := r.Group(context.Background(), topic, "g")
			var nk *kafka.NotKafkaError
			if !errors.As(err, &nk) || nk.Addr != tc.addr || !strings.Contains(err.Error(), tc.addr+" does not speak Kafka") ||
				!strings.Contains(err.Error(), tc.first) {
				t.Fatalf("Group: %v, want a NotKafkaError naming %s", err, tc.addr)
			}
			if _, err := r.Locate(context.Background(), sources.LocateRequest{Topic: topic, Partition: 0, Offset: 0}); !errors.As(err, &nk) {
				t.Errorf("Locate: %v, want a NotKafkaError", err)
			}
		})
	}
}
