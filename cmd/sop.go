package cmd

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sop"
	"github.com/opctl-dev/opctl/sources/config"
)

// SopOptions are the parsed flags of `opctl sop` and its dependencies.
type SopOptions struct {
	IO     *iostreams.IOStreams
	Format Format
	// Library loads the runbooks (built-ins and sop.dir).
	Library func() (*sop.Library, error)
	// Runner opens the sources a run needs.
	Runner func() (*sop.Runner, error)

	Name  string
	Files []string

	BizID    string
	Pipeline string
	DryRun   bool
	Yes      bool
	Step     bool
	Resume   string
	Reason   string
	Attest   string
	Outcome  string
	Action   string
	Operator string
	// Next are the global flags the printed resume command carries.
	Next NextFlags
}

// NewCmdSop builds `opctl sop` (list, show, check, run). runF replaces
// each subcommand's run function in tests (its first argument names it).
func NewCmdSop(f *Factory, runF func(context.Context, string, *SopOptions) error) *cobra.Command {
	opts := &SopOptions{IO: f.IOStreams}
	opts.Library = func() (*sop.Library, error) { return sopLibrary(f) }
	opts.Runner = func() (*sop.Runner, error) { return sopRunner(f) }
	run := func(name string, fn func(context.Context, *SopOptions) error) func(*cobra.Command, []string) error {
		return func(c *cobra.Command, args []string) error {
			opts.Format, opts.Next = f.Globals.Output, f.Globals.Next()
			switch name {
			case "show":
				opts.Name = args[0]
			case "check":
				opts.Files = args
			case "run":
				if len(args) == 1 {
					opts.Name = args[0]
				}
			}
			if runF != nil {
				return runF(c.Context(), name, opts)
			}
			return fn(c.Context(), opts)
		}
	}
	c := &cobra.Command{
		Use:   "sop",
		Short: "Runbooks: incident procedures that verify themselves",
		Long: `Runbooks are incident procedures as data (docs/runbooks.md): one built in for
each verdict that calls for action, and mass-redelivery for a broker blip or a
rebalance storm; the team's own in sop.dir add to them and override them by
name. Each step can triage again and stops the run (exit 5) when the verdict is
not the one the runbook expects.`,
		Args: noArgs,
	}
	list := &cobra.Command{Use: "list", Short: "List the runbooks: name, title, verdicts, source file", Args: noArgs, RunE: run("list", runSopList)}
	show := &cobra.Command{Use: "show NAME|FILE.yaml", Short: "Show a runbook's steps", Args: exactArgs(1, "one runbook NAME"), RunE: run("show", runSopShow),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			lib, err := opts.Library()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			return lib.Names(), cobra.ShellCompDirectiveNoFileComp
		}}
	check := &cobra.Command{Use: "check FILE...", Short: "Check runbook files: every error with file:line",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("want one or more runbook FILEs")
			}
			return nil
		}, RunE: run("check", runSopCheck)}
	runCmd := &cobra.Command{
		Use:   "run [NAME] (--biz-id X | --resume RUN_ID) [--dry-run]",
		Short: "Run a runbook on an operation (or on reconcile's targets)",
		Long: `Run a runbook. Without NAME, the runbook for the operation's current verdict.
On a terminal a review step shows the plans and asks; --yes runs scripted;
--dry-run builds every plan and dry-runs it (nothing is applied, verify steps
are skipped); --step asks before each step. Ctrl-C stops between steps and says
how far the run got. Every run is recorded (sop.runs_dir): --resume RUN_ID
continues from the first step that did not finish. Plans and audit rows carry
the runbook and the run id. -o json prints one object per step, then a summary.`,
		Example: `  opctl sop run --biz-id PAY-1 --reason INC-7 --dry-run
  opctl sop run stranded --biz-id PAY-3 --reason INC-7 --yes -o json
  opctl sop run mass-redelivery --reason INC-9 --pipeline settlement
  opctl sop run --resume r20261201T101500-3fa2c1 --yes`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("want at most one runbook NAME, got %d arguments", len(args))
			}
			return nil
		},
		RunE: run("run", runSopRun),
	}
	fl := runCmd.Flags()
	fl.StringVar(&opts.BizID, "biz-id", "", "the operation")
	fl.StringVar(&opts.Pipeline, "pipeline", "", "the operation's pipeline (a mass runbook: the pipeline reconciled)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "build and dry-run every plan; apply nothing")
	fl.BoolVar(&opts.Yes, "yes", false, "run scripted: review steps pass without a person")
	fl.BoolVar(&opts.Step, "step", false, "ask before each step")
	fl.StringVar(&opts.Resume, "resume", "", "resume run RUN_ID from the first step that did not finish")
	fl.StringVar(&opts.Reason, "reason", "", "why (an incident, a ticket): recorded in every plan")
	fl.StringVar(&opts.Attest, "attest", "", "what was done by hand (a manual action needs it)")
	fl.StringVar(&opts.Outcome, "outcome", "", "what a manual action attests of an unknown call: applied|absent")
	fl.StringVar(&opts.Action, "action", "", "the plan's action, as repair plan --action (e.g. manual for an unknown outcome without a probe)")
	fl.StringVar(&opts.Operator, "operator", "", "who runs it (plans and audit; default: $USER)")
	c.AddCommand(list, show, check, runCmd)
	return c
}

