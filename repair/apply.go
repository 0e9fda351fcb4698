package repair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Publisher sends one record to exactly topic/partition and returns where
// it was written, and looks a record up in a partition (sources/kafka.Reader
// implements it).
type Publisher interface {
	// Publish sends the record. A failure that may have written it is a
	// *sources.SendError with MayHaveSent (any other error counts as one).
	Publish(ctx context.Context, topic string, partition int32, key, value []byte, headers map[string]string) (int32, int64, error)
	// LogEnd is the partition's log end offset: a record sent after it was
	// read is at that offset or later.
	LogEnd(ctx context.Context, topic string, partition int32) (int64, error)
	// FindPublished looks for a record at offset from or later whose
	// headers hold every pair of match; an error when it cannot tell.
	FindPublished(ctx context.Context, topic string, partition int32, from int64, match map[string]string) (int64, bool, error)
}

// GroupReader reads a consumer group's members (sources/kafka.Reader).
type GroupReader interface {
	Group(ctx context.Context, topic, group string) (sources.GroupView, error)
}

// Collector reads one operation exactly as `opctl where` does
// (*sources.Collector): the stale check compares what a plan observed with
// a fresh read.
type Collector interface {
	Collect(ctx context.Context, p *config.Pipeline, bizID string) (sources.Evidence, error)
	// ReadActionColumn adds the idempotency action column's type to ev
	// when a plan may reopen a SKIPPED record (sources.Collector).
	ReadActionColumn(ctx context.Context, ev *sources.Evidence)
}

// Applier applies plans (docs/repair.md "Apply"): the tamper and config
// checks, the resume point from the audit, the stale check, then each
// remaining action in one transaction of the Store with its guards re-read
// under SELECT ... FOR UPDATE and its audit row. Apply writes; DryRun runs
// the same code against a store that rolls everything back and a publisher
// and poster that send nothing, chosen once at the start: the executor
// itself never asks which it is.
type Applier struct {
	// Config is the configuration the plan must match (its pipeline and
	// fingerprint).
	Config *config.Config
	// Store is the write path (mysql.write_dsn); the audit is read and
	// written there too.
	Store sources.Store
	// Collector is the read path of the stale check.
	Collector Collector
	// Publisher sends republished records; nil refuses a republish.
	Publisher Publisher
	// Group reads group membership for release_lease; nil refuses it.
	Group GroupReader
	// Partitions reads the redrive topic's partition count for the stale
	// check (nil: unknown, as when the plan was made without Kafka).
	Partitions PartitionCounter
	// Prober re-probes downstreams for the probe guards.
	Prober sources.Prober
	// Poster sends compensations.
	Poster sources.Poster
	// Operator is recorded in the audit rows (who applied).
	Operator string
	// Mirror, when set, receives every audit row written, as a JSON line
	// (config audit.file).
	Mirror *Mirror
	// Progress, when set, is called after each action.
	Progress func(ActionResult)
	// Timeout bounds each send and call of an action (--timeout; 0:
	// sources.DefaultTimeout) and the wait for the plan's lock. An action
	// in flight records it: a later apply knows when that send can no
	// longer take effect (docs/repair.md "Crash safety and resume").
	Timeout time.Duration
	// Lease is how long an action in flight stays this apply's without a
	// renewal; it is renewed every Lease/3 while the apply waits on Kafka
	// or a downstream (0: DefaultLease).
	Lease time.Duration
	// Owner names this apply in its actions in flight ("": the operator,
	// host, pid and a random suffix).
	Owner string
}

// DefaultLease is the lease of an action in flight (Applier.Lease).
const DefaultLease = 3 * time.Second

// Outcome is what happened to an action or a whole apply.
type Outcome string

// Outcomes of an action (ActionResult.Outcome; applied, publishing,
// published and compensating are also audit outcomes) and of an apply
// (Result.Outcome: applied, already_applied, would_apply, refused, failed).
const (
	OutcomeApplied      Outcome = sources.AuditApplied
	OutcomePublishing   Outcome = sources.AuditPublishing
	OutcomePublished    Outcome = sources.AuditPublished
	OutcomeCompensating Outcome = sources.AuditCompensating
	OutcomeRedriving    Outcome = sources.AuditRedriving
	OutcomeAlready      Outcome = "already"
	OutcomeWouldApply   Outcome = "would_apply"
	OutcomeRefused      Outcome = "refused"
	OutcomeFailed       Outcome = "failed"
	OutcomeNotRun       Outcome = "not_run"
	// OutcomeUnknown is an action whose send or call may have taken effect
	// and got no answer saying so (an unreachable Kafka, a downstream that
	// did not answer, an interrupt): its audit row stays in flight and the
	// next apply settles it before anything is sent again; for a Result,
	// an apply that stopped at such an action.
	OutcomeUnknown Outcome = "unknown"

	OutcomeAlreadyApplied Outcome = "already_applied"
)

