package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
)

// fakeStatistics is a STATISTICS row source with the columns a server has.
type fakeStatistics struct {
	cols []string
	rows [][]any
	i    int
}

func (f *fakeStatistics) Columns() ([]string, error) { return f.cols, nil }
func (f *fakeStatistics) Next() bool                 { f.i++; return f.i <= len(f.rows) }
func (f *fakeStatistics) Err() error                 { return nil }
func (f *fakeStatistics) Scan(dest ...any) error {
	row := f.rows[f.i-1]
	if len(dest) != len(row) {
		return fmt.Errorf("scan: %d destinations for %d columns", len(dest), len(row))
	}
	for i, v := range row {
		*dest[i].(*any) = v
	}
	return nil
}

// statistics builds rows of the given column names from maps (missing
// columns NULL, strings as the driver returns them: bytes).
func statistics(cols []string, rows ...map[string]any) *fakeStatistics {
	f := &fakeStatistics{cols: cols}
	for _, m := range rows {
		row := make([]any, len(cols))
		for i, c := range cols {
			switch v := m[c].(type) {
			case string:
				row[i] = []byte(v)
			default:
				row[i] = v
			}
		}
		f.rows = append(f.rows, row)
	}
	return f
}

var (
	mysql8Statistics = []string{"TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "NON_UNIQUE", "INDEX_SCHEMA", "INDEX_NAME",
		"SEQ_IN_INDEX", "COLUMN_NAME", "COLLATION", "CARDINALITY", "SUB_PART", "PACKED", "NULLABLE", "INDEX_TYPE",
		"COMMENT", "INDEX_COMMENT", "IS_VISIBLE", "EXPRESSION"}
	mariaDBStatistics = []string{"TABLE_CATALOG", "TABLE_SCHEMA", "TABLE_NAME", "NON_UNIQUE", "INDEX_SCHEMA", "INDEX_NAME",
		"SEQ_IN_INDEX", "COLUMN_NAME", "COLLATION", "CARDINALITY", "SUB_PART", "PACKED", "NULLABLE", "INDEX_TYPE",
		"COMMENT", "INDEX_COMMENT", "IGNORED"}
)

func part(index string, seq int64, col any, more ...any) map[string]any {
	m := map[string]any{"INDEX_NAME": index, "SEQ_IN_INDEX": seq, "COLUMN_NAME": col, "NON_UNIQUE": int64(1), "COLLATION": "A"}
	if index == "PRIMARY" {
		m["NON_UNIQUE"] = int64(0)
	}
	for i := 0; i+1 < len(more); i += 2 {
		m[more[i].(string)] = more[i+1]
	}
	return m
}

