package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Repairer is what the repair commands need (*repair.Service).
type Repairer interface {
	PlanID(ctx context.Context, bizID, pipeline string, o plans.Options) (*plans.Plan, *triage.Operation, error)
	PlanTargets(ctx context.Context, r io.Reader, name, pipeline string, o plans.Options) (*repair.Batch, error)
	Apply(ctx context.Context, plan *plans.Plan, o repair.ApplyOptions) (*repair.Result, error)
	StoredPlan(ctx context.Context, id string) (*plans.Plan, error)
}

// RepairPlanOptions are the parsed flags of `opctl repair plan` and its
// dependencies.
type RepairPlanOptions struct {
	IO     *iostreams.IOStreams
	Format Format
	// Repairer returns the repair service (opened on first use).
	Repairer func() (Repairer, error)

	BizID    string
	Pipeline string
	Action   string
	FromStep string
	Force    bool
	Reason   string
	Attest   string
	Outcome  string
	Operator string
	Out      string
	FromFile string
	// SearchWindow and SearchLimit bound the message search, as for where
	// (the Factory opens the clients with them).
	SearchWindow time.Duration
	SearchLimit  int
	// Next are the global flags the printed apply commands carry.
	Next NextFlags
}

// RepairShowOptions are the parsed flags of `opctl repair show`.
type RepairShowOptions struct {
	IO     *iostreams.IOStreams
	Format Format
	File   string
}

// RepairApplyOptions are the parsed flags of `opctl repair apply` and its
// dependencies.
type RepairApplyOptions struct {
	IO       *iostreams.IOStreams
	Format   Format
	Repairer func() (Repairer, error)

	File     string
	DryRun   bool
	Yes      bool
	Operator string
	// Next are the global flags the printed commands carry.
	Next NextFlags
}

// RepairRunners replace the run functions of `opctl repair`'s subcommands
// in tests; nil (or a nil field) runs the real one.
type RepairRunners struct {
	Plan  func(context.Context, *RepairPlanOptions) error
	Show  func(context.Context, *RepairShowOptions) error
	Apply func(context.Context, *RepairApplyOptions) error
}

// NewCmdRepair builds `opctl repair` (plan, show, apply).
func NewCmdRepair(f *Factory, runners *RepairRunners) *cobra.Command {
	if runners == nil {
		runners = &RepairRunners{}
	}
	c := &cobra.Command{
		Use:   "repair",
		Short: "Plan, review and apply a guarded repair of one operation",
		Long: `Repairs are Terraform-like: 'repair plan' builds a plan from the current
verdict (a file whose id is the sha256 of its body), 'repair show' renders it,
and 'repair apply' re-checks every guard under SELECT ... FOR UPDATE and applies
it, one transaction per action together with its audit row, on mysql.write_dsn.
Applying a plan again continues where an interrupted apply stopped and never
repeats an action. --dry-run runs the SQL in a transaction that is rolled back
and sends nothing.`,
		Args: noArgs,
	}
	c.AddCommand(newCmdRepairPlan(f, runners.Plan), newCmdRepairShow(f, runners.Show), newCmdRepairApply(f, runners.Apply))
	return c
}

