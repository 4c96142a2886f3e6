-- fencing.lease_stats: the outcomes of the lease functions and of the
-- guard's lease check, counted by the C code that decides; the end of a
-- grant (and its hold time) counted once, by the first call that notices
-- it.  fencing.lease_status: every lease and the time it has left.
-- This cluster preloads fencing.
\set SHOW_CONTEXT never
SET search_path = public, fencing;
DELETE FROM fencing.leases WHERE name LIKE 'st-%';

-- The counters are this database's, and earlier files of the run have
-- counted too: each part reads them as differences from a mark it sets
-- (no fencing.stats_reset() here: it zeroes the counters of every
-- database; test/t/083_stats_reset.pl tests it).  The counters as one
-- line, the hold figures as facts.
CREATE TEMP TABLE lease_mark AS SELECT * FROM fencing.lease_stats;
CREATE FUNCTION pg_temp.mark() RETURNS void LANGUAGE sql AS $$
    DELETE FROM lease_mark;
    INSERT INTO lease_mark SELECT * FROM fencing.lease_stats;
$$;
CREATE FUNCTION pg_temp.counts() RETURNS text LANGUAGE sql AS $$
    SELECT format('acq %s refused %s ren %s renfail %s rel %s relfail %s exp %s rej %s holds %s',
                  s.acquired - m.acquired, s.acquire_refused - m.acquire_refused,
                  s.renewed - m.renewed, s.renew_failed - m.renew_failed,
                  s.released - m.released, s.release_failed - m.release_failed,
                  s.expired - m.expired, s.rejected - m.rejected,
                  s.hold_count - m.hold_count)
      FROM fencing.lease_stats AS s, lease_mark AS m
$$;
-- the hold time added since the mark, in seconds
CREATE FUNCTION pg_temp.held() RETURNS double precision LANGUAGE sql AS $$
    SELECT s.hold_seconds_sum - m.hold_seconds_sum
      FROM fencing.lease_stats AS s, lease_mark AS m
$$;

-- The columns users program against
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid = 'fencing.lease_stats'::regclass AND a.attnum > 0
 ORDER BY a.attnum;
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid = 'fencing.lease_status'::regclass AND a.attnum > 0
 ORDER BY a.attnum;

SELECT pg_temp.mark();

-- acquire: granted, refused while another holder's lease is live
SELECT lease_acquire('st-a', 'one', '1 hour') AS a1 \gset
SELECT lease_acquire('st-a', 'two', '1 hour') IS NULL AS refused;
SELECT pg_temp.counts();
-- renew: with the token, and with a token that does not hold it
SELECT lease_renew('st-a', :'a1', '1 hour') AS renewed,
       lease_renew('st-a', '0:1', '1 hour') AS wrong_token,
       lease_renew('st-nonexistent', :'a1', '1 hour') AS no_such_lease,
       lease_renew('st-a', NULL, '1 hour') AS null_token;
SELECT pg_temp.counts();
-- release: once; twice is a failure.  The grant's end is counted with its
-- hold time (at least the 0.2 s slept here, and longer than any hold
-- counted before, so that it is the new maximum)
SELECT pg_sleep(greatest(0.2, hold_seconds_max + 0.05)) FROM fencing.lease_stats;
SELECT lease_release('st-a', :'a1') AS released,
       lease_release('st-a', :'a1') AS released_twice;
SELECT pg_temp.counts();
SELECT pg_temp.held() >= 0.2 AS sum_ok, hold_seconds_max >= 0.2 AS max_ok,
       abs(hold_seconds_max - pg_temp.held()) < 1e-6 AS one_hold
  FROM fencing.lease_stats;

-- An expiry is counted once, by whichever call first notices it: here a
-- check; the renew and release that follow fail without counting it
-- again, and so does the next acquire, which counts its grant
SELECT pg_temp.mark();
SELECT lease_acquire('st-b', 'one', '50 milliseconds') AS b1 \gset
SELECT pg_sleep(0.1);
SELECT lease_check('st-b', :'b1') AS check_after_expiry;
SELECT pg_temp.counts();
SELECT lease_renew('st-b', :'b1', '1 hour') AS renew_expired,
       lease_release('st-b', :'b1') AS release_expired,
       lease_check('st-b', :'b1') AS check_again;
SELECT lease_acquire('st-b', 'two', '1 hour') AS b2 \gset
SELECT pg_temp.counts();
-- its hold time is grant to expiry: about 50 ms, not the time until noticed
SELECT round(pg_temp.held()::numeric, 6) AS held_until_expiry;

