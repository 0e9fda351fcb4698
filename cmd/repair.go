package cmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/probe"
)

// RepairPlanOptions are the parsed flags of `opctl repair plan`.
type RepairPlanOptions struct {
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
	// SearchWindow and SearchLimit bound the message search, as for where.
	SearchWindow time.Duration
	SearchLimit  int
}

// RepairShowOptions are the parsed flags of `opctl repair show`.
type RepairShowOptions struct {
	File string
}

// RepairApplyOptions are the parsed flags of `opctl repair apply`.
type RepairApplyOptions struct {
	File     string
	DryRun   bool
	Yes      bool
	Operator string
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
	opts := &RepairPlanOptions{}
	c := &cobra.Command{
		Use:   "plan <biz_id> --reason TEXT [--out plan.json]",
		Short: "Build the repair plan for an operation's verdict",
		Long: `Triage the operation exactly as 'opctl where' does and build the plan the
verdict calls for (SPEC §7), or the one --action forces:

  DUPLICATE_EFFECT   reverse the newest extra evidence rows (local step with
                     reverse), compensate_remote (remote step with compensate),
                     else manual (--attest what was undone by hand)
  UNKNOWN_OUTCOME    the probe decides; without one: --action manual --attest TEXT
                     --outcome applied|absent, then advance or rewind + republish
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
output of 'opctl reconcile --out'); targets that no longer need a repair are
reported and skipped; the plans are written to --out as JSON lines.`,
		Example: `  opctl repair plan PAY-1 --reason "INC-4711 double debit" --out plan.json
  opctl repair plan 8821 --pipeline orders --reason "points lost" --out plan.json
  opctl repair plan F-9 --action manual --attest "WMS: lock L-77 exists" --outcome applied --reason INC-9 --out plan.json
  opctl repair plan PAY-3 --action republish --from-step ledger --force --reason "replay" -o json > plan.json
  opctl repair plan --from-file targets.jsonl --reason "nightly reconcile" --out plans.jsonl`,
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
			if len(args) == 1 {
				opts.BizID = args[0]
				if err := ValidateBizID(opts.BizID); err != nil {
					return err
				}
			}
			if strings.TrimSpace(opts.Reason) == "" {
				return usageErrorf("--reason is required: say why this repair is made (an incident, a ticket)")
			}
			if opts.Action != "" && !repair.IsActionType(opts.Action) {
				return usageErrorf("--action %q: want one of %s", opts.Action, strings.Join(repair.ActionTypes(), ", "))
			}
			if opts.Force && opts.Action == "" {
				return usageErrorf("--force needs --action")
			}
			if opts.FromFile != "" && opts.Out == "" {
				return usageErrorf("--from-file needs --out plans.jsonl")
			}
			if opts.Operator == "" {
				opts.Operator = defaultOperator()
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRepairPlan(c.Context(), f, opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Pipeline, "pipeline", "", "the pipeline (default: the one pipeline that knows the id)")
	fl.StringVar(&opts.Action, "action", "", "force a plan of this action type: "+strings.Join(repair.ActionTypes(), "|"))
	fl.StringVar(&opts.FromStep, "from-step", "", "step name or 1-based index: where a republish resumes, or the step an action acts on")
	fl.BoolVar(&opts.Force, "force", false, "let --action act on a verdict that does not call for it (never past a live lease)")
	fl.StringVar(&opts.Reason, "reason", "", "why this repair is made (required; recorded in the plan and the audit)")
	fl.StringVar(&opts.Attest, "attest", "", "what was done by hand (required by a manual action)")
	fl.StringVar(&opts.Outcome, "outcome", "", "with --action manual: what the downstream says about the unknown call: applied|absent")
	fl.StringVar(&opts.Operator, "operator", "", "who makes the plan (default: $USER)")
	fl.StringVar(&opts.Out, "out", "", "write the plan file here (JSON; JSON lines with --from-file)")
	fl.StringVar(&opts.FromFile, "from-file", "", "plan every target of a JSONL file (opctl reconcile --out)")
	fl.DurationVar(&opts.SearchWindow, "search-window", 5*time.Minute, "message search: ± this around the operation's earliest timestamp")
	fl.IntVar(&opts.SearchLimit, "search-limit", 50000, "message search: at most this many records read")
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	_ = c.RegisterFlagCompletionFunc("action", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return repair.ActionTypes(), cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

func newCmdRepairShow(f *Factory, runF func(context.Context, *RepairShowOptions) error) *cobra.Command {
	opts := &RepairShowOptions{}
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
			opts.File = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRepairShow(c.Context(), f, opts)
		},
	}
}

func newCmdRepairApply(f *Factory, runF func(context.Context, *RepairApplyOptions) error) *cobra.Command {
	opts := &RepairApplyOptions{}
	c := &cobra.Command{
		Use:   "apply <plan.json> [--dry-run] [--yes]",
		Short: "Apply a reviewed plan: re-check every guard, then act",
		Long: `Apply a plan made by 'opctl repair plan':

  1. the plan's id must be the sha256 of its body (a changed file is refused);
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
in turn; a refused plan does not stop the others.

Nothing after a refused action is changed. On a terminal, apply asks for
confirmation; --yes skips it (scripts). --dry-run runs every SQL action in a
transaction that is rolled back, sends no record and no HTTP call, and prints
what would happen with the row counts each statement affected.`,
		Example: `  opctl repair apply plan.json --dry-run
  opctl repair apply plan.json
  opctl repair apply plan.json --yes --operator alice -o json`,
		Args: exactArgs(1, "one <plan.json>"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.File = args[0]
			if opts.Operator == "" {
				opts.Operator = defaultOperator()
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runRepairApply(c.Context(), f, opts)
		},
	}
	c.Flags().BoolVar(&opts.DryRun, "dry-run", false, "run the SQL in rolled-back transactions and send nothing")
	c.Flags().BoolVar(&opts.Yes, "yes", false, "apply without asking for confirmation")
	c.Flags().StringVar(&opts.Operator, "operator", "", "who applies (recorded in the audit; default: $USER)")
	return c
}

// defaultOperator is $USER, else the OS user name.
func defaultOperator() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}

// repairError maps the repair package's errors to exit codes.
func repairError(err error) error {
	var (
		rf *repair.RefusedError
		ie *repair.InputError
		nf *repair.NotFoundError
	)
	switch {
	case errors.As(err, &rf):
		return &CodeError{Code: ExitRefused, Err: err}
	case errors.As(err, &ie):
		return &UsageError{Err: err}
	case errors.As(err, &nf):
		return &CodeError{Code: ExitNotFound, Err: err}
	}
	return err
}

func runRepairPlan(ctx context.Context, f *Factory, opts *RepairPlanOptions) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	col, err := f.Collector(cfg, opts.SearchWindow, opts.SearchLimit)
	if err != nil {
		return err
	}
	var counter repair.PartitionCounter
	if k, _ := f.Kafka(cfg); k != nil {
		counter = k
	}
	v := newRepairPlanView(f)
	if opts.FromFile != "" {
		return runRepairPlanFile(ctx, f, cfg, col, counter, opts, v)
	}
	pipelines, err := selectPipelines(cfg, opts.Pipeline)
	if err != nil {
		return err
	}
	ev, err := pickOperation(ctx, cfg, col, pipelines, opts.BizID, opts.Pipeline != "")
	if err != nil {
		return err
	}
	plan, rep, err := repair.PrepareFrom(ctx, cfg, *ev, counter, planOptions(opts))
	var nothing *repair.NothingToRepairError
	switch {
	case errors.As(err, &nothing):
		return v.Nothing(rep)
	case err != nil:
		return repairError(err)
	}
	if opts.Out != "" {
		if err := writePlanFile(opts.Out, func(w io.Writer) error { return repair.Encode(w, plan) }); err != nil {
			return err
		}
	}
	return v.Plan(plan, opts.Out)
}

func planOptions(opts *RepairPlanOptions) repair.Options {
	return repair.Options{Reason: opts.Reason, Operator: opts.Operator, Action: opts.Action, FromStep: opts.FromStep,
		Force: opts.Force, Attest: opts.Attest, Outcome: opts.Outcome}
}

// pickOperation collects the id in the given pipelines and returns the
// evidence of the one that knows it. Several that know it: a usage error
// asking for --pipeline; none: not found (exit 4).
func pickOperation(ctx context.Context, cfg *config.Config, col *sources.Collector, pipelines []*config.Pipeline, bizID string, explicit bool) (*sources.Evidence, error) {
	evs := make([]sources.Evidence, len(pipelines))
	errs := make([]error, len(pipelines))
	done := make(chan int, len(pipelines))
	for i, p := range pipelines {
		go func() {
			evs[i], errs[i] = col.Collect(ctx, p, bizID)
			done <- i
		}()
	}
	for range pipelines {
		<-done
	}
	var known []int
	for i := range pipelines {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if explicit || inspect.Diagnose(evs[i]).Verdict.Code != inspect.NotFound {
			known = append(known, i)
		}
	}
	switch {
	case len(known) == 0:
		return nil, &CodeError{Code: ExitNotFound, Err: fmt.Errorf("%s is not known to any pipeline (%s)", bizID, strings.Join(cfg.PipelineNames(), ", "))}
	case len(known) > 1:
		names := make([]string, len(known))
		for i, k := range known {
			names[i] = pipelines[k].Name
		}
		return nil, usageErrorf("%s is known to pipelines %s: pass --pipeline", bizID, strings.Join(names, ", "))
	}
	return &evs[known[0]], nil
}

// planTarget is one line of a reconcile targets file.
type planTarget struct {
	BizID    string       `json:"biz_id"`
	Pipeline string       `json:"pipeline"`
	Check    string       `json:"check"`
	Verdict  inspect.Code `json:"verdict"`
	Step     string       `json:"step"`
}

func runRepairPlanFile(ctx context.Context, f *Factory, cfg *config.Config, col *sources.Collector, counter repair.PartitionCounter, opts *RepairPlanOptions, v repairPlanView) error {
	in, err := os.Open(opts.FromFile)
	if err != nil {
		return err
	}
	defer in.Close()
	var plans []*repair.Plan
	var skipped []planSkip
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var tg planTarget
		if err := json.Unmarshal([]byte(text), &tg); err != nil || tg.BizID == "" {
			return usageErrorf("%s:%d: not a target line ({\"biz_id\",\"pipeline\",...})", opts.FromFile, line)
		}
		if err := ValidateBizID(tg.BizID); err != nil {
			return usageErrorf("%s:%d: %v", opts.FromFile, line, err)
		}
		name := tg.Pipeline
		if opts.Pipeline != "" {
			name = opts.Pipeline
		}
		pipelines, err := selectPipelines(cfg, name)
		if err != nil {
			skipped = append(skipped, planSkip{BizID: tg.BizID, Pipeline: tg.Pipeline, Why: err.Error()})
			continue
		}
		ev, err := pickOperation(ctx, cfg, col, pipelines, tg.BizID, name != "")
		if err != nil {
			var ce *sources.ConnError
			if errors.As(err, &ce) {
				return err
			}
			skipped = append(skipped, planSkip{BizID: tg.BizID, Pipeline: tg.Pipeline, Why: err.Error()})
			continue
		}
		o := planOptions(opts)
		if o.FromStep == "" && tg.Step != "" && o.Action != "" {
			o.FromStep = tg.Step
		}
		plan, rep, err := repair.PrepareFrom(ctx, cfg, *ev, counter, o)
		if err != nil {
			var ie *repair.InputError
			if errors.As(err, &ie) {
				return repairError(err)
			}
			skipped = append(skipped, planSkip{BizID: tg.BizID, Pipeline: ev.Pipeline.Name, Verdict: rep.Verdict.Code, Why: err.Error()})
			continue
		}
		plans = append(plans, plan)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if err := writePlanFile(opts.Out, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		for _, p := range plans {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return v.Batch(plans, skipped, opts.Out)
}

// planSkip is a target that got no plan.
type planSkip struct {
	BizID    string       `json:"biz_id"`
	Pipeline string       `json:"pipeline"`
	Verdict  inspect.Code `json:"verdict,omitempty"`
	Why      string       `json:"why"`
}

// writePlanFile writes a plan file atomically (temporary file + rename).
func writePlanFile(path string, write func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".opctl-plan-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// readPlanFile reads one plan file.
func readPlanFile(path string) (*repair.Plan, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	p, err := repair.Decode(fh)
	if err != nil {
		// A JSON plan with unknown fields was changed after it was made.
		if strings.Contains(err.Error(), "unknown field") {
			return nil, &CodeError{Code: ExitRefused, Err: fmt.Errorf("%s: refused: tampered plan: %v", path, err)}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

func runRepairShow(_ context.Context, f *Factory, opts *RepairShowOptions) error {
	plans, err := readPlans(opts.File)
	if err != nil {
		return err
	}
	v := newRepairPlanView(f)
	var bad error
	for _, p := range plans {
		verr := p.Verify()
		if err := v.Show(p, verr); err != nil {
			return err
		}
		if verr != nil && bad == nil {
			bad = verr
		}
	}
	if bad != nil {
		return &CodeError{Code: ExitRefused, Err: bad}
	}
	return nil
}

// openWrite opens the write path (mysql.write_dsn, default mysql.dsn).
func openWrite(f *Factory, cfg *config.Config) (*mysqlsrc.Reader, error) {
	if err := cfg.ValidateMySQL(); err != nil {
		return nil, err
	}
	w, err := mysqlsrc.Open(cfg.MySQL.EffectiveWriteDSN(), f.Globals.Timeout)
	if err != nil {
		return nil, err
	}
	f.onClose(w.Close)
	return w, nil
}

func runRepairApply(ctx context.Context, f *Factory, opts *RepairApplyOptions) error {
	plans, err := readPlans(opts.File)
	if err != nil {
		return err
	}
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	v := newRepairApplyView(f, opts.DryRun)
	var verified []*repair.Plan
	for _, p := range plans {
		if p.Verify() == nil {
			if err := v.Plan(p); err != nil {
				return err
			}
			verified = append(verified, p)
		}
	}
	if len(verified) > 0 && !opts.Yes && !opts.DryRun {
		if err := confirmApply(f, verified); err != nil {
			return err
		}
	}
	col, err := f.Collector(cfg, 5*time.Minute, 50000)
	if err != nil {
		return err
	}
	w, err := openWrite(f, cfg)
	if err != nil {
		return err
	}
	pr := probe.New(f.Globals.Timeout)
	ap := &repair.Applier{Config: cfg, DB: w.DB(), Collector: col, Prober: pr, Poster: pr,
		Operator: opts.Operator, DryRun: opts.DryRun, Progress: v.Progress}
	if k, _ := f.Kafka(cfg); k != nil {
		ap.Kafka, ap.Group = k, k
	}
	if fp := os.Getenv(repair.FailpointEnv); fp != "" {
		// TEST ONLY: see repair.FailpointEnv.
		ap.Failpoint, ap.Crash = fp, crashNow(f)
	}
	if cfg.Audit.File != "" {
		mf, err := os.OpenFile(cfg.Audit.File, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("audit.file: %w", err)
		}
		defer mf.Close()
		ap.Mirror = mf
	}
	// Plans of a JSONL file are independent operations: a refused one does
	// not stop the others. An error wins over a refusal in the exit code.
	var first, refused error
	for _, p := range plans {
		res, err := ap.Apply(ctx, p)
		if verr := v.Result(res, err); verr != nil {
			return verr
		}
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		err = repairError(err)
		if len(plans) > 1 {
			fmt.Fprintf(f.IOStreams.ErrOut, "opctl: plan %s (%s): %v\n", p.Short(), p.BizID, err)
		}
		var ce *CodeError
		if errors.As(err, &ce) && ce.Code == ExitRefused {
			if refused == nil {
				refused = err
			}
		} else if first == nil {
			first = err
		}
	}
	if len(plans) > 1 {
		switch {
		case first != nil:
			return &CodeError{Code: exitCode(first, false)}
		case refused != nil:
			return &CodeError{Code: ExitRefused}
		}
		return nil
	}
	if first != nil {
		return first
	}
	return refused
}

// readPlans reads a plan file: one plan, or JSON lines of plans
// (repair plan --from-file --out).
func readPlans(path string) ([]*repair.Plan, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	plans, err := repair.DecodeAll(fh)
	if err != nil {
		if strings.Contains(err.Error(), "unknown field") {
			return nil, &CodeError{Code: ExitRefused, Err: fmt.Errorf("%s: refused: tampered plan: %v", path, err)}
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(plans) == 0 {
		return nil, fmt.Errorf("%s: no plan in the file", path)
	}
	return plans, nil
}

// confirmApply asks on a terminal, like terraform apply: only "yes" goes on.
func confirmApply(f *Factory, plans []*repair.Plan) error {
	if !f.IOStreams.IsStdinTTY() {
		return &CodeError{Code: ExitRefused, Err: fmt.Errorf("apply needs confirmation and stdin is not a terminal: pass --yes (or --dry-run); nothing was changed")}
	}
	if len(plans) == 1 {
		p := plans[0]
		fmt.Fprintf(f.IOStreams.ErrOut, "\nApply these %d action(s) to %s in pipeline %s?\n  Only 'yes' will be accepted: ", len(p.Actions), p.BizID, p.Pipeline)
	} else {
		fmt.Fprintf(f.IOStreams.ErrOut, "\nApply these %d plans?\n  Only 'yes' will be accepted: ", len(plans))
	}
	line, _ := bufio.NewReader(f.IOStreams.In).ReadString('\n')
	if strings.TrimSpace(line) != "yes" {
		return &CodeError{Code: ExitRefused, Err: errors.New("apply not confirmed; nothing was changed")}
	}
	return nil
}

// crashNow is the TEST ONLY failpoint crash: the process kills itself with
// SIGKILL (no deferred function runs, no connection is closed cleanly), as
// a power cut or an OOM kill would.
func crashNow(f *Factory) func(string) {
	return func(point string) {
		fmt.Fprintf(f.IOStreams.ErrOut, "opctl: TEST FAILPOINT %s reached: killing the process\n", point)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		select {} // wait for the signal
	}
}
