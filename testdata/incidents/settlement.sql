-- Seed 000 after the broker blip: PAY-1 was read twice; the debit ran twice, the
-- ledger insert was stopped by its unique key, the notify RPC was replayed with a
-- new request id. PAY-2 is a healthy operation for comparison.
INSERT INTO account_balance VALUES (1001, 940.00), (1002, 980.00);
INSERT INTO biz_operation (biz_id, status, version, owner, lease_until, msg_id, created_at, updated_at) VALUES
  ('PAY-1', 'DONE', 4, NULL, NULL, 'm-1', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('PAY-2', 'DONE', 4, NULL, NULL, 'm-2', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE);
INSERT INTO balance_journal (biz_id, account_id, delta, kind, created_at) VALUES
  ('PAY-1', 1001, -30.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-2', 1002, -20.00, 'DEBIT', NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-1', 1001, -30.00, 'DEBIT', NOW(3) - INTERVAL 9 MINUTE);
INSERT INTO ledger_entry (biz_order_id, direction, amount, created_at) VALUES
  ('PAY-1', 'OUT', 30.00, NOW(3) - INTERVAL 10 MINUTE),
  ('PAY-2', 'OUT', 20.00, NOW(3) - INTERVAL 10 MINUTE);
INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result) VALUES
  ('PAY-1:notify:1', 'PAY-1', 'notify', 1, NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE, 'OK'),
  ('PAY-2:notify:1', 'PAY-2', 'notify', 1, NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE, 'OK'),
  ('PAY-1:notify:2', 'PAY-1', 'notify', 2, NOW(3) - INTERVAL 9 MINUTE, NOW(3) - INTERVAL 9 MINUTE, 'OK');
