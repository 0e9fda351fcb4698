package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// The access paths of the checks: how a requirement's table is read (the
// index a walk forces, its keyset), and how duplicates and orphans read a
// scan table (a walk of its time index, a sweep of its key index, or a
// sweep of the window's key range), chosen by a pure function of the
// facts (choosePath, rangeSwept) from the I/O that reads them
// (docs/reconcile.md#access-path).

// access is how a check reads one requirement's table: the index it
// forces ("" on a full scan) and, for a walk, the columns its keyset
// continues on after the walk's leading columns (mysql.Walk.Order).
type access struct {
	index string
	order []string
}

// walkOrder is the keyset of walk w over requirement q: q's leading
// columns that w does not fix or range over (the key of a walk by key),
// then the columns the index carries after them.
func (a access) walkOrder(q Requirement, w sources.Walk) []string {
	n := 0
	if w.EqCol != "" {
		n++
	}
	if w.PosCol != "" {
		n++
	}
	return append(slices.Clone(q.Columns[min(n, len(q.Columns)):]), a.order...)
}

// Access paths (Options.Access; docs/reconcile.md#access-path).
const (
	AccessAuto  = "auto"
	AccessSweep = "sweep"
	AccessWalk  = "walk"
	// AccessRange: duplicates sweep the key range of the window's keys
	// whatever its size; orphans walk.
	AccessRange = "range"
)

// SweepShare is the share of a scan table's rows inside the window from
// which duplicates and orphans sweep the table's key index instead of
// walking its time index: a walk pays a lookup per key on top of each
// row, a sweep reads every index entry once, in order
// (docs/reconcile.md#access-path).
const SweepShare = 0.15

// RangeFactor bounds the key range a narrow window's duplicates sweep
// (windowRange): at most this many times the window's rows, by the
// optimizer's estimates. A walk pays an index dive per key (3-6 us
// measured) and a sweep one read of each entry of the range (0.3-0.6 us;
// two reads in OFFSET pages, past sweepRows entries), so a range a few
// times the window still costs less (docs/reconcile.md#access-path).
const RangeFactor = 4

// sweepPath is how duplicates or orphans read a scan table: a sweep of
// its key index (index), limited to a key range when lo and hi are set,
// or (index "") a walk of its time index; empty means the window holds
// no row, and there is nothing to read.
type sweepPath struct {
	index  string
	lo, hi sources.Bound
	est    int64
	empty  bool
	// within, when set, keeps the keys found that have a row in another
	// table's window (the cover's state table: coverBySweep) instead of
	// the scan table's own.
	within *sinceLookup
}

// sinceLookup is a table whose rows with time >= the window's start name
// the keys a sweep keeps (mysql.Reader.KeysSince).
type sinceLookup struct {
	table, key, time string
}

// pathKind is how duplicates or orphans read a scan table.
type pathKind int

const (
	// pathWalk walks the time index (a narrow window, or no key index).
	pathWalk pathKind = iota
	// pathSweep sweeps the whole key index in key order.
	pathSweep
	// pathWindowRange finds the window's key range (windowRange), then
	// sweeps that range or walks, by rangeSwept.
	pathWindowRange
)

// pathFacts are what the access path of one scan table is chosen on.
type pathFacts struct {
	// Mode is --access (AccessAuto, AccessSweep, AccessWalk, AccessRange);
	// Check is CheckDuplicates or CheckOrphans.
	Mode, Check string
	// Table and Key name the scan table and its key column (for the
	// notes).
	Table, Key string
	// HasTime: the scan has a time column; TimeIndex is the index a walk
	// by time uses ("": none, a full scan on --allow-full-scan).
	HasTime   bool
	TimeIndex string
	// KeyIndex is an index whose leading column is the key ("": none, no
	// sweep).
	KeyIndex string
	// Total is the optimizer's estimate of the table's rows; Window and
	// WindowKnown its estimate of the rows in the window (asked only when
	// needsWindow says so).
	Total       int64
	Window      int64
	WindowKnown bool
}

// pathChoice is the access path and the note that says why (none when
// the choice needs no explanation).
type pathChoice struct {
	kind pathKind
	note string
}

