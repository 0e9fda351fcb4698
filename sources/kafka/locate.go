package kafka

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// noTimestampDetail is the Location detail when there is nothing to start a
// search from.
const noTimestampDetail = "no timestamp known for the operation; the search never starts at the partition head"

// Locate implements sources.Kafka. It reads as the consumers do
// (kafka.isolation_level): read_committed sees nothing of an aborted
// transaction and nothing past the last stable offset; read_uncommitted
// sees every record. Control records are never the message, and neither is
// a record whose transaction aborted or is not known to have ended: Message
// is never such a record, so a republish never copies one.
//
// With a stored position (req.Partition and req.Offset >= 0) it reads that
// one record, in one concurrent round (the log bounds and the fetch), and
// reports a record deleted by retention, an offset past the log end, a
// record whose key / msg_id header does not match, or one of a transaction
// that did not commit, in Detail, always keeping the stored position.
//
// Otherwise the partition is req.Partition, or the configured partitioner's
// partition for req.Key. With no req.Around nothing is read. Else the offset
// for the timestamp (Around − Window) and the log end are listed in one
// concurrent round, then fetch round trips (about 2 MiB each) read forward
// until a record matches (its msg_id header when req.MsgID is set and the
// record has one, else the exact key bytes), the window ends (windowEndRun
// records in a row stamped after Around + Window: fewer, followed by one
// inside the window, are a producer's clock running ahead), Limit records
// were read or the log end is reached. A match whose transaction aborted or
// has not ended is passed over for a later committed one; with
// read_uncommitted, when none follows, its position is reported without
// the record. A search cut short by the reader's timeout is reported as not
// found, with what it scanned; a cancelled ctx is an error. A reader with
// a search cache (CacheSearches) reads the part of a search's records the
// cache holds from it, and reads the log start with the log end.
func (r *Reader) Locate(ctx context.Context, req sources.LocateRequest) (sources.Location, error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	what := "locate message in " + req.Topic
	loc, err := r.locate(ctx, opCtx, req)
	if err != nil {
		return sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}, r.fail(ctx, opCtx, what, err)
	}
	return loc, nil
}

func (r *Reader) locate(parent, ctx context.Context, req sources.LocateRequest) (sources.Location, error) {
	loc := sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}
	if req.Topic == "" {
		return loc, errors.New("no topic")
	}
	c, err := r.getClient()
	if err != nil {
		return loc, err
	}
	parts, err := call(ctx, func() ([]int32, error) { return c.Partitions(req.Topic) })
	if err != nil {
		return loc, fmt.Errorf("topic metadata: %w", err)
	}

	if req.Partition >= 0 && req.Offset >= 0 {
		return r.locateStored(ctx, c, req, parts)
	}

	p, loc, ok, err := searchTarget(req, parts)
	if !ok || err != nil {
		return loc, err
	}
	return r.search(parent, ctx, c, req, p)
}

// searchTarget is the partition a request without a stored position is
// searched in (of the topic's parts): req.Partition, or the partitioner's
// for req.Key. ok is false, and the Location says why, when nothing can be
// searched: no partition, no timestamp, nothing to match.
func searchTarget(req sources.LocateRequest, parts []int32) (int32, sources.Location, bool, error) {
	loc := sources.Location{Partition: -1, Offset: -1, Located: sources.LocatedUnknown}
	p := req.Partition
	if p < 0 {
		if req.Partitioner == config.PartitionerStored || req.Partitioner == "" {
			loc.Detail = fmt.Sprintf("no stored partition, and partitioner %q cannot compute one from the key", req.Partitioner)
			return p, loc, false, nil
		}
		if len(req.Key) == 0 {
			loc.Detail = "no stored partition and no message key: the partition cannot be computed"
			return p, loc, false, nil
		}
		var err error
		p, err = sources.PartitionFor(req.Partitioner, req.Key, int32(len(parts)))
		if err != nil {
			return p, loc, false, err
		}
	} else if !slices.Contains(parts, p) {
		loc.Partition = p
		loc.Detail = fmt.Sprintf("partition %d does not exist (topic %s has %d partitions)", p, req.Topic, len(parts))
		return p, loc, false, nil
	}
	loc.Partition = p
	if req.Around.IsZero() {
		loc.Detail = noTimestampDetail
		return p, loc, false, nil
	}
	if len(req.Key) == 0 && req.MsgID == "" {
		loc.Detail = "nothing to match: neither a message key nor a msg_id is known"
		return p, loc, false, nil
	}
	return p, loc, true, nil
}

// matches reports whether m is the operation's message. The msg id is the
// message's identity: when it is known and the record carries a msg_id
// header, that header decides (one key may carry several messages of one
// operation, e.g. an order's PAID and SHIPPED events). Otherwise the key
// decides, by exact bytes. With neither known, anything matches.
func matches(req sources.LocateRequest, m *sources.Message) bool {
	if req.MsgID != "" {
		if v, ok := m.Headers[MsgIDHeader]; ok {
			return v == req.MsgID
		}
	}
	if len(req.Key) > 0 {
		return bytes.Equal(m.Key, req.Key)
	}
	return req.MsgID == ""
}

