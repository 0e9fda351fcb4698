package repair

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
	"github.com/opctl-dev/opctl/sources/probe"
)

// Publisher sends one record to exactly topic/partition and returns where
// it was written (sources/kafka.Reader implements it).
type Publisher interface {
	Publish(ctx context.Context, topic string, partition int32, key, value []byte, headers map[string]string) (int32, int64, error)
}

// GroupReader reads a consumer group's members (sources.Kafka).
type GroupReader interface {
	Group(ctx context.Context, topic, group string) (sources.GroupView, error)
}

// Poster posts a compensation (sources/probe.Client implements it).
type Poster interface {
	Post(ctx context.Context, url string, body []byte, headers map[string]string) probe.PostResult
}

// FailpointEnv is the environment variable the opctl command reads into
// Applier.Failpoint. TEST ONLY: it makes `opctl repair apply` kill itself
// at one point of one action, to prove that applying the same plan again
// reaches exactly the state of an uninterrupted apply.
const FailpointEnv = "OPCTL_TEST_FAILPOINT"

// Failpoints (TEST ONLY), each followed by ":<action index>":
// before-commit, after-commit (any SQL action, republish and
// compensate_remote included: their first transaction), before-publish,
// after-publish (a republish's send), before-call, after-call (a
// compensate_remote's POST).
var Failpoints = []string{"before-commit", "after-commit", "before-publish", "after-publish", "before-call", "after-call"}

// Applier applies plans (SPEC §7 "Apply rules"). Build one per apply; it is
// not safe for concurrent use.
type Applier struct {
	// Config is the configuration the plan must match (its pipeline and
	// fingerprint).
	Config *config.Config
	// DB is the write path (mysql.write_dsn). The audit is read and written
	// there too.
	DB *sql.DB
	// Collector is the read path used for the stale check.
	Collector *sources.Collector
	// Kafka publishes republished records; nil refuses a republish.
	Kafka Publisher
	// Group reads group membership for release_lease; nil refuses it.
	Group GroupReader
	// Prober re-probes downstreams for probe guards.
	Prober sources.Prober
	// Poster sends compensations.
	Poster Poster
	// Operator is recorded in the audit rows (who applied).
	Operator string
	// DryRun runs every SQL action in one transaction rolled back at the end
	// and sends nothing (no record, no HTTP POST). It is enforced here, by
	// the executor, not by the caller's printing code.
	DryRun bool
	// Mirror, when set, receives every audit row written, as a JSON line
	// (config audit.file).
	Mirror io.Writer
	// Progress, when set, is called after each action.
	Progress func(ActionResult)
	// Failpoint and Crash are TEST ONLY (FailpointEnv): when the apply
	// reaches Failpoint ("after-commit:2"), Crash is called; the command
	// makes it kill the process (SIGKILL: no deferred cleanup).
	Failpoint string
	Crash     func(point string)
	// Retries bounds the re-runs of a transaction the server rolled back for
	// a deadlock or a lock wait timeout (default 5).
	Retries int
}

// Result is what an apply did.
type Result struct {
	PlanID   string `json:"plan_id"`
	BizID    string `json:"biz_id"`
	Pipeline string `json:"pipeline"`
	DryRun   bool   `json:"dry_run"`
	// Outcome is applied, already_applied, would_apply (dry run), refused or
	// failed.
	Outcome string `json:"outcome"`
	Total   int    `json:"total"`
	// Applied counts the actions that took effect in this run (would take
	// effect, in a dry run); Previously those done by an earlier run.
	Applied    int            `json:"applied"`
	Previously int            `json:"previously"`
	Actions    []ActionResult `json:"actions"`
	// Stale lists what changed since the plan (a stale plan).
	Stale []Change `json:"stale,omitempty"`
	// Refused says why the plan or an action was refused.
	Refused string `json:"refused,omitempty"`
	Error   string `json:"error,omitempty"`
}

// Action outcomes of an ActionResult.
const (
	OutcomeApplied    = "applied"
	OutcomePublishing = "publishing"
	OutcomePublished  = "published"
	// OutcomeCompensating is a compensate_remote's audit row while its POST
	// is under way (an opctl addition to SPEC §7's outcomes).
	OutcomeCompensating = "compensating"
	OutcomeAlready      = "already"
	OutcomeWouldApply   = "would_apply"
	OutcomeRefused      = "refused"
	OutcomeFailed       = "failed"
	OutcomeNotRun       = "not_run"
)

