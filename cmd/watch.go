package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/reconcile/watch/httpd"
	"github.com/opctl-dev/opctl/sources/config"
	"github.com/opctl-dev/opctl/sources/connect"
)

// WatchOptions are the parsed flags of `opctl watch` and its dependencies.
type WatchOptions struct {
	IO      *iostreams.IOStreams
	Timeout time.Duration
	Config  func() (*config.Config, error)
	// Reconcile runs the first sweep.
	Reconcile func() (reconcile.Func, error)
	// Triage triages one operation as `opctl where` does.
	Triage func() (watch.TriageFunc, error)
	// TriageBatch triages a batch of one pipeline's operations as
	// reconcile does (nil: Triage one at a time).
	TriageBatch func(pipelines []*config.Pipeline) (watch.TriageBatchFunc, error)
	// Walkers returns the read path of each pipeline for the poller.
	Walkers func() (func(*config.Pipeline) watch.Walker, error)
	// Clients opens the binlog followers and Kafka (binlog mode).
	Clients func() (*connect.Clients, error)
	// Source is --source: auto, binlog or poll (docs/watch.md#sources).
	Source string
	// SearchWindow is how long before a record its message is looked for
	// (--search-window) when a binlog change is mapped through the topic.
	SearchWindow time.Duration

	Pipeline                   string
	Since, OlderThan, Interval time.Duration
	Listen                     string
	// Events is the events file ("" for stdout).
	Events string
	// State is the state file (docs/watch.md#state-file); "none" for none.
	State string
	// Recovery is the recovery worker's (cmd/watch_repair.go).
	Recovery WatchRepairOptions
}

// DefaultWatchListen is where watch serves HTTP unless --listen says.
const DefaultWatchListen = "127.0.0.1:9464"

