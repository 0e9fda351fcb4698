package kafka

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"sync"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
)

var _ sources.BatchLocator = (*Reader)(nil)

const (
	// manyFetchBytes is the partition budget of a fetch of LocateMany: it
	// bounds what a fetch decodes past the first batch, so that a wanted
	// offset far beyond the last one costs at most this much before the
	// next fetch starts at it.
	manyFetchBytes = 64 << 10
	// manyGapOffsets splits a partition's wanted offsets into runs read
	// concurrently: offsets further apart than this are not expected in
	// one answer of manyFetchBytes (about 180 records of 350 bytes).
	manyGapOffsets = 256
	// manyFetching bounds the fetches of a LocateMany in flight at once.
	manyFetching = 8
	// manyLocating bounds the lookups of the searches' window starts
	// (ListOffsets by timestamp, one per partition and time) in flight at
	// once.
	manyLocating = 16
)

// LocateMany implements sources.BatchLocator: locs[i], errs[i] are what
// Locate(ctx, reqs[i]) returns. The requests of each topic are read in
// one call bounded by the reader's timeout (as one Locate is).
//
// The requests with a stored position: the topic's metadata, then the log
// start and end of all their partitions in one concurrent round (a
// ListOffsets per leader for each), then each partition's wanted offsets
// inside the log, sorted, by fetches of at most manyFetchBytes from the
// lowest one no answer has covered yet (runs of offsets more than
// manyGapOffsets apart concurrently, at most manyFetching fetches at
// once). Each position is then decided as Locate decides it
// (decideStored); one the answers hold no record at is read by a fetch of
// its own, as Locate reads it, so that even the next record its Detail
// names is the same.
//
// The requests without one: the log end of their partitions in one round,
// the offset of each window's start (at most manyLocating lookups at
// once), then one forward read per partition from the lowest start (a
// gap before a later start is jumped, not read), every record fed to the
// search of every request it is at or past the start of, each search
// stopping on its own terms (its window, limit, All, Newest) as Locate's
// does. A search whose lookup found no offset is searched as Locate
// searches it.
func (r *Reader) LocateMany(ctx context.Context, reqs []sources.LocateRequest) ([]sources.Location, []error) {
	locs := make([]sources.Location, len(reqs))
	errs := make([]error, len(reqs))
	stored, searched := map[string][]int{}, map[string][]int{}
	var topics []string
	var others []int
	for i, req := range reqs {
		if req.Topic == "" {
			others = append(others, i)
			continue
		}
		if stored[req.Topic] == nil && searched[req.Topic] == nil {
			topics = append(topics, req.Topic)
		}
		if req.Partition >= 0 && req.Offset >= 0 {
			stored[req.Topic] = append(stored[req.Topic], i)
		} else {
			searched[req.Topic] = append(searched[req.Topic], i)
		}
	}
	var wg sync.WaitGroup
	for _, topic := range topics {
		if idx := stored[topic]; len(idx) > 0 {
			wg.Go(func() { r.locateStoredMany(ctx, topic, reqs, idx, locs, errs) })
		}
		if idx := searched[topic]; len(idx) > 0 {
			wg.Go(func() { r.searchMany(ctx, topic, reqs, idx, locs, errs) })
		}
	}
	for _, i := range others {
		locs[i], errs[i] = r.Locate(ctx, reqs[i])
	}
	wg.Wait()
	return locs, errs
}

// setter records the answers of a LocateMany's requests (concurrently): an
// error as Locate returns it.
func (r *Reader) setter(ctx, opCtx context.Context, topic string, locs []sources.Location, errs []error) func(int, sources.Location, error) {
	var mu sync.Mutex
	return func(i int, loc sources.Location, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			loc = sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}
			err = r.fail(ctx, opCtx, "locate message in "+topic, err)
		}
		locs[i], errs[i] = loc, err
	}
}

// batchStart is what the batched locates of one topic start with: the
// setter of their answers, fail (every request of is failed with err),
// the client and the topic's partitions; ok is false when the client or
// the topic's metadata could not be read (every request of idx failed).
func (r *Reader) batchStart(ctx, opCtx context.Context, topic string, idx []int, locs []sources.Location, errs []error) (set func(int, sources.Location, error), fail func([]int, error), c sarama.Client, parts []int32, ok bool) {
	set = r.setter(ctx, opCtx, topic, locs, errs)
	fail = func(is []int, err error) {
		for _, i := range is {
			set(i, sources.Location{}, err)
		}
	}
	// Locals, not the results: call may return (out of time) while its
	// goroutine still reads the client.
	client, err := r.getClient()
	if err != nil {
		fail(idx, err)
		return set, fail, nil, nil, false
	}
	ps, err := call(opCtx, func() ([]int32, error) { return client.Partitions(topic) })
	if err != nil {
		fail(idx, fmt.Errorf("topic metadata: %w", err))
		return set, fail, nil, nil, false
	}
	return set, fail, client, ps, true
}

