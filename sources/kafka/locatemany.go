package kafka

import (
	"context"
	"fmt"
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
	// manyLocating bounds the requests without a stored position that a
	// LocateMany locates at once, each as Locate does.
	manyLocating = 16
)

// LocateMany implements sources.BatchLocator: locs[i], errs[i] are what
// Locate(ctx, reqs[i]) returns. The requests with a stored position are
// read per topic in one bounded call (the reader's timeout, as one
// Locate): the topic's metadata, then the log start and end of all their
// partitions in one concurrent round (a ListOffsets per leader for each),
// then each partition's wanted offsets inside the log, sorted, by fetches
// of at most manyFetchBytes from the lowest one no answer has covered yet
// (runs of offsets more than manyGapOffsets apart concurrently, at most
// manyFetching fetches at once). Each position is then decided as Locate
// decides it (decideStored); one the answers hold no record at is read by
// a fetch of its own, as Locate reads it, so that even the next record its
// Detail names is the same. The other requests are located one by one, as
// Locate does, at most manyLocating at once.
func (r *Reader) LocateMany(ctx context.Context, reqs []sources.LocateRequest) ([]sources.Location, []error) {
	locs := make([]sources.Location, len(reqs))
	errs := make([]error, len(reqs))
	stored := map[string][]int{}
	var topics []string
	var others []int
	for i, req := range reqs {
		if req.Topic == "" || req.Partition < 0 || req.Offset < 0 {
			others = append(others, i)
			continue
		}
		if stored[req.Topic] == nil {
			topics = append(topics, req.Topic)
		}
		stored[req.Topic] = append(stored[req.Topic], i)
	}
	var wg sync.WaitGroup
	for _, topic := range topics {
		wg.Go(func() { r.locateStoredMany(ctx, topic, reqs, stored[topic], locs, errs) })
	}
	sem := make(chan struct{}, manyLocating)
	for _, i := range others {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			locs[i], errs[i] = r.Locate(ctx, reqs[i])
		})
	}
	wg.Wait()
	return locs, errs
}

// locateStoredMany locates reqs[i] for every i of idx (all at stored
// positions of topic) into locs[i], errs[i].
func (r *Reader) locateStoredMany(ctx context.Context, topic string, reqs []sources.LocateRequest, idx []int, locs []sources.Location, errs []error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	var mu sync.Mutex // guards errs and locs against the runs' goroutines
	set := func(i int, loc sources.Location, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			loc = sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}
			err = r.fail(ctx, opCtx, "locate message in "+topic, err)
		}
		locs[i], errs[i] = loc, err
	}
	fail := func(is []int, err error) {
		for _, i := range is {
			set(i, sources.Location{}, err)
		}
	}
	c, err := r.getClient()
	if err != nil {
		fail(idx, err)
		return
	}
	parts, err := call(opCtx, func() ([]int32, error) { return c.Partitions(topic) })
	if err != nil {
		fail(idx, fmt.Errorf("topic metadata: %w", err))
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
	err = parallel(opCtx,
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
