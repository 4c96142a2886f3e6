-- test/bench/scripts/update_plain.sql: the baseline: UPDATE of one random row, no fencing
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set id :nc * random(0, :rows / :nc - 1) + :client_id + 1
\set n :n + 1
UPDATE upd_plain SET balance = balance + 1 WHERE id = :id;