// sopLibrary is the built-in runbooks and those of sop.dir. Without a
// configuration file, the built-ins.
func sopLibrary(f *Factory) (*sop.Library, error) {
	cfg, err := f.Config()
	var nf *config.NotFoundError
	if errors.As(err, &nf) {
		return sop.Builtins()
	}
	if err != nil {
		return nil, err
	}
	lib, err := sop.Load(configRelative(cfg, cfg.Sop.Dir))
	if lib != nil {
		for _, s := range lib.Skipped {
			fmt.Fprintf(f.IOStreams.ErrOut, "opctl: note: sop.dir: %s\n", ui.Safe(s))
		}
	}
	return lib, err
}

// configRelative is path relative to the config file's directory.
func configRelative(cfg *config.Config, path string) string {
	if path == "" || filepath.IsAbs(path) || cfg.Path == "" {
		return path
	}
	return filepath.Join(filepath.Dir(cfg.Path), path)
}

func sopRunner(f *Factory) (*sop.Runner, error) {
	svc, err := f.Service()
	if err != nil {
		return nil, err
	}
	c, err := f.Clients()
	if err != nil {
		return nil, err
	}
	run, err := f.Reconcile()
	if err != nil {
		return nil, err
	}
	dir := configRelative(c.Config, c.Config.Sop.RunsDir)
	if dir == "" {
		dir = sop.DefaultRunsDir()
	}
	return &sop.Runner{Triage: svc.Triage, Service: svc, Config: c.Config, Records: sop.Records{Dir: dir}, Lock: svc.Lock, Reconcile: run}, nil
}

func runSopList(_ context.Context, opts *SopOptions) error {
	lib, err := opts.Library()
	if err != nil {
		return err
	}
	return newSopLibraryView(opts.IO, opts.Format).List(lib.Runbooks)
}

func codeList(cs []inspect.Code) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ",")
}

func runSopShow(_ context.Context, opts *SopOptions) error {
	lib, err := opts.Library()
	if err != nil {
		return err
	}
	rb, err := lib.Select(opts.Name)
	if err != nil {
		return err
	}
	return newSopLibraryView(opts.IO, opts.Format).Show(rb)
}

func runSopCheck(_ context.Context, opts *SopOptions) error {
	v := newSopLibraryView(opts.IO, opts.Format)
	var all sop.ErrorList
	var other error
	for _, file := range opts.Files {
		rb, err := sop.ReadFile(file)
		var list sop.ErrorList
		switch {
		case errors.As(err, &list):
			all = append(all, list...)
		case err != nil:
			other = errors.Join(other, fmt.Errorf("runbook %s: %w", file, err))
		default:
			if err := v.Checked(file, rb); err != nil {
				return err
			}
		}
	}
	if err := v.Problems(all, other == nil); err != nil {
		return err
	}
	if other != nil {
		return errors.Join(all.OrNil(), other)
	}
	return all.OrNil()
}

