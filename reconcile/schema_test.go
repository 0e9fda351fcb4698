package reconcile_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/schema"
)

// TestSchemaCheck: schema.Check against IndexNeeds on the settlement schema
// of testdata: the walks that an existing index serves are ok (the
// journal's (created_at) index continues on its id, the state table's
// (status, updated_at) on its primary key); the walks no index serves
// (ledger_entry has no created_at index, biz_operation none on
// (src_partition, src_offset)) are missing, with their DDL; a missing
// column and a missing table are reported; after the DDL nothing is
// missing.
func TestSchemaCheck(t *testing.T) {
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
	rep, err := schema.Check(ctx, r, []*config.Pipeline{p}, reconcile.IndexNeeds(p), "opctl_audit")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.DDL(), "\n")
	want := strings.Join([]string{
		"ALTER TABLE `ledger_entry` ADD INDEX `ix_opctl_created_at_biz_order_id` (`created_at`, `biz_order_id`);",
		"ALTER TABLE `biz_operation` ADD INDEX `ix_opctl_src_partition_src_offset_biz_id` (`src_partition`, `src_offset`, `biz_id`);",
	}, "\n")
	if got != want {
		t.Errorf("DDL:\n%s\nwant:\n%s", got, want)
	}
	var stuckIndex, journalIndex, auditTable bool
	for _, it := range rep.Items {
		if it.Kind == schema.KindIndex && it.Table == "biz_operation" && it.What == "(status, updated_at)" {
			stuckIndex = true
			if it.Status != schema.StatusOK || it.Index != "ix_status_updated" {
				t.Errorf("(status, updated_at) + primary key should be served by ix_status_updated: %+v", it)
			}
		}
		if it.Kind == schema.KindIndex && it.Table == "balance_journal" && it.What == "(created_at)" {
			journalIndex = true
			if it.Status != schema.StatusOK || it.Index != "ix_created" || !strings.Contains(it.Why, "ix_created does not hold biz_id") {
				t.Errorf("the journal's walk by created_at should be served by ix_created (+ id), noting it reads biz_id from the row: %+v", it)
			}
		}
		if it.Table == "opctl_audit" {
			auditTable = true
			if it.Status != schema.StatusAbsent {
				t.Errorf("audit table: %+v", it)
			}
		}
	}
	if !stuckIndex || !journalIndex {
		t.Errorf("no item for the (status, updated_at) index stuck walks or the (created_at) index duplicates walk: %+v", rep.Items)
	}
	if !auditTable {
		t.Errorf("no item for the audit table opctl_audit: %+v", rep.Items)
	}
	if err := r.Exec(ctx, rep.DDL()); err != nil {
		t.Fatal(err)
	}
	rep, _ = schema.Check(ctx, r, []*config.Pipeline{p}, reconcile.IndexNeeds(p), "")
	if m := rep.Missing(); len(m) != 0 {
		t.Errorf("after the DDL, still missing: %+v", m)
	}

	p.State.Owner = "holder"
	p.Steps[1].Scan.Table = "ledger_gone"
	rep, _ = schema.Check(ctx, r, []*config.Pipeline{p}, reconcile.IndexNeeds(p), "")
	var missing []string
	for _, it := range rep.Missing() {
		missing = append(missing, it.Kind+" "+it.Table+" "+it.What)
	}
	if strings.Join(missing, "; ") != "column biz_operation holder; table ledger_gone " {
		t.Errorf("missing: %q", missing)
	}
}

// TestIgnoredIndex: an index MariaDB ignores (ALTER TABLE t ALTER INDEX i
// IGNORED) serves nothing: schema check reports the need missing and says
// which index would serve (its own ix_opctl_ index: the DDL enables it
// rather than adding it again, which its name would refuse), reconcile
// refuses the check instead of forcing the index (Error 1176), and after
// the DDL nothing is missing.
func TestIgnoredIndex(t *testing.T) {
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
	check := func() *schema.Report {
		t.Helper()
		rep, err := schema.Check(ctx, r, []*config.Pipeline{p}, reconcile.IndexNeeds(p), "")
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if err := r.Exec(ctx, check().DDL()); err != nil {
		t.Fatal(err)
	}
	db.Exec(t, "ALTER TABLE ledger_entry ALTER INDEX ix_opctl_created_at_biz_order_id IGNORED")

	rep := check()
	var missing []schema.Item
	for _, it := range rep.Items {
		if it.Status == schema.StatusMissing {
			missing = append(missing, it)
		}
	}
	enable := "ALTER TABLE `ledger_entry` ALTER INDEX `ix_opctl_created_at_biz_order_id` NOT IGNORED;"
	if len(missing) != 1 || missing[0].Table != "ledger_entry" || missing[0].What != "(created_at)" ||
		!strings.Contains(missing[0].Why, "index ix_opctl_created_at_biz_order_id would serve but is ignored") || missing[0].DDL != enable {
		t.Fatalf("schema check with the index ignored: missing %+v, want ledger_entry (created_at) with %q", missing, enable)
	}

	sum, err := reconcile.Run(ctx, reconcile.Deps{DB: r, Collector: &sources.Collector{DB: r, KafkaMissing: "not configured", Timeout: 10 * time.Second}},
		reconcile.Options{Pipelines: []*config.Pipeline{p}, Checks: []string{reconcile.CheckDuplicates}, Timeout: 10 * time.Second}, func(reconcile.Result) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if cs := sum.Checks[0]; cs.Status != reconcile.StatusRefused || !strings.Contains(cs.Reason, enable) {
		t.Errorf("duplicates with the index ignored: %s %q, want refused naming %q", cs.Status, cs.Reason, enable)
	}

	if err := r.Exec(ctx, rep.DDL()); err != nil {
		t.Fatal(err)
	}
	if m := check().Missing(); len(m) != 0 {
		t.Errorf("after the DDL, still missing: %+v", m)
	}
}
