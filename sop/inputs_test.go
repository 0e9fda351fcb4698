package sop

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const drain = "name: drain\ntitle: drain a partition\nverdicts: [WILL_REDELIVER]\nsteps: [{type: where}]\n"

// TestTeamDirSymlinks: sop.dir mounted from a Kubernetes ConfigMap (each
// key a link to ..data/KEY, ..data a link to a hidden timestamped
// directory) is read; a *.yaml entry that is not read — a link out of
// sop.dir or to nothing, a named pipe, a directory — is said, never
// silently ignored. (The ConfigMap's runbooks were ignored without a word.)
func TestTeamDirSymlinks(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "runbooks")
	ts := filepath.Join(dir, "..2026_12_01_13_02_00.123")
	if err := os.MkdirAll(ts, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "drain.yaml"), []byte(drain), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "elsewhere.yaml")
	if err := os.WriteFile(outside, []byte(strings.Replace(drain, "name: drain", "name: elsewhere", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"..data":         filepath.Base(ts),
		"drain.yaml":     "..data/drain.yaml",
		"elsewhere.yaml": "../elsewhere.yaml",
		"gone.yaml":      "..data/gone.yaml",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub.yml"), 0o700); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var lib *Library
	var err error
	go func() { lib, err = Load(dir); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Load still waits after 10s: it opened the named pipe")
	}
	if err != nil {
		t.Fatal(err)
	}
	rb, ok := lib.Get("drain")
	if !ok || rb.Source != filepath.Join(dir, "drain.yaml") {
		t.Fatalf("drain (a link into ..data) not read: %v", lib.Names())
	}
	if _, ok := lib.Get("elsewhere"); ok {
		t.Error("a link out of sop.dir was followed")
	}
	skipped := strings.Join(lib.Skipped, "\n")
	for _, want := range []string{
		filepath.Join(dir, "elsewhere.yaml") + ": a symbolic link to " + outside + ", outside sop.dir, skipped",
		filepath.Join(dir, "gone.yaml") + ": a symbolic link that leads nowhere",
		filepath.Join(dir, "pipe.yaml") + ": not a regular file",
		filepath.Join(dir, "sub.yml") + ": not a regular file",
	} {
		if !strings.Contains(skipped, want) {
			t.Errorf("skipped:\n%s\nwant %q", skipped, want)
		}
	}
	if len(lib.Skipped) != 4 {
		t.Errorf("skipped %d entries, want 4:\n%s", len(lib.Skipped), skipped)
	}
}

// TestReadFileRefusesSpecialFiles: `sop check`, `sop show` and `sop run`
// of a FILE that is a named pipe or a device refuse it at once. (A FIFO
// hung forever.)
func TestReadFileRefusesSpecialFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "rb.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, os.DevNull} {
		done := make(chan error, 1)
		go func() { _, err := ReadFile(path); done <- err }()
		select {
		case err := <-done:
			var list ErrorList
			if !errors.As(err, &list) || !strings.Contains(err.Error(), "runbook "+path+": is a ") || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("ReadFile(%s): %v", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadFile(%s) still waits after 10s", path)
		}
	}
}

// TestWideRunbookRefusedBeforeParsing: a runbook with a mapping of more
// than 256 keys is refused before the YAML parser sees it (its cost grows
// with the square of a mapping's keys: 256 KiB of keys took seconds).
func TestWideRunbookRefusedBeforeParsing(t *testing.T) {
	src := drain + strings.Repeat("k: 1\n", MaxFileSize/5-len(drain))
	start := time.Now()
	_, err := Parse("wide.yaml", []byte(src))
	if err == nil || err.Error() != "runbook wide.yaml:257: the file has a mapping of more than 256 keys here; is this a runbook?" {
		t.Fatalf("err = %v", err)
	}
	t.Logf("refused in %v", time.Since(start))
}
