package cmd

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/sources"
)

// Auditor reads the audit log (*repair.Service).
type Auditor interface {
	Audit(ctx context.Context, f sources.AuditFilter) (*sources.AuditLog, error)
}

// AuditOptions are the parsed flags of `opctl audit` and its dependencies.
type AuditOptions struct {
	IO      *iostreams.IOStreams
	Format  Format
	Timeout time.Duration
	Auditor func() (Auditor, error)

	BizID    string
	PlanID   string
	Pipeline string
	Limit    int
}

// NewCmdAudit builds `opctl audit`. runF replaces the run function in tests.
func NewCmdAudit(f *Factory, runF func(context.Context, *AuditOptions) error) *cobra.Command {
	opts := &AuditOptions{IO: f.IOStreams}
	opts.Auditor = func() (Auditor, error) { return f.Service() }
	c := &cobra.Command{
		Use:   "audit [--biz-id X] [--plan ID]",
		Short: "Read the audit log: what repairs did, attempts that did nothing",
		Long: `Read both audit tables (audit.table and its _attempt table) on the read
path (a SELECT-only user is enough): every action a repair applied, with its
before and after images, and every attempt that changed nothing (dry_run,
guard_failed, stale, error). --plan accepts a prefix of the plan id. -o json
prints {"actions": [...], "attempts": [...]} with the full images.`,
		Example: `  opctl audit --biz-id PAY-1
  opctl audit --plan 3f2a9c1e7b2d
  opctl audit --biz-id PAY-1 -o json | jq '.actions[].after_image'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Limit <= 0 {
				return usageErrorf("--limit must be positive")
			}
			if opts.BizID != "" {
				if err := sources.ValidateBizID(opts.BizID); err != nil {
					return err
				}
			}
			opts.Format, opts.Timeout = f.Globals.Output, f.Globals.Timeout
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runAudit(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.BizID, "biz-id", "", "only this operation")
	c.Flags().StringVar(&opts.PlanID, "plan", "", "only this plan (id or prefix)")
	c.Flags().StringVar(&opts.Pipeline, "pipeline", "", "only this pipeline (actions)")
	c.Flags().IntVar(&opts.Limit, "limit", 100, "at most this many rows of each table (the newest)")
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	return c
}

func runAudit(ctx context.Context, opts *AuditOptions) error {
	svc, err := opts.Auditor()
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	log, err := svc.Audit(cctx, sources.AuditFilter{BizID: opts.BizID, PlanID: opts.PlanID, Pipeline: opts.Pipeline, Limit: opts.Limit})
	if err != nil {
		return err
	}
	return newAuditView(opts.IO, opts.Format).Log(log)
}

func shortID(id string) string {
	return ui.Safe(clip(id, 12, ""))
}

func styleOutcome(st ui.Styles, o string) string {
	switch o {
	case sources.AuditApplied, sources.AuditPublished:
		return st.OK.Render(o)
	case sources.AuditPublishing, sources.AuditCompensating, sources.AuditRedriving, repair.AttemptDryRun:
		return st.Watch.Render(o)
	}
	return st.Action.Render(ui.Safe(o))
}

func reasonSuffix(r string) string {
	if r == "" {
		return ""
	}
	return " · reason: " + ui.Safe(r)
}

// clip is s cut to at most n bytes at a rune boundary, with more appended
// when it was cut.
func clip(s string, n int, more string) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + more
}

// imageSummary shows the interesting fields of an after_image on one line.
func imageSummary(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return ""
	}
	var parts []string
	for _, k := range []string{"step", "reversed_id", "request_id", "topic", "partition", "offset", "attested", "attest", "state", "idempotency", "runbook", "run_id"} {
		if v, ok := m[k]; ok {
			text, ok := v.(string)
			if !ok {
				b, _ := json.Marshal(v)
				text = string(b)
			}
			parts = append(parts, k+"="+ui.Safe(text))
		}
	}
	return strings.Join(parts, " ")
}

func detailSummary(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return ""
	}
	for _, k := range []string{"error", "result"} {
		if v, ok := m[k].(string); ok && v != "" {
			// Whole: a terminal's table cuts it to the width (ui.FitTable).
			return ui.Safe(strings.Join(strings.Fields(v), " "))
		}
	}
	return ""
}
