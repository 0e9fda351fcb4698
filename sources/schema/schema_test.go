package schema_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/schema"
)

// TestAuditDDL: the audit tables have docs/repair.md's columns and keys, run on
// MariaDB, and running them again changes nothing.
func TestAuditDDL(t *testing.T) {
	stmts := schema.AuditDDL("ops_audit")
	if len(stmts) != 2 || !strings.Contains(stmts[0], "CREATE TABLE IF NOT EXISTS `ops_audit` (") ||
		!strings.Contains(stmts[1], "CREATE TABLE IF NOT EXISTS `ops_audit_attempt` (") {
		t.Fatalf("names: %q", stmts)
	}
	for _, want := range []string{
		"plan_id CHAR(64) NOT NULL, action_index INT NOT NULL",
		"biz_id VARCHAR(512) NOT NULL, pipeline VARCHAR(64) NOT NULL, action VARCHAR(32) NOT NULL",
		"before_image JSON NULL, after_image JSON NULL",
		"created_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL",
		"UNIQUE KEY uk_plan_action (plan_id, action_index), KEY ix_biz (biz_id, created_at))",
	} {
		if !strings.Contains(stmts[0], want) {
			t.Errorf("audit table lacks %q", want)
		}
	}
	if !strings.Contains(stmts[1], "detail JSON NULL, created_at DATETIME(6) NOT NULL, KEY ix_plan (plan_id), KEY ix_biz (biz_id))") {
		t.Errorf("attempt table: %s", stmts[1])
	}
	if got := schema.AuditDDL(""); !strings.Contains(got[0], "`opctl_audit`") || !strings.Contains(got[1], "`opctl_audit_attempt`") {
		t.Errorf("default names: %q", got)
	}

	db := testenv.MySQL(t)
	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	for range 2 {
		if err := r.Exec(ctx, stmts); err != nil {
			t.Fatal(err)
		}
	}
	db.Exec(t, "INSERT INTO ops_audit (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, created_at, updated_at) VALUES ('p', 0, 'b', 'x', 'reverse', 'me', 'r', 'applied', NOW(6), NOW(6))")
	if _, err := db.SQL.Exec("INSERT INTO ops_audit (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, created_at, updated_at) VALUES ('p', 0, 'b', 'x', 'reverse', 'me', 'r', 'applied', NOW(6), NOW(6))"); err == nil {
		t.Error("uk_plan_action did not stop a second row for the same plan action")
	}
}

// TestRecommendedRuns: the recommended DDL runs on MariaDB (twice), and the
// journal's unique key stops a second DEBIT (reverses_id NOT NULL DEFAULT 0).
func TestRecommendedRuns(t *testing.T) {
	stmts, err := schema.Recommended(schema.MariaDB)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := schema.Recommended("oracle"); err == nil {
		t.Error("unknown dialect accepted")
	}
	db := testenv.MySQL(t)
	for range 2 {
		db.Exec(t, schema.Script(stmts))
	}
	db.Exec(t, "INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-1', 1, -30, 'DEBIT', NOW(3))")
	if _, err := db.SQL.Exec("INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES ('PAY-1', 1, -30, 'DEBIT', NOW(3))"); err == nil {
		t.Error("a second DEBIT for PAY-1 was accepted")
	}
}
