-- dump_check: in a database restored by pg_restore from a pg_dump of the
-- one dump_fill filled: the protections, the fences (the one raised
-- without a row too), the lease and the idempotency keys came back, and
-- the guard refuses a stale or missing token as before.
\set SHOW_CONTEXT never
SET SESSION AUTHORIZATION regress_rds_admin;
SET search_path = dumped, public;
SELECT relid, scope_kind, key_columns, strict, scope_name, guard_intact, problem
  FROM fencing.protected_tables ORDER BY relid::text;
SELECT scope_name, key, fencing.fence_text(fence) AS fence FROM fencing.scopes
 WHERE scope_name LIKE 'dumped.%' ORDER BY 1, 2;
SELECT id, fencing.fence_text(fence) AS fence FROM accounts;
SELECT fencing.lease_check('dumped-job', l.token) AS lease_held
  FROM fencing.leases l WHERE l.name = 'dumped-job';
SELECT key, state, result FROM fencing.idempotency_keys WHERE key LIKE 'dumped-%' ORDER BY key;
-- a retry of the request that was done gets its first result
SELECT state, result FROM fencing.idem_begin('dumped-done', '{}'::jsonb);
-- stale tokens: below the raised fence of key x, below the row's fence
BEGIN;
SET LOCAL fencing.token = '0:11';
INSERT INTO ledger VALUES ('x', 1);
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:4';
UPDATE accounts SET balance = 2 WHERE id = 'a';
ROLLBACK;
-- no token
INSERT INTO ledger VALUES ('z', 1);
-- a newer token writes
BEGIN;
SET LOCAL fencing.token = '0:13';
INSERT INTO ledger VALUES ('x', 1);
UPDATE accounts SET balance = 2 WHERE id = 'a';
COMMIT;
SELECT account, sum(cents) FROM ledger GROUP BY account ORDER BY account;
RESET SESSION AUTHORIZATION;
