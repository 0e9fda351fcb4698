package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// This file holds the table-level reads of `opctl reconcile` and `opctl
// schema`: keyset-paginated index walks, batched key lookups and index
// introspection. Every identifier goes through config.QuoteIdent after a
// config.ValidIdent check; every value is bound.

// qident checks and quotes an identifier.
func qident(id string) (string, error) {
	if !config.ValidIdent(id) {
		return "", fmt.Errorf("mysql: invalid identifier %q", id)
	}
	return config.QuoteIdent(id), nil
}

// qidents quotes each of ids as qident does.
func qidents(ids ...string) ([]string, error) {
	out := make([]string, len(ids))
	for i, id := range ids {
		q, err := qident(id)
		if err != nil {
			return nil, err
		}
		out[i] = q
	}
	return out, nil
}

// walkSQL builds the statement of one page and its arguments. The select
// list is the keyset columns, then KeyCol and ExtraCol (a column named
// twice is selected twice). After a cursor, the rows past it in keyset
// order are written as a disjunction, (k1 > v1) OR (k1 = v1 AND k2 > v2)
// OR ..., so that the range optimizer builds exact intervals on the index;
// a NULL value compares as the index orders it (first): k = NULL is
// k IS NULL, k > NULL is k IS NOT NULL.
func walkSQL(w Walk, after Cursor, limit int) (string, []any, error) {
	var bad error
	q := func(id string) string {
		s, err := qident(id)
		if err != nil && bad == nil {
			bad = err
		}
		return s
	}
	if w.KeyCol == "" {
		return "", nil, errors.New("mysql: walk without a key column")
	}
	if limit <= 0 {
		return "", nil, errors.New("mysql: walk with a non-positive limit")
	}
	ks := w.Keyset()
	if after.Set && len(after.Values) != len(ks) {
		return "", nil, fmt.Errorf("mysql: walk of %s: cursor has %d values for %d keyset columns", w.Table, len(after.Values), len(ks))
	}
	qks := make([]string, len(ks))
	for i, c := range ks {
		qks[i] = q(c)
	}
	cols := append(slices.Clone(qks), q(w.KeyCol))
	if w.ExtraCol != "" {
		cols = append(cols, q(w.ExtraCol))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "SELECT %s FROM %s", strings.Join(cols, ", "), q(w.Table))
	if w.Index != "" {
		fmt.Fprintf(&sb, " FORCE INDEX (%s)", q(w.Index))
	}
	var conds []string
	var args []any
	if w.EqCol != "" {
		conds = append(conds, q(w.EqCol)+" = ?")
		args = append(args, w.EqVal)
	}
	if w.PosCol != "" {
		pos := q(w.PosCol)
		if w.From != nil {
			conds = append(conds, pos+" >= ?")
			args = append(args, w.From)
		}
		if w.To != nil {
			conds = append(conds, pos+" < ?")
			args = append(args, w.To)
		}
	}
	if after.Set {
		var terms []string
		for k := range qks {
			var parts []string
			for j := range k {
				if after.Values[j] == nil {
					parts = append(parts, qks[j]+" IS NULL")
				} else {
					parts = append(parts, qks[j]+" = ?")
					args = append(args, after.Values[j])
				}
			}
			if after.Values[k] == nil {
				parts = append(parts, qks[k]+" IS NOT NULL")
			} else {
				parts = append(parts, qks[k]+" > ?")
				args = append(args, after.Values[k])
			}
			terms = append(terms, "("+strings.Join(parts, " AND ")+")")
		}
		conds = append(conds, "("+strings.Join(terms, " OR ")+")")
	}
	if w.Shards > 1 {
		conds = append(conds, "MOD(CRC32("+q(w.KeyCol)+"), ?) = ?")
		args = append(args, w.Shards, w.Shard)
	}
	if len(conds) > 0 {
		sb.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	fmt.Fprintf(&sb, " ORDER BY %s LIMIT %d", strings.Join(qks, ", "), limit)
	if bad != nil {
		return "", nil, bad
	}
	return sb.String(), args, nil
}

// WalkPage reads the next page of at most limit rows of w after the cursor.
// Each page is one autocommit statement: no transaction stays open between
// pages, and the rows are closed before it returns.
func (r *Reader) WalkPage(ctx context.Context, w Walk, after Cursor, limit int) ([]WalkRow, error) {
	text, args, err := walkSQL(w, after, limit)
	if err != nil {
		return nil, err
	}
	rows, done, err := r.query(ctx, text, args...)
	if err != nil {
		return nil, r.queryError("walk "+w.Table, err)
	}
	defer done()
	types, err := rows.ColumnTypes()
	if err != nil {
		return nil, r.queryError("walk "+w.Table, err)
	}
	n := len(types)
	nk := len(w.Keyset())
	raw := make([]any, n)
	ptrs := make([]any, n)
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	out := make([]WalkRow, 0, limit)
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, r.queryError("walk "+w.Table, err)
		}
		row := WalkRow{Keyset: make([]any, nk)}
		for i := range nk {
			row.Keyset[i] = keysetValue(types[i].DatabaseTypeName(), raw[i])
		}
		if w.PosCol != "" {
			row.Pos = convertValue(types[0].DatabaseTypeName(), raw[0])
		}
		row.Key = asString(convertValue(types[nk].DatabaseTypeName(), raw[nk]))
		if w.ExtraCol != "" {
			row.Extra = asString(convertValue(types[nk+1].DatabaseTypeName(), raw[nk+1]))
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, r.queryError("walk "+w.Table, err)
	}
	return out, nil
}