// TestReadIndexesFromStatistics: the columns of STATISTICS are read by
// name, whichever the server has. MySQL 8: an invisible index (IS_VISIBLE
// 'NO') is listed but serves nothing, and a functional part (COLUMN_NAME
// NULL, its EXPRESSION shown) ends the usable columns of its index instead
// of failing the whole table; a descending part ends what an ascending
// walk can continue on. MariaDB: IGNORED 'YES' likewise. A server with
// neither column has no disabled index.
func TestReadIndexesFromStatistics(t *testing.T) {
	table := func(t *testing.T, src *fakeStatistics) TableInfo {
		t.Helper()
		ixs, err := readIndexes(src)
		if err != nil {
			t.Fatalf("readIndexes: %v", err)
		}
		return TableInfo{Table: "journal", Exists: true, Columns: []string{"id", "biz_id", "created_at"}, Indexes: ixs}
	}
	t.Run("mysql8", func(t *testing.T) {
		ti := table(t, statistics(mysql8Statistics,
			part("PRIMARY", 1, "id", "IS_VISIBLE", "YES"),
			part("ix_biz", 1, "biz_id", "IS_VISIBLE", "YES"),
			part("ix_created", 1, "created_at", "IS_VISIBLE", "NO"),
			part("ix_desc", 1, "created_at", "IS_VISIBLE", "YES", "COLLATION", "D"),
			part("ix_fn", 1, "created_at", "IS_VISIBLE", "YES"),
			part("ix_fn", 2, nil, "IS_VISIBLE", "YES", "EXPRESSION", "lower(`biz_id`)"),
			part("ix_lower", 1, nil, "IS_VISIBLE", "YES", "EXPRESSION", "lower(`biz_id`)"),
		))
		byName := map[string]Index{}
		for _, ix := range ti.Indexes {
			byName[ix.Name] = ix
		}
		if ix := byName["ix_created"]; ix.Disabled != DisabledInvisible {
			t.Errorf("ix_created: %+v, want invisible", ix)
		}
		if ix := byName["ix_fn"]; !slices.Equal(ix.Columns, []string{"created_at", "(lower(`biz_id`))"}) || !slices.Equal(ix.Expr, []bool{false, true}) {
			t.Errorf("ix_fn: %+v", ix)
		}
		if ix := byName["ix_desc"]; !slices.Equal(ix.Desc, []bool{true}) {
			t.Errorf("ix_desc: %+v", ix)
		}
		// Nothing lets a walk by created_at continue: the visible ones are
		// descending, or go on by an expression before the primary key.
		if use, ok := ti.WalkIndex([]string{"created_at"}, "biz_id"); ok {
			t.Errorf("WalkIndex(created_at) = %s, want none", use.Index.Name)
		}
		why := ti.WhyNoIndex([]string{"created_at"}, true, "biz_id")
		if !strings.Contains(why, "ix_created would serve but is invisible (ALTER TABLE `journal` ALTER INDEX `ix_created` VISIBLE;)") {
			t.Errorf("WhyNoIndex: %q", why)
		}
		// A lookup uses the leading column before the expression.
		if ix, ok := ti.IndexFor("created_at"); !ok || ix.Disabled != "" || ix.Name == "ix_created" {
			t.Errorf("IndexFor(created_at) = %+v %v: want a visible index", ix, ok)
		}
		if ix, ok := ti.IndexFor("biz_id"); !ok || ix.Name != "ix_biz" {
			t.Errorf("IndexFor(biz_id) = %s %v, want ix_biz (not the expression on it)", ix.Name, ok)
		}
	})
	t.Run("mariadb", func(t *testing.T) {
		ti := table(t, statistics(mariaDBStatistics,
			part("PRIMARY", 1, "id", "IGNORED", "NO"),
			part("ix_created", 1, "created_at", "IGNORED", "YES"),
		))
		if ti.Indexes[1].Disabled != DisabledIgnored {
			t.Errorf("ix_created: %+v, want ignored", ti.Indexes[1])
		}
		if _, ok := ti.IndexFor("created_at"); ok {
			t.Error("an ignored index serves a lookup")
		}
	})
	t.Run("neither", func(t *testing.T) {
		cols := slices.DeleteFunc(slices.Clone(mariaDBStatistics), func(c string) bool { return c == "IGNORED" })
		ti := table(t, statistics(cols, part("PRIMARY", 1, "id"), part("ix_created", 1, "created_at")))
		use, ok := ti.WalkIndex([]string{"created_at"}, "biz_id")
		if !ok || use.Index.Name != "ix_created" || !slices.Equal(use.Tail, []string{"id"}) || use.Covering {
			t.Errorf("WalkIndex(created_at) = %+v %v, want ix_created continuing on id, not covering", use, ok)
		}
	})
}

