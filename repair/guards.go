package repair

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/inspect"
	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// guardFailure is a guard that does not hold; Apply turns it into a
// *RefusedError.
type guardFailure struct {
	guard  Guard
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
	probeStatus  map[string]string // step\x00request id → raw status
	member       map[string]bool   // owner → member of the group
	memberErr    error
}

// lockedState is the state row read under FOR UPDATE.
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
		m["lease_until"] = wall(*s.leaseUntil)
	}
	return m
}

// lockedRows are a query's rows read under FOR UPDATE.
type lockedRows struct {
	cols  []string
	types []string
	rows  [][]any // normalised values: nil, int64, float64, string, time.Time
	live  []bool
}

func (lr *lockedRows) identity(i int) string {
	if len(lr.rows[i]) == 0 {
		return ""
	}
	return valueText(lr.rows[i][0])
}

func (lr *lockedRows) find(id string) int {
	for i := range lr.rows {
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

func (lr *lockedRows) imageOf(i int) Image {
	im := make(Image, len(lr.cols))
	for j, c := range lr.cols {
		im[j].Name = c
		if v := lr.rows[i][j]; v != nil {
			s := valueText(v)
			im[j].Value = &s
		}
	}
	return im
}

// lockedIntent is one intent read under FOR UPDATE.
type lockedIntent struct {
	requestID string
	acked     bool
}

// guardEnv reads, once per transaction and under FOR UPDATE, what the
// guards of one action look at.
type guardEnv struct {
	ctx  context.Context
	tx   *sql.Tx
	x    *applyRun
	pre  *preRead
	now  time.Time
	st   *lockedState
	idem map[string]*string
	ev   map[string]*lockedRows
	ints map[string][]lockedIntent
	ent  *string
	entR bool
	rev  map[string]bool // step\x00identity reversed by opctl (audit)
}

func newGuardEnv(ctx context.Context, tx *sql.Tx, x *applyRun, pre *preRead) *guardEnv {
	return &guardEnv{ctx: ctx, tx: tx, x: x, pre: pre, idem: map[string]*string{}, ev: map[string]*lockedRows{}, ints: map[string][]lockedIntent{}}
}

// withLock appends FOR UPDATE to an operator's SELECT unless it already
// locks.
func withLock(q string) string {
	t := strings.TrimRight(strings.TrimSpace(q), ";")
	u := strings.ToUpper(t)
	if strings.HasSuffix(u, "FOR UPDATE") || strings.HasSuffix(u, "LOCK IN SHARE MODE") || strings.HasSuffix(u, "FOR SHARE") {
		return t
	}
	return t + " FOR UPDATE"
}

// query runs a locking read; a statement the server refuses to lock (a
// UNION, ...) is read without FOR UPDATE inside the same transaction.
func (g *guardEnv) query(q string, args ...any) (*lockedRows, error) {
	lr, err := g.queryRaw(withLock(q), args...)
	if err != nil {
		switch mysqlsrc.ServerErrorNumber(err) {
		case 1064, 1221, 1235, 3539:
			return g.queryRaw(q, args...)
		}
	}
	return lr, err
}

func (g *guardEnv) queryRaw(q string, args ...any) (*lockedRows, error) {
	rows, err := g.tx.QueryContext(g.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	cts, err := rows.ColumnTypes()
	if err != nil {
		return nil, err
	}
	lr := &lockedRows{cols: cols, types: make([]string, len(cts))}
	for i, ct := range cts {
		lr.types[i] = ct.DatabaseTypeName()
	}
	raw := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		vals := make([]any, len(cols))
		for i, v := range raw {
			vals[i] = normalize(lr.types[i], v)
		}
		lr.rows = append(lr.rows, vals)
		lr.live = append(lr.live, true)
	}
	return lr, rows.Err()
}

// normalize maps a driver value like sources/mysql does, so that values
// render identically on the read and the write path.
func normalize(dbType string, v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case int64, float64, time.Time:
		return x
	case uint64:
		if x > math.MaxInt64 {
			return strconv.FormatUint(x, 10)
		}
		return int64(x)
	case float32:
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return f
	case bool:
		if x {
			return int64(1)
		}
		return int64(0)
	case []byte:
		s := string(x)
		switch strings.TrimPrefix(dbType, "UNSIGNED ") {
		case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR":
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n
			}
		case "FLOAT", "DOUBLE":
			if f, err := strconv.ParseFloat(s, 64); err == nil {
				return f
			}
		case "BIT":
			if len(x) <= 8 {
				var n uint64
				for _, c := range x {
					n = n<<8 | uint64(c)
				}
				if n <= math.MaxInt64 {
					return int64(n)
				}
			}
		}
		return s
	case string:
		return normalize(dbType, []byte(x))
	}
	return fmt.Sprint(v)
}

