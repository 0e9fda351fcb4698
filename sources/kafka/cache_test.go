package kafka_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/kafka"
)

// fetchOffsets records the offset each Fetch request the cluster receives
// starts at (its first partition's), without changing how it is answered.
func fetchOffsets(k *testenv.Kafka) (get func() []int64, reset func()) {
	var mu sync.Mutex
	var offs []int64
	k.Cluster.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if f, ok := req.(*kmsg.FetchRequest); ok {
			for _, t := range f.Topics {
				for _, p := range t.Partitions {
					offs = append(offs, p.FetchOffset)
				}
			}
		}
		return nil, nil, false
	})
	return func() []int64 {
			mu.Lock()
			defer mu.Unlock()
			return append([]int64(nil), offs...)
		}, func() {
			mu.Lock()
			defer mu.Unlock()
			offs = nil
		}
}

// cachedReader is a reader with a search cache of the default bound.
func cachedReader(t testing.TB, k *testenv.Kafka, level string) *kafka.Reader {
	t.Helper()
	r := isolationReader(t, k, level)
	r.CacheSearches(0)
	return r
}

// sameLocations fails unless got is want, request by request.
func sameLocations(t *testing.T, what string, got, want []sources.Location, gotErrs, wantErrs []error) {
	t.Helper()
	for i := range want {
		if fmt.Sprint(gotErrs[i]) != fmt.Sprint(wantErrs[i]) || !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: request %d:\ncached   %+v, %v\nuncached %+v, %v", what, i, got[i], gotErrs[i], want[i], wantErrs[i])
		}
	}
}

// A second batch of the same searches (every message of a key, the watch's
// searches of seed 003's orders) reads from the cache what the first one
// read and fetches only the records written since: every fetch starts at
// or past the first batch's log end. Its answers are those of a reader
// without a cache.
func TestSearchCacheFetchesOnlyTheTail(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	first := produceLoad(t, k, topic, 1, 400, at)[0]
	end := first[len(first)-1] + 1
	var reqs []sources.LocateRequest
	for i := 380; i < 400; i++ {
		reqs = append(reqs, sources.LocateRequest{Topic: topic, Partition: 0, Offset: -1, All: true,
			Key: []byte(fmt.Sprintf("PAY-0-%d", i)), Around: at.Add(time.Duration(i) * time.Second)})
	}
	offsets, reset := fetchOffsets(k)
	r, plain := cachedReader(t, k, ""), isolationReader(t, k, "")
	ctx := context.Background()
	locs, errs := r.LocateMany(ctx, reqs)
	want, wantErrs := plain.LocateMany(ctx, reqs)
	sameLocations(t, "first batch", locs, want, errs, wantErrs)
	for i, loc := range locs {
		if len(loc.Messages) != 1 {
			t.Fatalf("request %d: %d messages, want 1: %+v", i, len(loc.Messages), loc)
		}
	}

	// The tail: 50 records more, one of them of a searched key.
	produceLoad(t, k, topic, 1, 50, at.Add(400*time.Second))
	k.Produce(t, topic, 0, "PAY-0-390", "again", nil, at.Add(450*time.Second))
	reset()
	locs, errs = r.LocateMany(ctx, reqs)
	got := offsets()
	want, wantErrs = plain.LocateMany(ctx, reqs)
	sameLocations(t, "second batch", locs, want, errs, wantErrs)
	if len(got) == 0 {
		t.Fatal("the second batch fetched nothing: the tail was not read")
	}
	for _, off := range got {
		if off < end {
			t.Errorf("the second batch fetched from offset %d, below the first batch's log end %d (fetches from %v): the cache was not read", off, end, got)
		}
	}
	if n := len(locs[10].Messages); n != 2 {
		t.Errorf("PAY-0-390: %d messages, want 2 (the one in the tail too): %+v", n, locs[10])
	}
}

