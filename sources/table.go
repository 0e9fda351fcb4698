package sources

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opctl-dev/opctl/sources/config"
)

// This file holds the plain values of the table-level reads of `opctl
// reconcile` and `opctl schema` (sources/mysql performs them): the
// keyset-paginated walks and sweeps over an index, and what
// information_schema says of a table and its indexes, with the pure
// choices made on it (which index serves a lookup or a walk). They live
// here, not beside the driver, so that reconcile and sources/schema choose
// their access paths without linking it (docs/architecture.md).

// Walk describes one keyset-paginated walk over an index range, in the
// index's order: EqCol (when set) is fixed, then the rows come in (PosCol,
// Order...) order. The index that serves it starts with EqCol and PosCol
// (the columns that are set) and carries Order after them
// (TableInfo.WalkIndex: its further columns, then the primary key's, which
// InnoDB appends to every secondary index). KeyCol, the value the walk
// yields, is read from the row: it need not be in the index.
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
	// by From (inclusive) and To (exclusive); a nil bound is open.
	PosCol   string
	From, To any
	// Order are the columns the keyset continues on after PosCol, in the
	// index's order; rows equal on (PosCol, Order...) are told apart by
	// nothing, so Order ends with the primary key (or holds KeyCol). Empty:
	// KeyCol alone.
	Order []string
	// KeyCol is the value the walk yields.
	KeyCol string
	// ExtraCol, when set, is one more column returned with each row.
	ExtraCol string
	// Shards > 1 keeps only keys with MOD(CRC32(key), Shards) = Shard.
	Shard, Shards int
}

// Keyset returns the columns a walk orders and resumes on: PosCol, then
// Order (KeyCol when Order is empty).
func (w Walk) Keyset() []string {
	var cols []string
	if w.PosCol != "" {
		cols = append(cols, w.PosCol)
	}
	if len(w.Order) == 0 {
		return append(cols, w.KeyCol)
	}
	return append(cols, w.Order...)
}

// Cursor is the position after the last row of a page; the zero Cursor
// starts the walk.
type Cursor struct {
	Set bool
	// Values are the last row's values of the walk's keyset columns
	// (PosCol, then Order), as read: nil for NULL.
	Values []any
}

// WalkRow is one row of a walk.
type WalkRow struct {
	// Pos is the PosCol value (time.Time or int64), nil without PosCol.
	Pos any
	Key string
	// Extra is the ExtraCol value as text ("" for NULL).
	Extra string
	// Keyset holds the row's keyset values (PosCol, then Order), as read:
	// what After resumes from.
	Keyset []any
}

// After returns the cursor positioned after row.
func (row WalkRow) After() Cursor { return Cursor{Set: true, Values: row.Keyset} }

// Index is one index of a table as information_schema describes it.
type Index struct {
	Name string
	// Columns are the indexed columns in index order; a functional part
	// (MySQL 8: an expression, no column) reads "(expression)".
	Columns []string
	Unique  bool
	Primary bool
	// Prefix marks the columns indexed on a prefix only (by position);
	// such a column cannot serve an ORDER BY or a covering read.
	Prefix []bool
	// Expr marks the functional parts (by position): no column can be
	// looked up or ordered by through them.
	Expr []bool
	// Desc marks the descending parts (by position): an ascending walk
	// cannot continue on them.
	Desc []bool
	// Disabled says why the server will not use the index, "" when it
	// will: DisabledIgnored (MariaDB IGNORED) or DisabledInvisible (MySQL
	// 8 IS_VISIBLE = NO). FORCE INDEX on such an index is an error.
	Disabled string
}

// Why an index is not used (Index.Disabled).
const (
	DisabledIgnored   = "ignored"
	DisabledInvisible = "invisible"
)

// EnableDDL is the statement that makes a disabled index usable again.
func (ix Index) EnableDDL(table string) string {
	state := "NOT IGNORED"
	if ix.Disabled == DisabledInvisible {
		state = "VISIBLE"
	}
	return fmt.Sprintf("ALTER TABLE %s ALTER INDEX %s %s;", config.QuoteIdent(table), config.QuoteIdent(ix.Name), state)
}

// lookupColumns are the leading columns an equality lookup can use: up to
// the first part indexed on a prefix or on an expression.
func (ix Index) lookupColumns() []string {
	for i := range ix.Columns {
		if at(ix.Prefix, i) || at(ix.Expr, i) {
			return ix.Columns[:i]
		}
	}
	return ix.Columns
}

