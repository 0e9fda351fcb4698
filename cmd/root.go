// Package cmd holds opctl's cobra commands. Each command parses its flags
// into an Options struct, calls a package that does the work, and renders a
// view; exit codes are mapped in one place (exit.go).
package cmd

import (
	"context"
	"errors"
	"fmt"
	stdio "io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/sources"
)

// Main runs opctl with the process's arguments and streams and returns the
// exit code; main.go passes it to os.Exit.
func Main() int {
	// SIGTERM and SIGHUP are an interrupt like Ctrl-C: commands stop
	// cleanly and say how far they got.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	io := iostreams.System()
	return interruptible(ctx, io.ErrOut, InterruptGrace, func() int { return Run(ctx, io, os.Args[1:]) })
}

// InterruptGrace is how long a command has, after an interrupt, to stop by
// itself (say how far it got, leave its files as they were) before opctl
// exits 130 without it: the one second an interrupt may take
// (docs/exit-codes.md#interrupted), less the process's own exit.
const InterruptGrace = 700 * time.Millisecond

// interruptible runs fn and returns its exit code; once ctx is done (an
// interrupt), it waits at most grace for fn, then says so on stderr and
// returns 130 while fn is still running: whatever fn is waiting for (a
// server that stopped answering in the middle of a read, a statement
// bounded only by --timeout) is abandoned, and main exits.
func interruptible(ctx context.Context, stderr stdio.Writer, grace time.Duration, fn func() int) int {
	done := make(chan int, 1)
	go func() { done <- fn() }()
	select {
	case code := <-done:
		return code
	case <-ctx.Done():
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case code := <-done:
		return code
	case <-t.C:
		fmt.Fprintf(stderr, "opctl: interrupted (what was in flight did not stop within %s and was abandoned)\n", grace)
		return ExitInterrupted
	}
}

// Run runs opctl with the given streams and arguments (tests and the lab's
// demo call it).
func Run(ctx context.Context, io *iostreams.IOStreams, args []string) int {
	return guard(io.ErrOut, func() int { return run(ctx, io, args) })
}

// guard runs fn and turns a panic into one line on stderr and exit 1: no
// input may show the operator a Go trace (docs/exit-codes.md). A repair
// records the panic in the attempt table first (repair.Service.Apply).
func guard(stderr stdio.Writer, fn func() int) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintln(stderr, "opctl: "+ui.Safe(sources.PanicMessage(r)))
			code = ExitError
		}
	}()
	return fn()
}

func run(ctx context.Context, io *iostreams.IOStreams, args []string) int {
	f := NewFactory(io, BuildVersion())
	defer f.Close()
	root := NewCmdRoot(f)
	root.SetArgs(args)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	err := execute(ctx, root)
	code := exitCode(err, ctx.Err() != nil)
	printError(io.ErrOut, err, code)
	return code
}

// execute runs the command tree root: cobra's Execute, and an unknown
// command given to a group with --help (`opctl bogus --help`, for which
// cobra found the group and its help func showed nothing) is a usage
// error.
func execute(ctx context.Context, root *cobra.Command) error {
	ran, err := root.ExecuteContextC(ctx)
	if err == nil && ran != nil {
		if name := unknownWithHelp(ran); name != "" {
			err = unknownCommand(ran, name)
		}
	}
	return err
}

