package mysql

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/opctl-dev/opctl/sources"
)

// MaxAuditScan bounds the audit rows AuditByOperation reads for one
// pipeline.
const MaxAuditScan = 100000

// AuditByOperation reads the audit rows of one pipeline, grouped by
// biz_id, oldest first (the newest MaxAuditScan rows), with what tells a plan that stopped part-way
// (plan_id, action_index, action, outcome, plan_actions) and without the
// rest of their after_image: reconcile looks for the operations whose
// newest plan stopped (docs/reconcile.md). A missing audit table reads as
// no rows.
func (r *Reader) AuditByOperation(ctx context.Context, auditTable, pipeline string) (map[string][]sources.AuditAction, error) {
	t, err := qident(auditTable)
	if err != nil {
		return nil, err
	}
	// The newest rows first, so that a cap never cuts off the newest plans
	// (the ones that matter); put back in id order below.
	text := fmt.Sprintf("SELECT biz_id, plan_id, action_index, action, outcome, JSON_EXTRACT(after_image, '$.plan_actions') FROM %s WHERE pipeline = ? ORDER BY id DESC LIMIT %d", t, MaxAuditScan)
	rows, done, err := r.query(ctx, text, pipeline)
	if err != nil {
		if isNoTable(err) {
			return map[string][]sources.AuditAction{}, nil
		}
		return nil, r.queryError("read the audit of pipeline "+pipeline, err)
	}
	defer done()
	out := map[string][]sources.AuditAction{}
	for rows.Next() {
		var biz, plan, action, outcome string
		var index int
		var n []byte
		if err := rows.Scan(&biz, &plan, &index, &action, &outcome, &n); err != nil {
			return nil, r.queryError("read the audit of pipeline "+pipeline, err)
		}
		a := sources.AuditAction{PlanID: plan, ActionIndex: index, Action: action, Outcome: outcome}
		if v, err := strconv.Atoi(strings.Trim(string(n), `"`)); err == nil {
			a.PlanActions = v
		}
		out[biz] = append(out[biz], a)
	}
	if err := rows.Err(); err != nil {
		return nil, r.queryError("read the audit of pipeline "+pipeline, err)
	}
	for _, rows := range out {
		slices.Reverse(rows)
	}
	return out, nil
}

// PlanBody returns the plan recorded with the audit rows of the plan whose
// id is planID, or starts with it (at least 12 characters): the plan file
// an apply wrote into every audit row's after_image (docs/repair.md
// "Finishing a plan"). found is false when no row of such a plan holds
// one; a prefix that names several plans is an error.
func (r *Reader) PlanBody(ctx context.Context, auditTable, planID string) (body json.RawMessage, id string, found bool, err error) {
	t, err := qident(auditTable)
	if err != nil {
		return nil, "", false, err
	}
	cond, arg := "plan_id = ?", planID
	if len(planID) < 64 {
		cond, arg = "plan_id LIKE ?", escapeLike(planID)+"%"
	}
	ids, done, err := r.query(ctx, fmt.Sprintf("SELECT DISTINCT plan_id FROM %s WHERE %s LIMIT 2", t, cond), arg)
	if err != nil {
		return nil, "", false, r.queryError("find plan "+planID+" in "+auditTable, err)
	}
	var names []string
	for ids.Next() {
		var s string
		if err := ids.Scan(&s); err != nil {
			done()
			return nil, "", false, r.queryError("find plan "+planID+" in "+auditTable, err)
		}
		names = append(names, s)
	}
	done()
	switch len(names) {
	case 0:
		return nil, "", false, nil
	case 2:
		return nil, "", false, fmt.Errorf("plan id %s names several plans in %s (%s, %s, ...): give more of it", planID, auditTable, names[0][:12], names[1][:12])
	}
	id = names[0]
	rows, done, err := r.query(ctx, fmt.Sprintf("SELECT after_image FROM %s WHERE plan_id = ? ORDER BY id", t), id)
	if err != nil {
		return nil, "", false, r.queryError("read plan "+id+" from "+auditTable, err)
	}
	defer done()
	for rows.Next() {
		var img []byte
		if err := rows.Scan(&img); err != nil {
			return nil, "", false, r.queryError("read plan "+id+" from "+auditTable, err)
		}
		var a struct {
			Plan json.RawMessage `json:"plan"`
		}
		if json.Unmarshal(img, &a) == nil && len(a.Plan) > 0 && string(a.Plan) != "null" {
			return a.Plan, id, true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, "", false, r.queryError("read plan "+id+" from "+auditTable, err)
	}
	return nil, id, false, nil
}
