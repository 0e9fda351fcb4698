// Package reconcile finds half-completed operations across whole tables
// (docs/reconcile.md). Each check walks an index in keyset-paginated chunks (never
// OFFSET, never a JOIN over a whole table), keeps only the candidates the
// table-level facts point at, and triages every candidate with the same
// sources.Collector and verdict rules as `opctl where` (triage.Judge): in batches, the
// MySQL rows of a whole batch read with one statement per query
// (Collector.CollectMany), a few batches at a time. The Kafka group view is
// read once per pipeline for the whole run; a candidate's message position
// is the one its state row stores.
//
// A candidate becomes a target when its verdict's severity is "action",
// and a stuck candidate also when it is stuck by definition (non-terminal,
// older than --older-than, no live lease: whatever its verdict, which the
// target carries); one that turns out IN_FLIGHT is reported in the counts
// but is never a target (docs/reconcile.md#targets).
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/inspect/triage"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// DB is what a run reads from MySQL: batches of operations for triage
// (sources.BatchDB) and table-level walks and lookups. *mysql.Reader
// implements it (reader_test.go checks; reconcile links no driver).
type DB interface {
	sources.BatchDB
	Now(ctx context.Context) (time.Time, error)
	WalkPage(ctx context.Context, w sources.Walk, after sources.Cursor, limit int) ([]sources.WalkRow, error)
	MultiRowKeys(ctx context.Context, table, keyCol string, keys []string) (map[string]int64, error)
	ExistingKeys(ctx context.Context, table, keyCol string, keys []string) (map[string]bool, error)
	KeyStatuses(ctx context.Context, table, keyCol, statusCol string, keys []string) (map[string][]string, error)
	NextValue(ctx context.Context, table, col string, after *string) (string, bool, error)
	TableInfo(ctx context.Context, table string) (sources.TableInfo, error)
	AuditByOperation(ctx context.Context, auditTable, pipeline string) (map[string][]sources.AuditAction, error)
	SweepPage(ctx context.Context, s sources.Sweep, after, upTo sources.Bound, limit int, each func(key []byte, rows int64)) (sources.SweepEnd, error)
	SweepMulti(ctx context.Context, s sources.Sweep, after sources.Bound, n int) ([]string, sources.SweepEnd, error)
	SweepBounds(ctx context.Context, s sources.Sweep, pk string, n int) ([]sources.KeyCount, error)
	SweepRange(ctx context.Context, s sources.Sweep, after, upTo sources.Bound) ([]string, sources.SweepEnd, error)
	KeysSince(ctx context.Context, table, keyCol, timeCol string, from time.Time, keys []string) (map[string]bool, error)
	RangeRows(ctx context.Context, table, index, col string, from time.Time) (int64, bool, error)
	StatusRangeRows(ctx context.Context, table, index, statusCol, status, col string, from, to time.Time) (int64, bool, error)
	KeyRangeRows(ctx context.Context, table, index, col string, lo, hi any) (int64, bool, error)
	WindowKeys(ctx context.Context, table, index, keyCol, timeCol string, from, to time.Time) (lo, hi sources.KeyCount, rows int64, err error)
	KeysExtent(ctx context.Context, table, index, keyCol string, keys []sources.KeyCount) (lo, hi sources.KeyCount, err error)
}

// batchLimiter is a DB whose server needs smaller batches than
// Options.Batch (*mysql.Reader: go-mysql-server does).
type batchLimiter interface {
	BatchLimit(ctx context.Context) (int, string)
}

// Deps are the sources of a run.
type Deps struct {
	// DB is what the checks walk and look keys up in; it is the Collector's
	// DB (connect.Clients.Reader).
	DB DB
	// DBFor, when set, is the read path of a pipeline with its own MySQL
	// (pipelines[].mysql); nil or a nil answer: DB.
	DBFor func(p *config.Pipeline) DB
	// Collector triages the candidates as `opctl where` does (the one
	// connect.Open builds). Run uses a copy whose Kafka answers from the
	// group views it reads once per pipeline (docs/reconcile.md). A nil
	// Collector.Kafka means no Kafka: Collector.KafkaMissing then says why,
	// the uncommitted check cannot run and every verdict is partial. A nil
	// Collector.Prober: unacked intents are not probed.
	Collector *sources.Collector
}

