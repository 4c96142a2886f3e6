-- test/bench/scripts/update_guard.sql: the same UPDATE through the guard, row scope, token in the column
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set id :nc * random(0, :rows / :nc - 1) + :client_id + 1
\set n :n + 1
UPDATE upd_guard SET balance = balance + 1, fence = fencing.fence(:e, :n) WHERE id = :id;