// keysetValue is a keyset column's value as the next page binds it: text
// as a string (compared in the column's collation, as the index orders
// it), binary strings as bytes, integers, times and decimals as
// convertValue reads them, an unsigned BIGINT as it came.
func keysetValue(dbType string, v any) any {
	switch v := v.(type) {
	case uint64:
		return v
	case []byte:
		if strings.Contains(dbType, "BINARY") || strings.Contains(dbType, "BLOB") {
			return slices.Clone(v)
		}
	}
	return convertValue(dbType, v)
}

// queryError wraps a statement error with what was read, scrubbing the
// password; a connection-level failure becomes a *ConnError.
func (r *Reader) queryError(what string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("mysql %s: %s: %w", r.addr, what, err)
	}
	if isConnError(err) {
		return r.connError(err)
	}
	return fmt.Errorf("mysql %s: %s: %s", r.addr, what, scrub(err.Error(), r.passwd))
}

// inList returns "?, ?, ..." and the keys as arguments, padded with the
// last key to a power of two (a repeated value changes nothing in an IN
// list): a few statement texts per lookup, so that they stay prepared.
func inList(keys []string) (string, []any) {
	n := 1
	for n < len(keys) {
		n *= 2
	}
	args := make([]any, n)
	for i := range args {
		args[i] = keys[min(i, len(keys)-1)]
	}
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", "), args
}

// MultiRowKeys returns, among keys, those that have more than one row in
// table (matched on keyCol), with their row counts. One statement, served
// by an index that starts with keyCol.
func (r *Reader) MultiRowKeys(ctx context.Context, table, keyCol string, keys []string) (map[string]int64, error) {
	out := map[string]int64{}
	err := r.byKeys(ctx, "count keys of "+table, table, keyCol, nil, keys,
		"SELECT {k}, COUNT(*) FROM {t} WHERE {k} IN ({list}) GROUP BY {k} HAVING COUNT(*) > 1",
		// Keyed: a row per key of the list, with its rows counted as the
		// key alone would count them and named, as the IN list names its
		// groups, by one of their stored spellings (keys that are equal
		// under the column's collation give the same row).
		"SELECT MIN({t}.{k}), COUNT(*) FROM {jt} JOIN {t} ON {t}.{k} = {key} GROUP BY opctl_ids.opctl_n HAVING COUNT(*) > 1",
		func(rows *sql.Rows) error {
			var key []byte
			var n int64
			if err := rows.Scan(&key, &n); err != nil {
				return err
			}
			out[string(key)] = n
			return nil
		})
	return out, err
}

