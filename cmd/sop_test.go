package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sop"
	"github.com/opctl-dev/opctl/sources/config"
)

func TestNewCmdSop(t *testing.T) {
	for _, c := range []struct {
		args []string
		sub  string
		want func(o *SopOptions) bool
		code int
	}{
		{[]string{"sop", "list"}, "list", func(*SopOptions) bool { return true }, 0},
		{[]string{"sop", "show", "stranded"}, "show", func(o *SopOptions) bool { return o.Name == "stranded" }, 0},
		{[]string{"sop", "check", "a.yaml", "b.yaml"}, "check", func(o *SopOptions) bool { return len(o.Files) == 2 }, 0},
		{[]string{"sop", "run", "stranded", "--biz-id", "PAY-1", "--yes", "--dry-run", "--step", "--reason", "r", "--attest", "a", "--outcome", "applied", "--action", "manual", "--pipeline", "p"}, "run",
			func(o *SopOptions) bool {
				return o.Name == "stranded" && o.BizID == "PAY-1" && o.Yes && o.DryRun && o.Step && o.Reason == "r" && o.Attest == "a" && o.Outcome == "applied" && o.Action == "manual" && o.Pipeline == "p"
			}, 0},
		{[]string{"sop", "run", "--resume", "r20260101T000000-abcdef"}, "run", func(o *SopOptions) bool { return o.Resume == "r20260101T000000-abcdef" }, 0},
		{[]string{"sop", "run", "a", "b"}, "", nil, ExitUsage},
		{[]string{"sop", "check"}, "", nil, ExitUsage},
		{[]string{"sop", "show"}, "", nil, ExitUsage},
		{[]string{"sop", "jump"}, "", nil, ExitUsage},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			ios, _, _, _ := iostreams.Test()
			f := NewFactory(ios, "test")
			got := ""
			var opts *SopOptions
			root := NewCmdRoot(f)
			for _, sub := range root.Commands() {
				if sub.Name() == "sop" {
					root.RemoveCommand(sub)
				}
			}
			root.AddCommand(NewCmdSop(f, func(_ context.Context, name string, o *SopOptions) error { got, opts = name, o; return nil }))
			setGroupRun(root)
			root.SetArgs(c.args)
			root.SetOut(io.Discard)
			root.SetErr(io.Discard)
			code := exitCode(root.Execute(), false)
			if code != c.code {
				t.Fatalf("exit %d, want %d", code, c.code)
			}
			if c.want != nil && (got != c.sub || !c.want(opts)) {
				t.Fatalf("ran %q with %+v", got, opts)
			}
		})
	}
}

// fakeSopService triages to the next verdict of its script (the last one
// again when the script ends), plans testPlan, and applies by recording.
type fakeSopService struct {
	t        *testing.T
	verdicts []inspect.Code
	triaged  int
	applied  []string
	dry      []bool
	planOpts []plans.Options
}

func (f *fakeSopService) Triage(_ context.Context, bizID, pipeline string) (*triage.Result, error) {
	v := f.verdicts[min(f.triaged, len(f.verdicts)-1)]
	f.triaged++
	return triageOf(inspect.Report{BizID: bizID, Pipeline: "settlement", Verdict: inspect.Verdict{Code: v, Summary: "the fake says " + string(v)}}), nil
}

func (f *fakeSopService) Plan(_ context.Context, op *triage.Operation, o plans.Options) (*plans.Plan, error) {
	f.planOpts = append(f.planOpts, o)
	p := testPlan(f.t, op.Report.BizID)
	p.Runbook, p.RunID = o.Runbook, o.RunID
	if err := p.Seal(); err != nil {
		f.t.Fatal(err)
	}
	return p, nil
}

func (f *fakeSopService) PlanTargets(context.Context, io.Reader, string, string, plans.Options) (*repair.Batch, error) {
	return &repair.Batch{}, nil
}

