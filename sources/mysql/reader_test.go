package mysql

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the loc test needs a named zone on any machine

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

func read(t *testing.T, r *Reader, p *config.Pipeline, audit, id string) sources.DBEvidence {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev, err := r.ReadOperation(ctx, p, audit, id)
	if err != nil {
		t.Fatalf("ReadOperation(%.40q): %v", id, err)
	}
	return ev
}

func dbNow(t *testing.T, db *testenv.DB) time.Time {
	t.Helper()
	var now time.Time
	if err := db.SQL.QueryRow("SELECT NOW(6)").Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

func near(t *testing.T, what string, got, want time.Time, tol time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tol || d > tol {
		t.Errorf("%s = %v, want within %v of %v (off by %v)", what, got, tol, want, d)
	}
}

func col(t *testing.T, row sources.Row, name string) sources.Value {
	t.Helper()
	v, ok := row.Get(name)
	if !ok {
		t.Fatalf("row has no column %q (columns %v)", name, row.Columns)
	}
	return v
}

func TestReadSettlement(t *testing.T) {
	t.Parallel()
	db, r := incident(t, "settlement")
	p := settlementPipeline()
	before := dbNow(t, db)
	ev := read(t, r, p, "opctl_audit", "PAY-1") // no audit table: not an error

	near(t, "Now", ev.Now, before, 5*time.Second)
	if ev.Now.Location() != time.UTC {
		t.Errorf("Now location = %v, want UTC (the server's zone)", ev.Now.Location())
	}
	st := ev.State
	if !st.Found || st.Status != "DONE" || st.MsgID != "m-1" || st.Owner != "" {
		t.Errorf("state = %+v", st)
	}
	if st.Version == nil || *st.Version != 4 {
		t.Errorf("version = %v, want 4", st.Version)
	}
	if st.LeaseUntil != nil || st.Partition != nil || st.Offset != nil {
		t.Errorf("NULL columns read as set: lease %v partition %v offset %v", st.LeaseUntil, st.Partition, st.Offset)
	}
	if st.CreatedAt == nil || st.UpdatedAt == nil {
		t.Fatalf("created_at/updated_at not read: %+v", st)
	}
	near(t, "created_at", *st.CreatedAt, ev.Now.Add(-10*time.Minute), 5*time.Second)
	near(t, "updated_at", *st.UpdatedAt, ev.Now.Add(-9*time.Minute), 5*time.Second)

	if len(ev.Steps) != 3 {
		t.Fatalf("steps = %d, want 3", len(ev.Steps))
	}
	for i, name := range []string{"debit", "ledger", "notify"} {
		if ev.Steps[i].Name != name || ev.Steps[i].Err != "" {
			t.Errorf("step %d = %q err %q", i, ev.Steps[i].Name, ev.Steps[i].Err)
		}
	}
	debit := ev.Steps[0]
	if len(debit.Rows) != 2 {
		t.Fatalf("debit rows = %d, want 2 (the double debit)", len(debit.Rows))
	}
	if want := []string{"id", "account_id", "delta", "created_at"}; !reflect.DeepEqual(debit.Rows[0].Columns, want) {
		t.Errorf("debit columns = %v, want %v", debit.Rows[0].Columns, want)
	}
	ids := map[int64]bool{}
	for _, row := range debit.Rows {
		id, ok := row.Identity().(int64)
		if !ok {
			t.Fatalf("debit id is %T, want int64", row.Identity())
		}
		ids[id] = true
		if v := col(t, row, "delta"); v != "-30.00" {
			t.Errorf("delta = %#v, want string \"-30.00\"", v)
		}
		if v := col(t, row, "account_id"); v != int64(1001) {
			t.Errorf("account_id = %#v, want int64 1001", v)
		}
		if _, ok := col(t, row, "created_at").(time.Time); !ok {
			t.Errorf("created_at is %T, want time.Time", col(t, row, "created_at"))
		}
	}
	if len(ids) != 2 {
		t.Errorf("debit ids = %v, want two distinct", ids)
	}
	ledger := ev.Steps[1]
	if len(ledger.Rows) != 1 {
		t.Fatalf("ledger rows = %d, want 1", len(ledger.Rows))
	}
	if v := col(t, ledger.Rows[0], "amount"); v != "30.00" {
		t.Errorf("amount = %#v", v)
	}
	if v := col(t, ledger.Rows[0], "direction"); v != "OUT" {
		t.Errorf("direction = %#v", v)
	}
	notify := ev.Steps[2]
	if len(notify.Rows) != 0 || len(notify.Intents) != 2 {
		t.Fatalf("notify rows %d intents %d, want 0 and 2", len(notify.Rows), len(notify.Intents))
	}
	gotIDs := []string{notify.Intents[0].RequestID, notify.Intents[1].RequestID}
	if strings.Join(gotIDs, ",") != "PAY-1:notify:1,PAY-1:notify:2" && strings.Join(gotIDs, ",") != "PAY-1:notify:2,PAY-1:notify:1" {
		t.Errorf("intent ids = %v", gotIDs)
	}
	for _, in := range notify.Intents {
		if in.SentAt == nil || in.AckedAt == nil || in.Result != "OK" {
			t.Errorf("intent %+v: want sent, acked, OK", in)
		}
	}
	if ev.Idempotency != nil || ev.Entity != nil || ev.Audit != nil {
		t.Errorf("unconfigured parts read: idem %v entity %v audit %v", ev.Idempotency, ev.Entity, ev.Audit)
	}

	s := r.Stats()
	if s.Statements != 5 || s.CriticalPath != 1 || s.Failed != 1 {
		t.Errorf("stats = %+v, want 5 statements (state, debit, ledger, notify, audit), critical path 1, 1 failed (no audit table)", s)
	}

	// The healthy operation, read a second time through the cached statements.
	ev2 := read(t, r, p, "opctl_audit", "PAY-2")
	if !ev2.State.Found || len(ev2.Steps[0].Rows) != 1 || len(ev2.Steps[1].Rows) != 1 || len(ev2.Steps[2].Intents) != 1 {
		t.Errorf("PAY-2: state %+v debit %d ledger %d intents %d", ev2.State, len(ev2.Steps[0].Rows), len(ev2.Steps[1].Rows), len(ev2.Steps[2].Intents))
	}
	if v := col(t, ev2.Steps[0].Rows[0], "delta"); v != "-20.00" {
		t.Errorf("PAY-2 delta = %#v", v)
	}
}

func TestReadFulfilment(t *testing.T) {
	t.Parallel()
	db, r := incident(t, "fulfilment")
	// An unacked intent: sent, outcome unknown.
	db.Exec(t, "INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at) VALUES ('F-2:logistics:2', 'F-2', 'logistics', 2, NOW(3))")
	db.Exec(t, "UPDATE fulfil_state SET owner = 'c-3', lease_until = NOW(3) + INTERVAL 30 SECOND, src_partition = 5, src_offset = 1234 WHERE biz_id = 'F-2'")
	p := fulfilmentPipeline()

	ev := read(t, r, p, "", "F-1")
	if !ev.State.Found || ev.State.Status != "DONE" || *ev.State.Version != 5 || ev.State.MsgID != "fm-1" {
		t.Errorf("F-1 state = %+v", ev.State)
	}
	if len(ev.Steps) != 4 {
		t.Fatalf("steps = %d", len(ev.Steps))
	}
	if rows := ev.Steps[0].Rows; len(rows) != 1 || col(t, rows[0], "status") != "CREATED" {
		t.Errorf("order_row rows = %v", rows)
	}
	if s := ev.Steps[1]; s.Name != "wms_lock" || s.Rows != nil || s.Intents != nil || s.Err != "" {
		t.Errorf("wms_lock (probe only) = %+v, want nothing read", s)
	}
	if in := ev.Steps[2].Intents; len(in) != 1 || in[0].RequestID != "F-1:logistics" || in[0].AckedAt == nil {
		t.Errorf("logistics intents = %+v", in)
	}
	if rows := ev.Steps[3].Rows; len(rows) != 1 || col(t, rows[0], "kind") != "notice" {
		t.Errorf("notice rows = %v", rows)
	}
	if s := r.Stats(); s.Statements != 4 || s.CriticalPath != 1 {
		t.Errorf("stats = %+v, want 4 statements, critical path 1", s)
	}

	ev = read(t, r, p, "", "F-2")
	st := ev.State
	if st.Owner != "c-3" || st.LeaseUntil == nil || st.Partition == nil || *st.Partition != 5 || st.Offset == nil || *st.Offset != 1234 {
		t.Errorf("F-2 state = %+v", st)
	}
	near(t, "lease_until", *st.LeaseUntil, ev.Now.Add(30*time.Second), 5*time.Second)
	in := ev.Steps[2].Intents
	if len(in) != 2 {
		t.Fatalf("F-2 intents = %+v", in)
	}
	acked := map[string]bool{}
	for _, i := range in {
		acked[i.RequestID] = i.AckedAt != nil
		if i.SentAt == nil {
			t.Errorf("intent %s: sent_at not read", i.RequestID)
		}
	}
	if !acked["F-2:logistics"] || acked["F-2:logistics:2"] {
		t.Errorf("acked = %v, want the first acked and the second not", acked)
	}
	for _, i := range in {
		if i.RequestID == "F-2:logistics:2" && i.Result != "" {
			t.Errorf("NULL result read as %q", i.Result)
		}
	}
}

func TestReadSkip(t *testing.T) {
	t.Parallel()
	db, r := incident(t, "skip")
	p := skipPipeline()
	before := dbNow(t, db)

	ev := read(t, r, p, "", "8821")
	near(t, "Now (no state table)", ev.Now, before, 5*time.Second)
	if ev.State.Found {
		t.Errorf("state found without a state table: %+v", ev.State)
	}
	if len(ev.Idempotency) != 2 {
		t.Fatalf("idempotency = %+v", ev.Idempotency)
	}
	// Ordered by created_at: the DONE of SHIPPED (m-7392) came first.
	if got := ev.Idempotency[0]; got.Key != "m-7392" || got.Action != "DONE" || got.CreatedAt == nil {
		t.Errorf("idempotency[0] = %+v", got)
	}
	if got := ev.Idempotency[1]; got.Key != "m-7391" || got.Action != "SKIPPED" || got.CreatedAt == nil {
		t.Errorf("idempotency[1] = %+v", got)
	}
	if ev.Entity == nil || !ev.Entity.Found || ev.Entity.Status != "SHIPPED" {
		t.Errorf("entity = %+v", ev.Entity)
	}
	if len(ev.Steps) != 1 || len(ev.Steps[0].Rows) != 0 || ev.Steps[0].Err != "" {
		t.Errorf("points = %+v, want no rows (the lost grant)", ev.Steps)
	}

	if ev := read(t, r, p, "", "8822"); ev.Entity == nil || ev.Entity.Status != "REFUNDED" || len(ev.Idempotency) != 1 || ev.Idempotency[0].Action != "SKIPPED" {
		t.Errorf("8822: entity %+v idem %+v", ev.Entity, ev.Idempotency)
	}
	ev = read(t, r, p, "", "8823")
	if rows := ev.Steps[0].Rows; len(rows) != 1 || col(t, rows[0], "points") != int64(120) || col(t, rows[0], "msg_id") != "m-7411" {
		t.Errorf("8823 points = %v", rows)
	}
	ev = read(t, r, p, "", "9999")
	if ev.Entity == nil || ev.Entity.Found || len(ev.Idempotency) != 0 || len(ev.Steps[0].Rows) != 0 {
		t.Errorf("unknown id: entity %+v idem %+v", ev.Entity, ev.Idempotency)
	}
	if s := r.Stats(); s.Statements != 4 || s.CriticalPath != 1 || s.Failed != 0 {
		t.Errorf("stats = %+v, want 4 statements (clock, points, idempotency, entity), critical path 1", s)
	}
}

func TestHostileIDsAreJustLookedUp(t *testing.T) {
	t.Parallel()
	db, r := incident(t, "settlement")
	db.Exec(t, auditDDL)
	p := settlementPipeline()
	big := strings.Repeat("PAY-1'; DROP TABLE biz_operation; --", 10240/36+1)
	for _, id := range []string{`x' OR '1'='1`, `1; DROP TABLE biz_operation; --`, `PAY-1' -- `, "PAY-1\\", big} {
		ev := read(t, r, p, "opctl_audit", id)
		if ev.State.Found {
			t.Errorf("%.40q: state found", id)
		}
		for _, s := range ev.Steps {
			if len(s.Rows) != 0 || len(s.Intents) != 0 || s.Err != "" {
				t.Errorf("%.40q: step %s read %d rows %d intents err %q", id, s.Name, len(s.Rows), len(s.Intents), s.Err)
			}
		}
		if len(ev.Audit) != 0 {
			t.Errorf("%.40q: audit rows %v", id, ev.Audit)
		}
	}
	var n int
	for _, table := range []string{"biz_operation", "balance_journal", "ledger_entry", "step_intent"} {
		if err := db.SQL.QueryRow("SELECT COUNT(*) FROM " + config.QuoteIdent(table)).Scan(&n); err != nil {
			t.Fatalf("table %s after hostile ids: %v", table, err)
		}
	}
	if err := db.SQL.QueryRow("SELECT COUNT(*) FROM biz_operation").Scan(&n); err != nil || n != 2 {
		t.Errorf("biz_operation rows = %d (%v), want 2", n, err)
	}
}

func TestBrokenStepQueryFailsOnlyThatStep(t *testing.T) {
	t.Parallel()
	_, r := incident(t, "settlement")
	p := settlementPipeline()
	p.Steps[1].Evidence = "SELEC id FROM ledger_entry WHERE biz_order_id = ?"
	p.Steps[2].Intent = "SELECT request_id FROM no_such_intents WHERE biz_id = ?"
	ev := read(t, r, p, "", "PAY-1")
	if !ev.State.Found || len(ev.Steps[0].Rows) != 2 || ev.Steps[0].Err != "" {
		t.Errorf("healthy parts: state %+v debit rows %d err %q", ev.State, len(ev.Steps[0].Rows), ev.Steps[0].Err)
	}
	if e := ev.Steps[1].Err; !strings.HasPrefix(e, "ledger: evidence query: ") || !strings.Contains(e, "1064") {
		t.Errorf("ledger Err = %q", e)
	}
	if e := ev.Steps[2].Err; !strings.HasPrefix(e, "notify: intent query: ") || !strings.Contains(e, "no_such_intents") {
		t.Errorf("notify Err = %q", e)
	}
	if ev.Steps[1].Rows != nil || ev.Steps[2].Intents != nil {
		t.Errorf("failed steps carry rows: %+v", ev.Steps[1:])
	}

	// An intent query without request_id is an error of that step too.
	p = settlementPipeline()
	p.Steps[2].Intent = "SELECT sent_at, acked_at FROM step_intent WHERE biz_id = ?"
	ev = read(t, r, p, "", "PAY-1")
	if e := ev.Steps[2].Err; !strings.Contains(e, "notify: intent query: no request_id column") {
		t.Errorf("notify Err = %q", e)
	}
}

func TestOperationQueryFailureIsPartial(t *testing.T) {
	t.Parallel()
	db, r := incident(t, "skip")
	p := skipPipeline()
	p.Entity.Query = "SELECT status FROM no_such_orders WHERE order_id = ?"
	p.State = &config.State{Table: "no_such_state", Key: "biz_id", Status: "status"}
	ev, err := r.ReadOperation(context.Background(), p, "", "8821")
	var pe *PartialError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v (%T), want *PartialError", err, err)
	}
	t.Logf("partial: %v", err)
	if got := strings.Join(pe.Queries(), ","); got != "state,entity" {
		t.Errorf("failed queries = %s, want state,entity", got)
	}
	if !strings.Contains(err.Error(), "no_such_state") || !strings.Contains(err.Error(), "no_such_orders") {
		t.Errorf("error = %v", err)
	}
	if ev.Entity != nil || ev.State.Found || !ev.Now.IsZero() {
		t.Errorf("failed parts filled: entity %+v state %+v now %v", ev.Entity, ev.State, ev.Now)
	}
	if len(ev.Idempotency) != 2 {
		t.Errorf("idempotency = %+v, want the 2 rows read anyway", ev.Idempotency)
	}
	if n := db.SQL.Stats().OpenConnections; n < 1 {
		t.Errorf("test database unused")
	}
}

