package reconcile

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// scan runs every check state. The checks of one pipeline run in order on
// one goroutine; pipelines read different tables, so up to
// ParallelPipelines of them are scanned at once.
func (r *run) scan() {
	var groups [][]*checkState
	for i, cs := range r.states {
		if i == 0 || cs.p != r.states[i-1].p {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], cs)
	}
	sem := make(chan struct{}, ParallelPipelines)
	var wg sync.WaitGroup
	cut := make([]bool, len(groups))
	for i, g := range groups {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			cut[i] = r.scanPipeline(g)
		})
	}
	wg.Wait()
	if r.firstErr() != nil {
		return
	}
	// How far each pipeline an interrupt cut got: the check it stopped
	// mid-way, or, when it stopped between checks (or before its first),
	// the first check that never ran (never one that finished). Pipelines
	// run in parallel: each names its own.
	for i, g := range groups {
		if !cut[i] {
			continue
		}
		var at *checkState
		for _, cs := range g {
			if cs.status == StatusInterrupted {
				at = cs
				break
			}
		}
		for _, cs := range g {
			if at != nil {
				break
			}
			if cs.status == StatusNotRun {
				at = cs
			}
		}
		if at == nil {
			continue
		}
		at.status = StatusInterrupted
		r.interrupted = append(r.interrupted, Interruption{Pipeline: at.p.Name, Check: at.check, Rows: at.rows.Load(), LastKey: at.last()})
	}
}

// ParallelPipelines is the number of pipelines a run scans at once.
const ParallelPipelines = 2

// scanPipeline runs the check states of one pipeline in order. It reports
// whether an interrupt cut it short.
func (r *run) scanPipeline(states []*checkState) bool {
	tables := map[string]sources.TableInfo{}
	for _, cs := range states {
		var err error
		if r.stopped() {
			err = errStop
		} else {
			cs.start = time.Now()
			err = r.runCheck(cs, tables)
			if ferr := r.flush(cs); err == nil {
				err = ferr
			}
		}
		if !cs.start.IsZero() {
			cs.dur = time.Since(cs.start)
		}
		switch {
		case errors.Is(err, errStop):
			if r.firstErr() == nil && !cs.start.IsZero() {
				cs.status = StatusInterrupted
			}
			return true
		case err != nil:
			cs.status, cs.reason = StatusFailed, err.Error()
			if sources.IsConnError(err) {
				r.fail(err)
				return false
			}
		}
	}
	return false
}

// plan checks that the indexes a check needs exist. It returns how each
// requirement is served (by position; index "" when the check runs on a
// full scan), or ok=false after marking the check skipped, refused or
// failed.
func (r *run) plan(cs *checkState, tables map[string]sources.TableInfo) ([]Requirement, []access, bool) {
	reqs, na := Requirements(cs.p, cs.check)
	if na != "" {
		cs.status, cs.reason = StatusSkipped, na
		return nil, nil, false
	}
	acc := make([]access, len(reqs))
	var missing []Requirement
	var whyNot []string
	var unboundedReqs []Requirement
	for i, q := range reqs {
		info, ok := tables[q.Table]
		if !ok {
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			var err error
			info, err = r.db(cs.p).TableInfo(ctx, q.Table)
			cancel()
			if err != nil {
				cs.status, cs.reason = StatusFailed, err.Error()
				return nil, nil, false
			}
			tables[q.Table] = info
		}
		if !info.Exists {
			cs.status, cs.reason = StatusFailed, fmt.Sprintf("table %s does not exist (run `opctl schema check`)", q.Table)
			return nil, nil, false
		}
		for _, c := range slices.Concat(q.Columns, q.Reads, []string{q.Key}) {
			if c != "" && !info.HasColumn(c) {
				cs.status, cs.reason = StatusFailed, fmt.Sprintf("table %s has no column %s (run `opctl schema check`)", q.Table, c)
				return nil, nil, false
			}
		}
		if q.Alt != nil {
			if _, ok := info.WalkIndex(q.Columns, q.Key, q.Reads...); !ok {
				if _, ok := info.WalkIndex(q.Alt.Columns, q.Alt.Key, q.Alt.Reads...); ok {
					q = *q.Alt
					reqs[i] = q
				}
			}
		}
		switch {
		case q.Walk:
			if use, ok := info.WalkIndex(q.Columns, q.Key, q.Reads...); ok {
				acc[i] = access{index: use.Index.Name, order: use.Tail}
			} else {
				acc[i] = access{order: info.ScanOrder(q.Columns, q.Key)}
				missing = append(missing, q)
				whyNot = append(whyNot, info.WhyNoIndex(q.Columns, true, q.Key))
			}
		default:
			if ix, ok := info.IndexFor(q.Columns...); ok {
				acc[i] = access{index: ix.Name}
			} else {
				missing = append(missing, q)
				whyNot = append(whyNot, info.WhyNoIndex(q.Columns, false, ""))
			}
		}
		if unbounded(q) {
			unboundedReqs = append(unboundedReqs, q)
		}
	}
	if len(missing) == 0 && len(unboundedReqs) == 0 {
		return reqs, acc, true
	}
	var why []string
	for i, q := range missing {
		w := fmt.Sprintf("no index on %s starting with (%s) to %s", q.Table, strings.Join(q.Columns, ", "), q.Purpose)
		if whyNot[i] != "" {
			w += " (" + whyNot[i] + ")"
		}
		why = append(why, w)
		cs.ddl = append(cs.ddl, q.DDL())
	}
	for _, q := range unboundedReqs {
		why = append(why, fmt.Sprintf("%s: %s", q.Table, q.Purpose))
	}
	if !r.o.AllowFullScan {
		cs.status = StatusRefused
		cs.reason = "would need a full scan: " + joinSemi(why) + " (add the index, or pass --allow-full-scan)"
		return nil, nil, false
	}
	cs.notes = append(cs.notes, "full scan allowed (--allow-full-scan): "+joinSemi(why))
	return reqs, acc, true
}

func joinSemi(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "; "
		}
		out += x
	}
	return out
}

func (r *run) runCheck(cs *checkState, tables map[string]sources.TableInfo) error {
	if cs.check == CheckUncommitted {
		if r.noKafka() {
			cs.status, cs.reason = StatusSkipped, "needs Kafka: "+r.col.KafkaMissing
			cs.partial.Store(true)
			return nil
		}
		if _, err := r.group(cs.p.Topic, cs.p.Group); err != nil {
			cs.status, cs.reason = StatusSkipped, "needs Kafka: "+err.Error()
			cs.partial.Store(true)
			return nil
		}
	}
	reqs, acc, ok := r.plan(cs, tables)
	if !ok {
		return nil
	}
	var err error
	switch cs.check {
	case CheckStuck:
		if cs.p.State == nil {
			if err = r.stuckMessages(cs, reqs); errors.Is(err, errSkipped) {
				return nil
			}
		} else {
			err = r.stuck(cs, reqs[0], acc[0])
		}
	case CheckSkipped:
		err = r.skipped(cs, reqs, acc)
	case CheckDuplicates, CheckOrphans:
		err = r.scanTables(cs, reqs, acc, tables)
	case CheckUncommitted:
		err = r.uncommitted(cs, reqs[0], acc[0])
	}
	if err == nil {
		err = r.stoppedRepairs(cs)
	}
	if err == nil {
		cs.status = StatusOK
	}
	return err
}

// stoppedRepairs adds to a check's candidates the operations of its
// pipeline whose newest opctl plan stopped part-way (REPAIR_INCOMPLETE):
// the check's own scan may no longer see them (a flip_skipped that took
// effect before its republish failed leaves no SKIPPED record for the
// skipped check), so every check meets them (docs/reconcile.md).
func (r *run) stoppedRepairs(cs *checkState) error {
	keys, err := r.stoppedKeys(cs.p)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := r.candidate(cs, k); err != nil {
			return err
		}
	}
	return nil
}