func (f *fakeSopService) Apply(_ context.Context, p *plans.Plan, o repair.ApplyOptions) (*repair.Result, error) {
	f.applied = append(f.applied, p.BizID)
	f.dry = append(f.dry, o.DryRun)
	return &repair.Result{PlanID: p.ID, Outcome: repair.OutcomeApplied, Applied: 1, Total: 1}, nil
}

func (f *fakeSopService) StoredPlan(context.Context, string) (*plans.Plan, error) {
	return nil, &plans.InputError{Msg: "none"}
}

type sopCase struct {
	ios         *iostreams.IOStreams
	out, errOut interface{ String() string }
	svc         *fakeSopService
	opts        *SopOptions
	runs        string
}

func newSopCase(t *testing.T, verdicts ...inspect.Code) *sopCase {
	ios, _, out, errOut := iostreams.Test()
	c := &sopCase{ios: ios, out: out, errOut: errOut, svc: &fakeSopService{t: t, verdicts: verdicts}, runs: t.TempDir()}
	cfg := &config.Config{Pipelines: []config.Pipeline{{Name: "settlement"}}}
	c.opts = &SopOptions{IO: ios, Format: FormatTable, Operator: "tester", Reason: "INC-1",
		Library: sop.Builtins,
		Runner: func() (*sop.Runner, error) {
			return &sop.Runner{Triage: c.svc, Service: c.svc, Config: cfg, Records: sop.Records{Dir: c.runs}}, nil
		}}
	return c
}

func (c *sopCase) stdin(s string) {
	r := strings.NewReader(s)
	c.ios.In = io.NopCloser(r)
	c.ios.SetStdinTTY(true)
}

func (c *sopCase) run(t *testing.T, ctx context.Context) int {
	t.Helper()
	return exitCode(runSopRun(ctx, c.opts), ctx.Err() != nil)
}

