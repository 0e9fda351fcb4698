package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/lab"
)

// TestKeptLabRedactsPassword: with a --mysql-dsn that has a password, what
// `--keep` prints (the table's THE LAB STAYS UP and the config shown after
// it, and keep.dsn of -o json) never holds the password, while
// ./opctl-lab.yaml, which opctl reads, has it and is readable by its owner
// only, also when the file was there before with a wider mode. (The embedded
// server takes any password for root.)
func TestKeptLabRedactsPassword(t *testing.T) {
	const password = "s3cret-Pw"
	srv, dsn, err := startEmbedded()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	withPassword := strings.Replace(dsn, "root@", "root:"+password+"@", 1)
	if withPassword == dsn {
		t.Fatalf("no user in %s", dsn)
	}
	selected, err := lab.Select([]string{"healthy"})
	if err != nil {
		t.Fatal(err)
	}
	opts := &options{MySQLDSN: withPassword, embedded: true, Keep: true, NoRepair: true, Output: "table", selected: selected}
	var progress strings.Builder
	env, rep, err := startLab(context.Background(), opts, func(format string, args ...any) {
		fmt.Fprintf(&progress, format, args...)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	if !strings.Contains(env.DSN, password) {
		t.Fatalf("the lab's DSN %q lost the password: the test proves nothing", env.DSN)
	}

	ios, _, out, _ := iostreams.Test()
	renderDemo(out, ios, rep, env)
	table := out.String()
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"table": table, "json": string(js), "progress": progress.String()} {
		if strings.Contains(text, password) {
			t.Errorf("the %s output prints the password:\n%s", name, text)
		}
	}
	if rep.Keep == nil || !strings.Contains(rep.Keep.DSN, "root:***@") {
		t.Errorf("keep.dsn = %+v, want the DSN with root:***@", rep.Keep)
	}
	if !strings.Contains(table, "MySQL:   root:***@") || !strings.Contains(table, `dsn: "root:***@`) {
		t.Errorf("THE LAB STAYS UP does not show the redacted DSN and config:\n%s", table)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, keptConfig), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	path, err := writeKeptConfig(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), password) || string(b) != env.RenderConfig() {
		t.Errorf("%s is not the lab's config with its DSN as it is:\n%s", path, b)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s: mode %v (%v), want 0600", path, fi.Mode().Perm(), err)
	}
}
