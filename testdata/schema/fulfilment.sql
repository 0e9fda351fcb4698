-- Seed 001 (fulfilment: order row -> WMS lock RPC -> logistics RPC -> outbox notice).
-- The state table is the "intermediate-state table" the seed's team lacked; the
-- WMS step recorded no intents, as in the incident: only WMS's own lock journal
-- (the probe keyed by {biz_id}) can show the double lock.
CREATE TABLE fulfil_state (
  biz_id        VARCHAR(64)  NOT NULL PRIMARY KEY,
  status        VARCHAR(32)  NOT NULL,
  version       INT UNSIGNED NOT NULL DEFAULT 0,
  owner         VARCHAR(128) NULL,
  lease_until   DATETIME(3)  NULL,
  msg_id        VARCHAR(64)  NOT NULL,
  src_partition INT          NULL,
  src_offset    BIGINT       NULL,
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
CREATE TABLE outbox (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id     VARCHAR(64)  NOT NULL,
  kind       VARCHAR(32)  NOT NULL,
  payload    VARCHAR(512) NOT NULL,
  created_at DATETIME(3)  NOT NULL,
  KEY ix_biz (biz_id)
);
