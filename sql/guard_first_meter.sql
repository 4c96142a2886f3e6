-- The first meter: fencing.raise_fence() raises a key's or the table's
-- fence to a new holder's token the moment it takes the lock, before its
-- first real write, so that an old holder that wakes up in between is
-- refused instead of accepted because nothing newer was written yet.
\set SHOW_CONTEXT never
CREATE SCHEMA first_meter;
SET search_path = first_meter, public;

-- SQLSTATE, reason and message of a statement, or ok
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
    m text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS r = CONSTRAINT_NAME, m = MESSAGE_TEXT;
    RETURN SQLSTATE || coalesce(' ' || nullif(r, ''), '') || ': ' || m;
END $$;

CREATE TABLE ledger (account text, cents int, fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account}');

-- worker A (token 0:4) wrote, then paused past its lock's TTL
BEGIN;
SELECT fencing.set_token('0:4');
INSERT INTO ledger VALUES ('acct-1', 100);
COMMIT;

-- worker B takes the lock (token 0:5) and raises the key's fence at once
SELECT fencing.raise_fence('ledger', '0:5', 'acct-1');

-- A wakes up before B's first write: refused, a lost lock
BEGIN;
SELECT fencing.set_token('0:4');
SELECT pg_temp.outcome($$INSERT INTO ledger VALUES ('acct-1', -100)$$);
ROLLBACK;

-- B writes with its next token (the clients take one per transaction)
BEGIN;
SELECT fencing.set_token('0:6');
INSERT INTO ledger VALUES ('acct-1', 25);
COMMIT;
SELECT account, sum(cents) FROM ledger GROUP BY account;

-- raise_fence() is a write of the fence with the guard's rules:
-- an older token is refused, and says what it lost to
SELECT fencing.raise_fence('ledger', '0:3', 'acct-1');
-- strict: the token is now used; another transaction cannot use it again
SELECT pg_temp.outcome($$SELECT fencing.raise_fence('ledger', '0:6', 'acct-1')$$);
-- in one transaction, the raise and the first write share the token
BEGIN;
SELECT fencing.raise_fence('ledger', '0:7', 'acct-1');
SELECT fencing.set_token('0:7');
INSERT INTO ledger VALUES ('acct-1', 1);
COMMIT;
-- a key nobody wrote yet gets its first fence
SELECT fencing.raise_fence('ledger', '0:7', 'acct-2');
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'first_meter.ledger' ORDER BY key;

-- strict => false accepts the equal token from another transaction
CREATE TABLE jobs (queue text, n int, fence fencing.fence);
SELECT fencing.protect('jobs', key_columns => '{queue}', strict => false);
SELECT fencing.raise_fence('jobs', '1:1', 'emails');
SELECT fencing.raise_fence('jobs', '1:1', 'emails');
SELECT pg_temp.outcome($$SELECT fencing.raise_fence('jobs', '1:0', 'emails')$$);

-- key values are converted to the key columns' types, in their order
CREATE TABLE entries (account int, day date, cents int, fence fencing.fence);
SELECT fencing.protect('entries', key_columns => '{account,day}');
SELECT fencing.raise_fence('entries', '0:2', '42', '2026-12-01');
BEGIN;
SELECT fencing.set_token('0:1');
SELECT pg_temp.outcome($$INSERT INTO entries VALUES (42, '2026-12-01', 5)$$);
ROLLBACK;
SELECT fencing.raise_fence('entries', '0:2', 'x', '2026-12-01');
SELECT fencing.raise_fence('entries', '0:2', '42');
SELECT fencing.raise_fence('entries', '0:3', VARIADIC ARRAY['43', NULL]);
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'first_meter.entries' ORDER BY key;

-- table scope: one fence, no key
CREATE TABLE settings (name text, value text, fence fencing.fence);
SELECT fencing.protect('settings', key_columns => '{}');
SELECT fencing.raise_fence('settings', '2:0');
SELECT fencing.raise_fence('settings', '2:0', 'theme');
BEGIN;
SELECT fencing.set_token('1:9');
SELECT pg_temp.outcome($$INSERT INTO settings VALUES ('theme', 'dark')$$);
ROLLBACK;

-- row scope keeps its fences in the rows: an UPDATE raises them
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-1', 'new', NULL);
SELECT fencing.protect('refunds');
SELECT fencing.raise_fence('refunds', '0:9', 'r-1');
UPDATE refunds SET fence = '0:9' WHERE id = 'r-1';
BEGIN;
SELECT fencing.set_token('0:8');
SELECT pg_temp.outcome($$UPDATE refunds SET state = 'paid' WHERE id = 'r-1'$$);
ROLLBACK;

-- what needs no guard has no fence to raise; a token is required
CREATE TABLE plain (a int, fence fencing.fence);
SELECT fencing.raise_fence('plain', '0:1');
SELECT fencing.raise_fence('ledger', NULL, 'acct-1');
BEGIN READ ONLY;
SELECT fencing.raise_fence('ledger', '0:99', 'acct-1');
ROLLBACK;

-- a table protected with a lease: only the lease's live token raises
SELECT fencing.lease_acquire('first-meter-lease', 'worker-b', '1 hour') AS l \gset
CREATE TABLE leased (k text, fence fencing.fence);
SELECT fencing.protect('leased', key_columns => '{k}', lease => 'first-meter-lease');
SELECT pg_temp.outcome(format($$SELECT fencing.raise_fence('leased', %L, 'k-1')$$,
                              fencing.next(:'l'))) ~ '^SF001 lease_expired' AS refused;
SELECT fencing.raise_fence('leased', :'l', 'k-1')::text = :'l' AS raised;
SELECT fencing.lease_release('first-meter-lease', :'l');

-- privileges: raising a fence is a write (INSERT or UPDATE), checked
-- before the table is locked; row security stops it altogether
CREATE ROLE regress_meter_reader;
CREATE ROLE regress_meter_writer;
GRANT USAGE ON SCHEMA first_meter TO regress_meter_reader, regress_meter_writer;
GRANT SELECT ON ledger TO regress_meter_reader;
GRANT SELECT, INSERT ON ledger TO regress_meter_writer;
SET ROLE regress_meter_reader;
SELECT pg_temp.outcome($$SELECT fencing.raise_fence('first_meter.ledger', '0:20', 'acct-1')$$);
SET ROLE regress_meter_writer;
SELECT fencing.raise_fence('first_meter.ledger', '0:20', 'acct-1');
RESET ROLE;
ALTER TABLE ledger ENABLE ROW LEVEL SECURITY;
CREATE POLICY mine ON ledger USING (account = 'acct-1');
SET ROLE regress_meter_writer;
SELECT pg_temp.outcome($$SELECT fencing.raise_fence('first_meter.ledger', '0:21', 'acct-9')$$);
RESET ROLE;

-- counted as writes of the table
SELECT relid, accepted, rejected_stale, rejected_already_used
  FROM fencing.stats WHERE relid IN ('ledger'::regclass, 'jobs'::regclass)
 ORDER BY relid::text;

DROP SCHEMA first_meter CASCADE;
DELETE FROM fencing.leases WHERE name = 'first-meter-lease';
DROP ROLE regress_meter_reader, regress_meter_writer;
