package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
)

// syncBuf is a buffer the demo writes from its goroutines and the test
// reads.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// eventLine finds the demo's printed line of event kind for id.
func eventLine(out, kind, id string) string {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 4 && f[1] == kind && f[3] == id {
			return l
		}
	}
	return ""
}

// TestWatchDemo runs `go run ./lab/demo --watch` on the embedded server
// with two incidents the recovery worker repairs (a double debit, a
// wrongly skipped event): each is flagged by a poll while the worker is
// paused, then repaired and cleared, the summary says so, and it exits 0.
func TestWatchDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the lab")
	}
	t.Parallel()
	ios, _, out, errOut := iostreams.Test()
	code := run(context.Background(), ios, []string{"--watch", "--scenario", "settlement-double-debit,order-wrongly-skipped"})
	stdout := out.String()
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, errOut)
	}
	for _, id := range []string{"PAY-D-1", "O-S-1"} {
		flagged, repaired, cleared := eventLine(stdout, "flagged", id), eventLine(stdout, "repaired", id), eventLine(stdout, "cleared", id)
		if flagged == "" || repaired == "" || cleared == "" {
			t.Errorf("%s: flagged %q, repaired %q, cleared %q\nstdout:\n%s", id, flagged, repaired, cleared, stdout)
		}
		if !strings.Contains(flagged, " poll ") || strings.Index(stdout, flagged) > strings.Index(stdout, repaired) || strings.Index(stdout, repaired) > strings.Index(stdout, cleared) {
			t.Errorf("%s: want flagged by a poll, then repaired, then cleared:\n%s", id, stdout)
		}
	}
	if !strings.Contains(stdout, "every incident was flagged, and every one the worker may repair repaired and cleared") ||
		!strings.Contains(stdout, "paused") || strings.ContainsRune(stdout, '\x1b') {
		t.Errorf("stdout:\n%s", stdout)
	}
	if strings.Contains(errOut.String(), "opctl: interrupted") {
		t.Errorf("the demo's stop of its watch is said as an interrupt:\n%s", errOut)
	}
}

// TestWatchDemoNext: the commands `go run ./lab/demo --watch --keep`
// prints for another terminal run as printed (the go build line is done
// by the test, as the README tour's test does), from the directory it
// writes opctl-lab.yaml to: /targets lists the kept incident, /readyz and
// /metrics answer, opctl where reads it, and opctl tui --watch opens on a
// terminal (script(1)) and quits on q.
func TestWatchDemoNext(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the lab and builds opctl")
	}
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	buildOpctl(t, bin)
	srv, dsn, err := startEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sel, err := lab.Select([]string{"settlement-double-debit"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &syncBuf{}, &syncBuf{}
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut}
	done := make(chan error, 1)
	go func() {
		done <- runWatchDemo(ctx, ios, &options{MySQLDSN: dsn, embedded: true, Watch: true, Keep: true, NoRepair: true, selected: sel, keepDir: dir})
	}()
	var next []string
	for deadline := time.Now().Add(2 * time.Minute); next == nil; time.Sleep(100 * time.Millisecond) {
		if _, after, ok := strings.Cut(out.String(), "NEXT"); ok && strings.Contains(after, "opctl where") {
			for _, l := range strings.Split(after, "\n")[1:] {
				if l = strings.TrimSpace(l); l != "" {
					next = append(next, l)
				}
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the demo ended: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no NEXT after 2 minutes\nstdout:\n%s\nstderr:\n%s", out, errOut)
		}
	}
	sh := &labShell{dir: dir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OPCTL_") && !strings.HasPrefix(kv, "PATH=") {
			sh.env = append(sh.env, kv)
		}
	}
	sh.env = append(sh.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "OPCTL_CONFIG=opctl-lab.yaml", "NO_COLOR=1")
	ran := 0
	for _, line := range next {
		switch {
		case strings.HasPrefix(line, "go build"):
			if !strings.Contains(line, "OPCTL_CONFIG=opctl-lab.yaml") {
				t.Errorf("the setup line %q does not set OPCTL_CONFIG as the test does", line)
			}
			continue
		case strings.HasPrefix(line, "opctl tui "):
			// q once the console drew its first read of /targets
			// (console fails the test when it never does).
			sh.console(t, line, "PAY-D-1")
		case strings.HasPrefix(line, "curl -s ") && strings.HasSuffix(line, "/targets"):
			if r := sh.run(t, line, 0); !strings.Contains(r.out, `"biz_id":"PAY-D-1"`) {
				t.Errorf("$ %s:\n%s", line, r.out)
			}
		case strings.Contains(line, "/metrics"):
			if r := sh.run(t, line, 0); !strings.Contains(r.out, `opctl_watch_targets{pipeline="settlement",verdict="DUPLICATE_EFFECT"} 1`) {
				t.Errorf("$ %s:\n%s", line, r.out)
			}
		case strings.HasPrefix(line, "opctl where "):
			sh.run(t, line, 3) // exit 3: it needs action
		default:
			sh.run(t, line, 0)
		}
		ran++
	}
	if ran < 5 {
		t.Errorf("only %d of the NEXT lines ran: %q", ran, next)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the kept demo: %v", err)
	}
}
