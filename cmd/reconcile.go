package cmd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/opctl-dev/opctl/cmd/iostreams"
	"github.com/opctl-dev/opctl/cmd/ui"
	"github.com/opctl-dev/opctl/reconcile"
	"github.com/opctl-dev/opctl/sources/config"
)

// ReconcileOptions are the parsed flags of `opctl reconcile` and its
// dependencies.
type ReconcileOptions struct {
	IO      *iostreams.IOStreams
	Timeout time.Duration
	// Config returns the configuration (the pipelines and the audit table).
	Config func() (*config.Config, error)
	// Reconcile runs the scan (opened on first use).
	Reconcile func() (reconcile.Func, error)

	Pipeline      string
	Checks        []string
	Since         time.Duration
	OlderThan     time.Duration
	Rate          int
	Chunk         int
	Shard, Shards int
	AllowFullScan bool
	Access        string
	Concurrency   int
	// Out is the targets file (JSONL), "" for none.
	Out string
	// Next are the global flags the next command carries.
	Next NextFlags
	// Output is table, json, jsonl or prometheus.
	Output Format
}

// NewCmdReconcile builds `opctl reconcile`. runF replaces the run function in tests.
func NewCmdReconcile(f *Factory, runF func(context.Context, *ReconcileOptions) error) *cobra.Command {
	opts := &ReconcileOptions{IO: f.IOStreams, Config: f.Config, Reconcile: f.Reconcile}
	since := durationFlag{d: reconcile.DefaultSince}
	older := durationFlag{d: reconcile.DefaultOlderThan}
	var checks, shard, output string
	c := &cobra.Command{
		Use:   "reconcile",
		Short: "Scan whole tables for half-completed operations (batch, throttled)",
		Long: `Walk the configured tables in keyset-paginated chunks of an index and triage
every candidate with the same rules as 'opctl where'. Checks:

  stuck        non-terminal state rows older than --older-than, no live lease
  skipped      SKIPPED records whose entity does not cancel the effect and whose
               effect is missing
  duplicates   keys with more than one row in a step's scan table
  orphans      keys in a step's scan table with no state row and no
               idempotency record
  uncommitted  terminal operations the group has not committed past (needs
               Kafka)

Candidates are triaged in batches of up to 256: each query 'opctl where' runs
for one operation runs once per batch. A candidate is a target when its
verdict's severity is "action"; a stuck one also when it is stuck as defined
above, whatever its verdict (IN_FLIGHT never is). Targets go to
stdout (-o table|json|jsonl) and to --out as JSONL for
'opctl repair plan --from-file'. -o prometheus prints counts per pipeline and
check in the text exposition format (for a textfile collector).

A check that would need a full table scan (no usable index — any index whose
leading columns are the ones the walk needs serves — or a scan block
without a time column) is refused unless --allow-full-scan is given; run
'opctl schema check' for the DDL that adds the indexes. Ctrl-C (or SIGTERM,
SIGHUP) stops the scan cleanly and says how far it got. --out is replaced
only when a run ends: an interrupted or failed run leaves it as it was.

duplicates and orphans walk a scan table's time index for a narrow window and
sweep its key index in key order when the window holds a large share of it
(--access auto). In a narrow window duplicates sweep the key range that holds
the window's keys instead, when that range is small (ids that grow with time);
--access sweep|walk|range decides instead (docs/reconcile.md#access-path).

Exit: 6 when a source could not be read (verdicts partial; before 3), 3 when
a target was found (even when another check was refused: the refusal is
still reported, on stderr too when stdout is not a terminal), 5 when a check
was refused and no target found, 0 when none, 130 when interrupted.`,
		Example: `  opctl reconcile
  opctl reconcile --check skipped --since 1d --out targets.jsonl
  opctl reconcile --pipeline settlement --check stuck,duplicates --rate 20000
  opctl reconcile --shard 0/4 -o jsonl > part0.jsonl
  opctl reconcile -o prometheus > /var/lib/node_exporter/opctl.prom
  # every few minutes: reads one hour of rows
  opctl reconcile --since 1h -o prometheus
  # a sweep of the whole history
  opctl reconcile --since 400d --check duplicates,orphans`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.Since, opts.OlderThan, opts.Next = since.d, older.d, f.Globals.Next()
			if opts.Since <= 0 || opts.OlderThan < 0 {
				return usageErrorf("--since must be positive and --older-than not negative")
			}
			o, err := parseFormat(output, FormatTable, FormatWide, FormatJSON, FormatJSONL, FormatPrometheus)
			if err != nil {
				return err
			}
			opts.Output = o
			opts.Checks = nil
			for _, s := range strings.Split(checks, ",") {
				s = strings.TrimSpace(s)
				if s == "" {
					continue
				}
				if !reconcile.IsCheck(s) {
					return usageErrorf("--check %q: want one or more of %s", s, strings.Join(reconcile.Checks(), ","))
				}
				opts.Checks = append(opts.Checks, s)
			}
			if shard != "" {
				i, n, err := parseShard(shard)
				if err != nil {
					return err
				}
				opts.Shard, opts.Shards = i, n
			}
			switch opts.Access {
			case reconcile.AccessAuto, reconcile.AccessSweep, reconcile.AccessWalk, reconcile.AccessRange:
			default:
				return usageErrorf("--access %q: want auto, sweep, walk or range", opts.Access)
			}
			if opts.Rate < 0 || opts.Chunk <= 0 || opts.Chunk > 10000 || opts.Concurrency <= 0 || opts.Concurrency > 64 {
				return usageErrorf("--rate must be >= 0, --chunk 1..10000, --concurrency 1..64")
			}
			opts.Timeout = f.Globals.Timeout
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runReconcile(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Pipeline, "pipeline", "", "only this pipeline (default: every pipeline)")
	fl.StringVar(&checks, "check", "", "checks to run, comma-separated: "+strings.Join(reconcile.Checks(), ",")+" (default: all)")
	fl.Var(&since, "since", "bound each check by the time column it walks (s, m, h, d: 7d, 36h)")
	fl.Var(&older, "older-than", "stuck: minimum age of updated_at")
	fl.IntVar(&opts.Rate, "rate", 0, "at most this many rows read per second (0: no cap)")
	fl.IntVar(&opts.Chunk, "chunk", reconcile.DefaultChunk, "rows per page of an index walk")
	fl.StringVar(&shard, "shard", "", "i/n: keep the keys with CRC32(key) mod n = i (split one table between n workers)")
	fl.BoolVar(&opts.AllowFullScan, "allow-full-scan", false, "run checks that have no usable index (full table scans)")
	fl.StringVar(&opts.Access, "access", reconcile.AccessAuto, "how duplicates and orphans read a scan table: auto (by the window's share of the table), sweep (its key index, in key order), walk (its time index) or range (duplicates: the key range of the window's keys; orphans walk)")
	fl.IntVar(&opts.Concurrency, "concurrency", reconcile.DefaultConcurrency, "batches of candidates triaged at once (each batch: one statement per query)")
	fl.StringVar(&opts.Out, "out", "", "write the targets as JSONL to this file (for 'opctl repair plan --from-file')")
	// A local -o shadows the global one: reconcile adds "prometheus".
	fl.StringVarP(&output, "output", "o", string(FormatTable), "output format: table|wide|json|jsonl|prometheus")
	_ = c.RegisterFlagCompletionFunc("pipeline", completePipelines(f))
	_ = c.RegisterFlagCompletionFunc("check", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return reconcile.Checks(), cobra.ShellCompDirectiveNoFileComp
	})
	return c
}

