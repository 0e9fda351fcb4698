-- The bench's tables (testdata/schema/{settlement,skip}.sql) keyed and
-- indexed as their owners index production tables, with nothing added for
-- opctl: the state and idempotency tables keyed by an auto-increment id
-- with the business keys only unique, the scan tables with (created_at)
-- alone besides their key index (balance_journal and points_grant already
-- have it; ledger_entry gets it). reconcile walks these as they are
-- (docs/reconcile.md#the-usable-index-rule); only the uncommitted check
-- finds no (src_partition, src_offset) index.
ALTER TABLE biz_operation DROP PRIMARY KEY, ADD COLUMN id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, ADD UNIQUE KEY uk_biz (biz_id);
ALTER TABLE consumer_idempotency DROP PRIMARY KEY, ADD COLUMN id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST, ADD UNIQUE KEY uk_msg (msg_id);
ALTER TABLE ledger_entry ADD INDEX ix_created (created_at);
