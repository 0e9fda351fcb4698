package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
)

// sweepLimits returns the conditions and arguments of s's Lo and Hi on the
// quoted key column k.
func sweepLimits(s Sweep, k string) ([]string, []any) {
	var conds []string
	var args []any
	if s.Lo.Set {
		conds = append(conds, k+" >= ?")
		args = append(args, s.Lo.Value)
	}
	if s.Hi.Set {
		conds = append(conds, k+" <= ?")
		args = append(args, s.Hi.Value)
	}
	return conds, args
}

// sweepKeeps reports whether key belongs to the sweep's shard.
func sweepKeeps(s Sweep, key []byte) bool {
	return s.Shards <= 1 || int(crc32.ChecksumIEEE(key)%uint32(s.Shards)) == s.Shard
}

// sweepSQL builds one page of s: the distinct keys in (after, upTo], at
// most limit of them, with their row counts. GROUP BY over the index in
// its order emits a group only once it is complete, so the last key of a
// page holds all its rows, and the next page starts after it (after every
// spelling the collation makes equal to it).
func sweepSQL(s Sweep, after, upTo Bound, limit int) (string, []any, error) {
	t, err := qident(s.Table)
	if err != nil {
		return "", nil, err
	}
	k, err := qident(s.KeyCol)
	if err != nil {
		return "", nil, err
	}
	if limit <= 0 {
		return "", nil, errors.New("mysql: sweep with a non-positive limit")
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "SELECT %s, COUNT(*) FROM %s", k, t)
	if s.Index != "" {
		ix, err := qident(s.Index)
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&sb, " FORCE INDEX (%s)", ix)
	}
	conds, args := sweepLimits(s, k)
	if after.Set {
		conds = append(conds, k+" > ?")
		args = append(args, after.Value)
	}
	if upTo.Set {
		conds = append(conds, k+" <= ?")
		args = append(args, upTo.Value)
	}
	if len(conds) > 0 {
		sb.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	fmt.Fprintf(&sb, " GROUP BY %s ORDER BY %s LIMIT %d", k, k, limit)
	return sb.String(), args, nil
}

// SweepPage reads the next page of at most limit distinct keys of s in
// (after, upTo] (an unset bound is open), in index order, calling each
// with every key of the shard as stored and its row count (key is valid only during
// the call: the page's keys are not kept). One autocommit statement that
// reads the index entries of those keys and returns one row per key.
func (r *Reader) SweepPage(ctx context.Context, s Sweep, after, upTo Bound, limit int, each func(key []byte, rows int64)) (SweepEnd, error) {
	var end SweepEnd
	text, args, err := sweepSQL(s, after, upTo, limit)
	if err != nil {
		return end, err
	}
	rows, done, err := r.query(ctx, text, args...)
	if err != nil {
		return end, r.queryError("sweep "+s.Table, err)
	}
	defer done()
	types, err := rows.ColumnTypes()
	if err != nil {
		return end, r.queryError("sweep "+s.Table, err)
	}
	dbType := types[0].DatabaseTypeName()
	var raw sql.RawBytes
	var last []byte
	for rows.Next() {
		var n int64
		if err := rows.Scan(&raw, &n); err != nil {
			return end, r.queryError("sweep "+s.Table, err)
		}
		if each != nil && sweepKeeps(s, raw) {
			each(raw, n)
		}
		end.Keys++
		end.Rows += n
		last = append(last[:0], raw...)
	}
	if err := rows.Err(); err != nil {
		return end, r.queryError("sweep "+s.Table, err)
	}
	if end.Keys > 0 {
		end.Last = KeyCount{Key: string(last), Value: keysetValue(dbType, last)}
	}
	return end, nil
}

