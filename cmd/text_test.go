package cmd

import (
	"context"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// TestNonUTF8TextRefused: a --reason, --operator, --attest or $USER that
// is not valid UTF-8 is a usage error (exit 2) naming it, before anything
// runs, in every command that records it. (It reached the planner, whose
// plan did not survive JSON: "internal error ... plan does not rebuild".)
func TestNonUTF8TextRefused(t *testing.T) {
	ran := false
	run := func(env string, args ...string) (int, string) {
		t.Helper()
		t.Setenv("USER", env)
		ran = false
		ios, _, _, _ := iostreams.Test()
		f := NewFactory(ios, "test")
		root := NewCmdRoot(f)
		for _, c := range root.Commands() {
			switch c.Name() {
			case "repair", "sop", "tui":
				root.RemoveCommand(c)
			}
		}
		mark := func() error { ran = true; return nil }
		root.AddCommand(NewCmdRepair(f, &RepairRunners{
			Plan:  func(context.Context, *RepairPlanOptions) error { return mark() },
			Apply: func(context.Context, *RepairApplyOptions) error { return mark() },
		}), NewCmdTUI(f, func(context.Context, *TUIOptions) error { return mark() }))
		sop := NewCmdSop(f, nil)
		root.AddCommand(sop)
		root.SetArgs(args)
		root.SetOut(ios.Out)
		root.SetErr(ios.ErrOut)
		err := root.Execute()
		return exitCode(err, false), strings.TrimSpace(errString(err))
	}
	for _, tc := range []struct {
		name, user string
		args       []string
		want       string
	}{
		{"repair plan --reason", "alice", []string{"repair", "plan", "PAY-1", "--reason", "INC-7 \xff"}, `--reason "INC-7 \xff" is not valid UTF-8`},
		{"repair plan --attest", "alice", []string{"repair", "plan", "PAY-1", "--reason", "r", "--attest", "\xfe done"}, `--attest "\xfe done" is not valid UTF-8`},
		{"repair plan --operator", "alice", []string{"repair", "plan", "PAY-1", "--reason", "r", "--operator", "b\xc3"}, `--operator "b\xc3" is not valid UTF-8`},
		{"repair plan $USER", "b\xffb", []string{"repair", "plan", "PAY-1", "--reason", "r"}, `$USER "b\xffb" is not valid UTF-8`},
		{"repair apply --operator", "alice", []string{"repair", "apply", "plan.json", "--operator", "\xff"}, `--operator "\xff" is not valid UTF-8`},
		{"repair apply $USER", "\xff", []string{"repair", "apply", "plan.json"}, `$USER "\xff" is not valid UTF-8`},
		{"tui $USER", "\xff", []string{"tui"}, `$USER "\xff" is not valid UTF-8`},
		{"sop run --reason", "alice", []string{"sop", "run", "stranded", "--biz-id", "PAY-1", "--reason", "\xff", "--yes"}, `--reason "\xff" is not valid UTF-8`},
		{"sop run $USER", "\xff", []string{"sop", "run", "stranded", "--biz-id", "PAY-1", "--reason", "r", "--yes"}, `$USER "\xff" is not valid UTF-8`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := run(tc.user, tc.args...)
			if code != ExitUsage || ran || !strings.Contains(msg, tc.want) {
				t.Errorf("exit %d (ran %v): %s\nwant exit 2 and %s", code, ran, msg, tc.want)
			}
			if strings.Contains(tc.name, "$USER") && !strings.Contains(msg, "--operator NAME") {
				t.Errorf("%s: does not say to pass --operator", msg)
			}
		})
	}
	// Valid UTF-8 of any script goes on.
	if code, msg := run("алиса", "repair", "plan", "PAY-1", "--reason", "事故 INC-7", "--attest", "ok ✓"); code != 0 || !ran {
		t.Errorf("UTF-8 text: exit %d %s", code, msg)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
