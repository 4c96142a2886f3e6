-- test/bench/scripts/update_token.sql: the same UPDATE through the guard, token in fencing.token
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
-- set_config(..., true) is SET LOCAL, done inside the UPDATE so that the
-- write stays one statement in one round trip, as the baseline's is
\set id :nc * random(0, :rows / :nc - 1) + :client_id + 1
\set n :n + 1
UPDATE upd_token SET balance = balance + 1 WHERE id = :id AND set_config('fencing.token', fencing.fence(:e, :n)::text, true) IS NOT NULL;
