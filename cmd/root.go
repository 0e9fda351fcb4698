// Package cmd holds opctl's cobra commands. Each command parses its flags
// into an Options struct, calls a package that does the work, and renders a
// view; exit codes are mapped in one place (exit.go).
package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
)

// Main runs opctl with the process's arguments and streams and returns the
// exit code; main.go passes it to os.Exit.
func Main() int {
	// SIGTERM and SIGHUP are an interrupt like Ctrl-C: commands stop
	// cleanly and say how far they got.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	return Run(ctx, iostreams.System(), os.Args[1:])
}

// Run runs opctl with the given streams and arguments (tests call it).
func Run(ctx context.Context, io *iostreams.IOStreams, args []string) int {
	f := NewFactory(io, BuildVersion())
	defer f.Close()
	root := NewCmdRoot(f)
	root.SetArgs(args)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	err := root.ExecuteContext(ctx)
	if err != nil && strings.HasPrefix(err.Error(), "unknown command ") {
		// cobra's own error for a command that does not exist.
		msg := err.Error()
		if strings.HasPrefix(msg, `unknown command "demo"`) {
			msg += "\nThe demo is a separate program: go run ./lab/demo (see README.md)"
		}
		err = &UsageError{Err: errors.New(msg)}
	}
	code := exitCode(err, ctx.Err() != nil)
	if err != nil {
		var silent *SilentError
		if !errors.As(err, &silent) {
			msg := err.Error()
			if code == ExitInterrupted {
				msg = "interrupted"
			}
			fmt.Fprintln(io.ErrOut, "opctl: "+msg)
			if code == ExitUsage && !strings.Contains(msg, "--help") {
				fmt.Fprintln(io.ErrOut, "Run 'opctl --help' for usage.")
			}
		}
	}
	return code
}

// NewCmdRoot builds the command tree. Commands are added here explicitly:
// no init() registration, no package-level command variables.
func NewCmdRoot(f *Factory) *cobra.Command {
	var output string
	root := &cobra.Command{
		Use:   "opctl <command>",
		Short: "Find and repair half-completed Kafka consumer operations",
		Long: `opctl answers, in one command, where a multi-step consumer operation is stuck,
whether Kafka will redeliver its message and what is safe to do now; then it
performs the repair as a reviewed, guarded, dry-runnable, audit-logged plan.`,
		Example: `  opctl where PAY-1
  opctl where PAY-1 --pipeline settlement -o json
  opctl explain DUPLICATE_EFFECT`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       f.Version,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			switch Format(output) {
			case FormatTable, FormatJSON, FormatJSONL:
				f.Globals.Output = Format(output)
			default:
				return usageErrorf("--output %q: want table, json or jsonl", output)
			}
			if f.Globals.Timeout <= 0 {
				return usageErrorf("--timeout %s: must be positive", f.Globals.Timeout)
			}
			f.IOStreams.SetNoColor(f.Globals.NoColor || os.Getenv("NO_COLOR") != "")
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	pf := root.PersistentFlags()
	g := &f.Globals
	pf.StringVar(&g.ConfigPath, "config", "", "config file (default: $OPCTL_CONFIG, ./opctl.yaml, $XDG_CONFIG_HOME/opctl/config.yaml)")
	pf.StringVar(&g.MySQLDSN, "mysql-dsn", "", "MySQL DSN for the read path, overrides mysql.dsn")
	pf.StringSliceVar(&g.Brokers, "brokers", nil, "Kafka brokers host:port,..., overrides kafka.brokers")
	pf.StringVarP(&output, "output", "o", string(FormatTable), "output format: table|json|jsonl")
	pf.BoolVar(&g.NoColor, "no-color", false, "disable colour (also NO_COLOR)")
	pf.DurationVar(&g.Timeout, "timeout", g.Timeout, "timeout per source (MySQL, Kafka, each probe)")

	root.AddCommand(
		NewCmdWhere(f, nil),
		NewCmdExplain(f, nil),
		NewCmdVersion(f),
		NewCmdReconcile(f, nil),
		NewCmdSchema(f, nil),
		NewCmdInit(f, nil),
		NewCmdRepair(f, nil),
		NewCmdAudit(f, nil),
	)
	addExitStatus(root)
	return root
}

// addExitStatus appends the EXIT STATUS section to every command's help.
func addExitStatus(c *cobra.Command) {
	if t := c.HelpTemplate(); !strings.HasSuffix(t, exitStatusHelp) {
		c.SetHelpTemplate(t + exitStatusHelp)
	}
	for _, sub := range c.Commands() {
		addExitStatus(sub)
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("want %s, got %d argument(s)", what, len(args))
		}
		return nil
	}
}
