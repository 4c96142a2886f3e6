-- Leases of fencing 1.0 across ALTER EXTENSION fencing UPDATE, in a
-- database of their own: the 1.1 library serves the 1.0 objects (the
-- guard's lease check, its messages), the update gives every lease an
-- owner (the extension's owner), and the extension's owner hands them over,
-- best in the same transaction as the update.
\set SHOW_CONTEXT never
SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_fencing_lease_update;
CREATE ROLE regress_upd_app;
\c regress_fencing_lease_update
SET search_path = public, fencing;
-- SQLSTATE, message and DETAIL of a statement, or ok (times masked)
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    det text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RETURN regexp_replace(SQLSTATE || ': ' || msg || E'\n' || det,
                          '(until|at) \d[^,]*\.$', '\1 <time>.');
END $$;
SET client_min_messages = warning;
CREATE EXTENSION fencing VERSION '1.0';
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';

-- 1.0 with the 1.1 library: the PL/pgSQL lease functions and the C guard
SET ROLE regress_upd_app;
SELECT fencing.lease_acquire('orders', 'worker-a', '1 hour') AS t1 \gset
SELECT fencing.lease_acquire('short', 'worker-a', '1 hour') AS s1 \gset
RESET ROLE;
CREATE TABLE jobs (id int PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO jobs VALUES (1, 'new', NULL);
SELECT fencing.protect('jobs', lease => 'orders');
BEGIN;
SET LOCAL fencing.token = :'t1';
UPDATE jobs SET state = 'running' WHERE id = 1;
COMMIT;
-- a 1.0 table has no owner, and is readable by all: the message names the
-- current token, as in 1.0
SET fencing.token = '0:1';
SELECT replace(pg_temp.outcome($$UPDATE jobs SET state = 'forged' WHERE id = 1$$), :'t1', '<t1>') AS outcome;
RESET fencing.token;

-- The update: every lease goes to the extension's owner
SET client_min_messages = warning;
ALTER EXTENSION fencing UPDATE TO '1.1';
RESET client_min_messages;
SELECT name, holder, token = :'t1' AS token_kept,
       owner = (SELECT extowner FROM pg_extension WHERE extname = 'fencing')::regrole AS extension_owner_owns
  FROM fencing.leases ORDER BY name;
SELECT has_table_privilege('regress_upd_app', 'fencing.leases', 'SELECT') AS app_reads_table;

-- the application is refused until the lease is handed over: it fails
-- closed; its token still writes (the guard checks tokens, not roles)
SET ROLE regress_upd_app;
\set VERBOSITY terse
SELECT fencing.lease_renew('orders', :'t1', '1 hour');
\set VERBOSITY default
SELECT name, token, live FROM fencing.lease_status ORDER BY name;
RESET ROLE;
BEGIN;
SET LOCAL fencing.token = :'t1';
INSERT INTO jobs VALUES (2, 'new');
COMMIT;
SET fencing.token = '0:1';
SELECT replace(pg_temp.outcome($$UPDATE jobs SET state = 'forged' WHERE id = 1$$), :'t1', '<t1>') AS outcome;
RESET fencing.token;

-- the extension's owner hands it over: same token, renewed at once
UPDATE fencing.leases SET owner = 'regress_upd_app' WHERE name = 'orders';
SET ROLE regress_upd_app;
SELECT fencing.lease_renew('orders', :'t1', '1 hour') AS renewed;
SELECT name, token = :'t1' AS sees_own_token FROM fencing.lease_status WHERE name = 'orders';
\set VERBOSITY terse
SELECT fencing.lease_renew('short', :'s1', '1 hour');
\set VERBOSITY default
RESET ROLE;

-- Once more, the way the README recommends: the update and the handover in
-- one transaction, so that the application never sees a refusal
DROP TABLE jobs;
DROP EXTENSION fencing;
SET client_min_messages = warning;
CREATE EXTENSION fencing VERSION '1.0';
RESET client_min_messages;
SET ROLE regress_upd_app;
SELECT fencing.lease_acquire('orders', 'worker-a', '1 hour') AS t2 \gset
RESET ROLE;
BEGIN;
SET client_min_messages = warning;
ALTER EXTENSION fencing UPDATE TO '1.1';
RESET client_min_messages;
UPDATE fencing.leases SET owner = 'regress_upd_app';
COMMIT;
SET ROLE regress_upd_app;
SELECT fencing.lease_renew('orders', :'t2', '1 hour') AS renewed;
SELECT fencing.counter(fencing.lease_acquire('orders', 'worker-a', '1 hour')) AS next_counter;
RESET ROLE;

\c :regress_db
DROP DATABASE regress_fencing_lease_update;
DROP ROLE regress_upd_app;