// state reads the state row FOR UPDATE, with the database clock deciding
// whether the lease is live (as inspect does).
func (g *guardEnv) state() (*lockedState, error) {
	if g.st != nil {
		return g.st, nil
	}
	st := g.x.p.State
	if st == nil {
		g.st = &lockedState{}
		return g.st, nil
	}
	q := config.QuoteIdent
	cols := []string{"s." + q(st.Status)}
	if st.Version != "" {
		cols = append(cols, "s."+q(st.Version))
	}
	if st.Owner != "" {
		cols = append(cols, "s."+q(st.Owner))
	}
	if st.LeaseUntil != "" {
		cols = append(cols, "s."+q(st.LeaseUntil), fmt.Sprintf("(s.%s IS NOT NULL AND s.%s > NOW(6))", q(st.LeaseUntil), q(st.LeaseUntil)))
	}
	text := fmt.Sprintf("SELECT %s FROM %s AS s WHERE s.%s = ? FOR UPDATE", strings.Join(cols, ", "), q(st.Table), q(st.Key))
	lr, err := g.queryRaw(text, g.x.plan.BizID)
	if err != nil {
		return nil, fmt.Errorf("read the state row: %w", err)
	}
	ls := &lockedState{}
	if len(lr.rows) > 0 {
		vals := lr.rows[0]
		ls.found = true
		i := 0
		ls.status = textOf(vals[i])
		i++
		if st.Version != "" {
			if n, ok := vals[i].(int64); ok {
				ls.version = &n
			}
			i++
		}
		if st.Owner != "" {
			ls.owner = textOf(vals[i])
			i++
		}
		if st.LeaseUntil != "" {
			if t, ok := vals[i].(time.Time); ok {
				ls.leaseUntil = &t
			}
			active, _ := vals[i+1].(int64)
			ls.leaseActive = ls.owner != "" && active == 1
		}
	}
	g.st = ls
	return ls, nil
}

func textOf(v any) string {
	if v == nil {
		return ""
	}
	return valueText(v)
}

func (g *guardEnv) idemAction(key string) (*string, error) {
	if v, ok := g.idem[key]; ok {
		return v, nil
	}
	id := g.x.p.Idempotency
	if id == nil {
		return nil, fmt.Errorf("no idempotency table configured")
	}
	q := config.QuoteIdent
	text := fmt.Sprintf("SELECT %s FROM %s WHERE %s = ? AND %s = ? FOR UPDATE", q(id.Action), q(id.Table), q(id.Key), q(id.BizID))
	lr, err := g.queryRaw(text, key, g.x.plan.BizID)
	if err != nil {
		return nil, fmt.Errorf("read idempotency record %s: %w", key, err)
	}
	var out *string
	if len(lr.rows) > 0 {
		s := textOf(lr.rows[0][0])
		out = &s
	}
	g.idem[key] = out
	return out, nil
}

// reversedByAudit reads, under FOR UPDATE, the evidence rows opctl's
// applied actions reversed (reverse, manual attesting reversed).
func (g *guardEnv) reversedByAudit() (map[string]bool, error) {
	if g.rev != nil {
		return g.rev, nil
	}
	text := "SELECT after_image FROM " + config.QuoteIdent(g.x.auditTable) +
		" WHERE biz_id = ? AND pipeline = ? AND outcome = 'applied' AND action IN ('reverse', 'manual') FOR UPDATE"
	lr, err := g.queryRaw(text, g.x.plan.BizID, g.x.plan.Pipeline)
	if err != nil {
		return nil, fmt.Errorf("read the audit: %w", err)
	}
	rev := map[string]bool{}
	for _, r := range lr.rows {
		var img struct {
			Step       string            `json:"step"`
			ReversedID json.RawMessage   `json:"reversed_id"`
			Attested   map[string]string `json:"attested"`
		}
		if json.Unmarshal([]byte(textOf(r[0])), &img) != nil {
			continue
		}
		if id := rawText(img.ReversedID); id != "" {
			rev[img.Step+"\x00"+id] = true
		}
		for id, o := range img.Attested {
			if o == inspect.AttestReversed {
				rev[img.Step+"\x00"+id] = true
			}
		}
	}
	g.rev = rev
	return rev, nil
}

