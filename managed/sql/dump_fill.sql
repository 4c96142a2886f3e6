-- dump_fill: a database the suite then dumps with pg_dump and restores
-- into another, where dump_check looks at what came back: protections
-- (row and key scope), a key's fence raised without a row (the first
-- meter), a lease, an idempotency key in progress and one done.
\set SHOW_CONTEXT never
SET SESSION AUTHORIZATION regress_rds_admin;
CREATE SCHEMA dumped;
SET search_path = dumped, public;
CREATE TABLE accounts (id text PRIMARY KEY, balance int, fence fencing.fence);
CREATE TABLE ledger (account text, cents int, fence fencing.fence);
SELECT fencing.protect('accounts');
SELECT fencing.protect('ledger', key_columns => '{account}');
BEGIN;
SET LOCAL fencing.token = '0:5';
INSERT INTO accounts VALUES ('a', 1);
INSERT INTO ledger VALUES ('x', 1);
COMMIT;
BEGIN;
SET LOCAL fencing.token = '0:9';
INSERT INTO ledger VALUES ('y', 1);
COMMIT;
SELECT fencing.fence_text(fencing.raise_fence('ledger', '0:12', 'x')) AS raised;
SELECT fencing.lease_acquire('dumped-job', 'worker-1', '1 hour') IS NOT NULL AS leased;
SELECT state FROM fencing.idem_begin('dumped-running', '{}'::jsonb);
SELECT fencing.idem_complete('dumped-done', b.token, '{"order": 7}'::jsonb)
  FROM fencing.idem_begin('dumped-done', '{}'::jsonb) AS b;
SELECT scope_name, key, fencing.fence_text(fence) AS fence FROM fencing.scopes
 WHERE scope_name LIKE 'dumped.%' ORDER BY 1, 2;
SELECT id, fencing.fence_text(fence) AS fence FROM accounts;
RESET SESSION AUTHORIZATION;
