package repair

import (
	"context"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/repair/plans"
	"github.com/opctl-dev/opctl/sources"
)

// guardFailure is a guard that does not hold; the executor turns it into a
// *plans.RefusedError of its action.
type guardFailure struct {
	guard  plans.Guard
	got    string
	detail string
}

// Error names the guard and what was read.
func (e *guardFailure) Error() string {
	return fmt.Sprintf("guard %s failed (read %s)", e.guard, e.got)
}

// preRead is what a guard needs from outside the database, read before the
// action's transaction: probe answers and group membership.
type preRead struct {
	probeCount   map[string]*int   // step → {biz_id} probe count
	probeOutcome map[string]string // step\x00request id → outcome
	member       map[string]bool   // owner → member of the group
	memberErr    error
}

// lockedState is the state row as the guards read it, with the database
// clock deciding whether the lease is live (as inspect decides it).
type lockedState struct {
	found       bool
	status      string
	version     *int64
	owner       string
	leaseUntil  *time.Time
	leaseActive bool
}

func (s *lockedState) image() map[string]any {
	if !s.found {
		return map[string]any{"found": false}
	}
	m := map[string]any{"found": true, "status": s.status}
	if s.version != nil {
		m["version"] = *s.version
	}
	if s.owner != "" {
		m["owner"] = s.owner
	}
	if s.leaseUntil != nil {
		m["lease_until"] = plans.ValueText(*s.leaseUntil)
	}
	return m
}

// lockedRows are a step's evidence rows read under FOR UPDATE; live[i] is
// false for a row opctl's audit (or the row's reversed column) says was
// reversed.
type lockedRows struct {
	rows sources.LockedRows
	live []bool
}

func (lr *lockedRows) identity(i int) string {
	return inspect.IdentityString(lr.rows.Row(i).Identity())
}

func (lr *lockedRows) find(id string) int {
	for i := range lr.rows.Values {
		if lr.identity(i) == id {
			return i
		}
	}
	return -1
}

func (lr *lockedRows) liveCount() int {
	n := 0
	for _, l := range lr.live {
		if l {
			n++
		}
	}
	return n
}

// guardEnv reads, once per transaction and under FOR UPDATE, what the
// guards of one action look at.
type guardEnv struct {
	ctx  context.Context
	tx   sources.Tx
	x    *applyRun
	pre  *preRead
	st   *lockedState
	idem map[string]*string
	ev   map[string]*lockedRows
	ints map[string][]sources.Intent
	ent  *sources.EntityRow
	att  inspect.Attestations
}

func newGuardEnv(ctx context.Context, tx sources.Tx, x *applyRun, pre *preRead) *guardEnv {
	return &guardEnv{ctx: ctx, tx: tx, x: x, pre: pre, idem: map[string]*string{}, ev: map[string]*lockedRows{}, ints: map[string][]sources.Intent{}}
}

// state reads the state row FOR UPDATE.
func (g *guardEnv) state() (*lockedState, error) {
	if g.st != nil {
		return g.st, nil
	}
	row, now, err := g.tx.LockState(g.ctx, g.x.p, g.x.plan.BizID)
	if err != nil {
		return nil, err
	}
	g.st = &lockedState{found: row.Found, status: row.Status, version: row.Version, owner: row.Owner, leaseUntil: row.LeaseUntil,
		leaseActive: row.LeaseLive(now)}
	return g.st, nil
}

func (g *guardEnv) idemAction(key string) (*string, error) {
	if v, ok := g.idem[key]; ok {
		return v, nil
	}
	action, found, err := g.tx.LockIdempotency(g.ctx, g.x.p, key, g.x.plan.BizID)
	if err != nil {
		return nil, err
	}
	var out *string
	if found {
		out = &action
	}
	g.idem[key] = out
	return out, nil
}

