-- test/bench/scripts/insert_plpgsql.sql: the same INSERT through a hand-written PL/pgSQL key-scope trigger
-- (pgbench -D e=EPOCH -D n=0 -D nc=CLIENTS -D rows=... -D accounts=...; see run.sh)
\set acct :nc * random(0, :accounts / :nc - 1) + :client_id + 1
\set n :n + 1
\set tok :e * 1000000000 + :n
INSERT INTO led_plpgsql (account_id, amount, fence) VALUES (:acct, 1, :tok);