func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// evidence reads a step's evidence rows FOR UPDATE and marks the reversed
// ones (opctl's audit, or a truthy `reversed` column).
func (g *guardEnv) evidence(step string) (*lockedRows, error) {
	if lr, ok := g.ev[step]; ok {
		return lr, nil
	}
	k := g.x.p.StepIndex(step)
	if k < 0 || g.x.p.Steps[k].Evidence == "" {
		return nil, fmt.Errorf("step %s has no evidence query", step)
	}
	lr, err := g.query(g.x.p.Steps[k].Evidence, g.x.plan.BizID)
	if err != nil {
		return nil, fmt.Errorf("read %s evidence: %w", step, err)
	}
	rev, err := g.reversedByAudit()
	if err != nil {
		return nil, err
	}
	ri := -1
	for i, c := range lr.cols {
		if strings.EqualFold(c, "reversed") {
			ri = i
		}
	}
	for i := range lr.rows {
		if rev[step+"\x00"+lr.identity(i)] || (ri >= 0 && truthy(lr.rows[i][ri])) {
			lr.live[i] = false
		}
	}
	g.ev[step] = lr
	return lr, nil
}

func truthy(v any) bool {
	switch x := v.(type) {
	case int64:
		return x != 0
	case string:
		return x == "1" || strings.EqualFold(x, "true") || strings.EqualFold(x, "yes")
	}
	return false
}

func (g *guardEnv) intents(step string) ([]lockedIntent, error) {
	if in, ok := g.ints[step]; ok {
		return in, nil
	}
	k := g.x.p.StepIndex(step)
	if k < 0 || g.x.p.Steps[k].Intent == "" {
		return nil, fmt.Errorf("step %s has no intent query", step)
	}
	lr, err := g.query(g.x.p.Steps[k].Intent, g.x.plan.BizID)
	if err != nil {
		return nil, fmt.Errorf("read %s intents: %w", step, err)
	}
	ri, ai := -1, -1
	for i, c := range lr.cols {
		switch strings.ToLower(c) {
		case "request_id":
			ri = i
		case "acked_at":
			ai = i
		}
	}
	if ri < 0 {
		return nil, fmt.Errorf("step %s: the intent query returns no request_id", step)
	}
	var out []lockedIntent
	for _, r := range lr.rows {
		out = append(out, lockedIntent{requestID: textOf(r[ri]), acked: ai >= 0 && r[ai] != nil})
	}
	g.ints[step] = out
	return out, nil
}

func (g *guardEnv) entity() (*string, error) {
	if g.entR {
		return g.ent, nil
	}
	e := g.x.p.Entity
	if e == nil || e.Query == "" {
		return nil, fmt.Errorf("no entity query configured")
	}
	lr, err := g.query(e.Query, g.x.plan.BizID)
	if err != nil {
		return nil, fmt.Errorf("read the entity: %w", err)
	}
	g.entR = true
	if len(lr.rows) > 0 && len(lr.rows[0]) > 0 {
		s := textOf(lr.rows[0][0])
		g.ent = &s
	}
	return g.ent, nil
}