// durationFlag is a duration that also accepts days ("7d", "1d12h").
type durationFlag struct{ d time.Duration }

// maxDurationDays bounds the days of a duration flag (docs/reconcile.md).
const maxDurationDays = config.MaxDurationDays

// ParseDuration parses a Go duration, also accepting a leading number of
// days ("8d", "1d12h"): config.ParseDuration, the one parser of durations.
func ParseDuration(s string) (time.Duration, error) { return config.ParseDuration(s) }

// String is the value as Set takes it back: whole days as "Nd", else Go's
// form.
func (f *durationFlag) String() string {
	if n := f.d / (24 * time.Hour); f.d%(24*time.Hour) == 0 && n > 0 && n <= maxDurationDays {
		return fmt.Sprintf("%dd", n)
	}
	return f.d.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := ParseDuration(s)
	if err != nil {
		return err
	}
	f.d = d
	return nil
}

func (f *durationFlag) Type() string { return "duration" }

func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || n > 1024 || i < 0 || i >= n {
		return 0, 0, usageErrorf("--shard %q: want i/n with 0 <= i < n <= 1024 (e.g. 0/4)", s)
	}
	return i, n, nil
}

func runReconcile(ctx context.Context, opts *ReconcileOptions) error {
	// A run allocates every page and batch anew and keeps little of them:
	// collecting at 4× the live heap instead of 2× took a stuck check on 2M
	// operations from 0.12 s to 0.10 s (median of 5), and the soft limit of
	// 32 MiB keeps a long run's peak near 45 MiB
	// (docs/performance.md#opctl-reconcile). GOGC and GOMEMLIMIT, when set,
	// decide instead.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(32 << 20))
	}
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

	var out *targetsFile
	if opts.Out != "" {
		out, err = createTargetsFile(opts.Out)
		if err != nil {
			return err
		}
		defer out.Close()
	}
	io := opts.IO
	view := newReconcileView(io, opts.Output)
	if hv, ok := view.(*reconcileHumanView); ok {
		hv.out, hv.next = opts.Out, opts.Next
	}
	ro := reconcile.Options{
		Pipelines: pipelines, Checks: opts.Checks, Since: opts.Since, OlderThan: opts.OlderThan,
		Rate: opts.Rate, Chunk: opts.Chunk, Shard: opts.Shard, Shards: opts.Shards,
		AllowFullScan: opts.AllowFullScan, Access: opts.Access, Concurrency: opts.Concurrency, Timeout: opts.Timeout,
	}
	ro.Progress = view.Progress()
	sum, runErr := run(ctx, ro, func(r reconcile.Result) error {
		if r.IsTarget() && out != nil {
			if err := out.Write(r.Target); err != nil {
				return err
			}
		}
		return view.Result(r)
	})
	view.Stop()
	// --out is put in place only by a run that ended; an interrupted or
	// failed run leaves it as it was (docs/reconcile.md).
	kept := ""
	if out != nil {
		if sum != nil && sum.Interrupted == nil && runErr == nil {
			runErr = out.Commit()
		}
		if sum == nil || sum.Interrupted != nil || runErr != nil {
			out.Close()
			kept = fmt.Sprintf("--out %s was left as it was (it is written only when a run ends)", opts.Out)
		}
	}
	if sum == nil {
		if kept != "" && runErr != nil {
			return fmt.Errorf("%w; %s", runErr, kept)
		}
		return runErr
	}
	if err := view.Finish(sum); err != nil && runErr == nil {
		runErr = err
	}
	if sum.Interrupted != nil {
		// One clause per pipeline the interrupt cut: they run in parallel,
		// each at its own check.
		cuts := sum.Interruptions
		if len(cuts) == 0 {
			cuts = []reconcile.Interruption{*sum.Interrupted}
		}
		var at []string
		for _, in := range cuts {
			last := "none read yet"
			if in.LastKey != "" {
				last = fmt.Sprintf("last key %q", in.LastKey) // %q: no raw control character
			}
			at = append(at, fmt.Sprintf("after %d rows of check %s on pipeline %s (%s)", in.Rows, in.Check, ui.Safe(in.Pipeline), last))
		}
		msg := fmt.Sprintf("opctl: interrupted %s; %d target(s) found so far", strings.Join(at, ", "), sum.Targets)
		if kept != "" {
			msg += "; " + kept
		}
		fmt.Fprintln(io.ErrOut, msg)
		return exitWith(ExitInterrupted)
	}
	if runErr != nil {
		if kept != "" {
			return fmt.Errorf("%w; %s", runErr, kept)
		}
		return runErr
	}
	view.Done(sum)
	return exitWith(sum.ExitCode())
}

