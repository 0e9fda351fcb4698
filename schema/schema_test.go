package schema_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/config"
	"github.com/opctl-dev/opctl/internal/testenv"
	"github.com/opctl-dev/opctl/schema"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// TestAuditDDL: the audit tables have SPEC §7's columns and keys, run on
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

// TestCheck: on the settlement schema of testdata, the scan-walk and
// uncommitted indexes are missing (with their DDL); a missing column and a
// missing table are reported; after the DDL nothing is missing.
func TestCheck(t *testing.T) {
	db := testenv.MySQL(t)
	db.ExecFile(t, filepath.Join("..", "testdata", "schema", "settlement.sql"))
	cfg, err := config.Load(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	p := &cfg.Pipelines[0]
	r, err := mysqlsrc.Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	rep, err := schema.Check(ctx, r, []*config.Pipeline{p}, "opctl_audit")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.DDL(), "\n")
	want := strings.Join([]string{
		"ALTER TABLE `balance_journal` ADD INDEX `ix_opctl_created_at_biz_id` (`created_at`, `biz_id`);",
		"ALTER TABLE `ledger_entry` ADD INDEX `ix_opctl_created_at_biz_order_id` (`created_at`, `biz_order_id`);",
		"ALTER TABLE `biz_operation` ADD INDEX `ix_opctl_src_partition_src_offset_biz_id` (`src_partition`, `src_offset`, `biz_id`);",
	}, "\n")
	if got != want {
		t.Errorf("DDL:\n%s\nwant:\n%s", got, want)
	}
	for _, it := range rep.Items {
		if it.Kind == schema.KindIndex && it.What == "(status, updated_at, biz_id)" && (it.Status != schema.StatusOK || it.Index != "ix_status_updated") {
			t.Errorf("(status, updated_at) + primary key should be served by ix_status_updated: %+v", it)
		}
		if it.Table == "opctl_audit" && it.Status != schema.StatusAbsent {
			t.Errorf("audit table: %+v", it)
		}
	}
	if err := r.Exec(ctx, rep.DDL()); err != nil {
		t.Fatal(err)
	}
	rep, _ = schema.Check(ctx, r, []*config.Pipeline{p}, "")
	if m := rep.Missing(); len(m) != 0 {
		t.Errorf("after the DDL, still missing: %+v", m)
	}

	p.State.Owner = "holder"
	p.Steps[1].Scan.Table = "ledger_gone"
	rep, _ = schema.Check(ctx, r, []*config.Pipeline{p}, "")
	var missing []string
	for _, it := range rep.Missing() {
		missing = append(missing, it.Kind+" "+it.Table+" "+it.What)
	}
	if strings.Join(missing, "; ") != "column biz_operation holder; table ledger_gone " {
		t.Errorf("missing: %q", missing)
	}
}