// windowEndRun is how many records in a row stamped after the search
// window's end end the window: fewer, followed by a record stamped inside
// it, are records whose producer's clock runs ahead, and the search goes on
// past them (docs/where.md "Finding the message").
const windowEndRun = 16

// isolation is what the consumers read (kafka.isolation_level).
func (r *Reader) isolation() sarama.IsolationLevel { return isolation(r.cfg) }

// storedFetchBytes is the partition budget of a fetch at a stored
// position. The broker returns at least the whole record batch that holds
// the offset whatever the budget (KIP-74; kfake too: it stops at the
// budget only once a batch is in), so a small budget still reads the
// record, and the batches just after it, where its transaction's marker
// mostly is (read_uncommitted: else settle asks). A budget of 1 MiB decoded
// up to a few thousand records to read one.
const storedFetchBytes = 4 << 10

func (r *Reader) locateStored(ctx context.Context, c sarama.Client, req sources.LocateRequest, parts []int32) (sources.Location, error) {
	p, off := req.Partition, req.Offset
	if !slices.Contains(parts, p) {
		return noStoredPartition(req, parts), nil
	}
	iso := r.isolation()
	var (
		starts, ends map[int32]int64
		batch        fetched
	)
	err := parallel(ctx,
		func() (err error) {
			starts, err = r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetOldest, sarama.ReadUncommitted)
			return err
		},
		func() (err error) {
			ends, err = r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetNewest, sarama.ReadUncommitted)
			return err
		},
		func() (err error) {
			batch, err = r.fetch(ctx, c, req.Topic, p, off, storedFetchBytes, iso, []int64{off})
			return err
		},
	)
	if err != nil {
		return sources.Location{Partition: p, Offset: off, Located: sources.LocatedStored}, err
	}
	return r.decideStored(ctx, c, req, starts[p], ends[p], batch.at(off))
}

// noStoredPartition is the Location of a stored position in a partition
// the topic does not have.
func noStoredPartition(req sources.LocateRequest, parts []int32) sources.Location {
	return sources.Location{Partition: req.Partition, Offset: req.Offset, Located: sources.LocatedStored,
		Detail: fmt.Sprintf("stored partition %d does not exist (topic %s has %d partitions)", req.Partition, req.Topic, len(parts))}
}

// storedAnswer is what a fetch that reached a stored position says of it.
type storedAnswer struct {
	// err is the fetch's partition-level error.
	err error
	// lso is the fetch's last stable offset, -1 when not said.
	lso int64
	// rec is the data record at the offset, nil when the answer has none.
	rec *record
	// next is the offset of the answer's first data record after the
	// offset, -1 when it has none.
	next int64
}

// at is what f says of offset off, which f's fetch reached (f was fetched
// from off, or from below it and read past it).
func (f fetched) at(off int64) storedAnswer {
	a := storedAnswer{err: f.err, lso: f.lso, next: -1}
	i := firstAt(f.recs, off)
	if i < len(f.recs) && f.recs[i].Offset == off {
		a.rec = &f.recs[i]
		return a
	}
	if f.offs != nil {
		if i, _ := slices.BinarySearch(f.offs, off+1); i < len(f.offs) {
			a.next = f.offs[i]
		}
		return a
	}
	if i < len(f.recs) {
		a.next = f.recs[i].Offset // the first past off
	}
	return a
}

// decideStored says what the stored position of req is, from the log's
// bounds (start, end) and what a fetch read at it (a): deleted by
// retention, past the end, unreadable, past the last stable offset, a
// compacted gap or a marker, a record that does not match, one whose
// transaction did not commit (settle asks when the answer does not say),
// or the operation's message. Locate and LocateMany both decide here.
func (r *Reader) decideStored(ctx context.Context, c sarama.Client, req sources.LocateRequest, start, end int64, a storedAnswer) (sources.Location, error) {
	p, off := req.Partition, req.Offset
	loc := sources.Location{Partition: p, Offset: off, Located: sources.LocatedStored}
	iso := r.isolation()
	switch {
	case off < start:
		loc.Detail = fmt.Sprintf("offset %d is below log start %d: deleted by retention", off, start)
		return loc, nil
	case off >= end:
		loc.Detail = fmt.Sprintf("offset %d is at or past the log end %d: no such record", off, end)
		return loc, nil
	case a.err != nil:
		loc.Detail = fmt.Sprintf("could not read offset %d: %v", off, a.err)
		return loc, nil
	case iso == sarama.ReadCommitted && a.lso >= 0 && off >= a.lso:
		loc.Detail = fmt.Sprintf("offset %d is at or past the last stable offset %d: its transaction has not ended, and read_committed consumers do not see it yet; the stored position is kept", off, a.lso)
		return loc, nil
	case a.rec == nil && a.next >= 0:
		loc.Detail = fmt.Sprintf("no record at offset %d (compacted away, or a transaction marker); the next record is at %d", off, a.next)
		return loc, nil
	case a.rec == nil:
		loc.Detail = fmt.Sprintf("no record at offset %d (compacted away, or a transaction marker)", off)
		return loc, nil
	}
	rec := a.rec
	if !matches(req, rec.Message) {
		loc.Detail = fmt.Sprintf("the record at the stored position does not match the operation (%s); the stored position is kept", mismatch(req, rec.Message))
		return loc, nil
	}
	f := rec.fate
	if f == fatePending {
		var err error
		if f, err = r.settle(ctx, c, req.Topic, p, off); err != nil {
			return loc, err
		}
	}
	if f != fateCommitted {
		loc.Detail = "the record at the stored position " + notCopied(f, iso) + "; the stored position is kept"
		return loc, nil
	}
	loc.Message = rec.Message
	loc.Detail = fmt.Sprintf("read at the stored position (log %d..%d)", start, end)
	return loc, nil
}

