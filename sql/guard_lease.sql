-- The guard with a lease: fencing.protect(..., lease => 'name') refuses
-- every write whose token is not the lease's current, live token.
\set SHOW_CONTEXT never
SET search_path = public, fencing;

-- SQLSTATE, message and DETAIL of a statement (tokens and times masked,
-- they depend on the clock and on earlier epoch bumps), or ok
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
                          '(until|at) [^,]*\.$', '\1 <time>.');
END $$;
CREATE FUNCTION pg_temp.masked(t text) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(t, '\d+:\d+', 'E:C', 'g')
$$;

CREATE TABLE jobs (id int PRIMARY KEY, state text, fence fence);
INSERT INTO jobs VALUES (1, 'new', NULL), (2, 'new', NULL);

-- one signature: the sixth argument, lease, is the last one
SELECT pg_get_function_identity_arguments(p.oid)
  FROM pg_proc p WHERE p.proname = 'protect'
   AND p.pronamespace = 'fencing'::regnamespace;
SELECT protect('jobs', lease => '');
SELECT protect('jobs', 'fence', NULL, true, NULL, 'jobs-writer');
SELECT relid, fence_column, key_columns, strict, lease
  FROM protected WHERE relid = 'jobs'::regclass;

-- the lease has never been granted: nothing gets in
UPDATE jobs SET state = 'early', fence = '1:1' WHERE id = 1;
-- with a lease, a row-scope INSERT needs a token too
INSERT INTO jobs VALUES (3, 'new', NULL);

-- the holder writes with its token
SELECT lease_acquire('jobs-writer', 'worker-a', '1 hour') AS t1 \gset
BEGIN;
SET LOCAL fencing.token = :'t1';
UPDATE jobs SET state = 'running' WHERE id = 1;
INSERT INTO jobs VALUES (3, 'new');
COMMIT;
SELECT id, state, fence = :'t1' AS has_t1 FROM jobs ORDER BY id;
UPDATE jobs SET state = 'running', fence = :'t1' WHERE id = 2;
SELECT id, state, fence = :'t1' AS has_t1 FROM jobs WHERE id = 2;

-- a token newer than the lease's is not the lease's either
SET fencing.token = '9223372036854775807:1';
SELECT pg_temp.masked(pg_temp.outcome($$UPDATE jobs SET state = 'forged' WHERE id = 1$$));
RESET fencing.token;

-- the lease runs out while the holder is paused: its next write is refused
-- even though nobody else has acquired the lease or written since
SELECT lease_renew('jobs-writer', :'t1', '50 milliseconds') AS renewed;
SELECT pg_sleep(0.1);
SET fencing.token = :'t1';
SELECT pg_temp.masked(pg_temp.outcome($$UPDATE jobs SET state = 'late' WHERE id = 1$$));
SELECT pg_temp.masked(pg_temp.outcome($$DELETE FROM jobs WHERE id = 3$$));
SELECT pg_temp.masked(pg_temp.outcome($$INSERT INTO jobs VALUES (4, 'late')$$));
RESET fencing.token;
SELECT id, state FROM jobs ORDER BY id;

-- re-acquired with a newer token, writes work again
SELECT lease_acquire('jobs-writer', 'worker-b', '1 hour') AS t2 \gset
SELECT :'t2'::fence > :'t1'::fence AS newer;
SET fencing.token = :'t2';
UPDATE jobs SET state = 'taken over' WHERE id = 1;
RESET fencing.token;
-- the old holder's token: the lease has moved on
SET fencing.token = :'t1';
SELECT pg_temp.masked(pg_temp.outcome($$UPDATE jobs SET state = 'late' WHERE id = 2$$));
RESET fencing.token;

-- a released lease stops its holder's writes at once
SELECT lease_release('jobs-writer', :'t2') AS released;
SET fencing.token = :'t2';
SELECT pg_temp.masked(pg_temp.outcome($$UPDATE jobs SET state = 'after release' WHERE id = 2$$));
RESET fencing.token;
SELECT id, state, fence = :'t2' AS has_t2 FROM jobs ORDER BY id;

-- the lease check comes on top of the scope check: a key scope with a lease
CREATE TABLE ledger (account text, cents bigint, fence fence);
SELECT protect('ledger', key_columns => '{account}', lease => 'ledger-writer');
SELECT lease_acquire('ledger-writer', 'worker-a', '1 hour') AS l1 \gset
SET fencing.token = :'l1';
INSERT INTO ledger VALUES ('acct-1', 100), ('acct-1', -30), ('acct-2', 5);
RESET fencing.token;
SELECT account, sum(cents) FROM ledger GROUP BY 1 ORDER BY 1;
SELECT lease_release('ledger-writer', :'l1') AS released;
SET fencing.token = :'l1';
SELECT pg_temp.masked(pg_temp.outcome($$INSERT INTO ledger VALUES ('acct-1', -70)$$));
RESET fencing.token;

-- the refusals are counted apart from stale tokens: the lease was not live
SELECT relid, rejected_lease_expired > 0 AS counted, rejected_stale AS stale FROM stats WHERE relid = 'jobs'::regclass;

-- protect() again without a lease turns the lease check off
SELECT protect('jobs');
SELECT lease FROM protected WHERE relid = 'jobs'::regclass;
SET fencing.token = :'t2';
UPDATE jobs SET state = 'no lease needed' WHERE id = 2;
RESET fencing.token;
INSERT INTO jobs VALUES (5, 'no token needed', NULL);
SELECT id, state FROM jobs ORDER BY id;

SELECT unprotect('jobs'), unprotect('ledger');
DROP TABLE jobs, ledger;

-- a partition detached from a tree protected with a lease stays protected
-- on its own, lease included
CREATE TABLE shards (id int, fence fence) PARTITION BY RANGE (id);
CREATE TABLE shards_1 PARTITION OF shards FOR VALUES FROM (0) TO (100);
SELECT protect('shards', lease => 'shard-writer');
ALTER TABLE shards DETACH PARTITION shards_1;
SELECT relid, lease FROM protected WHERE relid IN ('shards'::regclass, 'shards_1'::regclass)
 ORDER BY relid::text;
SELECT unprotect('shards_1'), unprotect('shards');
DROP TABLE shards, shards_1;