func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	r, err := Open("opctl:secretpw@tcp(127.0.0.1:1)/opctl", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.ReadOperation(context.Background(), settlementPipeline(), "opctl_audit", "PAY-1")
	if err == nil {
		t.Fatal("no error from an unreachable server")
	}
	msg := err.Error()
	t.Logf("unreachable: %v", err)
	if !strings.Contains(msg, "127.0.0.1:1") || !strings.Contains(msg, "connection refused") || !strings.Contains(msg, "check mysql.dsn") {
		t.Errorf("error = %q, want the address and 'connection refused'", msg)
	}
	if strings.Contains(msg, "secretpw") {
		t.Errorf("error leaks the password: %q", msg)
	}
	var ce *ConnError
	var pe *PartialError
	if !errors.As(err, &ce) || errors.As(err, &pe) {
		t.Errorf("err is %T, want *ConnError", err)
	}
	if s := r.Stats(); s.Failed != s.Statements {
		t.Errorf("stats = %+v", s)
	}
}

func TestAuthFailure(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	dsn := strings.Replace(db.DSN, "root@", "opctl_nobody:secretpw@", 1)
	if dsn == db.DSN {
		t.Skip("test DSN does not start with root@; cannot derive a bad-login DSN")
	}
	r, err := Open(dsn, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.ReadOperation(context.Background(), skipPipeline(), "", "8821")
	if err == nil {
		t.Fatal("no error for a refused login")
	}
	t.Logf("refused login: %v", err)
	var ce *ConnError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "access denied") || strings.Contains(err.Error(), "secretpw") {
		t.Errorf("err = %q (%T)", err, err)
	}
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	_, r := incident(t, "settlement")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.ReadOperation(ctx, settlementPipeline(), "", "PAY-1")
	var ce *ConnError
	if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v (%T), want a *ConnError wrapping context.Canceled", err, err)
	}
}

