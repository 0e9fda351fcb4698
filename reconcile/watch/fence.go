package watch

import (
	"context"
	"math/big"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources"
)

// When a binlog change that triaged to no target is looked at again
// (docs/watch.md#how-it-works, "the fence"). The server writes a
// transaction to its binlog before its engine commit is visible, so the
// triage that follows a change may read the rows as they were before it.
// The report cannot say which version it read: a triage reads an
// operation's tables with concurrent statements (sources/mysql's
// ReadOperation), so its state row may show the transaction while its
// evidence, read by a statement that started a moment earlier, does not.
// What proves the triage saw the transaction is a read that ended before
// the triage started: the fence. When the newest transaction of the round
// that touched the operation wrote the operation's own row (its state
// row, else its entity row) and moved a column that only grows there
// (state.version, else state.updated_at; entity.updated_at), or inserted
// the row, or inserted an idempotency record (recordFence), that column is
// read back (one statement per batch and table) before the batch is
// triaged; one row with a value at least the transaction's proves it and
// every transaction before it visible to every statement of the triage,
// and the second look is not needed. The fences not proven are read
// again after a few milliseconds (proveAll, fenceWaits). Anything else
// keeps it.

// fenceKind is how a fence column's values are ordered.
type fenceKind int

const (
	// fenceVersion: an integer that every write of the row increments
	// (state.version, a CAS version).
	fenceVersion fenceKind = iota + 1
	// fenceTime: a DATETIME the row's writes set to their time
	// (state.updated_at, entity.updated_at), at any precision.
	fenceTime
)

// fence is a row the newest transaction of a round wrote for an
// operation, whose column Col grew from Before to After in it (Before ""
// for an insert).
type fence struct {
	// Table is the table as the configuration names it; KeyCol its key
	// column and Key the row's key as stored (the after image's).
	Table, KeyCol, Key string
	Col                string
	Kind               fenceKind
	Before, After      string
}

// fenceCandidate is the fence a row change offers: an update whose
// column col grew strictly between its row images, or an insert that
// holds col (the row did not exist before it; a life of the row before a
// delete is excluded by markFences and the delete's own second look); nil
// otherwise: a delete, the column missing from an image, a time column
// of type TIMESTAMP (sources.RowChange.Zoned), NULL or not
// read as kind, or an update that did not grow it (a consumer that does
// not bump it, two writes in one second of a DATETIME(0)).
func fenceCandidate(c sources.RowChange, table, keyCol, key, col string, kind fenceKind) *fence {
	if col == "" || containsFold(c.Missing, col) {
		return nil
	}
	if kind == fenceTime && containsFold(c.Zoned, col) {
		// A TIMESTAMP's binlog text is in this process's zone, the value
		// read back in the session's: not comparable.
		return nil
	}
	after, ok := value(c, col)
	if !ok {
		return nil
	}
	if _, ok := compareFence(kind, after, after); !ok {
		return nil
	}
	f := &fence{Table: table, KeyCol: keyCol, Key: key, Col: col, Kind: kind, After: after}
	switch c.Kind {
	case sources.ChangeInsert:
		return f
	case sources.ChangeUpdate:
		before, ok := beforeValue(c, col)
		if !ok {
			return nil
		}
		if cmp, ok := compareFence(kind, after, before); !ok || cmp <= 0 {
			return nil
		}
		f.Before = before
		return f
	}
	return nil
}

// recordFence is the fence a change of an idempotency record offers (r
// the table's rule): an insert, read back by its record key
// (idempotency.key) with its created_at (idempotency.created_at), a value
// at least the insert's proving it visible. A transaction's rows become
// visible together, so the record proves the transaction, whatever else it
// wrote. Only an insert: an update of a record (a PENDING reopen decided
// again) moves no column that only grows, and keeps the second look; so
// does a delete (markFences, for a table with idempotency.biz_id), a
// table without created_at, or a created_at of type TIMESTAMP. A life of
// the record before a delete is never what the read finds: the insert of
// the same key waited for the delete's commit (its row lock, or the row
// gone), and a record of the same key still visible from another life
// (a key that is not unique) holds an earlier created_at.
func recordFence(c sources.RowChange, r mapRule) *fence {
	if c.Kind != sources.ChangeInsert || r.recordKey == "" || r.timeCol == "" || containsFold(c.Missing, r.recordKey) {
		return nil
	}
	key, ok := value(c, r.recordKey)
	if !ok || key == "" {
		return nil
	}
	return fenceCandidate(c, r.table, r.recordKey, key, r.timeCol, fenceTime)
}

func beforeValue(c sources.RowChange, col string) (string, bool) {
	if v, ok := c.Before[col]; ok {
		return v, true
	}
	for k, v := range c.Before {
		if strings.EqualFold(k, col) {
			return v, true
		}
	}
	return "", false
}

// compareFence orders two values of a fence column (-1, 0, 1); ok is false
// when either cannot be read as kind.
func compareFence(kind fenceKind, a, b string) (int, bool) {
	switch kind {
	case fenceVersion:
		x, ok1 := new(big.Int).SetString(strings.TrimSpace(a), 10)
		y, ok2 := new(big.Int).SetString(strings.TrimSpace(b), 10)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Cmp(y), true
	case fenceTime:
		x, ok1 := wallClock(a)
		y, ok2 := wallClock(b)
		if !ok1 || !ok2 {
			return 0, false
		}
		return x.Compare(y), true
	}
	return 0, false
}