// printError prints the error a command ended with, unless its output
// already said everything (a SilentError). An error may carry a value from
// the database or a file: each line is shown by the rule of human output
// (ui.SafeLines), the newlines of a multi-line error (a stale plan's diff)
// kept.
func printError(w stdio.Writer, err error, code int) {
	var silent *SilentError
	if err == nil || errors.As(err, &silent) {
		return
	}
	msg := ui.SafeLines(err.Error())
	if code == ExitInterrupted {
		msg = "interrupted"
	}
	fmt.Fprintln(w, "opctl: "+msg)
	if code == ExitUsage && !strings.Contains(msg, "--help") {
		fmt.Fprintln(w, "Run 'opctl --help' for usage.")
	}
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
			o, err := parseFormat(output, FormatTable, FormatWide, FormatJSON, FormatJSONL)
			if err != nil {
				return err
			}
			f.Globals.Output = o
			if f.Globals.Timeout <= 0 {
				return usageErrorf("--timeout %s: must be positive", f.Globals.Timeout)
			}
			// NO_COLOR is read with the streams (iostreams.System).
			if f.Globals.NoColor {
				f.IOStreams.SetNoColor(true)
			}
			return nil
		},
	}
	root.SetVersionTemplate(versionTemplate)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
	pf := root.PersistentFlags()
	g := &f.Globals
	pf.StringVar(&g.ConfigPath, "config", "", "config file (default: $OPCTL_CONFIG, ./opctl.yaml, $XDG_CONFIG_HOME/opctl/config.yaml)")
	pf.StringVar(&g.MySQLDSN, "mysql-dsn", "", "MySQL DSN for the read path, overrides mysql.dsn")
	pf.StringSliceVar(&g.Brokers, "brokers", nil, "Kafka brokers host:port,..., overrides kafka.brokers")
	pf.StringVarP(&output, "output", "o", string(FormatTable), "output format: table|wide|json|jsonl")
	pf.BoolVar(&g.NoColor, "no-color", false, "disable colour (also NO_COLOR)")
	pf.DurationVar(&g.Timeout, "timeout", sources.DefaultTimeout, "timeout per source (MySQL, Kafka, each probe)")

	root.AddCommand(
		NewCmdWhere(f, nil),
		NewCmdExplain(f, nil),
		NewCmdVersion(f, nil),
		NewCmdReconcile(f, nil),
		NewCmdSchema(f, nil),
		NewCmdInit(f, nil),
		NewCmdRepair(f, nil),
		NewCmdAudit(f, nil),
		NewCmdSop(f, nil),
		NewCmdDoctor(f, nil),
		NewCmdTUI(f, nil),
		NewCmdWatch(f, nil),
		newCmdDemo(),
	)
	// Added here rather than by Execute, so that it is a group like the others.
	root.InitDefaultCompletionCmd()
	root.SetHelpCommand(newCmdHelp())
	// cobra's own texts (the completion commands') are wrapped to the
	// help's width like ours.
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			wrapLong(c)
		}
	}
	setGroupRun(root)
	help := root.HelpFunc()
	root.SetHelpFunc(func(c *cobra.Command, args []string) {
		if unknownWithHelp(c) != "" {
			return // run says it is unknown (exit 2), never the group's help
		}
		help(c, args)
	})
	// A group runs only to say what it groups: its usage is "opctl repair
	// [command]", not also the use line of a command that takes flags.
	// The flags are wrapped to the help's width (helpWidth).
	root.SetUsageTemplate(strings.NewReplacer(
		"Usage:{{if .Runnable}}", "Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}",
		".LocalFlags.FlagUsages", "(.LocalFlags.FlagUsagesWrapped "+strconv.Itoa(helpWidth)+")",
		".InheritedFlags.FlagUsages", "(.InheritedFlags.FlagUsagesWrapped "+strconv.Itoa(helpWidth)+")",
	).Replace(root.UsageTemplate()))
	addExitStatus(root)
	return root
}

// helpWidth is the width of every command's help, in terminal cells: it
// reads in an 80-column terminal (a test walks every command's help).
const helpWidth = 80

// wrapLong wraps the long help of c and its subcommands to helpWidth.
func wrapLong(c *cobra.Command) {
	c.Long = ansi.Wordwrap(c.Long, helpWidth, "")
	for _, sub := range c.Commands() {
		wrapLong(sub)
	}
}

// setGroupRun makes every command that only groups subcommands (opctl,
// repair, schema, completion) show its help when called alone and refuse
// anything else as an unknown command (exit 2, docs/exit-codes.md): cobra
// itself only checks the root's arguments, and prints the help of a group
// given an unknown subcommand.
func setGroupRun(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = runGroup
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[groupAnnotation] = "true"
	}
	for _, sub := range c.Commands() {
		setGroupRun(sub)
	}
}

// groupAnnotation marks the commands setGroupRun made groups.
const groupAnnotation = "opctl/group"

// runGroup is the RunE of a group command: its help without arguments,
// else an unknown command with cobra's suggestions.
func runGroup(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return c.Help()
	}
	return unknownCommand(c, args[0])
}

// unknownCommand is the usage error (exit 2) of a command name that group
// c does not have, with cobra's "did you mean" when it has one.
func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageErrorf("%s", msg)
}

// unknownWithHelp is the first argument given to group c with --help
// (`opctl bogus --help`, `opctl repair bogus -h`): cobra shows the
// group's help for it and exits 0; opctl calls it an unknown command.
// "" when there is none.
func unknownWithHelp(c *cobra.Command) string {
	if c.Annotations[groupAnnotation] == "" || !c.Flags().Changed("help") {
		return ""
	}
	if args := c.Flags().Args(); len(args) > 0 {
		return args[0]
	}
	return ""
}

// newCmdHelp is `opctl help [command]`: a command it does not know is an
// unknown command (exit 2), as without help.
func newCmdHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help provides help for any command in the application.",
		ValidArgsFunction: func(c *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() || sub == c {
					names = append(names, sub.Name())
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil {
				return usageErrorf("%v", err)
			}
			if len(rest) > 0 {
				return unknownCommand(cmd, rest[0])
			}
			return cmd.Help()
		},
	}
}

// demoHint says where the demo is: not an opctl command (docs/lab.md).
const demoHint = "The demo is a separate program: go run ./lab/demo (see README.md)"

// newCmdDemo is a hidden command that says where the demo is: opctl never
// links lab/ (docs/architecture.md).
func newCmdDemo() *cobra.Command {
	return &cobra.Command{
		Use:                "demo",
		Hidden:             true,
		DisableFlagParsing: true,
		Args:               cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return usageErrorf("unknown command %q for %q\n%s", "demo", c.Root().CommandPath(), demoHint)
		},
	}
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
