package main

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/opctl-dev/opctl/cmd"
)

// TestMain makes the test binary double as opctl for the txtar scripts:
// `opctl` exits with opctl's code; `opctl-code` prints "[exit N]" on stderr
// and exits 0, so a script can assert the exact exit code.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"opctl": func() { os.Exit(cmd.Main()) },
		"opctl-code": func() {
			code := cmd.Main()
			fmt.Fprintf(os.Stderr, "[exit %d]\n", code)
			os.Exit(0)
		},
	})
}

// TestScripts runs testdata/script/*.txtar: CLI behaviour that needs no
// database (usage, config errors, explain, version, completion).
//
// Each `exec opctl` runs this test binary again; built with -race it would
// sleep a second at exit (the race runtime's atexit_sleep_ms), so the
// scripts' processes do not.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{Dir: "testdata/script", Setup: func(env *testscript.Env) error {
		env.Setenv("GORACE", "atexit_sleep_ms=0")
		return nil
	}})
}

// TestLinks: what each package may link, from go list -deps
// (docs/architecture.md).
//   - the operator's binary (.) carries no fake broker, no test consumers
//     and no embedded database: no lab package, no kfake and no
//     go-mysql-server (whose regex engine compiles WebAssembly at init:
//     +0.4-0.6 s on every command);
//   - inspect imports the sources types, never a driver, database/sql or a
//     network client, so every verdict rule is testable without a database;
//   - the planner and the plan file (repair/plans) likewise link no driver,
//     no database/sql and no Kafka or HTTP client, so every rule runs on
//     plain structs; so does doctor's judgement (sop/doctor);
//   - the read side (inspect/triage), the write side (repair), reconcile,
//     the runbooks (sop) and the console (tui) link no driver either: they
//     take interfaces, which sources/connect and cmd's Factory fill.
func TestLinks(t *testing.T) {
	// drivers: what only sources/{mysql,kafka,probe,binlog} (and the
	// sources/connect that opens them) may link: the MySQL driver,
	// database/sql, sarama, go-mysql's replication client and an HTTP
	// client.
	drivers := struct{ exact, prefixes []string }{
		exact: []string{"database/sql", "net/http"},
		prefixes: []string{"github.com/IBM/sarama", "github.com/go-sql-driver/", "github.com/go-mysql-org/",
			"github.com/opctl-dev/opctl/sources/mysql", "github.com/opctl-dev/opctl/sources/kafka",
			"github.com/opctl-dev/opctl/sources/probe", "github.com/opctl-dev/opctl/sources/binlog",
			"github.com/opctl-dev/opctl/sources/connect"},
	}
	pure := struct{ exact, prefixes, allowed []string }{
		exact:    []string{"database/sql", "net/http"},
		prefixes: []string{"github.com/IBM/sarama", "github.com/go-sql-driver/", "github.com/opctl-dev/opctl/sources/"},
		allowed:  []string{"github.com/opctl-dev/opctl/sources/config", "github.com/opctl-dev/opctl/sources/config/yamlfile"},
	}
	for _, tc := range []struct {
		pkg, name string
		// must be in the graph: it proves the output is opctl's graph.
		must []string
		// exact: banned packages; prefixes: banned import path prefixes;
		// contains: banned substrings; allowed: exceptions to all three.
		exact, prefixes, contains, allowed []string
	}{
		// opctl holds the console on bubbletea v2 (charm.land), never v1,
		// whose package init queries the terminal on every start
		// (docs/tui.md#one-binary).
		{pkg: ".", name: "opctl", must: []string{"github.com/opctl-dev/opctl/cmd", "github.com/opctl-dev/opctl/tui", "charm.land/bubbletea/v2"},
			prefixes: []string{"github.com/opctl-dev/opctl/lab", "github.com/dolthub/", "github.com/tetratelabs/wazero",
				"github.com/charmbracelet/bubbletea", "github.com/charmbracelet/bubbles", "github.com/charmbracelet/lipgloss",
				"github.com/muesli/termenv"},
			contains: []string{"/kfake"}},
		{pkg: "./inspect", name: "inspect", must: []string{"github.com/opctl-dev/opctl/inspect"},
			exact: pure.exact, prefixes: pure.prefixes, allowed: pure.allowed},
		{pkg: "./repair/plans", name: "repair/plans", must: []string{"github.com/opctl-dev/opctl/repair/plans"},
			exact: pure.exact, prefixes: pure.prefixes, allowed: pure.allowed},
		{pkg: "./sop/doctor", name: "sop/doctor", must: []string{"github.com/opctl-dev/opctl/sop/doctor"},
			exact: pure.exact, prefixes: pure.prefixes, allowed: pure.allowed},
		// The read side and everything above it up to cmd take interfaces;
		// sources/connect and cmd's Factory wire the real clients.
		{pkg: "./inspect/triage", name: "inspect/triage", must: []string{"github.com/opctl-dev/opctl/inspect/triage"},
			exact: drivers.exact, prefixes: drivers.prefixes},
		{pkg: "./repair", name: "repair", must: []string{"github.com/opctl-dev/opctl/repair/plans"},
			exact: drivers.exact, prefixes: drivers.prefixes},
		{pkg: "./reconcile", name: "reconcile", must: []string{"github.com/opctl-dev/opctl/inspect/triage"},
			exact: drivers.exact, prefixes: drivers.prefixes},
		{pkg: "./reconcile/watch", name: "reconcile/watch", must: []string{"github.com/opctl-dev/opctl/reconcile"},
			exact: drivers.exact, prefixes: drivers.prefixes},
		{pkg: "./reconcile/watch/worker", name: "reconcile/watch/worker", must: []string{"github.com/opctl-dev/opctl/repair", "github.com/opctl-dev/opctl/reconcile/watch"},
			exact: drivers.exact, prefixes: drivers.prefixes},
		{pkg: "./sop", name: "sop", must: []string{"github.com/opctl-dev/opctl/repair", "github.com/opctl-dev/opctl/reconcile"},
			exact: drivers.exact, prefixes: drivers.prefixes},
		{pkg: "./tui", name: "tui", must: []string{"github.com/opctl-dev/opctl/repair", "github.com/opctl-dev/opctl/inspect/triage"},
			exact: drivers.exact, prefixes: drivers.prefixes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command("go", "list", "-deps", tc.pkg).CombinedOutput()
			if err != nil {
				t.Fatalf("go list: %v\n%s", err, out)
			}
			deps := strings.Fields(string(out))
			if len(deps) < 10 {
				t.Fatalf("go list -deps output does not look like a dependency list: %q", out)
			}
			for _, m := range tc.must {
				if !slices.Contains(deps, m) {
					t.Fatalf("go list -deps %s output does not look like %s's graph (no %s):\n%.500s", tc.pkg, tc.name, m, out)
				}
			}
			for _, d := range deps {
				if slices.Contains(tc.allowed, d) {
					continue
				}
				banned := slices.Contains(tc.exact, d) ||
					slices.ContainsFunc(tc.prefixes, func(p string) bool { return strings.HasPrefix(d, p) }) ||
					slices.ContainsFunc(tc.contains, func(c string) bool { return strings.Contains(d, c) })
				if banned {
					t.Errorf("%s links %s", tc.name, d)
				}
			}
		})
	}
}
