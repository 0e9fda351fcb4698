package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab"
	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/schema"
)

// embeddedDB starts the demo's embedded server, creates a database on it
// (testenv.MySQLAt, as testenv.MySQL does on MariaDB), runs stmts there and
// returns the database.
func embeddedDB(t *testing.T, stmts ...string) *testenv.DB {
	t.Helper()
	srv, dsn, err := startEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	db := testenv.MySQLAt(t, dsn+"?parseTime=true")
	for _, s := range stmts {
		db.Exec(t, s)
	}
	return db
}

// settlementSQL is testdata/schema/settlement.sql, statement by statement.
func settlementSQL(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "schema", "settlement.sql"))
	if err != nil {
		t.Fatal(err)
	}
	return lab.SplitSQL(string(b))
}

// settlementConfig is testdata/config/settlement.yaml on dsn.
func settlementConfig(t *testing.T, dsn string) *config.Config {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv("settlement.yaml", text, func(k string) (string, bool) {
		if k == "OPCTL_MYSQL_DSN" {
			return dsn, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestEmbeddedPrimaryKey: the demo's go-mysql-server lists each table's
// primary key in information_schema.STATISTICS as the index PRIMARY, in key
// order (not column order), unique, as MySQL and MariaDB do; TableInfo
// reads it from there, so that IndexFor counts the primary key appended to
// a secondary index and a lookup it serves.
func TestEmbeddedPrimaryKey(t *testing.T) {
	db := embeddedDB(t,
		"CREATE TABLE one (biz_id VARCHAR(64) NOT NULL PRIMARY KEY, status VARCHAR(32) NOT NULL, updated_at DATETIME(3) NOT NULL, KEY ix_status_updated (status, updated_at))",
		"CREATE TABLE two (a INT NOT NULL, b VARCHAR(20) NOT NULL, c INT, PRIMARY KEY (b, a), KEY ix_c (c))",
		"CREATE TABLE none (a INT NOT NULL, b INT, KEY ix_b (b))",
	)

	// STATISTICS itself, as the server answers it.
	rows, err := db.SQL.Query("SELECT TABLE_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS" +
		" WHERE TABLE_SCHEMA = DATABASE() AND INDEX_NAME = 'PRIMARY' ORDER BY TABLE_NAME, SEQ_IN_INDEX")
	if err != nil {
		t.Fatal(err)
	}
	var primary []string
	for rows.Next() {
		var table, col string
		var nonUnique int
		if err := rows.Scan(&table, &col, &nonUnique); err != nil {
			t.Fatal(err)
		}
		primary = append(primary, fmt.Sprintf("%s.%s/%d", table, col, nonUnique))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	if want := []string{"one.biz_id/0", "two.b/0", "two.a/0"}; !reflect.DeepEqual(primary, want) {
		t.Errorf("STATISTICS lists PRIMARY as %q, want %q", primary, want)
	}

	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for _, c := range []struct {
		table    string
		pk       []string
		needs    []string
		servedBy string
	}{
		{"one", []string{"biz_id"}, []string{"status", "updated_at", "biz_id"}, "ix_status_updated"},
		{"one", []string{"biz_id"}, []string{"biz_id"}, "PRIMARY"},
		{"two", []string{"b", "a"}, []string{"c", "b", "a"}, "ix_c"},
		{"two", []string{"b", "a"}, []string{"b"}, "PRIMARY"},
		{"none", nil, []string{"b"}, "ix_b"},
	} {
		info, err := r.TableInfo(ctx, c.table)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.PrimaryKey(); !reflect.DeepEqual(got, c.pk) {
			t.Errorf("%s: primary key %q, want %q (indexes %+v)", c.table, got, c.pk, info.Indexes)
		}
		if ix, ok := info.IndexFor(c.needs...); !ok || ix.Name != c.servedBy {
			t.Errorf("%s: IndexFor%q = %q %v, want %s", c.table, c.needs, ix.Name, ok, c.servedBy)
		}
	}
}

// TestEmbeddedSchemaCheck: `opctl schema check` (schema.Check on the
// indexes reconcile needs, as cmd's schemaCheck runs it) on the demo's
// server sees the primary keys: the (biz_id) lookups of the state table
// are served by PRIMARY, the walks by the indexes that start with their
// columns (the keyset continues on the primary key), and what it reports
// missing are the walks no index serves, which
// testdata/schema/settlement.sql lacks on purpose (docs/lab.md).
func TestEmbeddedSchemaCheck(t *testing.T) {
	db := embeddedDB(t, settlementSQL(t)...)
	cfg := settlementConfig(t, db.DSN)
	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := cfg.Pipeline("settlement")
	rep, err := schema.Check(context.Background(), r, []*config.Pipeline{p}, reconcile.IndexNeeds(p), cfg.Audit.AuditTable())
	if err != nil {
		t.Fatal(err)
	}
	// Served by the primary key: itself, and appended to a secondary index.
	served := map[string]string{
		"biz_operation (biz_id)":             "PRIMARY",
		"biz_operation (status, updated_at)": "ix_status_updated",
		"balance_journal (created_at)":       "ix_created",
	}
	byPrimary := 0
	for _, it := range rep.Items {
		if it.Kind != schema.KindIndex {
			continue
		}
		t.Logf("%s %s %s %s", it.Table, it.What, it.Status, it.Index)
		if it.Index == "PRIMARY" {
			byPrimary++
		}
		if want, ok := served[it.Table+" "+it.What]; ok {
			if it.Status != schema.StatusOK || it.Index != want {
				t.Errorf("schema check: %s %s %s by %q, want ok by %s", it.Table, it.What, it.Status, it.Index, want)
			}
			delete(served, it.Table+" "+it.What)
		}
		if it.Status == schema.StatusMissing && it.Table+" "+it.What != "ledger_entry (created_at)" && it.Table+" "+it.What != "biz_operation (src_partition, src_offset)" {
			t.Errorf("schema check: %s %s missing (an index serves it?)", it.Table, it.What)
		}
	}
	if byPrimary == 0 {
		t.Errorf("schema check: no index need served by PRIMARY: %+v", rep.Items)
	}
	if len(served) > 0 {
		t.Errorf("schema check does not report %v", served)
	}
}

// TestEmbeddedReconcileBatches: on go-mysql-server reconcile triages in
// batches small enough for its planner (a UNION ALL of 16 branches never
// finishes there), and the batched state read is neither rejected nor
// incomplete. Its clock branch used to be bare NULLs, which the demo's
// server (with primary-key indexes) rejected ("result max1Row iterator
// returned more than one row"): every batch fell back to one statement per
// operation. (Without them go-mysql-server typed DATETIME UNION ALL NULL as
// text: every verdict partial, "created_at column: unexpected value ...
// (string)".)
func TestEmbeddedReconcileBatches(t *testing.T) {
	stmts := settlementSQL(t)
	const n = 20
	for i := range n {
		stmts = append(stmts,
			fmt.Sprintf("INSERT INTO biz_operation (biz_id, status, version, msg_id, created_at, updated_at) VALUES ('PAY-%02d', 'DEBIT_DONE', 1, 'm-%02d', NOW(3) - INTERVAL 20 MINUTE, NOW(3) - INTERVAL 10 MINUTE)", i, i),
			fmt.Sprintf("INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-%02d', 1, -1.00, 'DEBIT', NOW(3) - INTERVAL 20 MINUTE)", i))
	}
	dsn := embeddedDB(t, stmts...).DSN
	cfg := settlementConfig(t, dsn)
	r, err := mysqlsrc.Open(dsn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	limit, _ := r.BatchLimit(context.Background())
	if limit <= 0 || limit > 8 {
		t.Fatalf("BatchLimit on go-mysql-server = %d, want 1..8", limit)
	}

	// A planner that does not finish holds the server, not a context: give
	// up waiting after a while.
	type outcome struct {
		sum *reconcile.Summary
		err error
	}
	done := make(chan outcome, 1)
	var verdicts []string
	start := time.Now()
	go func() {
		sum, err := reconcile.Run(context.Background(), reconcile.Deps{DB: r, Collector: &sources.Collector{DB: r, KafkaMissing: "not configured", Timeout: 10 * time.Second}}, reconcile.Options{
			Pipelines: []*config.Pipeline{cfg.Pipeline("settlement")}, Checks: []string{reconcile.CheckStuck},
			Since: 24 * time.Hour, OlderThan: time.Minute, Timeout: 10 * time.Second,
		}, func(res reconcile.Result) error {
			verdicts = append(verdicts, res.BizID+" "+string(res.Verdict))
			return nil
		})
		done <- outcome{sum, err}
	}()
	var sum *reconcile.Summary
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		sum = o.sum
	case <-time.After(30 * time.Second):
		t.Fatalf("reconcile of %d candidates did not finish in 30s (batch stats %+v)", n, r.BatchStats())
	}
	if len(verdicts) != n {
		t.Fatalf("%d triaged, want %d: %v", len(verdicts), n, verdicts)
	}
	t.Logf("reconcile of %d candidates: %v", n, time.Since(start))
	// Without Kafka the verdicts are partial for that reason only: the
	// batched MySQL reads are complete.
	if !reflect.DeepEqual(sum.PartialWhy, []string{"kafka: not configured"}) {
		t.Errorf("partial because %q, want only Kafka's absence", sum.PartialWhy)
	}
	for _, c := range sum.Checks {
		if c.Check == reconcile.CheckStuck && !strings.Contains(strings.Join(c.Notes, "; "), "triaged in batches of") {
			t.Errorf("stuck notes %q do not say the batches were made smaller", c.Notes)
		}
	}
	st := r.BatchStats()
	// Batches of at most limit (gmsBatch, 4, in sources/mysql/server.go)
	// operations: at least ceil(n/limit) of them.
	if minBatches := (n + limit - 1) / limit; st.Operations != n || st.Batches < minBatches || st.Fallbacks > 0 {
		t.Errorf("batch stats %+v: want %d operations in batches of at most %d (at least %d batches), no statement rejected", st, n, limit, minBatches)
	}
}

// TestEmbeddedDuplicatesSweep: the duplicates sweeps work on the demo's
// go-mysql-server too, whatever it lacks (it has no index statistics, so
// --access auto walks there; --access sweep and range must still answer):
// the whole-table page, the window's key range and the sampled bounds
// find the seeded double debits.
func TestEmbeddedDuplicatesSweep(t *testing.T) {
	stmts := settlementSQL(t)
	for i := range 30 {
		stmts = append(stmts, fmt.Sprintf("INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-%02d', 1, -1.00, 'DEBIT', NOW(3) - INTERVAL %d HOUR)", i, 30-i))
	}
	stmts = append(stmts, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-03', 1, -1.00, 'DEBIT', NOW(3) - INTERVAL 40 HOUR), ('PAY-27', 1, -1.00, 'DEBIT', NOW(3))")
	dsn := embeddedDB(t, stmts...).DSN
	r, err := mysqlsrc.Open(dsn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	s := mysqlsrc.Sweep{Table: "balance_journal", Index: "ix_biz", KeyCol: "biz_id"}
	hits, end, err := r.SweepRange(ctx, s, mysqlsrc.Bound{}, mysqlsrc.Bound{})
	if err != nil {
		t.Fatalf("whole-table page: %v", err)
	}
	if !reflect.DeepEqual(hits, []string{"PAY-03", "PAY-27"}) || end.Rows != 32 {
		t.Errorf("whole-table page: %q, %d rows; want PAY-03 and PAY-27 of 32 rows", hits, end.Rows)
	}
	bounds, err := r.SweepBounds(ctx, s, "id", 4)
	if err != nil || len(bounds) == 0 {
		t.Fatalf("bounds: %q, %v", bounds, err)
	}
	lo, hi, rows, err := r.WindowKeys(ctx, "balance_journal", "ix_created", "biz_id", "created_at", time.Now().Add(-5*time.Hour).UTC(), time.Time{})
	if err != nil || rows == 0 || lo.Key > hi.Key {
		t.Fatalf("window keys [%q, %q] of %d rows: %v", lo.Key, hi.Key, rows, err)
	}
	ranged := s
	ranged.Lo, ranged.Hi = mysqlsrc.Bound{Set: true, Value: lo.Value}, mysqlsrc.Bound{Set: true, Value: hi.Value}
	if hits, _, err := r.SweepRange(ctx, ranged, mysqlsrc.Bound{}, mysqlsrc.Bound{}); err != nil || !reflect.DeepEqual(hits, []string{"PAY-27"}) {
		t.Errorf("window range [%q, %q]: %q, %v; want PAY-27", lo.Key, hi.Key, hits, err)
	}
}
