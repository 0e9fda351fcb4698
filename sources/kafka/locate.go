package kafka

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// noTimestampDetail is the Location detail when there is nothing to start a
// search from.
const noTimestampDetail = "no timestamp known for the operation; the search never starts at the partition head"

// Locate implements sources.Kafka.
//
// With a stored position (req.Partition and req.Offset >= 0) it reads that
// one record, in one concurrent round (the log bounds and the fetch), and
// reports a record deleted by retention, an offset past the log end, or a
// record whose key / msg_id header does not match, in Detail, always
// keeping the stored position.
//
// Otherwise the partition is req.Partition, or the configured partitioner's
// partition for req.Key. With no req.Around nothing is read. Else the offset
// for the timestamp (Around − Window) and the log end are listed in one
// concurrent round, then fetch round trips (about 2 MiB each) read forward
// until a record matches (its msg_id header when req.MsgID is set and the
// record has one, else the exact key bytes), a record's timestamp passes Around + Window, Limit
// records were read or the log end is reached. A search cut short by the
// reader's timeout is reported as not found, with what it scanned; a
// cancelled ctx is an error.
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

	p := req.Partition
	if p < 0 {
		if req.Partitioner == config.PartitionerStored || req.Partitioner == "" {
			loc.Detail = fmt.Sprintf("no stored partition, and partitioner %q cannot compute one from the key", req.Partitioner)
			return loc, nil
		}
		if len(req.Key) == 0 {
			loc.Detail = "no stored partition and no message key: the partition cannot be computed"
			return loc, nil
		}
		p, err = sources.PartitionFor(req.Partitioner, req.Key, int32(len(parts)))
		if err != nil {
			return loc, err
		}
	} else if !slices.Contains(parts, p) {
		loc.Partition = p
		loc.Detail = fmt.Sprintf("partition %d does not exist (topic %s has %d partitions)", p, req.Topic, len(parts))
		return loc, nil
	}
	loc.Partition = p
	if req.Around.IsZero() {
		loc.Detail = noTimestampDetail
		return loc, nil
	}
	if len(req.Key) == 0 && req.MsgID == "" {
		loc.Detail = "nothing to match: neither a message key nor a msg_id is known"
		return loc, nil
	}
	return r.search(parent, ctx, c, req, p)
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

func (r *Reader) locateStored(ctx context.Context, c sarama.Client, req sources.LocateRequest, parts []int32) (sources.Location, error) {
	p, off := req.Partition, req.Offset
	loc := sources.Location{Partition: p, Offset: off, Located: sources.LocatedStored}
	if !slices.Contains(parts, p) {
		loc.Detail = fmt.Sprintf("stored partition %d does not exist (topic %s has %d partitions)", p, req.Topic, len(parts))
		return loc, nil
	}
	var (
		starts, ends map[int32]int64
		batch        fetched
	)
	err := parallel(ctx,
		func() (err error) {
			starts, err = r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetOldest)
			return err
		},
		func() (err error) {
			ends, err = r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetNewest)
			return err
		},
		func() (err error) {
			batch, err = r.fetch(ctx, c, req.Topic, p, off, 1<<20)
			return err
		},
	)
	if err != nil {
		return loc, err
	}
	start, end := starts[p], ends[p]
	switch {
	case off < start:
		loc.Detail = fmt.Sprintf("offset %d is below log start %d: deleted by retention", off, start)
		return loc, nil
	case off >= end:
		loc.Detail = fmt.Sprintf("offset %d is at or past the log end %d: no such record", off, end)
		return loc, nil
	case batch.err != nil:
		loc.Detail = fmt.Sprintf("could not read offset %d: %v", off, batch.err)
		return loc, nil
	}
	for _, m := range batch.msgs {
		if m.Offset < off {
			continue
		}
		if m.Offset > off {
			loc.Detail = fmt.Sprintf("no record at offset %d (compacted away, or a transaction marker); the next record is at %d", off, m.Offset)
			return loc, nil
		}
		if !matches(req, m) {
			loc.Detail = fmt.Sprintf("the record at the stored position does not match the operation (%s); the stored position is kept", mismatch(req, m))
			return loc, nil
		}
		loc.Message = m
		loc.Detail = fmt.Sprintf("read at the stored position (log %d..%d)", start, end)
		return loc, nil
	}
	loc.Detail = fmt.Sprintf("no record at offset %d (compacted away, or a transaction marker)", off)
	return loc, nil
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
	loc := sources.Location{Partition: p, Offset: -1, Located: sources.LocatedUnknown}
	window := req.Window
	if window <= 0 {
		window = sources.DefaultSearchWindow
	}
	limit := req.Limit
	if limit <= 0 {
		limit = sources.DefaultSearchLimit
	}
	from, until := req.Around.Add(-window), req.Around.Add(window)

	var starts, ends map[int32]int64
	err := parallel(ctx,
		func() (err error) {
			starts, err = r.listOffsets(ctx, c, req.Topic, []int32{p}, from.UnixMilli())
			return err
		},
		func() (err error) {
			ends, err = r.listOffsets(ctx, c, req.Topic, []int32{p}, sarama.OffsetNewest)
			return err
		},
	)
	if err != nil {
		return loc, err
	}
	start, end := starts[p], ends[p]
	fromDesc := fmt.Sprintf("timestamp %s, %s before the operation", from.UTC().Format(time.RFC3339Nano), window)
	if start < 0 || start >= end {
		loc.Detail = fmt.Sprintf("not found: partition %d has no record at or after %s (log end %d); nothing to search",
			p, from.UTC().Format(time.RFC3339Nano), end)
		return loc, nil
	}

	scanned := 0
	next := start
	last := int64(-1)
	notFound := func(why string) (sources.Location, error) {
		to := "nothing"
		if last >= 0 {
			to = fmt.Sprint(last)
		}
		loc.Detail = fmt.Sprintf("not found: scanned %d records from offset %d (%s) to %s; stopped: %s",
			scanned, start, fromDesc, to, why)
		return loc, nil
	}
	for {
		if next >= end {
			return notFound(fmt.Sprintf("reached the log end %d", end))
		}
		batch, err := r.fetch(ctx, c, req.Topic, p, next, fetchPartitionBytes)
		if err != nil {
			if parent.Err() == nil && ctx.Err() != nil {
				return notFound(fmt.Sprintf("the %s timeout ended the search (%v)", r.timeout, err))
			}
			return loc, err
		}
		if batch.err != nil {
			if errors.Is(batch.err, sarama.ErrOffsetOutOfRange) {
				return notFound(fmt.Sprintf("offset %d is no longer in the log (retention?)", next))
			}
			return notFound(fmt.Sprintf("fetch at offset %d: %v", next, batch.err))
		}
		if batch.hwm > end {
			end = batch.hwm
		}
		for _, m := range batch.msgs {
			if m.Offset < next {
				continue
			}
			if m.Timestamp.After(until) {
				return notFound(fmt.Sprintf("record timestamps passed %s (%s after the operation) at offset %d",
					until.UTC().Format(time.RFC3339Nano), window, m.Offset))
			}
			scanned++
			last = m.Offset
			if matches(req, m) {
				loc.Offset = m.Offset
				loc.Located = sources.LocatedSearched
				loc.Message = m
				loc.Detail = fmt.Sprintf("found after scanning %d records from offset %d (%s)", scanned, start, fromDesc)
				return loc, nil
			}
			if scanned >= limit {
				return notFound(fmt.Sprintf("limit of %d records reached", limit))
			}
		}
		if batch.next <= next {
			return notFound(fmt.Sprintf("the broker returned no data at offset %d", next))
		}
		next = batch.next
	}
}

