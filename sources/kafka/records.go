package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
)

// Records reads every data record of topic stamped in [from, to], in each
// partition from the offset ListOffsets gives for from until windowEndRun
// records in a row are stamped after to (a producer's clock running ahead
// does not end it), the log end (the last stable offset for
// read_committed), or limit records of that partition (0: no limit). Each
// record is handed to each, partition by partition in offset order
// (control records and, for read_committed, records of aborted
// transactions left out). It is how reconcile maps msg ids to keys and
// finds the operations a binlog change may belong to
// (docs/reconcile.md#reading-the-topic). Every round trip is bounded by
// the reader's timeout; ctx stops the read.
func (r *Reader) Records(ctx context.Context, topic string, from, to time.Time, limit int, each func(*sources.Message)) (sources.RecordsRead, error) {
	var out sources.RecordsRead
	c, err := r.getClient()
	if err != nil {
		return out, err
	}
	opCtx, cancel := r.op(ctx)
	parts, err := call(opCtx, func() ([]int32, error) { return c.Partitions(topic) })
	if err == nil {
		slices.Sort(parts)
	}
	var starts, ends map[int32]int64
	iso := r.isolation()
	if err == nil {
		err = parallel(opCtx,
			func() (err error) {
				starts, err = r.listOffsets(opCtx, c, topic, parts, from.UnixMilli(), iso)
				return err
			},
			func() (err error) {
				ends, err = r.listOffsets(opCtx, c, topic, parts, sarama.OffsetNewest, iso)
				return err
			})
	}
	cancel()
	if err != nil {
		return out, r.fail(ctx, opCtx, "read "+topic+" from "+from.UTC().Format(time.RFC3339), err)
	}
	for _, p := range parts {
		start, end := starts[p], ends[p]
		if start < 0 || start >= end {
			continue
		}
		n, cut, err := r.readRange(ctx, c, topic, p, start, end, to, limit, iso, each)
		out.Records += n
		if err != nil {
			return out, err
		}
		if cut {
			out.Cut = append(out.Cut, p)
		}
	}
	return out, nil
}

// readRange reads one partition of Records from start; cut is true when
// limit records were read before the window ended.
func (r *Reader) readRange(ctx context.Context, c sarama.Client, topic string, p int32, start, end int64, to time.Time, limit int, iso sarama.IsolationLevel, each func(*sources.Message)) (n int, cut bool, err error) {
	next, run := start, 0
	for next < end {
		if ctx.Err() != nil {
			return n, false, ctx.Err()
		}
		opCtx, cancel := r.op(ctx)
		batch, err := r.fetch(opCtx, c, topic, p, next, fetchPartitionBytes, iso, nil)
		cancel()
		if err != nil {
			return n, false, r.fail(ctx, opCtx, fmt.Sprintf("read %s/%d at offset %d", topic, p, next), err)
		}
		if batch.err != nil {
			if errors.Is(batch.err, sarama.ErrOffsetOutOfRange) {
				return n, false, nil // deleted by retention meanwhile
			}
			return n, false, fmt.Errorf("read %s/%d at offset %d: %w", topic, p, next, batch.err)
		}
		for _, rec := range batch.recs {
			if rec.Offset < next || rec.Offset >= end {
				continue
			}
			if iso == sarama.ReadCommitted && rec.fate != fateCommitted {
				continue
			}
			if rec.Timestamp.After(to) {
				if run++; run >= windowEndRun {
					return n, false, nil
				}
				continue
			}
			run = 0
			each(rec.Message)
			if n++; limit > 0 && n >= limit {
				return n, true, nil
			}
		}
		if batch.next <= next {
			return n, false, nil
		}
		next = batch.next
	}
	return n, false, nil
}
