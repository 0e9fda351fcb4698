package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// Writer is the write path of repairs (mysql.write_dsn): it implements
// sources.Store. Its reads inside a transaction use the same row scanner and
// value conversion as the Reader, so a row reads the same on both paths.
type Writer struct {
	r *Reader
	// timeout is the write path's timeout (--timeout): it bounds a lock
	// wait (Lock).
	timeout time.Duration
	// Retries bounds the re-runs of a transaction the server rolled back
	// for a deadlock or a lock wait timeout (default 5).
	Retries int
}

var _ sources.Store = (*Writer)(nil)

// OpenWriter is OpenWriterWith with only a timeout: the server's default
// time zone.
func OpenWriter(dsn string, timeout time.Duration) (*Writer, error) {
	return OpenWriterWith(dsn, Options{Timeout: timeout})
}

// OpenWriterWith prepares a connection pool for the write DSN, with the
// same DSN rules as OpenWith (parseTime, values bound server-side, the
// session time zone, timeout for dial, read and write when the DSN sets
// none).
func OpenWriterWith(dsn string, o Options) (*Writer, error) {
	r, err := OpenWith(dsn, o)
	if err != nil {
		return nil, err
	}
	return &Writer{r: r, timeout: o.Timeout}, nil
}

// Addr is the server address of the write DSN (never the password).
func (w *Writer) Addr() string { return w.r.addr }

// Close closes the pool.
func (w *Writer) Close() error { return w.r.Close() }

// Exec runs DDL statements one by one on the write path (schema apply).
func (w *Writer) Exec(ctx context.Context, stmts []string) error { return w.r.Exec(ctx, stmts) }

// Begin starts a transaction.
func (w *Writer) Begin(ctx context.Context) (sources.Tx, error) {
	tx, err := w.r.db.BeginTx(ctx, nil)
	if err != nil {
		if isConnError(err) {
			return nil, w.r.connError(err)
		}
		return nil, err
	}
	return &writeTx{w: w, tx: tx}, nil
}

// Do runs fn in one transaction and commits it; a deadlock or a lock wait
// timeout (the server rolled the transaction back) runs it again, at most
// Retries times, with a short growing pause.
func (w *Writer) Do(ctx context.Context, fn func(sources.Tx) error) error {
	retries := w.Retries
	if retries <= 0 {
		retries = 5
	}
	for attempt := 0; ; attempt++ {
		err := w.once(ctx, fn)
		if err == nil || !isRetryable(err) || attempt >= retries {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt+1) * 5 * time.Millisecond):
		}
	}
}