// ActionResult is one action's outcome.
type ActionResult struct {
	Index   int    `json:"index"`
	Type    string `json:"type"`
	Step    string `json:"step,omitempty"`
	Summary string `json:"summary"`
	Outcome string `json:"outcome"`
	// Statements are the SQL statements run with the rows each affected
	// (inside the rolled-back transaction, in a dry run).
	Statements []StatementResult `json:"statements,omitempty"`
	// Published is where a republish was written (partition -1 offset -1
	// in a dry run).
	Published *Position `json:"published,omitempty"`
	Detail    string    `json:"detail,omitempty"`
	// Elapsed is the action's wall time.
	Elapsed time.Duration `json:"elapsed_ns"`
}

// StatementResult is one statement and the rows it affected.
type StatementResult struct {
	SQL  string `json:"sql"`
	Rows int64  `json:"rows"`
}

// applyRun is the state of one Apply call.
type applyRun struct {
	a          *Applier
	plan       *Plan
	p          *config.Pipeline
	auditTable string
	attempts   string
	st         store
	pub        Publisher
	post       Poster
	res        *Result
	operator   string
}

// Apply applies plan: the tamper check, the config check, the resume
// point from the audit, the stale check (when nothing was applied yet),
// then each remaining action. It returns the result and, when it stopped
// early, a *RefusedError (exit 5: tampered, config changed, stale, a guard
// failed, a live lease; nothing after the refused action changed) or
// another error (exit 1). A plan all of whose actions took effect returns
// Outcome already_applied and changes nothing.
func (a *Applier) Apply(ctx context.Context, plan *Plan) (*Result, error) {
	res := &Result{PlanID: plan.ID, BizID: plan.BizID, Pipeline: plan.Pipeline, DryRun: a.DryRun, Total: len(plan.Actions)}
	for _, act := range plan.Actions {
		res.Actions = append(res.Actions, ActionResult{Index: act.Index, Type: act.Type, Step: act.Step, Summary: act.Summary, Outcome: OutcomeNotRun})
	}
	if a.DB == nil || a.Config == nil {
		return res, errors.New("repair: Applier needs Config and DB")
	}
	x := &applyRun{a: a, plan: plan, auditTable: a.Config.Audit.AuditTable(), attempts: a.Config.Audit.AttemptTable(), res: res}
	x.operator = a.Operator
	if x.operator == "" {
		x.operator = plan.Operator
	}
	if x.operator == "" {
		x.operator = "unknown"
	}
	if len(x.operator) > MaxOperator {
		x.operator = x.operator[:MaxOperator]
	}
	if err := plan.Verify(); err != nil {
		return x.stop(ctx, err, "error", nil)
	}
	x.p = a.Config.Pipeline(plan.Pipeline)
	if x.p == nil {
		return x.stop(ctx, &RefusedError{Code: CodeConfigChanged, Detail: fmt.Sprintf("the plan is for pipeline %q, which is not in the configuration (%s)", plan.Pipeline, strings.Join(a.Config.PipelineNames(), ", "))}, "stale", nil)
	}
	if fp := ConfigFingerprint(x.p, x.auditTable); fp != plan.ConfigFingerprint {
		return x.stop(ctx, &RefusedError{Code: CodeConfigChanged, Detail: fmt.Sprintf("pipeline %s's configuration changed since the plan was made (fingerprint %s, plan %s): make a new plan", plan.Pipeline, short(fp), short(plan.ConfigFingerprint))}, "stale", nil)
	}

	done, err := a.readDone(ctx, x)
	if err != nil {
		return x.fail(err)
	}
	complete := 0
	for i, act := range plan.Actions {
		switch done[act.Index] {
		case OutcomeApplied, OutcomePublished:
			complete++
			res.Actions[i].Outcome = OutcomeAlready
		}
	}
	res.Previously = complete
	if complete == len(plan.Actions) {
		res.Outcome = "already_applied"
		return res, nil
	}

	if len(done) == 0 {
		if a.Collector == nil {
			return x.fail(errors.New("repair: Applier needs a Collector for the stale check"))
		}
		ev, err := a.Collector.Collect(ctx, x.p, plan.BizID)
		if err != nil {
			return x.fail(err)
		}
		now := Observe(inspect.Diagnose(ev))
		if diff := Diff(plan.Observed, now); len(diff) > 0 {
			res.Stale = diff
			return x.stop(ctx, &RefusedError{Code: CodeStale, Diff: diff}, "stale", map[string]any{"diff": diff})
		}
	}

	if a.DryRun {
		x.st = &dryStore{db: a.DB}
		x.pub = dryPublisher{}
		x.post = dryPoster{}
	} else {
		x.st = &realStore{db: a.DB, a: a}
		x.pub = a.Kafka
		x.post = a.Poster
	}
	defer x.st.close()

	for i, act := range plan.Actions {
		if res.Actions[i].Outcome == OutcomeAlready {
			continue
		}
		start := time.Now()
		ar := &res.Actions[i]
		err := x.run(ctx, act, done[act.Index], ar)
		ar.Elapsed = time.Since(start)
		if err != nil {
			err = refusalOf(act, err)
			if ar.Outcome == OutcomeNotRun {
				ar.Outcome = OutcomeFailed
			}
			var rf *RefusedError
			if errors.As(err, &rf) {
				ar.Outcome = OutcomeRefused
				ar.Detail = rf.Error()
			} else {
				ar.Detail = err.Error()
			}
			if a.Progress != nil {
				a.Progress(*ar)
			}
			return x.stopAt(ctx, act, err)
		}
		switch {
		case ar.Outcome == OutcomeAlready: // another apply of the plan recorded it first
			res.Previously++
		case a.DryRun:
			ar.Outcome = OutcomeWouldApply
			res.Applied++
		default:
			res.Applied++
		}
		if a.Progress != nil {
			a.Progress(*ar)
		}
	}
	if a.DryRun {
		res.Outcome = "would_apply"
		x.recordAttempt(ctx, 0, "dry_run", map[string]any{"result": res.Outcome, "actions": res.Actions})
	} else {
		res.Outcome = "applied"
	}
	return res, nil
}