// fetched is one partition's answer to a fetch.
type fetched struct {
	// err is the partition-level error (offset out of range, ...).
	err error
	// msgs are the records in offset order; records before the requested
	// offset may be included (a batch starts where it starts).
	msgs []*sources.Message
	// next is the offset after the last batch returned (control batches
	// and compacted gaps included).
	next int64
	hwm  int64
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

// fetch reads from offset in one partition with one Fetch request to its
// leader (read_uncommitted: every record the log holds below the high
// watermark). A moved leader is looked up again once.
func (r *Reader) fetch(ctx context.Context, c sarama.Client, topic string, p int32, offset int64, maxBytes int32) (fetched, error) {
	for attempt := 0; ; attempt++ {
		f, err := call(ctx, func() (fetched, error) { return r.fetchOnce(c, topic, p, offset, maxBytes) })
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

func (r *Reader) fetchOnce(c sarama.Client, topic string, p int32, offset int64, maxBytes int32) (fetched, error) {
	b, err := c.Leader(topic, p)
	if err != nil {
		return fetched{}, fmt.Errorf("leader of partition %d: %w", p, err)
	}
	req := &sarama.FetchRequest{
		Version:     fetchVersion(c.Config().Version),
		MinBytes:    1,
		MaxWaitTime: fetchMaxWaitMs,
		Isolation:   sarama.ReadUncommitted,
	}
	if req.Version >= 3 {
		req.MaxBytes = maxBytes
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
	out := fetched{next: offset, hwm: blk.HighWaterMarkOffset}
	if !errors.Is(blk.Err, sarama.ErrNoError) {
		out.err = blk.Err
		return out, nil
	}
	for _, rs := range blk.RecordsSet {
		switch {
		case rs.RecordBatch != nil:
			rb := rs.RecordBatch
			if !rb.Control {
				for _, rec := range rb.Records {
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
					out.msgs = append(out.msgs, m)
				}
			}
			if !rb.PartialTrailingRecord {
				out.next = max(out.next, rb.LastOffset()+1)
			} else if n := len(rb.Records); n > 0 {
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
					out.msgs = append(out.msgs, &sources.Message{
						Partition: p, Offset: off, Timestamp: ts,
						Key: mb.Msg.Key, Value: mb.Msg.Value, Headers: map[string]string{},
					})
					out.next = max(out.next, off+1)
				}
			}
		}
	}
	return out, nil
}