func summaryLine(sum *reconcile.Summary) string {
	s := fmt.Sprintf("reconcile: %d target(s) among %d candidate(s), %d rows read in %.1fs", sum.Targets, sum.Candidates, sum.Rows, sum.Seconds)
	var refused []string
	for _, c := range sum.Checks {
		if c.Status == reconcile.StatusRefused || c.Status == reconcile.StatusFailed {
			refused = append(refused, fmt.Sprintf("%s/%s %s: %s", c.Pipeline, c.Check, c.Status, ui.Safe(c.Reason)))
		}
	}
	if len(refused) > 0 {
		s += "\n  " + strings.Join(refused, "\n  ")
	}
	if sum.Partial {
		s += "\n  partial: " + strings.Join(sum.PartialWhy, "; ")
	}
	return s
}

// targetsFile writes targets as JSONL through an atomicFile: the file
// appears, complete, when the run ends (Commit); an interrupted or failed
// run leaves --out as it was (Abort).
type targetsFile struct {
	path string
	a    *atomicFile
	w    *bufio.Writer
	enc  *json.Encoder
}

func createTargetsFile(path string) (*targetsFile, error) {
	a, err := createAtomic(path, modeShared, false)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %w", path, err)
	}
	w := bufio.NewWriter(a)
	return &targetsFile{path: path, a: a, w: w, enc: jsonEncoder(w, FormatJSONL)}, nil
}

func (t *targetsFile) Write(tg reconcile.Target) error {
	if err := t.enc.Encode(tg); err != nil {
		return fmt.Errorf("--out %s: %w", t.path, err)
	}
	return nil
}

// Commit flushes the targets and puts the file in place of --out.
func (t *targetsFile) Commit() error {
	err := t.w.Flush()
	if err == nil {
		err = t.a.Commit()
	}
	if err != nil {
		t.a.Abort()
		return fmt.Errorf("--out %s: %w", t.path, err)
	}
	return nil
}

// Close drops the targets unless Commit put them in place.
func (t *targetsFile) Close() error {
	t.a.Abort()
	return nil
}

var _ io.Closer = (*targetsFile)(nil)
