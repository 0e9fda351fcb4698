-- The incident lab's tables: one set per pipeline, so that `opctl where <id>`
-- without --pipeline finds each operation in exactly one pipeline.
-- Naive pipelines (settlement, fulfilment, orders) follow the seeds' designs,
-- bugs included; anchored pipelines follow docs/design.md.
-- Runs on MySQL 8, MariaDB >= 10.6 and go-mysql-server (lab/demo).

-- Shared business tables.
CREATE TABLE account_balance (
  account_id BIGINT        NOT NULL PRIMARY KEY,
  balance    DECIMAL(18,2) NOT NULL
);
CREATE TABLE orders (
  order_id   VARCHAR(64) NOT NULL PRIMARY KEY,
  status     VARCHAR(32) NOT NULL,
  updated_at DATETIME(3) NOT NULL
);

-- settlement (naive, seed 000): unguarded debit; a state row written after
-- each effect in its own statement and never read back on a redelivery.
CREATE TABLE biz_operation (
  biz_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
  status        VARCHAR(32)  NOT NULL,
  version       INT          NOT NULL DEFAULT 0,
  msg_id        VARCHAR(64)  NOT NULL,
  src_partition INT          NOT NULL,
  src_offset    BIGINT       NOT NULL,
  created_at    DATETIME(3)  NOT NULL,
  updated_at    DATETIME(3)  NOT NULL,
  KEY ix_status_updated (status, updated_at)
);
CREATE TABLE debit_log (
  id          BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id      VARCHAR(64)   NOT NULL,
  account_id  BIGINT        NOT NULL,
  delta       DECIMAL(18,2) NOT NULL,
  kind        VARCHAR(16)   NOT NULL,
  reverses_id BIGINT        NOT NULL DEFAULT 0,
  created_at  DATETIME(3)   NOT NULL,
  KEY ix_biz (biz_id),
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

-- settlement_anchored (docs/design.md): state advanced with each effect in one
-- transaction under a version CAS, lease, intents before the remote call.
CREATE TABLE pay_state (
  biz_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
  status        VARCHAR(32)  NOT NULL,
  version       INT          NOT NULL DEFAULT 0,
  owner         VARCHAR(128) NULL,
  lease_until   DATETIME(3)  NULL,
  msg_id        VARCHAR(64)  NOT NULL,
  src_partition INT          NOT NULL,
  src_offset    BIGINT       NOT NULL,
  attempts      INT          NOT NULL DEFAULT 0,
  last_error    VARCHAR(512) NULL,
  created_at    DATETIME(3)  NOT NULL,
  updated_at    DATETIME(3)  NOT NULL,
  KEY ix_status_updated (status, updated_at)
);
CREATE TABLE balance_journal (
  id          BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id      VARCHAR(64)   NOT NULL,
  account_id  BIGINT        NOT NULL,
  delta       DECIMAL(18,2) NOT NULL,
  kind        VARCHAR(16)   NOT NULL,
  reverses_id BIGINT        NOT NULL DEFAULT 0,
  created_at  DATETIME(3)   NOT NULL,
  UNIQUE KEY uk_biz_kind_rev (biz_id, kind, reverses_id),
  KEY ix_created (created_at)
);
CREATE TABLE pay_ledger (
  id           BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_order_id VARCHAR(64)   NOT NULL,
  direction    VARCHAR(8)    NOT NULL,
  amount       DECIMAL(18,2) NOT NULL,
  created_at   DATETIME(3)   NOT NULL,
  UNIQUE KEY uk_biz_dir (biz_order_id, direction)
);
CREATE TABLE pay_intent (
  request_id VARCHAR(96) NOT NULL PRIMARY KEY,
  biz_id     VARCHAR(64) NOT NULL,
  step       VARCHAR(32) NOT NULL,
  attempt    INT         NOT NULL,
  sent_at    DATETIME(3) NOT NULL,
  acked_at   DATETIME(3) NULL,
  result     VARCHAR(32) NULL,
  KEY ix_biz_step (biz_id, step)
);

-- fulfilment (naive, seed 001): order row guarded by a unique key; WMS and
-- logistics called with a fresh request id on every attempt, no intents.
CREATE TABLE fulfil_state (
  biz_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
  status        VARCHAR(32)  NOT NULL,
  version       INT          NOT NULL DEFAULT 0,
  msg_id        VARCHAR(64)  NOT NULL,
  src_partition INT          NOT NULL,
  src_offset    BIGINT       NOT NULL,
  created_at    DATETIME(3)  NOT NULL,
  updated_at    DATETIME(3)  NOT NULL,
  KEY ix_status_updated (status, updated_at)
);
CREATE TABLE fulfil_order (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id     VARCHAR(64) NOT NULL,
  status     VARCHAR(32) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  UNIQUE KEY uk_biz (biz_id)
);
CREATE TABLE fulfil_outbox (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id     VARCHAR(64)  NOT NULL,
  kind       VARCHAR(32)  NOT NULL,
  payload    VARCHAR(512) NOT NULL,
  created_at DATETIME(3)  NOT NULL,
  KEY ix_biz (biz_id)
);

-- fulfilment_anchored (docs/design.md).
CREATE TABLE ful_state (
  biz_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
  status        VARCHAR(32)  NOT NULL,
  version       INT          NOT NULL DEFAULT 0,
  owner         VARCHAR(128) NULL,
  lease_until   DATETIME(3)  NULL,
  msg_id        VARCHAR(64)  NOT NULL,
  src_partition INT          NOT NULL,
  src_offset    BIGINT       NOT NULL,
  attempts      INT          NOT NULL DEFAULT 0,
  last_error    VARCHAR(512) NULL,
  created_at    DATETIME(3)  NOT NULL,
  updated_at    DATETIME(3)  NOT NULL,
  KEY ix_status_updated (status, updated_at)
);
CREATE TABLE ful_order (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id     VARCHAR(64) NOT NULL,
  status     VARCHAR(32) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  UNIQUE KEY uk_biz (biz_id)
);
CREATE TABLE ful_intent (
  request_id VARCHAR(96) NOT NULL PRIMARY KEY,
  biz_id     VARCHAR(64) NOT NULL,
  step       VARCHAR(32) NOT NULL,
  attempt    INT         NOT NULL,
  sent_at    DATETIME(3) NOT NULL,
  acked_at   DATETIME(3) NULL,
  result     VARCHAR(32) NULL,
  KEY ix_biz_step (biz_id, step)
);
CREATE TABLE ful_outbox (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id     VARCHAR(64)  NOT NULL,
  kind       VARCHAR(32)  NOT NULL,
  payload    VARCHAR(512) NOT NULL,
  created_at DATETIME(3)  NOT NULL,
  KEY ix_biz (biz_id)
);

-- orders (naive, seed 003): a skip decided by status equality and recorded
-- forever; points granted by a remote call with no intent.
CREATE TABLE idempotent (
  msg_id     VARCHAR(64) NOT NULL PRIMARY KEY,
  biz_id     VARCHAR(64) NOT NULL,
  action     VARCHAR(24) NOT NULL,
  created_at DATETIME(3) NOT NULL,
  KEY ix_action_created (action, created_at),
  KEY ix_biz (biz_id)
);

-- orders_anchored (docs/design.md): skips decided against the entity lifecycle,
-- reviewable; an intent before the points call.
CREATE TABLE order_idem (
  msg_id             VARCHAR(64)  NOT NULL PRIMARY KEY,
  biz_id             VARCHAR(64)  NOT NULL,
  action             VARCHAR(24)  NOT NULL,
  reason             VARCHAR(255) NULL,
  entity_status_seen VARCHAR(32)  NULL,
  review_after       DATETIME(3)  NULL,
  created_at         DATETIME(3)  NOT NULL,
  updated_at         DATETIME(3)  NOT NULL,
  KEY ix_action_created (action, created_at),
  KEY ix_biz (biz_id)
);
CREATE TABLE order_intent (
  request_id VARCHAR(96) NOT NULL PRIMARY KEY,
  biz_id     VARCHAR(64) NOT NULL,
  step       VARCHAR(32) NOT NULL,
  attempt    INT         NOT NULL,
  sent_at    DATETIME(3) NOT NULL,
  acked_at   DATETIME(3) NULL,
  result     VARCHAR(32) NULL,
  KEY ix_biz_step (biz_id, step)
);
