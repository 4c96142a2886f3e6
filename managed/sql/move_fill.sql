-- move_fill: a database of the edition that the suite then moves to the C
-- edition with managed/move_to_c.sql (in place, and after a pg_dump and
-- pg_restore), where move_check looks at what came over: tables in row,
-- key and table scope, strict and not, two tables in one scope of a
-- custom name, a table protected with a lease, a partitioned table keyed
-- by a date, keys raised above their
-- rows (the first meter), a table with a fence column nobody protects,
-- leases (held, released), idempotency keys (done, done with a failure
-- result, in progress, abandoned).
\set SHOW_CONTEXT never
SET SESSION AUTHORIZATION regress_rds_admin;
CREATE SCHEMA moved;
SET search_path = moved, public;
CREATE TABLE accounts (id text PRIMARY KEY, balance int, fence fencing.fence);
CREATE TABLE ledger (account text, cents int, fence fencing.fence);
CREATE TABLE jobs (region text, shard int, state text, fence fencing.fence);
CREATE TABLE job_events (region text, shard int, event text, fence fencing.fence);
CREATE TABLE settings (name text PRIMARY KEY, value text, fence fencing.fence);
CREATE TABLE leased (k text, v int, fence fencing.fence);
CREATE TABLE history (n int, fence fencing.fence);
CREATE TABLE orders (region text, day date, total numeric, fence fencing.fence) PARTITION BY LIST (region);
CREATE TABLE orders_eu PARTITION OF orders FOR VALUES IN ('eu');
CREATE TABLE orders_us PARTITION OF orders FOR VALUES IN ('us');
SELECT fencing.protect('accounts');
SELECT fencing.protect('ledger', key_columns => '{account}');
SELECT fencing.protect('jobs', key_columns => '{region,shard}', strict => false, scope_name => 'shared-jobs');
SELECT fencing.protect('job_events', key_columns => '{region,shard}', strict => false, scope_name => 'shared-jobs');
SELECT fencing.protect('settings', key_columns => '{}', scope_name => 'app-settings');
SELECT fencing.protect('orders', key_columns => '{region,day}');
SELECT fencing.lease_acquire('moved-lease', 'worker-1', '1 hour') AS lease_token \gset
SELECT fencing.protect('leased', key_columns => '{k}', lease => 'moved-lease');
BEGIN;
SET LOCAL fencing.token = '0:5';
INSERT INTO accounts VALUES ('a', 100), ('b', 200);
INSERT INTO ledger VALUES ('x', 1), ('y', 2);
INSERT INTO jobs VALUES ('eu', 1, 'new'), ('us', 2, 'new');
INSERT INTO settings VALUES ('mode', 'on');
INSERT INTO orders VALUES ('eu', '2026-01-02', 1.50), ('us', '2026-03-04', 2);
COMMIT;
BEGIN;
SET LOCAL fencing.token = '0:9';
UPDATE accounts SET balance = 150 WHERE id = 'a';
INSERT INTO ledger VALUES ('y', 3);
INSERT INTO job_events VALUES ('eu', 1, 'started');
COMMIT;
BEGIN;
SELECT fencing.set_token(:'lease_token');
INSERT INTO leased VALUES ('k1', 1);
COMMIT;
INSERT INTO history VALUES (1, '(0,3)'), (2, '(7,1)'), (3, NULL);
-- the first meter: fences raised above the rows (a key with no row, too)
SELECT fencing.fence_text(fencing.raise_fence('ledger', '0:12', 'x')) AS raised;
SELECT fencing.fence_text(fencing.raise_fence('ledger', '0:20', 'z')) AS raised;
SELECT fencing.fence_text(fencing.raise_fence('jobs', '0:30', 'eu', '1')) AS raised;
SELECT fencing.fence_text(fencing.raise_fence('settings', '0:40')) AS raised;
SELECT fencing.fence_text(fencing.raise_fence('orders', '0:50', 'eu', '2026-05-06')) AS raised;
-- leases: one held (above), one released
SELECT fencing.lease_release('moved-released', fencing.lease_acquire('moved-released', 'worker-2', '1 hour'));
-- idempotency keys: done, done with a failure result, in progress, abandoned
SELECT fencing.idem_complete('moved-done', b.token, '{"order": 7}'::jsonb)
  FROM fencing.idem_begin('moved-done', '{"amount": 5}'::jsonb) AS b;
SELECT fencing.idem_complete('moved-failed', b.token, '{"error": "card declined"}'::jsonb)
  FROM fencing.idem_begin('moved-failed', '{"amount": 6}'::jsonb) AS b;
SELECT state FROM fencing.idem_begin('moved-running', '{"amount": 7}'::jsonb, lease => '1 hour');
SELECT fencing.idem_abandon('moved-abandoned', b.token)
  FROM fencing.idem_begin('moved-abandoned', '{"amount": 8}'::jsonb) AS b;
SELECT scope_name, key, fencing.fence_text(fence) AS fence FROM fencing.scopes ORDER BY 1, 2;
SELECT key, state, result, fencing.fence_text(claim) AS claim FROM fencing.idempotency_keys ORDER BY key;
RESET SESSION AUTHORIZATION;