// attestations are what opctl's applied actions established about the
// operation (read FOR UPDATE), as `opctl where` reads them.
func (g *guardEnv) attestations() (inspect.Attestations, error) {
	if g.att != nil {
		return g.att, nil
	}
	actions, err := g.tx.LockAudit(g.ctx, g.x.audit, g.x.plan.Pipeline, g.x.plan.BizID)
	if err != nil {
		return nil, err
	}
	g.att = inspect.AuditAttestations(actions)
	return g.att, nil
}

// evidence reads a step's evidence rows FOR UPDATE and marks the reversed
// ones exactly as `opctl where` does (inspect.Attestations.Reversed).
func (g *guardEnv) evidence(step string) (*lockedRows, error) {
	if lr, ok := g.ev[step]; ok {
		return lr, nil
	}
	k := g.x.p.StepIndex(step)
	var rows sources.LockedRows
	switch {
	case k >= 0 && g.x.p.Steps[k].Binlog != nil:
		// The binlog's changes as the stale check read them just before
		// (docs/repair.md#binlog-evidence), or as readAhead read them for a
		// resumed apply, before any transaction; the audit rows are locked
		// below.
		if g.x.fresh == nil || k >= len(g.x.fresh.DB.Steps) || g.x.fresh.DB.Steps[k].BinlogErr != "" {
			return nil, fmt.Errorf("step %s: its binlog evidence could not be read again: %s", step, binlogErrOf(g.x.fresh, k))
		}
		rows = sources.BinlogLockedRows(g.x.fresh.DB.Steps[k].Rows)
	case k < 0 || g.x.p.Steps[k].Evidence == "":
		return nil, fmt.Errorf("step %s has no evidence query", step)
	default:
		var err error
		if rows, err = g.tx.LockRows(g.ctx, g.x.p.Steps[k].Evidence, g.x.plan.BizID); err != nil {
			return nil, fmt.Errorf("read %s evidence: %w", step, err)
		}
	}
	att, err := g.attestations()
	if err != nil {
		return nil, err
	}
	lr := &lockedRows{rows: rows, live: make([]bool, len(rows.Values))}
	for i := range rows.Values {
		lr.live[i] = !att.Reversed(step, rows.Row(i))
	}
	g.ev[step] = lr
	return lr, nil
}

// binlogErrOf says why step k's binlog evidence is missing from ev.
func binlogErrOf(ev *sources.Evidence, k int) string {
	if ev == nil || k >= len(ev.DB.Steps) {
		return "no fresh read"
	}
	return ev.DB.Steps[k].BinlogErr
}

func (g *guardEnv) intents(step string) ([]sources.Intent, error) {
	if in, ok := g.ints[step]; ok {
		return in, nil
	}
	k := g.x.p.StepIndex(step)
	if k < 0 || g.x.p.Steps[k].Intent == "" {
		return nil, fmt.Errorf("step %s has no intent query", step)
	}
	in, err := g.tx.LockIntents(g.ctx, g.x.p.Steps[k].Intent, g.x.plan.BizID)
	if err != nil {
		return nil, fmt.Errorf("read %s intents: %w", step, err)
	}
	g.ints[step] = in
	return in, nil
}

func (g *guardEnv) entity() (sources.EntityRow, error) {
	if g.ent != nil {
		return *g.ent, nil
	}
	e := g.x.p.Entity
	if e == nil || e.Query == "" {
		return sources.EntityRow{}, fmt.Errorf("no entity query configured")
	}
	row, err := g.tx.LockEntity(g.ctx, e.Query, g.x.plan.BizID)
	if err != nil {
		return sources.EntityRow{}, fmt.Errorf("read the entity: %w", err)
	}
	g.ent = &row
	return row, nil
}

