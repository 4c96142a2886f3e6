-- test/bench/scripts/idem_strict.sql: the strict floor: the floor's one statement on a key table of key, request hash and result only
-- (one statement, one round trip, one transaction; see setup_idem.sql)
-- r: an order reference no other transaction of the run has (a permutation
-- of epoch, client counter and client), spread over the range as random ones
\set n :n + 1
\set r 1 + permute((:e * 100000000 + :n) * :nc + :client_id, 9000000000000000)
SELECT bench_order_strict(:r);