// notCopied says why a record of a transaction that did not commit is not
// the message read back.
func notCopied(f fate, iso sarama.IsolationLevel) string {
	if f == fateAborted {
		if iso == sarama.ReadCommitted {
			return "was written in a transaction its producer aborted: read_committed consumers never see it, and it is not the operation's message"
		}
		return "was written in a transaction its producer aborted: read_uncommitted consumers read it, but it is not copied by a republish"
	}
	return "is in a transaction not known to have ended (at or past the last stable offset): it is not copied by a republish"
}

func mismatch(req sources.LocateRequest, m *sources.Message) string {
	var s string
	if len(req.Key) > 0 {
		s = fmt.Sprintf("key %q, expected %q", m.Key, req.Key)
	}
	if req.MsgID != "" {
		if s != "" {
			s += "; "
		}
		if v, ok := m.Headers[MsgIDHeader]; ok {
			s += fmt.Sprintf("msg_id %q, expected %q", v, req.MsgID)
		} else {
			s += fmt.Sprintf("no msg_id header, expected %q", req.MsgID)
		}
	}
	return s
}

func (r *Reader) search(parent, ctx context.Context, c sarama.Client, req sources.LocateRequest, p int32) (sources.Location, error) {
	iso := r.isolation()
	var starts, ends map[int32]int64
	var tsErr error
	from := req.Around.Add(-searchWindow(req))
	fns := []func() error{
		func() error {
			// A lookup that fails is not the end of the search: the
			// fallback below reads from the log start instead.
			starts, tsErr = r.listOffsets(ctx, c, req.Topic, []int32{p}, from.UnixMilli(), iso)
			return nil
		},
		func() (err error) {
			ends, err = r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetNewest, iso)
			return err
		},
	}
	sc := r.cache.Load()
	var logStarts map[int32]int64
	var logErr error
	if sc != nil {
		fns = append(fns, func() error {
			logStarts, logErr = r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetOldest, sarama.ReadUncommitted)
			return nil
		})
	}
	if err := parallel(ctx, fns...); err != nil {
		return sources.Location{Partition: p, Offset: -1, Located: sources.LocatedUnknown}, err
	}
	if sc != nil {
		sc.fit(req.Topic, []int32{p}, logStarts, ends, logErr)
	}
	if tsErr != nil && ctx.Err() != nil {
		return sources.Location{Partition: p, Offset: -1, Located: sources.LocatedUnknown}, tsErr
	}
	start := int64(-1)
	if tsErr == nil {
		start = starts[p]
	}
	s, loc, err := r.newScan(ctx, c, req, p, start, ends[p], tsErr)
	if s == nil {
		return loc, err
	}
	end := ends[p]
	next := s.start
	var buf []record
	for {
		if next >= end {
			return s.stopped(fmt.Sprintf("reached the %s %d", s.endName, end)), nil
		}
		batch, err := r.searchFetch(ctx, c, req.Topic, p, next, iso, buf)
		buf = batch.recs
		if err != nil {
			return s.failed(parent, ctx, err)
		}
		if batch.err != nil {
			return s.stopped(fetchStop(next, batch.err)), nil
		}
		end = batch.end(end, iso)
		for _, rec := range batch.recs {
			if rec.Offset < next {
				continue
			}
			done, err := s.feed(ctx, c, rec, matches(req, rec.Message))
			if err != nil {
				return s.failed(parent, ctx, err)
			}
			if done {
				return s.loc, nil
			}
		}
		if batch.next <= next {
			return s.stopped(fmt.Sprintf("the broker returned no data at offset %d", next)), nil
		}
		next = batch.next
	}
}

// searchWindow is req's window, the default when it has none.
func searchWindow(req sources.LocateRequest) time.Duration {
	if req.Window <= 0 {
		return sources.DefaultSearchWindow
	}
	return req.Window
}

// fetchStop says why a search stops on a fetch's partition error at next.
func fetchStop(next int64, err error) string {
	if errors.Is(err, sarama.ErrOffsetOutOfRange) {
		return fmt.Sprintf("offset %d is no longer in the log (retention?)", next)
	}
	return fmt.Sprintf("fetch at offset %d: %v", next, err)
}

// end is the end of the log a search reads to, moved on by f: the last
// stable offset (read_committed) or the high watermark.
func (f fetched) end(end int64, iso sarama.IsolationLevel) int64 {
	if iso == sarama.ReadCommitted {
		return max(end, f.lso)
	}
	return max(end, f.hwm)
}

