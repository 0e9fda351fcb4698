package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
	"github.com/opctl-dev/opctl/sources/schema"
)

// TestApplyTimeoutBoundsOnlyConnecting: --timeout bounds reaching the
// write database, not the DDL: a statement that runs longer than it (an
// index build on a large table) completes (docs/config.md "Timeouts").
func TestApplyTimeoutBoundsOnlyConnecting(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	cfg := &config.Config{MySQL: config.MySQL{DSN: db.DSN}}
	w, err := connect.OpenWriter(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := time.Now()
	if err := schema.Apply(context.Background(), w, 200*time.Millisecond, []string{"DO SLEEP(1)", "CREATE TABLE slow_ddl (id INT PRIMARY KEY)"}); err != nil {
		t.Fatalf("a statement longer than --timeout: %v (on %q)", err, w.Addr())
	}
	if el := time.Since(start); el < time.Second {
		t.Fatalf("returned after %v: the statement did not run", el)
	}
	var n int
	if err := db.SQL.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'slow_ddl'", db.Name).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the table after the slow statement: %d (%v)", n, err)
	}
}
