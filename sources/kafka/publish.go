package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"

	"github.com/IBM/sarama"

	"github.com/opctl-dev/opctl/sources"
)

// The publish path of a republish (docs/repair.md "Crash safety and
// resume"): Publish sends one record and, when it gets no answer, says
// that the record may have been written instead of sending it again;
// LogEnd and FindPublished let the caller look such a record up in its
// partition (by the headers it carries) before it is ever sent twice.

func (r *Reader) getProducer(c sarama.Client) (sarama.SyncProducer, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("kafka: reader is closed")
	}
	if r.producer != nil {
		return r.producer, nil
	}
	p, err := sarama.NewSyncProducerFromClient(c)
	if err != nil {
		return nil, err
	}
	r.producer = p
	return p, nil
}

// abandonProducer drops p after a send on it did not end in time: its
// request may still be waiting on a broker that does not answer, and
// closing p waits for that request (the connection's read timeout, per
// retry). It is closed in the background; the next Publish makes a new one,
// and Close does not wait for it, so an interrupted or timed-out apply ends
// at once.
func (r *Reader) abandonProducer(p sarama.SyncProducer) {
	r.mu.Lock()
	if r.producer == p {
		r.producer = nil
	}
	r.mu.Unlock()
	go func() { _ = p.Close() }()
}

// Publish sends one record to exactly topic/partition (a republish action),
// waiting for all in-sync replicas, and returns where it was written. The
// producer is created on first use and closed by Close; it never re-sends a
// record by itself (kafka's own retries would write it twice when the
// first copy was written but its answer lost).
//
// It returns within the reader's timeout or when ctx ends, whichever is
// first. A failure is a *sources.SendError saying whether the record may
// have been written (no answer in time, an interrupt, a connection that
// broke after the request went out, a broker timing out on its replicas):
// the caller then looks it up (FindPublished) before it sends it again.
func (r *Reader) Publish(ctx context.Context, topic string, partition int32, key, value []byte, headers map[string]string) (int32, int64, error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	what := fmt.Sprintf("publish to %s/%d", topic, partition)
	c, err := r.getClient()
	if err != nil {
		return -1, -1, r.sendError(ctx, opCtx, what, err)
	}
	p, err := r.getProducer(c)
	if err != nil {
		return -1, -1, r.sendError(ctx, opCtx, what, err)
	}
	msg := &sarama.ProducerMessage{Topic: topic, Partition: partition, Value: sarama.ByteEncoder(value)}
	if key != nil {
		msg.Key = sarama.ByteEncoder(key)
	}
	names := make([]string, 0, len(headers))
	for k := range headers {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		msg.Headers = append(msg.Headers, sarama.RecordHeader{Key: []byte(k), Value: []byte(headers[k])})
	}
	type written struct {
		p   int32
		off int64
	}
	w, err := call(opCtx, func() (written, error) {
		p, off, err := p.SendMessage(msg)
		return written{p, off}, err
	})
	if err != nil {
		if opCtx.Err() != nil {
			r.abandonProducer(p)
		}
		return -1, -1, r.sendError(ctx, opCtx, what, err)
	}
	return w.p, w.off, nil
}

// sendError is a failed send as a *sources.SendError: whether the record
// may have been written, and whether Kafka answered at all.
func (r *Reader) sendError(ctx, opCtx context.Context, what string, err error) error {
	may, unreachable := sendFate(err)
	return &sources.SendError{Source: "Kafka", MayHaveSent: may, Unreachable: unreachable, Err: r.fail(ctx, opCtx, what, err)}
}

