package cmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/reconcile/watch/worker"
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
			"--repair", "STATE_BEHIND", "--repair-after", "200ms"})
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

// TestWatchRepairTwoWorkersWithoutLock: what if leadership failed and two
// workers (two processes' services: their own pools) repaired the same
// STATE_BEHIND operation at once? The apply path alone keeps it to one
// repair: the plan's lock and the audit (a second apply of one plan is
// "already applied"), the stale check (a second plan of the same
// operation is refused), or the triage (planned after the first repair:
// nothing to repair). One plan in the audit, one record sent.
func TestWatchRepairTwoWorkersWithoutLock(t *testing.T) {
	f := repairFixture(t)
	ts := f.createdAt("SELECT created_at FROM biz_operation WHERE biz_id = 'PAY-4'")
	p, off := f.produce("PAY-4", "m-4", ts)
	f.db.Exec(t, "UPDATE biz_operation SET src_partition = ?, src_offset = ? WHERE biz_id = 'PAY-4'", p, off)
	f.k.Commit(t, "settlement-consumer", "settlement-event", p, off+1)
	before := redriveEnd(t, f, "settlement-event", "PAY-4")
	flags := func() []watch.Flag {
		return []watch.Flag{{Event: watch.Event{Event: watch.Flagged, Pipeline: "settlement", BizID: "PAY-4", Verdict: "STATE_BEHIND", Severity: "action"}}}
	}
	var workers [2]*worker.Worker
	for i := range workers {
		ios, _, _, _ := iostreams.Test()
		fac := NewFactory(ios, "test")
		fac.Globals.ConfigPath, fac.Globals.MySQLDSN, fac.Globals.Brokers, fac.Globals.Timeout = f.cfg, f.db.DSN, f.k.Brokers, 5*time.Second
		t.Cleanup(func() { _ = fac.Close() })
		svc, err := fac.Service()
		if err != nil {
			t.Fatal(err)
		}
		tr, err := fac.Triage()
		if err != nil {
			t.Fatal(err)
		}
		expect, err := repairExpect([]inspect.Code{inspect.StateBehind})
		if err != nil {
			t.Fatal(err)
		}
		workers[i] = &worker.Worker{Verdicts: []inspect.Code{inspect.StateBehind}, Operator: fmt.Sprintf("opctl-watch@w%d", i), Service: svc,
			Targets: flags, Expect: func(c inspect.Code) []inspect.Code { return expect[c] }, Retry: 20 * time.Millisecond,
			Triage: func(ctx context.Context, pipeline, biz string) (inspect.Report, error) {
				res, err := tr.Triage(ctx, biz, pipeline)
				if err != nil {
					return inspect.Report{}, err
				}
				return res.Ops[0].Report, nil
			}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() { defer wg.Done(); _ = w.Run(ctx) }()
	}
	// Both have looked at PAY-4 once the audit holds the repair and one
	// second more has passed (each tries it at once; a second try is not
	// made of a flag already handled).
	var n int
	for i := 0; i < 200 && n < 2; i++ {
		time.Sleep(50 * time.Millisecond)
		_ = f.db.SQL.QueryRow("SELECT COUNT(*) FROM opctl_audit WHERE biz_id = 'PAY-4'").Scan(&n)
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	var plans, rows int
	if err := f.db.SQL.QueryRow("SELECT COUNT(DISTINCT plan_id), COUNT(*) FROM opctl_audit WHERE biz_id = 'PAY-4'").Scan(&plans, &rows); err != nil {
		t.Fatal(err)
	}
	sent := redriveEnd(t, f, "settlement-event", "PAY-4") - before
	s0, r0 := workers[0].State()
	s1, r1 := workers[1].State()
	if plans != 1 || rows != 2 || sent != 1 {
		t.Fatalf("PAY-4: %d plan(s), %d audit rows, %d record(s) sent; want 1, 2, 1 (workers %s/%s, %s/%s)", plans, rows, sent, s0, r0, s1, r1)
	}
	t.Logf("two workers at once: 1 plan applied, 1 record sent; worker states %s/%s, %s/%s", s0, r0, s1, r1)
}