// KeysSince returns which of keys have a row in table whose timeCol is at
// or after from, each under the spelling it was asked by: under a case- or
// accent-insensitive collation the row in the window may be spelled
// otherwise (pay-1 for the PAY-1 a sweep names). ASCII keys are joined with
// the table (keyedFrom) in one statement; otherwise each key is looked up
// alone (a sweep asks for the few keys of a page that have duplicates).
// Served by an index that starts with keyCol.
func (r *Reader) KeysSince(ctx context.Context, table, keyCol, timeCol string, from time.Time, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(keys) == 0 {
		return out, nil
	}
	t, err := qident(table)
	if err != nil {
		return nil, err
	}
	k, err := qident(keyCol)
	if err != nil {
		return nil, err
	}
	c, err := qident(timeCol)
	if err != nil {
		return nil, err
	}
	what := "keys of " + table + " since " + from.Format(time.DateTime)
	if r.keyedOK(ctx) && allPlain(keys) {
		doc, err := json.Marshal(keys)
		if err != nil {
			return nil, err
		}
		text := fmt.Sprintf("SELECT DISTINCT opctl_ids.opctl_n FROM %s JOIN %s ON %s.%s = %s WHERE %s.%s >= ?",
			keyedFrom, t, t, k, keyedKey, t, c)
		rows, done, err := r.query(ctx, text, string(doc), from)
		if err != nil {
			return nil, r.queryError(what, err)
		}
		defer done()
		for rows.Next() {
			var n int64
			if err := rows.Scan(&n); err != nil {
				return nil, r.queryError(what, err)
			}
			if n >= 1 && n <= int64(len(keys)) {
				out[keys[n-1]] = true
			}
		}
		if err := rows.Err(); err != nil {
			return nil, r.queryError(what, err)
		}
		return out, nil
	}
	text := fmt.Sprintf("SELECT 1 FROM %s WHERE %s = ? AND %s >= ? LIMIT 1", t, k, c)
	for _, key := range keys {
		var one int
		switch err := r.query1(ctx, text, &one, key, from); {
		case err == nil:
			out[key] = true
		case errors.Is(err, sql.ErrNoRows):
		default:
			return nil, r.queryError(what, err)
		}
	}
	return out, nil
}

// RangeRows estimates how many rows of table have col >= from, from the
// optimizer's estimate for that range of index (EXPLAIN: index dives, no
// row read). ok is false when the server gives no estimate it can read
// (go-mysql-server cannot EXPLAIN a bound statement); err is set only when
// ctx ended.
func (r *Reader) RangeRows(ctx context.Context, table, index, col string, from time.Time) (n int64, ok bool, err error) {
	return r.explainRange(ctx, table, index, col, ">= ?", from)
}

// StatusRangeRows estimates, as RangeRows does, how many rows of table
// have statusCol = status and col in [from, to) through index (whose
// leading columns are statusCol, col): the range a walk of one status
// reads (reconcile's cover, docs/reconcile.md#steps-without-a-scan-block).
func (r *Reader) StatusRangeRows(ctx context.Context, table, index, statusCol, status, col string, from, to time.Time) (n int64, ok bool, err error) {
	c, err := qident(col)
	if err != nil {
		return 0, false, err
	}
	return r.explainRange(ctx, table, index, statusCol, "= ? AND "+c+" >= ? AND "+c+" < ?", status, from, to)
}

// KeyRangeRows estimates, as RangeRows does, how many entries of index
// (whose leading column is col) have col in [lo, hi].
func (r *Reader) KeyRangeRows(ctx context.Context, table, index, col string, lo, hi any) (n int64, ok bool, err error) {
	return r.explainRange(ctx, table, index, col, "BETWEEN ? AND ?", lo, hi)
}

