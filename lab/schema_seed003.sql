-- Kept identical to testdata/schema/seed003.sql (lab TestSeedSchemaIsTestdata checks it):
-- the lab loads it into its database <lab database>_seed003.
-- Seed 003 exactly as its author describes it (order events with a
-- conditional skip): the orders table with its status ENUM, and the
-- consumer's idempotency table, unique on msg_id, with only two terminal
-- actions (DONE, SKIPPED) and no biz_id column: the order id is the
-- message's key and is in its payload ({"msgId", "orderId",
-- "expectedStatus"}). The points grant tied to PAID is an RPC to the points
-- service; nothing here records it. A skip is the consumer's own code.
-- Use with `opctl init --preset seed003`. Runs on MySQL 8 and MariaDB >= 10.6.
CREATE TABLE orders (
  order_id   BIGINT      NOT NULL PRIMARY KEY,
  status     ENUM('CREATED','PAID','SHIPPED','DELIVERED','REFUNDED','CANCELLED') NOT NULL,
  created_at DATETIME(3) NOT NULL,
  updated_at DATETIME(3) NOT NULL
) DEFAULT CHARSET=utf8mb4;
CREATE TABLE idempotent (
  id         BIGINT AUTO_INCREMENT PRIMARY KEY,
  msg_id     VARCHAR(64)             NOT NULL,
  action     ENUM('DONE','SKIPPED')  NOT NULL,
  created_at DATETIME(3)             NOT NULL,
  UNIQUE KEY uk_msg_id (msg_id),
  KEY ix_created (created_at)                    -- the TTL purge walks it
) DEFAULT CHARSET=utf8mb4;
