-- Seed 000 with the table its author proposes (plan B): biz_operation, one row
-- per operation, its status advanced after each step. Load after
-- testdata/schema/seed000.sql; use with testdata/config/seed000_state.yaml.
CREATE TABLE biz_operation (
  biz_id          VARCHAR(64)  NOT NULL PRIMARY KEY,
  status          ENUM('INIT','DEBIT_DONE','LEDGER_DONE','NOTIFY_DONE','DONE') NOT NULL,
  idempotency_key VARCHAR(128) NOT NULL,
  created_at      DATETIME(3)  NOT NULL,
  updated_at      DATETIME(3)  NOT NULL,
  UNIQUE KEY uk_idem (idempotency_key),
  KEY ix_status_updated (status, updated_at)
) DEFAULT CHARSET=utf8mb4;
