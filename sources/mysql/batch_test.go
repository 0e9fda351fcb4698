package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// incidentIDs returns every value of a biz_id-like column in db, plus ids
// that match nothing (an unknown one, quotes, a multibyte one).
func incidentIDs(t *testing.T, db *testenv.DB) []string {
	t.Helper()
	rows, err := db.SQL.Query(`SELECT table_name, column_name FROM information_schema.columns
		WHERE table_schema = DATABASE() AND column_name IN ('biz_id', 'order_id', 'biz_order_id')`)
	if err != nil {
		t.Fatal(err)
	}
	var sel []string
	for rows.Next() {
		var tb, c string
		if err := rows.Scan(&tb, &c); err != nil {
			t.Fatal(err)
		}
		sel = append(sel, fmt.Sprintf("SELECT CAST(`%s` AS CHAR) FROM `%s`", c, tb))
	}
	rows.Close()
	var ids []string
	seen := map[string]bool{}
	rows, err = db.SQL.Query(strings.Join(sel, " UNION ") + " ORDER BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) < 2 {
		t.Fatalf("only %d ids in the incident", len(ids))
	}
	return append(ids, "NO-SUCH-OP", "x' OR '1'='1", "订单-1")
}

// sameAsSingle checks that one ReadOperations call returns, for every id,
// what ReadOperation returns (the clock aside), with one statement per
// query.
func sameAsSingle(t *testing.T, r *Reader, p *config.Pipeline, audit string, ids []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := r.BatchStats()
	evs, errs, err := r.ReadOperations(ctx, p, audit, ids)
	if err != nil {
		t.Fatalf("ReadOperations: %v", err)
	}
	after := r.BatchStats()
	qs, err := buildQueries(p, audit, "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := after.Statements - before.Statements; (got != len(qs) || after.Fallbacks != before.Fallbacks) && audit != "no_audit_table" {
		t.Errorf("%s: %d operations read with %d statements (%d fallbacks), want one per query: %d",
			p.Name, len(ids), got, after.Fallbacks-before.Fallbacks, len(qs))
	}
	if len(evs) != len(ids) || len(errs) != len(ids) {
		t.Fatalf("%d evidences, %d errors for %d ids", len(evs), len(errs), len(ids))
	}
	found := 0
	for i, id := range ids {
		one, oneErr := r.ReadOperation(ctx, p, audit, id)
		if (oneErr == nil) != (errs[i] == nil) {
			t.Errorf("%s %q: batch error %v, single error %v", p.Name, id, errs[i], oneErr)
		}
		if evs[i].Now.IsZero() || evs[i].Now.After(one.Now) {
			t.Errorf("%s %q: batch clock %v, single clock %v (read after it)", p.Name, id, evs[i].Now, one.Now)
		}
		b := evs[i]
		b.Now, one.Now = time.Time{}, time.Time{}
		if !reflect.DeepEqual(b, one) {
			t.Errorf("%s %q: batch read differs from the single read:\nbatch  %+v\nsingle %+v", p.Name, id, b, one)
		}
		if one.State.Found || len(one.Idempotency) > 0 {
			found++
		}
	}
	if found == 0 {
		t.Errorf("%s: no id of the batch has a state row or a record: the comparison proves nothing", p.Name)
	}
}

// TestBatchEqualsSingle: for every operation of each seed's incident (and
// ids that match nothing), a batched read returns exactly what the read of
// that operation alone returns, audit rows and their order included.
func TestBatchEqualsSingle(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		p    *config.Pipeline
	}{{"settlement", settlementPipeline()}, {"fulfilment", fulfilmentPipeline()}, {"skip", skipPipeline()}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, r := incident(t, c.name)
			db.Exec(t, auditDDL)
			ids := incidentIDs(t, db)
			for i, id := range ids[:2] {
				for k := range 3 {
					db.Exec(t, `INSERT INTO opctl_audit (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, after_image, created_at, updated_at)
						VALUES (?, ?, ?, ?, 'reverse', 'ann', 'r', 'applied', ?, NOW(6) - INTERVAL ? SECOND, NOW(6))`,
						fmt.Sprintf("p%d", i), 2-k, id, c.p.Name, fmt.Sprintf(`{"step":"s","reversed_id":%d}`, k), k)
				}
			}
			sameAsSingle(t, r, c.p, "opctl_audit", ids)
			sameAsSingle(t, r, c.p, "", ids[:1])
			// A missing audit table: the batch fails, the first operation
			// alone fails the same way, and that is every operation's
			// answer (no audit rows, as in a single read): 2 statements.
			before := r.BatchStats()
			sameAsSingle(t, r, c.p, "no_audit_table", ids[:3])
			if st := r.BatchStats(); st.Fallbacks-before.Fallbacks != 1 || st.Statements-before.Statements != countQueries(t, c.p)+1 {
				t.Errorf("missing audit table: stats went from %+v to %+v", before, st)
			}
		})
	}
}

