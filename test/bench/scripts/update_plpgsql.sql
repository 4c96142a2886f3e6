-- test/bench/scripts/update_plpgsql.sql: the same UPDATE through a hand-written PL/pgSQL trigger on a bigint fence
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set id :nc * random(0, :rows / :nc - 1) + :client_id + 1
\set n :n + 1
\set tok :e * 1000000000 + :n
UPDATE upd_plpgsql SET balance = balance + 1, fence = :tok WHERE id = :id;
