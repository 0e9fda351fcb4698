package kafka

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
)

// fetchAnswer is a fetch's answer from offset from: a data record at each
// offset of [from, next) but the skipped ones, each stamped its offset's
// seconds after 10:00 and of fate f, 100 bytes of value each.
func fetchAnswer(from, next int64, f fate, skip ...int64) fetched {
	out := fetched{next: next, hwm: next, lso: next}
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	for off := from; off < next; off++ {
		if slices.Contains(skip, off) {
			continue
		}
		out.recs = append(out.recs, newRecord(&sources.Message{Offset: off, Timestamp: at.Add(time.Duration(off) * time.Second),
			Key: []byte(fmt.Sprintf("K-%03d", off)), Value: make([]byte, 100), Headers: map[string]string{}}, f))
	}
	return out
}

// offsetsOf lists the offsets of what the cache hands a search at off,
// and the next offset; nil, -1 when it does not hold off.
func offsetsOf(c *searchCache, tp topicPartition, off int64) ([]int64, int64) {
	f, ok := c.read(tp, off, nil)
	if !ok {
		return nil, -1
	}
	offs := []int64{}
	for _, r := range f.recs {
		offs = append(offs, r.Offset)
	}
	return offs, f.next
}

func span(from, to int64, skip ...int64) []int64 {
	out := []int64{}
	for off := from; off < to; off++ {
		if !slices.Contains(skip, off) {
			out = append(out, off)
		}
	}
	return out
}

func TestSearchCacheRanges(t *testing.T) {
	tp := topicPartition{"t", 0}
	type step func(c *searchCache)
	add := func(off int64, f fetched, iso sarama.IsolationLevel) step {
		return func(c *searchCache) { c.add(tp, off, f, iso) }
	}
	ru, rc := sarama.ReadUncommitted, sarama.ReadCommitted
	withLSO := func(f fetched, lso int64) fetched { f.lso = lso; return f }
	withErr := func(f fetched) fetched { f.err = sarama.ErrOffsetOutOfRange; return f }
	for _, c := range []struct {
		name      string
		steps     []step
		at        int64
		want      []int64
		wantNext  int64
		wantRange int // ranges of the partition
	}{
		{"read from the middle", []step{add(10, fetchAnswer(10, 20, fateCommitted), ru)}, 15, span(15, 20), 20, 1},
		{"the end is not held", []step{add(10, fetchAnswer(10, 20, fateCommitted), ru)}, 20, nil, -1, 1},
		{"before the start is not held", []step{add(10, fetchAnswer(10, 20, fateCommitted), ru)}, 9, nil, -1, 1},
		{"records before the fetch offset left out", []step{add(14, fetchAnswer(10, 20, fateCommitted), ru)}, 13, nil, -1, 1},
		{"a gap (marker, compaction) is held as no record", []step{add(10, fetchAnswer(10, 20, fateCommitted, 12, 13), ru)}, 11, span(11, 20, 12, 13), 20, 1},
		{"adjacent answers join", []step{add(10, fetchAnswer(10, 20, fateCommitted), ru), add(20, fetchAnswer(20, 30, fateCommitted), ru)}, 12, span(12, 30), 30, 1},
		{"an earlier overlapping answer joins", []step{add(20, fetchAnswer(20, 30, fateCommitted), ru), add(10, fetchAnswer(10, 25, fateCommitted), ru)}, 10, span(10, 30), 30, 1},
		{"disjoint answers stay apart", []step{add(10, fetchAnswer(10, 20, fateCommitted), ru), add(40, fetchAnswer(40, 50, fateCommitted), ru)}, 30, nil, -1, 2},
		{"a bridging answer joins three", []step{add(10, fetchAnswer(10, 20, fateCommitted), ru), add(40, fetchAnswer(40, 50, fateCommitted), ru), add(20, fetchAnswer(20, 40, fateCommitted), ru)}, 10, span(10, 50), 50, 1},
		{"read_committed: up to the last stable offset", []step{add(10, withLSO(fetchAnswer(10, 30, fateCommitted), 25), rc)}, 10, span(10, 25), 25, 1},
		{"read_committed: no last stable offset, nothing", []step{add(10, withLSO(fetchAnswer(10, 30, fateCommitted), -1), rc)}, 10, nil, -1, 0},
		{"an open transaction's record: nothing", []step{add(10, fetchAnswer(10, 30, fateOpen), rc)}, 10, nil, -1, 0},
		{"a partition error: nothing", []step{add(10, withErr(fetchAnswer(10, 30, fateCommitted)), ru)}, 10, nil, -1, 0},
		{"retention: below the log start forgotten", []step{add(10, fetchAnswer(10, 30, fateCommitted), ru), func(c *searchCache) { c.bound(tp, 15, 30) }}, 12, nil, -1, 1},
		{"retention: from the log start held", []step{add(10, fetchAnswer(10, 30, fateCommitted), ru), func(c *searchCache) { c.bound(tp, 15, 30) }}, 15, span(15, 30), 30, 1},
		{"retention: a whole range forgotten", []step{add(10, fetchAnswer(10, 20, fateCommitted), ru), add(40, fetchAnswer(40, 50, fateCommitted), ru), func(c *searchCache) { c.bound(tp, 45, 50) }}, 45, span(45, 50), 50, 1},
		{"log end below the cache: all forgotten", []step{add(10, fetchAnswer(10, 30, fateCommitted), ru), func(c *searchCache) { c.bound(tp, 0, 25) }}, 10, nil, -1, 0},
		{"bounds not read: all forgotten", []step{add(10, fetchAnswer(10, 30, fateCommitted), ru), func(c *searchCache) { c.fit("t", []int32{0}, nil, nil, sarama.ErrNotConnected) }}, 10, nil, -1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &searchCache{max: 1 << 30, parts: map[topicPartition][]*cachedRange{}, topics: map[string]bool{}}
			for _, s := range c.steps {
				s(sc)
			}
			got, next := offsetsOf(sc, tp, c.at)
			if !slices.Equal(got, c.want) || next != c.wantNext {
				t.Errorf("at %d: %v next %d, want %v next %d", c.at, got, next, c.want, c.wantNext)
			}
			if n := len(sc.parts[tp]); n != c.wantRange {
				t.Errorf("%d ranges, want %d", n, c.wantRange)
			}
			var size int64
			for _, rg := range sc.parts[tp] {
				var n int64
				for _, r := range rg.recs {
					n += recordCacheSize(r.Message)
				}
				if n != rg.size {
					t.Errorf("range %d..%d: size %d, its records' %d", rg.from, rg.to, rg.size, n)
				}
				size += n
			}
			if size != sc.bytes() {
				t.Errorf("size %d, the records' %d", sc.bytes(), size)
			}
		})
	}
}

