-- SF001 says why in a field a program reads: the error's constraint name
-- (psycopg's diag.constraint_name, pgx's ConstraintName, node-postgres'
-- err.constraint).  Four reasons, four different actions.
\set SHOW_CONTEXT never
CREATE SCHEMA sf001_reasons;
SET search_path = sf001_reasons, public;

-- SQLSTATE and reason of a statement, or ok
CREATE FUNCTION pg_temp.reason(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS r = CONSTRAINT_NAME;
    RETURN SQLSTATE || ' ' || coalesce(nullif(r, ''), '(no reason)');
END $$;

CREATE TABLE refunds (id int PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES (1, 'new', NULL), (2, 'new', NULL);
SELECT fencing.protect('refunds');

-- a newer token won: the lock is lost
UPDATE refunds SET state = 'paid', fence = '0:7' WHERE id = 1;
SELECT pg_temp.reason($$UPDATE refunds SET state = 'paid twice', fence = '0:6' WHERE id = 1$$);
-- the same token in another transaction: not a lost lock
BEGIN;
SET LOCAL fencing.token = '0:7';
SELECT pg_temp.reason($$UPDATE refunds SET state = 'again' WHERE id = 1$$);
-- the message text is for people; the reason is for programs
UPDATE refunds SET state = 'again' WHERE id = 1;
ROLLBACK;

-- advance() says the same
SELECT pg_temp.reason($$SELECT fencing.advance('0:7', '0:6')$$) AS advance_stale,
       pg_temp.reason($$SELECT fencing.advance('0:7', '0:7')$$) AS advance_used;

-- key scope, and a writer that may not read the table: still stale_token
CREATE TABLE ledger (account int, amount int, fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account}');
INSERT INTO ledger VALUES (1, 10, '0:9');
SELECT pg_temp.reason($$INSERT INTO ledger VALUES (1, 10, '0:8')$$) AS key_stale,
       pg_temp.reason($$INSERT INTO ledger VALUES (1, 10, '0:9')$$) AS key_used;
CREATE ROLE sf001_writer;
GRANT USAGE ON SCHEMA sf001_reasons TO sf001_writer;
GRANT INSERT ON ledger TO sf001_writer;
SET ROLE sf001_writer;
SELECT pg_temp.reason($$INSERT INTO sf001_reasons.ledger VALUES (1, 10, '0:9')$$) AS hidden;
RESET ROLE;

-- a lease that ran out
CREATE TABLE jobs (id int PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO jobs VALUES (1, 'new', NULL);
SELECT fencing.protect('jobs', lease => 'sf001-jobs');
SELECT fencing.lease_acquire('sf001-jobs', 'worker-a', '1 hour') AS t1 \gset
SELECT fencing.lease_release('sf001-jobs', :'t1');
SELECT pg_temp.reason(format($$UPDATE jobs SET state = 'late', fence = %L WHERE id = 1$$, :'t1')) AS released;
-- another holder took it: the old token lost to a newer one
SELECT fencing.lease_acquire('sf001-jobs', 'worker-b', '1 hour') AS t2 \gset
SELECT pg_temp.reason(format($$UPDATE jobs SET state = 'late', fence = %L WHERE id = 1$$, :'t1')) AS moved_on;

-- an idempotency claim taken over (here: abandoned, then claimed again)
SELECT token AS c1 FROM fencing.idem_begin('sf001:refund-1', '{}') \gset
SELECT fencing.idem_abandon('sf001:refund-1', :'c1');
SELECT state FROM fencing.idem_begin('sf001:refund-1', '{}');
SELECT pg_temp.reason(format($$SELECT fencing.idem_complete('sf001:refund-1', %L, '{}')$$, :'c1')) AS claim;

-- other errors carry no reason
SELECT pg_temp.reason($$UPDATE refunds SET state = 'x' WHERE id = 2$$) AS token_required;

DROP TABLE refunds, ledger, jobs;
DELETE FROM fencing.idempotency_keys WHERE key = 'sf001:refund-1';
DROP SCHEMA sf001_reasons;
DROP ROLE sf001_writer;
