package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// TestEmbeddedSnapshotRefused: the demo's go-mysql-server does not parse
// START TRANSACTION WITH CONSISTENT SNAPSHOT, so a watch on it cannot
// confirm a target in one snapshot (docs/watch.md#how-it-works, step 7):
// the snapshot read fails, not partially, naming the statement, the
// next one the same way without asking the server again, and the
// ordinary read still answers (the batch's verdicts stand).
func TestEmbeddedSnapshotRefused(t *testing.T) {
	dsn := embeddedDB(t, settlementSQL(t)...).DSN
	cfg := settlementConfig(t, dsn)
	r, err := mysqlsrc.Open(dsn, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := cfg.Pipeline("settlement")
	ctx := context.Background()
	_, first := r.ReadOperationSnapshot(ctx, p, "", "PAY-01")
	var pe *mysqlsrc.PartialError
	if first == nil || errors.As(first, &pe) || !strings.Contains(first.Error(), "CONSISTENT SNAPSHOT") {
		t.Fatalf("snapshot read on go-mysql-server: %v, want the statement refused", first)
	}
	if _, again := r.ReadOperationSnapshot(ctx, p, "", "PAY-01"); again == nil || again.Error() != first.Error() {
		t.Errorf("the next snapshot read: %v, want %v", again, first)
	}
	if _, err := r.ReadOperation(ctx, p, "", "PAY-01"); err != nil {
		t.Errorf("ReadOperation after a refused snapshot: %v", err)
	}
}
