package kafka_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/kafka"
)

// produceLoad writes n records to each of the topic's first parts
// partitions as a lingering producer does (batches of 8 records, no
// compression): key "PAY-<p>-<i>", a 300-byte value, a msg_id header
// "m-<p>-<i>", stamped from at on, one a second. It returns the records'
// offsets by partition, in order.
func produceLoad(tb testing.TB, k *testenv.Kafka, topic string, parts int32, n int, at time.Time) map[int32][]int64 {
	tb.Helper()
	return produceLoadEvery(tb, k, topic, parts, n, at, time.Second)
}

// produceLoadEvery is produceLoad with the records stamped every step.
func produceLoadEvery(tb testing.TB, k *testenv.Kafka, topic string, parts int32, n int, at time.Time, step time.Duration) map[int32][]int64 {
	tb.Helper()
	conf := k.Config("load")
	conf.Producer.Flush.Messages = 8
	conf.Producer.Flush.MaxMessages = 8
	conf.Producer.Flush.Frequency = 50 * time.Millisecond
	prod, err := sarama.NewAsyncProducer(k.Brokers, conf)
	if err != nil {
		tb.Fatal(err)
	}
	defer prod.Close()
	value := `{"amount":30,"pad":"` + strings.Repeat("x", 280) + `"}`
	type meta struct {
		p int32
		i int
	}
	offs := map[int32][]int64{}
	for p := range parts {
		offs[p] = make([]int64, n)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 1)
	wg.Go(func() {
		for range int(parts) * n {
			select {
			case m := <-prod.Successes():
				mt := m.Metadata.(meta)
				offs[mt.p][mt.i] = m.Offset
			case perr := <-prod.Errors():
				select {
				case errc <- perr.Err:
				default:
				}
				return
			}
		}
	})
	for i := range n {
		for p := range parts {
			prod.Input() <- &sarama.ProducerMessage{
				Topic: topic, Partition: p, Timestamp: at.Add(time.Duration(i) * step), Metadata: meta{p, i},
				Key:     sarama.StringEncoder(fmt.Sprintf("PAY-%d-%d", p, i)),
				Value:   sarama.StringEncoder(value),
				Headers: []sarama.RecordHeader{{Key: []byte("msg_id"), Value: []byte(fmt.Sprintf("m-%d-%d", p, i))}},
			}
		}
	}
	wg.Wait()
	select {
	case err := <-errc:
		tb.Fatal(err)
	default:
	}
	return offs
}

// storedLoad is 512 requests at stored positions spread over the last
// quarter of each partition of a 4-partition topic of 4000 records each
// (a watch's batch: recent operations of a busy topic).
func storedLoad(b *testing.B) (*testenv.Kafka, []sources.LocateRequest) {
	const parts, n = 4, 4000
	k := childKafka(b, topic, parts)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	offs := produceLoad(b, k, topic, parts, n, at)
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := make([]sources.LocateRequest, 512)
	for j := range reqs {
		p := int32(j % parts)
		i := n*3/4 + rng.IntN(n/4)
		reqs[j] = sources.LocateRequest{Topic: topic, Partitioner: "murmur2", Key: []byte(fmt.Sprintf("PAY-%d-%d", p, i)),
			MsgID: fmt.Sprintf("m-%d-%d", p, i), Partition: p, Offset: offs[p][i]}
	}
	return k, reqs
}

// BenchmarkLocateMany: 512 operations at stored positions, located
// together (LocateMany), and one at a time (Locate) 16 at a time, as
// CollectMany located them before LocateMany.
func BenchmarkLocateMany(b *testing.B) {
	k, reqs := storedLoad(b)
	r := newReader(b, k.Brokers, 10*time.Second)
	ctx := context.Background()
	check := func(i int, loc sources.Location, err error) {
		if err != nil || loc.Message == nil {
			b.Fatalf("request %d: %+v, %v", i, loc, err)
		}
	}
	b.Run("LocateMany", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			locs, errs := r.LocateMany(ctx, reqs)
			for i := range reqs {
				check(i, locs[i], errs[i])
			}
		}
	})
	b.Run("Locate", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sem := make(chan struct{}, 16)
			var wg sync.WaitGroup
			for i, req := range reqs {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					loc, err := r.Locate(ctx, req)
					check(i, loc, err)
				})
			}
			wg.Wait()
		}
	})
}

