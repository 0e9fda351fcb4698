package cmd

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab/testenv"
)

// silentServer accepts TCP connections and never answers (a MySQL server
// that hangs before its handshake, a firewall that black-holes the rest).
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never written to
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestSilentServerHonoursTimeout: every command that connects to MySQL,
// the write paths (schema apply, repair apply) included, gives up on a
// server that accepts and never answers within --timeout, with exit 1 and
// a message naming the server, instead of waiting for ever. The run's own
// context has no deadline: only --timeout can end it (the test gives up
// after 20 s).
func TestSilentServerHonoursTimeout(t *testing.T) {
	t.Parallel()
	addr := silentServer(t)
	dsn := "opctl:s3cret-pw@tcp(" + addr + ")/opctl"
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "testdata", "config", "settlement.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "opctl.yaml")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(string(raw), "${OPCTL_MYSQL_DSN}", dsn)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"schema apply --audit", []string{"schema", "apply", "--audit"}, "did not answer within --timeout 300ms"},
		{"schema apply --indexes", []string{"schema", "apply", "--indexes", "--yes"}, addr},
		{"schema check", []string{"schema", "check"}, addr},
		{"audit", []string{"audit", "--biz-id", "PAY-4"}, addr},
		{"where", []string{"where", "PAY-4"}, addr},
		{"reconcile", []string{"reconcile", "--check", "stuck"}, addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runBounded(t, addr, append([]string{"--config", cfgPath, "--brokers", "", "--timeout", "300ms"}, tc.args...), tc.want)
		})
	}
}

