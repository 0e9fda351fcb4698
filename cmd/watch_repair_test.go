package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// TestWatchRepairRun runs `opctl watch --repair STATE_BEHIND` in process
// (under -race, the worker beside the watcher and the HTTP server): the
// fixture's STATE_BEHIND operation PAY-4 is flagged, repaired through
// repair apply's path with operator opctl-watch@host, and the watch stops
// on the interrupt; the other flagged verdicts are left alone.
func TestWatchRepairRun(t *testing.T) {
	f := repairFixture(t)
	ts := f.createdAt("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-4'")
	p, off := f.produce("PAY-4", "m-4", ts)
	f.db.Exec(t, "UPDATE biz_operation SET src_partition = ?, src_offset = ? WHERE biz_id = 'PAY-4'", p, off)
	f.k.Commit(t, "settlement-consumer", "settlement-event", p, off+1)
	events := filepath.Join(t.TempDir(), "events.jsonl")
	ios, _, _, errOut := iostreams.Test()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, ios, []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "5s",
			"watch", "--listen", "127.0.0.1:0", "--interval", "100ms", "--older-than", "1h", "--since", "1d", "--state", "none", "--events", events,
			"--repair", "STATE_BEHIND"})
	}()
	var lines string
	for i := 0; i < 600 && !strings.Contains(lines, `"event":"repaired"`); i++ {
		time.Sleep(50 * time.Millisecond)
		b, _ := os.ReadFile(events)
		lines = string(b)
	}
	cancel()
	if code := <-done; code != ExitInterrupted {
		t.Errorf("exit %d, want %d; stderr:\n%s", code, ExitInterrupted, errOut)
	}
	if !strings.Contains(lines, `"event":"repaired","at":`) || !strings.Contains(lines, `"biz_id":"PAY-4","verdict":"WILL_REDELIVER"`) {
		t.Fatalf("no repaired line for PAY-4:\n%s\nstderr:\n%s", lines, errOut)
	}
	host, _ := os.Hostname()
	var n int
	var op string
	if err := f.db.SQL.QueryRow("SELECT COUNT(*), MIN(operator) FROM opctl_audit WHERE biz_id = 'PAY-4'").Scan(&n, &op); err != nil || n != 2 || op != "opctl-watch@"+host {
		t.Errorf("audit of PAY-4: %d rows by %q (%v), want 2 by opctl-watch@%s", n, op, err, host)
	}
	var others int
	if err := f.db.SQL.QueryRow("SELECT COUNT(*) FROM opctl_audit WHERE biz_id <> 'PAY-4'").Scan(&others); err != nil || others != 0 {
		t.Errorf("%d audit rows of other operations (%v): only STATE_BEHIND is repaired", others, err)
	}
}