// fail ends the apply with an error (exit 1).
func (x *applyRun) fail(err error) (*Result, error) {
	x.res.Outcome = "failed"
	x.res.Error = err.Error()
	return x.res, err
}

// stop ends the apply before any action ran, recording the attempt.
func (x *applyRun) stop(ctx context.Context, err error, outcome string, detail map[string]any) (*Result, error) {
	if detail == nil {
		detail = map[string]any{}
	}
	detail["error"] = err.Error()
	var rf *RefusedError
	if errors.As(err, &rf) {
		detail["code"] = rf.Code
		x.res.Outcome = "refused"
		x.res.Refused = rf.Error()
	} else {
		x.res.Outcome = "failed"
		x.res.Error = err.Error()
	}
	if x.a.DryRun {
		detail["result"] = x.res.Outcome
		outcome = "dry_run"
	}
	x.recordAttempt(ctx, 0, outcome, detail)
	return x.res, err
}

// refusalOf turns a guard that failed into the *RefusedError of its action.
func refusalOf(act Action, err error) error {
	var gf *guardFailure
	if errors.As(err, &gf) {
		code := CodeGuardFailed
		if gf.guard.Check == CheckLease {
			code = CodeLiveLease
		}
		g := gf.guard
		return &RefusedError{Code: code, Action: act.Index, Guard: &g, Got: gf.got, Detail: gf.detail}
	}
	var rf *RefusedError
	if errors.As(err, &rf) && rf.Action == 0 {
		rf.Action = act.Index
	}
	return err
}

// stopAt ends the apply at a failed action, recording the attempt.
func (x *applyRun) stopAt(ctx context.Context, act Action, err error) (*Result, error) {
	outcome := "error"
	detail := map[string]any{"action": act.Index, "type": act.Type, "error": err.Error()}
	var rf *RefusedError
	if errors.As(err, &rf) {
		x.res.Outcome = "refused"
		x.res.Refused = rf.Error()
		detail["code"] = rf.Code
		if rf.Code == CodeGuardFailed || rf.Code == CodeLiveLease {
			outcome = "guard_failed"
			detail["guard"] = rf.Guard.String()
			detail["got"] = rf.Got
		}
	} else {
		x.res.Outcome = "failed"
		x.res.Error = err.Error()
	}
	if x.a.DryRun {
		detail["result"] = x.res.Outcome
		outcome = "dry_run"
	}
	x.recordAttempt(ctx, act.Index, outcome, detail)
	return x.res, err
}

// run applies one action. prior is its audit outcome from an earlier run
// ("" none; publishing or compensating when a crash interrupted it).
func (x *applyRun) run(ctx context.Context, act Action, prior string, ar *ActionResult) error {
	switch act.Type {
	case Republish:
		return x.republish(ctx, act, prior, ar)
	case CompensateRemote:
		return x.compensate(ctx, act, prior, ar)
	case AdvanceState, RewindState, ReleaseLease, Reverse, FlipSkipped, Manual:
		if prior != "" {
			return fmt.Errorf("action %d has audit outcome %q, not applied", act.Index, prior)
		}
		return x.sqlAction(ctx, act, OutcomeApplied, ar, x.perform)
	}
	return fmt.Errorf("action %d: unknown type %q", act.Index, act.Type)
}

// performFunc does an action's writes inside its transaction, after the
// guards held, and returns the before and after images of the audit row.
type performFunc func(g *guardEnv, act Action, ar *ActionResult) (before, after map[string]any, err error)

// errConcurrent means another apply of the same plan recorded the action
// first (the audit's UNIQUE (plan_id, action_index)).
var errConcurrent = errors.New("applied concurrently by another apply of the same plan")