// Defaults of Options.
const (
	DefaultChunk       = 1000
	DefaultConcurrency = 4
	DefaultBatch       = 256
	DefaultSince       = 7 * 24 * time.Hour
	DefaultOlderThan   = 5 * time.Minute
)

// Options select and bound a run.
type Options struct {
	Pipelines []*config.Pipeline
	// Checks to run, in any order; empty: all.
	Checks []string
	// Since bounds every check by the time column it walks (default 7d).
	Since time.Duration
	// OlderThan is the minimum age of a stuck operation's updated_at; zero
	// means no minimum (the CLI's --older-than defaults to DefaultOlderThan).
	OlderThan time.Duration
	// Rate caps the rows read by the scans per second; 0: no cap.
	Rate int
	// Chunk is the rows per page of a walk (default 1000).
	Chunk int
	// Shard and Shards split the keys between workers: a worker keeps the
	// keys with CRC32(key) mod Shards = Shard. Shards <= 1: no split.
	Shard, Shards int
	// AllowFullScan lets a check run without the index it needs.
	AllowFullScan bool
	// Access is how duplicates and orphans read a scan table: AccessAuto
	// (the default: by the window's share of the table), AccessSweep,
	// AccessWalk or AccessRange (docs/reconcile.md#access-path).
	Access string
	// Concurrency bounds the batches triaged at once (default 4).
	Concurrency int
	// Batch is the most candidates triaged together (default 256, at most
	// mysql.MaxBatch): their rows are read with one statement per query.
	Batch int
	// Timeout bounds each statement of the scans (default
	// sources.DefaultTimeout); the Collector's Timeout bounds the triage's.
	Timeout time.Duration
	// Progress, when set, is called after every page of a walk, from the
	// scanning goroutines (up to ParallelPipelines at once): it must be
	// safe for concurrent use and return quickly.
	Progress func(Progress)
}

// Progress is the state of a run after one page.
type Progress struct {
	Pipeline string
	Check    string
	// Rows read by the current check, and by the whole run.
	Rows, TotalRows int64
	// Fraction of the current check's range walked, -1 when unknown.
	Fraction float64
	// Found is the number of targets so far.
	Found   int64
	Elapsed time.Duration
}

// Target is one line of the targets file (`--out`, `-o jsonl`), the input
// of `opctl repair plan --from-file`: inspect.Target, the one definition
// of that line for its writer (here) and its reader (repair).
type Target = inspect.Target

// Result is one triaged candidate.
type Result struct {
	Target
	// Severity of the verdict, raised to "action" for a stuck target
	// whatever its verdict (docs/reconcile.md#targets): a Result is a
	// target when it is "action".
	Severity inspect.Severity `json:"severity"`
	// Seen is what the incident console lists beside the target (not
	// part of a targets line).
	Seen Seen `json:"-"`
}

// Seen is where a triaged candidate stands, as its report shows it.
type Seen struct {
	// UpdatedAt is the state row's updated_at and DBNow the database clock
	// of the triage (their difference is the operation's age); nil when
	// not read.
	UpdatedAt, DBNow *time.Time
	// Partition and Offset are the message's position; nil when unknown.
	Partition *int32
	Offset    *int64
	// Owner is the state row's owner ("" for none).
	Owner string
}

// IsTarget reports whether the candidate's verdict calls for action.
func (r Result) IsTarget() bool { return r.Severity == inspect.SeverityAction }

// Check statuses in a Summary.
const (
	StatusOK          = "ok"
	StatusSkipped     = "skipped"
	StatusRefused     = "refused"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
	StatusNotRun      = "not run"
)

// CheckStats is what one check did on one pipeline.
type CheckStats struct {
	Pipeline string `json:"pipeline"`
	Check    string `json:"check"`
	// Status is ok, skipped (does not apply, or needs Kafka), refused (would
	// need a full scan), failed, interrupted or "not run".
	Status string `json:"status"`
	// Reason says why a check was skipped, refused or failed.
	Reason string `json:"reason,omitempty"`
	// DDL adds the indexes a refused check needs.
	DDL []string `json:"ddl,omitempty"`
	// Notes are facts about the scan (how steps without a scan block were
	// covered, full scans allowed).
	Notes []string `json:"notes,omitempty"`
	// Uncovered are the steps the check could not reach, each "step: why"
	// (docs/reconcile.md#what-a-check-cannot-cover): an operation at fault
	// only there is not found by this check.
	Uncovered []string `json:"uncovered,omitempty"`
	// Rows read by the scan (walked index entries and looked-up keys).
	Rows int64 `json:"rows"`
	// Candidates triaged, and how many were targets.
	Candidates int64 `json:"candidates"`
	// CoverOnly counts the operations triaged only to cover the steps
	// without a scan block whose verdict was not the check's
	// (docs/reconcile.md#steps-without-a-scan-block): read, not reported.
	CoverOnly int64 `json:"cover_only,omitempty"`
	Targets   int64 `json:"targets"`
	// Verdicts counts the candidates' verdicts.
	Verdicts map[inspect.Code]int64 `json:"verdicts"`
	// Partial is true when some verdict was computed without a source.
	Partial bool    `json:"partial"`
	Seconds float64 `json:"seconds"`
}

