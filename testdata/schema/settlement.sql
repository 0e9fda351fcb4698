-- Seed 000 (settlement: debit -> ledger -> risk/clearing notify), with the state
-- row and intents of docs/design.md. Runs on MySQL 8 and MariaDB >= 10.6.
CREATE TABLE biz_operation (
  biz_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
  status        VARCHAR(32)  NOT NULL,
  version       INT UNSIGNED NOT NULL DEFAULT 0,
  owner         VARCHAR(128) NULL,
  lease_until   DATETIME(3)  NULL,
  msg_id        VARCHAR(64)  NOT NULL,
  src_partition INT          NULL,
  src_offset    BIGINT       NULL,
  attempts      INT          NOT NULL DEFAULT 0,
  last_error    VARCHAR(512) NULL,
  created_at    DATETIME(3)  NOT NULL,
  updated_at    DATETIME(3)  NOT NULL,
  KEY ix_status_updated (status, updated_at)
);
CREATE TABLE account_balance (
  account_id BIGINT        NOT NULL PRIMARY KEY,
  balance    DECIMAL(18,2) NOT NULL
);
CREATE TABLE balance_journal (
  id          BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id      VARCHAR(64)   NOT NULL,
  account_id  BIGINT        NOT NULL,
  delta       DECIMAL(18,2) NOT NULL,
  kind        VARCHAR(16)   NOT NULL,
  reverses_id BIGINT        NOT NULL DEFAULT 0,
  created_at  DATETIME(3)   NOT NULL,
  KEY ix_biz (biz_id, kind),
  KEY ix_created (created_at)
);
CREATE TABLE ledger_entry (
  id           BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_order_id VARCHAR(64)   NOT NULL,
  direction    VARCHAR(8)    NOT NULL,
  amount       DECIMAL(18,2) NOT NULL,
  created_at   DATETIME(3)   NOT NULL,
  UNIQUE KEY uk_biz_dir (biz_order_id, direction)
);
CREATE TABLE IF NOT EXISTS step_intent (
  request_id VARCHAR(96) NOT NULL PRIMARY KEY,
  biz_id     VARCHAR(64) NOT NULL,
  step       VARCHAR(32) NOT NULL,
  attempt    INT         NOT NULL,
  sent_at    DATETIME(3) NOT NULL,
  acked_at   DATETIME(3) NULL,
  result     VARCHAR(32) NULL,
  KEY ix_biz_step (biz_id, step)
);