// sqlAction runs one transaction: the action's guards under FOR UPDATE,
// its writes, its audit row with outcome. A deadlock or lock wait timeout
// re-runs the whole transaction (the server rolled it back).
func (x *applyRun) sqlAction(ctx context.Context, act Action, outcome string, ar *ActionResult, perform performFunc) error {
	pre, err := x.preRead(ctx, act)
	if err != nil {
		return err
	}
	retries := x.a.Retries
	if retries <= 0 {
		retries = 5
	}
	for attempt := 0; ; attempt++ {
		ar.Statements = nil
		var before, after map[string]any
		err = x.st.tx(ctx, act.Index, func(tx *sql.Tx) error {
			g := newGuardEnv(ctx, tx, x, pre)
			for _, gd := range act.Guards {
				if err := g.check(act, gd); err != nil {
					return err
				}
			}
			var err error
			before, after, err = perform(g, act, ar)
			if err != nil {
				return err
			}
			return x.insertAudit(ctx, tx, act, outcome, before, after)
		})
		if err == nil {
			if !x.st.dry() {
				x.mirror(act, outcome, before, after)
			}
			if ar.Outcome == OutcomeNotRun {
				ar.Outcome = outcome
			}
			return nil
		}
		if errors.Is(err, errConcurrent) {
			ar.Outcome = OutcomeAlready
			ar.Detail = errConcurrent.Error()
			return nil
		}
		if mysqlsrc.IsRetryable(err) && !x.st.dry() && attempt < retries {
			time.Sleep(time.Duration(attempt+1) * 5 * time.Millisecond)
			continue
		}
		return err
	}
}

// preRead reads what the action's guards need from outside the database.
func (x *applyRun) preRead(ctx context.Context, act Action) (*preRead, error) {
	pre := &preRead{probeCount: map[string]*int{}, probeOutcome: map[string]string{}, probeStatus: map[string]string{}, member: map[string]bool{}}
	for _, g := range act.Guards {
		switch g.Check {
		case CheckProbeCount, CheckProbeOutcome:
			k := x.p.StepIndex(g.Step)
			if k < 0 || x.p.Steps[k].Probe == "" {
				return nil, fmt.Errorf("guard %s: step %s has no probe", g, g.Step)
			}
			if x.a.Prober == nil {
				return nil, fmt.Errorf("guard %s: no prober", g)
			}
			s := x.p.Steps[k]
			url := sources.Expand(s.Probe, map[string]string{"biz_id": x.plan.BizID, "request_id": g.Key}, true)
			r := x.a.Prober.Probe(ctx, url, s.ProbeApplied, s.ProbeAbsent)
			if g.Check == CheckProbeCount {
				pre.probeCount[g.Step] = r.Count
			} else {
				pre.probeOutcome[g.Step+"\x00"+g.Key] = r.Outcome
				pre.probeStatus[g.Step+"\x00"+g.Key] = r.Status
			}
		case CheckOwnerMember:
			if x.a.Group == nil {
				pre.memberErr = errors.New("Kafka is not configured")
				continue
			}
			gv, err := x.a.Group.Group(ctx, x.p.Topic, x.p.Group)
			if err != nil {
				pre.memberErr = err
				continue
			}
			pre.member[g.Key] = IsMember(gv, g.Key)
		}
	}
	return pre, nil
}

