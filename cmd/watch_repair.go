package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/reconcile/watch"
	"github.com/opctl-dev/opctl/reconcile/watch/httpd"
	"github.com/opctl-dev/opctl/reconcile/watch/worker"
	"github.com/opctl-dev/opctl/sop"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// WatchRepairOptions are the recovery worker's flags of `opctl watch`
// (docs/watch.md#recovery) and its dependency.
type WatchRepairOptions struct {
	// Verdicts are --repair's, parsed; nil: no worker.
	Verdicts  []inspect.Code
	PerMinute int
	PauseFile string
	// RepairAfter is --repair-after: a flag is repaired once it has lasted
	// this long, and the verdict after a repair may take this long to
	// settle on an expected one.
	RepairAfter time.Duration
	// Operator is recorded in the plans and the audit: opctl-watch@host.
	Operator string
	// Service opens the write side (repair.Service), as `opctl repair
	// apply` does.
	Service func() (WatchRepairService, error)
	// Database is the name of the database the repairs write to
	// (mysql.write_dsn's): the repair lock is named for it and the
	// pipelines (worker.LockName). nil: "".
	Database func() (string, error)

	raw   string
	after durationFlag
}

// WatchRepairService is the write side the worker repairs through and
// takes its lock from (*repair.Service).
type WatchRepairService interface {
	worker.Service
	Lock(ctx context.Context, name string, wait time.Duration) (sources.Lock, error)
}

// addWatchRepairFlags adds --repair, --max-repairs-per-minute,
// --repair-after and --repair-pause-file.
func addWatchRepairFlags(fl *pflag.FlagSet, o *WatchRepairOptions, f *Factory) {
	o.Service = func() (WatchRepairService, error) { return f.Service() }
	o.Database = func() (string, error) {
		cfg, err := f.Config()
		if err != nil {
			return "", err
		}
		return config.DSNDatabase(cfg.MySQL.EffectiveWriteDSN()), nil
	}
	fl.StringVar(&o.raw, "repair", "", "repair flagged operations of these verdicts (STATE_BEHIND, STRANDED, MISSING_EFFECT, WRONGLY_SKIPPED, DUPLICATE_EFFECT)")
	fl.IntVar(&o.PerMinute, "max-repairs-per-minute", worker.DefaultPerMinute, "with --repair: at most this many repairs start in any minute, once the first one is verified")
	o.after = durationFlag{d: worker.DefaultRepairAfter}
	fl.Var(&o.after, "repair-after", "with --repair: repair an operation only once it has been flagged this long, and let the verdict after a repair settle for as long; longer than the consumers' slowest operation (0: at once, verified once)")
	fl.StringVar(&o.PauseFile, "repair-pause-file", "", "with --repair: while this file exists, no repair starts (a kill switch)")
}

// check parses the recovery worker's flags (a usage error, exit 2, names
// the verdicts it repairs).
func (o *WatchRepairOptions) check(fl *pflag.FlagSet) error {
	if !fl.Changed("repair") {
		for _, name := range []string{"max-repairs-per-minute", "repair-after", "repair-pause-file"} {
			if fl.Changed(name) {
				return usageErrorf("--%s needs --repair VERDICT,...", name)
			}
		}
		return nil
	}
	vs, err := worker.ParseVerdicts(o.raw)
	if err != nil {
		return usageErrorf("--repair %q: %v (docs/watch.md#recovery)", o.raw, err)
	}
	if o.PerMinute < 1 {
		return usageErrorf("--max-repairs-per-minute %d: want at least 1", o.PerMinute)
	}
	if o.after.d < 0 {
		return usageErrorf("--repair-after %s: want 0 or more (docs/watch.md#recovery)", o.after.String())
	}
	o.RepairAfter = o.after.d
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	o.Verdicts, o.Operator = vs, worker.OperatorPrefix+host
	return checkText("the host name", host)
}

