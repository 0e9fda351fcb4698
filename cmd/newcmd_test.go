package cmd

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
)

// runReplaced runs args on the root with the command named name replaced
// by the one build makes (whose runF records the options) and returns the
// exit status and the streams.
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

func TestNewCmdDoctor(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // pipeline@format
	}{
		{[]string{"doctor"}, 0, "@table"},
		{[]string{"doctor", "--pipeline", "settlement", "-o", "json"}, 0, "settlement@json"},
		{[]string{"doctor", "-o", "wide"}, 0, "@wide"},
		{[]string{"doctor", "extra"}, ExitUsage, ""},
		{[]string{"doctor", "-o", "yaml"}, ExitUsage, ""},
	} {
		var got *DoctorOptions
		code := runReplaced(t, "doctor", func(f *Factory) *cobra.Command {
			return NewCmdDoctor(f, func(_ context.Context, o *DoctorOptions) error { got = o; return nil })
		}, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
			continue
		}
		if tc.want == "" {
			if got != nil {
				t.Errorf("%v: ran with %+v", tc.args, got)
			}
			continue
		}
		if got == nil || got.Pipeline+"@"+string(got.Format) != tc.want || got.Config == nil || got.Facts == nil || got.IO == nil {
			t.Errorf("%v: options %+v, want %s", tc.args, got, tc.want)
		}
	}
}

func TestNewCmdSchema(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want func(o *SchemaOptions) bool
	}{
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
	} {
		var got *SchemaOptions
		code := runReplaced(t, "schema", func(f *Factory) *cobra.Command {
			return NewCmdSchema(f, func(_ context.Context, o *SchemaOptions) error { got = o; return nil })
		}, tc.args...)
		if code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
			continue
		}
		if tc.want == nil {
			if got != nil {
				t.Errorf("%v: ran with %+v", tc.args, got)
			}
		} else if got == nil || !tc.want(got) {
			t.Errorf("%v: options %+v", tc.args, got)
		}
	}
}

func TestNewCmdAudit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want func(o *AuditOptions) bool
	}{
		{[]string{"audit"}, 0, func(o *AuditOptions) bool { return o.Limit == 100 && o.BizID == "" && o.Auditor != nil }},
		{[]string{"audit", "--biz-id", "PAY-1", "--plan", "3f2a", "--pipeline", "settlement", "--limit", "5", "-o", "jsonl"}, 0, func(o *AuditOptions) bool {
			return o.BizID == "PAY-1" && o.PlanID == "3f2a" && o.Pipeline == "settlement" && o.Limit == 5 && o.Format == FormatJSONL
		}},
		{[]string{"audit", "--limit", "0"}, ExitUsage, nil},
		{[]string{"audit", "--biz-id", ""}, 0, func(o *AuditOptions) bool { return o.BizID == "" }},
		{[]string{"audit", "--biz-id", "PAY\x1b"}, ExitUsage, nil},
		{[]string{"audit", "PAY-1"}, ExitUsage, nil},
	} {
		var got *AuditOptions
		code := runReplaced(t, "audit", func(f *Factory) *cobra.Command {
			return NewCmdAudit(f, func(_ context.Context, o *AuditOptions) error { got = o; return nil })
		}, tc.args...)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d", tc.args, code, tc.code)
			continue
		}
		if tc.want == nil {
			if got != nil {
				t.Errorf("%q: ran with %+v", tc.args, got)
			}
		} else if got == nil || !tc.want(got) {
			t.Errorf("%q: options %+v", tc.args, got)
		}
	}
}