// sendFate classifies a send's error: may is true unless the record
// certainly was not written (an error answer from the broker that writes
// nothing, nothing dialled, no broker known); unreachable when no broker
// answered.
func sendFate(err error) (may, unreachable bool) {
	var kerr sarama.KError
	var op *net.OpError
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true, true // the request may be on its way; nothing answered
	case errors.As(err, &kerr):
		switch kerr {
		case sarama.ErrRequestTimedOut, sarama.ErrNotEnoughReplicasAfterAppend, sarama.ErrNetworkException:
			return true, false // written on the leader, replicas not confirmed
		}
		return false, false // the broker refused it: nothing was written
	case errors.As(err, &op) && op.Op == "dial",
		errors.Is(err, sarama.ErrOutOfBrokers), errors.Is(err, sarama.ErrNotConnected), errors.Is(err, sarama.ErrClosedClient):
		return false, true // nothing left this process
	}
	return true, true // a connection that broke or timed out after the request
}

// LogEnd is topic/partition's log end offset: a record sent after it was
// read is at this offset or later.
func (r *Reader) LogEnd(ctx context.Context, topic string, partition int32) (int64, error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	what := fmt.Sprintf("log end of %s/%d", topic, partition)
	c, err := r.getClient()
	if err != nil {
		return -1, r.readError(ctx, opCtx, what, err)
	}
	ends, err := r.listOffsets(opCtx, c, topic, []int32{partition}, sarama.OffsetNewest, sarama.ReadUncommitted)
	if err != nil {
		return -1, r.readError(ctx, opCtx, what, err)
	}
	return ends[partition], nil
}

// FindPublished looks for a record of topic/partition at offset from or
// later, up to the partition's end, whose headers hold every pair of match
// (a republish's opctl-plan and msg_id), and returns its offset. It reads
// as a read_uncommitted consumer, one fetch at a time, within the reader's
// timeout; a search that could not reach the end is an error, never "not
// found". Records that retention already deleted cannot be found: a from
// before the log start is searched from the log start.
func (r *Reader) FindPublished(ctx context.Context, topic string, partition int32, from int64, match map[string]string) (int64, bool, error) {
	opCtx, cancel := r.op(ctx)
	defer cancel()
	what := fmt.Sprintf("look up a record in %s/%d from offset %d", topic, partition, from)
	c, err := r.getClient()
	if err != nil {
		return -1, false, r.readError(ctx, opCtx, what, err)
	}
	off := max(from, 0)
	restarted := false
	for {
		f, err := r.fetch(opCtx, c, topic, partition, off, fetchPartitionBytes, sarama.ReadUncommitted, nil)
		if err == nil && errors.Is(f.err, sarama.ErrOffsetOutOfRange) && !restarted {
			// Before the log start (retention deleted it) or past the end.
			restarted = true
			starts, lerr := r.listOffsets(opCtx, c, topic, []int32{partition}, sarama.OffsetOldest, sarama.ReadUncommitted)
			if lerr != nil {
				return -1, false, r.readError(ctx, opCtx, what, lerr)
			}
			if off >= starts[partition] {
				return -1, false, nil // past the end: nothing was written there
			}
			off = starts[partition]
			continue
		}
		if err == nil && f.err != nil {
			err = f.err
		}
		if err != nil {
			return -1, false, r.readError(ctx, opCtx, what, err)
		}
		for _, rec := range f.recs {
			if rec.Offset >= from && hasHeaders(rec.Message, match) {
				return rec.Offset, true, nil
			}
		}
		switch {
		case off >= f.hwm || f.next >= f.hwm:
			return -1, false, nil // read to the end
		case f.next <= off:
			return -1, false, r.readError(ctx, opCtx, what, fmt.Errorf("the fetch at offset %d made no progress (high watermark %d)", off, f.hwm))
		}
		off = f.next
	}
}

// hasHeaders reports whether m carries every header of match.
func hasHeaders(m *sources.Message, match map[string]string) bool {
	for k, v := range match {
		if got, ok := m.Headers[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// readError is a failed read of the publish path: Kafka unreachable when
// no broker answered.
func (r *Reader) readError(ctx, opCtx context.Context, what string, err error) error {
	_, unreachable := sendFate(err)
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		unreachable = false
	}
	return &sources.SendError{Source: "Kafka", Unreachable: unreachable, Err: r.fail(ctx, opCtx, what, err)}
}
