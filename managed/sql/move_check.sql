-- move_check: in a database that move_fill filled under the edition and
-- managed/move_to_c.sql moved to the C edition (in place, or after a
-- pg_dump and pg_restore): the C edition in place of the edition, the
-- C type in every fence column, every table protected and healthy, a
-- token older than any row's or key's fence refused, a newer one
-- accepted, leases going on above their old tokens, every idempotency key
-- giving its recorded result to a retry.  Tokens through
-- fencing.set_token(), which loads the library (the suites' server does
-- not preload it).
\set SHOW_CONTEXT never
-- the tokens and claims the edition granted (readable by a superuser)
SELECT token AS old_token FROM fencing.leases WHERE name = 'moved-lease' \gset
SELECT token AS released_token FROM fencing.leases WHERE name = 'moved-released' \gset
SELECT claim AS old_claim FROM fencing.idempotency_keys WHERE key = 'moved-abandoned' \gset
SELECT :'old_token' AS old_token, :'released_token' AS released_token, :'old_claim' AS old_claim;
SET SESSION AUTHORIZATION regress_rds_admin;
SET search_path = moved, public;
SELECT extname, extversion FROM pg_extension WHERE extname IN ('fencing', 'fencing_sql') ORDER BY 1;
SELECT to_regprocedure('fencing.edition()') IS NULL AS edition_gone;
SELECT c.relname, format_type(a.atttypid, a.atttypmod) AS type, t.typtype
  FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid
 WHERE c.relnamespace = 'moved'::regnamespace AND c.relkind IN ('r', 'p') AND a.attname = 'fence'
 ORDER BY 1;
SELECT relid, scope_kind, key_columns, strict, scope_name, guard_intact, problem
  FROM fencing.protected_tables ORDER BY relid::text;
-- row scope: row a's fence is 0:9
BEGIN;
SELECT fencing.set_token('0:8');
UPDATE accounts SET balance = 1 WHERE id = 'a';
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:10');
UPDATE accounts SET balance = 1 WHERE id = 'a';
COMMIT;
-- key scope: x raised to 0:12 above its row, z to 0:20 without a row
BEGIN;
SELECT fencing.set_token('0:11');
INSERT INTO ledger VALUES ('x', 5);
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:19');
INSERT INTO ledger VALUES ('z', 5);
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:12');
INSERT INTO ledger VALUES ('x', 5);
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:13');
INSERT INTO ledger VALUES ('x', 5);
COMMIT;
-- no token
INSERT INTO ledger VALUES ('y', 1);
-- one scope of a custom name for two tables, not strict: eu/1 raised to
-- 0:30 through jobs; job_events is judged by it
BEGIN;
SELECT fencing.set_token('0:29');
INSERT INTO job_events VALUES ('eu', 1, 'late');
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:30');
INSERT INTO job_events VALUES ('eu', 1, 'again');
COMMIT;
-- table scope: 0:40
BEGIN;
SELECT fencing.set_token('0:39');
UPDATE settings SET value = 'off';
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:41');
UPDATE settings SET value = 'off';
COMMIT;
-- a partitioned table keyed by a date: eu/2026-05-06 raised to 0:50
-- without a row, the other keys at their rows' 0:5
BEGIN;
SELECT fencing.set_token('0:49');
INSERT INTO orders VALUES ('eu', '2026-05-06', 3);
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:4');
INSERT INTO orders_us VALUES ('us', '2026-03-04', 3);
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:51');
INSERT INTO orders VALUES ('eu', '2026-05-06', 3), ('us', '2026-03-04', 3);
COMMIT;
-- the lease goes on: its next token is above the old one, which no
-- longer writes the table protected with it
SELECT fencing.lease_next('moved-lease', :'old_token') AS next_token \gset
SELECT :'next_token'::fencing.fence OPERATOR(fencing.>) :'old_token'::fencing.fence AS next_above_old;
BEGIN;
SELECT fencing.set_token(:'old_token');
\set VERBOSITY terse
INSERT INTO leased VALUES ('k1', 2);
\set VERBOSITY default
ROLLBACK;
BEGIN;
SELECT fencing.set_token(:'next_token');
INSERT INTO leased VALUES ('k1', 2);
COMMIT;
-- a released lease, acquired again: above its old token
SELECT fencing.lease_acquire('moved-released', 'worker-3', '1 hour') OPERATOR(fencing.>) :'released_token'::fencing.fence AS acquired_above_old;
SELECT fencing.lease_check('moved-released', :'released_token') AS old_token_current;
-- idempotency keys: retries get the recorded results, another request
-- under a key is refused, the one in progress stays claimed, the
-- abandoned one resumes with a claim above its old one
SELECT state, result FROM fencing.idem_begin('moved-done', '{"amount": 5}'::jsonb);
SELECT state, result FROM fencing.idem_begin('moved-failed', '{"amount": 6}'::jsonb);
SELECT state FROM fencing.idem_begin('moved-done', '{"amount": 99}'::jsonb);
SELECT state FROM fencing.idem_begin('moved-running', '{"amount": 7}'::jsonb, wait => false);
SELECT state, token OPERATOR(fencing.>) :'old_claim'::fencing.fence AS claim_above_old
  FROM fencing.idem_begin('moved-abandoned', '{"amount": 8}'::jsonb);
\set VERBOSITY terse
SELECT fencing.idem_complete('moved-abandoned', :'old_claim', '{"late": true}'::jsonb);
\set VERBOSITY default
-- the rows are all there, and the writes above added to them
SELECT (SELECT count(*) FROM accounts) AS accounts, (SELECT count(*) FROM ledger) AS ledger,
       (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM job_events) AS job_events,
       (SELECT count(*) FROM settings) AS settings, (SELECT count(*) FROM leased) AS leased,
       (SELECT count(*) FROM history) AS history, (SELECT count(*) FROM orders) AS orders;
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY 1, 2;
SELECT relid, guard_intact, problem FROM fencing.protected_tables ORDER BY relid::text;
RESET SESSION AUTHORIZATION;