// scan is one request's search as the records of its partition are read,
// in offset order from its start (feed): how many were read, the run of
// records stamped after the window, the matches held in it, the first
// match whose transaction did not commit. Locate drives one; LocateMany
// drives every search of a partition with one forward read.
type scan struct {
	r             *Reader
	req           sources.LocateRequest
	p             int32
	iso           sarama.IsolationLevel
	committedOnly bool
	endName       string
	window        time.Duration
	limit         int
	until         time.Time
	// start is the first offset read; fromDesc says where it comes from.
	start    int64
	fromDesc string
	// notBefore: records stamped before it are read but never the match
	// (only a search that starts at the log start meets them).
	notBefore time.Time
	// fellBack says why the search starts at the log start ("" when it
	// does not): every Detail then says so.
	fellBack string

	loc       sources.Location
	scanned   int   // records read (control records aside)
	invisible int   // of them, records of aborted transactions (read_committed)
	last      int64 // the last record read, -1 before the first
	// run counts the records in a row stamped after until, from offset
	// runAt; held are the matches among them, inside the window only if
	// a record stamped inside it follows.
	run   int
	runAt int64
	held  []record
	// fallback is the first match whose transaction aborted or has not
	// ended (read_uncommitted consumers read it): the position when no
	// committed record of the operation follows.
	fallback *record
}

// newScan starts req's search in partition p from the offset of its
// window's start (start, -1 when none; tsErr when the lookup failed) and
// the log end. A search with nothing to read returns no scan but its
// Location (or the error of the lookups it took to know).
func (r *Reader) newScan(ctx context.Context, c sarama.Client, req sources.LocateRequest, p int32, start, end int64, tsErr error) (*scan, sources.Location, error) {
	s := &scan{r: r, req: req, p: p, iso: r.isolation(), window: searchWindow(req), limit: req.Limit,
		endName: "log end", last: -1, runAt: -1,
		loc: sources.Location{Partition: p, Offset: -1, Located: sources.LocatedUnknown}}
	if s.limit <= 0 {
		s.limit = sources.DefaultSearchLimit
	}
	from := req.Around.Add(-s.window)
	s.until = req.Around.Add(s.window)
	s.committedOnly = s.iso == sarama.ReadCommitted
	if s.committedOnly {
		s.endName = "last stable offset"
	}
	fromTS := from.UTC().Format(time.RFC3339Nano)
	s.fromDesc = fmt.Sprintf("timestamp %s, %s before the operation", fromTS, s.window)
	if tsErr != nil || start < 0 || start >= end {
		// The timestamp lookup failed, or says no record is stamped at or
		// after from. Believe it only when the log's last record says so
		// too: a broker whose lookup contradicts its log (librdkafka's mock
		// answers -1 for every timestamp) is searched from the log start,
		// within the same limit (docs/where.md "Finding the message").
		why, err := r.doubtLookup(ctx, c, req.Topic, p, from, end, tsErr, s.iso)
		if err != nil {
			return nil, s.loc, err
		}
		if why == "" {
			s.loc.Detail = fmt.Sprintf("not found: partition %d has no record at or after %s (%s %d); nothing to search",
				p, fromTS, s.endName, end)
			return nil, s.loc, nil
		}
		first, err := r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetOldest, sarama.ReadUncommitted)
		if err != nil {
			return nil, s.loc, fmt.Errorf("%s, and the log start could not be read: %w", why, err)
		}
		start, s.notBefore = first[p], from
		s.fromDesc = "the log start"
		s.fellBack = fmt.Sprintf("%s: searched from the log start %d instead, records stamped before %s passed over, at most %d records", why, start, fromTS, s.limit)
		if start >= end {
			s.loc.Detail = fmt.Sprintf("not found: %s; the log is empty (%s %d)", s.fellBack, s.endName, end)
			return nil, s.loc, nil
		}
	}
	if req.Newest && s.fellBack == "" {
		s.fromDesc = fmt.Sprintf("timestamp %s, %s before now", fromTS, s.window)
	}
	if req.Newest && end-int64(s.limit) > start {
		// Anchored at now: the newest Limit records of the window, not
		// its oldest.
		start, s.notBefore = end-int64(s.limit), from
		s.fromDesc = fmt.Sprintf("the newest %d records before the %s %d, back to at most %s", s.limit, s.endName, end, fromTS)
		s.fellBack = ""
	}
	s.start = start
	return s, s.loc, nil
}

func (s *scan) scannedDesc() string {
	d := fmt.Sprintf("%d records from offset %d (%s)", s.scanned, s.start, s.fromDesc)
	if s.invisible > 0 {
		d += fmt.Sprintf(", %d of them in aborted transactions (invisible to read_committed consumers)", s.invisible)
	}
	return d
}

// done ends the search with its Location as it stands: a search that
// fell back to the log start says so.
func (s *scan) done() {
	if s.fellBack != "" {
		s.loc.Detail += " (" + s.fellBack + ")"
	}
}