// searchMany locates reqs[i] for every i of idx (all of topic, none at a
// stored position) into locs[i], errs[i].
func (r *Reader) searchMany(ctx context.Context, topic string, reqs []sources.LocateRequest, idx []int, locs []sources.Location, errs []error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	set, fail, c, parts, ok := r.batchStart(ctx, opCtx, topic, idx, locs, errs)
	if !ok {
		return
	}
	byPart := map[int32][]int{}
	var ps []int32
	var all []int
	for _, i := range idx {
		p, loc, ok, err := searchTarget(reqs[i], parts)
		if !ok || err != nil {
			set(i, loc, err)
			continue
		}
		if byPart[p] == nil {
			ps = append(ps, p)
		}
		byPart[p] = append(byPart[p], i)
		all = append(all, i)
	}
	if len(ps) == 0 {
		return
	}
	slices.Sort(ps)
	iso := r.isolation()

	// The log ends, and the offset of every window's start, concurrently.
	type lookup struct {
		p  int32
		ms int64
	}
	type found struct {
		off int64
		err error
	}
	starts := map[lookup]found{}
	var mu sync.Mutex
	var ends map[int32]int64
	fns := []func() error{func() (err error) {
		ends, err = r.listOffsets(opCtx, c, topic, ps, sarama.OffsetNewest, iso)
		return err
	}}
	sc := r.cache.Load()
	var logStarts map[int32]int64
	var logErr error
	if sc != nil {
		fns = append(fns, func() error {
			logStarts, logErr = r.listOffsets(opCtx, c, topic, ps, sarama.OffsetOldest, sarama.ReadUncommitted)
			return nil
		})
	}
	sem := make(chan struct{}, manyLocating)
	for _, i := range all {
		req := reqs[i]
		p, _, _, _ := searchTarget(req, parts)
		k := lookup{p, req.Around.Add(-searchWindow(req)).UnixMilli()}
		if _, ok := starts[k]; ok {
			continue
		}
		starts[k] = found{}
		fns = append(fns, func() error {
			sem <- struct{}{}
			defer func() { <-sem }()
			// A lookup that fails is not the end of the search (newScan).
			offs, err := r.listOffsets(opCtx, c, topic, []int32{p}, k.ms, iso)
			mu.Lock()
			starts[k] = found{offs[p], err}
			mu.Unlock()
			return nil
		})
	}
	if err := parallel(opCtx, fns...); err != nil {
		fail(all, err)
		return
	}
	if sc != nil {
		sc.fit(topic, ps, logStarts, ends, logErr)
	}

	// Each search from its start (newScan: a lookup that found no offset
	// is doubted as Locate doubts it, which may read), concurrently.
	scanOf := make(map[int]*scan, len(all))
	var swg sync.WaitGroup
	for _, p := range ps {
		for _, i := range byPart[p] {
			req := reqs[i]
			st := starts[lookup{p, req.Around.Add(-searchWindow(req)).UnixMilli()}]
			if st.err != nil && opCtx.Err() != nil {
				set(i, sources.Location{}, st.err)
				continue
			}
			start := int64(-1)
			if st.err == nil {
				start = st.off
			}
			sem <- struct{}{}
			swg.Go(func() {
				defer func() { <-sem }()
				s, loc, err := r.newScan(opCtx, c, req, p, start, ends[p], st.err)
				if s == nil {
					set(i, loc, err)
					return
				}
				mu.Lock()
				scanOf[i] = s
				mu.Unlock()
			})
		}
	}
	swg.Wait()

	var wg sync.WaitGroup
	psem := make(chan struct{}, manyFetching)
	for _, p := range ps {
		var scans []*scan
		var at []int
		for _, i := range byPart[p] {
			if s := scanOf[i]; s != nil {
				scans, at = append(scans, s), append(at, i)
			}
		}
		if len(scans) == 0 {
			continue
		}
		psem <- struct{}{}
		wg.Go(func() {
			defer func() { <-psem }()
			r.scanMany(ctx, opCtx, c, topic, p, ends[p], scans, func(j int, loc sources.Location, err error) { set(at[j], loc, err) })
		})
	}
	wg.Wait()
}