// stoppedKeys are the operations of a pipeline (in this run's shard) whose
// newest plan stopped part-way, read from the audit once per pipeline and
// run: every check of the pipeline gets the same answer.
func (r *run) stoppedKeys(p *config.Pipeline) ([]string, error) {
	if r.col.AuditTable == "" {
		return nil, nil
	}
	pipeline := p.Name
	r.stoppedMu.Lock()
	defer r.stoppedMu.Unlock()
	if keys, ok := r.stoppedOps[pipeline]; ok {
		return keys, nil
	}
	byOp, err := r.db(p).AuditByOperation(r.qctx, r.col.AuditTable, p.Name)
	if err != nil {
		return nil, err
	}
	keys := []string{}
	for k, rows := range byOp {
		if inspect.IncompleteRepair(rows) != nil && r.inShard(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if r.stoppedOps == nil {
		r.stoppedOps = map[string][]string{}
	}
	r.stoppedOps[pipeline] = keys
	return keys, nil
}

func (r *run) shard(w *sources.Walk) {
	if r.o.Shards > 1 {
		w.Shard, w.Shards = r.o.Shard, r.o.Shards
	}
}

// walk pages through w, calling page with each page's rows. frac maps the
// last row to the fraction of the range walked (nil: unknown).
func (r *run) walk(cs *checkState, w sources.Walk, frac func(sources.WalkRow) float64, page func([]sources.WalkRow) error) error {
	type fetched struct {
		rows []sources.WalkRow
		err  error
	}
	fetch := func(cur sources.Cursor) fetched {
		ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
		defer cancel()
		rows, err := r.db(cs.p).WalkPage(ctx, w, cur, r.o.Chunk)
		return fetched{rows, err}
	}
	var cur sources.Cursor
	// next is the page read while page handles the one before (nil when
	// none is in flight): the walk's read and the page's lookups overlap,
	// as a single statement's would. Under --rate the pages are read one
	// after another, at the rate's pace.
	var next chan fetched
	defer func() {
		if next != nil {
			<-next
		}
	}()
	for {
		if r.stopped() {
			return errStop
		}
		var got fetched
		if next != nil {
			got = <-next
			next = nil
		} else {
			got = fetch(cur)
		}
		if got.err != nil {
			return got.err
		}
		rows := got.rows
		r.count(cs, int64(len(rows)))
		f := -1.0
		if len(rows) > 0 {
			last := rows[len(rows)-1]
			cur = last.After()
			cs.lastKey.Store(last.Key)
			if frac != nil {
				f = frac(last)
			}
		}
		more := len(rows) >= r.o.Chunk
		if more && r.o.Rate <= 0 && !r.stopped() {
			ch := make(chan fetched, 1)
			go func(cur sources.Cursor) { ch <- fetch(cur) }(cur)
			next = ch
		}
		if err := page(rows); err != nil {
			return err
		}
		r.progress(cs, f)
		if !more {
			return nil
		}
		if err := r.throttle(); err != nil {
			return err
		}
	}
}

func (r *run) count(cs *checkState, n int64) {
	cs.rows.Add(n)
	r.totalRows.Add(n)
}

func (r *run) progress(cs *checkState, f float64) {
	if r.o.Progress == nil {
		return
	}
	r.o.Progress(Progress{Pipeline: cs.p.Name, Check: cs.check, Rows: cs.rows.Load(),
		TotalRows: r.totalRows.Load(), Fraction: f, Found: r.found.Load(), Elapsed: time.Since(r.start)})
}

// throttle sleeps until the rows read so far fit under --rate.
func (r *run) throttle() error {
	if r.o.Rate <= 0 {
		return nil
	}
	want := time.Duration(float64(r.totalRows.Load()) / float64(r.o.Rate) * float64(time.Second))
	wait := want - time.Since(r.start)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-r.stop.Done():
		return errStop
	}
}

// candidate queues key for triage, once per check: it joins the check's
// pending batch, which goes to the triage when full (and at the end of the
// check, see flush).
func (r *run) candidate(cs *checkState, key string) error {
	if cs.seen[key] {
		return nil
	}
	cs.seen[key] = true
	cs.candidates.Add(1)
	if cs.covering {
		cs.covered++
	}
	cs.pending = append(cs.pending, key)
	if len(cs.pending) < r.o.Batch {
		return nil
	}
	return r.flush(cs)
}

// flush sends the check's pending candidates to the triage.
func (r *run) flush(cs *checkState) error {
	if len(cs.pending) == 0 {
		return nil
	}
	b := batch{cs: cs, keys: cs.pending, cover: cs.covering, search: cs.searching}
	cs.pending = nil
	select {
	case r.batches <- b:
		return nil
	case <-r.stop.Done():
		return errStop
	}
}

// timeFrac maps a time row to the fraction of [from, to] walked.
func timeFrac(from, to time.Time) func(sources.WalkRow) float64 {
	span := to.Sub(from)
	return func(row sources.WalkRow) float64 {
		t, ok := row.Pos.(time.Time)
		if !ok || span <= 0 {
			return -1
		}
		return min(1, max(0, float64(t.Sub(from))/float64(span)))
	}
}

// stuck walks, for every status that is neither terminal nor failed, the
// (status, updated_at) range [now - since, now - older-than) of the index
// a (its keyset continuing on what the index carries after them). The
// statuses are found with a loose index scan (one index dive each), so a
// status missing from the config is walked too.
func (r *run) stuck(cs *checkState, q Requirement, a access) error {
	st := cs.p.State
	done := append(slices.Clone(st.Terminal), st.Failed...)
	statuses, err := r.statuses(cs, a, done)
	if err != nil {
		return err
	}
	if st.Partition == "" || st.Offset == "" {
		// No stored position: each stuck operation's message is searched
		// in the log, as `opctl where` does, so that its verdict is
		// where's (a stuck operation is rare; a search is bounded by
		// --search-window and --search-limit).
		cs.searching = true
		defer func() { cs.searching = false }()
	}
	if err := r.walkStatuses(cs, q, a, statuses, r.now.Add(-r.o.Since), r.now.Add(-r.o.OlderThan)); err != nil {
		return err
	}
	return r.flush(cs)
}

// errSkipped ends a check that found it does not apply after all (its
// status and reason are set).
var errSkipped = errors.New("reconcile: check skipped")

// stuckMessages is stuck on a pipeline without a state table or an
// idempotency table (seed 000's own schema; Requirements says when): the
// topic is read once over [now - since, now], partition by
// partition; a message below its partition's committed offset (the group
// passed it: under commit after_steps, the consumer's statement that every
// step ran) is looked up, a chunk at a time, in each step's scan table by
// its key; a message one of them has no row for is a candidate, triaged
// with its message searched as `where` does
// (docs/reconcile.md#steps-without-a-scan-block). The window is at most
// sources.UnanchoredWindow: `where` places such an operation's message only
// that far back.
func (r *run) stuckMessages(cs *checkState, reqs []Requirement) error {
	p := cs.p
	rr, ok := r.d.Collector.Kafka.(sources.RecordReader)
	if r.noKafka() || !ok {
		cs.status, cs.reason = StatusSkipped, "needs Kafka to read the committed messages: "+orWhy(r.col.KafkaMissing, "no reader")
		cs.partial.Store(true)
		return errSkipped
	}
	view, err := r.group(p.Topic, p.Group)
	if err != nil {
		cs.status, cs.reason = StatusSkipped, "needs Kafka to read the committed messages: "+err.Error()
		cs.partial.Store(true)
		return errSkipped
	}
	// passed reports whether the group will not read m again (by
	// inspect.Redelivery's rules: no commit and offset_reset latest reads
	// nothing again; earliest everything retained).
	passed := func(m *sources.Message) bool {
		pv, ok := view.Partitions[m.Partition]
		if !ok {
			return false
		}
		if pv.Committed < 0 || pv.Committed < pv.LogStart {
			return p.EffectiveOffsetReset() != "earliest"
		}
		return m.Offset < pv.Committed
	}
	since := r.o.Since
	if since > sources.UnanchoredWindow {
		since = sources.UnanchoredWindow
		cs.notes = append(cs.notes, fmt.Sprintf("--since %s is longer than the %s `where` searches back for a message no row anchors: only the last %s of %s were read",
			r.o.Since, sources.UnanchoredWindow, sources.UnanchoredWindow, p.Topic))
	}
	// --older-than does not apply: the group committed past the message,
	// which under after_steps the consumer does only once it is done with
	// it (seed 000 processes one message at a time), so no consumer is
	// still working on it, however young.
	from, to := r.now.Add(-since), r.now
	cs.searching = true
	defer func() { cs.searching = false }()
	var (
		buf       []string
		inBuf     = map[string]bool{}
		committed int64
		firstErr  error
	)
	ctx, cancel := context.WithCancel(r.qctx)
	defer cancel()
	lookup := func() error {
		keys := buf
		buf, inBuf = nil, map[string]bool{}
		for _, q := range reqs {
			if len(keys) == 0 {
				break
			}
			qctx, qcancel := context.WithTimeout(r.qctx, r.o.Timeout)
			has, err := r.db(p).ExistingKeys(qctx, q.Table, q.Columns[0], keys)
			qcancel()
			if err != nil {
				return err
			}
			r.count(cs, int64(len(keys)))
			absent := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return has[k] })
			for _, k := range absent {
				if err := r.candidate(cs, k); err != nil {
					return err
				}
			}
			keys = slices.DeleteFunc(keys, func(k string) bool { return !has[k] })
		}
		return r.throttle()
	}
	read, err := rr.Records(ctx, p.Topic, from, to, 0, func(m *sources.Message) {
		if firstErr != nil || m.Timestamp.After(to) || !passed(m) {
			return
		}
		k := string(m.Key)
		if k == "" || cs.seen[k] || inBuf[k] || !r.inShard(k) {
			return
		}
		committed++
		inBuf[k] = true
		buf = append(buf, k)
		cs.lastKey.Store(k)
		if len(buf) >= r.o.Chunk {
			if firstErr = lookup(); firstErr != nil {
				cancel()
			}
		}
	})
	if firstErr != nil {
		return firstErr
	}
	if err != nil {
		if r.qctx.Err() != nil || r.stopped() {
			return errStop
		}
		for _, q := range reqs {
			cs.uncover(q.Step, fmt.Sprintf("the topic %s could not be read to find the committed messages: %v", p.Topic, err))
		}
		cs.partial.Store(true)
		return r.flush(cs)
	}
	if err := lookup(); err != nil {
		return err
	}
	r.count(cs, int64(read.Records)) // as messagesOfRepeats counts its read
	var steps []string
	for _, q := range reqs {
		steps = append(steps, q.Step+" ("+q.Table+"."+q.Columns[0]+")")
	}
	cs.notes = append(cs.notes, fmt.Sprintf("no state table: %d record(s) of %s read from %s to %s, %d committed message(s) looked up in %s; those without a row are triaged",
		read.Records, p.Topic, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), committed, strings.Join(steps, ", ")))
	return r.flush(cs)
}

