package watch

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// maxClaimants bounds the operations one binlog step change makes the
// watch look at: a row every operation changes (a merchant account) would
// otherwise triage the whole window at each change. Past it the change is
// said on stderr and left to the timer and the next sweep.
const maxClaimants = 100

// topicOverlap is how far before the end of the last read of a topic the
// next one starts.
const topicOverlap = 5 * time.Second

// Topics maps the changes that name no operation (a SKIPPED record of an
// idempotency table without biz_id, a binlog step's row) to operations
// through each pipeline's messages, read forward from the topic as they
// are needed and kept for the lookback (docs/watch.md#binlog-mode): each
// record is read once, not once per change.
type Topics struct {
	Kafka sources.RecordReader
	// SearchWindow is how long before a record its message is looked for
	// (default sources.DefaultSearchWindow, as `where`'s).
	SearchWindow time.Duration

	idx map[string]*topicIndex
	// records counts the records read (RowsRead).
	records int
}

// topicIndex is one pipeline's messages over the lookback.
type topicIndex struct {
	from, upTo time.Time
	seen       map[[2]int64]bool
	entries    []*topicEntry
	byMsg      map[string][]*topicEntry
	byRow      map[rowRef][]*topicEntry
}

type rowRef struct {
	step int
	key  string
}

type topicEntry struct {
	at         time.Time
	part       int32
	off        int64
	biz, msgID string
	rows       []rowRef
}

func (t *Topics) window() time.Duration {
	if t.SearchWindow > 0 {
		return t.SearchWindow
	}
	return sources.DefaultSearchWindow
}

// lookback is how far before a change its message may be: the search
// window for a record, the step's window for a binlog step's row.
func (t *Topics) lookback(pc pendingChange) time.Duration {
	if pc.rule.kind == byRowKey {
		return pc.rule.p.Steps[pc.rule.step].Binlog.WindowDuration()
	}
	return t.window()
}

// resolve maps p's pending changes to operations, reading what the index
// lacks of p's topic. skipped counts the changes left unmapped because
// too many operations claim them.
func (t *Topics) resolve(ctx context.Context, p *config.Pipeline, pend []pendingChange) (out []Change, skipped int, err error) {
	if len(pend) == 0 {
		return nil, 0, nil
	}
	if t.idx == nil {
		t.idx = map[string]*topicIndex{}
	}
	var lo, hi time.Time
	for i, pc := range pend {
		from := pc.at.Add(-t.lookback(pc))
		if i == 0 || from.Before(lo) {
			lo = from
		}
		if i == 0 || pc.at.After(hi) {
			hi = pc.at
		}
	}
	// The binlog's commit time is whole seconds; a message is stamped
	// before the change it caused, up to a second after its commit second.
	hi = hi.Add(time.Second)
	x := t.idx[p.Name]
	if x == nil || lo.Before(x.from) {
		x = &topicIndex{from: lo, upTo: lo, seen: map[[2]int64]bool{}}
		t.idx[p.Name] = x
	}
	if hi.After(x.upTo) {
		// Some overlap: a record stamped just before the last read's end
		// may have been appended after it (a producer's retries keep the
		// first attempt's time).
		from := x.upTo.Add(-topicOverlap)
		if from.Before(x.from) {
			from = x.from
		}
		if err := t.read(ctx, p, x, from, hi); err != nil {
			return nil, 0, err
		}
		x.upTo = hi
	}
	x.prune(lo)
	// A record's message is always in the topic: one not found was
	// appended after the read that passed its time (a retried produce);
	// the window of the records missed is read again, once.
	var mlo, mhi time.Time
	for _, pc := range pend {
		if pc.rule.kind == byMsgID && len(x.lookup(t, pc)) == 0 {
			if from := pc.at.Add(-t.lookback(pc)); mlo.IsZero() || from.Before(mlo) {
				mlo = from
			}
			if to := pc.at.Add(time.Second); to.After(mhi) {
				mhi = to
			}
		}
	}
	if !mlo.IsZero() {
		if err := t.read(ctx, p, x, mlo, mhi); err != nil {
			return nil, 0, err
		}
	}
	for _, pc := range pend {
		bizs := x.lookup(t, pc)
		if len(bizs) > maxClaimants {
			skipped++
			continue
		}
		for _, b := range bizs {
			at := pc.at
			out = append(out, Change{Pipeline: p.Name, BizID: b, Table: pc.table, Position: pc.pos, CommittedAt: &at, seq: pc.seq, cand: pc.cand})
		}
	}
	return out, skipped, nil
}