// perform does the writes of the SQL action types.
func (x *applyRun) perform(g *guardEnv, act Action, ar *ActionResult) (map[string]any, map[string]any, error) {
	before := map[string]any{}
	after := map[string]any{}
	if act.Step != "" {
		after["step"] = act.Step
	}
	if len(act.Attested) > 0 {
		after["attested"] = act.Attested
	}
	switch act.Type {
	case AdvanceState, RewindState, ReleaseLease:
		st, err := g.state()
		if err != nil {
			return nil, nil, err
		}
		before["state"] = st.image()
		img, err := x.writeState(g, act, ar)
		if err != nil {
			return nil, nil, err
		}
		after["state"] = img
	case Reverse:
		lr, err := g.evidence(act.Step)
		if err != nil {
			return nil, nil, err
		}
		i := lr.find(act.Reverse.Identity)
		if i < 0 || !lr.live[i] {
			return nil, nil, &guardFailure{guard: Guard{Check: CheckEvidenceRow, Step: act.Step, Key: act.Reverse.Identity, Op: "live"}, got: "row gone or reversed"}
		}
		before["evidence"] = lr.imageOf(i)
		for k, stmt := range act.Reverse.Statements {
			text, args, err := x.bindReverse(stmt, lr, i)
			if err != nil {
				return nil, nil, fmt.Errorf("reverse statement %d: %w", k+1, err)
			}
			r, err := g.tx.ExecContext(g.ctx, text, args...)
			if err != nil {
				return nil, nil, fmt.Errorf("reverse statement %d (%s): %w", k+1, oneLine(stmt), err)
			}
			n, _ := r.RowsAffected()
			ar.Statements = append(ar.Statements, StatementResult{SQL: oneLine(stmt), Rows: n})
			if n == 0 {
				return nil, nil, &RefusedError{Code: CodeGuardFailed, Action: act.Index, Detail: fmt.Sprintf("reverse statement %d changed no row: %s (nothing was changed)", k+1, oneLine(stmt))}
			}
		}
		after["reversed_id"] = act.Reverse.Identity
		after["statements"] = ar.Statements
	case FlipSkipped:
		f := act.Flip
		id := x.p.Idempotency
		q := config.QuoteIdent
		before["idempotency"] = map[string]any{"key": f.Key, "action": f.From}
		text := fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s = ? AND %s = ? AND %s = ?", q(id.Table), q(id.Action), q(id.Key), q(id.BizID), q(id.Action))
		r, err := g.tx.ExecContext(g.ctx, text, f.To, f.Key, x.plan.BizID, f.From)
		if err != nil {
			return nil, nil, fmt.Errorf("flip %s: %w", f.Key, err)
		}
		n, _ := r.RowsAffected()
		ar.Statements = append(ar.Statements, StatementResult{SQL: text, Rows: n})
		if n != 1 {
			return nil, nil, &guardFailure{guard: Guard{Check: CheckIdemAction, Key: f.Key, Op: "==", Value: f.From}, got: fmt.Sprintf("the CAS changed %d rows", n)}
		}
		after["idempotency"] = map[string]any{"key": f.Key, "action": f.To}
	case Manual:
		after["attest"] = act.Manual.Attest
		after["instructions"] = act.Manual.Instructions
		if k := x.p.StepIndex(act.Step); k >= 0 && x.p.Steps[k].Intent != "" {
			ints, err := g.intents(act.Step)
			if err != nil {
				return nil, nil, err
			}
			var list []map[string]any
			for _, in := range ints {
				list = append(list, map[string]any{"request_id": in.requestID, "acked": in.acked})
			}
			before["intents"] = list
		}
	default:
		return nil, nil, fmt.Errorf("perform: %s is not an SQL action", act.Type)
	}
	return before, after, nil
}

// writeState runs a state row write under the CAS on what the guards read.
func (x *applyRun) writeState(g *guardEnv, act Action, ar *ActionResult) (map[string]any, error) {
	st := x.p.State
	sc := act.State
	q := config.QuoteIdent
	var (
		text string
		args []any
	)
	img := map[string]any{}
	switch {
	case sc.Insert:
		cols := []string{q(st.Key), q(st.Status)}
		vals := []string{"?", "?"}
		args = []any{x.plan.BizID, sc.ToStatus}
		add := func(col, val string, arg ...any) {
			if col != "" {
				cols = append(cols, q(col))
				vals = append(vals, val)
				args = append(args, arg...)
			}
		}
		if st.Version != "" {
			add(st.Version, "1")
			img["version"] = 1
		}
		if sc.MsgID != "" {
			add(st.MsgID, "?", sc.MsgID)
		}
		if sc.Partition != nil && sc.Offset != nil {
			add(st.Partition, "?", *sc.Partition)
			add(st.Offset, "?", *sc.Offset)
		}
		add(st.CreatedAt, "NOW(3)")
		add(st.UpdatedAt, "NOW(3)")
		text = fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", q(st.Table), strings.Join(cols, ", "), strings.Join(vals, ", "))
		img["status"] = sc.ToStatus
	default:
		sets := []string{}
		if act.Type == ReleaseLease {
			sets = append(sets, q(st.Owner)+" = NULL")
			if st.LeaseUntil != "" {
				sets = append(sets, q(st.LeaseUntil)+" = NULL")
			}
			img["owner"] = nil
		} else {
			sets = append(sets, q(st.Status)+" = ?")
			args = append(args, sc.ToStatus)
			img["status"] = sc.ToStatus
		}
		if st.Version != "" {
			sets = append(sets, fmt.Sprintf("%s = %s + 1", q(st.Version), q(st.Version)))
		}
		if st.UpdatedAt != "" {
			sets = append(sets, q(st.UpdatedAt)+" = NOW(3)")
		}
		where := q(st.Key) + " = ?"
		args = append(args, x.plan.BizID)
		cur, _ := g.state()
		if st.Version != "" && cur.version != nil {
			where += " AND " + q(st.Version) + " = ?"
			args = append(args, *cur.version)
			img["version"] = *cur.version + 1
		} else {
			where += " AND " + q(st.Status) + " = ?"
			args = append(args, cur.status)
		}
		if act.Type == ReleaseLease {
			where += " AND " + q(st.Owner) + " = ?"
			args = append(args, sc.ReleaseOwner)
		}
		text = fmt.Sprintf("UPDATE %s SET %s WHERE %s", q(st.Table), strings.Join(sets, ", "), where)
	}
	r, err := g.tx.ExecContext(g.ctx, text, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", act.Type, err)
	}
	n, _ := r.RowsAffected()
	ar.Statements = append(ar.Statements, StatementResult{SQL: text, Rows: n})
	if n != 1 {
		return nil, &guardFailure{guard: Guard{Check: CheckStateVersion, Op: "==", Value: ptrStr(sc.FromVersion)}, got: fmt.Sprintf("the CAS changed %d rows", n)}
	}
	return img, nil
}

