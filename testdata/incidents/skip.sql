-- Seed 003 after the rebalance: order 8821's SHIPPED event (m-7392) was handled
-- before its PAID event (m-7391); PAID saw SHIPPED != PAID and was SKIPPED, so the
-- points grant tied to PAID never happened. 8822 was refunded (a correct skip);
-- 8823 is healthy.
INSERT INTO orders VALUES
  ('8821', 'SHIPPED', NOW(3) - INTERVAL 9 MINUTE),
  ('8822', 'REFUNDED', NOW(3) - INTERVAL 9 MINUTE),
  ('8823', 'PAID', NOW(3) - INTERVAL 9 MINUTE);
INSERT INTO consumer_idempotency (msg_id, biz_id, action, reason, entity_status_seen, created_at, updated_at) VALUES
  ('m-7392', '8821', 'DONE', NULL, 'PAID', NOW(3) - INTERVAL 10 MINUTE, NOW(3) - INTERVAL 10 MINUTE),
  ('m-7391', '8821', 'SKIPPED', 'order SHIPPED, event expects PAID', 'SHIPPED', NOW(3) - INTERVAL 9 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('m-7401', '8822', 'SKIPPED', 'order REFUNDED', 'REFUNDED', NOW(3) - INTERVAL 9 MINUTE, NOW(3) - INTERVAL 9 MINUTE),
  ('m-7411', '8823', 'DONE', NULL, 'PAID', NOW(3) - INTERVAL 9 MINUTE, NOW(3) - INTERVAL 9 MINUTE);
INSERT INTO points_grant (order_id, msg_id, points, created_at) VALUES
  ('8823', 'm-7411', 120, NOW(3) - INTERVAL 9 MINUTE);
