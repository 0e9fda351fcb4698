package mysql

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// MaxBatch bounds the operations of one ReadOperations call
// (sources.MaxBatch).
const MaxBatch = sources.MaxBatch

// BatchStats describes the statements of a Reader's ReadOperations and
// ReadOperationsHybrid calls so far (reconcile reports them; tests check
// the batching).
type BatchStats struct {
	// Batches is the number of ReadOperations calls, Operations the
	// operations they read.
	Batches, Operations int
	// Statements is the number of statements they executed; Fallbacks the
	// batched statements the server rejected, whose query was then run once
	// per operation (Statements counts those too); Keyed the statements
	// that read a batch in its keyed form (fetchKeyed), failed ones
	// included.
	Statements, Fallbacks, Keyed int
	// Hybrid is how many of the calls were ReadOperationsHybrid (Batches
	// counts them too); Single the statements their per-operation queries
	// ran, one per query and operation (Statements counts them too).
	Hybrid, Single int
}

// ReadOperations reads the operations bizIDs of pipeline p, as ReadOperation
// reads one, with one statement per query for the whole batch instead of
// one per operation (docs/reconcile.md#how-the-work-is-bounded).
//
// The statement is the query's keyed form where the server reads it: the
// query joined with the batch's keys, bound as one JSON array,
//
//	SELECT opctl_ids.opctl_n - 1 AS opctl_op, <list> FROM JSON_TABLE(?, ...) AS opctl_ids, <tables> WHERE ... = JSON_UNQUOTE(opctl_ids.opctl_k) ...
//
// one text whatever the batch, where each key compares as the bound biz_id
// would (keyedOK). Otherwise, and for a snippet that is not a plain SELECT
// (config.CutKeyedSelect), it is the per-operation statements joined with
// UNION ALL,
//
//	SELECT ? AS opctl_op, b.* FROM (<query>) AS b UNION ALL SELECT ?, b.* FROM (<query>) AS b ...
//
// each branch binding its operation's ordinal and its values (opctl's own
// queries as plain branches, "SELECT ? AS opctl_op, cols FROM t WHERE key =
// ?"). Either way the rows of every operation come back tagged with it
// whatever the collation of the key, and opctl's own queries are ordered
// once for the whole batch.
//
// The configured evidence, intent and entity snippets are run with bound
// values only, so evs[i] and errs[i] are what ReadOperation(bizIDs[i])
// returns, with two differences: the rows of a snippet come in the order
// the server returns them for the batch (a keyed snippet has no ORDER BY; a
// snippet's ORDER BY without LIMIT may not survive in a derived table;
// opctl's own queries keep their order), and the operations read by one
// statement share one database clock (a batch whose ids are not all ASCII
// is read by two: plainKey).
//
// A batched statement the server rejects (a snippet whose columns repeat a
// name cannot be a derived table, for one) is run for the first operation
// alone: when that fails too, the query is broken for every operation (a
// missing table) and each gets that error; else it runs once per
// operation, so a snippet that works for `where` works here. The returned
// error is a *ConnError when nothing could be read at all, or an error for
// an invalid pipeline; per-operation failures are in errs, as
// ReadOperation's (a *PartialError, or a step's Err).
func (r *Reader) ReadOperations(ctx context.Context, p *config.Pipeline, auditTable string, bizIDs []string) ([]sources.DBEvidence, []error, error) {
	return r.readBatch(ctx, p, auditTable, bizIDs, false)
}

