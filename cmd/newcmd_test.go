package cmd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// runReplaced runs args on the root with the command named name replaced
// by the one build makes (whose runF records the options) and returns the
// exit status.
func runReplaced(t *testing.T, name string, build func(f *Factory) *cobra.Command, args ...string) int {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	f := NewFactory(ios, "test")
	root := NewCmdRoot(f)
	for _, c := range root.Commands() {
		if c.Name() == name {
			root.RemoveCommand(c)
		}
	}
	c := build(f)
	addExitStatus(c)
	root.AddCommand(c)
	setGroupRun(root)
	root.SetArgs(args)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	return exitCode(execute(context.Background(), root), false)
}

// newCmdCase is one command line of a TestNewCmdX: its exit status and,
// when it runs (want != nil), what its options must be.
type newCmdCase[T any] struct {
	args []string
	code int
	want func(o *T) bool
}

// testNewCmd runs each case through the runF of the command NewCmdX
// builds: flags parsed into its Options, or a usage error before it runs.
func testNewCmd[T any](t *testing.T, name string, newCmd func(*Factory, func(context.Context, *T) error) *cobra.Command, cases []newCmdCase[T]) {
	t.Helper()
	for _, tc := range cases {
		var got *T
		code := runReplaced(t, name, func(f *Factory) *cobra.Command {
			return newCmd(f, func(_ context.Context, o *T) error { got = o; return nil })
		}, tc.args...)
		switch {
		case code != tc.code:
			t.Errorf("%q: exit %d, want %d", tc.args, code, tc.code)
		case tc.want == nil && got != nil:
			t.Errorf("%q: ran with %+v", tc.args, *got)
		case tc.want != nil && (got == nil || !tc.want(got)):
			t.Errorf("%q: options %s", tc.args, fmt.Sprintf("%+v", got))
		}
	}
}

func TestNewCmdDoctor(t *testing.T) {
	testNewCmd(t, "doctor", NewCmdDoctor, []newCmdCase[DoctorOptions]{
		{[]string{"doctor"}, 0, func(o *DoctorOptions) bool {
			return o.Pipeline == "" && o.Format == FormatTable && o.Config != nil && o.Facts != nil && o.IO != nil
		}},
		{[]string{"doctor", "--pipeline", "settlement", "-o", "json"}, 0, func(o *DoctorOptions) bool { return o.Pipeline == "settlement" && o.Format == FormatJSON }},
		{[]string{"doctor", "-o", "wide"}, 0, func(o *DoctorOptions) bool { return o.Format == FormatWide }},
		{[]string{"doctor", "extra"}, ExitUsage, nil},
		{[]string{"doctor", "-o", "yaml"}, ExitUsage, nil},
	})
}

func TestNewCmdSchema(t *testing.T) {
	testNewCmd(t, "schema", NewCmdSchema, []newCmdCase[SchemaOptions]{
		{[]string{"schema", "print"}, 0, func(o *SchemaOptions) bool { return o.Action == "print" && o.Dialect == "mysql8" && !o.Audit }},
		{[]string{"schema", "print", "--audit", "--dialect", "mariadb"}, 0, func(o *SchemaOptions) bool { return o.Audit && o.Dialect == "mariadb" }},
		{[]string{"schema", "check", "--pipeline", "p", "-o", "json"}, 0, func(o *SchemaOptions) bool {
			return o.Action == "check" && o.Pipeline == "p" && o.Format == FormatJSON && o.Inspector != nil
		}},
		{[]string{"schema", "apply", "--indexes", "--pipeline", "p", "--dry-run", "--yes", "--timeout", "3s"}, 0, func(o *SchemaOptions) bool {
			return o.Action == "apply" && o.Indexes && o.DryRun && o.Yes && o.Pipeline == "p" && o.Timeout == 3*time.Second && o.Exec != nil
		}},
		{[]string{"schema", "apply", "--audit", "--indexes"}, ExitUsage, nil},
		{[]string{"schema", "print", "--dialect", "oracle"}, ExitUsage, nil},
		{[]string{"schema", "check", "extra"}, ExitUsage, nil},
		{[]string{"schema", "bogus", "--help"}, ExitUsage, nil},
	})
}

