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
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
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
	tables := map[string]mysqlsrc.TableInfo{}
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
			var ce *mysqlsrc.ConnError
			if errors.As(err, &ce) {
				r.fail(err)
				return false
			}
		}
	}
	return false
}

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
func (a access) walkOrder(q Requirement, w mysqlsrc.Walk) []string {
	n := 0
	if w.EqCol != "" {
		n++
	}
	if w.PosCol != "" {
		n++
	}
	return append(slices.Clone(q.Columns[min(n, len(q.Columns)):]), a.order...)
}

// plan checks that the indexes a check needs exist. It returns how each
// requirement is served (by position; index "" when the check runs on a
// full scan), or ok=false after marking the check skipped, refused or
// failed.
func (r *run) plan(cs *checkState, tables map[string]mysqlsrc.TableInfo) ([]Requirement, []access, bool) {
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
			info, err = r.d.DB.TableInfo(ctx, q.Table)
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

func (r *run) runCheck(cs *checkState, tables map[string]mysqlsrc.TableInfo) error {
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
		err = r.stuck(cs, reqs[0], acc[0])
	case CheckSkipped:
		err = r.skipped(cs, reqs, acc)
	case CheckDuplicates, CheckOrphans:
		err = r.scanTables(cs, reqs, acc)
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
	keys, err := r.stoppedKeys(cs.p.Name)
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
func (r *run) stoppedKeys(pipeline string) ([]string, error) {
	if r.col.AuditTable == "" {
		return nil, nil
	}
	r.stoppedMu.Lock()
	defer r.stoppedMu.Unlock()
	if keys, ok := r.stoppedOps[pipeline]; ok {
		return keys, nil
	}
	byOp, err := r.d.DB.AuditByOperation(r.qctx, r.col.AuditTable, pipeline)
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

func (r *run) shard(w *mysqlsrc.Walk) {
	if r.o.Shards > 1 {
		w.Shard, w.Shards = r.o.Shard, r.o.Shards
	}
}

// walk pages through w, calling page with each page's rows. frac maps the
// last row to the fraction of the range walked (nil: unknown).
func (r *run) walk(cs *checkState, w mysqlsrc.Walk, frac func(mysqlsrc.WalkRow) float64, page func([]mysqlsrc.WalkRow) error) error {
	var cur mysqlsrc.Cursor
	for {
		if r.stopped() {
			return errStop
		}
		ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
		rows, err := r.d.DB.WalkPage(ctx, w, cur, r.o.Chunk)
		cancel()
		if err != nil {
			return err
		}
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
		if err := page(rows); err != nil {
			return err
		}
		r.progress(cs, f)
		if len(rows) < r.o.Chunk {
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
	b := batch{cs: cs, keys: cs.pending}
	cs.pending = nil
	select {
	case r.batches <- b:
		return nil
	case <-r.stop.Done():
		return errStop
	}
}

// timeFrac maps a time row to the fraction of [from, to] walked.
func timeFrac(from, to time.Time) func(mysqlsrc.WalkRow) float64 {
	span := to.Sub(from)
	return func(row mysqlsrc.WalkRow) float64 {
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
	var statuses []string
	if a.index != "" {
		var after *string
		for {
			if r.stopped() {
				return errStop
			}
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			v, ok, err := r.d.DB.NextValue(ctx, st.Table, st.Status, after)
			cancel()
			if err != nil {
				return err
			}
			if !ok {
				break
			}
			r.count(cs, 1)
			if !slices.Contains(done, v) {
				statuses = append(statuses, v)
			}
			after = &v
		}
	} else {
		// Full scan allowed without the index: the configured statuses only.
		statuses = append(statuses, st.Initial...)
		for _, s := range cs.p.Steps {
			if s.DoneStatus != "" && !slices.Contains(done, s.DoneStatus) && !slices.Contains(statuses, s.DoneStatus) {
				statuses = append(statuses, s.DoneStatus)
			}
		}
		cs.notes = append(cs.notes, "without the (status, updated_at) index only the configured non-terminal statuses are walked")
	}
	from, to := r.now.Add(-r.o.Since), r.now.Add(-r.o.OlderThan)
	for _, status := range statuses {
		w := mysqlsrc.Walk{Table: st.Table, Index: a.index, EqCol: st.Status, EqVal: status, KeyCol: st.Key}
		var frac func(mysqlsrc.WalkRow) float64
		if st.UpdatedAt != "" {
			w.PosCol, w.From, w.To = st.UpdatedAt, from, to
			frac = timeFrac(from, to)
		}
		w.Order = a.walkOrder(q, w)
		r.shard(&w)
		err := r.walk(cs, w, frac, func(rows []mysqlsrc.WalkRow) error {
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
// stuck target by its definition (docs/reconcile.md#targets): its state row,
// as the triage read it, is neither terminal nor failed, was last updated
// before now - older-than (the run's database clock, as the walk bounded
// it), and holds no live lease (the triage's database clock, as IN_FLIGHT
// is decided) — whatever Kafka says or could not say. The verdict stays
// the one `where` gives; IN_FLIGHT is never a stuck target.
func (r *run) stuckTarget(p *config.Pipeline, rep inspect.Report) bool {
	st := rep.State
	if p.State == nil || !st.Found || st.LeaseActive || rep.Verdict.Code == inspect.InFlight {
		return false
	}
	if slices.Contains(p.State.Terminal, st.Status) || slices.Contains(p.State.Failed, st.Status) {
		return false
	}
	if p.State.UpdatedAt != "" && (st.UpdatedAt == nil || !st.UpdatedAt.Before(r.now.Add(-r.o.OlderThan))) {
		return false
	}
	return true
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
	w := mysqlsrc.Walk{Table: id.Table, Index: acc[0].index, EqCol: id.Action, EqVal: inspect.ActionSkipped,
		KeyCol: id.Key, ExtraCol: id.BizID}
	var frac func(mysqlsrc.WalkRow) float64
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
	cancels := cs.p.Entity.Cancels
	var cancelled int64
	err := r.walk(cs, w, frac, func(rows []mysqlsrc.WalkRow) error {
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
			has, err := r.d.DB.ExistingKeys(ctx, effect.Table, effect.Columns[0], keys)
			cancel()
			if err != nil {
				return err
			}
			r.count(cs, int64(len(keys)))
			keys = slices.DeleteFunc(keys, func(k string) bool { return has[k] })
		}
		if entity != nil && len(keys) > 0 {
			ctx, cancel := context.WithTimeout(r.qctx, r.o.Timeout)
			statuses, err := r.d.DB.KeyStatuses(ctx, entity.Table, entity.Columns[0], entity.Reads[0], keys)
			cancel()
			if err != nil {
				return err
			}
			r.count(cs, int64(len(keys)))
			keys = slices.DeleteFunc(keys, func(k string) bool {
				if !cancelling(statuses[k], cancels) {
					return false
				}
				// Decided here as the triage would: SKIPPED_OK.
				cs.seen[k] = true
				cs.candidates.Add(1)
				cs.mu.Lock()
				cs.verdicts[inspect.SkippedOK]++
				cs.mu.Unlock()
				cancelled++
				return true
			})
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

// scanTables walks the time range [now - since, ...) of every scan table's
// index (acc, by requirement); per chunk of distinct keys, duplicates keeps the keys with more
// than one row in that table (one GROUP BY on the key index), orphans the
// keys with neither a state row nor an idempotency record (one lookup in
// each).
func (r *run) scanTables(cs *checkState, reqs []Requirement, acc []access) error {
	p := cs.p
	for _, s := range p.Steps {
		switch {
		case s.Scan == nil && s.Binlog != nil && cs.check == CheckDuplicates:
			if err := r.binlogDuplicates(cs, s); err != nil {
				return err
			}
		case s.Scan == nil && s.Binlog != nil:
			cs.notes = append(cs.notes, fmt.Sprintf("step %s reads its effects from the binlog: not scanned", s.Name))
		case s.Scan == nil:
			cs.notes = append(cs.notes, fmt.Sprintf("step %s has no scan block: not scanned", s.Name))
		}
	}
	var lookups []Requirement // orphans: state and idempotency lookups
	for _, q := range reqs {
		if q.Step == "" {
			lookups = append(lookups, q)
		}
	}
	from := r.now.Add(-r.o.Since)
	for i, q := range reqs {
		if !q.Walk {
			continue
		}
		sc := p.Steps[p.StepIndex(q.Step)].Scan
		w := mysqlsrc.Walk{Table: sc.Table, Index: acc[i].index, KeyCol: sc.Key}
		var frac func(mysqlsrc.WalkRow) float64
		if sc.Time != "" {
			w.PosCol, w.From = sc.Time, from
			frac = timeFrac(from, r.now)
		}
		w.Order = acc[i].walkOrder(q, w)
		r.shard(&w)
		err := r.walk(cs, w, frac, func(rows []mysqlsrc.WalkRow) error {
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
				multi, err := r.d.DB.MultiRowKeys(ctx, sc.Table, sc.Key, keys)
				if err != nil {
					return err
				}
				r.count(cs, int64(len(keys)))
				for _, k := range keys {
					if multi[k] > 1 {
						keep = append(keep, k)
					}
				}
			} else {
				known := map[string]bool{}
				for _, l := range lookups {
					has, err := r.d.DB.ExistingKeys(ctx, l.Table, l.Columns[0], keys)
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
	return nil
}

// binlogDuplicates reads a binlog step's table in the binlog over
// [now − --since, now] (at most 24 hours: a binlog scan reads every event of
// the window) and makes candidates of the operations sources.RepeatedChanges
// suspects: a change tied to one by binlog.transaction and a later one of
// the same row and delta that no transaction ties elsewhere
// (docs/reconcile.md). Without binlog.transaction no change names an
// operation, and the step is not scanned.
func (r *run) binlogDuplicates(cs *checkState, s config.Step) error {
	b := s.Binlog
	switch {
	case b.Transaction == "":
		cs.notes = append(cs.notes, fmt.Sprintf("step %s reads its effects from the binlog and has no binlog.transaction: no change names an operation, not scanned (triage an id with opctl where)", s.Name))
		return nil
	case r.d.Collector.Binlog == nil:
		cs.notes = append(cs.notes, fmt.Sprintf("step %s: the binlog cannot be read: not scanned", s.Name))
		cs.partial.Store(true)
		return nil
	case r.o.Since > config.MaxBinlogWindow:
		cs.notes = append(cs.notes, fmt.Sprintf("step %s: the binlog is scanned over at most 24h and --since is %s: not scanned (pass --since 24h or less)", s.Name, r.o.Since))
		return nil
	}
	req := sources.BinlogRequest{KeyColumn: b.Key, DeltaColumn: b.Delta, From: r.now.Add(-r.o.Since), To: r.now}
	req.Schema, req.Table = r.d.Collector.SplitTable(b.Table)
	t, col := b.TransactionTable()
	req.TxSchema, req.TxTable = r.d.Collector.SplitTable(t)
	req.TxColumn = col
	read, err := r.d.Collector.Binlog.Changes(r.qctx, req)
	if err != nil {
		cs.notes = append(cs.notes, fmt.Sprintf("step %s: binlog not scanned: %v", s.Name, err))
		cs.partial.Store(true)
		return nil
	}
	r.count(cs, int64(len(read.Changes)))
	cs.notes = append(cs.notes, fmt.Sprintf("step %s: %d binlog change(s) of %s in %d file(s)", s.Name, len(read.Changes), b.Table, len(read.Files)))
	for _, biz := range sources.RepeatedChanges(read.Changes, b.WindowDuration()) {
		if !cs.seen[biz] {
			if err := r.candidate(cs, biz); err != nil {
				return err
			}
		}
	}
	return nil
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
		w := mysqlsrc.Walk{Table: st.Table, Index: a.index, EqCol: st.Partition, EqVal: int64(part),
			PosCol: st.Offset, From: lo, To: pv.LogEnd, KeyCol: st.Key, ExtraCol: st.Status}
		w.Order = a.walkOrder(q, w)
		r.shard(&w)
		n := float64(len(parts))
		err := r.walk(cs, w, func(mysqlsrc.WalkRow) float64 { return float64(i) / n }, func(rows []mysqlsrc.WalkRow) error {
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
