package cmd

import (
	"context"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/sources/schema"
)

// TestSchemaPrint works without a config: the recommended tables and the
// audit tables with their default names; --audit prints only the latter.
func TestSchemaPrint(t *testing.T) {
	t.Setenv("OPCTL_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	code, out, errOut := runCLI(context.Background(), false, "schema", "print", "--audit")
	if code != 0 || out != schema.Script(schema.AuditDDL("")) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(context.Background(), false, "schema", "print", "--dialect", "mariadb")
	for _, want := range []string{"MariaDB >= 10.6", "CREATE TABLE IF NOT EXISTS op_state", "KEY ix_status_updated (status, updated_at)",
		"reverses_id BIGINT        NOT NULL DEFAULT 0", "KEY ix_action_created (action, created_at)", "`opctl_audit_attempt`"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d; print lacks %q", code, want)
		}
	}
	if code, _, _ := runCLI(context.Background(), false, "schema", "print", "--dialect", "oracle"); code != ExitUsage {
		t.Errorf("bad dialect: exit %d", code)
	}
}

// TestSchemaApplyAudit creates the audit tables, idempotently.
func TestSchemaApplyAudit(t *testing.T) {
	cfg, _, db := reconcileFixture(t)
	for range 2 {
		code, out, errOut := runCLI(context.Background(), false, "schema", "apply", "--audit", "--config", cfg)
		if code != 0 || !strings.Contains(out, "applied 2 statement(s)") {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
	}
	var n int
	if err := db.SQL.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME IN ('opctl_audit', 'opctl_audit_attempt')", db.Name).Scan(&n); err != nil || n != 2 {
		t.Fatalf("audit tables: %d (%v)", n, err)
	}
}