func TestNewCmdAudit(t *testing.T) {
	testNewCmd(t, "audit", NewCmdAudit, []newCmdCase[AuditOptions]{
		{[]string{"audit"}, 0, func(o *AuditOptions) bool { return o.Limit == 100 && o.BizID == "" && o.Auditor != nil }},
		{[]string{"audit", "--biz-id", "PAY-1", "--plan", "3f2a", "--pipeline", "settlement", "--limit", "5", "-o", "jsonl"}, 0, func(o *AuditOptions) bool {
			return o.BizID == "PAY-1" && o.PlanID == "3f2a" && o.Pipeline == "settlement" && o.Limit == 5 && o.Format == FormatJSONL
		}},
		{[]string{"audit", "--limit", "0"}, ExitUsage, nil},
		{[]string{"audit", "--biz-id", "PAY\x1b"}, ExitUsage, nil},
		{[]string{"audit", "PAY-1"}, ExitUsage, nil},
	})
}

func TestNewCmdExplain(t *testing.T) {
	testNewCmd(t, "explain", NewCmdExplain, []newCmdCase[ExplainOptions]{
		{[]string{"explain"}, 0, func(o *ExplainOptions) bool { return o.Code == "" && o.Format == FormatTable && o.IO != nil }},
		{[]string{"explain", "wrongly_skipped"}, 0, func(o *ExplainOptions) bool { return o.Code == "WRONGLY_SKIPPED" }},
		{[]string{"explain", " stranded ", "-o", "json"}, 0, func(o *ExplainOptions) bool { return o.Code == "STRANDED" && o.Format == FormatJSON }},
		{[]string{"explain", "NOPE"}, ExitUsage, nil},
		{[]string{"explain", "STRANDED", "DUPLICATE_EFFECT"}, ExitUsage, nil},
	})
}

func TestNewCmdInit(t *testing.T) {
	testNewCmd(t, "init", NewCmdInit, []newCmdCase[InitOptions]{
		{[]string{"init", "--preset", "settlement"}, 0, func(o *InitOptions) bool {
			return o.Preset == "settlement" && o.Out == "opctl.yaml" && !o.Force && o.IO != nil
		}},
		{[]string{"init", "--preset", "seed003", "--out", "x.yaml", "--force"}, 0, func(o *InitOptions) bool {
			return o.Preset == "seed003" && o.Out == "x.yaml" && o.Force
		}},
		{[]string{"init"}, ExitUsage, nil},
		{[]string{"init", "--preset", "settlement", "extra"}, ExitUsage, nil},
	})
}

func TestNewCmdVersion(t *testing.T) {
	testNewCmd(t, "version", NewCmdVersion, []newCmdCase[VersionOptions]{
		{[]string{"version"}, 0, func(o *VersionOptions) bool { return o.Version == "test" && o.IO != nil }},
		{[]string{"version", "extra"}, ExitUsage, nil},
	})
}

func TestNewCmdRepairShowApply(t *testing.T) {
	show := func(f *Factory, runF func(context.Context, *RepairShowOptions) error) *cobra.Command {
		return NewCmdRepair(f, &RepairRunners{Show: runF})
	}
	testNewCmd(t, "repair", show, []newCmdCase[RepairShowOptions]{
		{[]string{"repair", "show", "plan.json", "-o", "json"}, 0, func(o *RepairShowOptions) bool { return o.File == "plan.json" && o.Format == FormatJSON }},
		{[]string{"repair", "show"}, ExitUsage, nil},
		{[]string{"repair", "show", "a", "b"}, ExitUsage, nil},
	})
	apply := func(f *Factory, runF func(context.Context, *RepairApplyOptions) error) *cobra.Command {
		return NewCmdRepair(f, &RepairRunners{Apply: runF})
	}
	testNewCmd(t, "repair", apply, []newCmdCase[RepairApplyOptions]{
		{[]string{"repair", "apply", "plan.json", "--dry-run", "--yes", "--operator", "alice", "-o", "wide"}, 0, func(o *RepairApplyOptions) bool {
			return o.File == "plan.json" && o.DryRun && o.Yes && o.Operator == "alice" && o.Format == FormatWide && o.Repairer != nil
		}},
		{[]string{"repair", "apply"}, ExitUsage, nil},
		{[]string{"repair", "apply", "a", "b"}, ExitUsage, nil},
	})
}
