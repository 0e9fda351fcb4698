package cmd

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/sources"
)

// Triager triages one id (*triage.Service, the read side).
type Triager interface {
	Triage(ctx context.Context, bizID, pipeline string) (*triage.Result, error)
}

// WhereOptions are the parsed flags of `opctl where` and its dependencies.
type WhereOptions struct {
	IO     *iostreams.IOStreams
	Format Format
	// Triager returns the triage service (opened on first use).
	Triager func() (Triager, error)

	BizID    string
	Pipeline string
	// SearchWindow and SearchLimit are the message search bounds the
	// flags gave (the Factory opens the clients with them).
	SearchWindow time.Duration
	SearchLimit  int
	// Next are the global flags the NEXT commands carry (for its note).
	Next NextFlags
}

// NewCmdWhere builds `opctl where`. runF replaces the run function in tests.
func NewCmdWhere(f *Factory, runF func(context.Context, *WhereOptions) error) *cobra.Command {
	opts := &WhereOptions{IO: f.IOStreams}
	opts.Triager = func() (Triager, error) {
		return f.Triage()
	}
	c := &cobra.Command{
		Use:   "where <biz_id>",
		Short: "Triage an operation: steps, Kafka position, verdict, next commands",
		Long: `Join the state row, every step's evidence and intents, the idempotency records,
the entity's status, opctl's audit and the Kafka position of the message, and
print the timeline, each step's status, whether Kafka will redeliver, the
verdict and the exact next commands (docs/where.md).

Without --pipeline every configured pipeline is tried and those that know the
id are reported (-o json then prints an array when more than one does).`,
		Example: `  opctl where PAY-1
  opctl where PAY-1 --pipeline settlement
  opctl where 8821 -o json | jq .verdict.code
  opctl where PAY-1 --search-window 10m --search-limit 100000`,
		Args: exactArgs(1, "one <biz_id>"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.BizID, opts.Format, opts.Next = args[0], f.Globals.Output, f.Globals.Next()
			opts.SearchWindow, opts.SearchLimit = f.Globals.SearchWindow, f.Globals.SearchLimit
			if err := sources.ValidateBizID(opts.BizID); err != nil {
				return err
			}
			if opts.SearchLimit <= 0 || opts.SearchWindow <= 0 {
				return usageErrorf("--search-window and --search-limit must be positive")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runWhere(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Pipeline, "pipeline", "", "only this pipeline (default: every pipeline that knows the id)")
	c.Flags().DurationVar(&f.Globals.SearchWindow, "search-window", sources.DefaultSearchWindow, "message search: ± this around the operation's earliest timestamp")
	c.Flags().IntVar(&f.Globals.SearchLimit, "search-limit", sources.DefaultSearchLimit, "message search: at most this many records read")
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	return c
}

func completePipelines(f *Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		cfg, err := f.Config()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return cfg.PipelineNames(), cobra.ShellCompDirectiveNoFileComp
	}
}

func runWhere(ctx context.Context, opts *WhereOptions) error {
	svc, err := opts.Triager()
	if err != nil {
		return err
	}
	t, err := svc.Triage(ctx, opts.BizID, opts.Pipeline)
	if err != nil {
		return err
	}
	// The NEXT commands carry the global flags; a --mysql-dsn with a
	// password they cannot carry is noted.
	shown := opts.Next.Reports(t)
	if err := newWhereView(opts.IO, opts.Format).Render(shown); err != nil {
		return err
	}
	if slices.ContainsFunc(shown, func(r inspect.Report) bool { return len(r.Verdict.Next) > 0 }) {
		opts.Next.Note(opts.IO.ErrOut)
	}
	return exitWith(inspect.ExitCode(shown))
}
