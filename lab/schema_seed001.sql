-- Kept identical to testdata/schema/seed001.sql (lab TestSeedSchemaIsTestdata checks it):
-- the lab loads it into its database <lab database>_seed001.
-- Seed 001 exactly as its author describes it (fulfilment: order row -> WMS
-- lock RPC -> logistics RPC -> outbox notice), with the "processing mark" of
-- their attempt 3: step 1 writes the business row with status PROCESSING,
-- the last step sets DONE. The unique business key (order number + event
-- type) stops a second row; nothing records whether WMS or logistics ran:
-- only those services' own journals (the probes keyed by {biz_id}) can show
-- it. No intermediate-state table, no intents, no lease.
-- Use with `opctl init --preset seed001`. Runs on MySQL 8 and MariaDB >= 10.6.
CREATE TABLE fulfil_order (
  id           BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id       VARCHAR(96)  NOT NULL,              -- order_no + ':' + event_type
  order_no     VARCHAR(64)  NOT NULL,
  event_type   VARCHAR(32)  NOT NULL,
  order_status VARCHAR(32)  NOT NULL,              -- the order's own status flow
  status       ENUM('PROCESSING','DONE') NOT NULL, -- attempt 3's processing mark
  created_at   DATETIME(3)  NOT NULL,
  updated_at   DATETIME(3)  NOT NULL,
  UNIQUE KEY uk_biz (biz_id),
  KEY ix_status_updated (status, updated_at)
) DEFAULT CHARSET=utf8mb4;
CREATE TABLE outbox (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  biz_id     VARCHAR(96)  NOT NULL,
  kind       VARCHAR(32)  NOT NULL,
  payload    VARCHAR(512) NOT NULL,
  created_at DATETIME(3)  NOT NULL,
  KEY ix_biz (biz_id),
  KEY ix_created (created_at)
) DEFAULT CHARSET=utf8mb4;