// wallClock reads a DATETIME as the binlog (2006-01-02 15:04:05[.fff])
// or a driver (RFC 3339, in the connection's loc) writes it, as its wall
// clock: both are the value stored, in the zone the table's writes use.
func wallClock(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{"2006-01-02 15:04:05.999999999", time.RFC3339Nano, "2006-01-02T15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			y, mo, d := t.Date()
			h, mi, sec := t.Clock()
			return time.Date(y, mo, d, h, mi, sec, t.Nanosecond(), time.UTC), true
		}
	}
	return time.Time{}, false
}

// markFences gives every change of an operation its round's fence: the
// candidate of the newest transaction (the highest seq) that touched the
// operation in cs, when that transaction offers one and no change of the
// operation in the round deleted its row (a row deleted and inserted
// again has versions an older life shares); nil otherwise.
func markFences(cs []Change) {
	type round struct {
		seq  int
		f    *fence
		gone bool
	}
	rs := map[Key]*round{}
	for _, c := range cs {
		k := Key{c.Pipeline, c.BizID}
		r := rs[k]
		if r == nil {
			r = &round{}
			rs[k] = r
		}
		if c.del {
			r.gone = true
		}
		switch {
		case c.seq > r.seq:
			r.seq, r.f = c.seq, c.cand
		case c.seq == r.seq && r.f == nil:
			r.f = c.cand
		case c.seq == r.seq && c.cand != nil && c.cand.Kind == fenceVersion && r.f.Kind != fenceVersion:
			r.f = c.cand // a version is the surer fence
		}
	}
	for i := range cs {
		r := rs[Key{cs[i].Pipeline, cs[i].BizID}]
		if r.gone || r.seq == 0 {
			cs[i].fence = nil
			continue
		}
		cs[i].fence = r.f
	}
}

// KeyReader reads a column of a table's rows by key
// (sources/mysql.Reader.KeyStatuses): the fence read.
type KeyReader interface {
	KeyStatuses(ctx context.Context, table, keyCol, col string, keys []string) (map[string][]string, error)
}

// fenceRequest is the fences of one TriageBatch call's operations, by
// biz_id; proven says which the fence read proved visible. It travels in
// the call's context (withFences): the batch triage, which holds the
// pipeline's MySQL reader, reads the fences before anything else.
type fenceRequest struct {
	fences map[string]*fence
	proven map[string]bool
	// sleep waits between two reads (proveAll); nil: a timer. Tests
	// commit a transaction in it.
	sleep func(ctx context.Context, d time.Duration) error
}

type fenceCtxKey struct{}

func withFences(ctx context.Context, fr *fenceRequest) context.Context {
	return context.WithValue(ctx, fenceCtxKey{}, fr)
}

func fencesFrom(ctx context.Context) *fenceRequest {
	fr, _ := ctx.Value(fenceCtxKey{}).(*fenceRequest)
	return fr
}

// fenceWaits are the waits before each read of a batch's fences again:
// the fences the read before did not prove are read once more after each,
// 25 ms in all at most (docs/watch.md#how-it-works, "the fence"). The
// watch follows the binlog within milliseconds of the server's write, often
// before the engine commit is visible; a fence not proven then is most
// often proven a few milliseconds later, and a batch delayed by 25 ms is
// cheaper than a second triage of its operation 500 ms later.
var fenceWaits = []time.Duration{5 * time.Millisecond, 20 * time.Millisecond}

// proveAll reads the fences with db (prove) and, while some are not
// proven, reads those again after each of waits, stopping at the first
// read that fails (MySQL down: the next would fail too) or when ctx ends.
// It returns the first error, for the caller to count, never to fail the
// triage: a fence not proven keeps its second look.
func (fr *fenceRequest) proveAll(ctx context.Context, db KeyReader, waits []time.Duration) error {
	if err := fr.prove(ctx, db); err != nil {
		return err
	}
	for _, d := range waits {
		if fr.unproven() == 0 {
			return nil
		}
		sleep := fr.sleep
		if sleep == nil {
			sleep = sleepCtx
		}
		if err := sleep(ctx, d); err != nil {
			return err
		}
		if err := fr.prove(ctx, db); err != nil {
			return err
		}
	}
	return nil
}

// unproven is how many of the fences are not proven yet.
func (fr *fenceRequest) unproven() int {
	if fr == nil {
		return 0
	}
	n := 0
	for id := range fr.fences {
		if !fr.proven[id] {
			n++
		}
	}
	return n
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// prove reads the fences not proven yet with db, one statement per table
// and column, and records in proven each operation whose row holds
// exactly one value at least its fence's After. A read that fails proves
// nothing (the second look stays): its error is returned for the caller
// to count, never to fail the triage.
func (fr *fenceRequest) prove(ctx context.Context, db KeyReader) error {
	if fr == nil || len(fr.fences) == 0 || db == nil {
		return nil
	}
	type col struct{ table, keyCol, col string }
	byCol := map[col][]string{}
	var order []col
	for id, f := range fr.fences {
		if fr.proven[id] {
			continue
		}
		c := col{f.Table, f.KeyCol, f.Col}
		if _, ok := byCol[c]; !ok {
			order = append(order, c)
		}
		byCol[c] = append(byCol[c], id)
	}
	var first error
	for _, c := range order {
		ids := byCol[c]
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = fr.fences[id].Key
		}
		got, err := db.KeyStatuses(ctx, c.table, c.keyCol, c.col, keys)
		if err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		for _, id := range ids {
			f := fr.fences[id]
			if vs := got[f.Key]; len(vs) == 1 {
				if cmp, ok := compareFence(f.Kind, vs[0], f.After); ok && cmp >= 0 {
					if fr.proven == nil {
						fr.proven = map[string]bool{}
					}
					fr.proven[id] = true
				}
			}
		}
	}
	return first
}