// explainRange is the optimizer's row estimate of SELECT col FROM table
// FORCE INDEX (index) WHERE col <cond>.
func (r *Reader) explainRange(ctx context.Context, table, index, col, cond string, args ...any) (n int64, ok bool, err error) {
	q, err := qidents(table, col, index)
	if err != nil {
		return 0, false, err
	}
	t, c, ix := q[0], q[1], q[2]
	rows, err := r.db.QueryContext(ctx, fmt.Sprintf("EXPLAIN SELECT %s FROM %s FORCE INDEX (%s) WHERE %s %s", c, t, ix, c, cond), args...)
	if err != nil {
		if ctx.Err() != nil {
			return 0, false, r.queryError("estimate rows of "+table, err)
		}
		// An estimate only chooses the faster path: a server that cannot
		// EXPLAIN a bound statement (go-mysql-server) gives none, and a
		// broken connection is met by the walk that follows.
		return 0, false, nil
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return 0, false, r.queryError("estimate rows of "+table, err)
	}
	at := -1
	for i, name := range cols {
		if strings.EqualFold(name, "rows") {
			at = i
		}
	}
	if at < 0 {
		return 0, false, nil
	}
	vals := make([]sql.RawBytes, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if !rows.Next() {
		return 0, false, rows.Err()
	}
	if err := rows.Scan(ptrs...); err != nil {
		return 0, false, r.queryError("estimate rows of "+table, err)
	}
	v, perr := strconv.ParseInt(string(vals[at]), 10, 64)
	if perr != nil {
		return 0, false, nil
	}
	return v, true, nil
}

// WindowKeys reads, through index (whose leading column is timeCol), the
// rows of table with timeCol in [from, to) (to zero: no upper end) and
// returns their least and greatest keyCol under the column's collation,
// as stored, and how many rows it read. rows is 0 (and lo, hi unset) when
// the range holds none. One statement that returns one row.
func (r *Reader) WindowKeys(ctx context.Context, table, index, keyCol, timeCol string, from, to time.Time) (lo, hi KeyCount, rows int64, err error) {
	q, err := qidents(table, keyCol, timeCol, index)
	if err != nil {
		return lo, hi, 0, err
	}
	t, k, c, ix := q[0], q[1], q[2], q[3]
	text := fmt.Sprintf("SELECT MIN(%s), MAX(%s), COUNT(*) FROM %s FORCE INDEX (%s) WHERE %s >= ?", k, k, t, ix, c)
	args := []any{from}
	if !to.IsZero() {
		text += " AND " + c + " < ?"
		args = append(args, to)
	}
	return r.extent(ctx, "key range of "+table+" since "+from.Format(time.DateTime), text, args...)
}

// extent runs text, a SELECT MIN(key), MAX(key), COUNT(*) of one row,
// and returns the two keys as stored (unset when the count is 0) and the
// count.
func (r *Reader) extent(ctx context.Context, what, text string, args ...any) (lo, hi KeyCount, rows int64, err error) {
	res, done, err := r.query(ctx, text, args...)
	if err != nil {
		return lo, hi, 0, r.queryError(what, err)
	}
	defer done()
	types, err := res.ColumnTypes()
	if err != nil {
		return lo, hi, 0, r.queryError(what, err)
	}
	if !res.Next() {
		return lo, hi, 0, r.queryError(what, errors.Join(res.Err(), errors.New("no row")))
	}
	var l, h sql.RawBytes
	if err := res.Scan(&l, &h, &rows); err != nil {
		return lo, hi, 0, r.queryError(what, err)
	}
	if rows == 0 || l == nil || h == nil {
		return lo, hi, 0, res.Err()
	}
	db := types[0].DatabaseTypeName()
	lo = KeyCount{Key: string(l), Value: keysetValue(db, []byte(l))}
	hi = KeyCount{Key: string(h), Value: keysetValue(db, []byte(h))}
	return lo, hi, rows, res.Err()
}

// KeysExtent returns the least and the greatest of keys (stored values
// of keyCol, as WindowKeys returns them) under the column's collation:
// one statement of an index dive per key through index (whose leading
// column is keyCol).
func (r *Reader) KeysExtent(ctx context.Context, table, index, keyCol string, keys []KeyCount) (lo, hi KeyCount, err error) {
	if len(keys) == 0 {
		return lo, hi, errors.New("mysql: the extent of no keys")
	}
	q, err := qidents(table, keyCol, index)
	if err != nil {
		return lo, hi, err
	}
	t, k, ix := q[0], q[1], q[2]
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(keys)), ", ")
	args := make([]any, len(keys))
	for i, key := range keys {
		args[i] = key.Value
	}
	text := fmt.Sprintf("SELECT MIN(%s), MAX(%s), COUNT(*) FROM %s FORCE INDEX (%s) WHERE %s IN (%s)", k, k, t, ix, k, marks)
	lo, hi, rows, err := r.extent(ctx, "key range of "+table, text, args...)
	if err == nil && rows == 0 {
		err = fmt.Errorf("mysql: key range of %s: none of the keys is stored", table)
	}
	return lo, hi, err
}

// MaxSweepBounds caps the samples of SweepBounds (one placeholder each).
const MaxSweepBounds = 4096