// stopped ends the search for why: the messages of the key found (All),
// the first match whose transaction did not commit, or not found.
func (s *scan) stopped(why string) sources.Location {
	loc := &s.loc
	switch {
	case s.req.All && len(loc.Messages) > 0:
		first := loc.Messages[0]
		loc.Offset, loc.Located, loc.Message = first.Offset, sources.LocatedSearched, first
		loc.Detail = fmt.Sprintf("found %d message(s) of the key after scanning %s (stopped: %s)", len(loc.Messages), s.scannedDesc(), why)
	case s.fallback != nil:
		loc.Offset, loc.Located = s.fallback.Offset, sources.LocatedSearched
		loc.Detail = fmt.Sprintf("found after scanning %s; the record %s (no committed record of the operation followed; stopped: %s)",
			s.scannedDesc(), notCopied(s.fallback.fate, s.iso), why)
	default:
		to := "nothing"
		if s.last >= 0 {
			to = fmt.Sprint(s.last)
		}
		loc.Detail = fmt.Sprintf("not found: scanned %s to %s; stopped: %s", s.scannedDesc(), to, why)
	}
	s.done()
	return *loc
}

// failed ends the search on a read error: one cut short by the reader's
// timeout (ctx, under parent) is a search that did not find the message.
func (s *scan) failed(parent, ctx context.Context, err error) (sources.Location, error) {
	if parent.Err() == nil && ctx.Err() != nil {
		return s.stopped(fmt.Sprintf("the %s timeout ended the search (%v)", s.r.timeout, err)), nil
	}
	return s.loc, err
}

// take decides a match inside the window: true when it is the
// operation's message (a record that is not in a transaction, or whose
// transaction committed).
func (s *scan) take(ctx context.Context, c sarama.Client, rec record) (bool, error) {
	f := rec.fate
	if f == fatePending {
		var err error
		if f, err = s.r.settle(ctx, c, s.req.Topic, s.p, rec.Offset); err != nil {
			return false, err
		}
		if sc := s.r.cache.Load(); sc != nil {
			sc.settled(topicPartition{s.req.Topic, s.p}, rec.Offset, f)
		}
	}
	// A cached message is shared: the caller gets its own.
	rec.Message = cloneMessage(rec.Message)
	if f != fateCommitted {
		if s.fallback == nil && !s.committedOnly {
			rec.fate = f
			s.fallback = &rec
		}
		return false, nil
	}
	if s.req.All {
		// Every message of the key in the window: an order's PAID and
		// SHIPPED events (docs/where.md#records-without-a-biz_id).
		s.loc.Messages = append(s.loc.Messages, rec.Message)
		return false, nil
	}
	s.loc.Offset, s.loc.Located, s.loc.Message = rec.Offset, sources.LocatedSearched, rec.Message
	s.loc.Detail = "found after scanning " + s.scannedDesc()
	if s.fallback != nil {
		s.loc.Detail += fmt.Sprintf("; the record at offset %d matched first, but %s", s.fallback.Offset, notCopied(s.fallback.fate, s.iso))
	}
	s.done()
	return true, nil
}

// feed reads the next record (at or after start, in offset order);
// matched says whether it matches the request. It returns true when the
// search ended: s.loc is then its Location.
func (s *scan) feed(ctx context.Context, c sarama.Client, rec record, matched bool) (bool, error) {
	s.scanned++
	s.last = rec.Offset
	switch {
	case s.committedOnly && rec.fate == fateAborted:
		s.invisible++
	case s.committedOnly && rec.fate != fateCommitted:
		// Past the last stable offset: not visible yet.
	case rec.Timestamp.After(s.until):
		if s.run == 0 {
			s.runAt = rec.Offset
		}
		s.run++
		if matched {
			s.held = append(s.held, rec)
		}
		if s.run >= windowEndRun {
			s.stopped(fmt.Sprintf("record timestamps passed %s (%s after the operation) from offset %d on",
				s.until.UTC().Format(time.RFC3339Nano), s.window, s.runAt))
			return true, nil
		}
	default:
		// A record stamped inside the window: the run before it, if
		// any, was inside the window too.
		s.run = 0
		if matched && !rec.Timestamp.Before(s.notBefore) {
			s.held = append(s.held, rec)
		}
		for _, h := range s.held {
			ok, err := s.take(ctx, c, h)
			if err != nil {
				return false, err
			}
			if ok {
				return true, nil
			}
		}
		s.held = s.held[:0]
	}
	if s.scanned >= s.limit {
		s.stopped(s.limitReached())
		return true, nil
	}
	return false, nil
}

// quiet says whether records whose latest stamp is latest (record.stamp)
// and that are all committed (settled) are quiet for s (feedRun).
func (s *scan) quiet(latest int64, settled bool) bool {
	return latest <= msFloor(s.until) && (settled || !s.committedOnly)
}

func (s *scan) limitReached() string { return fmt.Sprintf("limit of %d records reached", s.limit) }

