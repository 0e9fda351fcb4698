package repair

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
	mysqlsrc "github.com/opctl-dev/opctl/sources/mysql"
)

// noAuditTable explains a missing audit table.
func noAuditTable(table string) error {
	return fmt.Errorf("the audit table %s does not exist on the write database: create it with 'opctl schema apply --audit'", table)
}

// readDone reads the audit outcome of each action of the plan already
// recorded (a crash, or a second apply), on the write database.
func (a *Applier) readDone(ctx context.Context, x *applyRun) (map[int]string, error) {
	text := "SELECT action_index, outcome, biz_id, pipeline FROM " + config.QuoteIdent(x.auditTable) + " WHERE plan_id = ?"
	rows, err := a.DB.QueryContext(ctx, text, x.plan.ID)
	if err != nil {
		if mysqlsrc.IsNoTable(err) {
			return nil, noAuditTable(x.auditTable)
		}
		return nil, fmt.Errorf("read the audit: %w", err)
	}
	defer rows.Close()
	done := map[int]string{}
	for rows.Next() {
		var (
			idx                    int
			outcome, biz, pipeline string
		)
		if err := rows.Scan(&idx, &outcome, &biz, &pipeline); err != nil {
			return nil, err
		}
		if biz != x.plan.BizID || pipeline != x.plan.Pipeline {
			return nil, &RefusedError{Code: CodeTampered, Detail: fmt.Sprintf("the audit has plan %s recorded for %s/%s, not %s/%s", x.plan.Short(), pipeline, biz, x.plan.Pipeline, x.plan.BizID)}
		}
		done[idx] = outcome
	}
	return done, rows.Err()
}

// insertAudit writes an action's audit row in its transaction. A duplicate
// (plan_id, action_index) means another apply recorded it first.
func (x *applyRun) insertAudit(ctx context.Context, tx *sql.Tx, act Action, outcome string, before, after map[string]any) error {
	bi, err := json.Marshal(before)
	if err != nil {
		return err
	}
	ai, err := json.Marshal(after)
	if err != nil {
		return err
	}
	text := "INSERT INTO " + config.QuoteIdent(x.auditTable) +
		" (plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, before_image, after_image, created_at, updated_at)" +
		" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6))"
	_, err = tx.ExecContext(ctx, text, x.plan.ID, act.Index, x.plan.BizID, x.plan.Pipeline, act.Type, x.operator, x.plan.Reason, outcome, string(bi), string(ai))
	switch {
	case err == nil:
		return nil
	case mysqlsrc.IsDuplicateKey(err):
		return errConcurrent
	case mysqlsrc.IsNoTable(err):
		return noAuditTable(x.auditTable)
	}
	return fmt.Errorf("write the audit row: %w", err)
}

// recordAttempt writes an attempt that changed nothing (dry_run,
// guard_failed, stale, error) to the attempt table. Failing to record it
// does not change the apply's outcome.
func (x *applyRun) recordAttempt(ctx context.Context, index int, outcome string, detail map[string]any) {
	if x.a.DB == nil {
		return
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return
	}
	text := "INSERT INTO " + config.QuoteIdent(x.attempts) + " (plan_id, action_index, biz_id, operator, outcome, detail, created_at) VALUES (?, ?, ?, ?, ?, ?, NOW(6))"
	planID := x.plan.ID
	if len(planID) > 64 {
		planID = planID[:64]
	}
	biz := x.plan.BizID
	if len(biz) > 512 {
		biz = biz[:512]
	}
	// Not the caller's context: an interrupted apply still records why.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := x.a.DB.ExecContext(cctx, text, planID, index, biz, x.operator, outcome, string(b)); err == nil && x.a.Mirror != nil {
		row := map[string]any{"table": x.attempts, "plan_id": planID, "action_index": index, "biz_id": biz, "operator": x.operator,
			"outcome": outcome, "detail": json.RawMessage(b), "at": time.Now().UTC().Format(time.RFC3339Nano)}
		if line, err := json.Marshal(row); err == nil {
			mirrorMu.Lock()
			_, _ = x.a.Mirror.Write(append(line, '\n'))
			mirrorMu.Unlock()
		}
	}
}

// AuditFilter selects audit rows. Empty fields do not filter.
type AuditFilter struct {
	BizID    string
	PlanID   string
	Pipeline string
	// Limit bounds the rows read from each table (default 100).
	Limit int
}