// TestRepairApplySilentWriteDSN: repair apply of a real plan gives up on a
// write_dsn that never answers within --timeout (exit 1), before any
// action.
func TestRepairApplySilentWriteDSN(t *testing.T) {
	t.Parallel()
	f := repairFixture(t)
	addr := silentServer(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	if code, _, errOut := f.run("repair", "plan", "PAY-6", "--reason", "timeout test", "--out", plan); code != ExitOK {
		t.Fatalf("plan: exit %d %s", code, errOut)
	}
	runBounded(t, addr, []string{"--config", f.cfg, "--mysql-dsn", "opctl:s3cret-pw@tcp(" + addr + ")/opctl", "--brokers", "",
		"--timeout", "300ms", "repair", "apply", plan, "--yes"}, addr)
	if n := countRows(t, f, "SELECT COUNT(*) FROM balance_journal WHERE kind = 'REVERSAL'"); n != 0 {
		t.Errorf("%d reversals", n)
	}
}

// runBounded runs opctl in process and wants exit 1 with want on stderr,
// no password of a DSN on silent (at addr) printed, and an end within 20 s.
func runBounded(t *testing.T, addr string, args []string, want string) {
	t.Helper()
	type result struct {
		code        int
		out, errOut string
	}
	done := make(chan result, 1)
	go func() {
		ios, _, out, errOut := iostreams.Test()
		code := Run(context.Background(), ios, args)
		done <- result{code, out.String(), errOut.String()}
	}()
	select {
	case r := <-done:
		if r.code != ExitError || !strings.Contains(r.errOut, want) {
			t.Errorf("exit %d, want 1 with %q on stderr:\n%s\n%s", r.code, want, r.out, r.errOut)
		}
		if strings.Contains(r.out+r.errOut, "s3cret-pw") {
			t.Errorf("the DSN's password was printed:\n%s\n%s", r.out, r.errOut)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still waiting for the server at %s, which never answers, 20 s into a run with --timeout 300ms", addr)
	}
}

// TestStalledReadsHonourTimeout: a read that stalls part-way (a proxy that
// stops forwarding the server's answer after N bytes: in Kafka's first
// answer, inside MySQL's handshake) ends with --timeout: Kafka's makes the
// report partial (exit 6, sources.kafka says which timeout), MySQL's is a
// connection error (exit 1); a broker address where another service
// listens (MariaDB's port, an SSH server) is a partial report naming it,
// at once.
func TestStalledReadsHonourTimeout(t *testing.T) {
	t.Parallel()
	f := newFixture(t, "settlement", "settlement-event")
	ssh := testenv.BannerServer(t, []byte(testenv.SSHBanner))
	for _, tc := range []struct {
		name         string
		mysql, kafka int // bytes forwarded, -1 all
		brokers      string
		code         int
		want         string
	}{
		{"Kafka, no answer", -1, 0, "", ExitPartial, "no answer within 1s"},
		{"Kafka, answer cut", -1, 100, "", ExitPartial, "no answer within 1s"},
		{"MySQL, no greeting", 0, -1, "", ExitError, ""}, // the message names the server
		{"MySQL, greeting cut", 40, -1, "", ExitError, ""},
		{"brokers at MariaDB's port", -1, -1, "127.0.0.1:3306", ExitPartial, "127.0.0.1:3306 does not speak Kafka"},
		{"brokers at an SSH server", -1, -1, ssh, ExitPartial, ssh + " does not speak Kafka: it answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			my := testenv.NewStallProxy(t, "127.0.0.1:3306", tc.mysql)
			brokers := tc.brokers
			if brokers == "" {
				brokers = testenv.NewStallProxy(t, f.k.Brokers[0], tc.kafka).Addr
			}
			dsn := strings.Replace(f.db.DSN, "127.0.0.1:3306", my.Addr, 1)
			want := tc.want
			if want == "" {
				want = "mysql " + my.Addr + ": "
			}
			done := make(chan struct{})
			var code int
			var out, errOut string
			go func() {
				defer close(done)
				code, out, errOut = runCLI(context.Background(), false, "--config", f.cfg, "--mysql-dsn", dsn, "--brokers", brokers,
					"--timeout", "1s", "where", "PAY-1", "-o", "json")
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("still waiting 30 s into a run with --timeout 1s")
			}
			if code != tc.code || !strings.Contains(out+errOut, want) {
				t.Errorf("exit %d, want %d with %q:\n%s\n%s", code, tc.code, want, out, errOut)
			}
		})
	}
}

// TestNotKafkaUnderMemoryLimit: the built opctl, under a 3 GB address
// space limit (ulimit -v), pointed at brokers where an SSH server or
// MariaDB listens, gives a partial verdict naming the broker with a peak
// RSS under 200 MiB. Before: sarama sized a buffer by the banner's first
// four bytes (1.4 GB for "SSH-", 1.7 GB for MariaDB's greeting): 1.3-1.66
// GB of RSS, and "fatal error: out of memory" (exit 2) under a limit. The
// limit was 1.5 GB; a Go process reserves most of that as address space
// before it allocates anything (the heap's arena index, a thread stack per
// OS thread), so on a loaded machine the one binary with the console
// inside died in package init: the RSS bound is what tells the bug.
func TestNotKafkaUnderMemoryLimit(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	f := newFixture(t, "settlement", "settlement-event")
	ssh := testenv.BannerServer(t, []byte(testenv.SSHBanner))
	for _, brokers := range []string{ssh, "127.0.0.1:3306"} {
		t.Run(brokers, func(t *testing.T) {
			c := exec.Command("bash", "-c", `ulimit -v 3000000 && exec "$0" "$@"`, bin, "--config", f.cfg, "--mysql-dsn", f.db.DSN,
				"--brokers", brokers, "--timeout", "20s", "where", "PAY-1", "-o", "json")
			var out, errOut bytes.Buffer
			c.Stdout, c.Stderr = &out, &errOut
			err := c.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != ExitPartial {
				t.Fatalf("%v, want exit 6:\n%s", err, errOut.String())
			}
			if !strings.Contains(out.String(), brokers+" does not speak Kafka") {
				t.Errorf("sources.kafka does not name the broker:\n%s", out.String())
			}
			if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > 200<<10 {
				t.Errorf("peak RSS %d KiB", ru.Maxrss)
			}
		})
	}
}
