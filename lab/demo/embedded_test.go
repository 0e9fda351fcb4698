package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// embeddedDB starts an embedded server (with or without primary-key
// indexes), creates a database on it and returns a DSN for that database.
func embeddedDB(t *testing.T, pkIndexes bool, stmts ...string) string {
	t.Helper()
	srv, dsn, err := newEmbedded(pkIndexes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName, cfg.ParseTime = "t", true
	root, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE t"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
	return cfg.FormatDSN()
}

// TestEmbeddedTableInfoPrimaryKey: go-mysql-server without primary-key
// indexes lists no PRIMARY in STATISTICS; TableInfo takes the primary key
// from COLUMNS.COLUMN_KEY (its order from SHOW CREATE TABLE), so that
// `schema check` and reconcile see it. With them (the demo's server),
// STATISTICS has it.
func TestEmbeddedTableInfoPrimaryKey(t *testing.T) {
	ddl := []string{
		"CREATE TABLE one (biz_id VARCHAR(64) NOT NULL PRIMARY KEY, status VARCHAR(32) NOT NULL, updated_at DATETIME(3) NOT NULL, KEY ix_status_updated (status, updated_at))",
		"CREATE TABLE two (a INT NOT NULL, b VARCHAR(20) NOT NULL, c INT, PRIMARY KEY (b, a), KEY ix_c (c))",
		"CREATE TABLE none (a INT NOT NULL, b INT, KEY ix_b (b))",
	}
	for _, pk := range []bool{false, true} {
		t.Run(fmt.Sprintf("pk_indexes=%v", pk), func(t *testing.T) {
			r, err := mysqlsrc.Open(embeddedDB(t, pk, ddl...), 10*time.Second)
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
		})
	}
}

// TestEmbeddedReconcileBatches: on go-mysql-server reconcile triages in
// batches small enough for its planner (a UNION ALL of 16 branches never
// finishes there), and the batched state read is neither rejected nor
// incomplete. Its clock branch used to be bare NULLs: without primary-key
// indexes go-mysql-server typed DATETIME UNION ALL NULL as text (every
// verdict partial: "created_at column: unexpected value ... (string)");
// with them it rejected the statement ("result max1Row iterator returned
// more than one row") and every batch fell back to one statement per
// operation.
func TestEmbeddedReconcileBatches(t *testing.T) {
	for _, pk := range []bool{false, true} {
		t.Run(fmt.Sprintf("pk_indexes=%v", pk), func(t *testing.T) { testEmbeddedReconcileBatches(t, pk) })
	}
}

func testEmbeddedReconcileBatches(t *testing.T, pkIndexes bool) {
	schema, err := os.ReadFile(filepath.Join("..", "..", "testdata", "schema", "settlement.sql"))
	if err != nil {
		t.Fatal(err)
	}
	stmts := strings.Split(string(schema), ";\n")
	for i, s := range stmts {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "--") {
				keep = append(keep, l)
			}
		}
		stmts[i] = strings.Join(keep, "\n")
	}
	const n = 20
	for i := range n {
		stmts = append(stmts,
			fmt.Sprintf("INSERT INTO biz_operation (biz_id, status, version, msg_id, created_at, updated_at) VALUES ('PAY-%02d', 'DEBIT_DONE', 1, 'm-%02d', NOW(3) - INTERVAL 20 MINUTE, NOW(3) - INTERVAL 10 MINUTE)", i, i),
			fmt.Sprintf("INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-%02d', 1, -1.00, 'DEBIT', NOW(3) - INTERVAL 20 MINUTE)", i))
	}
	var cleaned []string
	for _, s := range stmts {
		if strings.TrimSpace(s) != "" {
			cleaned = append(cleaned, s)
		}
	}
	dsn := embeddedDB(t, pkIndexes, cleaned...)
	cfgText, err := os.ReadFile(filepath.Join("..", "..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseWithEnv("settlement.yaml", cfgText, func(k string) (string, bool) {
		if k == "OPCTL_MYSQL_DSN" {
			return dsn, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := mysqlsrc.Open(dsn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got, _ := r.BatchLimit(context.Background()); got <= 0 || got > 8 {
		t.Fatalf("BatchLimit on go-mysql-server = %d, want 1..8", got)
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
		sum, err := reconcile.Run(context.Background(), reconcile.Deps{DB: r, KafkaMissing: "not configured"}, reconcile.Options{
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
	if st.Operations != n || st.Batches < n/8 || st.Fallbacks > 0 {
		t.Errorf("batch stats %+v: want %d operations in batches of at most 8, no statement rejected", st, n)
	}
}
