-- Kept identical to testdata/schema/seed000.sql (lab TestSeedSchemaIsTestdata checks it):
-- the lab loads it into its database <lab database>_seed000 when the server
-- keeps a ROW binlog.
-- Seed 000 exactly as its author describes it (settlement: debit -> ledger ->
-- risk/clearing RPC): the debit is a plain guarded UPDATE of account_balance
--   UPDATE account_balance SET balance = balance - ? WHERE account_id = ? AND balance >= ?
-- with no journal and no idempotency key; ledger_entry's unique
-- (biz_order_id, direction) is the only idempotency there is; no state table.
-- A double debit leaves one row changed twice and no table that says so: only
-- the binlog does (testdata/config/seed000.yaml reads it). Runs on MySQL 8 and
-- MariaDB >= 10.6 with log_bin on and binlog_format=ROW.
CREATE TABLE account_balance (
  account_id BIGINT        NOT NULL PRIMARY KEY,
  balance    DECIMAL(18,2) NOT NULL
) DEFAULT CHARSET=utf8mb4;
CREATE TABLE ledger_entry (
  id           BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_order_id VARCHAR(64)   NOT NULL,
  direction    VARCHAR(8)    NOT NULL,
  amount       DECIMAL(18,2) NOT NULL,
  created_at   DATETIME(3)   NOT NULL,
  UNIQUE KEY uk_biz_dir (biz_order_id, direction),
  KEY ix_created (created_at)
) DEFAULT CHARSET=utf8mb4;