// Interruption says how far an interrupted run got.
type Interruption struct {
	Pipeline string `json:"pipeline"`
	Check    string `json:"check"`
	// Rows read by that check before the interruption.
	Rows int64 `json:"rows"`
	// LastKey is the key of the last row read ("" before the first page).
	LastKey string `json:"last_key"`
}

// Summary is the outcome of a run.
type Summary struct {
	Checks      []CheckStats  `json:"checks"`
	Rows        int64         `json:"rows"`
	Candidates  int64         `json:"candidates"`
	Targets     int64         `json:"targets"`
	Partial     bool          `json:"partial"`
	PartialWhy  []string      `json:"partial_why,omitempty"`
	Refused     bool          `json:"refused"`
	Interrupted *Interruption `json:"interrupted,omitempty"`
	// Interruptions has one entry per pipeline an interrupt cut, in the
	// run's order (pipelines are scanned in parallel: each was at its own
	// check); Interrupted is the first.
	Interruptions []Interruption `json:"interruptions,omitempty"`
	// DBNow is the database clock the bounds were computed from.
	DBNow   time.Time `json:"db_now"`
	Seconds float64   `json:"seconds"`
	// Lag is each selected pipeline's consumer-group lag, as read at the
	// start of the run; a pipeline whose group could not be read has none.
	Lag []PipelineLag `json:"lag,omitempty"`
}

// PipelineLag is a pipeline's consumer group's total lag on its topic
// (inspect.GroupLag, docs/reconcile.md).
type PipelineLag struct {
	Pipeline string `json:"pipeline"`
	Topic    string `json:"topic"`
	Group    string `json:"group"`
	GroupLag int64  `json:"group_lag"`
}

// ExitCode is the exit status of a finished run (docs/exit-codes.md):
// partial (a source could not be read: verdicts may miss something) wins,
// then attention (targets found), then refused (a check would need a full
// scan and did not run; the targets of the others come first: a run that
// found some exits 3, its refusals still reported), else ok.
func (s *Summary) ExitCode() int {
	switch {
	case s.Partial:
		return sources.ExitPartial
	case s.Targets > 0:
		return sources.ExitAttention
	case s.Refused:
		return sources.ExitRefused
	}
	return sources.ExitOK
}

// errStop ends a walk when the run is interrupted.
var errStop = errors.New("reconcile: stopped")

// checkState is the live state of one (pipeline, check).
type checkState struct {
	p     *config.Pipeline
	check string

	rows       atomic.Int64
	candidates atomic.Int64
	coverOnly  atomic.Int64
	covered    int64 // keys the cover walk made candidates (scanner only)
	targets    atomic.Int64
	partial    atomic.Bool
	lastKey    atomic.Value // string

	// Written by the scanner only.
	status    string
	reason    string
	ddl       []string
	notes     []string
	uncovered []string
	// covering is set while the cover walk makes candidates, searching
	// while a binlog step's do (flush marks their batches).
	covering, searching bool
	start               time.Time
	dur                 time.Duration
	// seen dedupes candidate keys (bounded by the candidates, not the rows).
	seen map[string]bool
	// pending are candidates not yet sent to the triage (fewer than a batch).
	pending []string

	mu       sync.Mutex
	verdicts map[inspect.Code]int64
}

// uncover records that the check cannot reach step, and why.
func (cs *checkState) uncover(step, why string) {
	cs.uncovered = append(cs.uncovered, step+": "+why)
}

func (cs *checkState) last() string {
	s, _ := cs.lastKey.Load().(string)
	return s
}

