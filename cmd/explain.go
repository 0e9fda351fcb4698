package cmd

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sop"
)

// ExplainOptions are the parsed arguments of `opctl explain`.
type ExplainOptions struct {
	IO     *iostreams.IOStreams
	Format Format
	// Code is the verdict code; empty lists every verdict.
	Code inspect.Code
}

// NewCmdExplain builds `opctl explain`.
func NewCmdExplain(f *Factory, runF func(context.Context, *ExplainOptions) error) *cobra.Command {
	opts := &ExplainOptions{IO: f.IOStreams}
	c := &cobra.Command{
		Use:   "explain [VERDICT]",
		Short: "What a verdict means, why it happens and what is safe to do",
		Long: `Explain a verdict code of 'opctl where': its meaning, typical causes, what is
safe and what is not, and the repair opctl plans for it. Without an argument,
list every verdict in precedence order.`,
		Example: `  opctl explain DUPLICATE_EFFECT
  opctl explain wrongly_skipped
  opctl explain -o json STRANDED`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("want at most one VERDICT, got %d arguments", len(args))
			}
			return nil
		},
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return verdictNames(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Format = f.Globals.Output
			if len(args) == 1 {
				opts.Code = inspect.Code(strings.ToUpper(strings.TrimSpace(args[0])))
				if _, ok := inspect.Explain(opts.Code); !ok {
					return usageErrorf("unknown verdict %q; known: %s", args[0], strings.Join(verdictNames(), ", "))
				}
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runExplain(opts)
		},
	}
	return c
}

func runExplain(opts *ExplainOptions) error {
	codes := inspect.Precedence()
	if opts.Code != "" {
		codes = []inspect.Code{opts.Code}
	}
	var list []explained
	lib, _ := sop.Builtins() // built in: they always parse (a test checks)
	for _, c := range codes {
		e, _ := inspect.Explain(c)
		list = append(list, explained{Explanation: e, Runbook: runbookOf(lib, c)})
	}
	v := newExplainView(opts.IO, opts.Format)
	if opts.Code != "" {
		return v.One(list[0])
	}
	return v.List(list)
}

// explained is a verdict's explanation and the built-in runbook for it.
type explained struct {
	inspect.Explanation
	Runbook string `json:"runbook,omitempty"`
}

// runbookOf is the built-in runbook for one operation with verdict c
// (docs/runbooks.md), "" when there is none.
func runbookOf(lib *sop.Library, c inspect.Code) string {
	if lib == nil {
		return ""
	}
	if rb, ok := lib.For(c); ok {
		return rb.Name
	}
	return ""
}

// verdictNames are the verdict codes in precedence order, for completion
// and messages.
func verdictNames() []string {
	var out []string
	for _, c := range inspect.Precedence() {
		out = append(out, string(c))
	}
	return out
}