// TestClockIgnoresDSNLoc: the DSN's loc does not relabel DATETIMEs: they
// are read in the session's zone (the server's here, docs/config.md#mysql),
// so a consumer's created_at stands for the instant it was written at.
func TestClockIgnoresDSNLoc(t *testing.T) {
	t.Parallel()
	db, _ := incident(t, "settlement")
	if strings.Contains(db.DSN, "loc=") || !strings.Contains(db.DSN, "?") {
		t.Fatalf("test DSN %q: cannot add a loc parameter", db.DSN)
	}
	r, err := Open(db.DSN+"&loc=Asia%2FShanghai", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var zone string
	if err := db.SQL.QueryRow("SELECT @@session.time_zone").Scan(&zone); err != nil || (zone != "SYSTEM" && zone != "+00:00") {
		t.Skipf("the server's zone is %q (%v), not UTC", zone, err)
	}
	before := dbNow(t, db) // the server clock, read as UTC
	ev := read(t, r, settlementPipeline(), "", "PAY-1")
	if ev.Now.Location() != time.UTC || ev.State.UpdatedAt.Location() != time.UTC {
		t.Errorf("locations: now %v, updated_at %v; want UTC, the server's", ev.Now.Location(), ev.State.UpdatedAt.Location())
	}
	near(t, "Now", ev.Now, before, 5*time.Second)
	near(t, "updated_at vs Now", *ev.State.UpdatedAt, ev.Now.Add(-9*time.Minute), 5*time.Second)
}

func TestAuditRows(t *testing.T) {
	t.Parallel()
	db, r := incident(t, "settlement")
	db.Exec(t, auditDDL)
	db.Exec(t, `INSERT INTO opctl_audit (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, after_image, created_at, updated_at) VALUES
	  ('p1', 0, 'PAY-1', 'settlement', 'reverse', 'ann', 'dup', 'applied', '{"step":"debit","reversed_id":3}', NOW(6) - INTERVAL 2 MINUTE, NOW(6)),
	  ('p1', 1, 'PAY-1', 'settlement', 'republish', 'ann', 'dup', 'published', '{"partition":5,"offset":1234,"step":"notify"}', NOW(6) - INTERVAL 1 MINUTE, NOW(6)),
	  ('p2', 0, 'PAY-1', 'settlement', 'reverse', 'ann', 'x', 'applied', JSON_OBJECT('reversed_id', 'J-9', 'detail', 'by hand'), NOW(6), NOW(6)),
	  ('p3', 0, 'PAY-1', 'other', 'reverse', 'ann', 'x', 'applied', '{"reversed_id":1}', NOW(6), NOW(6)),
	  ('p4', 0, 'PAY-2', 'settlement', 'reverse', 'ann', 'x', 'applied', NULL, NOW(6), NOW(6))`)
	ev := read(t, r, settlementPipeline(), "opctl_audit", "PAY-1")
	if len(ev.Audit) != 3 {
		t.Fatalf("audit = %+v, want 3 rows of PAY-1 in settlement", ev.Audit)
	}
	a := ev.Audit[0]
	if a.PlanID != "p1" || a.ActionIndex != 0 || a.Action != "reverse" || a.Outcome != "applied" || a.Step != "debit" || a.ReversedID != "3" {
		t.Errorf("audit[0] = %+v", a)
	}
	near(t, "audit[0].At", a.At, ev.Now.Add(-2*time.Minute), 5*time.Second)
	a = ev.Audit[1]
	if a.Action != "republish" || a.Outcome != "published" || a.Partition == nil || *a.Partition != 5 || a.Offset == nil || *a.Offset != 1234 || a.ReversedID != "" {
		t.Errorf("audit[1] = %+v", a)
	}
	if a = ev.Audit[2]; a.ReversedID != "J-9" || a.Detail != "by hand" || a.Partition != nil {
		t.Errorf("audit[2] = %+v", a)
	}
	if ev := read(t, r, settlementPipeline(), "opctl_audit", "PAY-2"); len(ev.Audit) != 1 || ev.Audit[0].PlanID != "p4" {
		t.Errorf("PAY-2 audit = %+v", ev.Audit)
	}
}

func TestValueTypes(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, `CREATE TABLE typed (
	  id BIGINT PRIMARY KEY, k VARCHAR(8), b TINYINT(1), ti TINYINT UNSIGNED, si SMALLINT, mi MEDIUMINT, i INT,
	  ub BIGINT UNSIGNED, d DECIMAL(18,2), f FLOAT, db DOUBLE, bits BIT(10), dt DATE, dtm DATETIME(3),
	  ts TIMESTAMP(6) NULL, tm TIME, yr YEAR, js JSON, en ENUM('a','b'), bl BLOB, tx TEXT, n INT NULL)`)
	db.Exec(t, `INSERT INTO typed VALUES (7, 'k1', TRUE, 250, -3, 70000, -5, 18446744073709551615, -30.00, 0.1, 2.5,
	  b'1000000001', '2024-01-02', '2024-01-02 03:04:05.678', '2024-01-02 03:04:05.000001', '12:34:56', 2024,
	  '{"a":1}', 'b', 'raw', 'text', NULL)`)
	r, err := Open(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &config.Pipeline{Name: "typed", Steps: []config.Step{{Name: "all", Kind: config.KindLocal,
		Evidence: "SELECT * FROM typed WHERE k = ?"}}}
	ev := read(t, r, p, "", "k1")
	if len(ev.Steps[0].Rows) != 1 {
		t.Fatalf("rows = %+v err %q", ev.Steps[0].Rows, ev.Steps[0].Err)
	}
	row := ev.Steps[0].Rows[0]
	want := map[string]sources.Value{
		"id": int64(7), "k": "k1", "b": int64(1), "ti": int64(250), "si": int64(-3), "mi": int64(70000), "i": int64(-5),
		"ub": "18446744073709551615", "d": "-30.00", "f": 0.1, "db": 2.5, "bits": int64(513),
		"dt":  time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC),
		"dtm": time.Date(2024, 1, 2, 3, 4, 5, 678e6, time.UTC),
		"ts":  time.Date(2024, 1, 2, 3, 4, 5, 1000, time.UTC),
		"tm":  "12:34:56", "yr": int64(2024), "en": "b", "bl": "raw", "tx": "text", "n": nil,
	}
	for name, w := range want {
		got := col(t, row, name)
		if wt, ok := w.(time.Time); ok {
			if gt, ok := got.(time.Time); !ok || !gt.Equal(wt) {
				t.Errorf("%s = %#v, want %v", name, got, wt)
			}
			continue
		}
		if got != w {
			t.Errorf("%s = %#v (%T), want %#v (%T)", name, got, got, w, w)
		}
	}
	if js, ok := col(t, row, "js").(string); !ok || !strings.Contains(js, `"a"`) {
		t.Errorf("js = %#v, want the JSON text", col(t, row, "js"))
	}
}