// statuses lists the state table's statuses but those in skip: with the
// (status, ...) index a, by a loose index scan (one index dive each), so
// that a status missing from the config is found too; without it (a full
// scan allowed), the configured ones.
func (r *run) statuses(cs *checkState, a access, skip []string) ([]string, error) {
	st := cs.p.State
	var statuses []string
	if vals, ok, err := r.enumValues(cs, st.Table, st.Status); err != nil {
		return nil, err
	} else if ok {
		// An ENUM holds only its declared values, and a loose index scan
		// (ordered by the ENUM's index, compared as text) would skip some.
		for _, v := range vals {
			if !slices.Contains(skip, v) {
				statuses = append(statuses, v)
			}
		}
		return statuses, nil
	}
	if a.index != "" {
		var after *string
		for {
			if r.stopped() {
				return nil, errStop
			}
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			v, ok, err := r.db(cs.p).NextValue(ctx, st.Table, st.Status, after)
			cancel()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			r.count(cs, 1)
			if !slices.Contains(skip, v) {
				statuses = append(statuses, v)
			}
			after = &v
		}
		return statuses, nil
	}
	// Full scan allowed without the index: the configured statuses only.
	for _, v := range slices.Concat(st.Initial, stepStatuses(cs.p), st.Terminal, st.Failed) {
		if !slices.Contains(skip, v) && !slices.Contains(statuses, v) {
			statuses = append(statuses, v)
		}
	}
	cs.notes = append(cs.notes, "without the (status, updated_at) index only the configured statuses are walked")
	return statuses, nil
}

// enumValues are the declared values of column col of table when it is an
// ENUM (information_schema's COLUMN_TYPE).
func (r *run) enumValues(cs *checkState, table, col string) ([]string, bool, error) {
	ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
	defer cancel()
	info, err := r.db(cs.p).TableInfo(ctx, table)
	if err != nil {
		return nil, false, err
	}
	for i, c := range info.Columns {
		if strings.EqualFold(c, col) && i < len(info.Types) {
			vals, ok := config.EnumValues(info.Types[i])
			return vals, ok, nil
		}
	}
	return nil, false, nil
}

// stepStatuses are the steps' done statuses, in step order.
func stepStatuses(p *config.Pipeline) []string {
	var out []string
	for _, s := range p.Steps {
		if s.DoneStatus != "" {
			out = append(out, s.DoneStatus)
		}
	}
	return out
}

// cover makes every operation whose state row was updated in [now −
// since, now] a candidate of cs: how the duplicates check reaches the
// steps without a scan block (docs/reconcile.md#steps-without-a-scan-block).
//
// Over a window that holds most of the state table, when each such step
// counts its effects by one query of one table by its key, the cover
// sweeps those tables instead, for the keys of more than one row
// (coverBySweep).
func (r *run) cover(cs *checkState, q Requirement, a access, tables map[string]sources.TableInfo) error {
	statuses, err := r.statuses(cs, a, nil)
	if err != nil {
		return err
	}
	// The scans' candidates go first, unmarked.
	if err := r.flush(cs); err != nil {
		return err
	}
	before := cs.covered
	cs.covering = true
	from, to := r.now.Add(-r.o.Since), r.now
	swept, err := r.coverBySweep(cs, a, statuses, tables, from, to)
	if err == nil && !swept {
		err = r.walkStatuses(cs, q, a, statuses, from, to)
	}
	if ferr := r.flush(cs); err == nil {
		err = ferr
	}
	cs.covering = false
	if swept {
		cs.notes = append(cs.notes, fmt.Sprintf("steps without a scan block (%s) covered by triaging the operations of %s updated in the window with more than one row in those steps' tables: %d operation(s)",
			strings.Join(Unscanned(cs.p), ", "), q.Table, cs.covered-before))
		return err
	}
	cs.notes = append(cs.notes, fmt.Sprintf("steps without a scan block (%s) covered by triaging every operation of %s updated in the window: %d operation(s)",
		strings.Join(Unscanned(cs.p), ", "), q.Table, cs.covered-before))
	return err
}

