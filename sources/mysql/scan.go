package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// This file holds the table-level reads of `opctl reconcile` and `opctl
// schema`: keyset-paginated index walks, batched key lookups and index
// introspection. Every identifier goes through config.QuoteIdent after a
// config.ValidIdent check; every value is bound.

// Walk describes one keyset-paginated walk over an index range, in (Pos, Key)
// order. The index that serves it must start with (EqCol, PosCol, KeyCol) (the
// columns that are set); InnoDB appends the primary key to every secondary
// index, so a KeyCol that is the primary key need not be declared.
type Walk struct {
	// Table is the table walked (a validated identifier, optionally schema.table).
	Table string
	// Index, when set, is forced (FORCE INDEX) so that a plan change can
	// never turn the walk into a full table scan.
	Index string
	// EqCol, when set, is a leading index column bound to EqVal (status,
	// action, partition).
	EqCol string
	EqVal any
	// PosCol, when set, is the ordered column (a time or an offset), bounded
	// by From (inclusive) and To (exclusive); a nil bound is open. Without
	// PosCol the walk is in KeyCol order only.
	PosCol   string
	From, To any
	// KeyCol is the tie-breaker and the value the walk yields.
	KeyCol string
	// ExtraCol, when set, is one more column returned with each row.
	ExtraCol string
	// Shards > 1 keeps only keys with MOD(CRC32(key), Shards) = Shard.
	Shard, Shards int
}

// Cursor is the position after the last row of a page; the zero Cursor
// starts the walk.
type Cursor struct {
	Set bool
	Pos any
	Key string
}

// WalkRow is one row of a walk.
type WalkRow struct {
	// Pos is the PosCol value (time.Time or int64), nil without PosCol.
	Pos any
	Key string
	// Extra is the ExtraCol value as text ("" for NULL).
	Extra string
}

// After returns the cursor positioned after row.
func (row WalkRow) After() Cursor { return Cursor{Set: true, Pos: row.Pos, Key: row.Key} }

// qident checks and quotes an identifier.
func qident(id string) (string, error) {
	if !config.ValidIdent(id) {
		return "", fmt.Errorf("mysql: invalid identifier %q", id)
	}
	return config.QuoteIdent(id), nil
}