// SweepBounds samples s's table for page boundaries of a sweep: the keys
// of the rows at n evenly spaced values of its integer primary key pk
// (two statements: MIN and MAX of pk, then one of n index dives),
// distinct and in the key index's order, as stored. Rows sampled evenly
// put about rows/n index entries between two neighbouring keys, whatever
// the keys look like. nil (and no error) when pk is not an integer or the
// table is empty: the sweep then pages by SweepMulti.
func (r *Reader) SweepBounds(ctx context.Context, s Sweep, pk string, n int) ([]KeyCount, error) {
	if n < 1 {
		return nil, nil
	}
	n = min(n, MaxSweepBounds)
	q, err := qidents(s.Table, s.KeyCol, pk)
	if err != nil {
		return nil, err
	}
	t, k, p := q[0], q[1], q[2]
	what := "sample keys of " + s.Table
	rows, done, err := r.query(ctx, fmt.Sprintf("SELECT MIN(%s), MAX(%s) FROM %s", p, p, t))
	if err != nil {
		return nil, r.queryError(what, err)
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		done()
		return nil, r.queryError(what, err)
	}
	var lo, hi sql.NullInt64
	var scanErr error
	if rows.Next() {
		scanErr = rows.Scan(&lo, &hi)
	}
	err = errors.Join(rows.Err(), scanErr)
	done()
	if !strings.Contains(types[0].DatabaseTypeName(), "INT") || err != nil || !lo.Valid || !hi.Valid || hi.Int64 <= lo.Int64 {
		// Not an integer (a string or an out-of-range unsigned key
		// fails the scan), or nothing to sample.
		return nil, nil
	}
	// In floating point: hi - lo may not fit an int64.
	step := (float64(hi.Int64) - float64(lo.Int64)) / float64(n)
	args := make([]any, 0, n)
	for i := 1; i < n; i++ {
		v := min(hi.Int64, max(lo.Int64, int64(float64(lo.Int64)+step*float64(i))))
		if len(args) == 0 || v != args[len(args)-1].(int64) {
			args = append(args, v)
		}
	}
	if len(args) == 0 {
		return nil, nil
	}
	marks := strings.TrimSuffix(strings.Repeat("?, ", len(args)), ", ")
	text := fmt.Sprintf("SELECT DISTINCT %s FROM %s WHERE %s IN (%s) AND %s IS NOT NULL ORDER BY %s", k, t, p, marks, k, k)
	res, done, err := r.query(ctx, text, args...)
	if err != nil {
		return nil, r.queryError(what, err)
	}
	defer done()
	ktypes, err := res.ColumnTypes()
	if err != nil {
		return nil, r.queryError(what, err)
	}
	db := ktypes[0].DatabaseTypeName()
	var out []KeyCount
	var raw sql.RawBytes
	for res.Next() {
		if err := res.Scan(&raw); err != nil {
			return nil, r.queryError(what, err)
		}
		out = append(out, KeyCount{Key: string(raw), Value: keysetValue(db, []byte(raw))})
	}
	if err := res.Err(); err != nil {
		return nil, r.queryError(what, err)
	}
	return out, nil
}

// pageFrom returns the quoted key column of s, its FROM (with the forced
// index) and the WHERE of a duplicates page after after (keys not NULL,
// within Lo and Hi), with its arguments.
func pageFrom(s Sweep, after Bound) (k, from, cond string, args []any, err error) {
	q, err := qidents(s.Table, s.KeyCol)
	if err != nil {
		return "", "", "", nil, err
	}
	k, from = q[1], q[0]
	if s.Index != "" {
		ix, err := qident(s.Index)
		if err != nil {
			return "", "", "", nil, err
		}
		from += " FORCE INDEX (" + ix + ")"
	}
	cond = k + " IS NOT NULL"
	lims, args := sweepLimits(s, k)
	for _, c := range lims {
		cond += " AND " + c
	}
	if after.Set {
		cond += " AND " + k + " > ?"
		args = append(args, after.Value)
	}
	return k, from, cond, args, nil
}