// TestBatchFallback: a snippet that cannot be a derived table (two columns
// with one name) is run once per operation, with the same result.
func TestBatchFallback(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE ev (id INT PRIMARY KEY, k VARCHAR(8), v INT)")
	db.Exec(t, "INSERT INTO ev VALUES (1, 'a', 10), (2, 'a', 11), (3, 'b', 12)")
	r, err := Open(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &config.Pipeline{Name: "dup", Steps: []config.Step{{Name: "s", Kind: config.KindLocal,
		Evidence: "SELECT e.id, f.id FROM ev e JOIN ev f ON f.id = e.id WHERE e.k = ?"}}}
	evs, errs, err := r.ReadOperations(context.Background(), p, "", []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if st := r.BatchStats(); st.Fallbacks != 1 {
		t.Errorf("stats %+v: want the evidence query to fall back once", st)
	}
	for i, want := range []int{2, 1, 0} {
		if errs[i] != nil || evs[i].Steps[0].Err != "" {
			t.Errorf("op %d: error %v / step error %q", i, errs[i], evs[i].Steps[0].Err)
		}
		if n := len(evs[i].Steps[0].Rows); n != want {
			t.Errorf("op %d: %d rows, want %d", i, n, want)
		}
	}
	// A snippet that fails for every operation fails the step of each, as
	// in a single read.
	p.Steps[0].Evidence = "SELECT nope FROM ev WHERE k = ?"
	evs, errs, err = r.ReadOperations(context.Background(), p, "", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if errs[i] != nil || !strings.Contains(evs[i].Steps[0].Err, "Unknown column") {
			t.Errorf("op %d: error %v, step error %q: want the step's query error", i, errs[i], evs[i].Steps[0].Err)
		}
	}
}

// TestBatchRowCap: each operation keeps at most MaxRows rows; when the
// batch returns more rows than its operations may keep, it is not trusted
// (an operation after a big one could have been cut off) and every
// operation is read alone, so each gets the same rows as a single read.
func TestBatchRowCap(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE many (id INT PRIMARY KEY, k VARCHAR(8), KEY ix_k (k))")
	db.Exec(t, "INSERT INTO many SELECT seq, IF(seq <= 1500, 'k', 'j') FROM seq_1_to_3002")
	db.Exec(t, "INSERT INTO many VALUES (5000, 'small'), (5001, 'small')")
	r, err := Open(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &config.Pipeline{Name: "many", Steps: []config.Step{{Name: "s", Kind: config.KindLocal,
		Evidence: "SELECT id FROM many WHERE k = ? ORDER BY id LIMIT 100000"}}}

	// k (1500 rows) and small (2): 1502 rows, under the 2 × MaxRows the
	// batch may return: used, k cut to MaxRows, small complete.
	evs, _, err := r.ReadOperations(context.Background(), p, "", []string{"k", "small"})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evs[0].Steps[0].Rows); n != MaxRows {
		t.Errorf("k: %d rows, want the cap %d", n, MaxRows)
	}
	if n := len(evs[1].Steps[0].Rows); n != 2 {
		t.Errorf("small: %d rows, want 2", n)
	}
	if st := r.BatchStats(); st.Fallbacks != 0 {
		t.Errorf("stats %+v: no fallback expected", st)
	}

	// k and j (1500 each): 3000 rows, more than 2 × MaxRows: read alone.
	evs, _, err = r.ReadOperations(context.Background(), p, "", []string{"k", "j"})
	if err != nil {
		t.Fatal(err)
	}
	if st := r.BatchStats(); st.Fallbacks != 1 {
		t.Errorf("stats %+v: want one fallback", st)
	}
	for i, id := range []string{"k", "j"} {
		one := read(t, r, p, "", id)
		got, want := evs[i].Steps[0].Rows, one.Steps[0].Rows
		if len(got) != MaxRows || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %d rows, not the single read's %d", id, len(got), len(want))
		}
	}
}

// TestBatchUnreachable: nothing readable is a *ConnError for the batch.
func TestBatchUnreachable(t *testing.T) {
	t.Parallel()
	r, err := Open("root:s3cret@tcp(127.0.0.1:1)/x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, _, err = r.ReadOperations(context.Background(), settlementPipeline(), "opctl_audit", []string{"a", "b"})
	var ce *ConnError
	if !errors.As(err, &ce) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("err = %v, want a *ConnError without the password", err)
	}
	if _, _, err := r.ReadOperations(context.Background(), settlementPipeline(), "", make([]string, MaxBatch+1)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("oversized batch: err = %v", err)
	}
}

func countQueries(t *testing.T, p *config.Pipeline) int {
	qs, err := buildQueries(p, "a", "x")
	if err != nil {
		t.Fatal(err)
	}
	return len(qs)
}

var _ sources.BatchDB = (*Reader)(nil)

// TestBatchClockBranchReadsNoTable: the clock branch of a batched state
// read (the database clock when no id has a row) must not walk the state
// table. With ON 1 = 0 MariaDB answered it with a full index scan, a pass
// over the whole state table for every batch of reconcile's triage (50,000
// handler reads for 38 candidates on a 50,000-row table). EXPLAIN must show
// a constant or impossible access, never an index or table scan.
func TestBatchClockBranchReadsNoTable(t *testing.T) {
	t.Parallel()
	db, _ := incident(t, "settlement")
	p := settlementPipeline()
	qs, err := buildQueries(p, "", "PAY-1")
	if err != nil {
		t.Fatal(err)
	}
	clock := qs[0].clock
	if clock == "" {
		t.Fatal("the state query has no clock branch")
	}
	rows, err := db.SQL.Query("EXPLAIN " + clock)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", clock, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	seen := false
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		if row["table"] != "s" {
			continue
		}
		seen = true
		if typ := row["type"]; typ == "index" || typ == "ALL" {
			t.Fatalf("the clock branch scans the state table (EXPLAIN type %s, rows %s): %s", typ, row["rows"], clock)
		}
	}
	if !seen {
		t.Logf("EXPLAIN has no row for the state table (the optimizer removed it): %s", clock)
	}
}
