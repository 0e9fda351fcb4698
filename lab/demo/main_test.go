package main

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// TestEmbeddedDemo runs the demo exactly as `go run ./lab/demo -o json`
// does: on the embedded go-mysql-server, with no MariaDB involved.
func TestEmbeddedDemo(t *testing.T) {
	t.Parallel()
	ios, _, out, errOut := iostreams.Test()
	code := run(context.Background(), ios, []string{"-o", "json"})
	var rep struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Scenario string `json:"scenario"`
			BizID    string `json:"biz_id"`
			Verdict  string `json:"verdict"`
			Expected string `json:"expected"`
			OK       bool   `json:"ok"`
		} `json:"checks"`
		Repairs []struct {
			Scenario string `json:"scenario"`
			BizID    string `json:"biz_id"`
			Before   string `json:"before"`
			After    string `json:"after"`
			OK       bool   `json:"ok"`
		} `json:"repairs"`
		Invariants []struct {
			Scenario, Name, Detail string
			Holds                  bool
		} `json:"invariants"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, not JSON: %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
	}
	for _, c := range rep.Checks {
		if !c.OK {
			t.Errorf("%s %s: verdict %s, want %s", c.Scenario, c.BizID, c.Verdict, c.Expected)
		}
	}
	for _, r := range rep.Repairs {
		if !r.OK {
			t.Errorf("repair %s %s: %s before, %s after the redrive", r.Scenario, r.BizID, r.Before, r.After)
		}
	}
	for _, i := range rep.Invariants {
		if !i.Holds {
			t.Errorf("invariant %s %s: %s", i.Scenario, i.Name, i.Detail)
		}
	}
	if code != 0 || !rep.OK || len(rep.Checks) == 0 {
		t.Fatalf("exit %d ok %v checks %d\nstderr: %s", code, rep.OK, len(rep.Checks), errOut)
	}
}

// TestOpctlDoesNotLinkGoMySQLServer guards the start-up time of every opctl
// command: go-mysql-server (and its WebAssembly regex engine) stays in this
// program only.
func TestOpctlDoesNotLinkGoMySQLServer(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/opctl-dev/opctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := string(out)
	if !strings.Contains(deps, "github.com/opctl-dev/opctl/cmd") {
		t.Fatalf("go list -deps output does not look like opctl's graph:\n%.500s", deps)
	}
	for _, bad := range []string{"github.com/dolthub/go-mysql-server", "github.com/dolthub/go-icu-regex", "github.com/tetratelabs/wazero"} {
		if strings.Contains(deps, bad) {
			t.Errorf("opctl links %s", bad)
		}
	}
}

// TestDemoUsage: bad flags are usage errors (exit 2) that change nothing;
// an unreachable --mysql-dsn is one line that names the host, never the
// password (exit 1).
func TestDemoUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown scenario", []string{"--scenario", "healthy,nope"}, exitUsage, `--scenario "nope": no such scenario`},
		{"bad output", []string{"-o", "yaml"}, exitUsage, `--output "yaml"`},
		{"unknown flag", []string{"--bogus"}, exitUsage, "unknown flag: --bogus"},
		{"argument", []string{"extra"}, exitUsage, `unexpected argument "extra"`},
		{"tui", []string{"--tui"}, exitUsage, "not built yet"},
		{"no server", []string{"--mysql-dsn", "root:s3cret@tcp(127.0.0.1:1)/"}, exitError,
			"no MySQL answering at 127.0.0.1:1: run `go run ./lab/demo` without --mysql-dsn for the embedded MySQL-protocol server"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ios, _, out, errOut := iostreams.Test()
			code := run(context.Background(), ios, c.args)
			if code != c.code || !strings.Contains(errOut.String(), c.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, c.code, c.want)
			}
			if strings.Contains(errOut.String(), "s3cret") || strings.Contains(out.String(), "s3cret") {
				t.Errorf("the password is printed: %s", errOut)
			}
			if out.Len() > 0 {
				t.Errorf("stdout: %q", out)
			}
		})
	}
}
