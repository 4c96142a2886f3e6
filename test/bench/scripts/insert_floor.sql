-- test/bench/scripts/insert_floor.sql: the key-scope floor: one statement, no trigger; a stale token inserts nothing
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set acct :nc * random(0, :accounts / :nc - 1) + :client_id + 1
\set n :n + 1
WITH s AS (UPDATE led_floor_fences SET fence = fencing.fence(:e, :n) WHERE account_id = :acct AND fence OPERATOR(fencing.<) fencing.fence(:e, :n) RETURNING account_id) INSERT INTO led_floor (account_id, amount, fence) SELECT account_id, 1, fencing.fence(:e, :n) FROM s;