// scanMany drives the searches of partition p with one forward read from
// the lowest start, jumping to the next start when no search has begun
// before it; each answer's records are matched against all the searches
// at once (by the hashes of their msg_id and key), then handed to every
// search they are at or past the start of (feedRun: the records between
// two matches only counted when that is all feeding them would do).
// set(j, ...) receives the end of scans[j].
func (r *Reader) scanMany(parent, ctx context.Context, c sarama.Client, topic string, p int32, end int64, scans []*scan, set func(int, sources.Location, error)) {
	iso := r.isolation()
	// The searches by the hash of their msg_id and of their key: a
	// record's hash finds the searches it may match (matches decides).
	// A filter of 4,096 bits in front of each map spares most records the
	// map lookup (a few searches against tens of thousands of records).
	byMsgID, byKey := map[uint64][]int{}, map[uint64][]int{}
	var idBits, keyBits hashBits
	for j, s := range scans {
		if s.req.MsgID != "" {
			h := maphash.String(matchSeed, s.req.MsgID)
			byMsgID[h] = append(byMsgID[h], j)
			idBits.add(h)
		}
		if len(s.req.Key) > 0 {
			h := maphash.Bytes(matchSeed, s.req.Key)
			byKey[h] = append(byKey[h], j)
			keyBits.add(h)
		}
	}
	live := make([]int, len(scans))
	for j := range live {
		live[j] = j
	}
	// finish ends the searches for which keep is false, each with the
	// Location and error ended gives.
	finish := func(keep func(int) bool, ended func(*scan) (sources.Location, error)) {
		kept := live[:0]
		for _, j := range live {
			if keep(j) {
				kept = append(kept, j)
				continue
			}
			loc, err := ended(scans[j])
			set(j, loc, err)
		}
		live = kept
	}
	hits := make([][]int, len(scans))
	var buf []record
	for len(live) > 0 {
		next := scans[live[0]].start
		for _, j := range live[1:] {
			next = min(next, scans[j].start)
		}
		for len(live) > 0 {
			if next >= end {
				why := fmt.Sprintf("reached the %s %d", scans[live[0]].endName, end)
				finish(func(int) bool { return false }, func(s *scan) (sources.Location, error) { return s.stopped(why), nil })
				return
			}
			batch, err := r.searchFetch(ctx, c, topic, p, next, iso, buf)
			buf = batch.recs
			if err != nil {
				finish(func(int) bool { return false }, func(s *scan) (sources.Location, error) { return s.failed(parent, ctx, err) })
				return
			}
			begun := func(j int) bool { return scans[j].start <= next }
			if batch.err != nil {
				why := fetchStop(next, batch.err)
				finish(func(j int) bool { return !begun(j) }, func(s *scan) (sources.Location, error) { return s.stopped(why), nil })
				break // the others from their own start
			}
			end = batch.end(end, iso)
			// The records from next, matched against all the searches at
			// once (by msg_id and by key): hits[j] are the matches of
			// scans[j]; latest and settled say whether a search's records
			// are all quiet for it (feedRun).
			recs := batch.recs
			recs = recs[firstAt(recs, next):]
			for j := range hits {
				hits[j] = hits[j][:0]
			}
			latest := int64(math.MinInt64)
			settled := true
			for i := range recs {
				rec := &recs[i]
				latest = max(latest, rec.stamp)
				if rec.fate != fateCommitted {
					settled = false
				}
				if rec.hasID && idBits.may(rec.idHash) {
					for _, j := range byMsgID[rec.idHash] {
						if matches(scans[j].req, rec.Message) {
							hits[j] = append(hits[j], i)
						}
					}
				}
				if !keyBits.may(rec.keyHash) {
					continue
				}
				for _, j := range byKey[rec.keyHash] {
					if hs := hits[j]; (len(hs) == 0 || hs[len(hs)-1] != i) && matches(scans[j].req, rec.Message) {
						hits[j] = append(hits[j], i)
					}
				}
			}
			kept := live[:0]
			for _, j := range live {
				s := scans[j]
				from := 0
				if len(recs) > 0 && s.start > recs[0].Offset {
					from = firstAt(recs, s.start)
				}
				done, err := s.feedRun(ctx, c, recs, from, hits[j], s.quiet(latest, settled))
				switch {
				case err != nil:
					loc, err := s.failed(parent, ctx, err)
					set(j, loc, err)
				case done:
					set(j, s.loc, nil)
				default:
					kept = append(kept, j)
				}
			}
			live = kept
			if len(live) == 0 {
				return
			}
			if batch.next <= next {
				why := fmt.Sprintf("the broker returned no data at offset %d", next)
				finish(func(j int) bool { return !begun(j) }, func(s *scan) (sources.Location, error) { return s.stopped(why), nil })
				break
			}
			next = batch.next
			if !slices.ContainsFunc(live, begun) {
				break // no search has begun before the next start: jump to it
			}
		}
	}
}

// hashBits is a filter of hashes: may is false for a hash never added.
type hashBits [64]uint64