// check evaluates one guard of act.
func (g *guardEnv) check(act plans.Action, gd plans.Guard) error {
	switch gd.Check {
	case plans.CheckStateFound, plans.CheckStateVersion, plans.CheckStateStatus, plans.CheckStateOwner, plans.CheckLease:
		return g.checkState(gd)
	case plans.CheckIdemAction:
		return g.checkIdempotency(gd)
	case plans.CheckEvidenceN, plans.CheckEvidenceRow:
		return g.checkEvidence(act, gd)
	case plans.CheckEntityStatus:
		return g.checkEntity(gd)
	case plans.CheckIntentAcked, plans.CheckIntentsAcked:
		return g.checkIntents(gd)
	case plans.CheckProbeCount, plans.CheckProbeOutcome, plans.CheckOwnerMember:
		return g.checkPreRead(gd)
	}
	return fmt.Errorf("unknown guard check %q", gd.Check)
}

func fail(gd plans.Guard, got string) error { return &guardFailure{guard: gd, got: got} }

func (g *guardEnv) checkState(gd plans.Guard) error {
	st, err := g.state()
	if err != nil {
		return err
	}
	switch gd.Check {
	case plans.CheckStateFound:
		if got := strconv.FormatBool(st.found); got != gd.Value {
			return fail(gd, "state.found == "+got)
		}
	case plans.CheckStateVersion:
		got := "(no row)"
		if st.found {
			got = plans.PtrString(st.version)
		}
		if got != gd.Value {
			return fail(gd, "state.version == "+got)
		}
	case plans.CheckStateStatus:
		if !st.found || st.status != gd.Value {
			return fail(gd, "state.status == "+plans.Quote(st.status))
		}
	case plans.CheckStateOwner:
		if st.owner != gd.Value {
			return fail(gd, "state.owner == "+plans.Quote(st.owner))
		}
	case plans.CheckLease:
		if st.found && st.leaseActive {
			return fail(gd, fmt.Sprintf("owner %s holds the lease until %s", st.owner, plans.ValueText(*st.leaseUntil)))
		}
	}
	return nil
}

func (g *guardEnv) checkIdempotency(gd plans.Guard) error {
	v, err := g.idemAction(gd.Key)
	if err != nil {
		return err
	}
	switch {
	case gd.Op == "absent" && v != nil:
		return fail(gd, fmt.Sprintf("idempotency[%s].action == %s", plans.Quote(gd.Key), plans.Quote(*v)))
	case gd.Op == "absent":
	case v == nil:
		return fail(gd, "no record "+plans.Quote(gd.Key))
	case *v != gd.Value:
		return fail(gd, fmt.Sprintf("idempotency[%s].action == %s", plans.Quote(gd.Key), plans.Quote(*v)))
	}
	return nil
}

func (g *guardEnv) checkEvidence(act plans.Action, gd plans.Guard) error {
	lr, err := g.evidence(gd.Step)
	if err != nil {
		return err
	}
	if gd.Check == plans.CheckEvidenceN {
		if got := strconv.Itoa(lr.liveCount()); got != gd.Value {
			return fail(gd, fmt.Sprintf("evidence(%s).count == %s", gd.Step, got))
		}
		return nil
	}
	i := lr.find(gd.Key)
	switch {
	case i < 0:
		return fail(gd, fmt.Sprintf("no row %s", gd.Key))
	case !lr.live[i]:
		return fail(gd, fmt.Sprintf("row %s is already reversed", gd.Key))
	}
	if act.Reverse != nil && act.Reverse.Identity == gd.Key {
		if d := imageDiff(act.Reverse.Row, plans.ImageOf(lr.rows.Row(i))); d != "" {
			return fail(gd, "row "+gd.Key+" changed: "+d)
		}
	}
	return nil
}

func (g *guardEnv) checkEntity(gd plans.Guard) error {
	e, err := g.entity()
	if err != nil {
		return err
	}
	got := "(not found)"
	if e.Found {
		got = e.Status
	}
	if got != gd.Value {
		return fail(gd, "entity.status == "+plans.Quote(got))
	}
	return nil
}

