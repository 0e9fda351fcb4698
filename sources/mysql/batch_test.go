package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
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
	// Every query that binds the biz_id has a keyed form here (the
	// fixtures' snippets are plain SELECTs): with the keyed form on, each
	// one is read so, or the test would not test it; the ids that are not
	// ASCII (plainKey) are read by a UNION ALL of their own.
	plain, other := 0, 0
	for _, id := range ids {
		if plainKey(id) {
			plain++
		} else {
			other++
		}
	}
	wantKeyed, wantStmts := 0, len(qs)
	if !r.unionOnly && len(ids) > 1 && plain > 1 {
		for _, q := range qs {
			if len(q.args) > 0 {
				wantKeyed++
				if other > 0 {
					wantStmts++
				}
			}
		}
	}
	if got := after.Statements - before.Statements; (got != wantStmts || after.Fallbacks != before.Fallbacks) && audit != "no_audit_table" {
		t.Errorf("%s: %d operations read with %d statements (%d fallbacks), want %d",
			p.Name, len(ids), got, after.Fallbacks-before.Fallbacks, wantStmts)
	}
	if got := after.Keyed - before.Keyed; got != wantKeyed && audit != "no_audit_table" {
		t.Errorf("%s: %d keyed statements, want %d", p.Name, got, wantKeyed)
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
		bothForms(t, c.name, func(t *testing.T, unionOnly bool) {
			db, r := incident(t, c.name)
			r.unionOnly = unionOnly
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

// bothForms runs f as a parallel subtest name/keyed and name/union: with
// the keyed form of the batches on, and with every batch a UNION ALL.
func bothForms(t *testing.T, name string, f func(t *testing.T, unionOnly bool)) {
	t.Helper()
	for _, unionOnly := range []bool{false, true} {
		form := "keyed"
		if unionOnly {
			form = "union"
		}
		t.Run(name+"/"+form, func(t *testing.T) {
			t.Parallel()
			f(t, unionOnly)
		})
	}
}

// TestBatchFallback: a snippet that neither form can read in one statement
// (its ? inside a derived table, which the keyed form cannot reach, and two
// columns with one name, which a UNION ALL branch cannot nest) is run once
// per operation, with the same result. The keyed form reads the
// duplicate-name snippet itself; the keyed text the server rejected is not
// tried again.
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
	check := func(p *config.Pipeline, want BatchStats) {
		t.Helper()
		before := r.BatchStats()
		evs, errs, err := r.ReadOperations(context.Background(), p, "", []string{"a", "b", "c"})
		if err != nil {
			t.Fatal(err)
		}
		st := r.BatchStats()
		got := BatchStats{Batches: st.Batches - before.Batches, Operations: st.Operations - before.Operations,
			Statements: st.Statements - before.Statements, Fallbacks: st.Fallbacks - before.Fallbacks, Keyed: st.Keyed - before.Keyed}
		if got != want {
			t.Errorf("%s: stats %+v, want %+v", p.Steps[0].Evidence, got, want)
		}
		for i, want := range []int{2, 1, 0} {
			if errs[i] != nil || evs[i].Steps[0].Err != "" {
				t.Errorf("op %d: error %v / step error %q", i, errs[i], evs[i].Steps[0].Err)
			}
			if n := len(evs[i].Steps[0].Rows); n != want {
				t.Errorf("op %d: %d rows, want %d", i, n, want)
			}
		}
	}
	dup := &config.Pipeline{Name: "dup", Steps: []config.Step{{Name: "s", Kind: config.KindLocal,
		Evidence: "SELECT e.id, f.id FROM ev e JOIN ev f ON f.id = e.id WHERE e.k = ?"}}}
	// The clock (SELECT NOW(6), no ?) and the snippet, keyed.
	check(dup, BatchStats{Batches: 1, Operations: 3, Statements: 2, Keyed: 1})
	derived := &config.Pipeline{Name: "derived", Steps: []config.Step{{Name: "s", Kind: config.KindLocal,
		Evidence: "SELECT d.id, d.id FROM (SELECT id FROM ev WHERE k = ?) AS d"}}}
	// Keyed (rejected: opctl_ids is not visible in the derived table), the
	// first operation alone, the UNION ALL (rejected), the other two alone.
	check(derived, BatchStats{Batches: 1, Operations: 3, Statements: 1 + 5, Fallbacks: 1, Keyed: 1})
	// Again: the rejected keyed text is not tried.
	check(derived, BatchStats{Batches: 1, Operations: 3, Statements: 1 + 4, Fallbacks: 1})

	// A snippet that fails for every operation fails the step of each, as
	// in a single read.
	for _, unionOnly := range []bool{false, true} {
		r.unionOnly = unionOnly
		p := &config.Pipeline{Name: "bad", Steps: []config.Step{{Name: "s", Kind: config.KindLocal,
			Evidence: "SELECT nope FROM ev WHERE k = ?"}}}
		evs, errs, err := r.ReadOperations(context.Background(), p, "", []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		for i := range evs {
			if errs[i] != nil || !strings.Contains(evs[i].Steps[0].Err, "Unknown column") {
				t.Errorf("union only %v, op %d: error %v, step error %q: want the step's query error", unionOnly, i, errs[i], evs[i].Steps[0].Err)
			}
		}
	}
}

// TestBatchKeysCompareAsBound: in either form, each key of a batch finds
// exactly the rows the same key bound to the snippet's ? finds, whatever
// the column's character set and collation: case- and accent-insensitive
// (pay-x finds PAY-X and pÁy-x), PAD SPACE ("pay-x " finds pay-x), binary,
// latin1, a numeric column compared with a string key; keys with quotes,
// backslashes, <&>, multibyte letters (bound in a UNION ALL of their own:
// plainKey), keys longer than any JSON_VALUE default, and a key that is
// not valid UTF-8.
func TestBatchKeysCompareAsBound(t *testing.T) {
	t.Parallel()
	bothForms(t, "collations", func(t *testing.T, unionOnly bool) {
		db := testenv.MySQL(t)
		db.Exec(t, `CREATE TABLE kc (id INT AUTO_INCREMENT PRIMARY KEY,
			ci VARCHAR(600) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci,
			bin VARCHAR(600) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin,
			lat VARCHAR(600) CHARACTER SET latin1 COLLATE latin1_swedish_ci,
			num BIGINT,
			KEY (ci), KEY (bin), KEY (lat), KEY (num))`)
		long := strings.Repeat("長", 520)
		vals := []string{"pay-x", "PAY-X", "pÁy-x", "pay-x ", `O'Re"il\-<&>`, "工单-1", long, strings.Repeat("k", 590), "42", "café"}
		for _, v := range vals {
			var lat any = v // latin1 holds it, or NULL
			for _, c := range v {
				if c > 0xff {
					lat = nil
				}
			}
			db.Exec(t, "INSERT INTO kc (ci, bin, lat, num) VALUES (?, ?, ?, ?)", v, v, lat, 42)
		}
		r, err := Open(db.DSN, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		r.unionOnly = unionOnly
		keys := append(slices.Clone(vals), "PAY-x", "pay-X  ", "CAFE", "nope", "42.0", string([]byte{0xff, 'p'}))
		for _, col := range []string{"ci", "bin", "lat", "num"} {
			p := &config.Pipeline{Name: col, Steps: []config.Step{{Name: "s", Kind: config.KindLocal,
				Evidence: "SELECT id FROM kc WHERE " + col + " = ?"}}}
			for _, batch := range [][]string{keys[:len(keys)-1], keys} {
				evs, errs, err := r.ReadOperations(context.Background(), p, "", batch)
				if err != nil {
					t.Fatal(err)
				}
				matched := 0
				for i, k := range batch {
					one := read(t, r, p, "", k)
					// A key the column's character set cannot hold is an
					// error when bound ('工单-1' against latin1): the same
					// error in the batch.
					if errs[i] != nil || evs[i].Steps[0].Err != one.Steps[0].Err {
						t.Fatalf("%s %q: batch error %v %q, single %q", col, k, errs[i], evs[i].Steps[0].Err, one.Steps[0].Err)
					}
					if got, want := ids(evs[i].Steps[0].Rows), ids(one.Steps[0].Rows); !reflect.DeepEqual(got, want) {
						t.Errorf("%s %q: batch rows %v, bound alone %v", col, k, got, want)
					}
					matched += len(one.Steps[0].Rows)
				}
				if matched < len(vals) {
					t.Errorf("%s: only %d rows matched for %d keys: the comparison proves little", col, matched, len(batch))
				}
			}
		}
		st := r.BatchStats()
		if unionOnly && st.Keyed != 0 || !unionOnly && st.Keyed != 8 {
			t.Errorf("stats %+v: want a keyed statement per batch (for its ASCII keys) when keyed", st)
		}
	})
}

// ids is the sorted first column of rows.
func ids(rows []sources.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprint(r.Values[0]))
	}
	slices.Sort(out)
	return out
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

// TestKeyLookupsEitherForm: the lookups of reconcile's walks
// (MultiRowKeys, ExistingKeys) answer the same whether they join the keys
// (keyed) or list them (IN): under a case-insensitive collation pay-x and
// PAY-X are one key of two rows, named by one stored spelling; a key
// listed twice counts once; a key that is not ASCII is looked up by IN.
func TestKeyLookupsEitherForm(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, `CREATE TABLE lk (id INT AUTO_INCREMENT PRIMARY KEY,
		k VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci, KEY (k))`)
	for _, v := range []string{"pay-x", "PAY-X", "solo", "pair", "pair", "工单-1", "工单-1", "O'R\"x\\"} {
		db.Exec(t, "INSERT INTO lk (k) VALUES (?)", v)
	}
	answers := map[bool][2]string{}
	for _, unionOnly := range []bool{false, true} {
		r, err := Open(db.DSN, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		r.unionOnly = unionOnly
		ctx := context.Background()
		var got [2]string
		for _, keys := range [][]string{
			{"pay-x", "PAY-X", "Pay-X", "solo", "pair", "pair", "none", `O'R"x\`},
			{"pay-x", "工单-1", "solo"},
		} {
			multi, err := r.MultiRowKeys(ctx, "lk", "k", keys)
			if err != nil {
				t.Fatal(err)
			}
			has, err := r.ExistingKeys(ctx, "lk", "k", keys)
			if err != nil {
				t.Fatal(err)
			}
			got[0] += fmt.Sprint(multi)
			got[1] += fmt.Sprint(has)
		}
		answers[unionOnly] = got
		// Keyed: both lookups of the ASCII list; the other list by IN.
		if want := map[bool]int{false: 2, true: 0}[unionOnly]; r.keyedLookups != want {
			t.Errorf("union only %v: %d keyed lookups, want %d", unionOnly, r.keyedLookups, want)
		}
		r.Close()
	}
	if answers[false] != answers[true] {
		t.Errorf("keyed %v\nIN    %v", answers[false], answers[true])
	}
	if want := "map[pair:2 pay-x:2]map[pay-x:2 工单-1:2]"; answers[true][0] != want {
		t.Errorf("counts %s, want %s", answers[true][0], want)
	}
	if want := `map[O'R"x\:true pair:true pay-x:true solo:true]map[pay-x:true solo:true 工单-1:true]`; answers[true][1] != want {
		t.Errorf("existing %s, want %s", answers[true][1], want)
	}
}