// NewCmdWatch builds `opctl watch`. runF replaces the run function in tests.
func NewCmdWatch(f *Factory, runF func(context.Context, *WatchOptions) error) *cobra.Command {
	// opts is named before it is built: TriageBatch reads its flags
	// (--older-than) and stderr when runWatch calls it.
	var opts *WatchOptions
	opts = &WatchOptions{IO: f.IOStreams, Config: f.Config, Reconcile: f.Reconcile, Clients: f.Clients,
		Triage: func() (watch.TriageFunc, error) {
			tr, err := f.Triage()
			if err != nil {
				return nil, err
			}
			return func(ctx context.Context, pipeline, bizID string) (inspect.Report, error) {
				res, err := tr.Triage(ctx, bizID, pipeline)
				if err != nil {
					return inspect.Report{}, err
				}
				if len(res.Ops) != 1 {
					return inspect.Report{}, fmt.Errorf("pipeline %q: %d operations triaged", pipeline, len(res.Ops))
				}
				return res.Ops[0].Report, nil
			}, nil
		},
		TriageBatch: func(ps []*config.Pipeline) (watch.TriageBatchFunc, error) {
			tr, err := f.Triage()
			if err != nil {
				return nil, err
			}
			return watch.BatchTriage(tr.Collector, ps, watch.BatchOptions{OlderThan: opts.OlderThan, Log: opts.IO.ErrOut}), nil
		},
		Walkers: func() (func(*config.Pipeline) watch.Walker, error) {
			c, err := f.Clients()
			if err != nil {
				return nil, err
			}
			return func(p *config.Pipeline) watch.Walker { return c.ReaderFor(p) }, nil
		}}
	since := durationFlag{d: reconcile.DefaultSince}
	older := durationFlag{d: reconcile.DefaultOlderThan}
	interval := durationFlag{d: time.Second}
	c := &cobra.Command{
		Use:   "watch",
		Short: "Flag half-completed operations as they happen (events, /metrics)",
		Long: `Keep the set of operations that need action current (docs/watch.md): one
reconcile sweep of --since first, then the changes of each pipeline's tables,
each changed operation triaged with the rules of 'opctl where'; a
non-terminal operation is looked at again when it crosses --older-than, so
stuck is found on time.

Changes come, per server (--source auto), from its binlog as a replica when
it has log_bin ON, binlog_format ROW and the binlog user can replicate
(REPLICATION SLAVE, REPLICATION CLIENT): the state, idempotency, scan,
entity and binlog-step tables, each change triaged as it commits; else from
keyset polls of the state, idempotency and entity (entity.updated_at) tables
every --interval. stderr says which and why. --source binlog fails (exit 1)
where there is no binlog to follow; --source poll never reads one.

An operation is flagged when it becomes what 'opctl reconcile' reports as a
target, changed when its verdict changes while flagged, cleared when it
stops being one: one JSON line per transition on stdout (or --events FILE).
Progress and a source lost or regained go to stderr.

HTTP on --listen: /metrics (Prometheus), /targets (the flagged operations,
JSON; 'opctl tui --watch URL' lists them), /healthz, /readyz (the first sweep
is done and every source answers).

MySQL or Kafka down: the watch keeps running, opctl_watch_up{source="mysql"}
or {source="kafka"} is 0, /readyz answers 503 naming it, stderr says it was
lost and regained; operations whose triage failed are triaged again each
round until it answers (docs/watch.md#when-mysql-or-kafka-is-down).

--state (default $XDG_STATE_HOME/opctl/watch.json) keeps the position, the
flags and the deadlines: a restart resumes without a sweep, and says so.

With --repair VERDICT,... it is also a recovery worker (docs/watch.md#recovery):
each operation flagged for --repair-after (default 10s) with one of those
verdicts, and still one of them when triaged again, is planned and applied
exactly as 'opctl repair plan' and 'opctl repair apply' do, operator
opctl-watch@HOST, one at a time and triaged again after each until its
verdict settles; the first alone, then at most --max-repairs-per-minute.
--repair-after must exceed the consumers' slowest operation: a consumer
without a lease is seen mid-way (STATE_BEHIND between two statements) and
must not be repaired or judged then. It stops repairing at the first failed
apply or verdict still not an expected one --repair-after after a repair (a
repair_failed line, /metrics opctl_watch_repairs_stopped), and starts none while
--repair-pause-file exists. Of two watches of the same pipelines only the
holder of their MySQL lock (GET_LOCK) repairs; the other takes over within
seconds when it dies. Repairable: STATE_BEHIND, STRANDED, MISSING_EFFECT,
WRONGLY_SKIPPED, DUPLICATE_EFFECT (a plan that needs an attestation is
skipped and said on stderr).

Ctrl-C (or SIGTERM) stops it within a second.`,
		Example: `  opctl watch
  opctl watch --pipeline settlement --interval 2s --events events.jsonl
  curl -s 127.0.0.1:9464/targets
  curl -s 127.0.0.1:9464/readyz     # 503 and why while MySQL or Kafka is down
  opctl tui --watch http://127.0.0.1:9464
  # a recovery worker, with a kill switch
  opctl watch --repair STATE_BEHIND,STRANDED --max-repairs-per-minute 10 \
    --repair-pause-file /run/opctl/pause
  touch /run/opctl/pause    # no repair starts until it is removed`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := opts.Recovery.check(c.Flags()); err != nil {
				return err
			}
			opts.Since, opts.OlderThan, opts.Interval = since.d, older.d, interval.d
			if opts.Since <= 0 || opts.OlderThan < 0 || opts.Interval < 10*time.Millisecond {
				return usageErrorf("--since must be positive, --older-than not negative and --interval at least 10ms")
			}
			opts.Timeout, opts.SearchWindow = f.Globals.Timeout, f.Globals.SearchWindow
			switch opts.Source {
			case WatchSourceAuto, WatchSourceBinlog, WatchSourcePoll:
			default:
				return usageErrorf("--source %q: want auto, binlog or poll", opts.Source)
			}
			if opts.State == "" {
				p, err := defaultWatchState(opts.Pipeline)
				if err != nil {
					return err
				}
				opts.State = p
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runWatch(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Pipeline, "pipeline", "", "only this pipeline (default: every pipeline)")
	fl.Var(&since, "since", "the first sweep's window (s, m, h, d: 7d, 36h)")
	fl.Var(&older, "older-than", "stuck: minimum age of updated_at")
	fl.Var(&interval, "interval", "time between two polls")
	fl.StringVar(&opts.Listen, "listen", DefaultWatchListen, "serve /metrics, /targets, /healthz and /readyz on this address")
	fl.StringVar(&opts.Source, "source", WatchSourceAuto, "how changes are read: auto (the binlog where the server has a ROW binlog the account can follow, else polling), binlog (fail without one), poll")
	fl.StringVar(&opts.Events, "events", "", "append the event lines to this file instead of stdout")
	fl.StringVar(&opts.State, "state", "", "the state file (\"none\": none; default: watch[-PIPELINE].json in $XDG_STATE_HOME/opctl)")
	addWatchRepairFlags(fl, &opts.Recovery, f)
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	return c
}

func runWatch(ctx context.Context, opts *WatchOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	pipelines, err := cfg.Select(opts.Pipeline)
	if err != nil {
		return err
	}
	run, err := opts.Reconcile()
	if err != nil {
		return err
	}
	tr, err := opts.Triage()
	if err != nil {
		return err
	}
	var trb watch.TriageBatchFunc
	if opts.TriageBatch != nil {
		if trb, err = opts.TriageBatch(pipelines); err != nil {
			return err
		}
	}
	walkers, err := opts.Walkers()
	if err != nil {
		return err
	}
	var events io.Writer = opts.IO.Out
	if opts.Events != "" {
		f, err := os.OpenFile(opts.Events, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		events = f
	}
	l, err := httpd.Listen(opts.Listen)
	if err != nil {
		return usageErrorf("--listen %s: %v", opts.Listen, err)
	}
	source, closeSource, err := watchSource(ctx, opts, pipelines, walkers)
	if err != nil {
		l.Close()
		return err
	}
	defer closeSource()
	w := &watch.Watcher{Pipelines: pipelines, Triage: tr, TriageBatch: trb, Interval: opts.Interval, OlderThan: opts.OlderThan,
		Timeout: opts.Timeout, Events: events, Log: opts.IO.ErrOut,
		Source: source,
		Sweep: func(ctx context.Context, emit func(reconcile.Result) error) error {
			sum, err := run(ctx, reconcile.Options{Pipelines: pipelines, Since: opts.Since, OlderThan: opts.OlderThan, Timeout: opts.Timeout}, emit)
			if err == nil && sum != nil {
				for _, cs := range sum.Checks {
					if cs.Status != reconcile.StatusOK && cs.Status != reconcile.StatusSkipped {
						fmt.Fprintf(opts.IO.ErrOut, "watch: first sweep: %s %s: %s %s\n", cs.Pipeline, cs.Check, cs.Status, cs.Reason)
					}
				}
			}
			return err
		}}
	if opts.State != "none" {
		st, err := loadWatchState(opts.State)
		switch {
		case err != nil:
			fmt.Fprintf(opts.IO.ErrOut, "watch: state file %s unreadable (%v): sweeping --since\n", opts.State, err)
		case st == nil:
			fmt.Fprintf(opts.IO.ErrOut, "watch: no state file at %s yet: sweeping --since\n", opts.State)
		default:
			w.Resume = st
		}
		w.Save = func(st watch.State) error {
			if err := os.MkdirAll(filepath.Dir(opts.State), 0o700); err != nil {
				return err
			}
			return writeFileAtomic(opts.State, modePrivate, func(out io.Writer) error {
				return json.NewEncoder(out).Encode(st)
			})
		}
	}
	m := httpd.NewMetrics(w.Targets, nil)
	w.Hooks = m.Hooks()
	reportBehind(source, m.BinlogBehind)
	stopRepair, err := startWatchRepair(ctx, opts, w, m, pipelines)
	if err != nil {
		l.Close()
		return err
	}
	defer stopRepair()
	fmt.Fprintf(opts.IO.ErrOut, "watch: serving http://%s/metrics; first sweep of %s over %d pipelines\n", l.Addr(), (&durationFlag{d: opts.Since}).String(), len(pipelines))
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	serr := make(chan error, 1)
	go func() { serr <- httpd.Serve(ctx, l, httpd.Handler(w, m)) }()
	werr := w.Run(ctx)
	cancel()
	if err := <-serr; err != nil && werr == nil {
		werr = err
	}
	if werr != nil {
		return werr
	}
	if err := parent.Err(); err != nil {
		// A stop is an interrupt like every command's (exit 130,
		// docs/exit-codes.md).
		fmt.Fprintln(opts.IO.ErrOut, "watch: stopped")
		return err
	}
	return nil
}

// defaultWatchState is $XDG_STATE_HOME/opctl/watch.json (watch-P.json with
// --pipeline P); $XDG_STATE_HOME defaults to ~/.local/state.
func defaultWatchState(pipeline string) (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", usageErrorf("no $XDG_STATE_HOME nor home directory for the state file: pass --state FILE or --state none")
		}
		dir = filepath.Join(home, ".local", "state")
	}
	name := "watch.json"
	if pipeline != "" {
		name = "watch-" + pipeline + ".json"
	}
	return filepath.Join(dir, "opctl", name), nil
}

// loadWatchState reads a state file; nil, nil when there is none.
func loadWatchState(path string) (*watch.State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var st watch.State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	if st.Version != watch.StateVersion {
		return nil, fmt.Errorf("version %d, want %d", st.Version, watch.StateVersion)
	}
	return &st, nil
}