// AuditRow is one row of the audit table: an action that took effect.
type AuditRow struct {
	ID          int64           `json:"id"`
	PlanID      string          `json:"plan_id"`
	ActionIndex int             `json:"action_index"`
	BizID       string          `json:"biz_id"`
	Pipeline    string          `json:"pipeline"`
	Action      string          `json:"action"`
	Operator    string          `json:"operator"`
	Reason      string          `json:"reason"`
	Outcome     string          `json:"outcome"`
	BeforeImage json.RawMessage `json:"before_image"`
	AfterImage  json.RawMessage `json:"after_image"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
}

// AttemptRow is one row of the attempt table: an attempt that changed
// nothing.
type AttemptRow struct {
	ID          int64           `json:"id"`
	PlanID      string          `json:"plan_id"`
	ActionIndex int             `json:"action_index"`
	BizID       string          `json:"biz_id"`
	Operator    string          `json:"operator"`
	Outcome     string          `json:"outcome"`
	Detail      json.RawMessage `json:"detail"`
	CreatedAt   time.Time       `json:"created_at"`
}

// AuditLog is what ReadAudit returns, oldest first in each list.
type AuditLog struct {
	Actions  []AuditRow   `json:"actions"`
	Attempts []AttemptRow `json:"attempts"`
}

// Queryer is what ReadAudit reads with (*sql.DB, *sql.Tx).
type Queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// ReadAudit reads both audit tables (config audit.table and its _attempt
// table) with a SELECT-only user: the newest Limit rows of each matching
// the filter, returned oldest first. A missing table is an error that says
// how to create it.
func ReadAudit(ctx context.Context, db Queryer, audit config.Audit, f AuditFilter) (*AuditLog, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	var where []string
	var args []any
	if f.BizID != "" {
		where = append(where, "biz_id = ?")
		args = append(args, f.BizID)
	}
	if f.PlanID != "" {
		if len(f.PlanID) < 64 {
			where = append(where, "plan_id LIKE ?")
			args = append(args, escapeLike(f.PlanID)+"%")
		} else {
			where = append(where, "plan_id = ?")
			args = append(args, f.PlanID)
		}
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	log := &AuditLog{Actions: []AuditRow{}, Attempts: []AttemptRow{}}

	acond, aargs := cond, args
	if f.Pipeline != "" {
		if acond == "" {
			acond = " WHERE pipeline = ?"
		} else {
			acond += " AND pipeline = ?"
		}
		aargs = append(append([]any{}, args...), f.Pipeline)
	}
	table := audit.AuditTable()
	text := fmt.Sprintf("SELECT id, plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, before_image, after_image, created_at, updated_at FROM %s%s ORDER BY id DESC LIMIT %d",
		config.QuoteIdent(table), acond, limit)
	rows, err := db.QueryContext(ctx, text, aargs...)
	if err != nil {
		if mysqlsrc.IsNoTable(err) {
			return nil, fmt.Errorf("the audit table %s does not exist: create it with 'opctl schema apply --audit'", table)
		}
		return nil, fmt.Errorf("read the audit: %w", err)
	}
	for rows.Next() {
		var r AuditRow
		var bi, ai sql.NullString
		if err := rows.Scan(&r.ID, &r.PlanID, &r.ActionIndex, &r.BizID, &r.Pipeline, &r.Action, &r.Operator, &r.Reason, &r.Outcome, &bi, &ai, &r.CreatedAt, &r.UpdatedAt); err != nil {
			rows.Close()
			return nil, err
		}
		r.BeforeImage, r.AfterImage = rawJSON(bi), rawJSON(ai)
		log.Actions = append(log.Actions, r)
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, err
	}
	rows.Close()

	atable := audit.AttemptTable()
	text = fmt.Sprintf("SELECT id, plan_id, action_index, biz_id, operator, outcome, detail, created_at FROM %s%s ORDER BY id DESC LIMIT %d",
		config.QuoteIdent(atable), cond, limit)
	rows, err = db.QueryContext(ctx, text, args...)
	if err != nil {
		if mysqlsrc.IsNoTable(err) {
			return nil, fmt.Errorf("the audit table %s does not exist: create it with 'opctl schema apply --audit'", atable)
		}
		return nil, fmt.Errorf("read the audit attempts: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r AttemptRow
		var d sql.NullString
		if err := rows.Scan(&r.ID, &r.PlanID, &r.ActionIndex, &r.BizID, &r.Operator, &r.Outcome, &d, &r.CreatedAt); err != nil {
			return nil, err
		}
		r.Detail = rawJSON(d)
		log.Attempts = append(log.Attempts, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	reverse(log.Actions)
	reverse(log.Attempts)
	return log, nil
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

func rawJSON(s sql.NullString) json.RawMessage {
	if !s.Valid || s.String == "" {
		return json.RawMessage("null")
	}
	if !json.Valid([]byte(s.String)) {
		b, _ := json.Marshal(s.String)
		return b
	}
	return json.RawMessage(s.String)
}
