package cmd

import (
	"context"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestNewCmdWatch(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		interval time.Duration
		listen   string
	}{
		{[]string{"watch"}, 0, time.Second, DefaultWatchListen},
		{[]string{"watch", "--interval", "250ms", "--listen", "127.0.0.1:0", "--since", "2d"}, 0, 250 * time.Millisecond, "127.0.0.1:0"},
		{[]string{"watch", "--repair", "STRANDED"}, ExitUsage, 0, ""},
		{[]string{"watch", "--interval", "1ms"}, ExitUsage, 0, ""},
		{[]string{"watch", "extra"}, ExitUsage, 0, ""},
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
		if got == nil || got.Interval != tc.interval || got.Listen != tc.listen {
			t.Errorf("%v: options %+v", tc.args, got)
		}
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
		"watch", "--listen", addr, "--interval", "100ms")
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
