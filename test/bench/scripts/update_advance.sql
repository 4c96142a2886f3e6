-- test/bench/scripts/update_advance.sql: the same UPDATE through fencing.advance()
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set id :nc * random(0, :rows / :nc - 1) + :client_id + 1
\set n :n + 1
UPDATE upd_advance SET balance = balance + 1, fence = fencing.advance(fence, fencing.fence(:e, :n)) WHERE id = :id;