func TestNewCmdExplain(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // code@format
	}{
		{[]string{"explain"}, 0, "@table"},
		{[]string{"explain", "wrongly_skipped"}, 0, "WRONGLY_SKIPPED@table"},
		{[]string{"explain", " stranded ", "-o", "json"}, 0, "STRANDED@json"},
		{[]string{"explain", "NOPE"}, ExitUsage, ""},
		{[]string{"explain", "STRANDED", "DUPLICATE_EFFECT"}, ExitUsage, ""},
	} {
		var got *ExplainOptions
		code := runReplaced(t, "explain", func(f *Factory) *cobra.Command {
			return NewCmdExplain(f, func(_ context.Context, o *ExplainOptions) error { got = o; return nil })
		}, tc.args...)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d", tc.args, code, tc.code)
			continue
		}
		if tc.want == "" {
			if got != nil {
				t.Errorf("%q: ran with %+v", tc.args, got)
			}
		} else if got == nil || string(got.Code)+"@"+string(got.Format) != tc.want || got.IO == nil {
			t.Errorf("%q: options %+v, want %s", tc.args, got, tc.want)
		}
	}
	// The code is one of inspect's (a test of the table, not of parsing).
	if _, ok := inspect.Explain(inspect.Code("STRANDED")); !ok {
		t.Fatal("STRANDED has no explanation")
	}
}

func TestNewCmdInit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string // preset@out@force
	}{
		{[]string{"init", "--preset", "settlement"}, 0, "settlement@opctl.yaml@false"},
		{[]string{"init", "--preset", "seed003", "--out", "x.yaml", "--force"}, 0, "seed003@x.yaml@true"},
		{[]string{"init"}, ExitUsage, ""},
		{[]string{"init", "--preset", "settlement", "extra"}, ExitUsage, ""},
	} {
		var got *InitOptions
		code := runReplaced(t, "init", func(f *Factory) *cobra.Command {
			return NewCmdInit(f, func(_ context.Context, o *InitOptions) error { got = o; return nil })
		}, tc.args...)
		if code != tc.code {
			t.Errorf("%q: exit %d, want %d", tc.args, code, tc.code)
			continue
		}
		if tc.want == "" {
			if got != nil {
				t.Errorf("%q: ran with %+v", tc.args, got)
			}
			continue
		}
		if got == nil || strings.Join([]string{got.Preset, got.Out, boolString(got.Force)}, "@") != tc.want || got.IO == nil {
			t.Errorf("%q: options %+v, want %s", tc.args, got, tc.want)
		}
	}
}

func TestNewCmdVersion(t *testing.T) {
	var got *VersionOptions
	if code := runReplaced(t, "version", func(f *Factory) *cobra.Command {
		return NewCmdVersion(f, func(_ context.Context, o *VersionOptions) error { got = o; return nil })
	}, "version"); code != 0 || got == nil || got.Version != "test" || got.IO == nil {
		t.Errorf("exit %d, options %+v", code, got)
	}
	got = nil
	if code := runReplaced(t, "version", func(f *Factory) *cobra.Command {
		return NewCmdVersion(f, func(_ context.Context, o *VersionOptions) error { got = o; return nil })
	}, "version", "extra"); code != ExitUsage || got != nil {
		t.Errorf("version extra: exit %d, ran %v", code, got != nil)
	}
}

func TestNewCmdRepairShowApply(t *testing.T) {
	var show *RepairShowOptions
	var apply *RepairApplyOptions
	runners := &RepairRunners{
		Show:  func(_ context.Context, o *RepairShowOptions) error { show = o; return nil },
		Apply: func(_ context.Context, o *RepairApplyOptions) error { apply = o; return nil },
	}
	build := func(f *Factory) *cobra.Command { return NewCmdRepair(f, runners) }
	if code := runReplaced(t, "repair", build, "repair", "show", "plan.json", "-o", "json"); code != 0 || show == nil || show.File != "plan.json" || show.Format != FormatJSON {
		t.Errorf("repair show: exit %d, options %+v", code, show)
	}
	if code := runReplaced(t, "repair", build, "repair", "apply", "plan.json", "--dry-run", "--yes", "--operator", "alice", "-o", "wide"); code != 0 || apply == nil ||
		apply.File != "plan.json" || !apply.DryRun || !apply.Yes || apply.Operator != "alice" || apply.Format != FormatWide || apply.Repairer == nil {
		t.Errorf("repair apply: exit %d, options %+v", code, apply)
	}
	apply, show = nil, nil
	for _, args := range [][]string{{"repair", "show"}, {"repair", "apply"}, {"repair", "apply", "a", "b"}, {"repair", "show", "a", "b"}} {
		if code := runReplaced(t, "repair", build, args...); code != ExitUsage || apply != nil || show != nil {
			t.Errorf("%q: exit %d", args, code)
		}
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
