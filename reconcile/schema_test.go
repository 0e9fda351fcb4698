package reconcile_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/schema"
)

// TestSchemaCheck: schema.Check against IndexNeeds on the settlement schema
// of testdata: the scan-walk and
// uncommitted indexes are missing (with their DDL); a missing column and a
// missing table are reported; after the DDL nothing is missing.
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
		"ALTER TABLE `balance_journal` ADD INDEX `ix_opctl_created_at_biz_id` (`created_at`, `biz_id`);",
		"ALTER TABLE `ledger_entry` ADD INDEX `ix_opctl_created_at_biz_order_id` (`created_at`, `biz_order_id`);",
		"ALTER TABLE `biz_operation` ADD INDEX `ix_opctl_src_partition_src_offset_biz_id` (`src_partition`, `src_offset`, `biz_id`);",
	}, "\n")
	if got != want {
		t.Errorf("DDL:\n%s\nwant:\n%s", got, want)
	}
	var stuckIndex, auditTable bool
	for _, it := range rep.Items {
		if it.Kind == schema.KindIndex && it.What == "(status, updated_at, biz_id)" {
			stuckIndex = true
			if it.Status != schema.StatusOK || it.Index != "ix_status_updated" {
				t.Errorf("(status, updated_at) + primary key should be served by ix_status_updated: %+v", it)
			}
		}
		if it.Table == "opctl_audit" {
			auditTable = true
			if it.Status != schema.StatusAbsent {
				t.Errorf("audit table: %+v", it)
			}
		}
	}
	if !stuckIndex {
		t.Errorf("no item for the (status, updated_at, biz_id) index stuck walks: %+v", rep.Items)
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
