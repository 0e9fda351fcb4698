package cmd

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile/watch/worker"
)

func TestNewCmdWatch(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_STATE_HOME", xdg)
	for _, tc := range []struct {
		args     []string
		code     int
		interval time.Duration
		listen   string
		state    string
	}{
		{[]string{"watch"}, 0, time.Second, DefaultWatchListen, filepath.Join(xdg, "opctl", "watch.json")},
		{[]string{"watch", "--interval", "250ms", "--listen", "127.0.0.1:0", "--since", "2d", "--pipeline", "settlement"}, 0, 250 * time.Millisecond, "127.0.0.1:0",
			filepath.Join(xdg, "opctl", "watch-settlement.json")},
		{[]string{"watch", "--state", "none"}, 0, time.Second, DefaultWatchListen, "none"},
		{[]string{"watch", "--repair", "UNKNOWN_OUTCOME"}, ExitUsage, 0, "", ""},
		{[]string{"watch", "--repair", "STRANDED", "--max-repairs-per-minute", "0"}, ExitUsage, 0, "", ""},
		{[]string{"watch", "--repair-pause-file", "/tmp/pause"}, ExitUsage, 0, "", ""},
		{[]string{"watch", "--repair", "STRANDED", "--repair-after", "-1s"}, ExitUsage, 0, "", ""},
		{[]string{"watch", "--repair-after", "1s"}, ExitUsage, 0, "", ""},
		{[]string{"watch", "--interval", "1ms"}, ExitUsage, 0, "", ""},
		{[]string{"watch", "extra"}, ExitUsage, 0, "", ""},
		{[]string{"watch", "--source", "binlog", "--state", "none"}, 0, time.Second, DefaultWatchListen, "none"},
		{[]string{"watch", "--source", "poll", "--state", "none"}, 0, time.Second, DefaultWatchListen, "none"},
		{[]string{"watch", "--source", "replica"}, ExitUsage, 0, "", ""},
	} {
		var got *WatchOptions
		code := runReplaced(t, "watch", func(f *Factory) *cobra.Command {
			return NewCmdWatch(f, func(_ context.Context, o *WatchOptions) error { got = o; return nil })
		}, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
			continue
		}
		if tc.code != 0 {
			if got != nil {
				t.Errorf("%v: ran with %+v", tc.args, got)
			}
			continue
		}
		if got == nil || got.Interval != tc.interval || got.Listen != tc.listen || got.State != tc.state {
			t.Errorf("%v: options %+v", tc.args, got)
		}
		want := WatchSourceAuto
		if i := slices.Index(tc.args, "--source"); i >= 0 {
			want = tc.args[i+1]
		}
		if got.Source != want {
			t.Errorf("%v: --source %q, want %q", tc.args, got.Source, want)
		}
	}
}

// TestNewCmdWatchRepair: --repair's verdicts are parsed, the operator is
// opctl-watch@host; one it does not repair is a usage error naming those
// it does.
func TestNewCmdWatchRepair(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	var got *WatchOptions
	code := runReplaced(t, "watch", func(f *Factory) *cobra.Command {
		return NewCmdWatch(f, func(_ context.Context, o *WatchOptions) error { got = o; return nil })
	}, "watch", "--repair", "stranded,STATE_BEHIND", "--max-repairs-per-minute", "3", "--repair-pause-file", "/run/pause", "--repair-after", "2s")
	host, _ := os.Hostname()
	if code != 0 || got == nil || fmt.Sprint(got.Recovery.Verdicts) != "[STRANDED STATE_BEHIND]" || got.Recovery.PerMinute != 3 ||
		got.Recovery.PauseFile != "/run/pause" || got.Recovery.RepairAfter != 2*time.Second || got.Recovery.Operator != "opctl-watch@"+host {
		t.Fatalf("exit %d options %+v", code, got)
	}
	got = nil
	if code := runReplaced(t, "watch", func(f *Factory) *cobra.Command {
		return NewCmdWatch(f, func(_ context.Context, o *WatchOptions) error { got = o; return nil })
	}, "watch", "--repair", "STRANDED"); code != 0 || got == nil || got.Recovery.RepairAfter != worker.DefaultRepairAfter {
		t.Fatalf("--repair-after's default: exit %d options %+v", code, got)
	}
	ios, _, _, errOut := iostreams.Test()
	if code := Run(context.Background(), ios, []string{"watch", "--repair", "UNKNOWN_OUTCOME"}); code != ExitUsage ||
		!strings.Contains(errOut.String(), "UNKNOWN_OUTCOME is not repaired by the worker") || !strings.Contains(errOut.String(), "it repairs STATE_BEHIND, STRANDED, MISSING_EFFECT, WRONGLY_SKIPPED, DUPLICATE_EFFECT") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	// Every repairable verdict has a runbook that says what its repair
	// leaves: the worker can verify it.
	exp, err := repairExpect([]inspect.Code{inspect.StateBehind, inspect.Stranded, inspect.MissingEffect, inspect.WronglySkipped, inspect.DuplicateEffect})
	if err != nil || !slices.Contains(exp[inspect.Stranded], inspect.WillRedeliver) || slices.Contains(exp[inspect.Stranded], inspect.Stranded) {
		t.Fatalf("expect %v %v", exp, err)
	}
}

// TestWatchSIGINT runs the built opctl watch on a fixture and sends it
// SIGINT once it is ready: it exits 130 within a second and says it
// stopped.
func TestWatchSIGINT(t *testing.T) {
	bin := buildOpctl(t, "")
	f := newFixture(t, "fulfilment", "order-fulfilment")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := startOpctl(t, bin, "--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","),
		"watch", "--listen", addr, "--interval", "100ms", "--state", filepath.Join(t.TempDir(), "watch.json"))
	ready := false
	for i := 0; i < 300 && !ready; i++ {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			ready = resp.StatusCode == http.StatusOK
			resp.Body.Close()
		}
		if !ready {
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !ready {
		_ = p.cmd.Process.Kill()
		p.wait(t)
		t.Fatalf("never ready:\n%s", p.stderr)
	}
	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := p.wait(t)
	took := time.Since(sent)
	t.Logf("stopped %s after SIGINT", took)
	if code != ExitInterrupted || took > time.Second || !strings.Contains(p.stderr.String(), "watch: stopped") {
		t.Fatalf("exit %d after %s, want 130 within 1s:\n%s", code, took, p.stderr)
	}
}