// needsWindow is true when choosePath decides on the optimizer's estimate
// of the rows in the window (which costs a statement).
func needsWindow(f pathFacts) bool {
	switch {
	case f.Mode == AccessWalk || f.KeyIndex == "":
		return false
	case f.Mode == AccessRange && f.HasTime && f.TimeIndex != "":
		return f.Check == CheckDuplicates
	case f.Mode == AccessSweep || !f.HasTime || f.TimeIndex == "":
		return false
	}
	return true
}

// choosePath decides how duplicates or orphans read a scan table, from the
// facts alone (docs/reconcile.md#access-path). A sweep needs an index
// whose leading column is the key; without a time column (or without a
// time index, on --allow-full-scan) the whole table is read either way,
// so it sweeps; otherwise it sweeps when the optimizer's estimate of the
// rows in the window is at least SweepShare of the table's (--access
// sweep|walk decides instead). A narrower window is walked by time,
// except for duplicates, which look at the window's key range
// (windowRange, then rangeSwept).
func choosePath(f pathFacts) pathChoice {
	switch {
	case f.Mode == AccessWalk:
		return pathChoice{kind: pathWalk}
	case f.KeyIndex == "":
		if f.Mode == AccessSweep {
			return pathChoice{kind: pathWalk, note: fmt.Sprintf("%s: no index starting with %s to sweep: walked by time", f.Table, f.Key)}
		}
		return pathChoice{kind: pathWalk}
	case f.Mode == AccessRange && f.HasTime && f.TimeIndex != "":
		if f.Check != CheckDuplicates {
			return pathChoice{kind: pathWalk}
		}
		return pathChoice{kind: pathWindowRange}
	case f.Mode == AccessSweep || !f.HasTime || f.TimeIndex == "":
		return pathChoice{kind: pathSweep, note: fmt.Sprintf("%s: swept %s in key order", f.Table, f.KeyIndex)}
	case !f.WindowKnown || f.Total <= 0:
		return pathChoice{kind: pathWalk}
	}
	share := float64(f.Window) / float64(f.Total)
	if share < SweepShare {
		if f.Check == CheckDuplicates {
			return pathChoice{kind: pathWindowRange}
		}
		return pathChoice{kind: pathWalk}
	}
	// InnoDB caps a range's estimate at half the table.
	held := fmt.Sprintf("about %.0f%%", 100*share)
	if share >= 0.5 {
		held = "half or more"
	}
	return pathChoice{kind: pathSweep, note: fmt.Sprintf("%s: the window holds %s of its ~%d rows (optimizer estimate): swept %s in key order",
		f.Table, held, f.Total, f.KeyIndex)}
}

// rangeSwept decides the end of windowRange: sweep the key range that
// holds the window's keys (true), or walk by time. The window holds rows
// rows (window by the optimizer's first estimate) and its keys span
// entries entries of the key index (known: the optimizer could tell).
// AccessRange always sweeps; otherwise a range of at most RangeFactor
// times the window is swept.
func rangeSwept(mode string, window, rows, entries int64, known bool) bool {
	return mode == AccessRange || (known && entries <= RangeFactor*max(window, rows))
}

// accessPath reads the facts choosePath needs (the estimate of the
// window's rows only when it decides on it) and follows its choice.
func (r *run) accessPath(cs *checkState, sc *config.Scan, a access, tables map[string]sources.TableInfo, from time.Time) (sweepPath, error) {
	info := tables[sc.Table]
	f := pathFacts{Mode: r.o.Access, Check: cs.check, Table: sc.Table, Key: sc.Key, HasTime: sc.Time != "", TimeIndex: a.index, Total: info.RowsEstimate}
	if f.Mode != AccessWalk {
		if use, ok := info.WalkIndex([]string{sc.Key}, sc.Key); ok {
			f.KeyIndex = use.Index.Name
		}
	}
	if needsWindow(f) {
		n, known, err := r.rangeRows(cs.p, sc.Table, a.index, sc.Time, from)
		if err != nil {
			return sweepPath{}, err
		}
		f.Window, f.WindowKnown = n, known
	}
	c := choosePath(f)
	if c.note != "" {
		cs.notes = append(cs.notes, c.note)
	}
	switch c.kind {
	case pathSweep:
		return sweepPath{index: f.KeyIndex, est: info.RowsEstimate}, nil
	case pathWindowRange:
		return r.windowRange(cs, sc, a, f.KeyIndex, f.Window, from)
	}
	return sweepPath{}, nil
}