-- ... here the first to notice is a renew by the holder that paused
SELECT pg_temp.mark();
SELECT lease_acquire('st-c', 'one', '50 milliseconds') AS c1 \gset
SELECT pg_sleep(0.1);
SELECT lease_renew('st-c', :'c1', '1 hour') AS renew_after_pause;
SELECT pg_temp.counts();
-- ... and here the next holder's acquire
SELECT lease_acquire('st-d', 'one', '50 milliseconds') AS d1 \gset
SELECT pg_sleep(0.1);
SELECT lease_acquire('st-d', 'two', '1 hour') IS NOT NULL AS taken_over;
SELECT pg_temp.counts();

-- The same holder acquiring again ends its grant (a hold, not an expiry)
SELECT pg_temp.mark();
SELECT lease_acquire('st-e', 'one', '1 hour') AS e1 \gset
SELECT lease_acquire('st-e', 'one', '1 hour') AS e2 \gset
SELECT :'e2'::fence > :'e1'::fence AS new_token;
SELECT pg_temp.counts();

-- The guard: writes refused because their token does not hold the
-- table's lease count in rejected (and in fencing.stats); the first
-- refusal after the lease ran out also counts the expiry
CREATE TABLE st_jobs (id int PRIMARY KEY, state text, fence fence);
INSERT INTO st_jobs VALUES (1, 'new', NULL);
SELECT protect('st_jobs', lease => 'st-jobs');
SELECT pg_temp.mark();
SELECT lease_acquire('st-jobs', 'worker-a', '1 hour') AS j1 \gset
BEGIN;
SET LOCAL fencing.token = :'j1';
UPDATE st_jobs SET state = 'running' WHERE id = 1;
COMMIT;
SELECT lease_renew('st-jobs', :'j1', '50 milliseconds') AS shortened;
SELECT pg_sleep(0.1);
\set VERBOSITY sqlstate
BEGIN;
SET LOCAL fencing.token = :'j1';
UPDATE st_jobs SET state = 'late' WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:1';
UPDATE st_jobs SET state = 'forged' WHERE id = 1;
ROLLBACK;
\set VERBOSITY default
SELECT pg_temp.counts();
SELECT accepted, rejected_stale, rejected_lease_expired FROM fencing.stats WHERE relid = 'st_jobs'::regclass;
SELECT id, state FROM st_jobs;
DROP TABLE st_jobs;

-- Calls that fail with an error (bad input, or 42501) count nothing
SELECT pg_temp.mark();
DO $$
BEGIN
    PERFORM fencing.lease_acquire('', 'x', '1 hour');
EXCEPTION WHEN invalid_parameter_value THEN
    RAISE NOTICE 'refused with %', SQLSTATE;
END $$;
SELECT pg_temp.counts();

-- fencing.lease_status: live leases with the time they have left; expired
-- and released ones with live false and remaining NULL
SELECT lease_acquire('st-live', 'w', '1 hour') AS l1 \gset
SELECT name, holder, token = :'l1' AS token_ok, live,
       remaining > interval '59 minutes' AND remaining <= interval '1 hour' AS remaining_ok,
       expires_at - granted_at = interval '1 hour' AS ttl_ok
  FROM fencing.lease_status WHERE name = 'st-live';
SELECT name, live, remaining IS NULL AS no_remaining FROM fencing.lease_status
 WHERE name IN ('st-a', 'st-b', 'st-c') ORDER BY name;

-- Reading the views is for everyone; they need no privilege on the table
CREATE ROLE regress_lease_stats_reader;
SET ROLE regress_lease_stats_reader;
SELECT count(*) > 0 AS reads_status FROM fencing.lease_status;
SELECT acquired >= 0 AS reads_stats FROM fencing.lease_stats;
RESET ROLE;
DROP ROLE regress_lease_stats_reader;

-- Every new object has a comment; the reader is VOLATILE and PARALLEL SAFE
SELECT c.oid::regclass::text AS object, obj_description(c.oid, 'pg_class') IS NOT NULL AS commented,
       (SELECT bool_and(col_description(c.oid, a.attnum) IS NOT NULL)
          FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0) AS columns_commented
  FROM pg_class c
 WHERE c.oid IN ('fencing.lease_stats'::regclass, 'fencing.lease_status'::regclass)
 ORDER BY 1;
SELECT p.proname, p.provolatile, p.proparallel, obj_description(p.oid, 'pg_proc') IS NOT NULL AS commented
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace AND p.proname = 'lease_stats_internal';

DELETE FROM fencing.leases WHERE name LIKE 'st-%';
