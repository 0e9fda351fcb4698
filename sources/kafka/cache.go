package kafka

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
)

// DefaultSearchCacheBytes is the bound of a search cache (CacheSearches)
// when none is given: 32 MiB of records, counted by recordCacheSize.
const DefaultSearchCacheBytes = 32 << 20

const (
	// recordOverhead is what a cached record costs besides its key, value
	// and headers: the Message, its headers map, the record slot (measured:
	// 790 bytes of heap for a record of an 11-byte key, a 300-byte value
	// and one msg_id header, which counted 790 with an overhead of 460;
	// the slot has grown by 24 bytes since, the hashes and the stamp).
	recordOverhead = 484
	// cacheChunk is how many cached records a search is handed at once
	// (a fetch's answer, without the round trip or the decoding).
	cacheChunk = 4096
)

// CacheSearches makes the reader keep the records its searches read
// (Locate and LocateMany without a stored position), decoded, in a cache
// of at most maxBytes (key, value and headers plus 484 bytes a record;
// DefaultSearchCacheBytes when maxBytes <= 0): a search then fetches only
// what the cache does not hold, typically the records written since the
// last one (docs/watch.md#how-it-works). It is meant for a long-lived
// reader whose searches overlap (the watch's batches, every few hundred
// ms, over the same 5-minute windows); a one-shot command gains nothing.
// Safe to call at any time; a second call replaces the cache.
//
// Only what cannot change is kept: records below the high watermark and,
// read_committed, below the last stable offset, whose transaction's fate
// the fetch knew or settle asks again (read_uncommitted's pending ones).
// Each search reads the log start with its log end, and the cache forgets
// what retention deleted, so that a search answers exactly as one without
// it. A topic whose cleanup.policy compacts (compaction removes records
// the cache would still hold), or whose policy cannot be read
// (DescribeConfigs, asked once per topic), is not cached.
func (r *Reader) CacheSearches(maxBytes int64) {
	if maxBytes <= 0 {
		maxBytes = DefaultSearchCacheBytes
	}
	r.cache.Store(&searchCache{max: maxBytes, parts: map[topicPartition][]*cachedRange{}, topics: map[string]bool{}})
}

type topicPartition struct {
	topic string
	p     int32
}

// searchCache holds, per partition, disjoint offset ranges of records
// already fetched and decoded, sorted by offset; it evicts from the front
// of the range whose first record is the oldest when its records' size
// passes max.
type searchCache struct {
	max int64

	mu    sync.Mutex
	size  int64
	parts map[topicPartition][]*cachedRange
	// topics says, once asked, whether a topic's records may be kept
	// (cacheable).
	topics map[string]bool
}

// cachedRange: every data record of [from, to) is in recs, in offset
// order (control records and compacted gaps have none).
type cachedRange struct {
	from, to int64
	recs     []record
	size     int64
}

func recordCacheSize(m *sources.Message) int64 {
	n := int64(recordOverhead + len(m.Key) + len(m.Value))
	for k, v := range m.Headers {
		n += int64(len(k) + len(v))
	}
	return n
}

// read hands the cached records of tp from offset off on, at most
// cacheChunk of them, into buf: a fetch's answer whose next is the offset
// after them. ok is false when the cache does not hold off.
func (c *searchCache) read(tp topicPartition, off int64, buf []record) (fetched, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rg := range c.parts[tp] {
		if off < rg.from || off >= rg.to {
			continue
		}
		i := firstAt(rg.recs, off)
		j := min(len(rg.recs), i+cacheChunk)
		f := fetched{recs: append(buf[:0], rg.recs[i:j]...), next: rg.to, hwm: -1, lso: -1}
		if j < len(rg.recs) {
			f.next = rg.recs[j].Offset
		}
		return f, true
	}
	return fetched{}, false
}

// firstAt is the index of the first of recs (in offset order) at or after
// off, len(recs) when none is.
func firstAt(recs []record, off int64) int {
	i, _ := slices.BinarySearchFunc(recs, off, func(r record, off int64) int { return cmp.Compare(r.Offset, off) })
	return i
}