// written is a record the equivalence test wrote: its key and msg_id, and
// when it would be stamped by a producer whose clock is right.
type written struct {
	key, msgID string
	at         time.Time
}

// equivalenceLog writes, to a 3-partition topic (records stamped one a
// second, one in six of the plain ones 3 minutes ahead): partition 0, plain
// records and compressed batches, the first ones then deleted by
// retention; partition 1, transactions aborted and committed (records of
// 2 KB, so that a marker is in some answers and not in others), plain
// records between them, and a transaction left open at its end followed
// by plain records; partition 2, records of 20 KB (a fetch of LocateMany
// holds a few). It returns every data record by partition and offset.
func equivalenceLog(t *testing.T, k *testenv.Kafka, rng *rand.Rand) map[int32]map[int64]written {
	t.Helper()
	recs := map[int32]map[int64]written{0: {}, 1: {}, 2: {}}
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	n := 0
	plain := func(p int32, value string) {
		n++
		key, id := fmt.Sprintf("PAY-%d", n), fmt.Sprintf("m-%d", n)
		ts := at.Add(time.Duration(n) * time.Second)
		if rng.IntN(6) == 0 {
			ts = ts.Add(3 * time.Minute) // a producer's clock running ahead
		}
		off := k.Produce(t, topic, p, key, value, map[string]string{"msg_id": id}, ts)
		recs[p][off] = written{key, id, at.Add(time.Duration(n) * time.Second)}
	}
	for i := range 60 {
		if i%10 == 5 {
			keys := []string{fmt.Sprintf("B-%d-a", i), fmt.Sprintf("B-%d-b", i), fmt.Sprintf("B-%d-c", i)}
			for j, off := range k.ProduceBatch(t, topic, 0, keys, at) {
				recs[0][off] = written{key: keys[j], at: at}
			}
			continue
		}
		plain(0, "v")
	}
	k.DeleteRecords(t, topic, 0, 12)
	for off := range recs[0] {
		if off < 12 {
			delete(recs[0], off)
		}
	}

	mid := strings.Repeat("t", 2<<10)
	tx := k.Transactional(t, "equivalence-tx")
	for i := range 16 {
		for range 1 + rng.IntN(3) {
			plain(1, "v")
		}
		tx.Begin()
		for range 1 + rng.IntN(3) {
			n++
			key, id := fmt.Sprintf("PAY-%d", n), fmt.Sprintf("m-%d", n)
			off := tx.Produce(topic, 1, key, mid, map[string]string{"msg_id": id}, at.Add(time.Duration(n)*time.Second))
			recs[1][off] = written{key, id, at.Add(time.Duration(n) * time.Second)}
		}
		tx.End(i%3 != 0)
	}
	open := k.Transactional(t, "equivalence-open")
	open.Begin()
	n++
	off := open.Produce(topic, 1, fmt.Sprintf("PAY-%d", n), mid, map[string]string{"msg_id": fmt.Sprintf("m-%d", n)}, at.Add(time.Duration(n)*time.Second))
	recs[1][off] = written{fmt.Sprintf("PAY-%d", n), fmt.Sprintf("m-%d", n), at.Add(time.Duration(n) * time.Second)}
	for range 5 {
		plain(1, "v")
	}

	big := strings.Repeat("b", 20<<10)
	for range 30 {
		plain(2, big)
	}
	return recs
}

// TestLocateManyEquivalence: for a seeded random mix of stored positions
// (valid; deleted by retention; past the log end; a transaction marker;
// key or msg_id mismatched; in aborted, committed and still open
// transactions; in a partition the topic does not have; of a topic that
// does not exist; the same position twice) and requests without a stored
// position, LocateMany(reqs)[i] is Locate(reqs[i]), field by field, under
// every isolation level.
func TestLocateManyEquivalence(t *testing.T) {
	for _, level := range levels {
		t.Run(levelName(level), func(t *testing.T) {
			k, reqs := equivalenceSetup(t)
			ref := isolationReader(t, k, level)
			wants, wantErrs := locateEach(ref, reqs)
			equivalent(t, ref, level, reqs, wants, wantErrs, 1)
		})
	}
}

