-- test/bench/scripts/insert_plain.sql: the baseline: INSERT into an append-only ledger, no fencing
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set acct :nc * random(0, :accounts / :nc - 1) + :client_id + 1
\set n :n + 1
INSERT INTO led_plain (account_id, amount, fence) VALUES (:acct, 1, fencing.fence(:e, :n));