// ReadOperationsHybrid reads the operations bizIDs of pipeline p as
// ReadOperations does, but batches only the queries whose keyed form is a
// lookup of the keys in one table (query.lookup: the state row, the
// idempotency records, the audit rows, and each configured evidence,
// intent or entity query that config.PlainLookup accepts); every other
// query (a subquery, a NOT EXISTS, a join: a plan opctl cannot know for a
// list of keys) is run once per operation with its own bound biz_id, as
// ReadOperation runs it, at most maxOpenConns at a time. The watch reads
// its batches so (sources.Collector.PerOperation,
// docs/watch.md#how-it-works): a batch of a few changed operations of a
// large table, where MariaDB 10.11 planned the batched form of the lab's
// debit evidence (a NOT EXISTS on the journal) as a scan of the whole
// journal index per batch, and where one statement per query and
// operation costs a round trip each.
//
// evs[i] and errs[i] are what ReadOperation(bizIDs[i]) returns: a batched
// lookup keeps the order of opctl's own queries (their ORDER BY), a
// configured lookup has no ORDER BY (PlainLookup refuses one) and its rows
// come per key in the order of the index the server looks the key up in,
// as for one key; the operations share the clock of the batch's one state
// statement. Failures are ReadOperation's, per operation: a batched
// statement the server rejects is retried for one operation and then
// reported for all, or read per operation (ReadOperations).
func (r *Reader) ReadOperationsHybrid(ctx context.Context, p *config.Pipeline, auditTable string, bizIDs []string) ([]sources.DBEvidence, []error, error) {
	return r.readBatch(ctx, p, auditTable, bizIDs, true)
}

// readBatch is ReadOperations, or with hybrid ReadOperationsHybrid.
func (r *Reader) readBatch(ctx context.Context, p *config.Pipeline, auditTable string, bizIDs []string, hybrid bool) ([]sources.DBEvidence, []error, error) {
	name := "ReadOperations"
	if hybrid {
		name = "ReadOperationsHybrid"
	}
	if p == nil {
		return nil, nil, fmt.Errorf("mysql: %s: nil pipeline", name)
	}
	if len(bizIDs) > MaxBatch {
		return nil, nil, fmt.Errorf("mysql: %s: %d operations, at most %d per batch", name, len(bizIDs), MaxBatch)
	}
	n := len(bizIDs)
	if n == 0 {
		return nil, nil, nil
	}
	// The statements are the same for every operation, only the biz_id
	// (each query's first argument) differs: built once.
	qs0, err := buildQueries(p, auditTable, bizIDs[0])
	if err != nil {
		return nil, nil, err
	}
	// A configured query's keyed form, once for the batch (opctl's own
	// queries carry theirs).
	single := func(q query) bool { return hybrid && !q.lookup && len(q.args) > 0 }
	for k := range qs0 {
		if qs0[k].keyed == "" && qs0[k].branch == "" && len(qs0[k].args) > 0 && n > 1 && !single(qs0[k]) {
			qs0[k].keyed = keyedSnippet(qs0[k].text)
		}
	}
	qss := make([][]query, n)
	for i, id := range bizIDs {
		qs := slices.Clone(qs0)
		for k := range qs {
			if len(qs[k].args) > 0 {
				qs[k].args = slices.Clone(qs[k].args)
				qs[k].args[0] = id
			}
		}
		qss[i] = qs
	}
	slots := len(qss[0])

	// results[i][j] is operation i's result of query j.
	results := make([][]result, n)
	for i := range results {
		results[i] = make([]result, slots)
	}
	var mu sync.Mutex
	var stats BatchStats
	var wg sync.WaitGroup
	// The per-operation statements of a hybrid read, at most maxOpenConns
	// at a time (more would only queue for the pool's connections).
	sem := make(chan struct{}, maxOpenConns)
	for j := range slots {
		if single(qs0[j]) {
			for i := range n {
				wg.Go(func() {
					sem <- struct{}{}
					defer func() { <-sem }()
					results[i][j] = r.fetchQuery(ctx, qss[i][j])
				})
			}
			mu.Lock()
			stats.Statements += n
			stats.Single += n
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			stmts, keyed, fellBack := r.fetchBatch(ctx, qss, j, results)
			mu.Lock()
			stats.Statements += stmts
			stats.Keyed += keyed
			if fellBack {
				stats.Fallbacks++
			}
			mu.Unlock()
		})
	}
	wg.Wait()

	evs := make([]sources.DBEvidence, n)
	errs := make([]error, n)
	var connErr error
	reachable := false
	for i := range n {
		evs[i], errs[i] = r.assemble(p, qss[i], results[i])
		var ce *ConnError
		if errors.As(errs[i], &ce) {
			if connErr == nil {
				connErr = errs[i]
			}
		} else {
			reachable = true
		}
	}
	r.mu.Lock()
	r.batch.Batches++
	r.batch.Operations += n
	r.batch.Statements += stats.Statements
	r.batch.Fallbacks += stats.Fallbacks
	r.batch.Keyed += stats.Keyed
	r.batch.Single += stats.Single
	if hybrid {
		r.batch.Hybrid++
	}
	r.mu.Unlock()
	if !reachable && connErr != nil {
		return nil, nil, connErr
	}
	return evs, errs, nil
}