// TestLocateManyEquivalenceCache: TestLocateManyEquivalence's requests on
// a reader with a search cache (CacheSearches), LocateMany twice (the
// second served from the cache), and Locate through it, and on one so
// small that it evicts all along: the answers of Locate on a reader
// without a cache, field by field.
func TestLocateManyEquivalenceCache(t *testing.T) {
	for _, level := range levels {
		// A cluster of its own for each level: the open transaction of
		// the log is aborted by the cluster 40s after it began.
		t.Run(levelName(level), func(t *testing.T) {
			k, reqs := equivalenceSetup(t)
			wants, wantErrs := locateEach(isolationReader(t, k, level), reqs)
			for _, c := range []struct {
				name  string
				bytes int64
			}{{"cache", kafka.DefaultSearchCacheBytes}, {"small cache", 64 << 10}} {
				t.Run(c.name, func(t *testing.T) {
					r := isolationReader(t, k, level)
					r.CacheSearches(c.bytes)
					equivalent(t, r, level, reqs, wants, wantErrs, 2)
				})
			}
		})
	}
}

// equivalenceSetup writes equivalenceLog to a 3-partition topic of a new
// cluster and draws the seeded random requests of the equivalence tests.
func equivalenceSetup(t *testing.T) (*testenv.Kafka, []sources.LocateRequest) {
	k := testenv.NewKafka(t, map[string]int32{topic: 3})
	rng := rand.New(rand.NewPCG(26, 512))
	recs := equivalenceLog(t, k, rng)
	ends := map[int32]int64{}
	for p, rs := range recs {
		for off := range rs {
			ends[p] = max(ends[p], off+1)
		}
	}
	var reqs []sources.LocateRequest
	kinds := map[string]int{}
	for len(reqs) < 600 {
		p := int32(rng.IntN(3))
		req := sources.LocateRequest{Topic: topic, Partitioner: "murmur2", Partition: p, Offset: rng.Int64N(ends[p] + 3)}
		w, ok := recs[p][req.Offset]
		req.Key, req.MsgID = []byte(w.key), w.msgID
		kind := "no record"
		switch x := rng.IntN(20); {
		case x == 0:
			req.Partition, kind = 3+int32(rng.IntN(3)), "no such partition"
		case x == 1:
			req.Topic, kind = "no-such-topic", "no such topic"
		case x <= 5:
			req, kind = searchedRequest(rng, p, w)
		case x == 6 && ok:
			req.Key, kind = []byte("OTHER"), "key mismatch"
		case x == 7 && ok && w.msgID != "":
			req.MsgID, kind = "m-other", "msg_id mismatch"
		case ok:
			kind = "stored"
		}
		kinds[kind]++
		reqs = append(reqs, req)
		if rng.IntN(25) == 0 {
			reqs = append(reqs, req) // the same position twice
		}
	}
	t.Logf("requests: %v", kinds)
	return k, reqs

}

// locateEach is Locate(reqs[i]) for each request.
func locateEach(r *kafka.Reader, reqs []sources.LocateRequest) ([]sources.Location, []error) {
	wants := make([]sources.Location, len(reqs))
	wantErrs := make([]error, len(reqs))
	for i, req := range reqs {
		wants[i], wantErrs[i] = r.Locate(context.Background(), req)
	}
	return wants, wantErrs
}

