package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
)

// onlyFiles fails the test when dir holds anything but names (a temporary
// file left behind).
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAtomicFile: the destination changes only on Commit, complete; a
// failed write or an Abort leaves it as it was and no temporary file.
func TestAtomicFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plans.jsonl")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	a, err := createAtomic(path, modeShared, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(a, "new, half"); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, path); got != "old\n" {
		t.Errorf("before Commit the file holds %q", got)
	}
	a.Abort()
	if got := readString(t, path); got != "old\n" {
		t.Errorf("after Abort the file holds %q", got)
	}
	onlyFiles(t, dir, "plans.jsonl")

	err = writeFileAtomic(path, modeShared, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errors.New("disk full")
	})
	if err == nil || readString(t, path) != "old\n" {
		t.Errorf("a failed write: %v, file %q", err, readString(t, path))
	}
	onlyFiles(t, dir, "plans.jsonl")

	if err := writeFileAtomic(path, modeShared, func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if got := readString(t, path); got != "new\n" || fi.Mode().Perm() != 0o600 {
		t.Errorf("replaced: %q mode %v, want the new content and the old file's mode 0600", got, fi.Mode().Perm())
	}
	onlyFiles(t, dir, "plans.jsonl")

	// A new file gets the mode asked for; Commit twice is harmless.
	fresh := filepath.Join(dir, "new.json")
	a, err = createAtomic(fresh, modeShared, false)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(a, "{}\n")
	if err := a.Commit(); err != nil || a.Commit() != nil {
		t.Fatal(err)
	}
	a.Abort()
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o644 {
		t.Errorf("new file mode %v, want 0644", fi.Mode().Perm())
	}
}