// batch is candidates of one check, triaged together.
type batch struct {
	cs   *checkState
	keys []string
	// cover: the keys come from the walk that covers the steps without a
	// scan block: only a DUPLICATE_EFFECT among them is the check's.
	cover bool
	// search: the keys are triaged with the Kafka reader itself, which
	// searches each operation's message in the log (a binlog step's
	// candidates: the attribution needs the message).
	search bool
}

// run is one reconcile run.
type run struct {
	d    Deps
	o    Options
	qctx context.Context // queries: cancelled queryGrace after an interrupt, bounded per call
	stop context.Context // cancelled by an interrupt or a fatal error
	halt context.CancelFunc

	now   time.Time
	start time.Time
	col   *sources.Collector
	kafka *cachedKafka

	// stopped caches, per pipeline, the operations whose newest plan
	// stopped part-way (stoppedKeys).
	stoppedMu  sync.Mutex
	stoppedOps map[string][]string
	// ranges caches, by scan table, index and column, the optimizer's estimate of its rows in
	// the window (accessPath): duplicates and orphans read the same table
	// over the same window.
	rangesMu sync.Mutex
	ranges   map[string]rangeRows
	// shares are the finished duplicates sweeps that also did the orphans
	// check's read of a scan table, by that orphans check and table
	// (orphanShare).
	sharesMu sync.Mutex
	shares   map[*checkState]map[string]*orphanShare

	totalRows atomic.Int64
	found     atomic.Int64
	states    []*checkState
	batches   chan batch

	errMu sync.Mutex
	err   error

	// batchWhy says why o.Batch is below what the options asked.
	batchWhy string

	// causes are why verdicts were partial, by pipeline and source (a
	// Kafka cause by its text), for Summary.PartialWhy.
	causeMu sync.Mutex
	causes  map[string]*partialCause

	interrupted []Interruption
}

// partialCause is one reason verdicts of a pipeline were partial: the first
// operation it was seen on and how many were.
type partialCause struct {
	pipeline, source, bizID, detail string
	n                               int
}

// notePartial records why rep is partial: each source it could not read,
// and each step whose evidence could not be read (a report is partial for
// either, docs/verdicts.md#partial). A partial report always leaves a
// cause: without one it is recorded as such, so that a partial run never
// has an empty reason.
func (r *run) notePartial(rep inspect.Report) {
	r.causeMu.Lock()
	defer r.causeMu.Unlock()
	if r.causes == nil {
		r.causes = map[string]*partialCause{}
	}
	note := func(key, src, detail string) {
		if c, ok := r.causes[key]; ok {
			c.n++
			return
		}
		r.causes[key] = &partialCause{pipeline: rep.Pipeline, source: src, bizID: rep.BizID, detail: detail, n: 1}
	}
	found := false
	for _, src := range rep.Unread() {
		v := rep.Sources[src]
		key := rep.Pipeline + "\x00" + src
		if src == "kafka" {
			key = src + "\x00" + v // the same view error for every candidate
		}
		note(key, src, v)
		found = true
	}
	if !found {
		// A step read that failed without a source saying so.
		for _, st := range rep.Steps {
			if st.Error != "" {
				note(rep.Pipeline+"\x00step\x00"+st.Name, "step "+st.Name, "step "+st.Name+": "+st.Error)
				found = true
			}
		}
	}
	if !found {
		note(rep.Pipeline+"\x00?", "?", "the verdict "+string(rep.Verdict.Code)+" was computed without a source it needed")
	}
}

// noKafka reports whether the run has no Kafka (Collector.KafkaMissing says why).
func (r *run) noKafka() bool { return r.d.Collector.Kafka == nil }

func (r *run) fail(err error) {
	r.errMu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.errMu.Unlock()
	r.halt()
}

func (r *run) firstErr() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// Func is Run on deps already chosen (the clients of a configuration):
// what opctl reconcile, the runbook runner and the console take, opened on
// first use by whoever wires the clients.
type Func func(ctx context.Context, o Options, emit func(Result) error) (*Summary, error)

