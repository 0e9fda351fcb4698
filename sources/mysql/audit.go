package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/opctl-dev/opctl/sources"
	"github.com/opctl-dev/opctl/sources/config"
)

// ReadAudit reads both audit tables (config audit.table and its _attempt
// table) on the read path (a SELECT-only user is enough): the newest Limit
// rows of each matching the filter, returned oldest first. A missing table
// is a *sources.NoAuditTableError, which says how to create it.
func (r *Reader) ReadAudit(ctx context.Context, audit config.Audit, f sources.AuditFilter) (*sources.AuditLog, error) {
	db := r.db
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
	log := &sources.AuditLog{Actions: []sources.AuditRow{}, Attempts: []sources.AttemptRow{}}

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
	if err := validIdents(table, audit.AttemptTable()); err != nil {
		return nil, err
	}
	text := fmt.Sprintf("SELECT id, plan_id, action_index, biz_id, pipeline, action, operator, reason, outcome, before_image, after_image, created_at, updated_at FROM %s%s ORDER BY id DESC LIMIT %d",
		config.QuoteIdent(table), acond, limit)
	rows, err := db.QueryContext(ctx, text, aargs...)
	if err != nil {
		return nil, auditErr(table, "read the audit", err, r)
	}
	for rows.Next() {
		var row sources.AuditRow
		var bi, ai sql.NullString
		if err := rows.Scan(&row.ID, &row.PlanID, &row.ActionIndex, &row.BizID, &row.Pipeline, &row.Action, &row.Operator, &row.Reason, &row.Outcome, &bi, &ai, &row.CreatedAt, &row.UpdatedAt); err != nil {
			rows.Close()
			return nil, err
		}
		row.BeforeImage, row.AfterImage = rawJSON(bi), rawJSON(ai)
		log.Actions = append(log.Actions, row)
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
		return nil, auditErr(atable, "read the audit attempts", err, r)
	}
	defer rows.Close()
	for rows.Next() {
		var row sources.AttemptRow
		var d sql.NullString
		if err := rows.Scan(&row.ID, &row.PlanID, &row.ActionIndex, &row.BizID, &row.Operator, &row.Outcome, &d, &row.CreatedAt); err != nil {
			return nil, err
		}
		row.Detail = rawJSON(d)
		log.Attempts = append(log.Attempts, row)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(log.Actions)
	slices.Reverse(log.Attempts)
	return log, nil
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
