package cmd

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources/schema"
)

// These tests run the shipped binary and send it a real signal: SIGTERM
// and SIGHUP are an interrupt like Ctrl-C (cmd/root.go's NotifyContext),
// so a command stops through its context, records what it must and exits
// 130 (docs/exit-codes.md), and leaves no file truncated.

// started is an opctl process started with its stdout piped (read it with
// lines) and its stderr collected.
type started struct {
	cmd    *exec.Cmd
	lines  chan string
	stderr *bytes.Buffer
	done   chan struct{}
}

func startOpctl(t *testing.T, bin string, args ...string) *started {
	t.Helper()
	c := exec.Command(bin, args...)
	c.Env = append(os.Environ(), "NO_COLOR=1")
	stdout, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s := &started{cmd: c, lines: make(chan string, 1024), stderr: &bytes.Buffer{}, done: make(chan struct{})}
	c.Stderr = s.stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return s
}

// wait waits for the process to exit (at most 60 s) and returns its exit
// code, -1 when a signal killed it.
func (s *started) wait(t *testing.T) int {
	t.Helper()
	<-s.done // stdout closed: the process is gone or closing
	ch := make(chan error, 1)
	go func() { ch <- s.cmd.Wait() }()
	select {
	case err := <-ch:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		t.Fatalf("wait: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("opctl did not exit within 60 s of the signal")
	}
	return 0
}

// TestReconcileSignals: SIGTERM, SIGHUP and SIGINT in the middle of a
// throttled scan that has already found targets: exit 130, the interrupt
// says how far it got, and the 200-line targets file of an earlier run is
// left byte for byte as it was, with no temporary file beside it.
func TestReconcileSignals(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	cfg, _, _ := reconcileFixture(t)
	var old strings.Builder
	for i := range 200 {
		fmt.Fprintf(&old, `{"biz_id":"OLD-%d","pipeline":"settlement","check":"duplicates","verdict":"DUPLICATE_EFFECT","detail":"an earlier run"}`+"\n", i)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out := filepath.Join(dir, "targets.jsonl")
			if err := os.WriteFile(out, []byte(old.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			// 150 rows a second over both journals (about 3500 rows):
			// orders' targets come after some 15 s, settlement's walk goes
			// on some 8 s more.
			p := startOpctl(t, bin, "--config", cfg, "--brokers", "127.0.0.1:1", "--timeout", "3s",
				"reconcile", "--check", "duplicates", "--allow-full-scan", "--since", "30d", "--rate", "150", "--chunk", "10",
				"-o", "jsonl", "--out", out)
			select {
			case line := <-p.lines:
				if !strings.Contains(line, `"biz_id"`) {
					t.Fatalf("first stdout line %q is not a target", line)
				}
			case <-p.done:
				t.Fatalf("reconcile ended before it found a target (the test needs a longer run):\n%s", p.stderr)
			case <-time.After(45 * time.Second):
				t.Fatalf("no target within 45 s:\n%s", p.stderr)
			}
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			code := p.wait(t)
			errOut := p.stderr.String()
			if code != ExitInterrupted || !strings.Contains(errOut, "opctl: interrupted after ") || !strings.Contains(errOut, "of check duplicates on pipeline") {
				t.Fatalf("exit %d, want 130 with how far it got:\n%s", code, errOut)
			}
			if !strings.Contains(errOut, "--out "+out+" was left as it was") {
				t.Errorf("stderr does not say --out was kept:\n%s", errOut)
			}
			if got := readString(t, out); got != old.String() {
				t.Errorf("the earlier targets file changed: %d bytes, want %d", len(got), old.Len())
			}
			onlyFiles(t, dir, "targets.jsonl")
		})
	}
}

// blockingWMS is a WMS lock journal (2 locks for F-1) whose compensation
// POST hangs until its client goes away, once; later POSTs compensate.
type blockingWMS struct {
	mu      sync.Mutex
	locks   int
	posts   int
	block   bool
	entered chan struct{}
	srv     *httptest.Server
}

func newBlockingWMS(t *testing.T) *blockingWMS {
	w := &blockingWMS{locks: 2, block: true, entered: make(chan struct{})}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/wms/locks":
			w.mu.Lock()
			n := w.locks
			w.mu.Unlock()
			if r.URL.Query().Get("biz_id") != "F-1" {
				n = 1
			}
			fmt.Fprintf(rw, `{"count":%d}`, n)
		case "/wms/compensate":
			w.mu.Lock()
			w.posts++
			block := w.block
			w.block = false
			w.mu.Unlock()
			// Read the body: only then does the server notice a client
			// that hangs up (and cancel r.Context()).
			_, _ = io.Copy(io.Discard, r.Body)
			if block {
				close(w.entered)
				select {
				case <-r.Context().Done(): // the interrupted client hung up
				case <-time.After(30 * time.Second):
				}
				http.Error(rw, "too late", http.StatusServiceUnavailable)
				return
			}
			w.mu.Lock()
			w.locks--
			w.mu.Unlock()
			fmt.Fprint(rw, `{"status":"COMPENSATED"}`)
		}
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// TestRepairApplySIGTERM: SIGTERM while apply waits for a compensation
// POST: exit 130; the audit keeps the 'compensating' row written before
// the POST and the attempt that stopped, and the downstream is unchanged.
// Applying the plan again asks the probe (the lock count did not drop),
// sends the POST once and ends as an uninterrupted apply would.
func TestRepairApplySIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	w := newBlockingWMS(t)
	f := newFixture(t, "fulfilment", "order-fulfilment", "${OPCTL_WMS_URL:-http://127.0.0.1:8082}", w.srv.URL,
		"/wms/locks?biz_id={biz_id}\"", "/wms/locks?biz_id={biz_id}\"\n        compensate: \""+w.srv.URL+"/wms/compensate?biz_id={biz_id}\"")
	for _, s := range schema.AuditDDL("") {
		f.db.Exec(t, s)
	}
	args := []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "5s"}
	plan := filepath.Join(t.TempDir(), "plan.json")
	if code, out, errOut := execOpctl(t, bin, nil, append(args, "repair", "plan", "F-1", "--reason", "signal test", "--out", plan)...); code != 0 ||
		!strings.Contains(out, "compensate_remote") {
		t.Fatalf("plan: exit %d\n%s\n%s", code, out, errOut)
	}
	audit := func() string {
		var s string
		if err := f.db.SQL.QueryRow("SELECT IFNULL(GROUP_CONCAT(CONCAT(action_index, ':', action, ':', outcome) ORDER BY id), '') FROM opctl_audit").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	attempts := func() string {
		var s string
		if err := f.db.SQL.QueryRow("SELECT IFNULL(GROUP_CONCAT(CONCAT(action_index, ':', outcome) ORDER BY id), '') FROM opctl_audit_attempt").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}

	p := startOpctl(t, bin, append(args, "repair", "apply", plan, "--yes")...)
	select {
	case <-w.entered:
	case <-p.done:
		t.Fatalf("apply ended before its POST:\n%s", p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("no compensation POST within 30 s:\n%s", p.stderr)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != ExitInterrupted || !strings.Contains(p.stderr.String(), "opctl: interrupted") {
		t.Fatalf("exit %d, want 130:\n%s", code, p.stderr)
	}
	if got := audit(); got != "1:compensate_remote:compensating" {
		t.Errorf("audit after the interrupt: %q, want the compensating row", got)
	}
	if got := attempts(); got != "1:unknown" {
		t.Errorf("attempts after the interrupt: %q, want the stopped action's", got)
	}
	w.mu.Lock()
	locks := w.locks
	w.mu.Unlock()
	if locks != 2 {
		t.Errorf("%d locks after the interrupted POST, want 2", locks)
	}

	code, out, errOut := execOpctl(t, bin, nil, append(args, "repair", "apply", plan, "--yes")...)
	if code != 0 || !strings.Contains(out, "applied 1/1") {
		t.Fatalf("re-apply: exit %d\n%s\n%s", code, out, errOut)
	}
	w.mu.Lock()
	locks, posts := w.locks, w.posts
	w.mu.Unlock()
	if locks != 1 || posts != 2 || audit() != "1:compensate_remote:applied" {
		t.Errorf("after the re-apply: %d locks, %d POSTs, audit %q; want 1 lock, 2 POSTs (one interrupted), applied", locks, posts, audit())
	}
}

// TestTriageSIGTERM: SIGTERM while where, and repair plan --from-file,
// wait for a downstream probe that hangs: exit 130, and the plans file of
// an earlier run is left as it was.
func TestTriageSIGTERM(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	probed := make(chan struct{}, 8)
	hang := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		probed <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	}))
	t.Cleanup(hang.Close)
	f := newFixture(t, "fulfilment", "order-fulfilment", "${OPCTL_WMS_URL:-http://127.0.0.1:8082}", hang.URL)
	args := []string{"--config", f.cfg, "--mysql-dsn", f.db.DSN, "--brokers", strings.Join(f.k.Brokers, ","), "--timeout", "60s"}
	dir := t.TempDir()
	targets, plans := filepath.Join(dir, "targets.jsonl"), filepath.Join(dir, "plans.jsonl")
	if err := os.WriteFile(targets, []byte(`{"biz_id":"F-1","pipeline":"fulfilment","check":"duplicates"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const old = "an earlier run's plans\n"
	if err := os.WriteFile(plans, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"where", []string{"where", "F-1"}, "opctl: interrupted"},
		{"repair plan --from-file", []string{"repair", "plan", "--from-file", targets, "--reason", "r", "--out", plans},
			"opctl: interrupted at line 1 of " + targets + " (0 plan(s) made, 0 target(s) skipped so far); nothing was written to --out " + plans},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startOpctl(t, bin, append(args, tc.args...)...)
			select {
			case <-probed:
			case <-p.done:
				t.Fatalf("ended before the probe:\n%s", p.stderr)
			case <-time.After(30 * time.Second):
				t.Fatalf("no probe within 30 s:\n%s", p.stderr)
			}
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != ExitInterrupted || !strings.Contains(p.stderr.String(), tc.want) {
				t.Fatalf("exit %d, want 130 and %q:\n%s", code, tc.want, p.stderr)
			}
			if got := readString(t, plans); got != old {
				t.Errorf("plans.jsonl changed: %q", got)
			}
			onlyFiles(t, dir, "plans.jsonl", "targets.jsonl")
		})
	}
}

// TestInterruptStalledReads: SIGINT, SIGTERM and SIGHUP while a read of
// every kind is stalled (a TCP proxy that stops forwarding the server's
// answer after N bytes: in MySQL's handshake, in Kafka's first answer)
// stop every command with exit 130 within the interrupt's grace, long
// before --timeout (60 s) would end the read. Before, reconcile let the
// statement in flight run to --timeout (58 s after the signal).
func TestInterruptStalledReads(t *testing.T) {
	t.Parallel()
	bin := buildOpctl(t, "")
	f := newFixture(t, "settlement", "settlement-event")
	mysqlAddr := "127.0.0.1:3306"
	for _, tc := range []struct {
		name    string
		mysql   int // bytes of MySQL's answer forwarded, -1 all
		kafka   int // bytes of Kafka's answer forwarded, -1 all
		command []string
	}{
		{"where, MySQL handshake", 0, -1, []string{"where", "PAY-1"}},
		{"where, MySQL greeting cut", 40, -1, []string{"where", "PAY-1"}},
		{"where, Kafka first answer", -1, 0, []string{"where", "PAY-1"}},
		{"where, Kafka answer cut", -1, 100, []string{"where", "PAY-1"}},
		{"doctor, MySQL", 0, -1, []string{"doctor"}},
		{"doctor, Kafka", -1, 0, []string{"doctor"}},
		{"audit, MySQL", 0, -1, []string{"audit", "--biz-id", "PAY-1"}},
		{"schema check, MySQL", 0, -1, []string{"schema", "check"}},
		{"reconcile, MySQL", 0, -1, []string{"reconcile", "--check", "duplicates", "--allow-full-scan", "--since", "30d"}},
		{"sop run, MySQL", 0, -1, []string{"sop", "run", "stranded", "--biz-id", "PAY-1", "--dry-run", "--reason", "signal test"}},
		{"sop run, Kafka", -1, 0, []string{"sop", "run", "stranded", "--biz-id", "PAY-1", "--dry-run", "--reason", "signal test"}},
	} {
		for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
			t.Run(tc.name+"/"+sig.String(), func(t *testing.T) {
				t.Parallel()
				my := testenv.NewStallProxy(t, mysqlAddr, tc.mysql)
				k := testenv.NewStallProxy(t, f.k.Brokers[0], tc.kafka)
				stalled := my.Stalled()
				if tc.kafka >= 0 {
					stalled = k.Stalled()
				}
				dsn := strings.Replace(f.db.DSN, mysqlAddr, my.Addr, 1)
				p := startOpctl(t, bin, append([]string{"--config", f.cfg, "--mysql-dsn", dsn, "--brokers", k.Addr, "--timeout", "60s"}, tc.command...)...)
				select {
				case <-stalled:
				case <-p.done:
					t.Fatalf("ended before the read stalled:\n%s", p.stderr)
				case <-time.After(30 * time.Second):
					t.Fatalf("the read did not stall within 30 s:\n%s", p.stderr)
				}
				time.Sleep(100 * time.Millisecond) // the read is waiting now
				sent := time.Now()
				if err := p.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				code := p.wait(t)
				took := time.Since(sent)
				if code != ExitInterrupted {
					t.Fatalf("exit %d, want 130:\n%s", code, p.stderr)
				}
				// Not a timing assertion: the read waits for --timeout
				// (60 s) unless the interrupt ends it.
				if took > 30*time.Second {
					t.Errorf("exit %s after the signal: the stalled read ran to --timeout", took.Round(time.Millisecond))
				}
				t.Logf("exit 130 %s after %s", took.Round(time.Millisecond), sig)
			})
		}
	}
}

// TestInterruptible: after an interrupt a command has the grace to stop by
// itself (its own exit code and message); one that does not is abandoned
// with exit 130 and a line saying so.
func TestInterruptible(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stops  bool
		want   int
		stderr string
	}{
		{"stops by itself", true, ExitInterrupted, ""},
		{"ignores the interrupt", false, ExitInterrupted, "opctl: interrupted (what was in flight did not stop within 50ms and was abandoned)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			release := make(chan struct{})
			defer close(release)
			var stderr bytes.Buffer
			got := interruptible(ctx, &stderr, 50*time.Millisecond, func() int {
				cancel()
				if tc.stops {
					return ExitInterrupted
				}
				<-release // a read that does not look at ctx
				return ExitOK
			})
			if got != tc.want || stderr.String() != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d, %q", got, stderr.String(), tc.want, tc.stderr)
			}
		})
	}
	// Without an interrupt nothing is cut short.
	if got := interruptible(context.Background(), io.Discard, time.Nanosecond, func() int { time.Sleep(20 * time.Millisecond); return ExitAttention }); got != ExitAttention {
		t.Errorf("uninterrupted: exit %d, want 3", got)
	}
}