// TestTableInfoIgnoredIndexMariaDB: an index made IGNORED (ALTER TABLE t
// ALTER INDEX i IGNORED) serves no walk and no lookup (FORCE INDEX on it
// is Error 1176), says how to enable it, and serves again once NOT
// IGNORED; a descending index does not serve an ascending walk.
func TestTableInfoIgnoredIndexMariaDB(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE j (id BIGINT AUTO_INCREMENT PRIMARY KEY, biz_id VARCHAR(64) NOT NULL, created_at DATETIME(3) NOT NULL, KEY ix_created (created_at), KEY ix_desc (created_at DESC))")
	db.Exec(t, "ALTER TABLE j ALTER INDEX ix_created IGNORED")
	db.Exec(t, "INSERT INTO j (biz_id, created_at) VALUES ('PAY-1', NOW(3)), ('PAY-2', NOW(3))")
	r, err := Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	ti, err := r.TableInfo(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	var created, desc Index
	for _, ix := range ti.Indexes {
		switch ix.Name {
		case "ix_created":
			created = ix
		case "ix_desc":
			desc = ix
		}
	}
	if created.Disabled != DisabledIgnored || !slices.Equal(desc.Desc, []bool{true}) {
		t.Fatalf("indexes %+v: want ix_created ignored, ix_desc descending", ti.Indexes)
	}
	if ix, ok := ti.IndexFor("created_at"); ok && ix.Name == "ix_created" {
		t.Errorf("IndexFor(created_at) = ix_created, which is IGNORED")
	}
	if use, ok := ti.WalkIndex([]string{"created_at"}, "biz_id"); ok {
		t.Errorf("WalkIndex(created_at) = %s: the ignored and the descending index cannot serve", use.Index.Name)
	}
	if why := ti.WhyNoIndex([]string{"created_at"}, true, "biz_id"); !strings.Contains(why, "ALTER TABLE `j` ALTER INDEX `ix_created` NOT IGNORED;") {
		t.Errorf("WhyNoIndex: %q", why)
	}
	if _, err := r.DB().ExecContext(ctx, created.EnableDDL("j")); err != nil {
		t.Fatal(err)
	}
	if ti, err = r.TableInfo(ctx, "j"); err != nil {
		t.Fatal(err)
	}
	use, ok := ti.WalkIndex([]string{"created_at"}, "biz_id")
	if !ok || use.Index.Name != "ix_created" || !slices.Equal(use.Tail, []string{"id"}) {
		t.Fatalf("after NOT IGNORED: WalkIndex = %+v %v, want ix_created continuing on id", use, ok)
	}
	rows, err := r.WalkPage(ctx, Walk{Table: "j", Index: use.Index.Name, PosCol: "created_at", Order: use.Tail, KeyCol: "biz_id"}, Cursor{}, 10)
	if err != nil || len(rows) != 2 {
		t.Fatalf("walk: %v rows %+v", err, rows)
	}
}

// TestWalkContinuesOnTheIndexTail: a walk by created_at over 1,500 rows of
// one millisecond, through an index that holds only (created_at) (the keyset
// continues on the primary key) or (created_at, note) with note NULL in
// some rows (it continues on note, then the key), reads every row exactly
// once at every page size, keys that sort after every ASCII key and keys
// with quotes included; a page after a cursor in the middle of the tie
// reads about a page of index entries, not the tie.
func TestWalkContinuesOnTheIndexTail(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, `CREATE TABLE j (id BIGINT AUTO_INCREMENT PRIMARY KEY, biz_id VARCHAR(64) NOT NULL, note VARCHAR(8) NULL,
		created_at DATETIME(3) NOT NULL, KEY ix_created (created_at), KEY ix_created_note (created_at, note))`)
	const n = 1500
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	var want []string
	var vals []string
	var args []any
	for i := range n {
		key := []string{"PAY-%04d", "工单-%04d", `q'"\-%04d`}[i%3]
		key = fmt.Sprintf(key, n-i) // ids and keys in opposite orders
		var note any
		if i%4 != 0 {
			note = fmt.Sprintf("n%d", i%5)
		}
		want = append(want, key)
		vals = append(vals, "(?, ?, ?)")
		args = append(args, key, note, at)
	}
	db.Exec(t, "INSERT INTO j (biz_id, note, created_at) VALUES "+strings.Join(vals, ", "), args...)
	slices.Sort(want)
	r, err := Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	ti, err := r.TableInfo(ctx, "j")
	if err != nil {
		t.Fatal(err)
	}
	use, ok := ti.WalkIndex([]string{"created_at"}, "biz_id")
	if !ok || use.Index.Name != "ix_created" || !slices.Equal(use.Tail, []string{"id"}) {
		t.Fatalf("WalkIndex = %+v %v, want ix_created continuing on id", use, ok)
	}
	walks := map[string]Walk{
		"ix_created":      {Table: "j", Index: "ix_created", PosCol: "created_at", From: at, Order: []string{"id"}, KeyCol: "biz_id"},
		"ix_created_note": {Table: "j", Index: "ix_created_note", PosCol: "created_at", From: at, Order: []string{"note", "id"}, KeyCol: "biz_id"},
	}
	for name, w := range walks {
		for _, chunk := range []int{1, 7, 1000, 1499} {
			t.Run(fmt.Sprintf("%s/chunk%d", name, chunk), func(t *testing.T) {
				var got []string
				var cur Cursor
				for pages := 0; ; pages++ {
					if pages > n+1 {
						t.Fatal("the walk does not end")
					}
					rows, err := r.WalkPage(ctx, w, cur, chunk)
					if err != nil {
						t.Fatal(err)
					}
					for _, row := range rows {
						got = append(got, row.Key)
					}
					if len(rows) < chunk {
						break
					}
					cur = rows[len(rows)-1].After()
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Errorf("%d keys read, want the %d (first difference at %d)", len(got), len(want), firstDiff(got, want))
				}
			})
		}
	}

	// Rows examined by a page resumed in the middle of the tie.
	w := walks["ix_created"]
	rows, err := r.WalkPage(ctx, w, Cursor{}, 700)
	if err != nil {
		t.Fatal(err)
	}
	text, targs, err := walkSQL(w, rows[len(rows)-1].After(), 100)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := r.DB().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "FLUSH STATUS"); err != nil {
		t.Fatal(err)
	}
	page, err := conn.QueryContext(ctx, text, targs...)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for page.Next() {
		got++
	}
	page.Close()
	if got != 100 {
		t.Fatalf("page after the cursor: %d rows, want 100", got)
	}
	if read := handlerReads(t, conn); read > 110 {
		t.Errorf("a page of 100 resumed inside a tie of %d read %d index entries: the keyset is not an index range", n, read)
	}
}

// handlerReads sums the session's Handler_read_* counters (rows and index
// entries the server read).
func handlerReads(t *testing.T, conn *sql.Conn) int64 {
	t.Helper()
	rows, err := conn.QueryContext(context.Background(), "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			t.Fatal(err)
		}
		sum += v
	}
	return sum
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