// Run performs the selected checks on the selected pipelines, calling emit
// for every triaged candidate (targets and the others, see Result.IsTarget)
// from one goroutine, as soon as its batch is triaged. Memory is bounded by
// the chunk size, the batch size, the concurrency and the number of
// candidates (kept to dedupe them), never by the size of the tables.
//
// When ctx is cancelled (Ctrl-C) the run stops issuing statements, lets the
// ones in flight finish for queryGrace, then cancels them (every statement
// is an autocommit read, so no transaction stays open; a server that
// stopped answering does not hold the interrupt for --timeout), and
// returns the Summary with Interrupted set, and ctx's error. An error from emit, or MySQL
// becoming unreachable, ends the run with that error.
func Run(ctx context.Context, d Deps, o Options, emit func(Result) error) (*Summary, error) {
	if d.DB == nil || d.Collector == nil {
		return nil, errors.New("reconcile: no database or no collector")
	}
	if err := o.normalize(); err != nil {
		return nil, err
	}
	r := &run{d: d, o: o, start: time.Now()}
	var qcancel context.CancelFunc
	r.qctx, qcancel = afterGrace(ctx, queryGrace)
	defer qcancel()
	r.stop, r.halt = context.WithCancel(ctx)
	defer r.halt()

	tctx, cancel := context.WithTimeout(r.qctx, o.Timeout)
	now, err := d.DB.Now(tctx)
	cancel()
	if err != nil {
		return nil, err
	}
	r.now = now
	if bl, ok := d.DB.(batchLimiter); ok {
		tctx, cancel := context.WithTimeout(r.qctx, o.Timeout)
		n, why := bl.BatchLimit(tctx)
		cancel()
		if n > 0 && n < r.o.Batch {
			r.o.Batch, r.batchWhy = n, why
		}
	}
	r.kafka = &cachedKafka{views: map[string]groupResult{}}
	col := *d.Collector
	r.col = &col
	if d.Collector.Kafka != nil {
		r.kafka.rr, _ = d.Collector.Kafka.(sources.RecordReader)
		r.col.Kafka = r.kafka
		r.readGroups()
	} else if r.col.KafkaMissing == "" {
		r.col.KafkaMissing = "not configured"
	}

	for _, p := range o.Pipelines {
		for _, c := range Checks() {
			if o.wants(c) {
				r.states = append(r.states, &checkState{p: p, check: c, status: StatusNotRun,
					seen: map[string]bool{}, verdicts: map[inspect.Code]int64{}})
			}
		}
	}

	r.batches = make(chan batch, o.Concurrency)
	results := make(chan Result, o.Batch)
	var workers sync.WaitGroup
	for range o.Concurrency {
		workers.Go(func() { r.triage(results) })
	}
	go func() {
		r.scan()
		close(r.batches)
		workers.Wait()
		close(results)
	}()

	var emitErr error
	for res := range results {
		if emitErr != nil {
			continue
		}
		if err := emit(res); err != nil {
			emitErr = err
			r.fail(fmt.Errorf("reconcile: writing results: %w", err))
		}
	}

	sum := r.summary()
	if err := r.firstErr(); err != nil {
		return sum, err
	}
	if sum.Interrupted != nil {
		if ctx.Err() != nil {
			return sum, ctx.Err()
		}
		return sum, context.Canceled
	}
	return sum, nil
}