// BatchStats returns the statistics of the ReadOperations calls so far.
func (r *Reader) BatchStats() BatchStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.batch
}

// fetchBatch runs query j of every operation as one statement and fills
// results[i][j]: its keyed form when the server reads it (fetchKeyed), else
// a UNION ALL of one branch per operation (batchSQL). It returns the
// statements it executed, how many of them were keyed, and whether it had
// to fall back to one statement per operation.
func (r *Reader) fetchBatch(ctx context.Context, qss [][]query, j int, results [][]result) (stmts, keyed int, fellBack bool) {
	q0 := qss[0][j]
	n := len(qss)
	if len(q0.args) == 0 {
		// The same statement for every operation (the clock alone): once.
		res := r.fetch(ctx, q0.text, q0.limit())
		for i := range n {
			results[i][j] = res
		}
		return 1, 0, false
	}
	if n == 1 {
		results[0][j] = r.fetchQuery(ctx, q0)
		return 1, 0, false
	}
	allErr := func(err error) {
		for i := range n {
			results[i][j] = result{err: err}
		}
	}
	// ok is what to do with the outcome of a batched statement that may
	// keep capRows rows: split it and stop, or give every operation the
	// connection error and stop; false when the batch is not to be used
	// (rejected, or more rows than its operations may keep: an operation
	// after one with too many rows might have been cut off).
	ok := func(res result, capRows int) bool {
		switch {
		case res.err == nil && len(res.rows) <= capRows:
			split(res, n, q0, j, results)
			return true
		case res.err != nil && isConnError(res.err):
			allErr(res.err)
			return true
		}
		return false
	}
	if ascii, other := splitPlain(qss, j); len(ascii) > 1 && len(other) > 0 && r.keyable(ctx, q0) {
		// The keyed form for the ASCII keys, a UNION ALL for the others.
		for _, part := range [][]int{ascii, other} {
			sub := make([][]query, len(part))
			subRes := make([][]result, len(part))
			for k, i := range part {
				sub[k] = qss[i]
				subRes[k] = make([]result, len(qss[i]))
			}
			s, kd, fb := r.fetchBatch(ctx, sub, j, subRes)
			stmts, keyed, fellBack = stmts+s, keyed+kd, fellBack || fb
			for k, i := range part {
				results[i][j] = subRes[k][j]
			}
		}
		return stmts, keyed, fellBack
	}
	union := true
	if res, capRows, tried := r.fetchKeyed(ctx, qss, j); tried {
		stmts, keyed = 1, 1
		if ok(res, capRows) {
			return stmts, keyed, false
		}
		// A UNION ALL of the same rows would hold too many rows as well;
		// after an error, it is tried once the query is known to work.
		union = false
		if res.err != nil {
			results[0][j] = r.fetchQuery(ctx, q0)
			stmts++
			if err := results[0][j].err; err != nil {
				allErr(err)
				return stmts, keyed, true
			}
			union = true
		}
	}
	if union {
		text, args, branches := batchSQL(qss, j)
		capRows := branches * q0.limit()
		if q0.clock != "" {
			capRows++
		}
		stmts++
		if ok(r.fetch(ctx, text, capRows+1, args...), capRows) {
			return stmts, keyed, false
		}
	}
	// Rejected as a batch, or too many rows: the first operation alone
	// (unless that ran already). If the server rejects that too, the query
	// itself is broken (a missing table, a bad column: the text is the same
	// for every operation, only the bound values differ) and every
	// operation gets its error, as a single read would; otherwise one
	// statement per operation.
	if results[0][j].cols == nil {
		results[0][j] = r.fetchQuery(ctx, q0)
		stmts++
		if err := results[0][j].err; err != nil {
			allErr(err)
			return stmts, keyed, true
		}
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		q := qss[i][j]
		wg.Go(func() { results[i][j] = r.fetchQuery(ctx, q) })
	}
	wg.Wait()
	return stmts + n - 1, keyed, true
}