// equivalent checks that LocateMany(reqs)[i] on r, run rounds times, is
// wants[i], wantErrs[i] (Locate's on a reader without a cache) each time,
// that Locate on r returns it too after the first round, and that the
// requests reached every decision.
func equivalent(t *testing.T, r *kafka.Reader, level string, reqs []sources.LocateRequest, wants []sources.Location, wantErrs []error, rounds int) {
	t.Helper()
	ctx := context.Background()
	for round := range rounds {
		locs, errs := r.LocateMany(ctx, reqs)
		if len(locs) != len(reqs) || len(errs) != len(reqs) {
			t.Fatalf("%d locations and %d errors for %d requests", len(locs), len(errs), len(reqs))
		}
		for i, req := range reqs[:len(reqs)*min(1, round)] {
			// After the first round: Locate through the cache too.
			loc, err := r.Locate(ctx, req)
			if fmt.Sprint(err) != fmt.Sprint(wantErrs[i]) || !reflect.DeepEqual(loc, wants[i]) {
				t.Errorf("request %d (%s/%d@%d): Locate on the reader %+v, %v; without a cache %+v, %v", i, req.Topic, req.Partition, req.Offset, loc, err, wants[i], wantErrs[i])
			}
		}
		details := map[string]bool{}
		for i, req := range reqs {
			want, wantErr := wants[i], wantErrs[i]
			if fmt.Sprint(errs[i]) != fmt.Sprint(wantErr) {
				t.Errorf("request %d (%s/%d@%d): error %v, Locate's %v", i, req.Topic, req.Partition, req.Offset, errs[i], wantErr)
			}
			if !reflect.DeepEqual(locs[i], want) {
				t.Errorf("request %d (%s/%d@%d):\nLocateMany %+v\nLocate     %+v", i, req.Topic, req.Partition, req.Offset, locs[i], want)
			}
			d := want.Detail
			if !strings.HasPrefix(d, "not found") && !strings.HasPrefix(d, "found") {
				d, _, _ = strings.Cut(d, " (")
			}
			details[strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, d)] = true
		}
		// The mix reached every decision.
		for _, d := range []string{"deleted by retention", "past the log end", "does not match", "producer aborted", "read at the stored position",
			"no record at offset", "does not exist",
			"found after scanning", "message(s) of the key", "stopped: limit of", "stopped: record timestamps passed", "stopped: reached the",
			"the newest", "nothing to match", "no timestamp known"} {
			found := false
			for got := range details {
				found = found || strings.Contains(got, d)
			}
			if !found {
				t.Errorf("no request was decided %q: %v", d, slices.Sorted(maps.Keys(details)))
			}
		}
		if level == config.ReadCommitted && !anyContains(details, "last stable offset") ||
			level != config.ReadCommitted && !anyContains(details, "not known to have ended") {
			t.Errorf("no request in the open transaction: %v", slices.Sorted(maps.Keys(details)))
		}
	}
}

// searchedRequest is a request without a stored position for the record
// w (its key and msg_id, or another's, or none) in partition p or the
// partitioner's, around a random time of the log (equivalenceLog stamps
// its n-th record at 10:00 + n s), with a random window and limit, for
// the first message or All of the key, or the newest records.
func searchedRequest(rng *rand.Rand, p int32, w written) (sources.LocateRequest, string) {
	req := sources.LocateRequest{Topic: topic, Partitioner: "murmur2", Partition: p, Offset: -1,
		Key: []byte(w.key), MsgID: w.msgID,
		Around: time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(260)) * time.Second),
		Window: []time.Duration{0, 5 * time.Second, 30 * time.Second, 2 * time.Minute}[rng.IntN(4)],
		Limit:  []int{0, 3, 20, 100}[rng.IntN(4)],
	}
	if !w.at.IsZero() && rng.IntN(2) == 0 {
		// Near the record's time: a record stamped ahead of it is past
		// a small window, held until a record inside the window follows.
		req.Around = w.at.Add(time.Duration(rng.IntN(5)-2) * time.Second)
	}
	kind := "searched"
	switch rng.IntN(10) {
	case 0:
		req.Partition, kind = -1, "searched by partitioner"
	case 1:
		req.Around, kind = time.Time{}, "searched without a time"
	case 2:
		req.Key, req.MsgID, kind = []byte(fmt.Sprintf("PAY-%d", rng.IntN(200))), "", "searched by key"
	case 3:
		req.MsgID, kind = fmt.Sprintf("m-%d", rng.IntN(200)), "searched by msg_id"
	case 4, 5:
		req.All, req.MsgID, kind = true, "", "searched, all"
	case 6:
		req.Newest, req.Window, kind = true, 24*time.Hour, "searched, newest"
	case 7:
		req.Key, req.MsgID, kind = nil, "", "searched, nothing to match"
	}
	return req, kind
}