// A record of a transaction still open is not kept as committed: before
// its commit a search through the cache answers as one without it
// (read_committed: not found, the log ends at the last stable offset;
// read_uncommitted: its position, not copied), and after the commit
// marker the same search finds it committed, its message read back; the
// aborted one is never read back.
func TestSearchCacheOpenTransaction(t *testing.T) {
	for _, level := range levels {
		t.Run(levelName(level), func(t *testing.T) {
			k := testenv.NewKafka(t, map[string]int32{topic: 1})
			at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
			noise(t, k, 0, at.Add(-2*time.Minute), at)
			commit, abort := k.Transactional(t, "cache-commit"), k.Transactional(t, "cache-abort")
			commit.Begin()
			abort.Begin()
			committedOff := commit.Produce(topic, 0, "PAY-C", "c", map[string]string{"msg_id": "m-c"}, at.Add(10*time.Second))
			abortedOff := abort.Produce(topic, 0, "PAY-A", "a", map[string]string{"msg_id": "m-a"}, at.Add(11*time.Second))
			noise(t, k, 0, at.Add(20*time.Second), at.Add(3*time.Minute))
			reqs := []sources.LocateRequest{
				{Topic: topic, Partition: 0, Offset: -1, Key: []byte("PAY-C"), MsgID: "m-c", Around: at},
				{Topic: topic, Partition: 0, Offset: -1, Key: []byte("PAY-A"), MsgID: "m-a", Around: at},
				{Topic: topic, Partition: 0, Offset: -1, Key: []byte("PAY-C"), All: true, Around: at},
			}
			r, plain := cachedReader(t, k, level), isolationReader(t, k, level)
			ctx := context.Background()
			check := func(what string) []sources.Location {
				t.Helper()
				locs, errs := r.LocateMany(ctx, reqs)
				want, wantErrs := plain.LocateMany(ctx, reqs)
				sameLocations(t, what+": LocateMany", locs, want, errs, wantErrs)
				for i, req := range reqs {
					loc, err := r.Locate(ctx, req)
					sameLocations(t, what+": Locate", []sources.Location{loc}, want[i:i+1], []error{err}, wantErrs[i:i+1])
				}
				return locs
			}
			for i, loc := range check("open") {
				if loc.Message != nil {
					t.Errorf("open: request %d: a record of an open transaction read back: %+v", i, loc)
				}
				if level != config.ReadCommitted && !strings.Contains(loc.Detail, "not known to have ended") {
					t.Errorf("open: request %d: %q, want the record's position, not copied", i, loc.Detail)
				}
			}
			commit.End(true)
			abort.End(false)
			locs := check("ended")
			if loc := locs[0]; loc.Message == nil || loc.Offset != committedOff || string(loc.Message.Value) != "c" {
				t.Errorf("committed: %+v, want the message at %d", loc, committedOff)
			}
			if loc := locs[1]; loc.Message != nil || (level != config.ReadCommitted && loc.Offset != abortedOff) {
				t.Errorf("aborted: %+v (at %d)", loc, abortedOff)
			}
			if loc := locs[2]; len(loc.Messages) != 1 || loc.Messages[0].Offset != committedOff {
				t.Errorf("committed, all: %+v", loc)
			}
		})
	}
}

// Retention deletes the start of the log after a search read it through
// the cache: a search for a deleted record does not find it, and the
// newest records of the day are read from the new log start, exactly as
// without the cache (the log start is read with the log end each batch).
func TestSearchCacheRetention(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	produceLoad(t, k, topic, 1, 100, at)
	reqs := []sources.LocateRequest{
		// The newest 50 records: from offset 50, then from the new log start.
		{Topic: topic, Partition: 0, Offset: -1, Key: []byte("PAY-0-60"), Newest: true, Limit: 50, Around: at.Add(100 * time.Second), Window: 24 * time.Hour},
		// From the log start on: offset 20's record, then deleted.
		{Topic: topic, Partition: 0, Offset: -1, Key: []byte("PAY-0-20"), All: true, Around: at.Add(20 * time.Second)},
		{Topic: topic, Partition: 0, Offset: -1, Key: []byte("PAY-0-80"), Around: at.Add(80 * time.Second)},
	}
	r, plain := cachedReader(t, k, ""), isolationReader(t, k, "")
	ctx := context.Background()
	locs, errs := r.LocateMany(ctx, reqs)
	for i, loc := range locs {
		if errs[i] != nil || loc.Message == nil {
			t.Fatalf("before: request %d: %+v, %v", i, loc, errs[i])
		}
	}
	k.DeleteRecords(t, topic, 0, 70)
	locs, errs = r.LocateMany(ctx, reqs)
	want, wantErrs := plain.LocateMany(ctx, reqs)
	sameLocations(t, "after retention: LocateMany", locs, want, errs, wantErrs)
	for i, req := range reqs {
		loc, err := r.Locate(ctx, req)
		sameLocations(t, "after retention: Locate", []sources.Location{loc}, want[i:i+1], []error{err}, wantErrs[i:i+1])
	}
	for i := range 2 {
		if locs[i].Message != nil || !strings.Contains(locs[i].Detail, "from offset 70") {
			t.Errorf("request %d: %+v, want not found, searched from the new log start 70", i, locs[i])
		}
	}
	if locs[2].Message == nil {
		t.Errorf("record past the new log start not found: %+v", locs[2])
	}
}