func runSopRun(ctx context.Context, opts *SopOptions) error {
	if opts.Resume != "" && (opts.Name != "" || opts.BizID != "") {
		return usageErrorf("--resume continues a run as it started: give no NAME and no --biz-id")
	}
	if opts.Resume == "" && opts.Name == "" && opts.BizID == "" {
		return usageErrorf("give --biz-id (the runbook of its verdict), a runbook NAME, or --resume RUN_ID")
	}
	var err error
	if opts.Operator, err = operatorOr(opts.Operator); err != nil {
		return err
	}
	if err := checkText("--reason", opts.Reason, "--attest", opts.Attest); err != nil {
		return err
	}
	lib, err := opts.Library()
	if err != nil {
		return err
	}
	var rb *sop.Runbook
	if opts.Name != "" {
		if rb, err = lib.Select(opts.Name); err != nil {
			return err
		}
	}
	// A run applies only with --yes, or with a person answering on a
	// terminal (a review step, or the confirmation of an apply step):
	// piped, a run that may apply is refused before anything runs.
	interactive := !opts.Yes && !opts.DryRun
	if (interactive || opts.Step) && !opts.IO.IsStdinTTY() {
		needs := "a person must accept its plans before they are applied"
		switch {
		case opts.Step:
			needs = "--step asks before each step"
		case opts.Resume != "":
			needs = "the resumed run may apply plans, which a person must accept"
		case rb == nil:
			needs = "the runbook of the operation's verdict may apply plans, which a person must accept"
		}
		if rb == nil || rb.Applies() || opts.Step {
			return usageErrorf("stdin is not a terminal and %s: pass --yes to run it scripted (or --dry-run)", needs)
		}
	}
	r, err := opts.Runner()
	if err != nil {
		return err
	}
	v := newSopView(opts)
	ro := sop.Options{BizID: opts.BizID, Pipeline: opts.Pipeline, DryRun: opts.DryRun, Operator: opts.Operator, Yes: opts.Yes, Emit: v.Event,
		Plan: plans.Options{Reason: opts.Reason, Operator: opts.Operator, Action: plans.ActionType(opts.Action), Attest: opts.Attest, Outcome: opts.Outcome}}
	if interactive {
		ro.Review = v.Review
	}
	if opts.Step {
		ro.Before = v.Before
	}
	var sum *sop.Summary
	if opts.Resume != "" {
		sum, rb, err = r.Resume(ctx, lib, opts.Resume, ro)
	} else {
		if rb == nil {
			if rb, err = runbookFor(ctx, r, lib, opts); rb == nil {
				return err
			}
		}
		v.Start(rb)
		sum, err = r.Start(ctx, rb, ro)
	}
	if sum == nil {
		return err
	}
	if sum.Resume != "" {
		sum.Resume = opts.Next.Apply(sum.Resume) // as the run was started: --config ...
	}
	if verr := v.Summary(sum); verr != nil {
		return verr
	}
	if sum.Exit == ExitOK {
		return nil
	}
	if sum.Exit == ExitError && err != nil {
		return err // printed once, by the error
	}
	return exitWith(sum.Exit)
}

// runbookFor is the runbook of the operation's current verdict; nil (and
// the error to end with, nil for exit 0) when there is none.
func runbookFor(ctx context.Context, r *sop.Runner, lib *sop.Library, opts *SopOptions) (*sop.Runbook, error) {
	rb, op, err := r.RunbookFor(ctx, lib, opts.BizID, opts.Pipeline)
	if rb != nil || err != nil {
		return rb, err
	}
	code := op.Report.Verdict.Code
	sev := inspect.SeverityOf(code)
	fmt.Fprintf(opts.IO.ErrOut, "opctl: %s (%s) is %s (%s): no runbook is for that verdict (opctl sop list)\n", ui.Safe(opts.BizID), ui.Safe(op.Pipeline.Name), code, sev)
	if sev == inspect.SeverityAction {
		return nil, exitWith(ExitAttention)
	}
	return nil, nil
}