// batchSQL joins query j of every operation into one statement whose first
// column is the operation's ordinal (bound), ordered by it and by the
// query's own order columns when it has some. The statement has a power of
// two of branches, the last operation's repeated with ordinals past the
// batch (split drops their rows): a handful of statement texts per query,
// so that they stay in the prepared-statement cache.
func batchSQL(qss [][]query, j int) (string, []any, int) {
	q0 := qss[0][j]
	branches := 1
	for branches < len(qss) {
		branches *= 2
	}
	var sb strings.Builder
	args := make([]any, 0, branches*(1+len(q0.args)))
	for i := range branches {
		q := qss[min(i, len(qss)-1)][j]
		switch {
		case q.branch != "":
			if i > 0 {
				sb.WriteString(" UNION ALL ")
			}
			sb.WriteString(q.branch)
		case i == 0:
			sb.WriteString("SELECT ? AS opctl_op, b.* FROM (")
		default:
			sb.WriteString(" UNION ALL SELECT ?, b.* FROM (")
		}
		if q.branch == "" {
			sb.WriteString(q.text)
			sb.WriteString(") AS b")
		}
		args = append(args, int64(i))
		args = append(args, q.args...)
	}
	if q0.clock != "" {
		sb.WriteString(" UNION ALL ")
		sb.WriteString(q0.clock)
	}
	sb.WriteString(orderBy(q0.order))
	return sb.String(), args, branches
}

// split distributes the rows of a batched statement of query q to its
// operations, dropping the ordinal column and keeping at most q.limit()
// rows each: the first ones in the statement's order, or with q.sortLast
// the ones of the smallest last column. The clock row (ordinal -1) is the
// row of every operation that got none.
func split(res result, n int, q query, j int, results [][]result) {
	limit := q.limit()
	cols := res.cols[1:]
	// Each operation's result keeps its columns' types, as scan gives them
	// to a single read (LockRows tells DECIMAL columns by them).
	var types []string
	if len(res.types) > 0 {
		types = res.types[1:]
	}
	for i := range n {
		results[i][j] = result{cols: cols, types: types}
	}
	var clock []sources.Value
	for _, vals := range res.rows {
		op, ok := asInt64(vals[0])
		if ok && op == -1 {
			clock = vals[1:]
			continue
		}
		if !ok || op < 0 || op >= int64(n) {
			continue // padding (see batchSQL)
		}
		rr := &results[op][j]
		if len(rr.rows) < limit || q.sortLast {
			rr.rows = append(rr.rows, vals[1:])
		}
	}
	if q.sortLast {
		for i := range n {
			rr := &results[i][j]
			slices.SortStableFunc(rr.rows, func(a, b []sources.Value) int {
				x, _ := asInt64(a[len(a)-1])
				y, _ := asInt64(b[len(b)-1])
				return cmp.Compare(x, y)
			})
			if len(rr.rows) > limit {
				rr.rows = rr.rows[:limit]
			}
		}
	}
	if clock != nil {
		for i := range n {
			if rr := &results[i][j]; len(rr.rows) == 0 {
				rr.rows = [][]sources.Value{clock}
			}
		}
	}
}

