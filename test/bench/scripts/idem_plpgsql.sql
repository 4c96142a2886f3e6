-- test/bench/scripts/idem_plpgsql.sql: the same request with idempotency hand-written in PL/pgSQL
-- (one statement, one round trip, one transaction; see setup_idem.sql)
\set r random(1, 9000000000000000)
SELECT bench_order_hand(:r);
