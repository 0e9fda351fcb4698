package mysql

import (
	"testing"
	"time"

	"github.com/opctl-dev/opctl/lab/testenv"
	"github.com/opctl-dev/opctl/sources/config"
)

// The pipelines below mirror testdata/config/*.yaml (the config loader is
// built elsewhere; these tests must not depend on it).

func settlementPipeline() *config.Pipeline {
	return &config.Pipeline{
		Name: "settlement", Topic: "settlement-event", Group: "settlement-consumer",
		Partitioner: "murmur2", MessageKey: "{biz_id}", OffsetReset: "latest",
		State: &config.State{
			Table: "biz_operation", Key: "biz_id", Status: "status", Version: "version",
			Owner: "owner", LeaseUntil: "lease_until", Partition: "src_partition",
			Offset: "src_offset", MsgID: "msg_id", CreatedAt: "created_at", UpdatedAt: "updated_at",
			Initial: []string{"INIT"}, Terminal: []string{"DONE"}, Failed: []string{"FAILED"},
		},
		Steps: []config.Step{
			{
				Name: "debit", Kind: config.KindLocal, DoneStatus: "DEBIT_DONE",
				Evidence: "SELECT j.id, j.account_id, j.delta, j.created_at FROM balance_journal j " +
					"WHERE j.biz_id = ? AND j.kind = 'DEBIT' " +
					"AND NOT EXISTS (SELECT 1 FROM balance_journal r WHERE r.kind = 'REVERSAL' AND r.reverses_id = j.id)",
				Scan: &config.Scan{Table: "balance_journal", Key: "biz_id", Time: "created_at"},
				Reverse: []string{
					"INSERT INTO balance_journal (biz_id, account_id, delta, kind, reverses_id, created_at) VALUES (:biz_id, :account_id, -:delta, 'REVERSAL', :id, NOW(3))",
					"UPDATE account_balance SET balance = balance - :delta WHERE account_id = :account_id",
				},
			},
			{
				Name: "ledger", Kind: config.KindLocal, DoneStatus: "LEDGER_DONE",
				Evidence: "SELECT id, direction, amount, created_at FROM ledger_entry WHERE biz_order_id = ?",
				Scan:     &config.Scan{Table: "ledger_entry", Key: "biz_order_id", Time: "created_at"},
			},
			{
				Name: "notify", Kind: config.KindRemote, DoneStatus: "DONE",
				Intent: "SELECT request_id, sent_at, acked_at, result FROM step_intent WHERE biz_id = ? AND step = 'notify'",
			},
		},
	}
}

func fulfilmentPipeline() *config.Pipeline {
	return &config.Pipeline{
		Name: "fulfilment", Topic: "order-fulfilment", Group: "fulfilment-consumer",
		Partitioner: "murmur2", MessageKey: "{biz_id}",
		State: &config.State{
			Table: "fulfil_state", Key: "biz_id", Status: "status", Version: "version",
			Owner: "owner", LeaseUntil: "lease_until", Partition: "src_partition",
			Offset: "src_offset", MsgID: "msg_id", CreatedAt: "created_at", UpdatedAt: "updated_at",
			Initial: []string{"RECEIVED"}, Terminal: []string{"DONE"}, Failed: []string{"ROLLED_BACK"},
		},
		Steps: []config.Step{
			{
				Name: "order_row", Kind: config.KindLocal, DoneStatus: "DB_WRITTEN",
				Evidence: "SELECT id, status, created_at FROM fulfil_order WHERE biz_id = ?",
			},
			{
				Name: "wms_lock", Kind: config.KindRemote, DoneStatus: "WMS_CONFIRMED",
				Probe: "http://127.0.0.1:8082/wms/locks?biz_id={biz_id}",
			},
			{
				Name: "logistics", Kind: config.KindRemote, DoneStatus: "LOGISTICS_CONFIRMED",
				Intent: "SELECT request_id, sent_at, acked_at, result FROM step_intent WHERE biz_id = ? AND step = 'logistics'",
			},
			{
				Name: "notice", Kind: config.KindOutbox, DoneStatus: "DONE",
				Evidence: "SELECT id, kind, created_at FROM outbox WHERE biz_id = ? AND kind = 'notice'",
			},
		},
	}
}

func skipPipeline() *config.Pipeline {
	return &config.Pipeline{
		Name: "orders", Topic: "order-event", Group: "order-consumer",
		Partitioner: "murmur2", MessageKey: "{biz_id}",
		Steps: []config.Step{
			{
				Name: "points", Kind: config.KindLocal,
				Evidence: "SELECT id, msg_id, points, created_at FROM points_grant WHERE order_id = ?",
				Scan:     &config.Scan{Table: "points_grant", Key: "order_id", Time: "created_at"},
			},
		},
		Idempotency: &config.Idempotency{
			Table: "consumer_idempotency", Key: "msg_id", BizID: "biz_id", Action: "action", CreatedAt: "created_at",
		},
		Entity: &config.Entity{
			Query:      "SELECT status FROM orders WHERE order_id = ?",
			Lifecycle:  []string{"CREATED", "PAID", "SHIPPED", "DELIVERED"},
			Cancels:    []string{"REFUNDED", "CANCELLED"},
			EffectStep: "points",
		},
	}
}

// auditDDL is docs/repair.md's audit table.
const auditDDL = `CREATE TABLE opctl_audit (
  id BIGINT AUTO_INCREMENT PRIMARY KEY,
  plan_id CHAR(64) NOT NULL, action_index INT NOT NULL,
  biz_id VARCHAR(512) NOT NULL, pipeline VARCHAR(64) NOT NULL, action VARCHAR(32) NOT NULL,
  operator VARCHAR(128) NOT NULL, reason VARCHAR(1024) NOT NULL,
  outcome VARCHAR(16) NOT NULL,
  before_image JSON NULL, after_image JSON NULL,
  created_at DATETIME(6) NOT NULL, updated_at DATETIME(6) NOT NULL,
  UNIQUE KEY uk_plan_action (plan_id, action_index), KEY ix_biz (biz_id, created_at));`

// incident loads one testdata schema and incident into a fresh database and
// opens a Reader on it.
func incident(t testing.TB, name string) (*testenv.DB, *Reader) {
	t.Helper()
	db := testenv.MySQL(t)
	db.ExecFile(t, "../../testdata/schema/"+name+".sql")
	db.ExecFile(t, "../../testdata/incidents/"+name+".sql")
	r, err := Open(db.DSN, 10*time.Second)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return db, r
}