func newCmdRepairPlan(f *Factory, runF func(context.Context, *RepairPlanOptions) error) *cobra.Command {
	opts := &RepairPlanOptions{IO: f.IOStreams}
	opts.Repairer = func() (Repairer, error) {
		return f.Service()
	}
	c := &cobra.Command{
		Use:   "plan <biz_id> --reason TEXT [--out plan.json]",
		Short: "Build the repair plan for an operation's verdict",
		Long: `Triage the operation exactly as 'opctl where' does and build the plan the
verdict calls for (docs/repair.md), or the one --action forces:

  DUPLICATE_EFFECT   reverse the newest extra evidence rows (local step with
                     reverse), compensate_remote (remote step with compensate),
                     else manual (--attest what was undone by hand)
  UNKNOWN_OUTCOME    the probe decides; without one: --action manual
                     --attest TEXT --outcome applied|absent, then advance or
                     rewind + republish
  STATE_BEHIND       advance_state, then republish if not terminal
  STRANDED           rewind_state if needed, then republish (opctl-from-step)
  WRONGLY_SKIPPED    flip_skipped (SKIPPED → PENDING), then republish
                     (opctl-force-effect)
  MISSING_EFFECT     rewind_state to before the step, then republish
  IN_FLIGHT          refused; --action release_lease only when the owner left
                     the consumer group

--reason is required. --action keeps only that kind of action (--force lets it
act on a verdict that does not call for it, never past a live lease).
--from-step names the step a republish resumes from, or the step a reverse,
compensate_remote or manual acts on.

With --from-file, one plan per target line ({"biz_id","pipeline",...}, the
output of 'opctl reconcile --out'), written to --out as JSON lines. A target
that gets no plan (a bad line or id, nothing to repair, a refusal, a manual
action without --attest) is skipped, reported on stderr with its line and
why, and makes the exit 3; the others are still planned. No plan made, or a
batch stopped (MySQL unreachable, an interrupt): nothing is written.`,
		Example: `  opctl repair plan PAY-1 --reason "INC-4711 double debit" --out plan.json
  opctl repair plan 8821 --pipeline orders --reason "points lost" \
    --out plan.json
  opctl repair plan F-9 --action manual --attest "WMS: lock L-77 exists" \
    --outcome applied --reason INC-9 --out plan.json
  opctl repair plan PAY-3 --action republish --from-step ledger --force \
    --reason "replay" -o json > plan.json
  opctl repair plan --from-file targets.jsonl --reason "nightly reconcile" \
    --out plans.jsonl`,
		Args: func(_ *cobra.Command, args []string) error {
			if opts.FromFile != "" {
				if len(args) > 0 {
					return usageErrorf("--from-file and a <biz_id>: give one or the other")
				}
				return nil
			}
			return exactArgs(1, "one <biz_id> (or --from-file)")(nil, args)
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Format, opts.Next = f.Globals.Output, f.Globals.Next()
			opts.SearchWindow, opts.SearchLimit = f.Globals.SearchWindow, f.Globals.SearchLimit
			if len(args) == 1 {
				opts.BizID = args[0]
				if err := sources.ValidateBizID(opts.BizID); err != nil {
					return err
				}
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return usageErrorf("--reason is required: say why this repair is made (an incident, a ticket)")
			}
			if opts.Action != "" && !plans.IsActionType(opts.Action) {
				return usageErrorf("--action %q: want one of %s", opts.Action, strings.Join(plans.ActionTypeNames(), ", "))
			}
			if opts.Force && opts.Action == "" {
				return usageErrorf("--force needs --action")
			}
			if opts.FromFile != "" && opts.Out == "" {
				return usageErrorf("--from-file needs --out plans.jsonl")
			}
			var err error
			if opts.Operator, err = operatorOr(opts.Operator); err != nil {
				return err
			}
			if err := checkText("--reason", opts.Reason, "--attest", opts.Attest); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRepairPlan(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Pipeline, "pipeline", "", "the pipeline (default: the one pipeline that knows the id)")
	fl.StringVar(&opts.Action, "action", "", "force a plan of this action type: "+strings.Join(plans.ActionTypeNames(), " | "))
	fl.StringVar(&opts.FromStep, "from-step", "", "step name or 1-based index: where a republish resumes, or the step an action acts on")
	fl.BoolVar(&opts.Force, "force", false, "let --action act on a verdict that does not call for it (never past a live lease)")
	fl.StringVar(&opts.Reason, "reason", "", "why this repair is made (required; recorded in the plan and the audit)")
	fl.StringVar(&opts.Attest, "attest", "", "what was done by hand (required by a manual action)")
	fl.StringVar(&opts.Outcome, "outcome", "", "with --action manual: what the downstream says about the unknown call: applied|absent")
	fl.StringVar(&opts.Operator, "operator", "", "who makes the plan (default: $USER)")
	fl.StringVar(&opts.Out, "out", "", "write the plan file here (JSON; JSON lines with --from-file)")
	fl.StringVar(&opts.FromFile, "from-file", "", "plan every target of a JSONL file (opctl reconcile --out)")
	fl.DurationVar(&f.Globals.SearchWindow, "search-window", sources.DefaultSearchWindow, "message search: ± this around the operation's earliest timestamp")
	fl.IntVar(&f.Globals.SearchLimit, "search-limit", sources.DefaultSearchLimit, "message search: at most this many records read")
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	_ = c.RegisterFlagCompletionFunc("action", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return plans.ActionTypeNames(), cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

func newCmdRepairShow(f *Factory, runF func(context.Context, *RepairShowOptions) error) *cobra.Command {
	opts := &RepairShowOptions{IO: f.IOStreams}
	return &cobra.Command{
		Use:   "show <plan.json>",
		Short: "Render a plan file and check its id",
		Long: `Render a plan as a readable diff and check that its id is the sha256 of its
body. A plan whose body changed is reported as tampered (exit 5). A JSON lines
file of plans (repair plan --from-file --out) shows each.`,
		Example: `  opctl repair show plan.json
  opctl repair show plan.json -o json`,
		Args: exactArgs(1, "one <plan.json>"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.File, opts.Format = args[0], f.Globals.Output
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRepairShow(c.Context(), opts)
		},
	}
}

func newCmdRepairApply(f *Factory, runF func(context.Context, *RepairApplyOptions) error) *cobra.Command {
	opts := &RepairApplyOptions{IO: f.IOStreams}
	opts.Repairer = func() (Repairer, error) { return f.Service() }
	c := &cobra.Command{
		Use:   "apply <plan.json|PLAN_ID> [--dry-run] [--yes]",
		Short: "Apply a reviewed plan: re-check every guard, then act",
		Long: `Apply a plan made by 'opctl repair plan':

  1. the plan's id must be the sha256 of its body, and the plan must be exactly
     what the configuration makes from what the plan observed: a plan whose
     statements, guards, actions or message were edited is refused as
     tampered, recomputed id or not (a truncated file too);
  2. its pipeline must still be configured as when the plan was made;
  3. when the audit shows some of its actions took effect (a crash, a second
     apply), apply resumes at the first that did not; a plan all of whose
     actions took effect exits 0 with "already applied";
  4. otherwise what the plan observed is read again: a plan whose operation
     changed is stale and refused with a diff of what changed;
  5. each action runs in one transaction on mysql.write_dsn with its guards
     re-read under SELECT ... FOR UPDATE and its audit row; a republish is
     recorded 'publishing' before the send and 'published' after it.

A JSON lines file of plans (repair plan --from-file --out) applies each plan
in turn; a refused plan does not stop the others. A plan id (64 hex digits,
or at least 12 of them) instead of a file reads the plan from the audit: how
'opctl where' tells you to finish a plan that stopped part-way
(REPAIR_INCOMPLETE).

Nothing after a refused action is changed. On a terminal, apply asks for
confirmation; --yes skips it (scripts). --dry-run runs every SQL action in a
transaction that is rolled back, sends no record and no HTTP call, and prints
what would happen with the row counts each statement affected.`,
		Example: `  opctl repair apply plan.json --dry-run
  opctl repair apply plan.json
  opctl repair apply plan.json --yes --operator alice -o json
  # a plan that stopped part-way, read from the audit
  opctl repair apply 3f1c9a0b7e21 --dry-run`,
		Args: exactArgs(1, "one <plan.json> or a plan id"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.File, opts.Format, opts.Next = args[0], f.Globals.Output, f.Globals.Next()
			var err error
			if opts.Operator, err = operatorOr(opts.Operator); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRepairApply(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.DryRun, "dry-run", false, "run the SQL in rolled-back transactions and send nothing")
	c.Flags().BoolVar(&opts.Yes, "yes", false, "apply without asking for confirmation")
	c.Flags().StringVar(&opts.Operator, "operator", "", "who applies (recorded in the audit; default: $USER)")
	return c
}

func runRepairPlan(ctx context.Context, opts *RepairPlanOptions) error {
	svc, err := opts.Repairer()
	if err != nil {
		return err
	}
	v := newRepairPlanView(opts.IO, opts.Format)
	if hv, ok := v.(*repairPlanHuman); ok {
		hv.next = opts.Next
	}
	if opts.FromFile != "" {
		return runRepairPlanFile(ctx, svc, opts, v)
	}
	plan, op, err := svc.PlanID(ctx, opts.BizID, opts.Pipeline, planOptions(opts))
	var nothing *plans.NothingToRepairError
	switch {
	case errors.As(err, &nothing):
		return v.Nothing(op.Report)
	case err != nil:
		return err
	}
	if opts.Out != "" {
		if err := writeFileAtomic(opts.Out, modeShared, func(w io.Writer) error { return plans.Encode(w, plan) }); err != nil {
			return fmt.Errorf("--out %s: %w; no plan file written", opts.Out, err)
		}
	}
	return v.Plan(plan, opts.Out)
}

func planOptions(opts *RepairPlanOptions) plans.Options {
	return plans.Options{Reason: opts.Reason, Operator: opts.Operator, Action: plans.ActionType(opts.Action), FromStep: opts.FromStep,
		Force: opts.Force, Attest: opts.Attest, Outcome: opts.Outcome}
}

// runRepairPlanFile plans every target of --from-file (docs/repair.md):
// the plans made go to --out, every target that got none is reported as
// skipped, with its line and why, and makes the exit 3. When no plan was
// made, or the batch stopped (an interrupt, MySQL unreachable, the file
// unreadable), nothing is written and --out is left as it was.
func runRepairPlanFile(ctx context.Context, svc Repairer, opts *RepairPlanOptions, v repairPlanView) error {
	in, err := os.Open(opts.FromFile)
	if err != nil {
		return fmt.Errorf("--from-file: %w", err)
	}
	defer in.Close()
	batch, err := svc.PlanTargets(ctx, in, opts.FromFile, opts.Pipeline, planOptions(opts))
	if batch == nil {
		batch = &repair.Batch{File: opts.FromFile}
	}
	notWritten := fmt.Sprintf("nothing was written to --out %s", opts.Out)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(opts.IO.ErrOut, "opctl: interrupted at line %d of %s (%d plan(s) made, %d target(s) skipped so far); %s\n",
				batch.Lines, ui.Safe(batch.File), len(batch.Plans), len(batch.Skipped), notWritten)
			return exitWith(ExitInterrupted)
		}
		return fmt.Errorf("%w; the batch stopped, %s", err, notWritten)
	}
	res := batchResult{Batch: batch, Out: opts.Out}
	if len(batch.Plans) > 0 {
		if err := writeFileAtomic(opts.Out, modeShared, func(w io.Writer) error {
			enc := json.NewEncoder(w)
			for _, p := range batch.Plans {
				if err := enc.Encode(p); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return fmt.Errorf("--out %s: %w; no plans file written", opts.Out, err)
		}
		res.Written = true
	} else if _, err := os.Stat(opts.Out); err == nil {
		res.OldOut = true
	}
	if err := v.Batch(res); err != nil {
		return err
	}
	if len(batch.Skipped) > 0 {
		return exitWith(ExitAttention)
	}
	return nil
}

// batchResult is what `repair plan --from-file` made and where it went.
type batchResult struct {
	*repair.Batch
	// Out is --out; Written says whether the plans were written there (not
	// when there is none). OldOut: --out exists and was not replaced.
	Out     string
	Written bool
	OldOut  bool
}

func runRepairShow(_ context.Context, opts *RepairShowOptions) error {
	ps, err := readPlans(opts.File)
	if err != nil {
		return err
	}
	v := newRepairPlanView(opts.IO, opts.Format)
	var bad error
	for _, p := range ps {
		verr := p.Verify()
		if err := v.Show(p, verr); err != nil {
			return err
		}
		if verr != nil && bad == nil {
			bad = verr
		}
	}
	return bad
}

func runRepairApply(ctx context.Context, opts *RepairApplyOptions) error {
	ps, err := readPlans(opts.File)
	if errors.Is(err, fs.ErrNotExist) && plans.IsPlanID(opts.File) {
		// Not a file but a plan id: the plan an apply recorded in the
		// audit (docs/repair.md "Finishing a plan").
		ps, err = storedPlan(ctx, opts)
	}
	if err != nil {
		return err
	}
	v := newRepairApplyView(opts.IO, opts.Format, opts.DryRun)
	if hv, ok := v.(*repairApplyHuman); ok {
		hv.next = opts.Next
	}
	var verified []*plans.Plan
	for _, p := range ps {
		if p.Verify() == nil {
			if err := v.Plan(p); err != nil {
				return err
			}
			verified = append(verified, p)
		}
	}
	if len(verified) > 0 && !opts.Yes && !opts.DryRun {
		if err := confirmApply(opts.IO, verified); err != nil {
			return err
		}
	}
	svc, err := opts.Repairer()
	if err != nil {
		return err
	}
	ao := repair.ApplyOptions{DryRun: opts.DryRun, Operator: opts.Operator, Progress: v.Progress}
	if len(ps) == 1 {
		res, err := svc.Apply(ctx, ps[0], ao)
		if verr := v.Result(res, err); verr != nil {
			return verr
		}
		return err
	}
	// The plans of a JSONL file are independent operations: a refused one
	// does not stop the others; each that did not apply is said on stderr.
	err = repair.ApplyEach(ctx, svc, ps, ao, func(p *plans.Plan, res *repair.Result, err error) error {
		if verr := v.Result(res, err); verr != nil {
			return verr
		}
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(opts.IO.ErrOut, "opctl: plan %s (%s): %s\n", p.Short(), ui.Safe(p.BizID), ui.SafeLines(err.Error()))
		}
		return nil
	})
	var each *repair.EachError
	if errors.As(err, &each) {
		return exitWith(each.ExitCode()) // each said on stderr
	}
	return err
}

// storedPlan reads the plan whose id (or prefix) is opts.File from the
// audit.
func storedPlan(ctx context.Context, opts *RepairApplyOptions) ([]*plans.Plan, error) {
	svc, err := opts.Repairer()
	if err != nil {
		return nil, err
	}
	p, err := svc.StoredPlan(ctx, opts.File)
	if err != nil {
		return nil, err
	}
	return []*plans.Plan{p}, nil
}

// readPlans reads a plan file: one plan, or JSON lines of plans (repair plan
// --from-file --out). A file that does not decode as plans — a field a plan
// does not have, truncated or malformed JSON — was changed after it was
// made: refused as tampered (exit 5).
func readPlans(path string) ([]*plans.Plan, error) {
	fh, _, err := config.OpenRegular(path) // a named pipe is refused, never waited on
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	ps, err := plans.DecodeAll(fh)
	if err != nil {
		return nil, &plans.RefusedError{Code: plans.CodeTampered, Detail: fmt.Sprintf("%s: %v: a plan file is applied only as opctl wrote it; make a new plan", path, err)}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s: no plan in the file", path)
	}
	return ps, nil
}

// confirmApply asks on a terminal, like terraform apply: only "yes" goes on.
func confirmApply(ios *iostreams.IOStreams, ps []*plans.Plan) error {
	if !ios.IsStdinTTY() {
		return &RefusedError{Err: errors.New("apply needs confirmation and stdin is not a terminal: pass --yes (or --dry-run); nothing was changed")}
	}
	if len(ps) == 1 {
		p := ps[0]
		fmt.Fprintf(ios.ErrOut, "\nApply these %d action(s) to %s in pipeline %s?\n  Only 'yes' will be accepted: ", len(p.Actions), ui.Safe(p.BizID), ui.Safe(p.Pipeline))
	} else {
		fmt.Fprintf(ios.ErrOut, "\nApply these %d plans?\n  Only 'yes' will be accepted: ", len(ps))
	}
	line, _ := bufio.NewReader(ios.In).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return &RefusedError{Err: errors.New("apply not confirmed; nothing was changed")}
	}
	return nil
}