func (w *Writer) once(ctx context.Context, fn func(sources.Tx) error) error {
	tx, err := w.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// AuditDone reads the audit rows of plan planID, with the database clock:
// a row in flight (publishing, compensating) comes with its after_image
// (owner, lease, where to look its effect up).
func (w *Writer) AuditDone(ctx context.Context, auditTable, planID string) ([]sources.AuditDone, error) {
	t, err := qident(auditTable)
	if err != nil {
		return nil, err
	}
	rows, err := w.r.db.QueryContext(ctx, "SELECT action_index, outcome, biz_id, pipeline, updated_at, NOW(6),"+
		" CASE WHEN outcome IN (?, ?) THEN NULL ELSE after_image END FROM "+t+" WHERE plan_id = ?",
		sources.AuditApplied, sources.AuditPublished, planID)
	if err != nil {
		return nil, auditErr(auditTable, "read the audit", err, w.r)
	}
	defer rows.Close()
	var out []sources.AuditDone
	for rows.Next() {
		var d sources.AuditDone
		var after sql.NullString
		if err := rows.Scan(&d.ActionIndex, &d.Outcome, &d.BizID, &d.Pipeline, &d.UpdatedAt, &d.Now, &after); err != nil {
			return nil, err
		}
		if after.Valid {
			d.After = json.RawMessage(after.String)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// TouchAudit renews the lease of an action in flight (see sources.Store).
func (w *Writer) TouchAudit(ctx context.Context, auditTable, planID string, index int, outcome, owner string) (bool, error) {
	t, err := qident(auditTable)
	if err != nil {
		return false, err
	}
	r, err := w.r.db.ExecContext(ctx, "UPDATE "+t+" SET updated_at = NOW(6) WHERE plan_id = ? AND action_index = ? AND outcome = ?"+
		" AND JSON_UNQUOTE(JSON_EXTRACT(after_image, '$.owner')) = ?", planID, index, outcome, owner)
	if err != nil {
		return false, auditErr(auditTable, "renew the lease of an action in flight", err, w.r)
	}
	n, _ := r.RowsAffected()
	return n == 1, nil
}

// ClaimAudit makes an action in flight this apply's (see sources.Store).
func (w *Writer) ClaimAudit(ctx context.Context, auditTable, planID string, index int, outcome string, seen time.Time, after json.RawMessage) (bool, error) {
	t, err := qident(auditTable)
	if err != nil {
		return false, err
	}
	r, err := w.r.db.ExecContext(ctx, "UPDATE "+t+" SET after_image = ?, updated_at = NOW(6) WHERE plan_id = ? AND action_index = ? AND outcome = ? AND updated_at = ?",
		jsonText(after), planID, index, outcome, seen)
	if err != nil {
		return false, auditErr(auditTable, "claim an action in flight", err, w.r)
	}
	n, _ := r.RowsAffected()
	return n == 1, nil
}

// readOnlyVars are the server variables that make a server refuse writes:
// MySQL's read_only and super_read_only, and innodb_read_only (MariaDB has
// no super_read_only: a variable the server does not know is skipped).
var readOnlyVars = []string{"read_only", "super_read_only", "innodb_read_only"}

// ReadOnly lists the read-only variables of the write server that are ON.
func (w *Writer) ReadOnly(ctx context.Context) ([]string, error) { return readOnly(ctx, w.r) }

// readOnly reads readOnlyVars one at a time (an unknown one is an error
// of its own statement only).
func readOnly(ctx context.Context, r *Reader) ([]string, error) {
	var on []string
	for _, v := range readOnlyVars {
		var val sql.NullString
		err := r.db.QueryRowContext(ctx, "SELECT @@GLOBAL."+v).Scan(&val)
		switch {
		case serverErrorNumber(err) == errUnknownSystemVariable,
			err != nil && strings.Contains(err.Error(), "Unknown system variable"): // go-mysql-server says 1105
			continue
		case err != nil:
			if isConnError(err) {
				return on, r.connError(err)
			}
			return on, fmt.Errorf("read @@%s: %w", v, r.scrubErr(err))
		}
		if val.String == "1" || strings.EqualFold(val.String, "ON") {
			on = append(on, v)
		}
	}
	return on, nil
}

// errUnknownSystemVariable is the server's "Unknown system variable".
const errUnknownSystemVariable = 1193

// maxPlanID is the size of the audit tables' plan_id column (docs/repair.md).
const maxPlanID = 64

// RecordAttempt writes one attempt row, on its own connection (not in an
// action's transaction), values clipped to the columns' sizes.
func (w *Writer) RecordAttempt(ctx context.Context, attemptTable string, a sources.Attempt) error {
	t, err := qident(attemptTable)
	if err != nil {
		return err
	}
	_, err = w.r.db.ExecContext(ctx, "INSERT INTO "+t+" (plan_id, action_index, biz_id, operator, outcome, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, NOW(6))",
		clip(a.PlanID, maxPlanID), a.ActionIndex, clip(a.BizID, sources.MaxBizID), clip(a.Operator, sources.MaxOperator), a.Outcome, jsonText(a.Detail))
	if err != nil {
		return auditErr(attemptTable, "record the attempt", err, w.r)
	}
	return nil
}

// clip cuts s to at most n bytes, never inside a UTF-8 character (the
// audit columns are utf8mb4: half a character would be refused or
// mangled). This is the only place an operator name is clipped.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// auditErr names what failed on an audit table: a missing table is a
// *sources.NoAuditTableError, a connection failure a *ConnError.
func auditErr(table, what string, err error, r *Reader) error {
	switch {
	case isNoTable(err):
		return &sources.NoAuditTableError{Table: table}
	case isConnError(err):
		return r.connError(err)
	}
	return fmt.Errorf("%s: %w", what, r.scrubErr(err))
}

// writeTx is one transaction of a Writer.
type writeTx struct {
	w  *Writer
	tx *sql.Tx
}

func (t *writeTx) Commit() error   { return t.tx.Commit() }
func (t *writeTx) Rollback() error { return t.tx.Rollback() }

// fetch runs a statement in the transaction and reads at most limit rows.
func (t *writeTx) fetch(ctx context.Context, text string, limit int, args ...any) result {
	rows, err := t.tx.QueryContext(ctx, text, args...)
	if err != nil {
		return result{err: err}
	}
	return scan(rows, limit)
}

// LockState reads the state row FOR UPDATE with NOW(6).
func (t *writeTx) LockState(ctx context.Context, p *config.Pipeline, bizID string) (sources.StateRow, time.Time, error) {
	st := p.State
	if st == nil {
		return sources.StateRow{}, time.Time{}, nil
	}
	if err := validState(st); err != nil {
		return sources.StateRow{}, time.Time{}, err
	}
	q := config.QuoteIdent
	sel, cols := stateSelect(st, q)
	text := fmt.Sprintf("SELECT %s FROM %s AS s WHERE s.%s = ? FOR UPDATE", sel, q(st.Table), q(st.Key))
	res := t.fetch(ctx, text, 1, bizID)
	if res.err != nil {
		return sources.StateRow{}, time.Time{}, fmt.Errorf("read the state row: %w", t.w.r.scrubErr(res.err))
	}
	if len(res.rows) == 0 {
		return sources.StateRow{}, time.Time{}, nil
	}
	var ev sources.DBEvidence
	if err := readState(&ev, cols, res); err != nil {
		return sources.StateRow{}, time.Time{}, fmt.Errorf("read the state row: %w", err)
	}
	return ev.State, ev.Now, nil
}

// validIdents checks every non-empty identifier.
func validIdents(ids ...string) error {
	var bad []string
	for _, id := range ids {
		if id != "" && !config.ValidIdent(id) {
			bad = append(bad, fmt.Sprintf("%q", id))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("mysql: invalid identifier(s) %s", strings.Join(bad, ", "))
	}
	return nil
}

// validState checks every configured identifier of the state table.
func validState(st *config.State) error {
	return validIdents(st.Table, st.Key, st.Status, st.Version, st.Owner, st.LeaseUntil, st.Partition, st.Offset, st.MsgID, st.CreatedAt, st.UpdatedAt)
}

// LockIdempotency reads one idempotency record's action FOR UPDATE.
func (t *writeTx) LockIdempotency(ctx context.Context, p *config.Pipeline, key, bizID string) (string, bool, error) {
	id := p.Idempotency
	if id == nil {
		return "", false, errors.New("no idempotency table configured")
	}
	if err := validIdents(id.Table, id.Key, id.BizID, id.Action); err != nil {
		return "", false, err
	}
	where, args := recordWhere(id, key, bizID)
	text := fmt.Sprintf("SELECT %s FROM %s WHERE %s FOR UPDATE", config.QuoteIdent(id.Action), config.QuoteIdent(id.Table), where)
	res := t.fetch(ctx, text, 1, args...)
	if res.err != nil {
		return "", false, fmt.Errorf("read idempotency record %s: %w", key, t.w.r.scrubErr(res.err))
	}
	if len(res.rows) == 0 {
		return "", false, nil
	}
	return asString(res.rows[0][0]), true, nil
}

// Server errors of a locking read the server cannot lock (a UNION, a
// derived table, ...): the statement is then read without FOR UPDATE.
const (
	errParse           = 1064
	errWrongUsage      = 1221
	errNotSupportedYet = 1235
	errLockUnsupported = 3539
)

// withLock appends FOR UPDATE to an operator's SELECT unless it already
// locks. Comments do not count: "... -- not FOR UPDATE" does not lock. The
// clause goes on a line of its own: a trailing "-- comment" or "# comment"
// of the configured query would otherwise swallow it, and the guards would
// read rows nobody locked (docs/repair.md "Apply").
func withLock(q string) string {
	s := strings.TrimRight(strings.TrimSpace(q), ";")
	code, err := config.WithoutComments(s)
	if err != nil {
		code = s // the config checks refused such a query already
	}
	u := strings.ToUpper(strings.TrimRight(code, "; \t\r\n"))
	if strings.HasSuffix(u, "FOR UPDATE") || strings.HasSuffix(u, "LOCK IN SHARE MODE") || strings.HasSuffix(u, "FOR SHARE") {
		return s
	}
	return s + "\nFOR UPDATE"
}

// lockQuery runs a configured SELECT FOR UPDATE, or as it is when the
// server refuses to lock it, inside the same transaction.
func (t *writeTx) lockQuery(ctx context.Context, query, bizID string) result {
	res := t.fetch(ctx, withLock(query), sources.MaxLockedRows, bizID)
	if res.err != nil {
		switch serverErrorNumber(res.err) {
		case errParse, errWrongUsage, errNotSupportedYet, errLockUnsupported:
			res = t.fetch(ctx, query, sources.MaxLockedRows, bizID)
		}
	}
	if res.err != nil {
		res.err = t.w.r.scrubErr(res.err)
	}
	return res
}

// LockRows runs a step's evidence query under FOR UPDATE.
func (t *writeTx) LockRows(ctx context.Context, query, bizID string) (sources.LockedRows, error) {
	res := t.lockQuery(ctx, query, bizID)
	if res.err != nil {
		return sources.LockedRows{}, res.err
	}
	lr := sources.LockedRows{Columns: res.cols, Decimal: make([]bool, len(res.cols)), Values: res.rows}
	for i, ty := range res.types {
		lr.Decimal[i] = strings.TrimPrefix(ty, "UNSIGNED ") == "DECIMAL"
	}
	return lr, nil
}

// LockIntents runs a step's intent query under FOR UPDATE.
func (t *writeTx) LockIntents(ctx context.Context, query, bizID string) ([]sources.Intent, error) {
	res := t.lockQuery(ctx, query, bizID)
	if res.err != nil {
		return nil, res.err
	}
	return readIntents(res)
}

// LockEntity runs the entity query under FOR UPDATE.
func (t *writeTx) LockEntity(ctx context.Context, query, bizID string) (sources.EntityRow, error) {
	res := t.lockQuery(ctx, query, bizID)
	if res.err != nil {
		return sources.EntityRow{}, res.err
	}
	if len(res.rows) == 0 || len(res.rows[0]) == 0 {
		return sources.EntityRow{}, nil
	}
	return sources.EntityRow{Found: true, Status: asString(res.rows[0][0])}, nil
}

// LockAudit reads the operation's audit actions FOR UPDATE.
func (t *writeTx) LockAudit(ctx context.Context, auditTable, pipeline, bizID string) ([]sources.AuditAction, error) {
	tb, err := qident(auditTable)
	if err != nil {
		return nil, err
	}
	text := fmt.Sprintf("SELECT %s ORDER BY id LIMIT %d FOR UPDATE", auditSelect(tb), sources.MaxLockedRows)
	res := t.fetch(ctx, text, sources.MaxLockedRows, bizID, pipeline)
	if res.err != nil {
		return nil, auditErr(auditTable, "read the audit", res.err, t.w.r)
	}
	return readAudit(res)
}

// WriteState inserts or updates the state row.
func (t *writeTx) WriteState(ctx context.Context, p *config.Pipeline, bizID string, sw sources.StateWrite) (sources.Statement, error) {
	st := p.State
	if st == nil {
		return sources.Statement{}, errors.New("no state table configured")
	}
	if err := validState(st); err != nil {
		return sources.Statement{}, err
	}
	text, args := stateStatement(st, bizID, sw)
	return t.exec(ctx, text, args...)
}

// stateStatement builds the INSERT or the CAS UPDATE of a StateWrite.
func stateStatement(st *config.State, bizID string, sw sources.StateWrite) (string, []any) {
	q := config.QuoteIdent
	if sw.Insert {
		cols := []string{q(st.Key), q(st.Status)}
		vals := []string{"?", "?"}
		args := []any{bizID, sw.Status}
		add := func(col, val string, arg ...any) {
			if col != "" {
				cols = append(cols, q(col))
				vals = append(vals, val)
				args = append(args, arg...)
			}
		}
		if st.Version != "" {
			add(st.Version, "1")
		}
		if sw.MsgID != "" {
			add(st.MsgID, "?", sw.MsgID)
		}
		if sw.Partition != nil && sw.Offset != nil {
			add(st.Partition, "?", *sw.Partition)
			add(st.Offset, "?", *sw.Offset)
		}
		add(st.CreatedAt, "NOW(3)")
		add(st.UpdatedAt, "NOW(3)")
		return fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", q(st.Table), strings.Join(cols, ", "), strings.Join(vals, ", ")), args
	}
	var sets []string
	var args []any
	if sw.Release {
		sets = append(sets, q(st.Owner)+" = NULL")
		if st.LeaseUntil != "" {
			sets = append(sets, q(st.LeaseUntil)+" = NULL")
		}
	} else {
		sets = append(sets, q(st.Status)+" = ?")
		args = append(args, sw.Status)
	}
	if st.Version != "" {
		sets = append(sets, fmt.Sprintf("%s = %s + 1", q(st.Version), q(st.Version)))
	}
	if st.UpdatedAt != "" {
		sets = append(sets, q(st.UpdatedAt)+" = NOW(3)")
	}
	where := q(st.Key) + " = ?"
	args = append(args, bizID)
	if st.Version != "" && sw.Version != nil {
		where += " AND " + q(st.Version) + " = ?"
		args = append(args, *sw.Version)
	} else {
		where += " AND " + q(st.Status) + " = ?"
		args = append(args, sw.FromStatus)
	}
	if sw.Release {
		where += " AND " + q(st.Owner) + " = ?"
		args = append(args, sw.Owner)
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s", q(st.Table), strings.Join(sets, ", "), where), args
}

// exec runs one write and reports the rows it changed.
func (t *writeTx) exec(ctx context.Context, text string, args ...any) (sources.Statement, error) {
	r, err := t.tx.ExecContext(ctx, text, args...)
	if err != nil {
		return sources.Statement{SQL: oneLine(text)}, t.w.r.scrubErr(err)
	}
	n, _ := r.RowsAffected()
	return sources.Statement{SQL: oneLine(text), Rows: n}, nil
}

// oneLine collapses a statement's whitespace for display.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// FlipIdempotency flips one idempotency record under a CAS on from.
func (t *writeTx) FlipIdempotency(ctx context.Context, p *config.Pipeline, key, bizID, from, to string) (sources.Statement, error) {
	id := p.Idempotency
	if id == nil {
		return sources.Statement{}, errors.New("no idempotency table configured")
	}
	if err := validIdents(id.Table, id.Key, id.BizID, id.Action); err != nil {
		return sources.Statement{}, err
	}
	q := config.QuoteIdent
	where, args := recordWhere(id, key, bizID)
	if to == "" {
		// idempotency.reopen: delete (docs/repair.md#reopening-a-skipped-record).
		text := fmt.Sprintf("DELETE FROM %s WHERE %s AND %s = ?", q(id.Table), where, q(id.Action))
		return t.exec(ctx, text, append(args, from)...)
	}
	text := fmt.Sprintf("UPDATE %s SET %s = ? WHERE %s AND %s = ?", q(id.Table), q(id.Action), where, q(id.Action))
	return t.exec(ctx, text, append(append([]any{to}, args...), from)...)
}

// recordWhere is the condition that names one idempotency record: its key,
// and its biz_id when the table has that column (a table without one, seed
// 003's, is keyed by the msg id alone).
func recordWhere(id *config.Idempotency, key, bizID string) (string, []any) {
	q := config.QuoteIdent
	if id.BizID == "" {
		return q(id.Key) + " = ?", []any{key}
	}
	return q(id.Key) + " = ? AND " + q(id.BizID) + " = ?", []any{key, bizID}
}

// LockRecord reads the whole idempotency record key of bizID FOR UPDATE:
// every column, as the audit keeps the image of a record opctl deletes.
func (t *writeTx) LockRecord(ctx context.Context, p *config.Pipeline, key, bizID string) (sources.Row, bool, error) {
	id := p.Idempotency
	if id == nil {
		return sources.Row{}, false, errors.New("no idempotency table configured")
	}
	if err := validIdents(id.Table, id.Key, id.BizID, id.Action); err != nil {
		return sources.Row{}, false, err
	}
	where, args := recordWhere(id, key, bizID)
	res := t.fetch(ctx, fmt.Sprintf("SELECT * FROM %s WHERE %s FOR UPDATE", config.QuoteIdent(id.Table), where), 1, args...)
	if res.err != nil {
		return sources.Row{}, false, fmt.Errorf("read idempotency record %s: %w", key, t.w.r.scrubErr(res.err))
	}
	if len(res.rows) == 0 {
		return sources.Row{}, false, nil
	}
	return sources.Row{Columns: res.cols, Values: res.rows[0]}, true, nil
}

// Reverse binds and runs one reverse statement. DECIMAL values are bound as
// CAST(? AS DECIMAL(65,30)), so that -:delta and balance - :delta stay
// exact.
func (t *writeTx) Reverse(ctx context.Context, stmt, bizID string, rows sources.LockedRows, i int) (sources.Statement, error) {
	if i < 0 || i >= len(rows.Values) {
		return sources.Statement{}, fmt.Errorf("reverse: no evidence row %d", i)
	}
	var args []any
	var missing []string
	text, _, err := config.BindNamed(stmt, func(name string) string {
		if name == "biz_id" {
			args = append(args, bizID)
			return "?"
		}
		for j, c := range rows.Columns {
			if c != name {
				continue
			}
			v := rows.Values[i][j]
			args = append(args, v)
			if _, ok := v.(string); ok && rows.Decimal[j] {
				return "CAST(? AS DECIMAL(65,30))"
			}
			return "?"
		}
		missing = append(missing, name)
		return "?"
	})
	if err != nil {
		return sources.Statement{}, err
	}
	if len(missing) > 0 {
		return sources.Statement{}, fmt.Errorf("the evidence row has no column %s", strings.Join(missing, ", "))
	}
	res, err := t.exec(ctx, text, args...)
	res.SQL = oneLine(stmt)
	return res, err
}

// InsertAudit writes an action's audit row.
func (t *writeTx) InsertAudit(ctx context.Context, auditTable string, e sources.AuditEntry) error {
	tb, err := qident(auditTable)
	if err != nil {
		return err
	}
	text := "INSERT INTO " + tb +
		" (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, before_image, after_image, created_at, updated_at)" +
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6))"
	_, err = t.tx.ExecContext(ctx, text, e.PlanID, e.ActionIndex, e.BizID, e.Pipeline, e.Action, clip(e.Operator, sources.MaxOperator), e.Reason, e.Outcome,
		jsonText(e.Before), jsonText(e.After))
	switch {
	case err == nil:
		return nil
	case isDuplicateKey(err):
		return &sources.AuditExistsError{PlanID: e.PlanID, ActionIndex: e.ActionIndex}
	}
	return auditErr(auditTable, "write the audit row", err, t.w.r)
}

// jsonText is a JSON value as the text of a JSON column ("null" for none,
// sources.JSONOrNull).
func jsonText(raw json.RawMessage) string { return string(sources.JSONOrNull(raw)) }

// SetAuditOutcome moves an action's audit row from one outcome to the next.
func (t *writeTx) SetAuditOutcome(ctx context.Context, auditTable, planID string, index int, from, to string, after json.RawMessage) error {
	tb, err := qident(auditTable)
	if err != nil {
		return err
	}
	r, err := t.tx.ExecContext(ctx, "UPDATE "+tb+" SET outcome = ?, after_image = ?, updated_at = NOW(6) WHERE plan_id = ? AND action_index = ? AND outcome = ?",
		to, jsonText(after), planID, index, from)
	if err != nil {
		return auditErr(auditTable, "update the audit row", err, t.w.r)
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return fmt.Errorf("the audit row of action %d is no longer %q", index, from)
	}
	return nil
}

// DeleteAudit removes an action's audit row that still has outcome.
func (t *writeTx) DeleteAudit(ctx context.Context, auditTable, planID string, index int, outcome string) error {
	tb, err := qident(auditTable)
	if err != nil {
		return err
	}
	if _, err := t.tx.ExecContext(ctx, "DELETE FROM "+tb+" WHERE plan_id = ? AND action_index = ? AND outcome = ?", planID, index, outcome); err != nil {
		return auditErr(auditTable, "delete the audit row", err, t.w.r)
	}
	return nil
}