// SweepRange reads one page of a duplicates sweep of s whose bounds are
// known (SweepBounds): the keys in (after, upTo] (unset: open) that hold
// more than one row, as stored, of s's shard; end.Rows is the index
// entries the page holds (WITH ROLLUP: the server
// counts them, and only the duplicates and that count come back; a page
// of one entry counts 0). One statement, one read of each entry.
func (r *Reader) SweepRange(ctx context.Context, s Sweep, after, upTo Bound) ([]string, SweepEnd, error) {
	var end SweepEnd
	k, from, cond, args, err := pageFrom(s, after)
	if err != nil {
		return nil, end, err
	}
	if upTo.Set {
		cond += " AND " + k + " <= ?"
		args = append(args, upTo.Value)
	}
	what := "sweep " + s.Table
	group := fmt.Sprintf("SELECT %s, COUNT(*) FROM %s WHERE %s GROUP BY %s", k, from, cond, k)
	if !r.noRollup.Load() {
		hits, end, err := r.sweepGroups(ctx, s, group+" WITH ROLLUP HAVING COUNT(*) > 1", args)
		if err == nil {
			return hits, end, nil
		}
		var me *gomysql.MySQLError
		if ctx.Err() != nil || !errors.As(err, &me) || isConnError(err) {
			return nil, end, r.queryError(what, err)
		}
		// A server without WITH ROLLUP (go-mysql-server): the page is
		// counted by a statement of its own.
		r.noRollup.Store(true)
	}
	hits, end, err := r.sweepGroups(ctx, s, group+" HAVING COUNT(*) > 1", args)
	if err == nil {
		err = r.query1(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s", from, cond), &end.Rows, args...)
	}
	if err != nil {
		return nil, end, r.queryError(what, err)
	}
	return hits, end, nil
}

// sweepGroups runs text, a duplicates page of s grouped by key (with a
// rollup row, whose key is NULL, when the server gives one), and returns
// the keys of s's shard and the rollup row's count.
// Errors are the driver's, unwrapped.
func (r *Reader) sweepGroups(ctx context.Context, s Sweep, text string, args []any) ([]string, SweepEnd, error) {
	var end SweepEnd
	rows, done, err := r.query(ctx, text, args...)
	if err != nil {
		return nil, end, err
	}
	defer done()
	var hits []string
	var key sql.RawBytes
	for rows.Next() {
		var c int64
		if err := rows.Scan(&key, &c); err != nil {
			return nil, end, err
		}
		if key == nil {
			// The rollup row: the page's entries (returned when more
			// than one).
			end.Rows = c
			continue
		}
		if sweepKeeps(s, key) {
			hits = append(hits, string(key))
		}
	}
	return hits, end, rows.Err()
}

// SweepMulti reads the next page of a duplicates sweep of s after after:
// the index entries up to the n-th one past after (one statement that
// returns that entry's key: the page's last, hi), then the keys of (after,
// hi] that hold more than one row (SweepRange of that range: one GROUP BY
// ... HAVING COUNT(*) > 1, which returns only those). Every row of hi's key lies in
// the range, so the next page starts after it. The last page (fewer than n
// entries left) runs to the end of the index. end.Rows counts the entries
// read by the first statement (the second reads the same range; on the
// last page, one COUNT(*) over what is left); end.Keys is n for a full
// page, 0 for the last.
func (r *Reader) SweepMulti(ctx context.Context, s Sweep, after Bound, n int) ([]string, SweepEnd, error) {
	var end SweepEnd
	if n <= 0 {
		return nil, end, errors.New("mysql: sweep with a non-positive page")
	}
	k, from, cond, args, err := pageFrom(s, after)
	if err != nil {
		return nil, end, err
	}
	what := "sweep " + s.Table
	// The page's last key: the n-th entry, or none on the last page.
	rows, done, err := r.query(ctx, fmt.Sprintf("SELECT %s FROM %s WHERE %s ORDER BY %s LIMIT 1 OFFSET %d", k, from, cond, k, n-1), args...)
	if err != nil {
		return nil, end, r.queryError(what, err)
	}
	types, err := rows.ColumnTypes()
	if err != nil {
		done()
		return nil, end, r.queryError(what, err)
	}
	var hi sql.RawBytes
	full := rows.Next()
	if full {
		if err := rows.Scan(&hi); err != nil {
			done()
			return nil, end, r.queryError(what, err)
		}
		end.Keys, end.Rows = n, int64(n)
		end.Last = KeyCount{Key: string(hi), Value: keysetValue(types[0].DatabaseTypeName(), []byte(hi))}
	}
	err = rows.Err()
	done()
	if err != nil {
		return nil, end, r.queryError(what, err)
	}
	if !full {
		// The entries left, fewer than n.
		if err := r.db.QueryRowContext(ctx, fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s", from, cond), args...).Scan(&end.Rows); err != nil {
			return nil, end, r.queryError(what, err)
		}
	}
	var upTo Bound
	if full {
		upTo = Bound{Set: true, Value: end.Last.Value}
	}
	hits, _, err := r.SweepRange(ctx, s, after, upTo)
	return hits, end, err
}