// fetchKeyed runs query j of every operation as its keyed form, one
// statement whose text does not depend on the batch
// (docs/reconcile.md#how-the-work-is-bounded), and returns its result and
// the rows the batch may keep. It is not tried (tried false; the caller
// reads the batch as a UNION ALL) when the server's keys would not compare
// as bound values do (keyedOK), when the query has no keyed form or the
// server rejected that form before, and when a key is not valid UTF-8
// (JSON could not carry it unchanged). A keyed text the server rejects is
// not tried again by this Reader.
func (r *Reader) fetchKeyed(ctx context.Context, qss [][]query, j int) (res result, capRows int, tried bool) {
	q0 := qss[0][j]
	if !r.keyable(ctx, q0) {
		return result{}, 0, false
	}
	keys := make([]string, len(qss))
	for i, qs := range qss {
		k, ok := qs[j].args[0].(string)
		if !ok || !plainKey(k) {
			return result{}, 0, false
		}
		keys[i] = k
	}
	text := q0.keyed
	doc, err := json.Marshal(keys)
	if err != nil {
		return result{}, 0, false
	}
	if q0.clock != "" {
		text += " UNION ALL " + q0.clock
	}
	text += orderBy(q0.order)
	capRows = len(qss) * q0.limit()
	if q0.clock != "" {
		capRows++
	}
	res = r.fetch(ctx, text, capRows+1, append([]any{string(doc)}, q0.args[1:]...)...)
	if res.err != nil && !isConnError(res.err) && ctx.Err() == nil {
		r.mu.Lock()
		if r.unkeyed == nil {
			r.unkeyed = map[string]bool{}
		}
		r.unkeyed[q0.keyed] = true
		r.mu.Unlock()
	}
	return res, capRows, true
}

// keyable reports whether query q may be read in its keyed form: it has
// one, the server reads keyed forms (keyedOK) and has not rejected this
// one.
func (r *Reader) keyable(ctx context.Context, q query) bool {
	if q.keyed == "" || len(q.args) == 0 || !r.keyedOK(ctx) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.unkeyed[q.keyed]
}

// plainKey reports whether the keyed form carries key k exactly as a bound
// value: ASCII without NUL. A key with other characters compares as a bound
// one only where the column's character set holds them (a bound '工单-1'
// against a latin1 column is an error, the same key from JSON no match), so
// such keys are read with UNION ALL branches that bind them.
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		if k[i] == 0 || k[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// splitPlain splits the operations of a batch by their key (the first
// argument of query j): those plainKey accepts, and the others.
func splitPlain(qss [][]query, j int) (plain, other []int) {
	for i, qs := range qss {
		if k, ok := qs[j].args[0].(string); ok && plainKey(k) {
			plain = append(plain, i)
		} else {
			other = append(other, i)
		}
	}
	return plain, other
}

// orderBy orders a batched statement by the operation's ordinal (its first
// column), then by the query's own order columns (1-based positions in the
// query's select list).
func orderBy(order []int) string {
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" ORDER BY 1")
	for _, pos := range order {
		b.WriteString(", ")
		b.WriteString(strconv.Itoa(pos + 1))
	}
	return b.String()
}

// keyedProbe is a key that JSON escapes in every way a biz_id might need:
// quotes, a backslash, <, > and & (which Go writes as \u003c ...), and
// multibyte letters.
const keyedProbe = `O'Re"il\-<&>-工单-é`

// keyedOK reports, once per Reader, whether the server reads the keyed form
// of a batch: JSON_TABLE exists (MySQL 8.0.4, MariaDB 10.6) and a key from
// it is the same string, with the same coercibility, as the same key bound
// to a ? (then a column's collation decides each comparison as it does for
// the bound biz_id). Anything else, an error included, leaves the batches
// to UNION ALL.
func (r *Reader) keyedOK(ctx context.Context) bool {
	if r.unionOnly {
		return false
	}
	r.keyedOnce.Do(func() {
		doc, err := json.Marshal([]string{keyedProbe})
		if err != nil {
			return
		}
		q := "SELECT COERCIBILITY(" + keyedKey + ") = COERCIBILITY(?), HEX(" + keyedKey + ") = HEX(?) FROM " + keyedFrom
		res := r.fetch(ctx, q, 2, keyedProbe, keyedProbe, string(doc))
		if res.err != nil || len(res.rows) != 1 || len(res.rows[0]) != 2 {
			return
		}
		a, ok1 := asInt64(res.rows[0][0])
		b, ok2 := asInt64(res.rows[0][1])
		r.keyed = ok1 && ok2 && a == 1 && b == 1
	})
	return r.keyed
}
