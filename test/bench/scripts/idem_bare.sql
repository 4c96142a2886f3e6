-- test/bench/scripts/idem_bare.sql: the bare business INSERT (one order), in a PL/pgSQL function
-- (one statement, one round trip, one transaction; see setup_idem.sql)
\set r random(1, 9000000000000000)
SELECT bench_order_bare(:r);
