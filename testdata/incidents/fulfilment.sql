-- Seed 001 after the rebalance: F-1's WMS lock timed out at the consumer but took
-- effect at WMS; the new owner called WMS again with a new request id (two locks,
-- visible only in WMS's journal). F-2 is healthy.
INSERT INTO fulfil_state (biz_id, status, version, msg_id, created_at, updated_at) VALUES
  ('F-1', 'DONE', 5, 'fm-1', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 8 MINUTE),
  ('F-2', 'DONE', 5, 'fm-2', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE);
INSERT INTO fulfil_order (biz_id, status, created_at) VALUES
  ('F-1', 'CREATED', NOW(3) - INTERVAL 10 MINUTE),
  ('F-2', 'CREATED', NOW(3) - INTERVAL 10 MINUTE);
INSERT INTO step_intent (request_id, biz_id, step, attempt, sent_at, acked_at, result) VALUES
  ('F-1:logistics', 'F-1', 'logistics', 1, NOW(3) - INTERVAL 8 MINUTE, NOW(3) - INTERVAL 8 MINUTE, 'OK'),
  ('F-2:logistics', 'F-2', 'logistics', 1, NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE, 'OK');
INSERT INTO outbox (biz_id, kind, payload, created_at) VALUES
  ('F-1', 'notice', '{"order":"F-1"}', NOW(3) - INTERVAL 8 MINUTE),
  ('F-2', 'notice', '{"order":"F-2"}', NOW(3) - INTERVAL 10 MINUTE);