// feedRun feeds recs[from:] (in offset order, at or after start) as feed
// would one by one, the records at the indices hits (sorted; those below
// from passed over) being the matches. quiet says that no record of recs
// is stamped after until and, for a read_committed search, that every one
// committed: each record that is not a match then only counts (it is
// inside the window, and no match is held when none is), so the records
// between matches are counted at once, not fed (the watch's searches read
// the same 5 minutes of records every batch: docs/performance.md).
func (s *scan) feedRun(ctx context.Context, c sarama.Client, recs []record, from int, hits []int, quiet bool) (bool, error) {
	for len(hits) > 0 && hits[0] < from {
		hits = hits[1:]
	}
	for i := from; i < len(recs); {
		hit := len(hits) > 0 && hits[0] == i
		if !quiet || hit || s.run > 0 || len(s.held) > 0 {
			if hit {
				hits = hits[1:]
			}
			done, err := s.feed(ctx, c, recs[i], hit)
			if done || err != nil {
				return done, err
			}
			i++
			continue
		}
		// recs[i:j]: no match among them, each inside the window.
		j := len(recs)
		if len(hits) > 0 {
			j = hits[0]
		}
		if k := max(1, s.limit-s.scanned); j-i >= k {
			s.scanned += k
			s.last = recs[i+k-1].Offset
			s.stopped(s.limitReached())
			return true, nil
		}
		s.scanned += j - i
		s.last = recs[j-1].Offset
		i = j
	}
	return false, nil
}

// doubtLookup decides whether a timestamp lookup that found no offset for
// from in partition p (or that failed: tsErr) may be believed. It returns
// "" when the log's last record below end is stamped before from (the
// lookup is right: nothing to search), else why the search starts at the
// log start instead.
func (r *Reader) doubtLookup(ctx context.Context, c sarama.Client, topic string, p int32, from time.Time, end int64, tsErr error, iso sarama.IsolationLevel) (string, error) {
	fromTS := from.UTC().Format(time.RFC3339Nano)
	if tsErr != nil {
		return fmt.Sprintf("the timestamp lookup for %s failed (%v)", fromTS, tsErr), nil
	}
	if end <= 0 {
		return "", nil
	}
	// The batch that holds end-1 comes whole whatever the budget (KIP-74),
	// and what follows it is at or past end: the small budget reads the
	// same last record.
	batch, err := r.fetch(ctx, c, topic, p, end-1, storedFetchBytes, iso, nil)
	if err != nil {
		return "", fmt.Errorf("the last record, to check the timestamp lookup: %w", err)
	}
	var last *record
	for i := range batch.recs {
		if rec := &batch.recs[i]; rec.Offset < end && (last == nil || rec.Offset > last.Offset) {
			last = rec
		}
	}
	if batch.err != nil || last == nil || last.Timestamp.Before(from) {
		return "", nil
	}
	return fmt.Sprintf("the broker's timestamp lookup found no offset for %s, but the record at offset %d is stamped %s",
		fromTS, last.Offset, last.Timestamp.UTC().Format(time.RFC3339Nano)), nil
}

// fate is what became of a record's transaction.
type fate uint8

const (
	// fateCommitted: the record is not in a transaction, or its
	// transaction committed.
	fateCommitted fate = iota
	// fateAborted: its producer aborted its transaction.
	fateAborted
	// fatePending: in a transaction, and the fetch that read it does not
	// show how the transaction ended (settle asks).
	fatePending
	// fateOpen: in a transaction not known to have ended: at or past the
	// last stable offset.
	fateOpen
)

// record is one data record of a fetch and what became of its transaction.
type record struct {
	*sources.Message
	fate fate
	// What a batched search matches and bounds a record by without
	// reading its Message (scanMany reads the same records every batch):
	// its timestamp in Unix ms rounded up (stamp), the hashes of its key
	// and of its msg_id header (matchSeed) and whether it has one (hasID).
	hasID   bool
	stamp   int64
	keyHash uint64
	idHash  uint64
}

// matchSeed seeds the hashes of records' keys and msg ids.
var matchSeed = maphash.MakeSeed()

// newRecord is the record of m, of fate f.
func newRecord(m *sources.Message, f fate) record {
	rec := record{Message: m, fate: f, stamp: msCeil(m.Timestamp), keyHash: maphash.Bytes(matchSeed, m.Key)}
	if id, ok := m.Headers[MsgIDHeader]; ok {
		rec.hasID, rec.idHash = true, maphash.String(matchSeed, id)
	}
	return rec
}

// msCeil is t in Unix milliseconds rounded up, msFloor rounded down.
func msCeil(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}

func msFloor(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.Before(time.UnixMilli(ms)) {
		ms--
	}
	return ms
}

// fetched is one partition's answer to a fetch.
type fetched struct {
	// err is the partition-level error (offset out of range, ...).
	err error
	// recs are the data records in offset order, control records left out;
	// records before the requested offset may be included (a batch starts
	// where it starts).
	recs []record
	// offs are the offsets of every data record at or after the fetch's
	// offset, in order, when the fetch decoded only the wanted offsets'
	// records (nil otherwise).
	offs []int64
	// next is the offset after the last batch returned (control batches
	// and compacted gaps included).
	next int64
	hwm  int64
	// lso is the last stable offset, -1 when the broker does not say
	// (Fetch before v4).
	lso int64
}

