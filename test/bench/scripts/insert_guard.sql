-- test/bench/scripts/insert_guard.sql: the same INSERT through the guard in key scope (per account)
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set acct :nc * random(0, :accounts / :nc - 1) + :client_id + 1
\set n :n + 1
INSERT INTO led_guard (account_id, amount, fence) VALUES (:acct, 1, fencing.fence(:e, :n));