func TestRowCap(t *testing.T) {
	t.Parallel()
	db := testenv.MySQL(t)
	db.Exec(t, "CREATE TABLE many (id INT PRIMARY KEY, k VARCHAR(8))")
	db.Exec(t, "INSERT INTO many SELECT seq, 'k' FROM seq_1_to_1500")
	r, err := Open(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := &config.Pipeline{Name: "many", Steps: []config.Step{{Name: "s", Kind: config.KindLocal,
		Evidence: "SELECT id FROM many WHERE k = ? ORDER BY id"}}}
	ev := read(t, r, p, "", "k")
	if n := len(ev.Steps[0].Rows); n != MaxRows {
		t.Errorf("rows = %d, want the cap %d", n, MaxRows)
	}
}

func TestInvalidIdentifier(t *testing.T) {
	t.Parallel()
	r, err := Open("root@tcp(127.0.0.1:1)/x", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p := settlementPipeline()
	p.State.Table = "biz_operation; DROP TABLE x"
	if _, err := r.ReadOperation(context.Background(), p, "", "PAY-1"); err == nil || !strings.Contains(err.Error(), "invalid identifier") {
		t.Errorf("err = %v", err)
	}
	if _, err := r.ReadOperation(context.Background(), settlementPipeline(), "audit`x", "PAY-1"); err == nil || !strings.Contains(err.Error(), "invalid identifier") {
		t.Errorf("audit table err = %v", err)
	}
}

func TestOpenBadDSN(t *testing.T) {
	t.Parallel()
	_, err := Open("user:secretpw@tcp(127.0.0.1:3306", time.Second)
	if err == nil || strings.Contains(err.Error(), "secretpw") || !strings.Contains(err.Error(), "invalid DSN") {
		t.Errorf("err = %v", err)
	}
}

// TestNoGoroutineLeft is not parallel: it counts goroutines.
func TestNoGoroutineLeft(t *testing.T) {
	db := testenv.MySQL(t)
	db.ExecFile(t, "../../testdata/schema/settlement.sql")
	db.ExecFile(t, "../../testdata/incidents/settlement.sql")
	before := runtime.NumGoroutine()
	r, err := Open(db.DSN, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p := settlementPipeline()
	for range 3 {
		read(t, r, p, "opctl_audit", "PAY-1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Microsecond)
	_, _ = r.ReadOperation(ctx, p, "opctl_audit", "PAY-1")
	cancel()
	r.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Close, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