// ExistingKeys returns which of keys have at least one row in table
// (matched on keyCol). One statement, served by an index that starts with
// keyCol.
func (r *Reader) ExistingKeys(ctx context.Context, table, keyCol string, keys []string) (map[string]bool, error) {
	out := map[string]bool{}
	err := r.byKeys(ctx, "look up keys in "+table, table, keyCol, nil, keys,
		"SELECT DISTINCT {k} FROM {t} WHERE {k} IN ({list})",
		"SELECT DISTINCT {t}.{k} FROM {jt} JOIN {t} ON {t}.{k} = {key}",
		func(rows *sql.Rows) error {
			var key []byte
			if err := rows.Scan(&key); err != nil {
				return err
			}
			out[string(key)] = true
			return nil
		})
	return out, err
}

// KeyStatuses returns, for each of keys that has rows in table (matched on
// keyCol), the values of statusCol in those rows (a NULL status reads as
// ""). Keys without a row are absent from the map. One statement, served by
// an index that starts with keyCol.
func (r *Reader) KeyStatuses(ctx context.Context, table, keyCol, statusCol string, keys []string) (map[string][]string, error) {
	out := map[string][]string{}
	err := r.byKeys(ctx, "look up "+statusCol+" by "+keyCol+" in "+table, table, keyCol, []string{statusCol}, keys,
		"SELECT {k}, {c0} FROM {t} WHERE {k} IN ({list})", "",
		func(rows *sql.Rows) error {
			var key, status []byte
			if err := rows.Scan(&key, &status); err != nil {
				return err
			}
			out[string(key)] = append(out[string(key)], string(status))
			return nil
		})
	return out, err
}

// byKeys runs one statement over a chunk of keys: tmpl with {t} the quoted
// table, {k} the quoted key column, {c0}... the quoted extra columns and
// {list} the bound placeholders; scan reads each row. No keys, no
// statement. When keyed is not "" and the keys can be (keyedOK, plainKey),
// it runs keyed instead, the same read joined with the keys: {jt} the keys
// as one JSON array (keyedFrom), {key} one key (keyedKey); an IN list of a
// thousand keys costs MariaDB twice the time of that join.
func (r *Reader) byKeys(ctx context.Context, what, table, keyCol string, cols, keys []string, tmpl, keyed string, scan func(*sql.Rows) error) error {
	if len(keys) == 0 {
		return nil
	}
	t, err := qident(table)
	if err != nil {
		return err
	}
	k, err := qident(keyCol)
	if err != nil {
		return err
	}
	var list string
	var args []any
	if keyed != "" && r.keyedOK(ctx) && allPlain(keys) {
		doc, err := json.Marshal(keys)
		if err != nil {
			return err
		}
		tmpl, args = keyed, []any{string(doc)}
		r.mu.Lock()
		r.keyedLookups++
		r.mu.Unlock()
	} else {
		list, args = inList(keys)
	}
	repl := []string{"{t}", t, "{k}", k, "{list}", list, "{jt}", keyedFrom, "{key}", keyedKey}
	for i, c := range cols {
		q, err := qident(c)
		if err != nil {
			return err
		}
		repl = append(repl, fmt.Sprintf("{c%d}", i), q)
	}
	rows, done, err := r.query(ctx, strings.NewReplacer(repl...).Replace(tmpl), args...)
	if err != nil {
		return r.queryError(what, err)
	}
	defer done()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return r.queryError(what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return r.queryError(what, err)
	}
	return nil
}

// allPlain reports whether every key is a plainKey.
func allPlain(keys []string) bool {
	for _, k := range keys {
		if !plainKey(k) {
			return false
		}
	}
	return true
}