// lookup is the operations whose message pc's value names within its
// lookback.
func (x *topicIndex) lookup(t *Topics, pc pendingChange) []string {
	var cands []*topicEntry
	if pc.rule.kind == byMsgID {
		cands = x.byMsg[pc.value]
	} else {
		cands = x.byRow[rowRef{pc.rule.step, pc.value}]
	}
	from := pc.at.Add(-t.lookback(pc))
	var bizs []string
	for _, e := range cands {
		if !e.at.Before(from) && !e.at.After(pc.at.Add(time.Second)) && e.biz != "" && !slices.Contains(bizs, e.biz) {
			bizs = append(bizs, e.biz)
		}
	}
	return bizs
}

// read indexes p's records stamped in [from, to].
func (t *Topics) read(ctx context.Context, p *config.Pipeline, x *topicIndex, from, to time.Time) error {
	type path struct {
		step int
		mp   config.MessagePath
	}
	var paths []path
	for k, s := range p.Steps {
		if s.Binlog != nil && s.Binlog.MessageKey != "" {
			if mp, msg := config.ParseMessagePath(s.Binlog.MessageKey, false); msg == "" {
				paths = append(paths, path{k, mp})
			}
		}
	}
	got, err := t.Kafka.Records(ctx, p.Topic, from, to, 0, func(m *sources.Message) {
		id := [2]int64{int64(m.Partition), m.Offset}
		if x.seen[id] {
			return
		}
		x.seen[id] = true
		biz, _ := sources.BizIDOfKey(p.MessageKey, m.Key)
		e := &topicEntry{at: m.Timestamp, part: m.Partition, off: m.Offset, biz: biz, msgID: sources.MsgIDOf(p, m)}
		for _, pt := range paths {
			if v, err := pt.mp.Lookup(m.Value); err == nil {
				e.rows = append(e.rows, rowRef{pt.step, v})
			}
		}
		x.add(e)
	})
	t.records += got.Records
	if err != nil {
		// The changes it was for are left to the timer and the sweep: the
		// next read starts at the next changes' own window, not where this
		// one began (a window that would only grow while the reads fail).
		delete(t.idx, p.Name)
		return fmt.Errorf("reading %s from %s to %s to map changed rows without a biz_id to their operations: %w", p.Topic, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), err)
	}
	return nil
}

func (x *topicIndex) add(e *topicEntry) {
	if x.byMsg == nil {
		x.byMsg, x.byRow = map[string][]*topicEntry{}, map[rowRef][]*topicEntry{}
	}
	x.entries = append(x.entries, e)
	if e.msgID != "" {
		x.byMsg[e.msgID] = append(x.byMsg[e.msgID], e)
	}
	for _, r := range e.rows {
		x.byRow[r] = append(x.byRow[r], e)
	}
}

// prune drops the records stamped before lo once they are half the
// index (each lookup checks the times anyway).
func (x *topicIndex) prune(lo time.Time) {
	old := 0
	for _, e := range x.entries {
		if e.at.Before(lo) {
			old++
		}
	}
	if old == 0 || old < len(x.entries)/2 {
		return
	}
	keep := x.entries[:0:0]
	for _, e := range x.entries {
		if !e.at.Before(lo) {
			keep = append(keep, e)
		}
	}
	x.entries, x.byMsg, x.byRow, x.seen = nil, nil, nil, map[[2]int64]bool{}
	for _, e := range keep {
		x.seen[[2]int64{int64(e.part), e.off}] = true
		x.add(e)
	}
	x.from = lo
}
