-- test/bench/scripts/idem_floor.sql: the idempotent-request floor: one statement inserts the key row holding its result, and the order only if the key was new
-- (one statement, one round trip, one transaction; see setup_idem.sql)
\set r random(1, 9000000000000000)
SELECT bench_order_floor(:r);
