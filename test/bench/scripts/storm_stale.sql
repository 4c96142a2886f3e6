-- test/bench/scripts/storm_stale.sql: a writer whose lock is long gone: its token 0:1 loses to every row (they start at 1:0)
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
-- (caught in bench_try_update(), so that the client goes on)
\set id random(1, :rows)
\set n :n + 1
SELECT bench_try_update(:id, fencing.fence(0, 1));