// A search is handed at most cacheChunk records at a time, each answer
// ending where the next starts.
func TestSearchCacheChunks(t *testing.T) {
	tp := topicPartition{"t", 0}
	sc := &searchCache{max: 1 << 30, parts: map[topicPartition][]*cachedRange{}, topics: map[string]bool{}}
	sc.add(tp, 0, fetchAnswer(0, cacheChunk+10, fateCommitted), sarama.ReadUncommitted)
	got, next := offsetsOf(sc, tp, 0)
	if len(got) != cacheChunk || next != cacheChunk {
		t.Fatalf("%d records, next %d; want %d, next %d", len(got), next, cacheChunk, cacheChunk)
	}
	if got, next = offsetsOf(sc, tp, next); !slices.Equal(got, span(cacheChunk, cacheChunk+10)) || next != cacheChunk+10 {
		t.Errorf("then %v next %d", got, next)
	}
}

// The cache stays within its bound, evicting the oldest records first
// (whatever the partition), and a settled record stays settled.
func TestSearchCacheEvictAndSettle(t *testing.T) {
	one := recordCacheSize(fetchAnswer(0, 1, fateCommitted).recs[0].Message)
	sc := &searchCache{max: 25 * one, parts: map[topicPartition][]*cachedRange{}, topics: map[string]bool{}}
	p0, p1 := topicPartition{"t", 0}, topicPartition{"t", 1}
	sc.add(p0, 0, fetchAnswer(0, 20, fateCommitted), sarama.ReadUncommitted) // stamped 0..19 s
	sc.add(p1, 10, fetchAnswer(10, 20, fatePending), sarama.ReadUncommitted) // stamped 10..19 s
	if sc.bytes() > sc.max {
		t.Fatalf("%d bytes, bound %d", sc.bytes(), sc.max)
	}
	// 30 records for 25: the 5 oldest, p0's first, go.
	if got, next := offsetsOf(sc, p0, 0); got != nil || next != -1 {
		t.Errorf("p0 at 0: %v, want evicted", got)
	}
	if got, _ := offsetsOf(sc, p0, 5); !slices.Equal(got, span(5, 20)) {
		t.Errorf("p0 from 5: %v", got)
	}
	if got, _ := offsetsOf(sc, p1, 10); !slices.Equal(got, span(10, 20)) {
		t.Errorf("p1 from 10: %v", got)
	}
	sc.settled(p1, 12, fateAborted)
	f, _ := sc.read(p1, 12, nil)
	if f.recs[0].fate != fateAborted || f.recs[1].fate != fatePending {
		t.Errorf("fates %v %v, want aborted (settled), pending", f.recs[0].fate, f.recs[1].fate)
	}
	// Much more than the bound: only the newest fit, p1's older ones go
	// first.
	sc.add(p0, 20, fetchAnswer(20, 100, fateCommitted), sarama.ReadUncommitted)
	if sc.bytes() > sc.max {
		t.Errorf("%d bytes, bound %d", sc.bytes(), sc.max)
	}
	if got, _ := offsetsOf(sc, p0, 75); !slices.Equal(got, span(75, 100)) {
		t.Errorf("p0 from 75: %v", got)
	}
	if _, ok := sc.parts[p1]; ok {
		t.Errorf("p1's older records kept over p0's newer ones")
	}
	// Older than all the full cache holds: not kept, nothing evicted.
	sc.add(p1, 0, fetchAnswer(0, 10, fateCommitted), sarama.ReadUncommitted)
	if got, _ := offsetsOf(sc, p1, 0); got != nil {
		t.Errorf("p1 from 0: %v, want not kept", got)
	}
	if got, _ := offsetsOf(sc, p0, 75); !slices.Equal(got, span(75, 100)) {
		t.Errorf("p0 from 75 after an older answer: %v", got)
	}
}
