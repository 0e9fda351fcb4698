package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// The console's defaults (docs/tui.md); tui.DefaultSince and
// tui.DefaultRefresh are the same (cmd/console tests it).
const (
	ConsoleDefaultSince   = time.Hour
	ConsoleDefaultRefresh = 10 * time.Second
)

// ConsoleBinary is the program that holds the console: opctl itself does
// not link bubbletea, whose package init queries the terminal on every
// start (docs/tui.md#the-opctl-tui-binary).
const ConsoleBinary = "opctl-tui"

// Console runs the incident console (cmd/console.Run, in the opctl-tui
// binary and the demo).
type Console func(ctx context.Context, in io.Reader, out io.Writer, o ConsoleOptions) error

// ConsoleOptions are what `opctl tui` hands the console.
type ConsoleOptions struct {
	Service   func() (*repair.Service, error)
	Reconcile func() (reconcile.Func, error)
	Pipelines []*config.Pipeline
	Pipeline  string
	Since     time.Duration
	OlderThan time.Duration
	Refresh   time.Duration
	ReadOnly  bool
	Incident  string
	Operator  string
	BizID     string
	Color     bool
}

// TUIOptions are the parsed flags of `opctl tui` and its dependencies.
type TUIOptions struct {
	IO        *iostreams.IOStreams
	Config    func() (*config.Config, error)
	Service   func() (*repair.Service, error)
	Reconcile func() (reconcile.Func, error)
	// Console runs the console in this process; nil: run the opctl-tui
	// binary with Args (opctl's own arguments).
	Console Console
	Args    []string

	BizID, Pipeline           string
	Since, OlderThan, Refresh time.Duration
	ReadOnly                  bool
	Incident, Operator        string
}

// NewCmdTUI builds `opctl tui`. runF replaces the run function in tests.
func NewCmdTUI(f *Factory, runF func(context.Context, *TUIOptions) error) *cobra.Command {
	opts := &TUIOptions{IO: f.IOStreams, Config: f.Config, Console: f.Console, Args: f.Args}
	opts.Service = func() (*repair.Service, error) { return f.Service() }
	opts.Reconcile = f.Reconcile
	since := durationFlag{d: ConsoleDefaultSince}
	older := durationFlag{d: reconcile.DefaultOlderThan}
	refresh := durationFlag{d: ConsoleDefaultRefresh}
	c := &cobra.Command{
		Use:   "tui [biz_id] [--pipeline P] [--since 1h] [--readonly]",
		Short: "The incident console: list, triage and repair operations",
		Long: `An interactive console for an incident (docs/tui.md). The list is a reconcile
over every pipeline (or --pipeline) bounded by --since, read again every
--refresh: its targets and the operations to watch, with counts per verdict.
Enter (or ':' and an id, or a biz_id argument) opens an operation's triage as
'opctl where' shows it; there p builds the repair plan, d dry-runs it, a
applies it after you type the biz_id and a reason (the guarded path of 'opctl
repair apply'), A shows its audit. ? lists every key.

--readonly disables apply. --incident NAME is recorded in every plan and audit
row made from the console. Needs a terminal. The console is the opctl-tui
program, which opctl runs from beside its own executable or from $PATH
(go build -o opctl-tui ./cmd/opctl-tui).`,
		Example: `  opctl tui
  opctl tui PAY-20261201-0042 --incident INC-4711
  opctl tui --pipeline settlement --since 30m --refresh 5s --readonly`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("want at most one <biz_id>, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.BizID = args[0]
				if err := sources.ValidateBizID(opts.BizID); err != nil {
					return err
				}
			}
			opts.Since, opts.OlderThan, opts.Refresh = since.d, older.d, refresh.d
			if opts.Since <= 0 || opts.Refresh <= 0 || opts.OlderThan < 0 {
				return usageErrorf("--since and --refresh must be positive, --older-than not negative")
			}
			if err := plans.CheckIncident(opts.Incident); err != nil {
				return usageErrorf("%s", err.Error())
			}
			var err error
			if opts.Operator, err = operatorOr(opts.Operator); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runTUI(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Pipeline, "pipeline", "", "only this pipeline (default: every pipeline)")
	fl.Var(&since, "since", "the list's reconcile reads this far back (s, m, h, d)")
	fl.Var(&older, "older-than", "the stuck check's minimum age of updated_at")
	fl.Var(&refresh, "refresh", "read the list again this often")
	fl.BoolVar(&opts.ReadOnly, "readonly", false, "disable apply")
	fl.StringVar(&opts.Incident, "incident", "", "recorded in every plan and audit row made from the console")
	fl.StringVar(&opts.Operator, "operator", "", "who plans and applies (recorded in the audit; default: $USER)")
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	return c
}

func runTUI(ctx context.Context, opts *TUIOptions) error {
	if !opts.IO.IsStdinTTY() || !opts.IO.IsStdoutTTY() {
		return usageErrorf("opctl tui needs a terminal on stdin and stdout; for scripts use opctl reconcile and opctl where")
	}
	if opts.Console == nil {
		return launchConsole(ctx, opts)
	}
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	ps, err := cfg.Select(opts.Pipeline)
	if err != nil {
		return err
	}
	err = opts.Console(ctx, opts.IO.In, opts.IO.Out, ConsoleOptions{Service: opts.Service, Reconcile: opts.Reconcile,
		Pipelines: ps, Pipeline: opts.Pipeline, Since: opts.Since, OlderThan: opts.OlderThan, Refresh: opts.Refresh,
		ReadOnly: opts.ReadOnly, Incident: opts.Incident, Operator: opts.Operator, BizID: opts.BizID, Color: opts.IO.ColorEnabled()})
	if errors.Is(err, context.Canceled) {
		return exitWith(ExitInterrupted)
	}
	return err
}

// launchConsole runs the opctl-tui binary (beside opctl's executable, else
// on $PATH) with opctl's arguments and streams, and exits as it does. An
// interrupt reaches it as SIGTERM, so that it restores the terminal.
func launchConsole(ctx context.Context, opts *TUIOptions) error {
	path, err := consolePath()
	if err != nil {
		return err
	}
	c := exec.CommandContext(ctx, path, opts.Args...)
	c.Stdin, c.Stdout, c.Stderr = opts.IO.In, opts.IO.Out, opts.IO.ErrOut
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = 10 * time.Second
	err = c.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return exitWith(ee.ExitCode())
	case ctx.Err() != nil:
		return exitWith(ExitInterrupted)
	}
	return fmt.Errorf("run %s: %w", path, err)
}

// consolePath finds the opctl-tui binary: beside the running executable,
// else on $PATH.
func consolePath() (string, error) {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), ConsoleBinary)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(ConsoleBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("opctl tui runs the %s binary, which is neither beside opctl nor on $PATH: build it with `go build -o %s ./cmd/opctl-tui` (or go install github.com/opctl-dev/opctl/cmd/opctl-tui) (docs/tui.md)", ConsoleBinary, ConsoleBinary)
}
