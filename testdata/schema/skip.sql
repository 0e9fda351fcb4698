-- Seed 003 (order events with a conditional skip; the points grant is tied to PAID).
-- No state table: the consumer recorded only its per-message idempotency decision.
CREATE TABLE orders (
  order_id   VARCHAR(64) NOT NULL PRIMARY KEY,
  status     VARCHAR(32) NOT NULL,
  updated_at DATETIME(3) NOT NULL
);
CREATE TABLE consumer_idempotency (
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
CREATE TABLE points_grant (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  order_id   VARCHAR(64) NOT NULL,
  msg_id     VARCHAR(64) NOT NULL,
  points     INT         NOT NULL,
  created_at DATETIME(3) NOT NULL,
  UNIQUE KEY uk_msg (msg_id),
  KEY ix_order (order_id),
  KEY ix_created (created_at)
);
