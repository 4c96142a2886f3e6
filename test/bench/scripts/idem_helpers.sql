-- test/bench/scripts/idem_helpers.sql: the same request through idem_begin + INSERT + idem_complete
-- (one statement, one round trip, one transaction; see setup_idem.sql)
\set r random(1, 9000000000000000)
SELECT bench_order_idem(:r);