// check evaluates one guard of act.
func (g *guardEnv) check(act Action, gd Guard) error {
	fail := func(got string) error { return &guardFailure{guard: gd, got: got} }
	switch gd.Check {
	case CheckStateFound, CheckStateVersion, CheckStateStatus, CheckStateOwner, CheckLease:
		st, err := g.state()
		if err != nil {
			return err
		}
		switch gd.Check {
		case CheckStateFound:
			if got := strconv.FormatBool(st.found); got != gd.Value {
				return fail("state.found == " + got)
			}
		case CheckStateVersion:
			got := "(no row)"
			if st.found {
				got = ptrStr(st.version)
			}
			if got != gd.Value {
				return fail("state.version == " + got)
			}
		case CheckStateStatus:
			if !st.found || st.status != gd.Value {
				return fail("state.status == " + quote(st.status))
			}
		case CheckStateOwner:
			if st.owner != gd.Value {
				return fail("state.owner == " + quote(st.owner))
			}
		case CheckLease:
			if st.found && st.leaseActive {
				return &guardFailure{guard: gd, got: fmt.Sprintf("owner %s holds the lease until %s", st.owner, wall(*st.leaseUntil))}
			}
		}
	case CheckIdemAction:
		v, err := g.idemAction(gd.Key)
		if err != nil {
			return err
		}
		if v == nil {
			return fail("no record " + quote(gd.Key))
		}
		if *v != gd.Value {
			return fail(fmt.Sprintf("idempotency[%s].action == %s", quote(gd.Key), quote(*v)))
		}
	case CheckEvidenceN:
		lr, err := g.evidence(gd.Step)
		if err != nil {
			return err
		}
		if got := strconv.Itoa(lr.liveCount()); got != gd.Value {
			return fail(fmt.Sprintf("evidence(%s).count == %s", gd.Step, got))
		}
	case CheckEvidenceRow:
		lr, err := g.evidence(gd.Step)
		if err != nil {
			return err
		}
		i := lr.find(gd.Key)
		switch {
		case i < 0:
			return fail(fmt.Sprintf("no row %s", gd.Key))
		case !lr.live[i]:
			return fail(fmt.Sprintf("row %s is already reversed", gd.Key))
		}
		if act.Reverse != nil && act.Reverse.Identity == gd.Key {
			if d := imageDiff(act.Reverse.Row, lr.imageOf(i)); d != "" {
				return fail("row " + gd.Key + " changed: " + d)
			}
		}
	case CheckEntityStatus:
		v, err := g.entity()
		if err != nil {
			return err
		}
		got := "(not found)"
		if v != nil {
			got = *v
		}
		if got != gd.Value {
			return fail("entity.status == " + quote(got))
		}
	case CheckIntentAcked:
		ints, err := g.intents(gd.Step)
		if err != nil {
			return err
		}
		got := "(no intent)"
		for _, in := range ints {
			if in.requestID == gd.Key {
				got = strconv.FormatBool(in.acked)
			}
		}
		if got != gd.Value {
			return fail(fmt.Sprintf("intent(%s)[%s].acked == %s", gd.Step, quote(gd.Key), got))
		}
	case CheckIntentsAcked:
		ints, err := g.intents(gd.Step)
		if err != nil {
			return err
		}
		n := 0
		for _, in := range ints {
			if in.acked {
				n++
			}
		}
		if got := strconv.Itoa(n); got != gd.Value {
			return fail(fmt.Sprintf("intents(%s).acked == %s", gd.Step, got))
		}
	case CheckProbeCount:
		c, ok := g.pre.probeCount[gd.Step]
		switch {
		case !ok || c == nil:
			return fail("no count from the probe")
		case strconv.Itoa(*c) != gd.Value:
			return fail(fmt.Sprintf("probe(%s).count == %d", gd.Step, *c))
		}
	case CheckProbeOutcome:
		if got := g.pre.probeOutcome[gd.Step+"\x00"+gd.Key]; got != gd.Value {
			return fail(fmt.Sprintf("probe(%s)[%s] == %s", gd.Step, quote(gd.Key), orDash(got)))
		}
	case CheckOwnerMember:
		if g.pre.memberErr != nil {
			return &guardFailure{guard: gd, got: "the group could not be read: " + g.pre.memberErr.Error()}
		}
		if g.pre.member[gd.Key] {
			return fail(fmt.Sprintf("%s is a member of group %s", gd.Key, gd.Value))
		}
	default:
		return fmt.Errorf("unknown guard check %q", gd.Check)
	}
	return nil
}

// imageDiff compares a planned row with the row read now, column by column;
// numbers compare numerically. "" when equal.
func imageDiff(planned, now Image) string {
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

func sameValue(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if *a == *b {
		return true
	}
	x, ex := strconv.ParseFloat(*a, 64)
	y, ey := strconv.ParseFloat(*b, 64)
	return ex == nil && ey == nil && x == y
}