func anyContains(set map[string]bool, s string) bool {
	for k := range set {
		if strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// BenchmarkLocateManySearched: 512 operations without a stored position,
// each searched from 5 minutes before its record's time (300 records of
// its partition before it), for its message (first) and for every message
// of its key (all), and among the newest records of the day (newest: from
// the partition's start): located together (LocateMany), and one at a
// time (Locate) 16 at a time.
func BenchmarkLocateManySearched(b *testing.B) {
	const parts, n = 4, 4000
	k := childKafka(b, topic, parts)
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	produceLoad(b, k, topic, parts, n, at)
	rng := rand.New(rand.NewPCG(1, 2))
	reqs := make([]sources.LocateRequest, 512)
	for j := range reqs {
		p := int32(j % parts)
		i := n*3/4 + rng.IntN(n/4)
		reqs[j] = sources.LocateRequest{Topic: topic, Partitioner: "murmur2", Key: []byte(fmt.Sprintf("PAY-%d-%d", p, i)),
			MsgID: fmt.Sprintf("m-%d-%d", p, i), Partition: p, Offset: -1, Around: at.Add(time.Duration(i) * time.Second)}
	}
	r := newReader(b, k.Brokers, 30*time.Second)
	ctx := context.Background()
	for _, kind := range []string{"first", "all", "newest"} {
		reqs := slices.Clone(reqs)
		for j := range reqs {
			switch kind {
			case "all":
				reqs[j].All = true
			case "newest":
				// Anchored at now, no row to anchor it (seed 000): the
				// newest 50,000 records of the day, the whole partition.
				reqs[j].Newest, reqs[j].Around, reqs[j].Window = true, at.Add(n*time.Second), 24*time.Hour
			}
		}
		check := func(i int, loc sources.Location, err error) {
			if err != nil || loc.Message == nil {
				b.Fatalf("request %d: %+v, %v", i, loc, err)
			}
		}
		b.Run(kind+"/LocateMany", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				locs, errs := r.LocateMany(ctx, reqs)
				for i := range reqs {
					check(i, locs[i], errs[i])
				}
			}
		})
		b.Run(kind+"/Locate", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sem := make(chan struct{}, 16)
				var wg sync.WaitGroup
				for i, req := range reqs {
					sem <- struct{}{}
					wg.Go(func() {
						defer func() { <-sem }()
						loc, err := r.Locate(ctx, req)
						check(i, loc, err)
					})
				}
				wg.Wait()
			}
		})
	}
}

// TestLocateManyKafkaDown: with no broker at the address (a closed port)
// or one that never answers, every request of a LocateMany, stored or
// searched, has an error that names the broker, as Locate's does; the
// silent one says the reader's timeout ended it.
func TestLocateManyKafkaDown(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = silent.Close() })
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	reqs := []sources.LocateRequest{
		{Topic: topic, Key: []byte("PAY-1"), Partition: 0, Offset: 5},
		{Topic: topic, Key: []byte("PAY-2"), Partition: 1, Offset: 9},
		{Topic: topic, Key: []byte("PAY-3"), Partition: 0, Offset: -1, Around: time.Now()},
	}
	for _, c := range []struct {
		name, addr, says string
	}{
		{"closed port", unusedAddr(t), "cannot connect"},
		{"silent broker", silent.Addr().String(), "no answer within 300ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReader(t, []string{c.addr}, 300*time.Millisecond)
			locs, errs := r.LocateMany(context.Background(), reqs)
			for i, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.addr) || !strings.Contains(err.Error(), c.says) {
					t.Errorf("request %d: error %v, want one naming %s and saying %q", i, err, c.addr, c.says)
				}
				if want := (sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}); !reflect.DeepEqual(locs[i], want) {
					t.Errorf("request %d: location %+v, want %+v", i, locs[i], want)
				}
			}
		})
	}
}