// walkStatuses walks, for each status, the (status, updated_at) range
// [from, to) of the index a (its keyset continuing on what the index
// carries after them), every key a candidate of cs.
func (r *run) walkStatuses(cs *checkState, q Requirement, a access, statuses []string, from, to time.Time) error {
	st := cs.p.State
	for _, status := range statuses {
		w := sources.Walk{Table: st.Table, Index: a.index, EqCol: st.Status, EqVal: status, KeyCol: st.Key}
		var frac func(sources.WalkRow) float64
		if st.UpdatedAt != "" {
			w.PosCol, w.From, w.To = st.UpdatedAt, from, to
			frac = timeFrac(from, to)
		}
		w.Order = a.walkOrder(q, w)
		r.shard(&w)
		err := r.walk(cs, w, frac, func(rows []sources.WalkRow) error {
			for _, row := range rows {
				if err := r.candidate(cs, row.Key); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// stuckTarget reports whether rep, a candidate of the stuck check, is a
// stuck target by its definition; on a pipeline without a state table,
// whether where's verdict says it is not done (docs/reconcile.md#targets): its state row,
// as the triage read it, is neither terminal nor failed, was last updated
// before now - older-than (the run's database clock, as the walk bounded
// it), and holds no live lease (the triage's database clock, as IN_FLIGHT
// is decided) — whatever Kafka says or could not say. The verdict stays
// the one `where` gives; IN_FLIGHT is never a stuck target.
func (r *run) stuckTarget(p *config.Pipeline, rep inspect.Report) bool {
	if p.State == nil {
		// A committed message whose step left no row (stuckMessages): a
		// target unless where finds it done or in flight.
		v := rep.Verdict
		return v.Severity != inspect.SeverityOK && v.Code != inspect.InFlight && v.Code != inspect.NotFound
	}
	return StuckTarget(p, rep, r.now, r.o.OlderThan)
}

// skipped walks the SKIPPED records of the (action, created_at) range
// [now - since, ...) of the index acc[0]. When the entity's effect step has a scan block, the
// records whose operation has a row in that table are dropped with one
// lookup per chunk (a skip whose effect exists cannot be WRONGLY_SKIPPED).
// When the entity block names its table, key and status, the entities of
// the remaining operations are read with one lookup per chunk, and those
// whose status cancels the effect are counted as SKIPPED_OK without being
// triaged (docs/reconcile.md: the check is about entities that do not cancel the
// effect); an operation without an entity row is triaged. The others are
// triaged.
func (r *run) skipped(cs *checkState, reqs []Requirement, acc []access) error {
	id := cs.p.Idempotency
	if id.BizID == "" {
		return r.skippedByMessages(cs, reqs, acc)
	}
	w := sources.Walk{Table: id.Table, Index: acc[0].index, EqCol: id.Action, EqVal: inspect.ActionSkipped,
		KeyCol: id.Key, ExtraCol: id.BizID}
	var frac func(sources.WalkRow) float64
	if id.CreatedAt != "" {
		from := r.now.Add(-r.o.Since)
		w.PosCol, w.From = id.CreatedAt, from
		frac = timeFrac(from, r.now)
	}
	w.Order = acc[0].walkOrder(reqs[0], w)
	// The shard is on the operation (biz_id), not on the record key, so that
	// every worker triages the operations of its own shard.
	var effect, entity *Requirement
	for i := range reqs[1:] {
		q := &reqs[1+i]
		switch {
		case q.Entity:
			entity = q
		case q.Step != "":
			effect = q
		}
	}
	var cancelled int64
	err := r.walk(cs, w, frac, func(rows []sources.WalkRow) error {
		var keys []string
		for _, row := range rows {
			if row.Extra == "" || !r.inShard(row.Extra) || cs.seen[row.Extra] {
				continue
			}
			keys = append(keys, row.Extra)
		}
		keys = dedupe(keys)
		if effect != nil && len(keys) > 0 {
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			has, err := r.db(cs.p).ExistingKeys(ctx, effect.Table, effect.Columns[0], keys)
			cancel()
			if err != nil {
				return err
			}
			r.count(cs, int64(len(keys)))
			keys = slices.DeleteFunc(keys, func(k string) bool { return has[k] })
		}
		if entity != nil && len(keys) > 0 {
			var n int64
			var err error
			if keys, n, err = r.dropCancelled(cs, entity, keys); err != nil {
				return err
			}
			cancelled += n
		}
		for _, k := range keys {
			if err := r.candidate(cs, k); err != nil {
				return err
			}
		}
		return nil
	})
	if entity != nil {
		cs.notes = append(cs.notes, fmt.Sprintf("%d SKIPPED record(s) on an entity whose %s cancels the effect counted SKIPPED_OK from one %s lookup per chunk, not triaged",
			cancelled, entity.Reads[0], entity.Table))
	}
	return err
}

// skippedByMessages is the skipped check of an idempotency table without
// a biz_id column (seed 003's): the SKIPPED records of the window are read
// page by page, and the topic is read once per page, from the page's
// earliest record less the search window to its latest, to map each
// record's msg id (its msg_id header or idempotency.msg_id_path) to the
// key of its message, the operation (message_key "{biz_id}"). The
// operations whose entity cancels the effect are counted SKIPPED_OK; the
// others are triaged with their messages searched in the log
// (docs/reconcile.md#records-without-a-biz_id).
func (r *run) skippedByMessages(cs *checkState, reqs []Requirement, acc []access) error {
	p, id := cs.p, cs.p.Idempotency
	rr, ok := r.d.Collector.Kafka.(sources.RecordReader)
	switch {
	case id.CreatedAt == "":
		cs.uncover(p.Entity.EffectStep, "the idempotency table has no biz_id and no created_at: its records cannot be mapped to operations through their messages")
		return nil
	case p.MessageKey != config.DefaultMessageKey:
		cs.uncover(p.Entity.EffectStep, fmt.Sprintf("the idempotency table has no biz_id, and message_key %q is not {biz_id}: a message's key does not name its operation", p.MessageKey))
		return nil
	case r.d.Collector.Kafka == nil || !ok:
		cs.uncover(p.Entity.EffectStep, "the idempotency table has no biz_id and Kafka cannot be read: its records cannot be mapped to operations")
		cs.partial.Store(true)
		return nil
	}
	q := reqs[0]
	from := r.now.Add(-r.o.Since)
	w := sources.Walk{Table: id.Table, Index: acc[0].index, KeyCol: id.Key, PosCol: id.CreatedAt, From: from}
	if q.Columns[0] == id.Action {
		w.EqCol, w.EqVal = id.Action, inspect.ActionSkipped
	} else {
		w.ExtraCol = id.Action // a (created_at) walk: the action is read
	}
	w.Order = acc[0].walkOrder(q, w)
	var entity *Requirement
	for i := range reqs[1:] {
		if reqs[1+i].Entity {
			entity = &reqs[1+i]
		}
	}
	window := r.col.SearchWindow
	if window <= 0 {
		window = sources.DefaultSearchWindow
	}
	var records, read, unmapped, cancelled int64
	err := r.walk(cs, w, timeFrac(from, r.now), func(rows []sources.WalkRow) error {
		want := map[string]bool{}
		var lo, hi time.Time
		for _, row := range rows {
			t, ok := row.Pos.(time.Time)
			if (w.ExtraCol != "" && row.Extra != inspect.ActionSkipped) || !ok {
				continue
			}
			want[row.Key] = true
			if lo.IsZero() || t.Before(lo) {
				lo = t
			}
			hi = maxTime(hi, t)
		}
		if len(want) == 0 {
			return nil
		}
		records += int64(len(want))
		biz := map[string]string{}
		ctx, cancel := context.WithCancel(r.qctx)
		got, err := rr.Records(ctx, p.Topic, lo.Add(-window), hi.Add(time.Second), 0, func(m *sources.Message) {
			if k := sources.MsgIDOf(p, m); want[k] {
				biz[k] = string(m.Key)
			}
		})
		cancel()
		if err != nil {
			return fmt.Errorf("read %s to map SKIPPED records to their operations: %w", p.Topic, err)
		}
		read += int64(got.Records)
		r.count(cs, int64(got.Records))
		var keys []string
		for k := range want {
			b, ok := biz[k]
			switch {
			case !ok:
				unmapped++
			case !cs.seen[b] && r.inShard(b):
				keys = append(keys, b)
			}
		}
		slices.Sort(keys)
		keys = dedupe(keys)
		if entity != nil && len(keys) > 0 {
			var n int64
			var err error
			if keys, n, err = r.dropCancelled(cs, entity, keys); err != nil {
				return err
			}
			cancelled += n
		}
		if err := r.flush(cs); err != nil {
			return err
		}
		cs.searching = true
		defer func() { cs.searching = false }()
		for _, k := range keys {
			if err := r.candidate(cs, k); err != nil {
				return err
			}
		}
		return r.flush(cs)
	})
	cs.notes = append(cs.notes, fmt.Sprintf("%d SKIPPED record(s) of %s (no biz_id column) mapped to their operations by reading %d record(s) of %s around them; %d SKIPPED_OK by the entity's status, not triaged",
		records, id.Table, read, p.Topic, cancelled))
	if unmapped > 0 {
		cs.uncover(p.Entity.EffectStep, fmt.Sprintf("%d SKIPPED record(s) whose message was not found within %s before the record (--search-window)", unmapped, window))
	}
	return err
}

// dropCancelled reads the entity status of keys with one lookup and drops
// those whose status cancels the effect, counting each SKIPPED_OK as the
// triage would decide it (docs/reconcile.md: the check is about entities
// that do not cancel the effect); n is how many it dropped.
func (r *run) dropCancelled(cs *checkState, entity *Requirement, keys []string) (kept []string, n int64, err error) {
	ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
	statuses, err := r.db(cs.p).KeyStatuses(ctx, entity.Table, entity.Columns[0], entity.Reads[0], keys)
	cancel()
	if err != nil {
		return nil, 0, err
	}
	r.count(cs, int64(len(keys)))
	kept = slices.DeleteFunc(keys, func(k string) bool {
		if !cancelling(statuses[k], cs.p.Entity.Cancels) {
			return false
		}
		cs.seen[k] = true
		cs.candidates.Add(1)
		cs.mu.Lock()
		cs.verdicts[inspect.SkippedOK]++
		cs.mu.Unlock()
		n++
		return true
	})
	return kept, n, nil
}

// cancelling reports whether an entity's rows all have a status in cancels
// (false without a row: such a candidate is triaged).
func cancelling(statuses, cancels []string) bool {
	if len(statuses) == 0 {
		return false
	}
	for _, s := range statuses {
		if !slices.Contains(cancels, s) {
			return false
		}
	}
	return true
}

// scanTables reads every scan table by the access path its window calls
// for (accessPath): a sweep of its key index (sweep), or a walk of the
// time range [now - since, ...) of its time index (acc, by requirement),
// where per chunk of distinct keys duplicates keeps the keys with more
// than one row in that table (one GROUP BY on the key index) and orphans
// the keys with neither a state row nor an idempotency record (one lookup
// in each).
func (r *run) scanTables(cs *checkState, reqs []Requirement, acc []access, tables map[string]sources.TableInfo) error {
	p := cs.p
	covered := slices.ContainsFunc(reqs, func(q Requirement) bool { return q.Cover })
	for _, s := range p.Steps {
		switch {
		case s.Scan == nil && s.Binlog != nil && cs.check == CheckDuplicates:
			if err := r.binlogDuplicates(cs, s); err != nil {
				return err
			}
		case s.Scan == nil && s.Binlog != nil:
			cs.uncover(s.Name, "reads its effects from the binlog, which names no row of a state table: its orphans cannot be told")
		case s.Scan == nil && s.Unverified():
			cs.notes = append(cs.notes, fmt.Sprintf("step %s is unverified (no intent, no probe): no effect of it is counted, nothing to scan", s.Name))
		case s.Scan == nil && cs.check == CheckDuplicates && covered:
			// The cover walk reaches it.
		case s.Scan == nil && cs.check == CheckDuplicates:
			cs.uncover(s.Name, "no scan block, and no state table to reach every operation through")
		case s.Scan == nil:
			cs.uncover(s.Name, "no scan block: its effects cannot be read table-wide")
		}
	}
	var lookups []Requirement // orphans: state and idempotency lookups
	for _, q := range reqs {
		if q.Step == "" && !q.Cover {
			lookups = append(lookups, q)
		}
	}
	from := r.now.Add(-r.o.Since)
	grouped := map[int]bool{} // scan tables a shared sweep read with another
	chosen := map[int]sweepPath{}
	for i, q := range reqs {
		if !q.Walk || q.Cover || grouped[i] {
			continue
		}
		sc := p.Steps[p.StepIndex(q.Step)].Scan
		if cs.check == CheckOrphans {
			if sh, ok := r.sharedOrphans(p, sc.Table); ok {
				// The duplicates check's sweep of this table read it for
				// both checks (orphanShare).
				ix := sh.index
				for _, a := range sh.also {
					if a.sc.Table == sc.Table {
						ix = a.index
					}
				}
				cs.notes = append(cs.notes, fmt.Sprintf("%s: swept %s in key order once for both checks, by the duplicates check, which merged its keys with %s",
					sc.Table, ix, lookupNames(sh.lookups)))
				for _, k := range sh.keys {
					if err := r.candidate(cs, k); err != nil {
						return err
					}
				}
				continue
			}
		}
		path, ok := chosen[i]
		if !ok {
			var err error
			if path, err = r.accessPath(cs, sc, acc[i], tables, from); err != nil {
				return err
			}
		}
		if path.empty {
			continue
		} else if path.index != "" {
			var share *orphanShare
			switch {
			case cs.check == CheckDuplicates:
				share = r.shareWithOrphans(cs, sc, path, tables, from)
			case !path.lo.Set && !path.hi.Set && len(lookups) > 0:
				// Orphans on its own: the same sweep in step, without
				// duplicates' finds, its orphans its own.
				share = &orphanShare{os: cs, own: true, table: sc.Table, index: path.index, lookups: lookups, seen: map[string]bool{}}
			}
			if share != nil {
				// The other scan tables of the pipeline that the same
				// sweep can read alongside: their keys in each page's
				// range, merged with the lookups once for all.
				coll := tables[sc.Table].Collation(sc.Key)
				for j := i + 1; j < len(reqs); j++ {
					qj := reqs[j]
					if !qj.Walk || qj.Cover || grouped[j] {
						continue
					}
					scj := p.Steps[p.StepIndex(qj.Step)].Scan
					if scj.Table == sc.Table || !strings.EqualFold(tables[scj.Table].Collation(scj.Key), coll) {
						continue
					}
					pj, ok := chosen[j]
					if !ok {
						var err error
						if pj, err = r.accessPath(cs, scj, acc[j], tables, from); err != nil {
							return err
						}
						chosen[j] = pj
					}
					if pj.empty || pj.index == "" || pj.lo.Set || pj.hi.Set || !share.own && r.shareWithOrphans(cs, scj, pj, tables, from) == nil {
						// Read on its own, below.
						continue
					}
					share.also = append(share.also, sharedTable{sc: scj, index: pj.index})
					grouped[j] = true
				}
			}
			if err := r.sweep(cs, sc, path, lookups, tables, from, share); err != nil {
				return err
			}
			if share != nil && !share.own {
				r.shareDone(share)
			}
			continue
		}
		w := sources.Walk{Table: sc.Table, Index: acc[i].index, KeyCol: sc.Key}
		var frac func(sources.WalkRow) float64
		if sc.Time != "" {
			w.PosCol, w.From = sc.Time, from
			frac = timeFrac(from, r.now)
		}
		w.Order = acc[i].walkOrder(q, w)
		r.shard(&w)
		err := r.walk(cs, w, frac, func(rows []sources.WalkRow) error {
			var keys []string
			for _, row := range rows {
				if !cs.seen[row.Key] {
					keys = append(keys, row.Key)
				}
			}
			keys = dedupe(keys)
			if len(keys) == 0 {
				return nil
			}
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			defer cancel()
			var keep []string
			if cs.check == CheckDuplicates {
				multi, err := r.db(cs.p).MultiRowKeys(ctx, sc.Table, sc.Key, keys)
				if err != nil {
					return err
				}
				r.count(cs, int64(len(keys)))
				// Every key the count names: each is equal, under the
				// column's collation, to a key of the page, but may be
				// spelled as another of its rows (PAY-1 for the window's
				// pay-1, whose first row was yesterday's PAY-1), so the
				// names are the candidates, not the page's spellings
				// (docs/reconcile.md#access-path). Under --shard the walk
				// kept the page's rows of this shard by their own
				// spelling: the name may hash elsewhere, and only this
				// shard saw the row (docs/reconcile.md#how-the-work-is-bounded).
				for k, n := range multi {
					if n > 1 && !cs.seen[k] {
						keep = append(keep, k)
					}
				}
				slices.Sort(keep)
			} else {
				known := map[string]bool{}
				for _, l := range lookups {
					has, err := r.db(cs.p).ExistingKeys(ctx, l.Table, l.Columns[0], keys)
					if err != nil {
						return err
					}
					r.count(cs, int64(len(keys)))
					for k := range has {
						known[k] = true
					}
				}
				for _, k := range keys {
					if !known[k] {
						keep = append(keep, k)
					}
				}
			}
			for _, k := range keep {
				if err := r.candidate(cs, k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	// Last: the operations the scans above made candidates are not read
	// twice.
	for i, q := range reqs {
		if q.Cover {
			if err := r.cover(cs, q, acc[i], tables); err != nil {
				return err
			}
		}
	}
	return nil
}

// binlogDuplicates reads a binlog step's table in the binlog over [now −
// --since, now] (at most config.MaxBinlogWindow: a longer --since scans the
// last 24 hours and says so) and makes candidates of the operations that
// may have changed one row twice by one effect's delta
// (docs/reconcile.md#binlog-steps). With binlog.transaction, a change
// names its operation (sources.RepeatedChanges). Without it (seed 000's
// autocommit consumer) no change names one: the rows changed more than once
// by the same delta within binlog.window are found in the binlog, and the
// operations whose messages name that row and delta are found by reading
// the topic around those changes. Each candidate is then triaged as `opctl
// where` does, its message searched in the log, and the attribution
// decides.
func (r *run) binlogDuplicates(cs *checkState, s config.Step) error {
	b := s.Binlog
	col := r.d.Collector.For(cs.p)
	if col.Binlog == nil {
		cs.uncover(s.Name, "the binlog cannot be read: "+orWhy(col.BinlogMissing, "no binlog reader"))
		cs.partial.Store(true)
		return nil
	}
	since := r.o.Since
	if since > config.MaxBinlogWindow {
		since = config.MaxBinlogWindow
		cs.notes = append(cs.notes, fmt.Sprintf("step %s: --since %s is longer than the %s a binlog scan reads: only the last %s of the binlog were scanned for it",
			s.Name, r.o.Since, config.MaxBinlogWindow, config.MaxBinlogWindow))
	}
	req := sources.BinlogRequest{KeyColumn: b.Key, DeltaColumn: b.Delta, From: r.now.Add(-since), To: r.now, Clamp: true}
	req.Schema, req.Table = col.SplitTable(b.Table)
	if t, c := b.TransactionTable(); t != "" {
		req.TxSchema, req.TxTable = col.SplitTable(t)
		req.TxColumn = c
	}
	read, err := col.Binlog.Changes(r.qctx, req)
	if err != nil {
		cs.uncover(s.Name, "binlog not read: "+err.Error())
		cs.partial.Store(true)
		return nil
	}
	r.count(cs, int64(len(read.Changes)))
	cs.notes = append(cs.notes, fmt.Sprintf("step %s: %d binlog change(s) of %s in %d file(s)", s.Name, len(read.Changes), b.Table, len(read.Files)))
	if read.From.After(req.From) {
		cs.notes = append(cs.notes, fmt.Sprintf("step %s: the binlog begins at %s: scanned from there, not from %s", s.Name, read.From.UTC().Format(time.RFC3339), req.From.UTC().Format(time.RFC3339)))
	}
	var bizs []string
	if b.Transaction != "" {
		bizs = sources.RepeatedChanges(read.Changes, b.WindowDuration())
	} else {
		if bizs, err = r.messagesOfRepeats(cs, s, read.Changes); err != nil {
			return err
		}
	}
	if err := r.flush(cs); err != nil {
		return err
	}
	cs.searching = true
	defer func() { cs.searching = false }()
	for _, biz := range bizs {
		if !cs.seen[biz] && r.inShard(biz) {
			if err := r.candidate(cs, biz); err != nil {
				return err
			}
		}
	}
	return r.flush(cs)
}

func orWhy(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// messagesOfRepeats finds the operations whose messages name a row the
// binlog shows changed more than once by the same delta within the step's
// window (sources.Repeats): the topic is read from the earliest of those
// changes less the window to the latest, once, and a message whose
// binlog.message_key and message_delta give that row and delta names a
// candidate, its biz_id the record's key (message_key "{biz_id}").
func (r *run) messagesOfRepeats(cs *checkState, s config.Step, changes []sources.BinlogChange) ([]string, error) {
	b, p := s.Binlog, cs.p
	reps := sources.Repeats(changes, b.WindowDuration())
	if len(reps) == 0 {
		return nil, nil
	}
	rr, ok := r.d.Collector.Kafka.(sources.RecordReader)
	switch {
	case p.MessageKey != config.DefaultMessageKey:
		cs.uncover(s.Name, fmt.Sprintf("%d row(s) changed more than once by one delta, but message_key %q is not {biz_id}: a message's key does not name its operation", len(reps), p.MessageKey))
		return nil, nil
	case r.d.Collector.Kafka == nil || !ok:
		cs.uncover(s.Name, fmt.Sprintf("%d row(s) changed more than once by one delta, but Kafka cannot be read to find the operations that made them", len(reps)))
		cs.partial.Store(true)
		return nil, nil
	}
	keyPath, _ := config.ParseMessagePath(b.MessageKey, false)
	deltaPath, _ := config.ParseMessagePath(b.MessageDelta, true)
	from, to := reps[0].First.Add(-b.WindowDuration()), reps[0].Last
	want := map[string]bool{}
	for _, rp := range reps {
		from, to = minTime(from, rp.First.Add(-b.WindowDuration())), maxTime(to, rp.Last)
		want[rp.Key+"\x00"+rp.Delta] = true
	}
	var bizs []string
	seen := map[string]bool{}
	ctx, cancel := context.WithCancel(r.qctx)
	defer cancel()
	read, err := rr.Records(ctx, p.Topic, from.Add(-time.Second), to.Add(time.Second), 0, func(m *sources.Message) {
		k, err1 := keyPath.Lookup(m.Value)
		d, err2 := deltaPath.Lookup(m.Value)
		if err1 != nil || err2 != nil || !want[k+"\x00"+sources.CanonDecimal(d)] || seen[string(m.Key)] {
			return
		}
		seen[string(m.Key)] = true
		bizs = append(bizs, string(m.Key))
	})
	if err != nil {
		cs.uncover(s.Name, fmt.Sprintf("%d row(s) changed more than once by one delta, but the topic could not be read: %v", len(reps), err))
		cs.partial.Store(true)
		return nil, nil
	}
	r.count(cs, int64(read.Records))
	cs.notes = append(cs.notes, fmt.Sprintf("step %s: %d row(s) changed more than once by one delta; %d record(s) of %s read from %s to %s name %d operation(s)",
		s.Name, len(reps), read.Records, p.Topic, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339), len(bizs)))
	slices.Sort(bizs)
	return bizs, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// uncommitted walks, per partition, the state rows whose stored offset lies
// in [committed, log end) (where the group will read again, by
// inspect.Redelivery's rules), and triages the terminal ones.
func (r *run) uncommitted(cs *checkState, q Requirement, a access) error {
	p := cs.p
	st := p.State
	view, err := r.group(p.Topic, p.Group)
	if err != nil {
		return err
	}
	parts := make([]int32, 0, len(view.Partitions))
	for id := range view.Partitions {
		parts = append(parts, id)
	}
	slices.Sort(parts)
	done := append(slices.Clone(st.Terminal), st.Failed...)
	for i, part := range parts {
		pv := view.Partitions[part]
		lo := pv.Committed
		if lo < 0 || lo < pv.LogStart {
			if p.EffectiveOffsetReset() != "earliest" {
				continue // restarts at latest: nothing is read again
			}
			lo = pv.LogStart
		}
		lo = max(lo, pv.LogStart)
		if lo >= pv.LogEnd {
			continue
		}
		w := sources.Walk{Table: st.Table, Index: a.index, EqCol: st.Partition, EqVal: int64(part),
			PosCol: st.Offset, From: lo, To: pv.LogEnd, KeyCol: st.Key, ExtraCol: st.Status}
		w.Order = a.walkOrder(q, w)
		r.shard(&w)
		n := float64(len(parts))
		err := r.walk(cs, w, func(sources.WalkRow) float64 { return float64(i) / n }, func(rows []sources.WalkRow) error {
			for _, row := range rows {
				if slices.Contains(done, row.Extra) {
					if err := r.candidate(cs, row.Key); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// inShard reports whether key belongs to this worker's shard (the same
// CRC32 the walks compute in SQL).
func (r *run) inShard(key string) bool {
	if r.o.Shards <= 1 {
		return true
	}
	return ShardOf(key, r.o.Shards) == r.o.Shard
}

func dedupe(keys []string) []string {
	seen := make(map[string]bool, len(keys))
	out := keys[:0]
	for _, k := range keys {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// ShardOf is the shard of key among n: CRC32 (IEEE, as MySQL's CRC32())
// of its UTF-8 bytes, mod n.
func ShardOf(key string, n int) int {
	return int(crc32.ChecksumIEEE([]byte(key)) % uint32(n))
}

// sweepPage is the keys of one sweep statement: ten times --chunk, at
// most 10,000. A sweep returns one row per key and keeps only what it
// finds (orphans: the page's keys for its merge), so its pages can be
// longer than a walk's and still be short statements.
func (r *run) sweepPage() int { return min(10*r.o.Chunk, 10000) }

// sweepRows is the index entries of one page of a whole duplicates sweep
// between sampled keys (mysql.Reader.SweepBounds): one GROUP BY of
// 0.3-0.6 s at the 0.3-0.6 us an entry measured, short beside --timeout.
// A table of fewer is read in one statement with no bound, which is
// cheapest: the server checks a page's upper bound on every entry (one
// 1M-entry table under utf8mb4_general_ci, measured: 0.28 s unbounded,
// 0.41-0.64 s in 5 to 10 bounded pages) (docs/reconcile.md#access-path).
var sweepRows = 1000000 // a variable for the tests

// windowSlice is the rows of one statement of windowRange's pass over the
// window (by the optimizer's estimate): the window is read in slices of
// time of about that many rows each (a variable for the tests).
var windowSlice int64 = 200000

// sweepLookup is one table an orphans sweep looks keys up in: its key
// column and, when the table can be swept alongside (an index starting
// with the column, and the scan key's collation, so that both orders
// agree), the index.
type sweepLookup struct {
	table, col, index string
}

// sweep reads the distinct keys of scan table sc in key order through
// path's index, a page of sweepPage keys per statement, only between
// path's lo and hi when they are set (a duplicates window's key range:
// the orphans merge reads its lookup tables from the first key on)
// (docs/reconcile.md#access-path).
// Duplicates keeps the keys with more than one row; orphans the keys that
// neither lookup table holds, read as a merge: for each page (after, last],
// the same range of each lookup table's key index, paged alike (a lookup
// table that cannot be swept alongside is asked by the page's keys). The
// keys found are kept when a row of theirs lies in the window (one lookup
// per page of keys found), and queued for the triage, which decides.
//
// With share (duplicates only, when the orphans check of the run would
// sweep the same table through the same index: shareWithOrphans), every
// page's keys also go through the orphans merge with share's lookup
// tables, and the orphans found are kept in share for the orphans check:
// the table is read once for both checks.
func (r *run) sweep(cs *checkState, sc *config.Scan, path sweepPath, lookups []Requirement, tables map[string]sources.TableInfo, from time.Time, share *orphanShare) error {
	s := sources.Sweep{Table: sc.Table, Index: path.index, KeyCol: sc.Key, Lo: path.lo, Hi: path.hi}
	if r.o.Shards > 1 {
		s.Shard, s.Shards = r.o.Shard, r.o.Shards
	}
	// mergeCS is the check the merge's reads and finds belong to.
	mergeCS := cs
	if share != nil {
		lookups, mergeCS = share.lookups, share.os
	}
	var ls []sweepLookup
	coll := tables[sc.Table].Collation(sc.Key)
	for _, l := range lookups {
		sl := sweepLookup{table: l.Table, col: l.Columns[0]}
		info := tables[l.Table]
		if use, ok := info.WalkIndex([]string{sl.col}, sl.col); ok && strings.EqualFold(info.Collation(sl.col), coll) {
			sl.index = use.Index.Name
		}
		ls = append(ls, sl)
	}
	est := path.est
	// A duplicates sweep of at most sweepRows entries (sweepPage under
	// --rate, which then keeps an even pace) is one statement: a whole
	// table, or a window's key range. A larger whole sweep reads pages of
	// about that many entries between keys sampled by the table's integer
	// primary key. Each entry is read once, as the naive GROUP BY reads
	// it; otherwise (no such key, or a larger key range) SweepMulti pages
	// read each twice.
	ranged := false
	var bounds []sources.KeyCount
	if cs.check == CheckDuplicates && share == nil {
		per := int64(sweepRows)
		if r.o.Rate > 0 {
			per = int64(r.sweepPage())
		}
		if n := (est + per - 1) / per; n <= 1 {
			ranged = true
		} else if pk := tables[sc.Table].PrimaryKey(); len(pk) == 1 && !path.lo.Set && !path.hi.Set {
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			var err error
			bounds, err = r.db(cs.p).SweepBounds(ctx, s, pk[0], int(n))
			cancel()
			if err != nil {
				return err
			}
			ranged = bounds != nil
		}
	}
	// The pages of keys (orphans, and a sweep shared with orphans) are read
	// one ahead: while the lookups of one page run, the next page is read
	// on another connection, as a walk reads ahead (under --rate, one
	// after another). The keys are filtered once the page is in hand: the
	// candidates' sets are the scanner's alone.
	type keyPage struct {
		keys   []string
		counts []int64
		end    sources.SweepEnd
		err    error
	}
	readKeys := func(after sources.Bound) keyPage {
		ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
		defer cancel()
		var kp keyPage
		kp.end, kp.err = r.db(cs.p).SweepPage(ctx, s, after, sources.Bound{}, r.sweepPage(), func(key []byte, n int64) {
			kp.keys = append(kp.keys, string(key))
			kp.counts = append(kp.counts, n)
		})
		return kp
	}
	var ahead chan keyPage
	defer func() {
		if ahead != nil {
			<-ahead
		}
	}()
	page := 0
	var after sources.Bound
	var read int64
	for {
		if r.stopped() {
			return errStop
		}
		// Duplicates asks the server for the keys of more than one row of a
		// page of index entries; orphans reads the page's keys (at most
		// sweepPage) for its merge.
		var hits, keys []string
		var end sources.SweepEnd
		var err error
		var pg sharedKeys // share: the page's keys of every table it reads
		ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
		last := false // the page is the sweep's last
		switch {
		case ranged:
			var upTo sources.Bound
			if page < len(bounds) {
				upTo = sources.Bound{Set: true, Value: bounds[page].Value}
			}
			hits, end, err = r.db(cs.p).SweepRange(ctx, s, after, upTo)
			if page < len(bounds) {
				end.Last = bounds[page]
			} else {
				last = true
			}
			page++
			hits = slices.DeleteFunc(hits, func(k string) bool { return cs.seen[k] })
		case cs.check == CheckDuplicates && share == nil:
			hits, end, err = r.db(cs.p).SweepMulti(ctx, s, after, r.sweepPage())
			last = end.Keys < r.sweepPage()
			hits = slices.DeleteFunc(hits, func(k string) bool { return cs.seen[k] })
		default:
			// Every key of the page for the merge; shared with orphans,
			// also those of more than one row, as SweepRange's HAVING
			// would keep them.
			var kp keyPage
			if ahead != nil {
				kp = <-ahead
				ahead = nil
			} else {
				kp = readKeys(after)
			}
			end, err = kp.end, kp.err
			if err != nil {
				break
			}
			last = end.Keys < r.sweepPage()
			if !last && r.o.Rate <= 0 && !r.stopped() {
				next := sources.Bound{Set: true, Value: end.Last.Value}
				ch := make(chan keyPage, 1)
				go func() { ch <- readKeys(next) }()
				ahead = ch
			}
			if share != nil {
				var upTo sources.Bound
				if !last {
					upTo = sources.Bound{Set: true, Value: end.Last.Value}
				}
				pg, err = r.sharedPage(cs, share, sc, s, kp.keys, kp.counts, after, upTo)
				if err != nil {
					break
				}
				read += pg.rows
				break
			}
			for _, k := range kp.keys {
				if !cs.seen[k] {
					keys = append(keys, k)
				}
			}
		}
		cancel()
		if err != nil {
			return err
		}
		r.count(cs, end.Rows)
		read += end.Rows
		var orphans []string // share: the orphans check's finds
		if share != nil {
			// The lookups read the page's range once for every table; on
			// the last page, to the end: a table read alongside may hold
			// keys past the last of the sweep's own.
			lookupTo := sources.Bound{Set: true, Value: end.Last.Value}
			if last && len(share.also) > 0 {
				lookupTo = sources.Bound{}
			}
			if hits, orphans, err = r.sharedFinds(cs, mergeCS, share, pg, after, lookupTo, ls, from); err != nil {
				return err
			}
		} else {
			if len(keys) > 0 {
				if hits, err = r.unknownKeys(mergeCS, keys, after, sources.Bound{Set: true, Value: end.Last.Value}, ls); err != nil {
					return err
				}
			}
			in := sinceLookup{table: sc.Table, key: sc.Key, time: sc.Time}
			if path.within != nil {
				in = *path.within
			}
			if len(hits) > 0 && in.time != "" {
				ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
				in, err := r.db(cs.p).KeysSince(ctx, in.table, in.key, in.time, from, hits)
				cancel()
				if err != nil {
					return err
				}
				r.count(cs, int64(len(hits)))
				hits = slices.DeleteFunc(hits, func(k string) bool { return !in[k] })
			}
		}
		for _, k := range hits {
			if err := r.candidate(cs, k); err != nil {
				return err
			}
		}
		for _, k := range orphans {
			if share.seen[k] {
				continue
			}
			share.seen[k] = true
			if share.own {
				if err := r.candidate(cs, k); err != nil {
					return err
				}
				continue
			}
			share.keys = append(share.keys, k)
		}
		if !last {
			cs.lastKey.Store(end.Last.Key)
			after = sources.Bound{Set: true, Value: end.Last.Value}
		}
		f := -1.0
		if est > 0 {
			f = min(1, float64(read)/float64(est))
		}
		r.progress(cs, f)
		if last {
			return nil
		}
		if err := r.throttle(); err != nil {
			return err
		}
	}
}

// unknownKeys returns, of keys (the unseen keys of a sweep page (after,
// last]), those that no lookup table holds, as stored, byte for byte: a
// key the collation makes equal to a stored one under another spelling is
// returned too, and the triage, which looks it up as the server compares,
// decides.
func (r *run) unknownKeys(cs *checkState, keys []string, after, upTo sources.Bound, ls []sweepLookup) ([]string, error) {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		want[k] = true
	}
	known := make(map[string]bool, len(keys))
	for _, l := range ls {
		if len(known) == len(keys) {
			break
		}
		if l.index == "" {
			var ask []string
			for _, k := range keys {
				if !known[k] {
					ask = append(ask, k)
				}
			}
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			has, err := r.db(cs.p).ExistingKeys(ctx, l.table, l.col, ask)
			cancel()
			if err != nil {
				return nil, err
			}
			r.count(cs, int64(len(ask)))
			for k := range has {
				known[k] = true
			}
			continue
		}
		// Every key of the range, whatever the shard: the page's keys decide.
		ls := sources.Sweep{Table: l.table, Index: l.index, KeyCol: l.col}
		cur := after
		for {
			if r.stopped() {
				return nil, errStop
			}
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			got, err := r.db(cs.p).SweepPage(ctx, ls, cur, upTo, r.sweepPage(), func(key []byte, _ int64) {
				if want[string(key)] {
					known[string(key)] = true
				}
			})
			cancel()
			if err != nil {
				return nil, err
			}
			r.count(cs, got.Rows)
			if got.Keys < r.sweepPage() {
				break
			}
			cur = sources.Bound{Set: true, Value: got.Last.Value}
		}
	}
	return slices.DeleteFunc(keys, func(k string) bool { return known[k] }), nil
}

// orphanShare is the orphans check's part of a duplicates sweep that
// reads a scan table for both checks (sweep): the orphans check's lookup
// tables, and the orphans the merge found (bounded by the finds, as a
// check's seen set is).
type orphanShare struct {
	os *checkState // the orphans check of the same pipeline
	// own: the orphans check's own sweep (no duplicates' finds), which
	// reads the pipeline's scan tables in step all the same.
	own          bool
	table, index string
	// also are the pipeline's other scan tables the sweep reads alongside,
	// each page's key range of their key index (same collation).
	also    []sharedTable
	lookups []Requirement
	keys    []string
	seen    map[string]bool
}

// shareWithOrphans decides whether the duplicates sweep of scan table sc
// along path also does the orphans check's read of it: when the run has
// the orphans check of the same pipeline still to run, that check's plan
// passes without a full scan (its lookups have their indexes), and it would
// sweep the same table whole through the same index (the same facts give
// the same choice: accessPath). Both checks then cost one read of the
// table instead of two (docs/reconcile.md#access-path). nil otherwise.
func (r *run) shareWithOrphans(cs *checkState, sc *config.Scan, path sweepPath, tables map[string]sources.TableInfo, from time.Time) *orphanShare {
	if path.lo.Set || path.hi.Set {
		return nil
	}
	var os *checkState
	for _, st := range r.states {
		if st.p == cs.p && st.check == CheckOrphans && st.status == StatusNotRun {
			os = st
		}
	}
	if os == nil {
		return nil
	}
	// The orphans check's own plan and path, on a state of its own: what
	// they note is the orphans check's to say when it runs.
	tmp := &checkState{p: cs.p, check: CheckOrphans, seen: map[string]bool{}, verdicts: map[inspect.Code]int64{}}
	reqs, acc, ok := r.plan(tmp, tables)
	if !ok || len(tmp.notes) > 0 {
		return nil
	}
	share := &orphanShare{os: os, table: sc.Table, index: path.index, seen: map[string]bool{}}
	found := false
	for i, q := range reqs {
		switch {
		case q.Step == "" && !q.Cover:
			share.lookups = append(share.lookups, q)
		case q.Walk && !q.Cover && q.Step != "" && !found:
			osc := cs.p.Steps[cs.p.StepIndex(q.Step)].Scan
			if osc == nil || osc.Table != sc.Table || osc.Key != sc.Key || osc.Time != sc.Time {
				continue
			}
			op, err := r.accessPath(tmp, osc, acc[i], tables, from)
			if err != nil || op.empty || op.index != path.index || op.lo.Set || op.hi.Set {
				return nil
			}
			found = true
		}
	}
	if !found || len(share.lookups) == 0 {
		return nil
	}
	return share
}

// shareDone keeps a finished shared sweep's orphans for the orphans check.
func (r *run) shareDone(s *orphanShare) {
	r.sharesMu.Lock()
	defer r.sharesMu.Unlock()
	if r.shares == nil {
		r.shares = map[*checkState]map[string]*orphanShare{}
	}
	if r.shares[s.os] == nil {
		r.shares[s.os] = map[string]*orphanShare{}
	}
	r.shares[s.os][s.table] = s
	for _, a := range s.also {
		r.shares[s.os][a.sc.Table] = s
	}
}

// sharedTable is a scan table a shared sweep reads alongside its own.
type sharedTable struct {
	sc    *config.Scan
	index string
}

// sharedOrphans returns the finished duplicates sweep of table that did
// the read of the orphans check of pipeline p (ok false: none did, the
// orphans check reads the table itself).
func (r *run) sharedOrphans(p *config.Pipeline, table string) (*orphanShare, bool) {
	r.sharesMu.Lock()
	defer r.sharesMu.Unlock()
	for os, m := range r.shares {
		if os.p == p {
			if s, ok := m[table]; ok {
				return s, true
			}
		}
	}
	return nil, false
}

// lookupNames reads "biz_operation.biz_id and consumer_idempotency.biz_id".
func lookupNames(lookups []Requirement) string {
	var out []string
	for _, l := range lookups {
		out = append(out, l.Table+"."+l.Columns[0])
	}
	return strings.Join(out, " and ")
}

// sharedKeys is one page of a sweep shared with orphans: each table's keys
// in the page's range, as stored, with their row counts (tables[0] is the
// sweep's own, then orphanShare.also).
type sharedKeys struct {
	tables []*config.Scan
	keys   [][]string
	counts [][]int64
	rows   int64 // entries read of the tables alongside
}

// sharedPage reads the page (after, upTo] (upTo unset: to the end) of each
// table share reads alongside s (scan table sc), own keys and counts given; the entries
// it reads are counted to cs.
func (r *run) sharedPage(cs *checkState, share *orphanShare, sc *config.Scan, s sources.Sweep, keys []string, counts []int64, after, upTo sources.Bound) (sharedKeys, error) {
	pg := sharedKeys{tables: []*config.Scan{sc}, keys: [][]string{keys}, counts: [][]int64{counts}}
	for _, a := range share.also {
		fs := sources.Sweep{Table: a.sc.Table, Index: a.index, KeyCol: a.sc.Key, Shard: s.Shard, Shards: s.Shards}
		var ks []string
		var cs2 []int64
		cur := after
		for {
			if r.stopped() {
				return pg, errStop
			}
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			got, err := r.db(cs.p).SweepPage(ctx, fs, cur, upTo, r.sweepPage(), func(key []byte, n int64) {
				ks = append(ks, string(key))
				cs2 = append(cs2, n)
			})
			cancel()
			if err != nil {
				return pg, err
			}
			r.count(cs, got.Rows)
			pg.rows += got.Rows
			if got.Keys < r.sweepPage() {
				break
			}
			cur = sources.Bound{Set: true, Value: got.Last.Value}
		}
		pg.tables = append(pg.tables, a.sc)
		pg.keys = append(pg.keys, ks)
		pg.counts = append(pg.counts, cs2)
	}
	return pg, nil
}

// sharedFinds decides a shared page: the keys of more than one row in one
// of its tables are duplicates' finds, the keys no lookup table holds
// (one merge of the page's range for every table: unknownKeys, read by
// mergeCS) the orphans check's; each is kept when a row of the table it
// was found in lies in the window (one KeysSince per table with finds).
func (r *run) sharedFinds(cs, mergeCS *checkState, share *orphanShare, pg sharedKeys, after, lookupTo sources.Bound, ls []sweepLookup, from time.Time) (hits, orphans []string, err error) {
	var all []string
	for _, ks := range pg.keys {
		for _, k := range ks {
			if !share.seen[k] {
				all = append(all, k)
			}
		}
	}
	all = dedupe(all)
	orphan := map[string]bool{}
	if len(all) > 0 {
		unknown, err := r.unknownKeys(mergeCS, all, after, lookupTo, ls)
		if err != nil {
			return nil, nil, err
		}
		for _, k := range unknown {
			orphan[k] = true
		}
	}
	keptHit, keptOrphan := map[string]bool{}, map[string]bool{}
	for t, sc := range pg.tables {
		var th, to []string
		for i, k := range pg.keys[t] {
			if !share.own && pg.counts[t][i] > 1 && !cs.seen[k] {
				th = append(th, k)
			}
			if orphan[k] {
				to = append(to, k)
			}
		}
		ask := dedupe(slices.Concat(th, to))
		if len(ask) == 0 {
			continue
		}
		in := map[string]bool{}
		if sc.Time == "" {
			for _, k := range ask {
				in[k] = true
			}
		} else {
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			in, err = r.db(cs.p).KeysSince(ctx, sc.Table, sc.Key, sc.Time, from, ask)
			cancel()
			if err != nil {
				return nil, nil, err
			}
			r.count(cs, int64(len(ask)))
		}
		for _, k := range th {
			if in[k] && !keptHit[k] {
				keptHit[k] = true
				hits = append(hits, k)
			}
		}
		for _, k := range to {
			if in[k] && !keptOrphan[k] {
				keptOrphan[k] = true
				orphans = append(orphans, k)
			}
		}
	}
	return hits, orphans, nil
}