// windowRange is the duplicates path of a narrow window (n rows by the
// optimizer's estimate) of scan table sc: it reads the window through its
// time index, in slices of about windowSlice rows, for the least and the
// greatest key it holds under the column's collation (no row leaves the
// server), and sweeps the key index between them (keys when ids grow with
// time: a day's keys are a day's range of the key index) when the
// optimizer puts that range at most RangeFactor times the window;
// otherwise (keys spread over the table: random ids) it walks the time
// index. Every key with a row in the window lies in that range, and the
// sweep keeps only the keys with a row in the window (KeysSince), so both
// paths find the same keys (docs/reconcile.md#access-path).
func (r *run) windowRange(cs *checkState, sc *config.Scan, a access, keyIndex string, n int64, from time.Time) (sweepPath, error) {
	parts := max(1, (n+windowSlice-1)/windowSlice)
	step := r.now.Sub(from) / time.Duration(parts)
	var ends []sources.KeyCount // each slice's least and greatest key
	var rows int64
	for i := int64(0); i < parts; i++ {
		if r.stopped() {
			return sweepPath{}, errStop
		}
		at, to := from.Add(time.Duration(i)*step), time.Time{}
		if i < parts-1 && step > 0 {
			to = at.Add(step)
		}
		ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
		l, h, m, err := r.db(cs.p).WindowKeys(ctx, sc.Table, a.index, sc.Key, sc.Time, at, to)
		cancel()
		if err != nil {
			return sweepPath{}, err
		}
		r.count(cs, m)
		if m > 0 {
			ends = append(ends, l, h)
			rows += m
		}
		if err := r.throttle(); err != nil {
			return sweepPath{}, err
		}
		if step <= 0 {
			break
		}
	}
	if rows == 0 {
		cs.notes = append(cs.notes, fmt.Sprintf("%s: no row in the window", sc.Table))
		return sweepPath{empty: true}, nil
	}
	lo, hi := ends[0], ends[1]
	ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
	defer cancel()
	if len(ends) > 2 {
		// The slices' ends are stored keys: the server orders them.
		var err error
		if lo, hi, err = r.db(cs.p).KeysExtent(ctx, sc.Table, keyIndex, sc.Key, ends); err != nil {
			return sweepPath{}, err
		}
	}
	m, known, err := r.db(cs.p).KeyRangeRows(ctx, sc.Table, keyIndex, sc.Key, lo.Value, hi.Value)
	if err != nil {
		return sweepPath{}, err
	}
	if !rangeSwept(r.o.Access, n, rows, m, known) {
		cs.notes = append(cs.notes, fmt.Sprintf("%s: the window's %d rows have keys spread over ~%d entries of %s (optimizer estimate): walked by time",
			sc.Table, rows, m, keyIndex))
		return sweepPath{}, nil
	}
	cs.notes = append(cs.notes, fmt.Sprintf("%s: the window's %d rows have keys in a range of ~%d entries of %s (optimizer estimate): swept that range in key order",
		sc.Table, rows, m, keyIndex))
	return sweepPath{index: keyIndex, lo: sources.Bound{Set: true, Value: lo.Value}, hi: sources.Bound{Set: true, Value: hi.Value}, est: m}, nil
}

// rangeRows is the optimizer's estimate of table's rows with col >= from
// through index (mysql.Reader.RangeRows), asked once per run for each.
type rangeRows struct {
	n     int64
	known bool
}

func (r *run) rangeRows(p *config.Pipeline, table, index, col string, from time.Time) (int64, bool, error) {
	r.rangesMu.Lock()
	defer r.rangesMu.Unlock()
	k := r.dbKey(p) + "\x00" + table + "\x00" + index + "\x00" + col
	if e, ok := r.ranges[k]; ok {
		return e.n, e.known, nil
	}
	ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
	n, known, err := r.db(p).RangeRows(ctx, table, index, col, from)
	cancel()
	if err != nil {
		return 0, false, err
	}
	if r.ranges == nil {
		r.ranges = map[string]rangeRows{}
	}
	r.ranges[k] = rangeRows{n: n, known: known}
	return n, known, nil
}
