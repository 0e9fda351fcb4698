package cmd

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/internal/triage"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// WhereOptions are the parsed flags of `opctl where`.
type WhereOptions struct {
	BizID        string
	Pipeline     string
	SearchWindow time.Duration
	SearchLimit  int
}

// NewCmdWhere builds `opctl where`. runF replaces the run function in tests.
func NewCmdWhere(f *Factory, runF func(context.Context, *WhereOptions) error) *cobra.Command {
	opts := &WhereOptions{}
	c := &cobra.Command{
		Use:   "where <biz_id>",
		Short: "Triage one operation: steps, Kafka position, verdict, next commands",
		Long: `Join the state row, every step's evidence and intents, the idempotency records,
the entity's status, opctl's audit and the Kafka position of the message, and
print the timeline, each step's status, whether Kafka will redeliver, the
verdict and the exact next commands.

Without --pipeline every configured pipeline is tried and those that know the
id are reported (-o json then prints an array when more than one does).`,
		Example: `  opctl where PAY-1
  opctl where PAY-1 --pipeline settlement
  opctl where 8821 -o json | jq .verdict.code
  opctl where PAY-1 --search-window 10m --search-limit 100000`,
		Args: exactArgs(1, "one <biz_id>"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.BizID = args[0]
			if err := ValidateBizID(opts.BizID); err != nil {
				return err
			}
			if opts.SearchLimit <= 0 || opts.SearchWindow <= 0 {
				return usageErrorf("--search-window and --search-limit must be positive")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runWhere(c.Context(), f, opts)
		},
	}
	c.Flags().StringVar(&opts.Pipeline, "pipeline", "", "only this pipeline (default: every pipeline that knows the id)")
	c.Flags().DurationVar(&opts.SearchWindow, "search-window", 5*time.Minute, "message search: ± this around the operation's earliest timestamp")
	c.Flags().IntVar(&opts.SearchLimit, "search-limit", 50000, "message search: at most this many records read")
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	return c
}

// ValidateBizID rejects ids that cannot be an operation key (SPEC §6): empty,
// over 512 bytes, invalid UTF-8 or with control characters. Everything else,
// quotes and SQL included, is an opaque string bound as a parameter.
func ValidateBizID(id string) error {
	switch {
	case id == "":
		return usageErrorf("biz_id is empty")
	case len(id) > 512:
		return usageErrorf("biz_id is %d bytes; at most 512", len(id))
	case !utf8.ValidString(id):
		return usageErrorf("biz_id is not valid UTF-8")
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return usageErrorf("biz_id contains a control character (%U)", r)
		}
	}
	return nil
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

// selectPipelines returns the pipeline named by --pipeline, or all.
func selectPipelines(cfg *config.Config, name string) ([]*config.Pipeline, error) {
	if name == "" {
		out := make([]*config.Pipeline, len(cfg.Pipelines))
		for i := range cfg.Pipelines {
			out[i] = &cfg.Pipelines[i]
		}
		return out, nil
	}
	if p := cfg.Pipeline(name); p != nil {
		return []*config.Pipeline{p}, nil
	}
	return nil, usageErrorf("--pipeline %q: no such pipeline in %s (have: %s)", name, cfg.Path, strings.Join(cfg.PipelineNames(), ", "))
}

func runWhere(ctx context.Context, f *Factory, opts *WhereOptions) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	pipelines, err := selectPipelines(cfg, opts.Pipeline)
	if err != nil {
		return err
	}
	col, err := f.Collector(cfg, opts.SearchWindow, opts.SearchLimit)
	if err != nil {
		return err
	}
	reports, err := triage.Triage(ctx, col, pipelines, opts.BizID)
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	shown := reports
	if opts.Pipeline == "" && len(reports) > 1 {
		shown = nil
		for _, r := range reports {
			if r.Verdict.Code != inspect.NotFound {
				shown = append(shown, r)
			}
		}
		if len(shown) == 0 {
			nf := reports[0]
			nf.Pipeline = ""
			nf.Steps = []inspect.StepView{}
			nf.Kafka = inspect.KafkaView{Redelivery: inspect.RedeliveryUnknown, Located: sources.LocatedUnknown}
			nf.Verdict.Summary = fmt.Sprintf("%s is not known to any pipeline (%s)", opts.BizID, strings.Join(cfg.PipelineNames(), ", "))
			shown = []inspect.Report{nf}
		}
	}
	v := newWhereView(f.IOStreams, f.Globals.Output)
	if err := v.Render(shown); err != nil {
		return err
	}
	if code := whereExitCode(shown); code != ExitOK {
		return &CodeError{Code: code}
	}
	return nil
}

// whereExitCode maps the shown reports to SPEC §5's exit codes: partial wins
// (the verdict may be incomplete), then action, then not found.
func whereExitCode(rs []inspect.Report) int {
	partial, action, notFound := false, false, true
	for _, r := range rs {
		partial = partial || r.Partial
		action = action || r.Verdict.Severity == inspect.SeverityAction
		notFound = notFound && r.Verdict.Code == inspect.NotFound
	}
	switch {
	case partial:
		return ExitPartial
	case notFound:
		return ExitNotFound
	case action:
		return ExitAttention
	}
	return ExitOK
}