func fetchVersion(v sarama.KafkaVersion) int16 {
	switch {
	case v.IsAtLeast(sarama.V2_7_0_0):
		return 12
	case v.IsAtLeast(sarama.V2_3_0_0):
		return 11
	case v.IsAtLeast(sarama.V2_1_0_0):
		return 10
	case v.IsAtLeast(sarama.V2_0_0_0):
		return 8
	case v.IsAtLeast(sarama.V1_1_0_0):
		return 7
	case v.IsAtLeast(sarama.V1_0_0_0):
		return 6
	case v.IsAtLeast(sarama.V0_11_0_0):
		return 5
	case v.IsAtLeast(sarama.V0_10_1_0):
		return 3
	case v.IsAtLeast(sarama.V0_10_0_0):
		return 2
	case v.IsAtLeast(sarama.V0_9_0_0):
		return 1
	}
	return 0
}

// settle finds out how the transaction of the record at off ended, with
// one read_committed fetch from off: the broker returns nothing at or past
// the last stable offset (fateOpen) and lists the aborted transactions that
// overlap what it returns.
func (r *Reader) settle(ctx context.Context, c sarama.Client, topic string, p int32, off int64) (fate, error) {
	f, err := r.fetch(ctx, c, topic, p, off, storedFetchBytes, sarama.ReadCommitted, []int64{off})
	if err != nil {
		return fatePending, fmt.Errorf("how the transaction of offset %d ended: %w", off, err)
	}
	if f.err != nil {
		return fatePending, fmt.Errorf("how the transaction of offset %d ended: %w", off, f.err)
	}
	if f.lso >= 0 && off >= f.lso {
		return fateOpen, nil
	}
	for _, rec := range f.recs {
		if rec.Offset == off && rec.fate != fatePending {
			return rec.fate, nil
		}
	}
	return fateOpen, nil
}

// fetch reads from offset in one partition with one Fetch request to its
// leader, as a consumer with isolation level iso reads: read_uncommitted,
// every record below the high watermark; read_committed, those below the
// last stable offset. A moved leader is looked up again once. With wanted
// (sorted offsets) only their records become messages, and fetched.offs
// lists the offsets of the others at or after offset: the answer is
// decoded whole either way, but a record nobody asked for costs no
// message.
func (r *Reader) fetch(ctx context.Context, c sarama.Client, topic string, p int32, offset int64, maxBytes int32, iso sarama.IsolationLevel, wanted []int64) (fetched, error) {
	for attempt := 0; ; attempt++ {
		f, err := call(ctx, func() (fetched, error) { return r.fetchOnce(c, topic, p, offset, maxBytes, iso, wanted) })
		if err == nil && (f.err == nil || attempt > 0 || !isLeaderErr(f.err)) {
			// Success, or a partition-level answer the caller reports.
			return f, nil
		}
		if err == nil {
			err = f.err // the leader moved: look it up again
		}
		if attempt > 0 || ctx.Err() != nil || !isLeaderErr(err) {
			return fetched{}, err
		}
		if rerr := c.RefreshMetadata(topic); rerr != nil {
			return fetched{}, errors.Join(err, rerr)
		}
	}
}

// controlType is the marker a control batch carries (its record's key is
// a version and a type), ControlRecordUnknown for anything else.
func controlType(rb *sarama.RecordBatch) sarama.ControlRecordType {
	if len(rb.Records) == 0 || rb.Records[0] == nil || len(rb.Records[0].Key) < 4 {
		return sarama.ControlRecordUnknown
	}
	switch binary.BigEndian.Uint16(rb.Records[0].Key[2:4]) {
	case 0:
		return sarama.ControlRecordAbort
	case 1:
		return sarama.ControlRecordCommit
	}
	return sarama.ControlRecordUnknown
}