// bindReverse binds a reverse statement's :params from evidence row i
// (read under FOR UPDATE) and :biz_id. DECIMAL values are bound through
// CAST(? AS DECIMAL(65,30)) so that -:delta and balance - :delta stay
// exact.
func (x *applyRun) bindReverse(stmt string, lr *lockedRows, i int) (string, []any, error) {
	var args []any
	var missing []string
	text, _, err := bindNamed(stmt, func(name string) string {
		if name == "biz_id" {
			args = append(args, x.plan.BizID)
			return "?"
		}
		for j, c := range lr.cols {
			if c == name {
				v := lr.rows[i][j]
				if s, ok := v.(string); ok && lr.types[j] == "DECIMAL" {
					args = append(args, s)
					return "CAST(? AS DECIMAL(65,30))"
				}
				args = append(args, v)
				return "?"
			}
		}
		missing = append(missing, name)
		args = append(args, nil)
		return "?"
	})
	if err != nil {
		return "", nil, err
	}
	if len(missing) > 0 {
		return "", nil, fmt.Errorf("the evidence row has no column %s", strings.Join(missing, ", "))
	}
	return text, args, nil
}

// republish: a 'publishing' audit row (with the guards) before the send,
// 'published' with the written position after it. A crash in between
// re-sends on the next apply (consumers dedupe by opctl-plan + msg_id).
func (x *applyRun) republish(ctx context.Context, act Action, prior string, ar *ActionResult) error {
	spec := act.Publish
	if x.pub == nil {
		return errors.New("republish: Kafka is not configured (kafka.brokers)")
	}
	headers := make(map[string]string, len(spec.Headers)+1)
	for k, v := range spec.Headers {
		headers[k] = v
	}
	headers[HeaderPlan] = x.plan.ID
	switch prior {
	case "":
		err := x.sqlAction(ctx, act, OutcomePublishing, ar, func(g *guardEnv, act Action, _ *ActionResult) (map[string]any, map[string]any, error) {
			before := map[string]any{}
			if x.p.State != nil {
				st, err := g.state()
				if err != nil {
					return nil, nil, err
				}
				before["state"] = st.image()
			}
			after := map[string]any{"step": act.Step, "topic": spec.Topic, "partition": spec.Partition, "headers": headers, "copy": spec.Copy}
			return before, after, nil
		})
		if err != nil {
			return err
		}
		if ar.Outcome == OutcomeAlready {
			return nil
		}
	case OutcomePublishing:
		ar.Detail = "re-sent: an earlier apply stopped between the send and its record"
	default:
		return fmt.Errorf("action %d has audit outcome %q", act.Index, prior)
	}
	x.a.failpoint("before-publish", act.Index)
	part, off, err := x.pub.Publish(ctx, spec.Topic, spec.Partition, spec.Key, spec.Value, headers)
	if err != nil {
		return fmt.Errorf("republish: %w (the audit row stays 'publishing': apply the plan again to send it)", err)
	}
	x.a.failpoint("after-publish", act.Index)
	after := map[string]any{"step": act.Step, "topic": spec.Topic, "partition": part, "offset": off, "headers": headers, "copy": spec.Copy,
		"key": bytesText(spec.Key)}
	if spec.FromStep != "" {
		after["from_step"] = spec.FromStep
	}
	if spec.ForceEffect != "" {
		after["force_effect"] = spec.ForceEffect
	}
	if err := x.finish(ctx, act, OutcomePublishing, OutcomePublished, after); err != nil {
		return err
	}
	ar.Outcome = OutcomePublished
	ar.Published = &Position{Topic: spec.Topic, Partition: part, Offset: off}
	return nil
}

