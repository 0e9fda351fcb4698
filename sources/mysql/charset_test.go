package mysql

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/opctl-dev/opctl/sources/config"
)

// TestIDTheKeyColumnCannotHold: an id with characters the key column's
// character set does not hold ('支付-1' against latin1) is an id no row
// has: every query of the read (state with its clock, evidence, intents,
// idempotency, entity, and the batched reads reconcile and the watch use) answers "no
// row", never an error. Before, the server's "Illegal mix of collations"
// made each query fail and the verdict READ_ERROR (exit 6) instead of
// NOT_FOUND. A query's own mix of collations (two columns) stays an error.
func TestIDTheKeyColumnCannotHold(t *testing.T) {
	t.Parallel()
	db, r := incident(t, "settlement")
	db.ExecFile(t, "../../testdata/schema/skip.sql")
	db.Exec(t, auditDDL)
	for _, s := range []string{
		"ALTER TABLE biz_operation MODIFY biz_id VARCHAR(64) CHARACTER SET latin1 NOT NULL",
		"ALTER TABLE balance_journal MODIFY biz_id VARCHAR(64) CHARACTER SET latin1",
		"ALTER TABLE ledger_entry MODIFY biz_order_id VARCHAR(64) CHARACTER SET latin1",
		"ALTER TABLE step_intent MODIFY biz_id VARCHAR(64) CHARACTER SET latin1",
		"ALTER TABLE consumer_idempotency MODIFY biz_id VARCHAR(64) CHARACTER SET latin1 NOT NULL",
		"ALTER TABLE orders MODIFY order_id VARCHAR(64) CHARACTER SET latin1 NOT NULL",
		"ALTER TABLE points_grant MODIFY order_id VARCHAR(64) CHARACTER SET latin1 NOT NULL",
		"INSERT INTO biz_operation (biz_id, status, version, msg_id, created_at, updated_at) VALUES ('PAY-é', 'INIT', 1, 'm-é', NOW(3), NOW(3))",
	} {
		db.Exec(t, s)
	}
	ctx := context.Background()
	for _, p := range []*config.Pipeline{settlementPipeline(), skipPipeline()} {
		t.Run(p.Name, func(t *testing.T) {
			for _, id := range []string{"支付-1", "PAY-😀"} {
				ev, err := r.ReadOperation(ctx, p, "opctl_audit", id)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				if ev.State.Found || ev.Now.IsZero() && p.State != nil || len(ev.Idempotency) != 0 || ev.Entity != nil && ev.Entity.Found {
					t.Errorf("%s: state %+v, now %v, idempotency %v, entity %+v; want nothing found, with the clock", id, ev.State, ev.Now, ev.Idempotency, ev.Entity)
				}
				for _, s := range ev.Steps {
					if s.Err != "" || len(s.Rows) != 0 || len(s.Intents) != 0 {
						t.Errorf("%s: step %s: err %q, %d rows, %d intents", id, s.Name, s.Err, len(s.Rows), len(s.Intents))
					}
				}
			}
			// The batched read of reconcile: ids the column holds are read
			// as ever beside those it cannot.
			ids := []string{"PAY-1", "支付-1", "PAY-é", "PAY-2", "订单-9"}
			evs, errs, err := r.ReadOperations(ctx, p, "opctl_audit", ids)
			if err != nil {
				t.Fatal(err)
			}
			for i, id := range ids {
				if errs[i] != nil {
					t.Errorf("batch %s: %v", id, errs[i])
				}
				for _, s := range evs[i].Steps {
					if s.Err != "" {
						t.Errorf("batch %s: step %s: %s", id, s.Name, s.Err)
					}
				}
				single, _ := r.ReadOperation(ctx, p, "opctl_audit", id)
				if evs[i].State.Found != single.State.Found || len(evs[i].Steps) != len(single.Steps) {
					t.Errorf("batch %s: state found %v, alone %v", id, evs[i].State.Found, single.State.Found)
				}
			}
			if p.State != nil && (!evs[0].State.Found || !evs[2].State.Found || evs[1].State.Found) {
				t.Errorf("batch: found %v %v %v, want PAY-1 and PAY-é, not 支付-1", evs[0].State.Found, evs[1].State.Found, evs[2].State.Found)
			}
			// The watch's hybrid read: each operation exactly as alone.
			evs, errs, err = r.ReadOperationsHybrid(ctx, p, "opctl_audit", ids)
			if err != nil {
				t.Fatal(err)
			}
			sameAsOne(t, r, p, "opctl_audit", ids, evs, errs)
		})
	}

	// Two columns of different collations compared by the query itself:
	// an error for every id, a non-ASCII one included.
	p := settlementPipeline()
	p.Steps[0].Evidence = "SELECT version FROM biz_operation s WHERE s.msg_id COLLATE utf8mb4_bin = s.status COLLATE utf8mb4_general_ci AND s.biz_id = ?"
	for _, id := range []string{"PAY-1", "支付-1"} {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		ev, err := r.ReadOperation(ctx, p, "", id)
		cancel()
		if err != nil || !strings.Contains(ev.Steps[0].Err, "Illegal mix of collations") {
			t.Errorf("%s: the query's own mix of collations: step error %q (%v), want it kept", id, ev.Steps[0].Err, err)
		}
	}
}