// walkSQL builds the statement of one page and its arguments.
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
	key := q(w.KeyCol)
	cols := []string{}
	if w.PosCol != "" {
		cols = append(cols, q(w.PosCol))
	}
	cols = append(cols, key)
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
		if after.Set {
			// Written as a disjunction so that the range optimizer builds two
			// exact intervals: (pos > c) and (pos = c AND key > k).
			conds = append(conds, fmt.Sprintf("(%s > ? OR (%s = ? AND %s > ?))", pos, pos, key))
			args = append(args, after.Pos, after.Pos, after.Key)
		}
	} else if after.Set {
		conds = append(conds, key+" > ?")
		args = append(args, after.Key)
	}
	if w.Shards > 1 {
		conds = append(conds, "MOD(CRC32("+key+"), ?) = ?")
		args = append(args, w.Shards, w.Shard)
	}
	if len(conds) > 0 {
		sb.WriteString(" WHERE " + strings.Join(conds, " AND "))
	}
	if w.PosCol != "" {
		fmt.Fprintf(&sb, " ORDER BY %s, %s", q(w.PosCol), key)
	} else {
		fmt.Fprintf(&sb, " ORDER BY %s", key)
	}
	fmt.Fprintf(&sb, " LIMIT %d", limit)
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
		i := 0
		var row WalkRow
		if w.PosCol != "" {
			row.Pos = convertValue(types[0].DatabaseTypeName(), raw[0])
			i++
		}
		row.Key = asString(convertValue(types[i].DatabaseTypeName(), raw[i]))
		if w.ExtraCol != "" {
			row.Extra = asString(convertValue(types[i+1].DatabaseTypeName(), raw[i+1]))
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, r.queryError("walk "+w.Table, err)
	}
	return out, nil
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
		"SELECT {k}, {c0} FROM {t} WHERE {k} IN ({list})",
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
// {list} the bound placeholders; scan reads each row. No keys, no statement.
func (r *Reader) byKeys(ctx context.Context, what, table, keyCol string, cols, keys []string, tmpl string, scan func(*sql.Rows) error) error {
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
	list, args := inList(keys)
	repl := []string{"{t}", t, "{k}", k, "{list}", list}
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

// Now reads the database clock (SELECT NOW(6)), in the DSN's loc.
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

// Index is one index of a table as information_schema describes it.
type Index struct {
	Name    string
	Columns []string
	Unique  bool
	Primary bool
	// Prefix marks the columns indexed on a prefix only (by position);
	// such a column cannot serve an ORDER BY or a covering read.
	Prefix []bool
}

// TableInfo is what `schema check` and reconcile need to know about a table.
type TableInfo struct {
	// Table is the name as asked.
	Table  string
	Exists bool
	// Columns in ordinal order.
	Columns []string
	// Indexes in name order; the primary key is named PRIMARY.
	Indexes []Index
	// RowsEstimate is information_schema.TABLES.TABLE_ROWS (an estimate).
	RowsEstimate int64
}

// HasColumn reports whether the table has the column (case-insensitive, as
// MySQL compares column names).
func (t TableInfo) HasColumn(col string) bool {
	for _, c := range t.Columns {
		if strings.EqualFold(c, col) {
			return true
		}
	}
	return false
}

// PrimaryKey returns the primary key's columns, nil when there is none.
func (t TableInfo) PrimaryKey() []string {
	for _, ix := range t.Indexes {
		if ix.Primary {
			return ix.Columns
		}
	}
	return nil
}

// splitTable splits "schema.table" into its parts ("" schema: the DSN's
// database).
func splitTable(table string) (string, string) {
	if s, t, ok := strings.Cut(table, "."); ok {
		return s, t
	}
	return "", table
}

// TableInfo reads the columns and indexes of table from information_schema
// (three statements: columns, row estimate, indexes). A missing table is
// not an error: Exists is false. The primary key is the index PRIMARY of
// information_schema.STATISTICS, as MySQL, MariaDB and the demo's
// go-mysql-server list it (docs/lab.md).
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
		"SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE "+where+" ORDER BY ORDINAL_POSITION", schemaArg, name)
	if err != nil {
		return info, r.queryError("columns of "+table, err)
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return info, r.queryError("columns of "+table, err)
		}
		info.Columns = append(info.Columns, c)
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
		"SELECT INDEX_NAME, NON_UNIQUE, COLUMN_NAME, SUB_PART FROM information_schema.STATISTICS WHERE "+where+
			" ORDER BY INDEX_NAME, SEQ_IN_INDEX", schemaArg, name)
	if err != nil {
		return info, r.queryError("indexes of "+table, err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ixName, col string
			nonUnique   int64
			sub         sql.NullInt64
		)
		if err := rows.Scan(&ixName, &nonUnique, &col, &sub); err != nil {
			return info, r.queryError("indexes of "+table, err)
		}
		n := len(info.Indexes)
		if n == 0 || info.Indexes[n-1].Name != ixName {
			info.Indexes = append(info.Indexes, Index{Name: ixName, Unique: nonUnique == 0, Primary: ixName == "PRIMARY"})
			n++
		}
		ix := &info.Indexes[n-1]
		ix.Columns = append(ix.Columns, col)
		ix.Prefix = append(ix.Prefix, sub.Valid)
	}
	if err := rows.Err(); err != nil {
		return info, r.queryError("indexes of "+table, err)
	}
	return info, nil
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

// IndexFor returns the smallest index whose effective columns start with
// cols (compared case-insensitively), and whether there is one. The
// effective columns of a secondary index are its declared columns followed
// by the primary key's (InnoDB appends them); a column indexed on a prefix
// ends the usable part of an index.
func (t TableInfo) IndexFor(cols ...string) (Index, bool) {
	pk := t.PrimaryKey()
	var best Index
	found := false
	for _, ix := range t.Indexes {
		var eff []string
		for i, c := range ix.Columns {
			if i < len(ix.Prefix) && ix.Prefix[i] {
				break
			}
			eff = append(eff, c)
		}
		if len(eff) == len(ix.Columns) && !ix.Primary {
			for _, k := range pk {
				if !containsFold(eff, k) {
					eff = append(eff, k)
				}
			}
		}
		if len(eff) < len(cols) {
			continue
		}
		ok := true
		for i, c := range cols {
			if !strings.EqualFold(eff[i], c) {
				ok = false
				break
			}
		}
		if ok && (!found || len(ix.Columns) < len(best.Columns)) {
			best, found = ix, true
		}
	}
	return best, found
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// PoolInUse is the number of pooled connections in use (tests check that a
// cancelled scan returned every connection).
func (r *Reader) PoolInUse() int { return r.db.Stats().InUse }