// finish moves an action's audit row from one outcome to the next
// (publishing → published, compensating → applied).
func (x *applyRun) finish(ctx context.Context, act Action, from, to string, after map[string]any) error {
	img, err := json.Marshal(after)
	if err != nil {
		return err
	}
	text := "UPDATE " + config.QuoteIdent(x.auditTable) + " SET outcome = ?, after_image = ?, updated_at = NOW(6) WHERE plan_id = ? AND action_index = ? AND outcome = ?"
	for attempt := 0; ; attempt++ {
		err = x.st.tx(ctx, 0, func(tx *sql.Tx) error {
			r, err := tx.ExecContext(ctx, text, to, string(img), x.plan.ID, act.Index, from)
			if err != nil {
				return err
			}
			if n, _ := r.RowsAffected(); n != 1 {
				return fmt.Errorf("audit row of action %d is no longer %q", act.Index, from)
			}
			return nil
		})
		if err != nil && mysqlsrc.IsRetryable(err) && !x.st.dry() && attempt < 5 {
			continue
		}
		break
	}
	if err == nil && !x.st.dry() {
		x.mirror(act, to, nil, after)
	}
	return err
}

// compensate: a 'compensating' audit row (with the guards) before the POST,
// 'applied' after a 2xx answer. A crash in between is settled on the next
// apply by the probe (did the effect count drop?), never by a second blind
// POST.
func (x *applyRun) compensate(ctx context.Context, act Action, prior string, ar *ActionResult) error {
	spec := act.Compensate
	k := x.p.StepIndex(act.Step)
	if k < 0 || x.p.Steps[k].Compensate == "" {
		return fmt.Errorf("compensate_remote: step %s has no compensate URL in the configuration", act.Step)
	}
	s := x.p.Steps[k]
	if x.post == nil {
		return errors.New("compensate_remote: no HTTP client")
	}
	url := sources.Expand(s.Compensate, map[string]string{"request_id": spec.RequestID, "biz_id": x.plan.BizID}, true)
	after := map[string]any{"step": act.Step, "url": spec.URL}
	if spec.RequestID != "" {
		after["request_id"] = spec.RequestID
	}
	if len(act.Attested) > 0 {
		after["attested"] = act.Attested
	}
	switch prior {
	case "":
		err := x.sqlAction(ctx, act, OutcomeCompensating, ar, func(g *guardEnv, act Action, _ *ActionResult) (map[string]any, map[string]any, error) {
			before := map[string]any{}
			if x.p.State != nil {
				st, err := g.state()
				if err != nil {
					return nil, nil, err
				}
				before["state"] = st.image()
			}
			if spec.ProbeCount != nil {
				before["probe_count"] = *spec.ProbeCount
			}
			return before, after, nil
		})
		if err != nil {
			return err
		}
		if ar.Outcome == OutcomeAlready {
			return nil
		}
	case OutcomeCompensating:
		took, err := x.compensationTookEffect(ctx, act, s)
		if err != nil {
			return err
		}
		if took {
			ar.Detail = "an earlier apply's POST took effect (the probe says so): recorded, not sent again"
			if err := x.finish(ctx, act, OutcomeCompensating, OutcomeApplied, after); err != nil {
				return err
			}
			ar.Outcome = OutcomeApplied
			return nil
		}
		ar.Detail = "re-sent: the probe says an earlier apply's POST did not take effect"
	default:
		return fmt.Errorf("action %d has audit outcome %q", act.Index, prior)
	}
	body, _ := json.Marshal(map[string]any{"plan_id": x.plan.ID, "action_index": act.Index, "biz_id": x.plan.BizID, "step": act.Step, "request_id": spec.RequestID})
	x.a.failpoint("before-call", act.Index)
	pr := x.post.Post(ctx, url, body, map[string]string{"Idempotency-Key": fmt.Sprintf("%s:%d", x.plan.ID, act.Index)})
	x.a.failpoint("after-call", act.Index)
	after["http_status"] = pr.Status
	switch {
	case x.st.dry():
	case !pr.Answered:
		return fmt.Errorf("compensate_remote: POST %s: %s; its outcome is unknown: the audit row stays 'compensating', and applying the plan again asks the probe before any second POST", pr.URL, pr.Detail)
	case !pr.OK():
		// The downstream refused: nothing took effect. Remove the row that
		// announced the call and record the attempt.
		_ = x.st.tx(ctx, 0, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "DELETE FROM "+config.QuoteIdent(x.auditTable)+" WHERE plan_id = ? AND action_index = ? AND outcome = ?", x.plan.ID, act.Index, OutcomeCompensating)
			return err
		})
		return fmt.Errorf("compensate_remote: POST %s answered %s: %s", pr.URL, pr.Detail, clip(pr.Body))
	}
	if err := x.finish(ctx, act, OutcomeCompensating, OutcomeApplied, after); err != nil {
		return err
	}
	ar.Outcome = OutcomeApplied
	return nil
}