// TestAtomicFileDestinations: a symbolic link as the last component is
// never written through to a file (a link planted in a shared directory
// made --out overwrite its target): refused, the target and the link as
// they were; a link to a stream (/dev/stdout's kind) and a stream itself
// (/dev/null, a pipe with a reader) are written directly; a pipe no
// process reads is an error at once, not a hang; noClobber never replaces
// a file, not even one that appears while writing.
func TestAtomicFileDestinations(t *testing.T) {
	dir := t.TempDir()
	target, link := filepath.Join(dir, "real.jsonl"), filepath.Join(dir, "link.jsonl")
	if err := os.WriteFile(target, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	write := func(path string) error {
		return writeFileAtomic(path, modeShared, func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err })
	}
	if err := write(link); err == nil || !strings.Contains(err.Error(), "is a symbolic link: opctl does not write through a link") {
		t.Errorf("through a symlink to a file: %v", err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 || readString(t, target) != "old\n" {
		t.Errorf("through a symlink: link %v (%v), target %q", fi, err, readString(t, target))
	}
	dangling := filepath.Join(dir, "dangling.jsonl")
	if err := os.Symlink(filepath.Join(dir, "created-through-link"), dangling); err != nil {
		t.Fatal(err)
	}
	if err := write(dangling); err == nil || !strings.Contains(err.Error(), "a symbolic link to nothing") {
		t.Errorf("through a dangling symlink: %v", err)
	}
	onlyFiles(t, dir, "dangling.jsonl", "link.jsonl", "real.jsonl")

	if err := write(os.DevNull); err != nil {
		t.Errorf("%s: %v", os.DevNull, err)
	}
	null := filepath.Join(dir, "null.jsonl")
	if err := os.Symlink(os.DevNull, null); err != nil {
		t.Fatal(err)
	}
	if err := write(null); err != nil {
		t.Errorf("a link to %s: %v", os.DevNull, err)
	}
	os.Remove(null)

	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- write(fifo) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "a named pipe no process reads") {
			t.Errorf("a pipe without a reader: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("writing a named pipe without a reader still waits after 10s")
	}
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(fifo); err != nil {
		t.Errorf("a pipe with a reader: %v", err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if string(got) != "new\n" {
		t.Errorf("the pipe's reader got %q", got)
	}
	os.Remove(fifo)

	cfg := filepath.Join(dir, "opctl.yaml")
	if _, err := createAtomic(target, modePrivate, true); !errors.Is(err, fs.ErrExist) {
		t.Errorf("noClobber on an existing file: %v", err)
	}
	a, err := createAtomic(cfg, modePrivate, true)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(a, "mine\n")
	if err := os.WriteFile(cfg, []byte("theirs\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Commit(); !errors.Is(err, fs.ErrExist) || readString(t, cfg) != "theirs\n" {
		t.Errorf("a file that appeared: %v, %q", err, readString(t, cfg))
	}
	onlyFiles(t, dir, "dangling.jsonl", "link.jsonl", "opctl.yaml", "real.jsonl")
}

// TestReconcileOutIsAtomic: --out holds the previous run's targets until a
// run ends, then exactly this run's; an interrupted or failed run leaves
// it byte for byte as it was and says so. (The 200 lines an interrupt once
// truncated to 0 bytes.)
func TestReconcileOutIsAtomic(t *testing.T) {
	cfg := &config.Config{Path: "opctl.yaml", Pipelines: []config.Pipeline{{Name: "settlement"}}}
	var old strings.Builder
	for i := range 200 {
		fmt.Fprintf(&old, `{"biz_id":"OLD-%d","pipeline":"settlement","check":"stuck","verdict":"STRANDED","detail":"d"}`+"\n", i)
	}
	target := func(id string) reconcile.Result {
		return reconcile.Result{Target: reconcile.Target{BizID: id, Pipeline: "settlement", Check: "stuck", Verdict: inspect.Stranded, Detail: "d"},
			Severity: inspect.SeverityAction}
	}
	for _, tc := range []struct {
		name string
		end  func() (*reconcile.Summary, error)
		code int
		want string // --out afterwards; "" the old content
		msg  string
	}{
		{name: "ended", end: func() (*reconcile.Summary, error) { return &reconcile.Summary{Targets: 2}, nil }, code: ExitAttention,
			want: `{"biz_id":"NEW-1","pipeline":"settlement","check":"stuck","verdict":"STRANDED","detail":"d"}` + "\n" +
				`{"biz_id":"NEW-2","pipeline":"settlement","check":"stuck","verdict":"STRANDED","detail":"d"}` + "\n"},
		{name: "interrupted", end: func() (*reconcile.Summary, error) {
			return &reconcile.Summary{Targets: 2, Interrupted: &reconcile.Interruption{Pipeline: "settlement", Check: "stuck", Rows: 7}}, context.Canceled
		}, code: ExitInterrupted, msg: "2 target(s) found so far; --out "},
		{name: "failed", end: func() (*reconcile.Summary, error) { return nil, errors.New("mysql 127.0.0.1:1: connection refused") },
			code: ExitError, msg: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "targets.jsonl")
			if err := os.WriteFile(out, []byte(old.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			run := func(_ context.Context, _ reconcile.Options, emit func(reconcile.Result) error) (*reconcile.Summary, error) {
				for _, id := range []string{"NEW-1", "NEW-2"} {
					if err := emit(target(id)); err != nil {
						return nil, err
					}
					// While the run goes on, --out is the old file, whole.
					if got := readString(t, out); got != old.String() {
						t.Fatalf("during the run --out holds %d bytes, want the old %d", len(got), old.Len())
					}
				}
				return tc.end()
			}
			ios, _, _, stderr := iostreams.Test()
			err := runReconcile(context.Background(), &ReconcileOptions{IO: ios, Timeout: 1e9, Output: FormatJSONL, Out: out, Chunk: 10,
				Config: func() (*config.Config, error) { return cfg, nil }, Reconcile: func() (reconcile.Func, error) { return run, nil }})
			if code := exitCode(err, false); code != tc.code {
				t.Fatalf("exit %d (%v), want %d", code, err, tc.code)
			}
			want := tc.want
			if want == "" {
				want = old.String()
				if !strings.Contains(stderr.String()+fmt.Sprint(err), "--out "+out+" was left as it was") {
					t.Errorf("the run does not say --out was kept: %v\n%s", err, stderr)
				}
			}
			if got := readString(t, out); got != want {
				t.Errorf("--out afterwards (%d bytes):\n%.300s\nwant (%d bytes):\n%.300s", len(got), got, len(want), want)
			}
			if tc.msg != "" && !strings.Contains(stderr.String(), tc.msg) {
				t.Errorf("stderr lacks %q:\n%s", tc.msg, stderr)
			}
			onlyFiles(t, dir, "targets.jsonl")
		})
	}
}

// TestPlanFileNotRegularRefused: repair apply and repair show of a plan
// "file" that is a named pipe or a device refuse it at once. (A FIFO hung
// forever and ignored SIGINT and SIGTERM.)
func TestPlanFileNotRegularRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "plan.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, os.DevNull} {
		done := make(chan error, 1)
		go func() { _, err := readPlans(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path+" is a ") || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("readPlans(%s): %v", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("readPlans(%s) still waits after 10s", path)
		}
	}
}
