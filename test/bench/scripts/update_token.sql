-- test/bench/scripts/update_token.sql: the same UPDATE through the guard, token in fencing.token
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
-- set_config(..., true) is SET LOCAL; a writing statement cannot change the
-- token it is judged by, so the token is set by a statement of its own,
-- sent in the same round trip as the UPDATE (a pipeline: both run in one
-- implicit transaction, as a driver sends them)
\set id :nc * random(0, :rows / :nc - 1) + :client_id + 1
\set n :n + 1
\startpipeline
SELECT set_config('fencing.token', fencing.fence(:e, :n)::text, true);
UPDATE upd_token SET balance = balance + 1 WHERE id = :id;
\endpipeline
