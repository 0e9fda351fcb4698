-- Extra settlement operations for the repair tests, loaded after
-- testdata/schema/settlement.sql and testdata/incidents/settlement.sql. The
-- tests produce each operation's message and then set src_partition and
-- src_offset, so that the Kafka position is the stored one.
--   PAY-3 STRANDED        debit and ledger done, notify never ran, the group committed past it
--   PAY-4 STATE_BEHIND    the ledger row exists but the state still says DEBIT_DONE
--   PAY-5 MISSING_EFFECT  the state says LEDGER_DONE but there is no ledger row
--   PAY-6 DUPLICATE       the debit ran three times (two reversals)
--   PAY-7 UNKNOWN_OUTCOME the notify call was sent, never acked, and notify has no probe
--   PAY-8 IN_FLIGHT       owner c-9 holds a lease for an hour
INSERT INTO account_balance VALUES (1003, 990.00), (1004, 990.00), (1005, 990.00), (1006, 970.00), (1007, 990.00), (1008, 990.00);
INSERT INTO biz_operation (biz_id, status, version, owner, lease_until, msg_id, created_at, updated_at) VALUES
  ('PAY-3', 'LEDGER_DONE', 3, NULL, NULL, 'm-3', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('PAY-4', 'DEBIT_DONE', 2, NULL, NULL, 'm-4', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('PAY-5', 'LEDGER_DONE', 3, NULL, NULL, 'm-5', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('PAY-6', 'DONE', 4, NULL, NULL, 'm-6', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('PAY-7', 'LEDGER_DONE', 3, 'c-2', NOW(3) - INTERVAL 5 MINUTE, 'm-7', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('PAY-8', 'DEBIT_DONE', 2, 'c-9', NOW(3) + INTERVAL 1 HOUR, 'm-8', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 1 MINUTE);
INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES
  ('PAY-3', 1003, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-4', 1004, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-5', 1005, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-6', 1006, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-6', 1006, -10.00, 'DEBIT', NOW(3) - INTERVAL 9 MINUTE),
  ('PAY-6', 1006, -10.00, 'DEBIT', NOW(3) - INTERVAL 8 MINUTE),
  ('PAY-7', 1007, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-8', 1008, -10.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE);
INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES
  ('PAY-3', 'OUT', 10.00, NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-4', 'OUT', 10.00, NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-6', 'OUT', 10.00, NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-7', 'OUT', 10.00, NOW(3) - INTERVAL 10 MINUTE);
INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result) VALUES
  ('PAY-6:notify:1', 'PAY-6', 'notify', 1, NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE, 'OK'),
  ('PAY-7:notify:1', 'PAY-7', 'notify', 1, NOW(3) - INTERVAL 9 MINUTE, NULL, NULL);