func TestSopRunFake(t *testing.T) {
	t.Run("scripted", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded, inspect.Stranded, inspect.WillRedeliver)
		c.opts.Name, c.opts.BizID, c.opts.Yes = "stranded", "PAY-3", true
		if code := c.run(t, context.Background()); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, c.out, c.errOut)
		}
		out := c.out.String()
		for _, w := range []string{"runbook stranded:", "step 1 triage (where): ok: PAY-3 (settlement): STRANDED", "step 4 apply (apply): ok: plan", "step 5 verify (verify): ok: PAY-3 (settlement): WILL_REDELIVER", ": done, 5/5 steps"} {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks %q:\n%s", w, out)
			}
		}
		if len(c.svc.applied) != 1 || c.svc.dry[0] {
			t.Fatalf("applied %v dry %v", c.svc.applied, c.svc.dry)
		}
		if o := c.svc.planOpts[0]; o.Runbook != "stranded" || !sop.ValidRunID(o.RunID) || o.Reason != "INC-1" {
			t.Fatalf("plan options %+v", o)
		}
	})
	t.Run("json", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded, inspect.Stranded, inspect.WillRedeliver)
		c.opts.BizID, c.opts.Yes, c.opts.Format = "PAY-3", true, FormatJSON // no NAME: the verdict's runbook
		if code := c.run(t, context.Background()); code != 0 {
			t.Fatalf("exit %d\n%s\n%s", code, c.out, c.errOut)
		}
		lines := strings.Split(strings.TrimSpace(c.out.String()), "\n")
		if len(lines) != 6 {
			t.Fatalf("%d lines, want 5 steps and a summary:\n%s", len(lines), c.out)
		}
		for _, l := range lines[:5] {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"step", "type", "outcome", "verdict", "plan_id", "detail"} {
				if _, ok := m[k]; !ok {
					t.Fatalf("%s lacks %q", l, k)
				}
			}
		}
		var sum sop.Summary
		if err := json.Unmarshal([]byte(lines[5]), &sum); err != nil || sum.Runbook != "stranded" || sum.Outcome != "done" {
			t.Fatalf("summary %s: %v", lines[5], err)
		}
	})
	t.Run("unexpected verdict stops with exit 5", func(t *testing.T) {
		c := newSopCase(t, inspect.Complete)
		c.opts.Name, c.opts.BizID, c.opts.Yes = "stranded", "PAY-3", true
		if code := c.run(t, context.Background()); code != ExitRefused {
			t.Fatalf("exit %d, want 5\n%s", code, c.out)
		}
		out := c.out.String()
		if !strings.Contains(out, "UNEXPECTED: PAY-3 (settlement) is COMPLETE, the runbook expects [STRANDED]") || !strings.Contains(out, "stopped at step triage after 0/5 steps") || !strings.Contains(out, "resume: opctl sop run --resume r") {
			t.Fatalf("output:\n%s", out)
		}
		if len(c.svc.applied) != 0 {
			t.Fatal("applied after an unexpected verdict")
		}
	})
	t.Run("verify that fails stops with exit 5", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded, inspect.Stranded, inspect.Stranded)
		c.opts.Name, c.opts.BizID, c.opts.Yes = "stranded", "PAY-3", true
		if code := c.run(t, context.Background()); code != ExitRefused {
			t.Fatalf("exit %d, want 5\n%s", code, c.out)
		}
		if !strings.Contains(c.out.String(), "step 5 verify (verify): UNEXPECTED: PAY-3 (settlement) is STRANDED") {
			t.Fatalf("output:\n%s", c.out)
		}
	})
	t.Run("no terminal and no --yes", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded)
		c.opts.Name, c.opts.BizID = "stranded", "PAY-3"
		if code := c.run(t, context.Background()); code != ExitUsage || c.svc.triaged != 0 {
			t.Fatalf("exit %d (triaged %d), want 2 before anything ran", code, c.svc.triaged)
		}
	})
	// A runbook without a review step applies only with --yes or a typed
	// confirmation on a terminal. (Piped without --yes it applied, exit
	// 0.)
	noReview := filepath.Join(t.TempDir(), "noreview.yaml")
	if err := os.WriteFile(noReview, []byte("name: noreview\ntitle: t\nverdicts: [STRANDED]\nsteps:\n  - type: where\n  - type: plan\n  - type: apply\n  - type: verify\n    expect: [WILL_REDELIVER]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("no review step, no terminal and no --yes", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded, inspect.Stranded, inspect.WillRedeliver)
		c.opts.Name, c.opts.BizID = noReview, "PAY-3"
		err := runSopRun(context.Background(), c.opts)
		if code := exitCode(err, false); code != ExitUsage || c.svc.triaged != 0 || len(c.svc.applied) != 0 || !strings.Contains(err.Error(), "pass --yes") {
			t.Fatalf("exit %d (%v; triaged %d, applied %v), want 2 before anything ran", code, err, c.svc.triaged, c.svc.applied)
		}
	})
	t.Run("resume, no terminal and no --yes", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded)
		c.opts.Resume = "r20260101T000000-abcdef"
		if code := c.run(t, context.Background()); code != ExitUsage || !strings.Contains(fmt.Sprint(runSopRun(context.Background(), c.opts)), "resumed run") {
			t.Fatalf("exit %d, want 2", code)
		}
	})
	for _, answer := range []string{"no", "yes"} {
		t.Run("no review step, on a terminal: "+answer, func(t *testing.T) {
			c := newSopCase(t, inspect.Stranded, inspect.Stranded, inspect.WillRedeliver)
			c.opts.Name, c.opts.BizID = noReview, "PAY-3"
			c.stdin(answer + "\n")
			code := c.run(t, context.Background())
			if !strings.Contains(c.errOut.String(), "Only 'yes' will be accepted") {
				t.Fatalf("nothing asked before the apply:\n%s", c.errOut)
			}
			if answer == "no" && (code != ExitRefused || len(c.svc.applied) != 0 || !strings.Contains(c.out.String(), "step 3 3-apply (apply): REFUSED")) {
				t.Fatalf("answered no: exit %d applied %v\n%s", code, c.svc.applied, c.out)
			}
			if answer == "yes" && (code != 0 || len(c.svc.applied) != 1) {
				t.Fatalf("answered yes: exit %d applied %v\n%s", code, c.svc.applied, c.out)
			}
		})
	}
	t.Run("review refused on a terminal", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded)
		c.opts.Name, c.opts.BizID = "stranded", "PAY-3"
		c.stdin("no\n")
		if code := c.run(t, context.Background()); code != ExitRefused || len(c.svc.applied) != 0 {
			t.Fatalf("exit %d applied %v", code, c.svc.applied)
		}
		if !strings.Contains(c.errOut.String(), "Plan ") || !strings.Contains(c.errOut.String(), "Only 'yes' will be accepted") {
			t.Fatalf("the review did not show the plan:\n%s", c.errOut)
		}
	})
	t.Run("review accepted, --step", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded, inspect.Stranded, inspect.WillRedeliver)
		c.opts.Name, c.opts.BizID, c.opts.Step = "stranded", "PAY-3", true
		c.stdin("yes\nyes\nyes\nyes\nyes\nyes\n") // five steps and the review
		if code := c.run(t, context.Background()); code != 0 || len(c.svc.applied) != 1 {
			t.Fatalf("exit %d applied %v\n%s", code, c.svc.applied, c.errOut)
		}
		if n := strings.Count(c.errOut.String(), "Run step "); n != 5 {
			t.Fatalf("asked %d times, want 5:\n%s", n, c.errOut)
		}
	})
	t.Run("dry run", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded)
		c.opts.Name, c.opts.BizID, c.opts.DryRun = "stranded", "PAY-3", true
		if code := c.run(t, context.Background()); code != 0 || len(c.svc.dry) != 1 || !c.svc.dry[0] {
			t.Fatalf("exit %d dry %v\n%s", code, c.svc.dry, c.out)
		}
		if !strings.Contains(c.out.String(), "verify (verify): skipped: dry run") || !strings.Contains(c.out.String(), "(dry run: nothing applied)") {
			t.Fatalf("output:\n%s", c.out)
		}
		// The review says why it passed: not --yes, which was not given.
		if !strings.Contains(c.out.String(), "step 3 review (review): ok: 1 plan(s) passed without a person (--dry-run: nothing is applied)") || strings.Contains(c.out.String(), "--yes") {
			t.Fatalf("the dry run's review:\n%s", c.out)
		}
	})
	t.Run("interrupted, then resumed", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded, inspect.Stranded, inspect.WillRedeliver)
		c.opts.Name, c.opts.BizID, c.opts.Yes, c.opts.Format = "stranded", "PAY-3", true, FormatJSON
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// Ctrl-C arrives while step 2 (plan) runs: the run stops before step 3.
		c.svc.verdicts = []inspect.Code{inspect.Stranded, inspect.Stranded, inspect.WillRedeliver}
		svc := &cancelling{fakeSopService: c.svc, cancel: cancel}
		c.opts.Runner = func() (*sop.Runner, error) {
			return &sop.Runner{Triage: svc, Service: svc, Config: &config.Config{}, Records: sop.Records{Dir: c.runs}}, nil
		}
		if code := c.run(t, ctx); code != ExitInterrupted {
			t.Fatalf("exit %d, want 130\n%s", code, c.out)
		}
		lines := strings.Split(strings.TrimSpace(c.out.String()), "\n")
		var sum sop.Summary
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
			t.Fatal(err)
		}
		if sum.Outcome != "interrupted" || sum.Done != 2 || sum.StoppedAt != "review" || !strings.Contains(sum.Detail, "interrupted before step 3") {
			t.Fatalf("summary %+v", sum)
		}
		// Resume: from step 3, with the plan step 2 made.
		c2 := newSopCase(t, inspect.WillRedeliver)
		c2.runs = c.runs
		c2.opts.Resume, c2.opts.Yes, c2.opts.Format = sum.RunID, true, FormatJSON
		if code := c2.run(t, context.Background()); code != 0 {
			t.Fatalf("resume: exit %d\n%s\n%s", code, c2.out, c2.errOut)
		}
		evs := strings.Split(strings.TrimSpace(c2.out.String()), "\n")
		if len(evs) != 4 || !strings.Contains(evs[0], `"step":"review"`) || len(c2.svc.applied) != 1 || len(c2.svc.planOpts) != 0 {
			t.Fatalf("resume ran %d lines, applied %v, planned %d:\n%s", len(evs), c2.svc.applied, len(c2.svc.planOpts), c2.out)
		}
		// Done runs resume to nothing.
		c3 := newSopCase(t, inspect.WillRedeliver)
		c3.runs = c.runs
		c3.opts.Resume, c3.opts.Yes = sum.RunID, true
		if code := c3.run(t, context.Background()); code != 0 || len(c3.svc.applied) != 0 || !strings.Contains(c3.out.String(), "nothing to resume") {
			t.Fatalf("second resume: exit %d applied %v\n%s", code, c3.svc.applied, c3.out)
		}
	})
	t.Run("unknown run id", func(t *testing.T) {
		c := newSopCase(t, inspect.Stranded)
		for _, id := range []string{"r20260101T000000-abcdef", "../../etc/passwd"} {
			c.opts.Resume, c.opts.Yes = id, true
			if code := c.run(t, context.Background()); code != ExitUsage {
				t.Fatalf("--resume %s: exit %d, want 2", id, code)
			}
		}
	})
}

