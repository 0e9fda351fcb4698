package cmd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// hostileIDs are ids a database may hold that a shell or a flag parser
// would take for something else, were they pasted unquoted or before "--".
var hostileIDs = []string{
	"-o", "--from-file=targets.jsonl", "-", "--", "--help", "-v=1",
	"PAY 1", `it's "quoted"`, "$(touch pwned)", "`touch pwned`", "${HOME}", "a\nb", "\n-o",
	"#1", "PAY-1;touch pwned", "*", "~root", `PAY-1\`, "PAY-1 # not a comment", "é-1",
}

// pastedArgs runs line through a real shell (sh -c) as a person pasting
// it would, in dir, with REASON and ATTEST set, and returns the arguments
// the opctl it calls receives (a shell function stands in for it; curl
// does nothing).
func pastedArgs(t *testing.T, dir, line string) []string {
	t.Helper()
	script := `opctl() { for a in "$@"; do printf '%s\0' "$a"; done; }; curl() { :; }; ` + line
	c := exec.Command("sh", "-c", script)
	c.Dir = dir
	c.Env = append(os.Environ(), "REASON=INC-7 paste test", "ATTEST=the downstream said so")
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	if err := c.Run(); err != nil {
		t.Fatalf("sh -c %q: %v\n%s", line, err, errOut.String())
	}
	args := strings.Split(out.String(), "\x00")
	return args[:len(args)-1]
}

// nextLines are the printed commands of every kind for an operation
// id: where's NEXT (inspect and the planner's), the console's (the same
// lines), the "Check it" line of an apply, the apply commands after
// `repair plan --out FILE` (the file named id too), reconcile's next line
// (its --out named id), each with a --config that starts with "-".
func nextLines(t *testing.T, id string) []string {
	t.Helper()
	g := GlobalOptions{ConfigPath: "-c it's.yaml", Brokers: []string{"k1:9092"}}
	n := g.Next()
	var lines []string
	for _, code := range []inspect.Code{inspect.NotFound, inspect.InFlight, inspect.Stranded, inspect.DuplicateEffect, inspect.UnknownOutcome,
		inspect.WillRedeliver, inspect.ReadError, inspect.RepairIncomplete} {
		r := inspect.Report{BizID: id, Pipeline: "settlement", Verdict: inspect.Verdict{Code: code},
			Findings: []inspect.Finding{{Code: code, Step: "notify"}}, Repair: &inspect.RepairView{PlanID: id}}
		// The planner's NEXT (no configuration: it cannot plan, and says
		// so with `where` again).
		lines = append(lines, n.Lines(plans.Next(plans.Input{Report: r}))...)
	}
	// A plan step of every form the planner makes with a configuration.
	plan := plans.Step{Kind: plans.StepPlan, BizID: id, Pipeline: "settlement"}
	undo, applied, absent := plan, plan, plan
	undo.Attest, undo.Undo = true, "undo 1 extra effect(s) of step notify by hand"
	applied.Action, applied.FromStep, applied.Attest, applied.Outcome = plans.Manual, "notify", true, inspect.AttestApplied
	absent.Action, absent.FromStep, absent.Attest, absent.Outcome = plans.Manual, "notify", true, inspect.AttestAbsent
	lines = append(lines, n.Lines([]plans.Step{plan, undo, applied, absent, {Kind: plans.StepDryRun}})...)

	ios, _, out, _ := iostreams.Test()
	ios.SetNoColor(true)
	av := newRepairApplyView(ios, FormatTable, false)
	av.(*repairApplyHuman).next = n
	if err := av.Result(&repair.Result{Outcome: repair.OutcomeApplied, BizID: id, Pipeline: "settlement", Total: 1, Applied: 1}, nil); err != nil {
		t.Fatal(err)
	}
	pv := newRepairPlanView(ios, FormatTable)
	pv.(*repairPlanHuman).next = n
	if err := pv.Plan(&plans.Plan{ID: strings.Repeat("a", 64), BizID: id, Pipeline: "settlement"}, id); err != nil {
		t.Fatal(err)
	}
	rv := newReconcileView(ios, FormatTable)
	rv.(*reconcileHumanView).out, rv.(*reconcileHumanView).next = id, n
	for _, r := range viewTargets() {
		if err := rv.Result(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := rv.Finish(viewSummary()); err != nil {
		t.Fatal(err)
	}
	// A human view shows a line holding a control character quoted, as
	// a Go string (harmless, not for pasting: -o json prints it as is).
	if ui := inspect.ShellQuote(id); !strings.ContainsAny(ui, "\n") {
		cmdLine := regexp.MustCompile(`(?m)(?:Check it: |next: |^  )(opctl .*)$`)
		for _, m := range cmdLine.FindAllStringSubmatch(out.String(), -1) {
			lines = append(lines, strings.TrimSuffix(m[1], "   (write the file with --out)"))
		}
	}
	return lines
}

// TestNextLinesPasteAsPrinted: every command opctl prints for a person to
// run, pasted through a real shell, reaches opctl with exactly the id —
// an id that starts with "-", holds spaces, quotes, $(...), backquotes or
// a newline — as its argument, never as a flag, never run by the shell;
// and the command parses it as that id (a flag-like id once planned every
// target of --from-file, "-o" exited 2).
func TestNextLinesPasteAsPrinted(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("no sh: this test pastes lines through a POSIX shell")
	}
	for _, id := range hostileIDs {
		t.Run(strings.ReplaceAll(id, "/", "_"), func(t *testing.T) {
			dir := t.TempDir()
			lines := nextLines(t, id)
			ran := 0
			for _, line := range lines {
				if !strings.HasPrefix(line, "opctl ") {
					continue
				}
				args := pastedArgs(t, dir, line)
				if len(args) < 2 || args[0] != "--config" || args[1] != "-c it's.yaml" {
					t.Errorf("%s\n--config reached opctl as %q", line, args)
				}
				args = args[4:] // --config and --brokers, checked
				if args[0] == "explain" || strings.Join(args, " ") == "repair apply plan.json --dry-run" {
					continue // no id
				}
				ran++
				if len(args) > 3 && args[2] == "--from-file" {
					// reconcile's next line: the --out file (named id) as
					// the value of --from-file.
					if args[3] != id {
						t.Errorf("$ %s\n--from-file reached opctl as %q, want %q", line, args[3], id)
					}
				} else if k := len(args); k < 2 || args[k-2] != "--" || args[k-1] != id {
					t.Errorf("$ %s\nopctl got %q: want the id %q last, after --", line, args, id)
					continue
				}
				checkParsed(t, line, pastedArgs(t, dir, line), id)
			}
			if ran < 8 {
				t.Errorf("only %d command lines name the id:\n%s", ran, strings.Join(lines, "\n"))
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				t.Errorf("the shell ran part of an id: %s holds %v", dir, ents)
			}
		})
	}
}

// checkParsed runs opctl's own command line parsing on args (the
// commands' work replaced by fakes) and checks the command took id as its
// operation, plan file or plan id.
func checkParsed(t *testing.T, line string, args []string, id string) {
	t.Helper()
	var got string
	ios, _, _, errOut := iostreams.Test()
	f := NewFactory(ios, "test")
	root := NewCmdRoot(f)
	for _, c := range root.Commands() {
		if c.Name() == "repair" || c.Name() == "where" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(NewCmdWhere(f, func(_ context.Context, o *WhereOptions) error { got = o.BizID; return nil }),
		NewCmdRepair(f, &RepairRunners{
			Plan:  func(_ context.Context, o *RepairPlanOptions) error { got = o.BizID + o.FromFile; return nil },
			Apply: func(_ context.Context, o *RepairApplyOptions) error { got = o.File; return nil },
		}))
	root.SetArgs(args)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	err := root.Execute()
	if f.Globals.ConfigPath != "-c it's.yaml" {
		t.Errorf("$ %s\n--config parsed as %q", line, f.Globals.ConfigPath)
	}
	if sources.ValidateBizID(id) != nil && !strings.Contains(line, "repair apply") && !strings.Contains(line, "--from-file") {
		// An id opctl refuses to look up (a control character): refused
		// as that id, exit 2, never taken for something else.
		if code := exitCode(err, false); code != ExitUsage || !strings.Contains(err.Error(), "biz_id") {
			t.Errorf("$ %s\nexit %d (%v), want 2: the id refused as an id", line, code, err)
		}
		return
	}
	if err != nil || got != id {
		t.Errorf("$ %s\nopctl took %q (err %v; %s), want the id %q", line, got, err, errOut.String(), id)
	}
}
