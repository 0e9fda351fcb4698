package mysql

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// MaxBatch bounds the operations of one ReadOperations call: each batched
// statement binds one or two values per operation, and its rows are held
// until the statement ends.
const MaxBatch = 512

// BatchStats describes the statements of a Reader's ReadOperations calls so
// far (reconcile reports them; tests check the batching).
type BatchStats struct {
	// Batches is the number of ReadOperations calls, Operations the
	// operations they read.
	Batches, Operations int
	// Statements is the number of statements they executed; Fallbacks the
	// batched statements the server rejected, whose query was then run once
	// per operation (Statements counts those too).
	Statements, Fallbacks int
}

// ReadOperations reads the operations bizIDs of pipeline p, as ReadOperation
// reads one, with one statement per query for the whole batch instead of
// one per operation: the per-operation statements are joined with UNION ALL
// into
//
//	SELECT ? AS opctl_op, b.* FROM (<query>) AS b UNION ALL SELECT ?, b.* FROM (<query>) AS b ...
//
// each branch binding its operation's ordinal and its values, so the rows of
// every operation come back tagged with it whatever the collation of the
// key. opctl's own queries (state, idempotency, audit) are written as plain
// branches ("SELECT ? AS opctl_op, cols FROM t WHERE key = ?"), ordered once
// for the whole batch, which costs the server less than derived tables.
//
// The configured evidence, intent and entity snippets are run as they are,
// with bound values only, so evs[i] and errs[i] are what
// ReadOperation(bizIDs[i]) returns, with two differences: the rows of a
// snippet come in the order the server returns them for the batch (a
// snippet's ORDER BY without LIMIT may not survive in a derived table;
// opctl's own queries keep their order), and all operations of a batch
// share one database clock.
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
	if p == nil {
		return nil, nil, errors.New("mysql: ReadOperations: nil pipeline")
	}
	if len(bizIDs) > MaxBatch {
		return nil, nil, fmt.Errorf("mysql: ReadOperations: %d operations, at most %d per batch", len(bizIDs), MaxBatch)
	}
	n := len(bizIDs)
	if n == 0 {
		return nil, nil, nil
	}
	qss := make([][]query, n)
	for i, id := range bizIDs {
		qs, err := buildQueries(p, auditTable, id)
		if err != nil {
			return nil, nil, err
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
	for j := range slots {
		wg.Go(func() {
			stmts, fellBack := r.fetchBatch(ctx, qss, j, results)
			mu.Lock()
			stats.Statements += stmts
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
// results[i][j]. It returns the statements it executed and whether it had
// to fall back to one statement per operation.
func (r *Reader) fetchBatch(ctx context.Context, qss [][]query, j int, results [][]result) (int, bool) {
	q0 := qss[0][j]
	n := len(qss)
	if len(q0.args) == 0 {
		// The same statement for every operation (the clock alone): once.
		res := r.fetch(ctx, q0.text, q0.limit())
		for i := range n {
			results[i][j] = res
		}
		return 1, false
	}
	if n == 1 {
		results[0][j] = r.fetch(ctx, q0.text, q0.limit(), q0.args...)
		return 1, false
	}
	text, args, branches := batchSQL(qss, j)
	// One row more than the branches may keep: when it comes, some
	// operation has more rows than it keeps and the ones after it might
	// have been cut off, so the batch is not used.
	capRows := branches * q0.limit()
	if q0.clock != "" {
		capRows++
	}
	res := r.fetch(ctx, text, capRows+1, args...)
	if res.err == nil && len(res.rows) <= capRows {
		split(res, n, q0.limit(), j, results)
		return 1, false
	}
	if res.err != nil && isConnError(res.err) {
		for i := range n {
			results[i][j] = result{err: res.err}
		}
		return 1, false
	}
	// Rejected as a batch, or too many rows: the first operation alone. If
	// the server rejects that too, the query itself is broken (a missing
	// table, a bad column: the text is the same for every operation, only
	// the bound values differ) and every operation gets its error, as a
	// single read would; otherwise one statement per operation.
	results[0][j] = r.fetch(ctx, q0.text, q0.limit(), q0.args...)
	if err := results[0][j].err; err != nil {
		for i := 1; i < n; i++ {
			results[i][j] = result{err: err}
		}
		return 2, true
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		q := qss[i][j]
		wg.Go(func() { results[i][j] = r.fetch(ctx, q.text, q.limit(), q.args...) })
	}
	wg.Wait()
	return 1 + n, true
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
	if len(q0.order) > 0 {
		sb.WriteString(" ORDER BY 1")
		for _, pos := range q0.order {
			sb.WriteString(", ")
			sb.WriteString(strconv.Itoa(pos + 1))
		}
	}
	return sb.String(), args, branches
}

// split distributes the rows of a batched statement to its operations,
// dropping the ordinal column and keeping at most limit rows each. The
// clock row (ordinal -1) is the row of every operation that got none.
func split(res result, n, limit, j int, results [][]result) {
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
		if len(rr.rows) < limit {
			rr.rows = append(rr.rows, vals[1:])
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