// orderedColumns are the leading columns an ascending walk can order by:
// the lookup columns up to the first descending part.
func (ix Index) orderedColumns() []string {
	cols := ix.lookupColumns()
	for i := range cols {
		if at(ix.Desc, i) {
			return cols[:i]
		}
	}
	return cols
}

func at(flags []bool, i int) bool { return i < len(flags) && flags[i] }

// TableInfo is what `schema check` and reconcile need to know about a table.
type TableInfo struct {
	// Table is the name as asked.
	Table  string
	Exists bool
	// Columns in ordinal order.
	Columns []string
	// Collations are the columns' collations, by position ("" for a
	// column that is not text).
	Collations []string
	// Types are the columns' types as information_schema.COLUMNS writes
	// them (COLUMN_TYPE: "enum('DONE','SKIPPED')", "varchar(24)"), by
	// position.
	Types []string
	// Indexes in name order; the primary key is named PRIMARY. Disabled
	// indexes are listed (Index.Disabled says so) but serve nothing.
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

// Collation returns col's collation ("" when it is not text or unknown).
func (t TableInfo) Collation(col string) string {
	for i, c := range t.Columns {
		if strings.EqualFold(c, col) && i < len(t.Collations) {
			return t.Collations[i]
		}
	}
	return ""
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

// withPrimary returns cols followed by the primary key's columns it does
// not hold (what InnoDB stores in a secondary index after its own).
func withPrimary(cols, pk []string) []string {
	out := slices.Clone(cols)
	for _, k := range pk {
		if !containsFold(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// hasPrefixFold reports whether list starts with prefix (case-insensitive).
func hasPrefixFold(list, prefix []string) bool {
	if len(list) < len(prefix) {
		return false
	}
	for i, c := range prefix {
		if !strings.EqualFold(list[i], c) {
			return false
		}
	}
	return true
}

// IndexFor returns the smallest usable index whose leading columns are
// cols (compared case-insensitively), for a lookup, and whether there is
// one. A secondary index's columns are followed by the primary key's
// (InnoDB appends them); a part indexed on a prefix or on an expression
// ends the usable columns of an index; a disabled index (ignored,
// invisible) serves nothing.
func (t TableInfo) IndexFor(cols ...string) (Index, bool) {
	pk := t.PrimaryKey()
	var best Index
	found := false
	for _, ix := range t.Indexes {
		if ix.Disabled != "" {
			continue
		}
		eff := ix.lookupColumns()
		if len(eff) == len(ix.Columns) && !ix.Primary {
			eff = withPrimary(eff, pk)
		}
		if hasPrefixFold(eff, cols) && (!found || len(ix.Columns) < len(best.Columns)) {
			best, found = ix, true
		}
	}
	return best, found
}

// IndexUse is how an index serves a keyset walk (TableInfo.WalkIndex).
type IndexUse struct {
	Index Index
	// Tail are the columns the index orders its entries by after the
	// walk's leading columns: its own further columns, then the primary
	// key's. The walk's keyset continues on them (Walk.Order).
	Tail []string
	// Covering is true when the index holds the key and the columns read:
	// the walk reads no row besides the index entry.
	Covering bool
	// Stored are the columns an entry of the index holds (all of them for
	// the primary key, which holds the row).
	Stored []string
}

// Holds reports whether an entry of the index holds col.
func (u IndexUse) Holds(col string) bool { return u.Index.Primary || containsFold(u.Stored, col) }

// WalkIndex returns the index a keyset walk over cols uses, reading key
// (and reads) from each row, and whether there is one. An index serves
// when it is usable (not disabled) and its leading columns, in ascending
// order and not on a prefix or an expression, are cols: the keyset then
// continues on the columns it carries after them (IndexUse.Tail), which
// must tell every two rows of different keys apart: the tail reaches the
// primary key (InnoDB appends it to every secondary index), or holds key
// itself (a table without a primary key). A covering index is preferred,
// then the one with the fewest columns.
func (t TableInfo) WalkIndex(cols []string, key string, reads ...string) (IndexUse, bool) {
	pk := t.PrimaryKey()
	var best IndexUse
	found := false
	for _, ix := range t.Indexes {
		if ix.Disabled != "" {
			continue
		}
		ord := ix.orderedColumns()
		if !hasPrefixFold(ord, cols) {
			continue
		}
		all := ord
		if len(ord) == len(ix.Columns) && !ix.Primary {
			all = withPrimary(ord, pk)
		}
		exact := containsFold(all, key)
		if len(pk) > 0 {
			exact = exact || !slices.ContainsFunc(pk, func(k string) bool { return !containsFold(all, k) })
		}
		if !exact {
			continue
		}
		stored := withPrimary(ix.lookupColumns(), pk)
		covering := ix.Primary || !slices.ContainsFunc(append([]string{key}, reads...), func(c string) bool {
			return c != "" && !containsFold(stored, c)
		})
		use := IndexUse{Index: ix, Tail: slices.Clone(all[len(cols):]), Covering: covering, Stored: stored}
		if !found || (use.Covering && !best.Covering) ||
			(use.Covering == best.Covering && len(ix.Columns) < len(best.Index.Columns)) {
			best, found = use, true
		}
	}
	return best, found
}

// ScanOrder is the keyset a walk over cols continues on without an index
// (a full scan, --allow-full-scan): the primary key's columns not in cols,
// or key when the table has no primary key.
func (t TableInfo) ScanOrder(cols []string, key string) []string {
	pk := t.PrimaryKey()
	if len(pk) == 0 {
		if containsFold(cols, key) {
			return nil
		}
		return []string{key}
	}
	return slices.DeleteFunc(slices.Clone(pk), func(k string) bool { return containsFold(cols, k) })
}

// DisabledFor returns the disabled indexes (ignored, invisible) that would
// serve a lookup or a walk on cols if they were usable.
func (t TableInfo) DisabledFor(cols ...string) []Index {
	var out []Index
	for _, ix := range t.Indexes {
		if ix.Disabled != "" && hasPrefixFold(ix.orderedColumns(), cols) {
			out = append(out, ix)
		}
	}
	return out
}

// WhyNoIndex explains, when no index serves cols (WalkIndex for a walk
// yielding key, else IndexFor), what comes close: a disabled index that
// would serve (and the statement that enables it), or, for a walk on a
// table without a primary key, an index that starts with cols but does not
// hold key. "" when nothing does.
func (t TableInfo) WhyNoIndex(cols []string, walk bool, key string) string {
	var why []string
	for _, ix := range t.DisabledFor(cols...) {
		why = append(why, fmt.Sprintf("index %s would serve but is %s (%s)", ix.Name, ix.Disabled, ix.EnableDDL(t.Table)))
	}
	if walk && len(t.PrimaryKey()) == 0 && slices.ContainsFunc(t.Indexes, func(ix Index) bool {
		return ix.Disabled == "" && hasPrefixFold(ix.orderedColumns(), cols)
	}) {
		why = append(why, fmt.Sprintf("%s has no primary key for a walk to continue on: the index must also hold %s", t.Table, key))
	}
	return strings.Join(why, "; ")
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// Sweep is a pass over the distinct values of an index's leading column
// (KeyCol), in the index's order: what the duplicates and orphans checks
// read when their window covers a large share of the table
// (docs/reconcile.md#access-path).
type Sweep struct {
	// Table is the table swept (a validated identifier).
	Table string
	// Index is forced (FORCE INDEX); its leading column is KeyCol.
	Index  string
	KeyCol string
	// Shards > 1 keeps only keys whose CRC32 (IEEE, of the key's bytes as
	// the group reports it) mod Shards is Shard. It is applied to the
	// groups the server returns, not in SQL: spellings the collation makes
	// equal hash apart, a key's rows must all be counted in one shard, and
	// MariaDB pushes a HAVING condition on the grouped column down to the
	// rows.
	Shard, Shards int
	// Lo and Hi, when set, limit the sweep to the keys in [Lo, Hi] (under
	// the column's collation): a window's key range (WindowKeys).
	Lo, Hi Bound
}

// KeyCount is a key of a sweep page: as stored (one of the stored
// spellings when the collation makes several equal), and its value as the
// next page binds it.
type KeyCount struct {
	Key   string
	Value any
}

// Bound is an optional value of a sweep range.
type Bound struct {
	Set   bool
	Value any
}

// SweepEnd is what a sweep page read: its number of keys and of rows,
// and its last key (where the next page starts).
type SweepEnd struct {
	Keys int
	Rows int64
	Last KeyCount
}