func (o *Options) normalize() error {
	if len(o.Pipelines) == 0 {
		return errors.New("reconcile: no pipeline selected")
	}
	for _, c := range o.Checks {
		if !IsCheck(c) {
			return fmt.Errorf("reconcile: unknown check %q (checks: %s)", c, strings.Join(Checks(), ", "))
		}
	}
	if o.Since <= 0 {
		o.Since = DefaultSince
	}
	if o.OlderThan < 0 {
		return errors.New("reconcile: negative older-than")
	}
	if o.Chunk <= 0 {
		o.Chunk = DefaultChunk
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	o.Batch = min(o.Batch, sources.MaxBatch)
	if o.Timeout <= 0 {
		o.Timeout = sources.DefaultTimeout
	}
	if o.Rate < 0 {
		return errors.New("reconcile: negative rate")
	}
	switch o.Access {
	case "":
		o.Access = AccessAuto
	case AccessAuto, AccessSweep, AccessWalk, AccessRange:
	default:
		return fmt.Errorf("reconcile: unknown access path %q (want %s, %s, %s or %s)", o.Access, AccessAuto, AccessSweep, AccessWalk, AccessRange)
	}
	if o.Shards > 1 && (o.Shard < 0 || o.Shard >= o.Shards) {
		return fmt.Errorf("reconcile: shard %d/%d: want 0 <= shard < %d", o.Shard, o.Shards, o.Shards)
	}
	return nil
}

func (o *Options) wants(check string) bool {
	if len(o.Checks) == 0 {
		return true
	}
	for _, c := range o.Checks {
		if c == check {
			return true
		}
	}
	return false
}

// db is the read path of pipeline p (Deps.DBFor, else Deps.DB).
func (r *run) db(p *config.Pipeline) DB {
	if r.d.DBFor != nil {
		if db := r.d.DBFor(p); db != nil {
			return db
		}
	}
	return r.d.DB
}

// dbKey tells the read paths apart in caches keyed by table: "" for
// Deps.DB, else the pipeline's own.
func (r *run) dbKey(p *config.Pipeline) string {
	if r.d.DBFor != nil && r.d.DBFor(p) != nil {
		return fmt.Sprintf("%p", r.d.DBFor(p))
	}
	return ""
}

// stopped reports whether the run must stop issuing statements.
func (r *run) stopped() bool { return r.stop.Err() != nil }

// triage reads and diagnoses batches of candidates until the channel
// closes.
func (r *run) triage(out chan<- Result) {
	for b := range r.batches {
		if r.stopped() {
			continue // drain: nothing new starts after an interrupt
		}
		cs := b.cs
		keys := b.keys
		if b.cover {
			var err error
			if keys, err = r.prefilter(cs, keys); err != nil {
				r.fail(fmt.Errorf("reconcile: covering the steps without a scan block of %d operation(s) of pipeline %s (%q...): %w", len(b.keys), cs.p.Name, b.keys[0], err))
				continue
			}
			if len(keys) == 0 {
				continue
			}
		}
		col := r.col
		if b.search && r.d.Collector.Kafka != nil {
			col = r.d.Collector
		}
		reps, err := triage.Judge(r.qctx, col, cs.p, keys) // no timeline: a Result keeps none
		if err != nil {
			r.fail(fmt.Errorf("reconcile: triage of %d operation(s) of pipeline %s (%q...): %w", len(keys), cs.p.Name, keys[0], err))
			continue
		}
		for _, rep := range reps {
			if b.cover && rep.Verdict.Code != inspect.DuplicateEffect {
				// Reached only to count the unscanned steps' effects; its
				// other verdicts are the other checks' to report.
				cs.candidates.Add(-1)
				cs.coverOnly.Add(1)
				continue
			}
			res := resultOf(cs, rep)
			if cs.check == CheckStuck && r.stuckTarget(cs.p, rep) {
				res.Severity = inspect.SeverityAction
			}
			cs.mu.Lock()
			cs.verdicts[res.Verdict]++
			cs.mu.Unlock()
			if res.Partial {
				cs.partial.Store(true)
				r.notePartial(rep)
			}
			if res.IsTarget() {
				cs.targets.Add(1)
				r.found.Add(1)
			}
			out <- res
		}
	}
}

// prefilter keeps the cover candidates keys whose unscanned steps show an
// effect more than once, reading only those steps (their evidence and
// intent queries, one statement each for the batch, and their probes):
// the full triage then reads the few that remain
// (docs/reconcile.md#steps-without-a-scan-block). The others are counted
// CoverOnly.
func (r *run) prefilter(cs *checkState, keys []string) ([]string, error) {
	p := coverPipeline(cs.p)
	reps, err := triage.Judge(r.qctx, r.col, p, keys)
	if err != nil {
		return nil, err
	}
	var keep []string
	for i, rep := range reps {
		if slices.ContainsFunc(rep.Steps, func(v inspect.StepView) bool { return v.Status == inspect.StepDuplicated }) {
			keep = append(keep, keys[i])
			continue
		}
		cs.candidates.Add(-1)
		cs.coverOnly.Add(1)
	}
	return keep, nil
}

// coverPipeline is p reduced to what counts its unscanned steps' effects:
// the other steps read nothing, and there is no state, idempotency or
// entity read.
func coverPipeline(p *config.Pipeline) *config.Pipeline {
	c := *p
	c.State, c.Idempotency, c.Entity = nil, nil, nil
	unscanned := Unscanned(p)
	c.Steps = slices.Clone(p.Steps)
	for i := range c.Steps {
		s := &c.Steps[i]
		if !slices.Contains(unscanned, s.Name) {
			s.Evidence, s.Intent, s.Probe, s.Binlog, s.Scan = "", "", "", nil, nil
		}
	}
	return &c
}

// resultOf turns a report into a result: the step is set when the verdict's
// findings name exactly one step; the detail is the verdict's summary, with
// a note when the Kafka position is unknown because the state row stores
// none.
func resultOf(cs *checkState, rep inspect.Report) Result {
	res := Result{Target: Target{BizID: rep.BizID, Pipeline: rep.Pipeline, Check: cs.check,
		Verdict: rep.Verdict.Code, Detail: rep.Verdict.Summary, Partial: rep.Partial},
		Severity: rep.Verdict.Severity,
		Seen:     Seen{UpdatedAt: rep.State.UpdatedAt, DBNow: rep.DBNow, Partition: rep.Kafka.Partition, Offset: rep.Kafka.Offset, Owner: rep.State.Owner}}
	steps := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Code == rep.Verdict.Code && f.Step != "" {
			steps[f.Step] = true
		}
	}
	if len(steps) == 1 {
		for s := range steps {
			res.Step = s
		}
	}
	if rep.State.Found && rep.Kafka.Located == sources.LocatedUnknown && rep.Sources["kafka"] == sources.StatusOK {
		res.Detail += "; Kafka position unknown: the state row stores no partition/offset and reconcile does not search the log (opctl where does)"
	}
	return res
}