func (b *hashBits) add(h uint64)      { b[h>>58] |= 1 << (h >> 52 & 63) }
func (b *hashBits) may(h uint64) bool { return b[h>>58]&(1<<(h>>52&63)) != 0 }

// locateStoredMany locates reqs[i] for every i of idx (all at stored
// positions of topic) into locs[i], errs[i].
func (r *Reader) locateStoredMany(ctx context.Context, topic string, reqs []sources.LocateRequest, idx []int, locs []sources.Location, errs []error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	set, fail, c, parts, ok := r.batchStart(ctx, opCtx, topic, idx, locs, errs)
	if !ok {
		return
	}
	byPart := map[int32][]int{}
	var ps []int32
	var all []int
	for _, i := range idx {
		p := reqs[i].Partition
		if !slices.Contains(parts, p) {
			set(i, noStoredPartition(reqs[i], parts), nil)
			continue
		}
		if byPart[p] == nil {
			ps = append(ps, p)
		}
		byPart[p] = append(byPart[p], i)
		all = append(all, i)
	}
	if len(ps) == 0 {
		return
	}
	slices.Sort(ps)
	var starts, ends map[int32]int64
	err := parallel(opCtx,
		func() (err error) {
			starts, err = r.listOffsets(opCtx, c, topic, ps, sarama.OffsetOldest, sarama.ReadUncommitted)
			return err
		},
		func() (err error) {
			ends, err = r.listOffsets(opCtx, c, topic, ps, sarama.OffsetNewest, sarama.ReadUncommitted)
			return err
		},
	)
	if err != nil {
		fail(all, err)
		return
	}

	// decide settles the requests at off from answer a.
	decide := func(p int32, is []int, a storedAnswer) {
		for _, i := range is {
			loc, err := r.decideStored(opCtx, c, reqs[i], starts[p], ends[p], a)
			set(i, loc, err)
		}
	}
	var runs []func()
	for _, p := range ps {
		start, end := starts[p], ends[p]
		at := map[int64][]int{} // wanted offset → its requests
		var wanted []int64
		for _, i := range byPart[p] {
			off := reqs[i].Offset
			if off < start || off >= end {
				// Outside the log: decided without a record.
				decide(p, []int{i}, storedAnswer{lso: -1, next: -1})
				continue
			}
			if at[off] == nil {
				wanted = append(wanted, off)
			}
			at[off] = append(at[off], i)
		}
		slices.Sort(wanted)
		for len(wanted) > 0 {
			n := 1
			for n < len(wanted) && wanted[n]-wanted[n-1] <= manyGapOffsets {
				n++
			}
			run := wanted[:n:n]
			wanted = wanted[n:]
			runs = append(runs, func() { r.storedRun(opCtx, c, topic, p, run, at, decide, fail) })
		}
	}
	sem := make(chan struct{}, manyFetching)
	var wg sync.WaitGroup
	for _, run := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			run()
		})
	}
	wg.Wait()
}

// storedRun reads the wanted offsets (sorted, inside the log) of partition
// p: a fetch from the lowest one not yet decided decides every wanted
// offset its answer holds a record at, and, read_committed, every one at
// or past its last stable offset; an offset the answer holds no record at
// is read as Locate reads it (a fetch of storedFetchBytes of its own).
func (r *Reader) storedRun(ctx context.Context, c sarama.Client, topic string, p int32, wanted []int64, at map[int64][]int,
	decide func(int32, []int, storedAnswer), fail func([]int, error)) {
	iso := r.isolation()
	failRest := func(offs []int64, err error) {
		for _, off := range offs {
			fail(at[off], err)
		}
	}
	for len(wanted) > 0 {
		o := wanted[0]
		batch, err := r.fetch(ctx, c, topic, p, o, manyFetchBytes, iso, wanted)
		if err != nil {
			failRest(wanted, err)
			return
		}
		if batch.err != nil {
			// The answer says nothing of the others: o is decided as
			// Locate would (its fetch from o got the same error).
			decide(p, at[o], batch.at(o))
			wanted = wanted[1:]
			continue
		}
		var rest []int64
		for _, w := range wanted {
			a := batch.at(w)
			switch {
			case iso == sarama.ReadCommitted && batch.lso >= 0 && w >= batch.lso,
				a.rec != nil:
				decide(p, at[w], a)
			case w == o || w < batch.next:
				// No record at w in an answer that reached it: a
				// marker or a compacted gap, read as Locate reads it.
				own, err := r.fetch(ctx, c, topic, p, w, storedFetchBytes, iso, []int64{w})
				if err != nil {
					fail(at[w], err)
					continue
				}
				decide(p, at[w], own.at(w))
			default:
				rest = append(rest, w)
			}
		}
		wanted = rest
	}
}