// NextValue returns the smallest value of col in table greater than after
// (the first value when after is nil), and false when there is none: one
// index dive per call, a loose scan of the distinct values of an index's
// leading column.
func (r *Reader) NextValue(ctx context.Context, table, col string, after *string) (string, bool, error) {
	t, err := qident(table)
	if err != nil {
		return "", false, err
	}
	c, err := qident(col)
	if err != nil {
		return "", false, err
	}
	text := fmt.Sprintf("SELECT %s FROM %s ORDER BY %s LIMIT 1", c, t, c)
	var args []any
	if after != nil {
		text = fmt.Sprintf("SELECT %s FROM %s WHERE %s > ? ORDER BY %s LIMIT 1", c, t, c, c)
		args = append(args, *after)
	}
	var v []byte
	err = r.db.QueryRowContext(ctx, text, args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, r.queryError("next "+col+" of "+table, err)
	}
	return string(v), true, nil
}

// Now reads the database clock (SELECT NOW(6)), in the session's time zone
// (docs/config.md#time-zones).
func (r *Reader) Now(ctx context.Context) (time.Time, error) {
	var v any
	if err := r.db.QueryRowContext(ctx, "SELECT NOW(6)").Scan(&v); err != nil {
		return time.Time{}, r.queryError("read the clock", err)
	}
	t, ok := v.(time.Time)
	if !ok {
		return time.Time{}, fmt.Errorf("mysql %s: NOW(6) returned %T", r.addr, v)
	}
	return t, nil
}

// splitTable splits "schema.table" into its parts ("" schema: the DSN's
// database).
func splitTable(table string) (string, string) {
	if s, t, ok := strings.Cut(table, "."); ok {
		return s, t
	}
	return "", table
}

// ColumnType reads one column's type from information_schema.COLUMNS
// (COLUMN_TYPE: "enum('DONE','SKIPPED')", "varchar(24)"); "" when the
// table or the column does not exist.
func (r *Reader) ColumnType(ctx context.Context, table, column string) (string, error) {
	if !config.ValidIdent(table) || !config.ValidIdent(column) {
		return "", fmt.Errorf("mysql: invalid table or column name %q.%q", table, column)
	}
	schema, name := splitTable(table)
	var schemaArg any
	if schema != "" {
		schemaArg = schema
	}
	var typ sql.NullString
	err := r.db.QueryRowContext(ctx, "SELECT COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME = ?",
		schemaArg, name, column).Scan(&typ)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", r.queryError("type of "+table+"."+column, err)
	}
	return typ.String, nil
}

// TableInfo reads the columns and indexes of table from information_schema
// (three statements: columns, row estimate, indexes). A missing table is
// not an error: Exists is false. The primary key is the index PRIMARY of
// information_schema.STATISTICS, as MySQL, MariaDB and the demo's
// go-mysql-server list it (docs/lab.md). STATISTICS is read whole (SELECT
// *), so that the columns only some servers have are seen where they exist:
// IGNORED (MariaDB), IS_VISIBLE and EXPRESSION (MySQL 8).
func (r *Reader) TableInfo(ctx context.Context, table string) (TableInfo, error) {
	info := TableInfo{Table: table}
	if !config.ValidIdent(table) {
		return info, fmt.Errorf("mysql: invalid table name %q", table)
	}
	schema, name := splitTable(table)
	var schemaArg any
	if schema != "" {
		schemaArg = schema
	}
	const where = "TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?"
	rows, err := r.db.QueryContext(ctx,
		"SELECT COLUMN_NAME, COLLATION_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE "+where+" ORDER BY ORDINAL_POSITION", schemaArg, name)
	if err != nil {
		return info, r.queryError("columns of "+table, err)
	}
	for rows.Next() {
		var c string
		var coll, typ sql.NullString
		if err := rows.Scan(&c, &coll, &typ); err != nil {
			rows.Close()
			return info, r.queryError("columns of "+table, err)
		}
		info.Columns = append(info.Columns, c)
		info.Collations = append(info.Collations, coll.String)
		info.Types = append(info.Types, typ.String)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return info, r.queryError("columns of "+table, err)
	}
	if len(info.Columns) == 0 {
		return info, nil
	}
	info.Exists = true
	var est sql.NullInt64
	if err := r.db.QueryRowContext(ctx, "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE "+where, schemaArg, name).Scan(&est); err == nil && est.Valid {
		info.RowsEstimate = est.Int64
	}
	rows, err = r.db.QueryContext(ctx,
		"SELECT * FROM information_schema.STATISTICS WHERE "+where+" ORDER BY INDEX_NAME, SEQ_IN_INDEX", schemaArg, name)
	if err != nil {
		return info, r.queryError("indexes of "+table, err)
	}
	defer rows.Close()
	info.Indexes, err = readIndexes(rows)
	if err != nil {
		return info, r.queryError("indexes of "+table, err)
	}
	return info, nil
}