// cancelling cancels the run's context when a plan is made: an interrupt
// in the middle of a step.
type cancelling struct {
	*fakeSopService
	cancel func()
}

func (c *cancelling) Plan(ctx context.Context, op *triage.Operation, o plans.Options) (*plans.Plan, error) {
	defer c.cancel()
	return c.fakeSopService.Plan(ctx, op, o)
}

// A runbook file with mistakes: sop check and sop run give every error,
// each with file:line, and run nothing (exit 2).
func TestSopCheckAndRunBadFile(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	text := "name: bad\ntitle: t\nverdicts: [STRANDID]\nsteps:\n  - type: where\n  - type: aply\n  - type: verify\n  - name: no-type\n"
	if err := os.WriteFile(bad, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join("..", "sop", "runbooks", "stranded.yaml")
	want := []string{
		bad + `:3: verdicts: unknown verdict "STRANDID" (did you mean "STRANDED"?)`,
		bad + `:6: step 2: unknown step type "aply" (did you mean "apply"?)`,
		bad + `:7: step 3: missing field "expect"`,
		bad + `:8: step 4: missing field "type"`,
	}
	noConfig(t)
	for _, args := range [][]string{{"sop", "check", good, bad}, {"sop", "run", bad, "--biz-id", "PAY-1", "--yes", "--reason", "r"}} {
		t.Run(args[1], func(t *testing.T) {
			ios, _, out, errOut := iostreams.Test()
			code := Run(context.Background(), ios, args)
			if code != ExitUsage {
				t.Fatalf("exit %d, want 2\n%s\n%s", code, out, errOut)
			}
			for _, w := range want {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if args[1] == "check" && !strings.Contains(out.String(), good+": ok (runbook stranded, 5 steps)") {
				t.Errorf("stdout:\n%s", out)
			}
		})
	}
}

// noConfig makes the lookup of opctl.yaml find nothing (docs/config.md):
// the runbooks are then the built-ins.
func noConfig(t *testing.T) {
	t.Setenv("OPCTL_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	if _, err := os.Stat("opctl.yaml"); err == nil {
		t.Fatal("an opctl.yaml in the test's directory")
	}
}

func TestSopListShow(t *testing.T) {
	noConfig(t)
	ios, _, out, errOut := iostreams.Test()
	if code := Run(context.Background(), ios, []string{"sop", "list"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, w := range []string{"NAME", "mass-redelivery", "builtin:stranded.yaml", "DUPLICATE_EFFECT"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("list lacks %q:\n%s", w, out)
		}
	}
	ios, _, out, _ = iostreams.Test()
	if code := Run(context.Background(), ios, []string{"sop", "show", "mass-redelivery"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	ios2, _, out2, _ := iostreams.Test()
	if code := Run(context.Background(), ios2, []string{"sop", "show", filepath.Join("..", "sop", "runbooks", "stranded.yaml"), "-o", "json"}); code != 0 || !strings.Contains(out2.String(), `"name": "stranded"`) {
		t.Fatalf("show FILE: exit %d\n%s", code, out2)
	}
	for _, w := range []string{"runs on  reconcile's targets", "4. canary (apply): apply the next 1 plan(s)", "6. stage-10 (apply): apply the next 10 plan(s)", "8. the-rest (apply): apply the plans left"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("show lacks %q:\n%s", w, out)
		}
	}
}

// The team's runbooks with mistakes stop every sop command with all the
// errors, each with file:line; a good one overrides the built-in.
func TestSopDirErrors(t *testing.T) {
	dir := t.TempDir()
	books := filepath.Join(dir, "runbooks")
	if err := os.Mkdir(books, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "opctl.yaml")
	text := "mysql:\n  dsn: \"u@tcp(127.0.0.1:1)/pay\"\nsop:\n  dir: runbooks\npipelines:\n  - name: p\n    topic: t\n    group: g\n    steps:\n      - name: s\n        kind: local\n        evidence: \"SELECT id FROM e WHERE biz_id = ?\"\n    idempotency: {table: ci, key: msg_id, biz_id: biz_id, action: action}\n"
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(books, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	write("stranded.yaml", "name: stranded\ntitle: ours\nverdicts: [STRANDED]\nsteps:\n  - type: note\n    text: page payments\n")
	code, out, errOut := runOpctl(t, "--config", cfg, "sop", "list")
	if code != 0 || !strings.Contains(out, filepath.Join(books, "stranded.yaml")) || !strings.Contains(out, "ours") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	write("bad.yaml", "name: bad\ntitle: t\nverdicts: [NOPE]\nsteps:\n  - type: jump\n")
	for _, args := range [][]string{{"sop", "list"}, {"sop", "run", "stranded", "--biz-id", "X", "--yes", "--reason", "r"}} {
		code, out, errOut = runOpctl(t, append([]string{"--config", cfg}, args...)...)
		for _, w := range []string{filepath.Join(books, "bad.yaml") + `:3: verdicts: unknown verdict "NOPE"`, filepath.Join(books, "bad.yaml") + `:5: step 1: unknown step type "jump"`} {
			if code != ExitUsage || !strings.Contains(errOut, w) {
				t.Errorf("%v: exit %d, stderr lacks %q:\n%s%s", args, code, w, out, errOut)
			}
		}
	}
}

func TestExplainNamesTheRunbook(t *testing.T) {
	code, out, _ := runOpctl(t, "explain", "STATE_BEHIND")
	if code != 0 || !strings.Contains(out, "RUNBOOK\n  opctl sop run state-behind --biz-id ID") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	code, out, _ = runOpctl(t, "explain", "STRANDED", "-o", "json")
	var e struct {
		Code    string `json:"code"`
		Runbook string `json:"runbook"`
	}
	if err := json.Unmarshal([]byte(out), &e); code != 0 || err != nil || e.Runbook != "stranded" {
		t.Fatalf("exit %d %v: %s", code, err, out)
	}
	_, out, _ = runOpctl(t, "explain", "COMPLETE", "-o", "json")
	if strings.Contains(out, `"runbook"`) {
		t.Fatalf("a runbook for COMPLETE: %s", out)
	}
}