// add keeps what f, fetched from off under iso, holds that cannot change:
// its data records from off up to its next offset and, read_committed, up
// to its last stable offset. The records' keys and values are copied out
// of the fetch's buffer (else a kept record would keep the whole answer).
func (c *searchCache) add(tp topicPartition, off int64, f fetched, iso sarama.IsolationLevel) {
	if f.err != nil {
		return
	}
	cut := f.next
	if iso == sarama.ReadCommitted {
		if f.lso < 0 {
			return // no last stable offset: nothing is known settled
		}
		cut = min(cut, f.lso)
	}
	if cut <= off {
		return
	}
	add := &cachedRange{from: off, to: cut}
	for _, rec := range f.recs {
		if rec.Offset < off {
			continue
		}
		if rec.Offset >= cut {
			break
		}
		if rec.fate == fateOpen {
			// Cannot happen below the last stable offset; a range
			// with a hole is not kept.
			return
		}
		add.recs = append(add.recs, rec)
		add.size += recordCacheSize(rec.Message)
	}
	if c.first(add) {
		// Older than all a full cache holds: evicted first, at once.
		return
	}
	for _, rec := range add.recs {
		m := rec.Message
		buf := make([]byte, len(m.Key)+len(m.Value))
		copy(buf, m.Key)
		copy(buf[len(m.Key):], m.Value)
		if m.Key != nil {
			m.Key = buf[:len(m.Key):len(m.Key)]
		}
		if m.Value != nil {
			m.Value = buf[len(m.Key):]
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.merge(tp, add)
	c.evict()
}

// first reports whether add would be the first evicted: the cache has no
// room for it and every record it holds is older than every range's
// first record (a window's start that does not fit in the cache, fetched
// again each batch, is then not copied in and out each time).
func (c *searchCache) first(add *cachedRange) bool {
	if len(add.recs) == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.size+add.size <= c.max {
		return false
	}
	newest := add.recs[0].Timestamp
	for _, rec := range add.recs {
		if rec.Timestamp.After(newest) {
			newest = rec.Timestamp
		}
	}
	for _, rs := range c.parts {
		for _, rg := range rs {
			if len(rg.recs) > 0 && !newest.Before(rg.recs[0].Timestamp) {
				return false
			}
		}
	}
	return c.size > 0
}

// merge puts add among tp's ranges, joining the ranges it touches or
// overlaps (a record held twice is the same record: the copy of the range
// that starts first stays).
func (c *searchCache) merge(tp topicPartition, add *cachedRange) {
	rs := c.parts[tp]
	var out []*cachedRange
	for _, rg := range rs {
		if rg.to < add.from || rg.from > add.to {
			out = append(out, rg)
			continue
		}
		// Overlapping or adjacent: one range.
		c.size -= rg.size
		add = join(rg, add)
	}
	out = append(out, add)
	slices.SortFunc(out, func(a, b *cachedRange) int { return cmp.Compare(a.from, b.from) })
	c.size += add.size
	c.parts[tp] = out
}

// join is the range of a and b, which overlap or touch.
func join(a, b *cachedRange) *cachedRange {
	if b.from < a.from {
		a, b = b, a
	}
	// a starts first: its records, then b's past a's end.
	out := &cachedRange{from: a.from, to: max(a.to, b.to), size: a.size}
	out.recs = a.recs
	if b.to > a.to {
		i := firstAt(b.recs, a.to)
		out.recs = append(out.recs, b.recs[i:]...)
		for _, rec := range b.recs[i:] {
			out.size += recordCacheSize(rec.Message)
		}
	}
	return out
}

// evict trims the front of the range whose first record is the oldest
// until the records' size is within max.
func (c *searchCache) evict() {
	for c.size > c.max {
		var oldest, next *cachedRange // the two ranges whose first records are the oldest
		var at topicPartition
		for tp, rs := range c.parts {
			for _, rg := range rs {
				switch {
				case len(rg.recs) == 0:
				case oldest == nil || rg.recs[0].Timestamp.Before(oldest.recs[0].Timestamp):
					oldest, next, at = rg, oldest, tp
				case next == nil || rg.recs[0].Timestamp.Before(next.recs[0].Timestamp):
					next = rg
				}
			}
		}
		if oldest == nil {
			return
		}
		// From the front of the oldest, while it stays the oldest.
		i := 0
		for ; i < len(oldest.recs) && c.size > c.max &&
			(i == 0 || next == nil || !oldest.recs[i].Timestamp.After(next.recs[0].Timestamp)); i++ {
			n := recordCacheSize(oldest.recs[i].Message)
			c.size -= n
			oldest.size -= n
			oldest.recs[i] = record{} // the array keeps no dropped message
		}
		if i == len(oldest.recs) {
			c.drop(at, func(rg *cachedRange) bool { return rg == oldest })
			continue
		}
		oldest.recs = oldest.recs[i:]
		oldest.from = oldest.recs[0].Offset
	}
}

// drop forgets the ranges of tp for which gone is true.
func (c *searchCache) drop(tp topicPartition, gone func(*cachedRange) bool) {
	rs := c.parts[tp]
	kept := rs[:0]
	for _, rg := range rs {
		if gone(rg) {
			c.size -= rg.size
			continue
		}
		kept = append(kept, rg)
	}
	clear(rs[len(kept):])
	if len(kept) == 0 {
		delete(c.parts, tp)
		return
	}
	c.parts[tp] = kept
}

// bound fits tp's ranges to the log as a search just read its bounds:
// what lies below the log start (start) was deleted by retention and is
// forgotten; a range past the log end (end) means the log was truncated
// or recreated, and the partition is forgotten whole.
func (c *searchCache) bound(tp topicPartition, start, end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rs := c.parts[tp]
	if len(rs) == 0 {
		return
	}
	if rs[len(rs)-1].to > end {
		c.drop(tp, func(*cachedRange) bool { return true })
		return
	}
	c.drop(tp, func(rg *cachedRange) bool { return rg.to <= start })
	for _, rg := range c.parts[tp] {
		if rg.from >= start {
			continue
		}
		i := 0
		for ; i < len(rg.recs) && rg.recs[i].Offset < start; i++ {
			n := recordCacheSize(rg.recs[i].Message)
			c.size -= n
			rg.size -= n
			rg.recs[i] = record{}
		}
		rg.recs, rg.from = rg.recs[i:], start
	}
}

// fit bounds the ranges of topic's partitions ps by the log starts and
// ends a search just read (bound); when the starts could not be read
// (err), the partitions are forgotten: a cached record could have been
// deleted.
func (c *searchCache) fit(topic string, ps []int32, starts, ends map[int32]int64, err error) {
	for _, p := range ps {
		tp := topicPartition{topic, p}
		start, ok := starts[p]
		if err != nil || !ok {
			c.mu.Lock()
			c.drop(tp, func(*cachedRange) bool { return true })
			c.mu.Unlock()
			continue
		}
		c.bound(tp, start, ends[p])
	}
}

// searchFetch is a search's read at next: what the reader's cache holds
// from next on, else a fetch of fetchPartitionBytes, whose answer the
// cache then keeps (add). buf is reused for the cached records.
func (r *Reader) searchFetch(ctx context.Context, c sarama.Client, topic string, p int32, next int64, iso sarama.IsolationLevel, buf []record) (fetched, error) {
	sc := r.cache.Load()
	if sc == nil {
		return r.fetch(ctx, c, topic, p, next, fetchPartitionBytes, iso, nil)
	}
	tp := topicPartition{topic, p}
	if f, ok := sc.read(tp, next, buf); ok {
		return f, nil
	}
	f, err := r.fetch(ctx, c, topic, p, next, fetchPartitionBytes, iso, nil)
	if err == nil && f.err == nil && r.cacheable(ctx, c, sc, topic, p) {
		sc.add(tp, next, f, iso)
	}
	return f, err
}

// cacheable reports whether the records of topic (p one of its
// partitions) may be kept: not when its cleanup.policy compacts, nor when
// the policy cannot be read (a DescribeConfigs to p's leader, asked once;
// a cancelled or timed-out ctx asks again next time).
func (r *Reader) cacheable(ctx context.Context, c sarama.Client, sc *searchCache, topic string, p int32) bool {
	sc.mu.Lock()
	ok, known := sc.topics[topic]
	sc.mu.Unlock()
	if known {
		return ok
	}
	ok, err := call(ctx, func() (bool, error) {
		b, err := c.Leader(topic, p)
		if err != nil {
			return false, err
		}
		req := &sarama.DescribeConfigsRequest{Resources: []*sarama.ConfigResource{
			{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"cleanup.policy"}}}}
		if c.Config().Version.IsAtLeast(sarama.V1_1_0_0) {
			req.Version = 1
		}
		resp, err := b.DescribeConfigs(req)
		if err != nil {
			return false, err
		}
		for _, res := range resp.Resources {
			if res == nil || res.Name != topic {
				continue
			}
			if res.ErrorCode != 0 {
				return false, sarama.KError(res.ErrorCode)
			}
			for _, e := range res.Configs {
				if e != nil && e.Name == "cleanup.policy" {
					return !strings.Contains(e.Value, "compact"), nil
				}
			}
			return true, nil // not said: the broker's default, delete
		}
		return false, fmt.Errorf("describe configs: no answer for topic %s", topic)
	})
	if err != nil && ctx.Err() != nil {
		return false
	}
	sc.mu.Lock()
	sc.topics[topic] = ok
	sc.mu.Unlock()
	return ok
}

// settled notes how the transaction of the cached record at off ended
// (settle asked): a later search reads it without asking again.
func (c *searchCache) settled(tp topicPartition, off int64, f fate) {
	if f != fateCommitted && f != fateAborted {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rg := range c.parts[tp] {
		if off < rg.from || off >= rg.to {
			continue
		}
		if i := firstAt(rg.recs, off); i < len(rg.recs) && rg.recs[i].Offset == off && rg.recs[i].fate == fatePending {
			rg.recs[i].fate = f
		}
	}
}

// bytes is the records' size, for tests.
func (c *searchCache) bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.size
}

// cloneMessage is a copy of a message read back to a caller: a cached
// message is shared by every search that reads it, so a caller's change
// to the copy (its headers) reaches no other. Key and Value are shared and
// read-only.
func cloneMessage(m *sources.Message) *sources.Message {
	if m == nil {
		return nil
	}
	c := *m
	c.Headers = maps.Clone(m.Headers)
	return &c
}
