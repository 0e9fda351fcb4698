package sources

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// readBinlog reads the evidence of every step with a binlog block
// (docs/where.md#binlog-evidence): the changes of the row the operation's
// message names, in [its earliest timestamp − 1 s, + window], attributed
// by AttributeChanges. A step that cannot be read gets its BinlogErr and
// Sources["binlog"] says why (the report is partial); every step read
// makes it "ok".
func (c *Collector) readBinlog(ctx context.Context, ev *Evidence) {
	p := ev.Pipeline
	status := ""
	for i, s := range p.Steps {
		if s.Binlog == nil || i >= len(ev.DB.Steps) {
			continue
		}
		if ev.Kafka.Message == nil && ev.Sources["kafka"] == StatusOK && !knownOperation(ev.DB) {
			// Nothing of the operation in this pipeline, not even its
			// message: there is no row to read the binlog for (another
			// pipeline's id), and nothing unread.
			status = StatusSkipped
			continue
		}
		if status == "" || status == StatusSkipped {
			status = StatusOK
		}
		rows, attr, err := c.binlogStep(ctx, i, s, ev)
		se := &ev.DB.Steps[i]
		if err != nil {
			se.BinlogErr = s.Name + ": binlog: " + err.Error()
			if status == StatusOK {
				status = se.BinlogErr
			}
			continue
		}
		se.Rows, se.Binlog = rows, attr
	}
	if status != "" {
		ev.Sources["binlog"] = status
	}
}

// knownOperation reports whether MySQL holds anything of the operation: a
// state row, an idempotency record, an evidence row or an intent.
func knownOperation(db DBEvidence) bool {
	if db.State.Found || len(db.Idempotency) > 0 {
		return true
	}
	for i := range db.Steps {
		if s := &db.Steps[i]; len(s.Rows) > 0 || len(s.Intents) > 0 || s.Err != "" {
			return true
		}
	}
	return false
}

// binlogStep reads one step's changes and attributes them
// (docs/where.md#binlog-evidence): the changes of the row the message names
// by the delta it names, in the operation's window, less those another
// operation can account for.
func (c *Collector) binlogStep(ctx context.Context, k int, s config.Step, ev *Evidence) ([]Row, *BinlogAttribution, error) {
	b := s.Binlog
	if c.Binlog == nil {
		if c.BinlogMissing != "" {
			return nil, nil, errors.New(c.BinlogMissing)
		}
		return nil, nil, errors.New("no binlog reader is configured")
	}
	req := BinlogRequest{KeyColumn: b.Key, DeltaColumn: b.Delta}
	req.Schema, req.Table = c.SplitTable(b.Table)
	if t, col := b.TransactionTable(); t != "" {
		req.TxSchema, req.TxTable = c.SplitTable(t)
		req.TxColumn = col
	}
	msg := ev.Kafka.Message
	if msg == nil {
		why := ev.Kafka.SearchDetail
		if k := ev.Sources["kafka"]; k != StatusOK {
			why = "kafka: " + k
		}
		if why == "" {
			why = "not found"
		}
		missing := errors.New("the operation's Kafka message, which binlog.message_key and message_delta read, could not be read (" + why + ")")
		if req.TxTable == "" {
			return nil, nil, missing
		}
		return c.tiedChanges(ctx, k, req, b, ev, missing)
	}
	keyPath, _ := config.ParseMessagePath(b.MessageKey, false)
	deltaPath, _ := config.ParseMessagePath(b.MessageDelta, true)
	key, err := keyPath.Lookup(msg.Value)
	if err != nil {
		return nil, nil, errors.New("binlog.message_key " + b.MessageKey + ": " + err.Error())
	}
	delta, err := deltaPath.Lookup(msg.Value)
	if err != nil {
		return nil, nil, errors.New("binlog.message_delta " + b.MessageDelta + ": " + err.Error())
	}
	from := earliestTime(ev, msg.Timestamp)
	req.Key, req.From, req.To = key, from.Add(-time.Second), from.Add(b.WindowDuration())
	read, err := c.readChanges(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	return c.attribute(ctx, k, req, delta, read.Changes, ev)
}

// readChanges is one read of the binlog, bounded by the timeout.
func (c *Collector) readChanges(ctx context.Context, req BinlogRequest) (BinlogRead, error) {
	bctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	return c.Binlog.Changes(bctx, req)
}

// tiedChanges reads a binlog step without the operation's message (no
// longer retained, or reconcile, which reads no record per candidate): a
// change whose transaction (binlog.transaction) names the operation says
// which row and which delta, and the window is the evidence's earliest
// time ± window (the debit may precede its ledger row). Without such a
// change it returns missing.
func (c *Collector) tiedChanges(ctx context.Context, k int, req BinlogRequest, b *config.Binlog, ev *Evidence, missing error) ([]Row, *BinlogAttribution, error) {
	var at *time.Time
	if ev.DB.State.Found {
		at = ev.DB.State.CreatedAt
	}
	if t := EvidenceTime(ev.DB); at == nil || (t != nil && t.Before(*at)) {
		at = t
	}
	if at == nil {
		return nil, nil, missing
	}
	req.From, req.To = at.Add(-b.WindowDuration()), at.Add(b.WindowDuration())
	// A binlog that begins inside that span still holds the tied change
	// if it holds any: the operation owns no change before its first tied
	// one, so the part before the binlog's start cannot hold one of its
	// own (and the others' windows that reach there are read again, or
	// not held to owning a change).
	req.Clamp = true
	read, err := c.readChanges(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	req.Clamp, req.From = false, maxTime(req.From, read.From)
	for _, ch := range read.Changes {
		if !slices.Contains(ch.TxKeys, ev.BizID) {
			continue
		}
		delta, err := ch.Delta()
		if err != nil {
			return nil, nil, err
		}
		req.Key = fmt.Sprint(ch.Key)
		return c.attribute(ctx, k, req, delta, read.Changes, ev)
	}
	return nil, nil, missing
}

// SplitTable is (schema, table) of "schema.table", or of "table" in
// BinlogSchema.
func (c *Collector) SplitTable(t string) (string, string) {
	if s, tb, ok := strings.Cut(t, "."); ok {
		return s, tb
	}
	return c.BinlogSchema, t
}

// earliestTime is the operation's earliest known timestamp: the message's,
// or the state row's or an idempotency record's creation when earlier.
func earliestTime(ev *Evidence, msgAt time.Time) time.Time {
	t := msgAt
	consider := func(x *time.Time) {
		if x != nil && !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = *x
		}
	}
	if ev.DB.State.Found {
		consider(ev.DB.State.CreatedAt)
	}
	for _, r := range ev.DB.Idempotency {
		consider(r.CreatedAt)
	}
	return t
}

// EvidenceTime is the earliest time value of any step's evidence rows (a
// ledger row's created_at), nil when there is none: what anchors the
// message search of an operation with no state row and no idempotency
// record.
func EvidenceTime(db DBEvidence) *time.Time {
	var out *time.Time
	for i := range db.Steps {
		// Rows only: the probes write the steps' other fields meanwhile.
		for _, r := range db.Steps[i].Rows {
			for _, v := range r.Values {
				if t, ok := v.(time.Time); ok && !t.IsZero() && (out == nil || t.Before(*out)) {
					out = &t
				}
			}
		}
	}
	return out
}
