// Package bench holds opctl's benchmarks: the scripts beside this file
// (startup.sh, reconcile.sh) and the start-up check below.
package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: the master, which the test never
// answers, and the slave the program runs on.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("SKIP: no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestVersionUnderASilentTerminal: `opctl version` on a terminal that never
// answers a query (its master is never read until the program has ended)
// prints and exits at once. A library whose package init asks the terminal
// something (bubbletea v1: OSC 11, then a cursor report) would wait for the
// answer, 5 s, in every command (docs/tui.md#one-binary). The time is
// logged (go test -v ./lab/bench -run Silent); the bound, 1 s, only
// separates "never waits" from "waits for the terminal" on a loaded machine.
func TestVersionUnderASilentTerminal(t *testing.T) {
	// OPCTL_BIN checks another build (an older one, to see the test fail).
	bin := os.Getenv("OPCTL_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "opctl")
		if out, err := exec.Command("go", "build", "-o", bin, "github.com/opctl-dev/opctl").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	var times []time.Duration
	for range 5 {
		master, slave := openPTY(t)
		c := exec.Command(bin, "version")
		c.Stdin, c.Stdout, c.Stderr = slave, slave, slave
		c.Env = append(os.Environ(), "TERM=xterm-256color", "COLORTERM=truecolor")
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
		start := time.Now()
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case err := <-done:
			took := time.Since(start)
			if err != nil {
				t.Fatalf("opctl version: %v", err)
			}
			times = append(times, took)
		case <-time.After(time.Second):
			_ = c.Process.Kill()
			<-done
			t.Fatalf("opctl version under a terminal that does not answer: still running after 1s (it waits for the terminal)")
		}
		// Only now is the terminal read: what the program wrote.
		_ = master.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 4096)
		n, _ := master.Read(buf)
		if out := string(buf[:n]); !strings.Contains(out, "opctl") {
			t.Fatalf("opctl version wrote %q to the terminal", out)
		}
		if n := strings.Count(string(buf[:n]), "\x1b"); n > 0 {
			t.Errorf("opctl version wrote %d escape sequence(s) to the terminal: %q", n, buf[:n])
		}
	}
	slices.Sort(times)
	t.Logf("opctl version on a silent pty: median %v, min %v, max %v (5 runs, process start to exit)", times[len(times)/2], times[0], times[len(times)-1])
}