// A topic deleted and created again starts its offsets at 0: the cache
// forgets the old log (its log end is below what the cache holds) and a
// search reads the new records at the old offsets.
func TestSearchCacheRecreatedTopic(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	produceLoad(t, k, topic, 1, 100, at)
	r, plain := cachedReader(t, k, ""), isolationReader(t, k, "")
	ctx := context.Background()
	req := sources.LocateRequest{Topic: topic, Partition: 0, Offset: -1, Key: []byte("PAY-0-20"), Around: at.Add(20 * time.Second)}
	if loc, err := r.Locate(ctx, req); err != nil || loc.Message == nil {
		t.Fatalf("before: %+v, %v", loc, err)
	}

	admin, err := sarama.NewClusterAdmin(k.Brokers, k.Config("cache-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	later := at.Add(time.Hour)
	produceLoad(t, k, topic, 1, 30, later)
	req.Around = later.Add(20 * time.Second)
	loc, err := r.Locate(ctx, req)
	want, wantErr := plain.Locate(ctx, req)
	sameLocations(t, "recreated", []sources.Location{loc}, []sources.Location{want}, []error{err}, []error{wantErr})
	if loc.Message == nil || !loc.Message.Timestamp.Equal(later.Add(20*time.Second)) {
		t.Errorf("recreated: %+v, want the new record of PAY-0-20", loc)
	}
}

// BenchmarkSearchCache: the watch's searches of seed 003's orders (every
// message of a key, no stored position) for fresh operations, in a
// partition of 5 minutes × 100 records/s (30,000 records of 300 bytes):
// 10 consecutive batches of 64 such searches (LocateMany), each reading
// the whole window up to the log end, with the reader's search cache
// (emptied at the start of each op: the first batch fills it) and without;
// and one batch on a warm cache.
func BenchmarkSearchCache(b *testing.B) {
	const n, perSecond = 30000, 100
	k := childKafka(b, topic, 1)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	produceLoadEvery(b, k, topic, 1, n, at, time.Second/perSecond)
	reqs := make([]sources.LocateRequest, 64)
	for j := range reqs {
		i := n - 1 - 7*j // the newest operations
		reqs[j] = sources.LocateRequest{Topic: topic, Partition: 0, Offset: -1, All: true,
			Key: []byte(fmt.Sprintf("PAY-0-%d", i)), Around: at.Add(time.Duration(i) * time.Second / perSecond)}
	}
	ctx := context.Background()
	batch := func(b *testing.B, r *kafka.Reader) {
		locs, errs := r.LocateMany(ctx, reqs)
		for i, loc := range locs {
			if errs[i] != nil || len(loc.Messages) != 1 {
				b.Fatalf("request %d: %+v, %v", i, loc, errs[i])
			}
		}
	}
	for _, cached := range []bool{false, true} {
		name := "uncached"
		if cached {
			name = "cached"
		}
		b.Run(name, func(b *testing.B) {
			r := newReader(b, k.Brokers, 30*time.Second)
			b.ReportAllocs()
			for b.Loop() {
				if cached {
					r.CacheSearches(0) // a new, empty cache
				}
				for range 10 {
					batch(b, r)
				}
			}
		})
	}
	// One batch (not 10) on a cache the previous ones filled: what each
	// batch after the first costs.
	b.Run("cached-warm-batch", func(b *testing.B) {
		r := newReader(b, k.Brokers, 30*time.Second)
		r.CacheSearches(0)
		batch(b, r)
		b.ReportAllocs()
		for b.Loop() {
			batch(b, r)
		}
	})
}

// A compacted topic (cleanup.policy=compact) is not cached: compaction
// removes records a cache would still hold. The second search fetches
// what the first one did.
func TestSearchCacheCompactedTopic(t *testing.T) {
	k := testenv.NewKafka(t, map[string]int32{topic: 1})
	admin, err := sarama.NewClusterAdmin(k.Brokers, k.Config("cache-admin"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	const compacted = "compacted-events"
	policy := "compact"
	if err := admin.CreateTopic(compacted, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"cleanup.policy": &policy}}, false); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	for name := range map[string]bool{topic: true, compacted: true} {
		produceLoad(t, k, name, 1, 50, at)
	}
	offsets, reset := fetchOffsets(k)
	r := cachedReader(t, k, "")
	ctx := context.Background()
	for _, c := range []struct {
		topic string
		again bool // the second search fetches from the start again
	}{{topic, false}, {compacted, true}} {
		req := sources.LocateRequest{Topic: c.topic, Partition: 0, Offset: -1, All: true, Key: []byte("PAY-0-20"), Around: at.Add(20 * time.Second)}
		for range 2 {
			reset()
			if loc, err := r.Locate(ctx, req); err != nil || len(loc.Messages) != 1 {
				t.Fatalf("%s: %+v, %v", c.topic, loc, err)
			}
		}
		if again := len(offsets()) > 0; again != c.again {
			t.Errorf("%s: the second search fetched %v, want fetching again %v", c.topic, offsets(), c.again)
		}
	}
}