// repairExpect is what a repair of each verdict may leave: the expect of
// the verify step of the verdict's built-in runbook (docs/runbooks.md),
// the one list `opctl sop run` checks after an apply too.
func repairExpect(verdicts []inspect.Code) (map[inspect.Code][]inspect.Code, error) {
	lib, err := sop.Builtins()
	if err != nil {
		return nil, err
	}
	out := map[inspect.Code][]inspect.Code{}
	for _, v := range verdicts {
		rb, ok := lib.For(v)
		if ok {
			for _, s := range rb.Steps {
				if s.Type == sop.StepVerify && len(s.Expect) > 0 {
					out[v] = s.Expect
				}
			}
		}
		if len(out[v]) == 0 {
			return nil, fmt.Errorf("--repair %s: no built-in runbook says which verdicts a repair of it leaves; it cannot be verified", v)
		}
	}
	return out, nil
}

// startWatchRepair starts the recovery worker beside w when --repair was
// given: it is woken by w's flagged and changed events, writes its lines to
// w's events, feeds m, and repairs only while it holds the repair lock of
// the pipelines. The returned function stops it and waits for it.
func startWatchRepair(ctx context.Context, opts *WatchOptions, w *watch.Watcher, m *httpd.Metrics, pipelines []*config.Pipeline) (func(), error) {
	o := &opts.Recovery
	if len(o.Verdicts) == 0 {
		return func() {}, nil
	}
	expect, err := repairExpect(o.Verdicts)
	if err != nil {
		return nil, err
	}
	svc, err := o.Service()
	if err != nil {
		return nil, err
	}
	names := make([]string, len(pipelines))
	for i, p := range pipelines {
		names[i] = p.Name
	}
	database := ""
	if o.Database != nil {
		if database, err = o.Database(); err != nil {
			return nil, err
		}
	}
	lockName := worker.LockName(database, names)
	// The watcher and the worker write lines to one stream, and their
	// progress to one stderr.
	events := &lockedWriter{w: w.Events}
	w.Events = events
	logs := &lockedWriter{w: opts.IO.ErrOut}
	opts.IO.ErrOut, w.Log = logs, logs
	wk := &worker.Worker{Verdicts: o.Verdicts, PerMinute: o.PerMinute, PauseFile: o.PauseFile, Operator: o.Operator,
		RepairAfter: o.RepairAfter, Settle: o.RepairAfter,
		Service: svc, Triage: w.Triage, Targets: w.Targets,
		Expect: func(c inspect.Code) []inspect.Code { return expect[c] },
		Lock:   func(ctx context.Context) (sources.Lock, error) { return svc.Lock(ctx, lockName, 0) },
		Events: events, Log: logs,
		Hooks: worker.Hooks{Repair: m.Repaired, State: m.RepairState(worker.States(), []string{worker.ReasonApplyFailed, worker.ReasonUnexpected}),
			// A repair's writes may touch no table the watch follows (a
			// reversal row, a compensation): the watch triages the
			// operation again at its next round, so its flag clears.
			Event: func(e watch.Event) {
				if (e.Event == worker.Repaired || e.Event == worker.RepairFailed) && e.BizID != "" {
					w.Recheck(watch.Key{Pipeline: e.Pipeline, BizID: e.BizID}, watch.Cause{Source: worker.SourceRepair})
				}
			}}}
	hooks := w.Hooks
	event := hooks.Event
	hooks.Event = func(e watch.Event) {
		if event != nil {
			event(e)
		}
		wk.Offer(e)
	}
	w.Hooks = hooks
	vs := make([]string, len(o.Verdicts))
	for i, v := range o.Verdicts {
		vs[i] = string(v)
	}
	slices.Sort(vs)
	fmt.Fprintf(opts.IO.ErrOut, "watch: repair: repairing %v as %s, once flagged for %s (--repair-after), at most %d a minute after the first, while holding the lock %s of pipelines %v\n", vs, o.Operator, o.RepairAfter, o.PerMinute, lockName, names)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wk.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

// lockedWriter serialises the writes of the watcher and the worker: one
// line each, never interleaved.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil {
		return len(p), nil
	}
	return l.w.Write(p)
}