// compensationTookEffect asks the probe whether an interrupted compensation
// took effect. Without a conclusive probe it refuses.
func (x *applyRun) compensationTookEffect(ctx context.Context, act Action, s config.Step) (bool, error) {
	spec := act.Compensate
	unknown := &RefusedError{Code: CodeUnknownOutcome, Action: act.Index, Detail: fmt.Sprintf("an earlier apply stopped during the compensation POST of step %s and no probe can tell whether it took effect: check the downstream, then record the outcome with a manual plan", act.Step)}
	if s.Probe == "" || x.a.Prober == nil {
		return false, unknown
	}
	url := sources.Expand(s.Probe, map[string]string{"biz_id": x.plan.BizID, "request_id": spec.RequestID}, true)
	r := x.a.Prober.Probe(ctx, url, s.ProbeApplied, s.ProbeAbsent)
	switch {
	case spec.ProbeCount != nil && r.Count != nil && *r.Count == *spec.ProbeCount-1:
		return true, nil
	case spec.ProbeCount != nil && r.Count != nil && *r.Count == *spec.ProbeCount:
		return false, nil
	case spec.ProbeCount == nil && spec.RequestID != "" && r.Outcome == sources.ProbeApplied:
		return false, nil
	case spec.ProbeCount == nil && spec.RequestID != "" && (r.Outcome == sources.ProbeAbsent || r.Status != ""):
		return true, nil
	}
	return false, unknown
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "…"
	}
	return s
}

// failpoint crashes the process at a test-only failpoint (FailpointEnv).
func (a *Applier) failpoint(point string, index int) {
	if a.Failpoint == "" || a.Crash == nil || a.DryRun {
		return
	}
	if a.Failpoint == point+":"+strconv.Itoa(index) {
		a.Crash(a.Failpoint)
	}
}

// --- executors -------------------------------------------------------------

// store runs an apply's transactions: committed one by one (realStore), or
// all inside one transaction rolled back at the end (dryStore: the dry-run
// executor, restic's SetDryRun decorator).
type store interface {
	tx(ctx context.Context, index int, fn func(*sql.Tx) error) error
	close()
	dry() bool
}

type realStore struct {
	db *sql.DB
	a  *Applier
}

func (s *realStore) tx(ctx context.Context, index int, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if index > 0 {
		s.a.failpoint("before-commit", index)
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if index > 0 {
		s.a.failpoint("after-commit", index)
	}
	return nil
}

func (s *realStore) close()    {}
func (s *realStore) dry() bool { return false }

// dryStore runs every transaction of a dry run inside one transaction, each
// behind a savepoint (a failed action leaves no trace in it), and rolls
// everything back at the end: later actions' guards see what earlier ones
// would have written.
type dryStore struct {
	db     *sql.DB
	shared *sql.Tx
	n      int
}

func (s *dryStore) tx(ctx context.Context, _ int, fn func(*sql.Tx) error) error {
	if s.shared == nil {
		tx, err := s.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		s.shared = tx
	}
	s.n++
	sp := fmt.Sprintf("opctl_dry_%d", s.n)
	if _, err := s.shared.ExecContext(ctx, "SAVEPOINT "+sp); err != nil {
		return err
	}
	if err := fn(s.shared); err != nil {
		_, _ = s.shared.ExecContext(ctx, "ROLLBACK TO SAVEPOINT "+sp)
		return err
	}
	return nil
}

func (s *dryStore) close() {
	if s.shared != nil {
		_ = s.shared.Rollback()
		s.shared = nil
	}
}

func (s *dryStore) dry() bool { return true }

// dryPublisher sends nothing.
type dryPublisher struct{}

// Publish sends nothing and reports the planned partition, offset -1.
func (dryPublisher) Publish(_ context.Context, _ string, partition int32, _, _ []byte, _ map[string]string) (int32, int64, error) {
	return partition, -1, nil
}

// dryPoster sends nothing.
type dryPoster struct{}

// Post sends nothing.
func (dryPoster) Post(_ context.Context, url string, _ []byte, _ map[string]string) probe.PostResult {
	return probe.PostResult{URL: probe.Redact(url), Detail: "dry run: not sent"}
}

var mirrorMu sync.Mutex

// mirror writes an audit row to the JSONL mirror (audit.file), when set.
func (x *applyRun) mirror(act Action, outcome string, before, after map[string]any) {
	if x.a.Mirror == nil {
		return
	}
	row := map[string]any{"table": x.auditTable, "plan_id": x.plan.ID, "action_index": act.Index, "biz_id": x.plan.BizID,
		"pipeline": x.plan.Pipeline, "action": act.Type, "operator": x.operator, "reason": x.plan.Reason, "outcome": outcome,
		"before_image": before, "after_image": after, "at": time.Now().UTC().Format(time.RFC3339Nano)}
	b, err := json.Marshal(row)
	if err != nil {
		return
	}
	mirrorMu.Lock()
	defer mirrorMu.Unlock()
	_, _ = x.a.Mirror.Write(append(b, '\n'))
}
