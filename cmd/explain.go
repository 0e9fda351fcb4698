package cmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sop"
)

// ExplainOptions are the parsed arguments of `opctl explain`.
type ExplainOptions struct {
	// Code is the verdict code; empty lists every verdict.
	Code inspect.Code
}

// NewCmdExplain builds `opctl explain`.
func NewCmdExplain(f *Factory, runF func(context.Context, *ExplainOptions) error) *cobra.Command {
	opts := &ExplainOptions{}
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
			if len(args) == 1 {
				opts.Code = inspect.Code(strings.ToUpper(strings.TrimSpace(args[0])))
				if _, ok := inspect.Explain(opts.Code); !ok {
					return usageErrorf("unknown verdict %q; known: %s", args[0], strings.Join(verdictNames(), ", "))
				}
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runExplain(f, opts)
		},
	}
	return c
}

func runExplain(f *Factory, opts *ExplainOptions) error {
	out := f.IOStreams.Out
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
	if f.Globals.Output != FormatTable {
		enc := jsonEncoder(out, f.Globals.Output)
		if opts.Code != "" {
			return enc.Encode(list[0])
		}
		if f.Globals.Output == FormatJSONL {
			for _, e := range list {
				if err := enc.Encode(e); err != nil {
					return err
				}
			}
			return nil
		}
		return enc.Encode(list)
	}
	st := ui.NewStyles(out, f.IOStreams.ColorEnabled())
	if opts.Code == "" {
		rows := [][]string{}
		for _, e := range list {
			rows = append(rows, []string{string(e.Code), string(e.Severity), e.Meaning})
		}
		return ui.Table(out, f.IOStreams.IsStdoutTTY(), []string{"VERDICT", "SEVERITY", "MEANING"}, rows)
	}
	e := list[0]
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s)\n\n%s\n", st.Severity(e.Severity, string(e.Code)), e.Severity, e.Meaning)
	list2 := func(title string, items []string) {
		if len(items) == 0 {
			return
		}
		fmt.Fprintf(&b, "\n%s\n", st.Title.Render(title))
		for _, it := range items {
			fmt.Fprintf(&b, "  - %s\n", it)
		}
	}
	list2("TYPICAL CAUSES", e.Causes)
	list2("SAFE", e.Safe)
	list2("NOT SAFE", e.Unsafe)
	fmt.Fprintf(&b, "\n%s\n  %s\n", st.Title.Render("REPAIR"), e.Repair)
	if e.Runbook != "" {
		fmt.Fprintf(&b, "\n%s\n  opctl sop run %s --biz-id ID --reason TEXT (opctl sop show %s)\n", st.Title.Render("RUNBOOK"), e.Runbook, e.Runbook)
	}
	_, err := fmt.Fprint(out, b.String())
	return err
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