func (r *Reader) fetchOnce(c sarama.Client, topic string, p int32, offset int64, maxBytes int32, iso sarama.IsolationLevel, wanted []int64) (fetched, error) {
	b, err := c.Leader(topic, p)
	if err != nil {
		return fetched{}, fmt.Errorf("leader of partition %d: %w", p, err)
	}
	req := &sarama.FetchRequest{
		Version:     fetchVersion(c.Config().Version),
		MinBytes:    1,
		MaxWaitTime: fetchMaxWaitMs,
		Isolation:   iso,
	}
	if req.Version >= 3 {
		// The one partition's budget bounds the answer; a response budget
		// as large as the Java consumer's (fetch.max.bytes) never cuts it
		// first (kfake then leaves out the aborted transactions).
		req.MaxBytes = max(maxBytes, fetchResponseBytes)
	}
	if req.Version >= 7 {
		req.SessionID = 0
		req.SessionEpoch = -1 // no fetch session
	}
	req.AddBlock(topic, p, offset, maxBytes, -1)
	resp, err := b.Fetch(req)
	if err != nil {
		return fetched{}, fmt.Errorf("fetch from broker %s: %w", b.Addr(), err)
	}
	blk := resp.GetBlock(topic, p)
	if blk == nil {
		return fetched{}, fmt.Errorf("fetch: no answer for partition %d", p)
	}
	out := fetched{next: offset, hwm: blk.HighWaterMarkOffset, lso: -1}
	// skip passes over a record of no wanted offset, noting its offset.
	skip := func(off int64) bool {
		if wanted == nil {
			return false
		}
		if off < offset {
			return true
		}
		if out.offs == nil {
			out.offs = make([]int64, 0, 64)
		}
		out.offs = append(out.offs, off)
		_, ok := slices.BinarySearch(wanted, off)
		return !ok
	}
	if req.Version >= 4 {
		out.lso = blk.LastStableOffset
	}
	if !errors.Is(blk.Err, sarama.ErrNoError) {
		out.err = blk.Err
		return out, nil
	}

	// What became of each transactional batch. read_committed: the broker
	// lists the aborted transactions overlapping what it returns; a
	// producer's batches are aborted from its transaction's first offset to
	// its abort marker (the consumer's rule, Java's and sarama's alike).
	// read_uncommitted: there is no such list; the producer's next marker
	// in this response says, else settle asks.
	var abortedTxns []*sarama.AbortedTransaction
	abortedPIDs := map[int64]bool{}
	var markers map[int]sarama.ControlRecordType // batch index → its producer's next marker
	if iso == sarama.ReadCommitted {
		for _, t := range blk.AbortedTransactions {
			if t != nil {
				abortedTxns = append(abortedTxns, t)
			}
		}
		slices.SortFunc(abortedTxns, func(a, b *sarama.AbortedTransaction) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	} else {
		markers = map[int]sarama.ControlRecordType{}
		seen := map[int64]sarama.ControlRecordType{}
		for i := len(blk.RecordsSet) - 1; i >= 0; i-- {
			rb := blk.RecordsSet[i].RecordBatch
			switch {
			case rb == nil:
			case rb.Control:
				seen[rb.ProducerID] = controlType(rb)
			case rb.IsTransactional:
				if t, ok := seen[rb.ProducerID]; ok {
					markers[i] = t
				}
			}
		}
	}

	for i, rs := range blk.RecordsSet {
		switch {
		case rs.RecordBatch != nil:
			rb := rs.RecordBatch
			for len(abortedTxns) > 0 && abortedTxns[0].FirstOffset <= rb.LastOffset() {
				abortedPIDs[abortedTxns[0].ProducerID] = true
				abortedTxns = abortedTxns[1:]
			}
			if rb.Control {
				if controlType(rb) == sarama.ControlRecordAbort {
					delete(abortedPIDs, rb.ProducerID)
				}
			} else {
				f := fateCommitted
				if rb.IsTransactional {
					marker, marked := markers[i]
					switch {
					case iso == sarama.ReadCommitted && abortedPIDs[rb.ProducerID]:
						f = fateAborted
					case iso == sarama.ReadCommitted && out.lso >= 0 && rb.FirstOffset >= out.lso:
						f = fateOpen
					case iso == sarama.ReadCommitted:
					case marked && marker == sarama.ControlRecordCommit:
					case marked && marker == sarama.ControlRecordAbort:
						f = fateAborted
					default:
						f = fatePending
					}
				}
				for _, rec := range rb.Records {
					if rec == nil || skip(rb.FirstOffset+rec.OffsetDelta) {
						continue
					}
					ts := rb.FirstTimestamp.Add(rec.TimestampDelta)
					if rb.LogAppendTime {
						ts = rb.MaxTimestamp
					}
					m := &sources.Message{
						Partition: p,
						Offset:    rb.FirstOffset + rec.OffsetDelta,
						Timestamp: ts,
						Key:       rec.Key,
						Value:     rec.Value,
						Headers:   map[string]string{},
					}
					for _, h := range rec.Headers {
						if h != nil {
							m.Headers[string(h.Key)] = string(h.Value)
						}
					}
					out.recs = append(out.recs, newRecord(m, f))
				}
			}
			if !rb.PartialTrailingRecord {
				out.next = max(out.next, rb.LastOffset()+1)
			} else if n := len(rb.Records); n > 0 && rb.Records[n-1] != nil {
				out.next = max(out.next, rb.FirstOffset+rb.Records[n-1].OffsetDelta+1)
			}
		case rs.MsgSet != nil:
			for _, blk := range rs.MsgSet.Messages {
				inner := blk.Messages()
				for _, mb := range inner {
					off := mb.Offset
					ts := mb.Msg.Timestamp
					if mb.Msg.Version >= 1 && len(inner) > 0 {
						off += blk.Offset - inner[len(inner)-1].Offset
						if mb.Msg.LogAppendTime {
							ts = blk.Msg.Timestamp
						}
					}
					out.next = max(out.next, off+1)
					if skip(off) {
						continue
					}
					out.recs = append(out.recs, newRecord(&sources.Message{
						Partition: p, Offset: off, Timestamp: ts,
						Key: mb.Msg.Key, Value: mb.Msg.Value, Headers: map[string]string{},
					}, fateCommitted))
				}
			}
		}
	}
	return out, nil
}