// summary assembles the Summary from the check states.
func (r *run) summary() *Summary {
	s := &Summary{DBNow: r.now, Interruptions: r.interrupted, Seconds: time.Since(r.start).Seconds()}
	if len(r.interrupted) > 0 {
		s.Interrupted = &r.interrupted[0]
	}
	for _, cs := range r.states {
		st := CheckStats{Pipeline: cs.p.Name, Check: cs.check, Status: cs.status, Reason: cs.reason,
			DDL: cs.ddl, Notes: cs.notes, Uncovered: cs.uncovered, Rows: cs.rows.Load(), Candidates: cs.candidates.Load(), CoverOnly: cs.coverOnly.Load(),
			Targets: cs.targets.Load(), Partial: cs.partial.Load(), Seconds: cs.dur.Seconds(),
			Verdicts: map[inspect.Code]int64{}}
		cs.mu.Lock()
		for k, v := range cs.verdicts {
			st.Verdicts[k] = v
		}
		cs.mu.Unlock()
		if r.batchWhy != "" && st.Candidates > int64(r.o.Batch) {
			st.Notes = append(slices.Clip(st.Notes), fmt.Sprintf("triaged in batches of %d: %s", r.o.Batch, r.batchWhy))
		}
		s.Rows += st.Rows
		s.Candidates += st.Candidates
		s.Targets += st.Targets
		if st.Partial {
			s.Partial = true
		}
		if st.Status == StatusRefused {
			s.Refused = true
		}
		s.Checks = append(s.Checks, st)
	}
	for _, p := range r.o.Pipelines {
		if g, ok := r.kafka.views[groupKey(p.Topic, p.Group)]; ok && g.err == nil && len(g.view.Partitions) > 0 {
			s.Lag = append(s.Lag, PipelineLag{Pipeline: p.Name, Topic: p.Topic, Group: p.Group, GroupLag: inspect.GroupLag(g.view)})
		}
	}
	why := map[string]bool{}
	for _, g := range r.kafka.views {
		if g.err != nil {
			why["kafka: "+g.err.Error()] = true
			s.Partial = true
		}
	}
	if r.noKafka() {
		why["kafka: "+r.col.KafkaMissing] = true
		s.Partial = true
	}
	r.causeMu.Lock()
	for _, c := range r.causes {
		if c.source == "kafka" {
			why["kafka: "+c.detail] = true
			continue
		}
		w := fmt.Sprintf("%s %s: %s", c.pipeline, c.bizID, c.detail)
		if c.n > 1 {
			w += fmt.Sprintf(" (and %d more operation(s))", c.n-1)
		}
		why[w] = true
	}
	r.causeMu.Unlock()
	for w := range why {
		s.PartialWhy = append(s.PartialWhy, w)
	}
	sort.Strings(s.PartialWhy)
	return s
}

// queryGrace is how long the statements in flight may go on after an
// interrupt: most finish, and the run says how far it got well within the
// second an interrupt may take (docs/exit-codes.md).
const queryGrace = 300 * time.Millisecond

// afterGrace returns a context that is not cancelled with ctx but grace
// after it; cancel releases it.
func afterGrace(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	q, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-q.Done():
		}
	})
	return q, func() { stop(); cancel() }
}
