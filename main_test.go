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

// TestOpctlLinksNoLab: the operator's binary carries no fake broker, no
// test consumers and no embedded database: go list -deps . has no lab
// package, no kfake and no go-mysql-server (whose regex engine compiles
// WebAssembly at init: +0.4-0.6 s on every command). docs/architecture.md.
func TestOpctlLinksNoLab(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/opctl-dev/opctl/cmd") {
		t.Fatalf("go list -deps output does not look like opctl's graph:\n%.500s", out)
	}
	for _, d := range deps {
		switch {
		case strings.HasPrefix(d, "github.com/opctl-dev/opctl/lab"),
			strings.Contains(d, "/kfake"),
			strings.HasPrefix(d, "github.com/dolthub/"),
			strings.HasPrefix(d, "github.com/tetratelabs/wazero"):
			t.Errorf("opctl links %s", d)
		}
	}
}