func (g *guardEnv) checkIntents(gd plans.Guard) error {
	ints, err := g.intents(gd.Step)
	if err != nil {
		return err
	}
	if gd.Check == plans.CheckIntentsAcked {
		n := 0
		for _, in := range ints {
			if in.AckedAt != nil {
				n++
			}
		}
		if got := strconv.Itoa(n); got != gd.Value {
			return fail(gd, fmt.Sprintf("intents(%s).acked == %s", gd.Step, got))
		}
		return nil
	}
	got := "(no intent)"
	for _, in := range ints {
		if in.RequestID == gd.Key {
			got = strconv.FormatBool(in.AckedAt != nil)
		}
	}
	if got != gd.Value {
		return fail(gd, fmt.Sprintf("intent(%s)[%s].acked == %s", gd.Step, plans.Quote(gd.Key), got))
	}
	return nil
}

func (g *guardEnv) checkPreRead(gd plans.Guard) error {
	switch gd.Check {
	case plans.CheckProbeCount:
		c, ok := g.pre.probeCount[gd.Step]
		switch {
		case !ok || c == nil:
			return fail(gd, "no count from the probe")
		case strconv.Itoa(*c) != gd.Value:
			return fail(gd, fmt.Sprintf("probe(%s).count == %d", gd.Step, *c))
		}
	case plans.CheckProbeOutcome:
		if got := g.pre.probeOutcome[gd.Step+"\x00"+gd.Key]; got != gd.Value {
			if got == "" {
				got = "-"
			}
			return fail(gd, fmt.Sprintf("probe(%s)[%s] == %s", gd.Step, plans.Quote(gd.Key), got))
		}
	case plans.CheckOwnerMember:
		if g.pre.memberErr != nil {
			return fail(gd, "the group could not be read: "+g.pre.memberErr.Error())
		}
		if g.pre.member[gd.Key] {
			return fail(gd, fmt.Sprintf("%s is a member of group %s", gd.Key, gd.Value))
		}
	}
	return nil
}

// imageDiff compares a planned row with the row read now, column by column;
// decimal numbers compare by exact value (sameValue). "" when equal.
func imageDiff(planned, now plans.Image) string {
	var diffs []string
	for _, f := range planned {
		v, ok := now.Get(f.Name)
		if !ok {
			diffs = append(diffs, f.Name+" is gone")
			continue
		}
		if !sameValue(f.Value, v) {
			diffs = append(diffs, fmt.Sprintf("%s %s → %s", f.Name, strOrNull(f.Value), strOrNull(v)))
		}
	}
	return strings.Join(diffs, ", ")
}

func strOrNull(p *string) string {
	if p == nil {
		return "NULL"
	}
	return *p
}

// sameValue says whether a planned value and the value read now are the
// same: both NULL, the same text, or two decimal numbers of the same exact
// value ("30.00" and "30.0": a DECIMAL read with another scale). Never
// through float64, which would make two BIGINTs above 2^53, or two
// DECIMAL(65,30) that differ beyond 17 digits, compare equal and let a
// "row unchanged" guard hold on a changed row (docs/repair.md).
func sameValue(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if *a == *b {
		return true
	}
	x, okx := exactDecimal(*a)
	y, oky := exactDecimal(*b)
	return okx && oky && x.Cmp(y) == 0
}

// exactDecimal is the exact value of a plain decimal number's text: an
// optional sign, digits with at most one point, an optional exponent of at
// most 4 digits. Nothing else big.Rat.SetString would also take (a
// fraction, a base prefix, a digit separator), and no regexp compiled at
// start-up.
func exactDecimal(s string) (*big.Rat, bool) {
	if !isDecimalText(s) {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

func isDecimalText(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	digits, point := 0, false
	for ; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point:
			point = true
		default:
			goto exponent
		}
	}
exponent:
	if digits == 0 {
		return false
	}
	if i == len(s) {
		return true
	}
	if s[i] != 'e' && s[i] != 'E' {
		return false
	}
	i++
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	n := len(s) - i
	if n < 1 || n > 4 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