// StatisticsRows is what readIndexes reads: rows of
// information_schema.STATISTICS in (INDEX_NAME, SEQ_IN_INDEX) order, with
// whatever columns the server has. *sql.Rows implements it.
type StatisticsRows interface {
	Columns() ([]string, error)
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// readIndexes groups STATISTICS rows into indexes. The columns are found
// by name: INDEX_NAME, NON_UNIQUE, COLUMN_NAME (NULL for a functional
// part, whose EXPRESSION is then shown), SUB_PART (a prefix), COLLATION
// ("D": descending), IGNORED = 'YES' (MariaDB) and IS_VISIBLE = 'NO' (MySQL
// 8); a server without one of the last four simply has no such index.
func readIndexes(rows StatisticsRows) ([]Index, error) {
	names, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	pos := map[string]int{}
	for i, n := range names {
		pos[strings.ToUpper(n)] = i
	}
	for _, need := range []string{"INDEX_NAME", "NON_UNIQUE", "COLUMN_NAME"} {
		if _, ok := pos[need]; !ok {
			return nil, fmt.Errorf("information_schema.STATISTICS has no column %s (columns: %s)", need, strings.Join(names, ", "))
		}
	}
	raw := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	get := func(col string) (string, bool) {
		i, ok := pos[col]
		if !ok || raw[i] == nil {
			return "", false
		}
		return asString(convertValue("", raw[i])), true
	}
	var out []Index
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		name, _ := get("INDEX_NAME")
		n := len(out)
		if n == 0 || out[n-1].Name != name {
			nonUnique, _ := get("NON_UNIQUE")
			out = append(out, Index{Name: name, Unique: nonUnique == "0", Primary: name == "PRIMARY"})
			n++
		}
		ix := &out[n-1]
		col, hasCol := get("COLUMN_NAME")
		expr := !hasCol
		if expr {
			e, ok := get("EXPRESSION")
			if !ok {
				e = "expression"
			}
			col = "(" + e + ")"
		}
		_, prefix := get("SUB_PART")
		coll, _ := get("COLLATION")
		ix.Columns = append(ix.Columns, col)
		ix.Prefix = append(ix.Prefix, prefix)
		ix.Expr = append(ix.Expr, expr)
		ix.Desc = append(ix.Desc, strings.EqualFold(coll, "D"))
		if v, _ := get("IGNORED"); strings.EqualFold(v, "YES") {
			ix.Disabled = DisabledIgnored
		}
		if v, _ := get("IS_VISIBLE"); strings.EqualFold(v, "NO") {
			ix.Disabled = DisabledInvisible
		}
	}
	return out, rows.Err()
}

// Exec runs statements one by one (DDL of `opctl schema apply`), stopping
// at the first failure, which names the statement's position.
func (r *Reader) Exec(ctx context.Context, stmts []string) error {
	for i, s := range stmts {
		if _, err := r.db.ExecContext(ctx, s); err != nil {
			return r.queryError(fmt.Sprintf("statement %d of %d", i+1, len(stmts)), err)
		}
	}
	return nil
}

// PoolInUse is the number of pooled connections in use (tests check that a
// cancelled scan returned every connection).
func (r *Reader) PoolInUse() int { return r.db.Stats().InUse }
