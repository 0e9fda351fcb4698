package cmd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/reconcile/watch/httpd"
	"github.com/opctl-dev/opctl/repair"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/tui"
)

// TUIOptions are the parsed flags of `opctl tui` and its dependencies.
type TUIOptions struct {
	IO        *iostreams.IOStreams
	Config    func() (*config.Config, error)
	Triage    func() (*triage.Service, error)
	Service   func() (*repair.Service, error)
	Reconcile func() (reconcile.Func, error)
	// Run runs the console on the terminal (tui.Run; tests replace it).
	Run func(ctx context.Context, in io.Reader, out io.Writer, o tui.Options) error

	BizID, Pipeline           string
	Since, OlderThan, Refresh time.Duration
	// Watch is the base URL of a running opctl watch (--watch); Timeout
	// bounds each read of it (--timeout).
	Watch              string
	Timeout            time.Duration
	ReadOnly           bool
	Incident, Operator string
}

// NewCmdTUI builds `opctl tui`. runF replaces the run function in tests.
func NewCmdTUI(f *Factory, runF func(context.Context, *TUIOptions) error) *cobra.Command {
	opts := &TUIOptions{IO: f.IOStreams, Config: f.Config, Run: tui.Run}
	opts.Triage = f.Triage
	opts.Service = f.Service
	opts.Reconcile = f.Reconcile
	since := durationFlag{d: tui.DefaultSince}
	older := durationFlag{d: reconcile.DefaultOlderThan}
	refresh := durationFlag{d: tui.DefaultRefresh}
	c := &cobra.Command{
		Use:   "tui [biz_id] [--pipeline P] [--since 1h | --watch URL]",
		Short: "The incident console: list, triage and repair operations",
		Long: `An interactive console for an incident (docs/tui.md). The list is a reconcile
over every pipeline (or --pipeline) bounded by --since, read again every
--refresh: its targets and the operations to watch, with counts per verdict.
Enter (or ':' and an id, or a biz_id argument) opens an operation's triage as
'opctl where' shows it; there p builds the repair plan, d dry-runs it, a
applies it after you type the biz_id and a reason (the guarded path of 'opctl
repair apply'), A shows its audit. ? lists every key.

With --watch URL the list is what a running 'opctl watch' flags now (its
/targets at URL, its --listen), read every --refresh (default 2s) within
--timeout, instead of a reconcile of this console's own: the watch's
--since and --older-than apply. When the watch does not answer, the last
list stays and the status line says how old it is. The detail and the
repair flow still read MySQL and Kafka with this console's config.

--readonly disables apply. --incident NAME is recorded in every plan and audit
row made from the console. Needs a terminal.`,
		Example: `  opctl tui
  opctl tui PAY-20261201-0042 --incident INC-4711
  opctl tui --pipeline settlement --since 30m --refresh 5s --readonly
  opctl tui --watch http://127.0.0.1:9464
  opctl tui --watch http://opctl-watch:9464 --pipeline settlement --timeout 2s`,
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
			if opts.Watch != "" {
				if _, err := httpd.TargetsURL(opts.Watch); err != nil {
					return usageErrorf("%s", err.Error())
				}
				if c.Flags().Changed("since") || c.Flags().Changed("older-than") {
					return usageErrorf("--since and --older-than are the watch's own with --watch (its list is what it flags)")
				}
				if !c.Flags().Changed("refresh") {
					opts.Refresh = tui.DefaultWatchRefresh
				}
				opts.Timeout = f.Globals.Timeout
			}
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
	fl.StringVar(&opts.Watch, "watch", "", "list what the opctl watch serving at this URL flags (its --listen: http://127.0.0.1:9464)")
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
	cfg, err := opts.Config()
	if err != nil && opts.Watch == "" {
		return err
	}
	// With --watch the list needs no config: one that cannot be read is
	// said when the detail is opened (it triages through it).
	var ps []*config.Pipeline
	if err == nil {
		if ps, err = cfg.Select(opts.Pipeline); err != nil {
			return err
		}
	}
	err = opts.Run(ctx, opts.IO.In, opts.IO.Out, tui.Options{
		Triage: func() (tui.Triager, error) {
			t, err := opts.Triage()
			if err != nil {
				return nil, err
			}
			return t, nil
		},
		Service: func() (tui.Service, error) {
			s, err := opts.Service()
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Reconcile: opts.Reconcile,
		Pipelines: ps, Pipeline: opts.Pipeline, Since: opts.Since, OlderThan: opts.OlderThan, Refresh: opts.Refresh,
		ReadOnly: opts.ReadOnly, Incident: opts.Incident, Operator: opts.Operator, BizID: opts.BizID, Color: opts.IO.ColorEnabled(),
		Watch: opts.Watch, Targets: watchTargets(opts.Watch, opts.Timeout),
	})
	if errors.Is(err, context.Canceled) {
		return exitWith(ExitInterrupted)
	}
	return err
}

// watchTargets reads the /targets of the watch at base (--watch), then
// its /readyz (why it is not ready: a source it reads is down), each read
// bounded by timeout (--timeout); nil without --watch.
func watchTargets(base string, timeout time.Duration) func(context.Context) ([]watch.Event, string, error) {
	if base == "" {
		return nil
	}
	client := &http.Client{}
	return func(ctx context.Context) ([]watch.Event, string, error) {
		u, err := httpd.TargetsURL(base)
		if err != nil {
			return nil, "", err
		}
		evs, err := httpd.ReadTargets(ctx, client, u, timeout)
		if err != nil {
			return nil, "", err
		}
		notReady, err := httpd.ReadReady(ctx, client, httpd.ReadyURL(u), timeout)
		if err != nil {
			notReady = "readiness unknown: " + err.Error()
		}
		return evs, notReady, nil
	}
}