// Outcomes of an attempt row (an apply that changed nothing).
const (
	AttemptDryRun      = "dry_run"
	AttemptGuardFailed = "guard_failed"
	AttemptStale       = "stale"
	AttemptError       = "error"
	// AttemptTampered: the plan's id, format or actions are not what opctl
	// makes (docs/repair.md "Integrity").
	AttemptTampered = "tampered"
	// AttemptInFlight: another apply holds the plan's lock, or an action
	// another apply left in flight may still take effect.
	AttemptInFlight = "in_flight"
	// AttemptUnknown: a send or call that may have taken effect got no
	// answer; its audit row stays in flight.
	AttemptUnknown = "unknown"
)

// Result is what an apply did.
type Result struct {
	PlanID   string `json:"plan_id"`
	BizID    string `json:"biz_id"`
	Pipeline string `json:"pipeline"`
	DryRun   bool   `json:"dry_run"`
	// Outcome is applied, already_applied, would_apply (dry run), refused or
	// failed.
	Outcome Outcome `json:"outcome"`
	Total   int     `json:"total"`
	// Applied counts the actions that took effect in this run (would take
	// effect, in a dry run); Previously those done by an earlier run.
	Applied    int            `json:"applied"`
	Previously int            `json:"previously"`
	Actions    []ActionResult `json:"actions"`
	// Stale lists what changed since the plan (a stale plan).
	Stale []plans.Change `json:"stale,omitempty"`
	// Concurrent names the other apply of the plan this one waited for
	// (the holder of the plan's lock when it was asked for): with
	// already_applied, that apply applied the plan.
	Concurrent string `json:"concurrent,omitempty"`
	// Refused says why the plan or an action was refused.
	Refused string `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
}

// ActionResult is one action's outcome.
type ActionResult struct {
	Index   int              `json:"index"`
	Type    plans.ActionType `json:"type"`
	Step    string           `json:"step,omitempty"`
	Summary string           `json:"summary"`
	Outcome Outcome          `json:"outcome"`
	// Statements are the SQL statements run with the rows each changed
	// (inside the rolled-back transaction, in a dry run).
	Statements []sources.Statement `json:"statements,omitempty"`
	// Published is where a republish was written (offset -1 in a dry run).
	Published *plans.Position `json:"published,omitempty"`
	Detail    string          `json:"detail,omitempty"`
	// Elapsed is the action's wall time.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// Apply applies plan. It returns the result and, when it stopped early, a
// *plans.RefusedError (exit 5: tampered, config changed, stale, a guard
// failed, a live lease; nothing after the refused action changed) or
// another error (exit 1). A plan all of whose actions took effect returns
// Outcome already_applied and changes nothing.
func (a *Applier) Apply(ctx context.Context, plan *plans.Plan) (*Result, error) {
	if a.Store == nil || a.Config == nil {
		return notRun(plan, false), errApplier
	}
	st, pub, post := failpoints(a.Store, a.Publisher, a.Poster)
	w := writePath{st: committing{st}, pub: pub, post: post, mirror: a.Mirror, attempts: a.Mirror}
	return execute(ctx, plan, a.settings(), a.reads(), w)
}

// DryRun runs plan exactly as Apply does, against a decorator of the store
// that keeps one transaction open for the whole apply (later actions'
// guards see what earlier ones would have written) and rolls it back at the
// end, a publisher and a poster that send nothing, and no audit mirror for
// actions; it needs no SAVEPOINT. The attempt is recorded as dry_run.
// Only a publisher or poster the Applier has is replaced by one that sends
// nothing: a plan the real apply could not send stops the dry run too,
// before any action (docs/repair.md "Dry run").
//
// The executor is given only what a dry run may use: the store as a
// dryBase (a transaction it never commits, the audit read, the attempt
// row, the plan's lock), noSend for the publisher and the poster (the
// Applier's are not passed on), and the probes and the group read ahead,
// before its one transaction takes its first lock: no lock is held across
// a call to a downstream.
func (a *Applier) DryRun(ctx context.Context, plan *plans.Plan) (*Result, error) {
	if a.Store == nil || a.Config == nil {
		return notRun(plan, true), errApplier
	}
	w := writePath{st: &dryStore{inner: a.Store}, dryRun: true, attempts: a.Mirror}
	if a.Publisher != nil {
		w.pub = &noSend{}
	}
	if a.Poster != nil {
		w.post = &noSend{}
	}
	return execute(ctx, plan, a.settings(), a.reads().ahead(), w)
}

// errApplier is an Applier without the configuration or the store.
var errApplier = errors.New("repair: Applier needs Config and Store")

// settings are the values an apply runs with (no client among them).
type settings struct {
	cfg      *config.Config
	operator string
	owner    string
	timeout  time.Duration
	lease    time.Duration
	progress func(ActionResult)
}

func (a *Applier) settings() settings {
	return settings{cfg: a.Config, operator: a.Operator, owner: a.Owner, timeout: a.timeout(), lease: a.lease(), progress: a.Progress}
}

// notRun is the result of a plan none of whose actions ran.
func notRun(plan *plans.Plan, dry bool) *Result {
	res := &Result{PlanID: plan.ID, BizID: plan.BizID, Pipeline: plan.Pipeline, Total: len(plan.Actions), DryRun: dry}
	for _, act := range plan.Actions {
		res.Actions = append(res.Actions, ActionResult{Index: act.Index, Type: act.Type, Step: act.Step, Summary: act.Summary, Outcome: OutcomeNotRun})
	}
	return res
}

// applyRun is the state of one apply: the executor. It holds what its mode
// allows (settings, reads, the write path), never the Applier.
type applyRun struct {
	settings
	rd       reads
	w        writePath
	plan     *plans.Plan
	p        *config.Pipeline
	audit    string
	attempts string
	res      *Result
	// auditErrs are failures to write the audit mirror after an action
	// took effect: returned with the result, never dropped.
	auditErrs []error
	// planBody is the plan's JSON, kept in every audit row (afterImage).
	planBody []byte
	// fresh is the read of the stale check: a binlog step's guards read its
	// changes there (the binlog cannot be read under FOR UPDATE).
	fresh *sources.Evidence
	// lock is the plan's lock, held for the whole apply.
	lock sources.Lock
}

func execute(ctx context.Context, plan *plans.Plan, s settings, rd reads, w writePath) (*Result, error) {
	res := notRun(plan, w.dryRun)
	defer w.st.close()
	s.operator = operatorOf(s.operator, plan.Operator)
	if s.owner == "" {
		s.owner = newOwner(s.operator)
	}
	x := &applyRun{settings: s, rd: rd, w: w, plan: plan, audit: s.cfg.Audit.AuditTable(), attempts: s.cfg.Audit.AttemptTable(), res: res}
	if err := plan.Verify(); err != nil {
		return x.stop(ctx, err, AttemptTampered, nil)
	}
	x.p = s.cfg.Pipeline(plan.Pipeline)
	if x.p == nil {
		return x.stop(ctx, &plans.RefusedError{Code: plans.CodeConfigChanged, Detail: fmt.Sprintf("the plan is for pipeline %q, which is not in the configuration (%s)", plan.Pipeline, strings.Join(s.cfg.PipelineNames(), ", "))}, AttemptStale, nil)
	}
	if fp := plans.ConfigFingerprint(x.p, x.audit); fp != plan.ConfigFingerprint {
		return x.stop(ctx, &plans.RefusedError{Code: plans.CodeConfigChanged, Detail: fmt.Sprintf("pipeline %s's configuration changed since the plan was made (fingerprint %.12s, plan %.12s): make a new plan", plan.Pipeline, fp, plan.ConfigFingerprint)}, AttemptStale, nil)
	}
	if err := plans.Rederive(s.cfg, plan); err != nil {
		return x.stop(ctx, err, AttemptTampered, nil)
	}
	// One apply of a plan at a time, across processes and machines: the
	// plan's lock, held until the apply returns (docs/repair.md "One apply
	// at a time"). A write server that refuses writes is said first: apply
	// would fail on its first write, unable to record why.
	if err := x.writable(ctx); err != nil {
		return x.fail(err)
	}
	lk, err := w.st.Lock(ctx, planLock(plan.ID), s.timeout)
	if err != nil {
		var held *sources.LockHeldError
		if errors.As(err, &held) {
			held.What = "plan " + plan.Short() + " (being applied)"
			return x.stop(ctx, &plans.RefusedError{Code: plans.CodeInFlight, Detail: held.Error()}, AttemptInFlight, nil)
		}
		return x.fail(err)
	}
	defer lk.Release()
	x.lock = lk
	res.Concurrent = lk.Contended()
	done, err := x.readDone(ctx)
	if err != nil {
		var rf *plans.RefusedError
		if errors.As(err, &rf) {
			return x.stop(ctx, err, AttemptError, nil)
		}
		return x.fail(err)
	}
	if x.markDone(done) == len(plan.Actions) {
		res.Outcome = OutcomeAlreadyApplied
		return res, nil
	}
	// Before any action runs: an action that needs a sender this apply has
	// not would fail only after the earlier actions committed.
	for i, act := range plan.Actions {
		if res.Actions[i].Outcome == OutcomeAlready {
			continue
		}
		if err := x.w.missingSender(act); err != nil {
			return x.stopAt(ctx, act, err)
		}
	}
	if len(done) == 0 {
		if stop, err := x.stale(ctx); stop || err != nil {
			return res, err
		}
	}
	// What the actions read outside the database is read before the
	// transaction that locks what they guard (docs/repair.md "Dry run").
	if err := x.readAhead(ctx); err != nil {
		return x.fail(err)
	}
	for i, act := range plan.Actions {
		if res.Actions[i].Outcome == OutcomeAlready {
			continue
		}
		if err := x.lockHeld(); err != nil {
			return x.stopAt(ctx, act, err)
		}
		if err := x.action(ctx, act, done[act.Index], &res.Actions[i]); err != nil {
			return x.stopAt(ctx, act, err)
		}
	}
	res.Outcome = w.st.took(OutcomeApplied)
	if err := w.st.end(ctx, x); err != nil {
		return x.fail(err)
	}
	return res, errors.Join(x.auditErrs...)
}

// planLock is the name of a plan's lock (at most sources.MaxLockName
// bytes): 53 hex digits of its id tell plans apart as well as 64.
func planLock(id string) string {
	const prefix = "opctl-plan-"
	if n := sources.MaxLockName - len(prefix); len(id) > n {
		id = id[:n]
	}
	return prefix + id
}

// timeout is the bound of each send and call (Applier.Timeout).
func (a *Applier) timeout() time.Duration {
	if a.Timeout > 0 {
		return a.Timeout
	}
	return sources.DefaultTimeout
}

// lease is the lease of an action in flight (Applier.Lease).
func (a *Applier) lease() time.Duration {
	if a.Lease > 0 {
		return a.Lease
	}
	return DefaultLease
}

// writable fails when the write server refuses writes (a replica:
// read_only, super_read_only or innodb_read_only ON). The attempt cannot be
// recorded there; it goes to the audit mirror when one is set.
func (x *applyRun) writable(ctx context.Context) error {
	on, err := x.w.st.ReadOnly(ctx)
	if err != nil || len(on) == 0 {
		return err
	}
	for i, v := range on {
		on[i] = "@@" + v + "=ON"
	}
	err = fmt.Errorf("mysql.write_dsn's server is read-only (%s): nothing was applied, and the attempt cannot be recorded there; point mysql.write_dsn at the primary (opctl doctor checks it)", strings.Join(on, ", "))
	detail, _ := json.Marshal(map[string]any{"error": err.Error(), "result": OutcomeFailed})
	if merr := x.w.attempts.Attempt(x.attempts, x.w.st.attempt(sources.Attempt{PlanID: x.plan.ID, BizID: x.plan.BizID, Operator: x.operator, Outcome: AttemptError, Detail: detail})); merr != nil {
		return errors.Join(err, merr)
	}
	return err
}

// errLockLost stops an apply whose plan lock can no longer be trusted.
var errLockLost = errors.New("the plan's lock was lost (the MySQL connection holding it failed): stopped before the next action; apply the plan again")

// lockHeld is errLockLost once the plan's lock was lost.
func (x *applyRun) lockHeld() error {
	if x.lock == nil {
		return nil
	}
	select {
	case <-x.lock.Lost():
		return errLockLost
	default:
		return nil
	}
}

// operatorOf is who applies: the --operator, else the plan's author, else
// "unknown". The store clips it to the audit column (sources.MaxOperator).
func operatorOf(applier, author string) string {
	op := applier
	if op == "" {
		op = author
	}
	if op == "" {
		op = "unknown"
	}
	return op
}

// markDone marks the actions the audit shows as taken effect and returns
// how many there are.
func (x *applyRun) markDone(done map[int]sources.AuditDone) int {
	n := 0
	for i, act := range x.plan.Actions {
		switch Outcome(done[act.Index].Outcome) {
		case OutcomeApplied, OutcomePublished:
			n++
			x.res.Actions[i].Outcome = OutcomeAlready
		}
	}
	x.res.Previously = n
	return n
}

// stale compares what the plan observed with a fresh read: a plan whose
// operation changed is refused with the diff. stop is true when the apply
// ended.
func (x *applyRun) stale(ctx context.Context) (stop bool, err error) {
	if x.rd.collector == nil {
		_, err := x.fail(errors.New("repair: Applier needs a Collector for the stale check"))
		return true, err
	}
	ev, err := x.rd.collector.Collect(ctx, x.p, x.plan.BizID)
	if err != nil {
		_, err := x.fail(err)
		return true, err
	}
	x.fresh = &ev
	parts := redrivePartitions(ctx, x.rd.partitions, x.p, ev)
	x.rd.collector.ReadActionColumn(ctx, &ev)
	now := plans.Observe(inspect.Diagnose(ev), &ev, parts)
	kafka, was := ev.Sources["kafka"], x.plan.Observed.Sources["kafka"]
	if kafka != sources.StatusOK && was == sources.StatusOK {
		// Kafka answered the plan and does not answer now: what it would
		// say cannot be compared, and that is not a change of the
		// operation. What MySQL says still is.
		if diff := plans.Diff(x.plan.Observed, withKafkaOf(now, x.plan.Observed)); len(diff) == 0 {
			err := &sources.SendError{Source: "Kafka", Unreachable: true,
				Err: fmt.Errorf("the plan was made with Kafka's answer and Kafka cannot be read now (%s): nothing was applied; apply the plan again when Kafka answers", kafka)}
			_, err2 := x.stop(ctx, err, AttemptError, map[string]any{"code": "kafka_unreachable"})
			return true, err2
		}
	}
	diff := plans.Diff(x.plan.Observed, now)
	if len(diff) == 0 {
		return false, nil
	}
	x.res.Stale = diff
	_, err = x.stop(ctx, &plans.RefusedError{Code: plans.CodeStale, Diff: diff}, AttemptStale, map[string]any{"diff": diff})
	return true, err
}

// withKafkaOf is now with what Kafka said (and what follows from it: the
// verdict, the redelivery, the owner's membership) taken from was: the
// observation as it would be if Kafka had answered as it did for the
// plan.
func withKafkaOf(now, was plans.Observed) plans.Observed {
	now.Verdict, now.Redelivery, now.Kafka = was.Verdict, was.Redelivery, was.Kafka
	now.State.OwnerMember = was.State.OwnerMember
	src := make(map[string]string, len(now.Sources))
	for k, v := range now.Sources {
		src[k] = v
	}
	src["kafka"] = was.Sources["kafka"]
	now.Sources = src
	return now
}

// action runs one action and records its outcome in ar.
func (x *applyRun) action(ctx context.Context, act plans.Action, prior sources.AuditDone, ar *ActionResult) error {
	start := time.Now()
	err := x.run(ctx, act, prior, ar)
	ar.Elapsed = time.Since(start)
	if err != nil {
		err = refusalOf(act, err)
		ar.Outcome = OutcomeFailed
		var rf *plans.RefusedError
		var unknown *unknownError
		switch {
		case errors.As(err, &rf):
			ar.Outcome = OutcomeRefused
		case errors.As(err, &unknown):
			ar.Outcome = OutcomeUnknown
		}
		ar.Detail = err.Error()
	} else if ar.Outcome == OutcomeAlready {
		// Another apply of the plan recorded it first.
		x.res.Previously++
	} else {
		ar.Outcome = x.w.st.took(ar.Outcome)
		x.res.Applied++
	}
	if x.progress != nil {
		x.progress(*ar)
	}
	return err
}

// fail ends the apply with an error (exit 1).
func (x *applyRun) fail(err error) (*Result, error) {
	x.res.Outcome = OutcomeFailed
	x.res.Error = err.Error()
	return x.res, err
}

// stop ends the apply before any action ran, recording the attempt.
func (x *applyRun) stop(ctx context.Context, err error, outcome string, detail map[string]any) (*Result, error) {
	if detail == nil {
		detail = map[string]any{}
	}
	detail["error"] = err.Error()
	x.settle(err, detail)
	return x.res, errors.Join(err, x.record(ctx, 0, outcome, detail))
}

// settle sets the result's outcome for an apply that stopped with err.
func (x *applyRun) settle(err error, detail map[string]any) {
	var rf *plans.RefusedError
	if errors.As(err, &rf) {
		detail["code"] = rf.Code
		x.res.Outcome = OutcomeRefused
		x.res.Refused = rf.Error()
		return
	}
	var unknown *unknownError
	if errors.As(err, &unknown) {
		detail["code"] = AttemptUnknown
		x.res.Outcome = OutcomeUnknown
		x.res.Error = err.Error()
		return
	}
	x.res.Outcome = OutcomeFailed
	x.res.Error = err.Error()
}

// stopAt ends the apply at a failed action, recording the attempt.
func (x *applyRun) stopAt(ctx context.Context, act plans.Action, err error) (*Result, error) {
	outcome := AttemptError
	detail := map[string]any{"action": act.Index, "type": act.Type, "error": err.Error()}
	x.settle(err, detail)
	var rf *plans.RefusedError
	var unknown *unknownError
	switch {
	case errors.As(err, &rf) && (rf.Code == plans.CodeGuardFailed || rf.Code == plans.CodeLiveLease) && rf.Guard != nil:
		outcome = AttemptGuardFailed
		detail["guard"] = rf.Guard.String()
		detail["got"] = rf.Got
	case errors.As(err, &rf) && rf.Code == plans.CodeInFlight:
		outcome = AttemptInFlight
	case errors.As(err, &unknown):
		outcome = AttemptUnknown
	}
	return x.res, errors.Join(err, x.record(ctx, act.Index, outcome, detail))
}

// record writes an attempt row. Not with the caller's context: an
// interrupted apply still records why it stopped. An error is returned,
// never dropped.
func (x *applyRun) record(ctx context.Context, index int, outcome string, detail map[string]any) error {
	detail["result"] = x.res.Outcome
	runLabels(detail, x.plan)
	if x.plan.Incident != "" {
		detail["incident"] = x.plan.Incident
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("record the attempt: %w", err)
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	at := x.w.st.attempt(sources.Attempt{PlanID: x.plan.ID, ActionIndex: index, BizID: x.plan.BizID, Operator: x.operator, Outcome: outcome, Detail: b})
	if err := x.w.st.RecordAttempt(cctx, x.attempts, at); err != nil {
		return fmt.Errorf("the attempt could not be recorded in %s: %w", x.attempts, err)
	}
	return x.w.attempts.Attempt(x.attempts, at)
}

// refusalOf turns a guard that failed into the *plans.RefusedError of its
// action.
func refusalOf(act plans.Action, err error) error {
	var gf *guardFailure
	if errors.As(err, &gf) {
		code := plans.CodeGuardFailed
		if gf.guard.Check == plans.CheckLease {
			code = plans.CodeLiveLease
		}
		g := gf.guard
		return &plans.RefusedError{Code: code, Action: act.Index, Guard: &g, Got: gf.got, Detail: gf.detail}
	}
	var rf *plans.RefusedError
	if errors.As(err, &rf) && rf.Action == 0 {
		rf.Action = act.Index
	}
	return err
}

// readDone reads the audit row of each action of the plan already
// recorded (a crash, or another apply), by action index.
func (x *applyRun) readDone(ctx context.Context) (map[int]sources.AuditDone, error) {
	rows, err := x.w.st.AuditDone(ctx, x.audit, x.plan.ID)
	if err != nil {
		return nil, err
	}
	done := map[int]sources.AuditDone{}
	for _, r := range rows {
		if r.BizID != x.plan.BizID || r.Pipeline != x.plan.Pipeline {
			return nil, &plans.RefusedError{Code: plans.CodeTampered, Detail: fmt.Sprintf("the audit has plan %s recorded for %s/%s, not %s/%s", x.plan.Short(), r.Pipeline, r.BizID, x.plan.Pipeline, x.plan.BizID)}
		}
		done[r.ActionIndex] = r
	}
	return done, nil
}

// run applies one action. prior is its audit row from an earlier apply
// (zero: none; publishing or compensating when an apply stopped during its
// send or call).
func (x *applyRun) run(ctx context.Context, act plans.Action, prior sources.AuditDone, ar *ActionResult) error {
	switch act.Type {
	case plans.Republish:
		return x.effect(ctx, x.republish(act), prior, ar)
	case plans.CompensateRemote:
		e, err := x.compensate(act)
		if err != nil {
			return err
		}
		return x.effect(ctx, e, prior, ar)
	case plans.Redrive:
		e, err := x.redrive(act)
		if err != nil {
			return err
		}
		return x.effect(ctx, e, prior, ar)
	case plans.AdvanceState, plans.RewindState, plans.ReleaseLease, plans.Reverse, plans.FlipSkipped, plans.Manual, plans.RestoreRecord:
		if prior.Outcome != "" {
			return fmt.Errorf("action %d has audit outcome %q, not applied", act.Index, prior.Outcome)
		}
		return x.sqlAction(ctx, act, OutcomeApplied, ar, x.perform)
	}
	return fmt.Errorf("action %d: unknown type %q", act.Index, act.Type)
}

// performFunc does an action's writes inside its transaction, after its
// guards held, and returns the before and after images of its audit row.
type performFunc func(g *guardEnv, act plans.Action, ar *ActionResult) (before, after map[string]any, err error)

// sqlAction runs one transaction: the action's guards under FOR UPDATE, its
// writes and its audit row with outcome. ar.Outcome is set to outcome, or
// to already when another apply of the plan recorded the action first.
func (x *applyRun) sqlAction(ctx context.Context, act plans.Action, outcome Outcome, ar *ActionResult, perform performFunc) error {
	pre, err := x.preRead(ctx, act)
	if err != nil {
		return err
	}
	var entry sources.AuditEntry
	err = x.w.st.Do(withAction(ctx, act.Index), func(tx sources.Tx) error {
		ar.Statements = nil
		g := newGuardEnv(ctx, tx, x, pre)
		for _, gd := range act.Guards {
			if err := g.check(act, gd); err != nil {
				return err
			}
		}
		before, after, err := perform(g, act, ar)
		if err != nil {
			return err
		}
		entry, err = x.entry(act, outcome, before, after)
		if err != nil {
			return err
		}
		return tx.InsertAudit(ctx, x.audit, entry)
	})
	var exists *sources.AuditExistsError
	switch {
	case errors.As(err, &exists):
		ar.Outcome = OutcomeAlready
		ar.Detail = "applied concurrently by another apply of the same plan"
		return nil
	case err != nil:
		return err
	}
	ar.Outcome = outcome
	x.mirrorAction(entry)
	return nil
}

// entry is the audit row of an action.
func (x *applyRun) entry(act plans.Action, outcome Outcome, before, after map[string]any) (sources.AuditEntry, error) {
	bi, err := json.Marshal(before)
	if err != nil {
		return sources.AuditEntry{}, err
	}
	ai, err := x.afterImage(after)
	if err != nil {
		return sources.AuditEntry{}, err
	}
	return sources.AuditEntry{PlanID: x.plan.ID, ActionIndex: act.Index, BizID: x.plan.BizID, Pipeline: x.plan.Pipeline,
		Action: string(act.Type), Operator: x.operator, Reason: x.plan.Reason, Outcome: string(outcome), Before: bi, After: ai}, nil
}

// afterImage is an audit row's after_image: the action's own facts, and
// the plan itself with its number of actions, so that every audit row of a
// plan holds it: a plan that stopped part-way is told from one that
// finished (REPAIR_INCOMPLETE), and `opctl repair apply PLAN_ID` finishes
// it without the operator's file (docs/repair.md "Finishing a plan").
func (x *applyRun) afterImage(after map[string]any) ([]byte, error) {
	if x.planBody == nil {
		b, err := json.Marshal(x.plan)
		if err != nil {
			return nil, err
		}
		x.planBody = b
	}
	img := make(map[string]any, len(after)+2)
	for k, v := range after {
		img[k] = v
	}
	img["plan_actions"] = len(x.plan.Actions)
	img["plan"] = json.RawMessage(x.planBody)
	runLabels(img, x.plan)
	if x.plan.Incident != "" {
		img["incident"] = x.plan.Incident
	}
	return json.Marshal(img)
}

// runLabels adds the runbook run that made the plan, when one did, to an
// audit row's after_image or an attempt's detail (docs/runbooks.md "Run
// records").
func runLabels(m map[string]any, p *plans.Plan) {
	if p.Runbook != "" {
		m["runbook"] = p.Runbook
	}
	if p.RunID != "" {
		m["run_id"] = p.RunID
	}
}

// mirrorAction writes an audit row that took effect to the mirror; a
// failure is kept and returned with the result.
func (x *applyRun) mirrorAction(e sources.AuditEntry) {
	if err := x.w.mirror.Action(x.audit, e); err != nil {
		x.auditErrs = append(x.auditErrs, err)
	}
}

// perform does the writes of the SQL action types.
func (x *applyRun) perform(g *guardEnv, act plans.Action, ar *ActionResult) (map[string]any, map[string]any, error) {
	before := map[string]any{}
	after := map[string]any{}
	if act.Step != "" {
		after["step"] = act.Step
	}
	if len(act.Attested) > 0 {
		after["attested"] = act.Attested
	}
	var err error
	switch act.Type {
	case plans.AdvanceState, plans.RewindState, plans.ReleaseLease:
		err = x.writeState(g, act, ar, before, after)
	case plans.Reverse:
		err = x.reverse(g, act, ar, before, after)
	case plans.FlipSkipped:
		err = x.flip(g, act, ar, before, after)
	case plans.Manual:
		err = x.manual(g, act, before, after)
	case plans.RestoreRecord:
		err = x.restore(g, act, ar, before, after)
	default:
		err = fmt.Errorf("perform: %s is not an SQL action", act.Type)
	}
	if err != nil {
		return nil, nil, err
	}
	return before, after, nil
}

// writeState writes the state row under the CAS on what the guards read.
func (x *applyRun) writeState(g *guardEnv, act plans.Action, ar *ActionResult, before, after map[string]any) error {
	cur, err := g.state()
	if err != nil {
		return err
	}
	before["state"] = cur.image()
	sc := act.State
	sw := sources.StateWrite{Insert: sc.Insert, Status: sc.ToStatus, Version: cur.version, FromStatus: cur.status,
		MsgID: sc.MsgID, Partition: sc.Partition, Offset: sc.Offset}
	img := map[string]any{}
	switch {
	case sc.Insert:
		img["status"] = sc.ToStatus
		if x.p.State.Version != "" {
			img["version"] = 1
		}
	case act.Type == plans.ReleaseLease:
		sw.Release, sw.Owner = true, sc.ReleaseOwner
		img["owner"] = nil
	default:
		img["status"] = sc.ToStatus
	}
	if !sc.Insert && x.p.State.Version != "" && cur.version != nil {
		img["version"] = *cur.version + 1
	}
	stmt, err := g.tx.WriteState(g.ctx, x.p, x.plan.BizID, sw)
	if err != nil {
		return fmt.Errorf("%s: %w", act.Type, err)
	}
	ar.Statements = append(ar.Statements, stmt)
	if stmt.Rows != 1 {
		return &guardFailure{guard: plans.Guard{Check: plans.CheckStateVersion, Op: "==", Value: plans.PtrString(sc.FromVersion)}, got: fmt.Sprintf("the CAS changed %d rows", stmt.Rows)}
	}
	after["state"] = img
	return nil
}

// reverse runs the step's reverse statements, bound from the evidence row
// re-read under FOR UPDATE; a statement that changes no row refuses the
// action (and the transaction is rolled back: nothing changed).
func (x *applyRun) reverse(g *guardEnv, act plans.Action, ar *ActionResult, before, after map[string]any) error {
	lr, err := g.evidence(act.Step)
	if err != nil {
		return err
	}
	i := lr.find(act.Reverse.Identity)
	if i < 0 || !lr.live[i] {
		return &guardFailure{guard: plans.Guard{Check: plans.CheckEvidenceRow, Step: act.Step, Key: act.Reverse.Identity, Op: "live"}, got: "row gone or reversed"}
	}
	before["evidence"] = plans.ImageOf(lr.rows.Row(i))
	for k, stmt := range act.Reverse.Statements {
		res, err := g.tx.Reverse(g.ctx, stmt, x.plan.BizID, lr.rows, i)
		if err != nil {
			return fmt.Errorf("reverse statement %d (%s): %w", k+1, res.SQL, err)
		}
		ar.Statements = append(ar.Statements, res)
		if res.Rows == 0 {
			return &plans.RefusedError{Code: plans.CodeGuardFailed, Action: act.Index, Detail: fmt.Sprintf("reverse statement %d changed no row: %s (nothing was changed)", k+1, res.SQL)}
		}
	}
	after["reversed_id"] = act.Reverse.Identity
	after["statements"] = ar.Statements
	return nil
}

// flip sets the skipped idempotency record to PENDING under a CAS.
func (x *applyRun) flip(g *guardEnv, act plans.Action, ar *ActionResult, before, after map[string]any) error {
	f := act.Flip
	before["idempotency"] = map[string]any{"key": f.Key, "action": f.From}
	if f.Delete {
		// The record goes: its whole row is kept in the audit, so that it
		// can be put back (docs/repair.md#reopening-a-skipped-record).
		row, found, err := g.tx.LockRecord(g.ctx, x.p, f.Key, x.plan.BizID)
		if err != nil {
			return err
		}
		if !found {
			return &guardFailure{guard: plans.Guard{Check: plans.CheckIdemAction, Key: f.Key, Op: "==", Value: f.From}, got: "no such record"}
		}
		img := map[string]any{}
		for _, fl := range plans.ImageOf(row) {
			if fl.Value == nil {
				img[fl.Name] = nil
			} else {
				img[fl.Name] = *fl.Value
			}
		}
		before["idempotency"] = map[string]any{"key": f.Key, "action": f.From, "row": img, "columns": row.Columns}
	}
	stmt, err := g.tx.FlipIdempotency(g.ctx, x.p, f.Key, x.plan.BizID, f.From, f.To)
	if err != nil {
		return fmt.Errorf("flip %s: %w", f.Key, err)
	}
	ar.Statements = append(ar.Statements, stmt)
	if stmt.Rows != 1 {
		return &guardFailure{guard: plans.Guard{Check: plans.CheckIdemAction, Key: f.Key, Op: "==", Value: f.From}, got: fmt.Sprintf("the CAS changed %d rows", stmt.Rows)}
	}
	if f.Delete {
		// The after image holds the row too: `where` reads after images,
		// and a restore_record is planned from it.
		after["idempotency"] = map[string]any{"key": f.Key, "deleted": true, "columns": before["idempotency"].(map[string]any)["columns"],
			"row": before["idempotency"].(map[string]any)["row"]}
		return nil
	}
	after["idempotency"] = map[string]any{"key": f.Key, "action": f.To}
	return nil
}

// restore puts back an idempotency record a flip_skipped deleted, as its
// audit image holds it (its absence was a guard).
func (x *applyRun) restore(g *guardEnv, act plans.Action, ar *ActionResult, before, after map[string]any) error {
	rs := act.Restore
	cols := make([]string, len(rs.Row))
	vals := make([]*string, len(rs.Row))
	for i, f := range rs.Row {
		cols[i], vals[i] = f.Name, f.Value
	}
	before["idempotency"] = map[string]any{"key": rs.Key, "absent": true}
	stmt, err := g.tx.InsertRecord(g.ctx, x.p, cols, vals)
	if err != nil {
		return fmt.Errorf("restore %s: %w", rs.Key, err)
	}
	ar.Statements = append(ar.Statements, stmt)
	if stmt.Rows != 1 {
		return fmt.Errorf("restore %s: the INSERT changed %d rows", rs.Key, stmt.Rows)
	}
	after["idempotency"] = map[string]any{"key": rs.Key, "restored": true}
	return nil
}

// manual records what the operator attests, with the step's intents as
// read.
func (x *applyRun) manual(g *guardEnv, act plans.Action, before, after map[string]any) error {
	after["attest"] = act.Manual.Attest
	after["instructions"] = act.Manual.Instructions
	k := x.p.StepIndex(act.Step)
	if k < 0 || x.p.Steps[k].Intent == "" {
		return nil
	}
	ints, err := g.intents(act.Step)
	if err != nil {
		return err
	}
	var list []map[string]any
	for _, in := range ints {
		list = append(list, map[string]any{"request_id": in.RequestID, "acked": in.AckedAt != nil})
	}
	before["intents"] = list
	return nil
}

// stateImage is the before_image of an action that does not write the
// state row: the row as its guards read it.
func (x *applyRun) stateImage(g *guardEnv) (map[string]any, error) {
	before := map[string]any{}
	if x.p.State == nil {
		return before, nil
	}
	st, err := g.state()
	if err != nil {
		return nil, err
	}
	before["state"] = st.image()
	return before, nil
}

// finish moves an action's audit row from one outcome to the next
// (publishing → published, compensating → applied).
func (x *applyRun) finish(ctx context.Context, act plans.Action, from, to Outcome, after map[string]any) error {
	img, err := x.afterImage(after)
	if err != nil {
		return err
	}
	err = x.w.st.Do(ctx, func(tx sources.Tx) error {
		return tx.SetAuditOutcome(ctx, x.audit, x.plan.ID, act.Index, string(from), string(to), img)
	})
	if err != nil {
		return err
	}
	x.mirrorAction(sources.AuditEntry{PlanID: x.plan.ID, ActionIndex: act.Index, BizID: x.plan.BizID, Pipeline: x.plan.Pipeline,
		Action: string(act.Type), Operator: x.operator, Reason: x.plan.Reason, Outcome: string(to), After: img})
	return nil
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// actionKey is the context key of the action index an apply is at.
type actionKey struct{}

// withAction tags ctx with the index of the action whose transaction,
// send or call it carries (the test-only failpoints read it).
func withAction(ctx context.Context, index int) context.Context {
	return context.WithValue(ctx, actionKey{}, index)
}

// actionOf is the action index of ctx, 0 when none.
func actionOf(ctx context.Context) int {
	n, _ := ctx.Value(actionKey{}).(int)
	return n
}
