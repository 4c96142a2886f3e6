-- Leases inside PostgreSQL: acquire, renew, release, check, and the epoch.
\set SHOW_CONTEXT never
SET search_path = public, fencing;

-- the SQLSTATE and message of a statement, or ok
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- A fresh cluster is on timeline 1 and has not been bumped:
-- epoch = (1 << 32) + 0
SELECT current_epoch() >> 32 AS timeline,
       current_epoch() & 4294967295 AS bumps;

-- a free lease is granted with counter 1 of the current epoch
SELECT lease_acquire('orders', 'worker-a', '1 hour') AS t1 \gset
SELECT epoch(:'t1') = current_epoch() AS current_epoch, counter(:'t1') AS counter;
SELECT name, holder, token = :'t1' AS token_ok, expires_at > granted_at AS live
  FROM leases;

-- another holder gets NULL while it is live
SELECT lease_acquire('orders', 'worker-b', '1 hour') IS NULL AS refused;
SELECT lease_check('orders', :'t1') AS a_holds_it;

-- the same holder asking again is re-granted: a new token, the old one dies
SELECT lease_acquire('orders', 'worker-a', '1 hour') AS t2 \gset
SELECT :'t2'::fence > :'t1'::fence AS newer, counter(:'t2') AS counter;
SELECT lease_check('orders', :'t1') AS old_token, lease_check('orders', :'t2') AS new_token;
SELECT lease_renew('orders', :'t1', '1 hour') AS renew_old,
       lease_release('orders', :'t1') AS release_old;

-- renew extends a live lease held with its token
SELECT expires_at AS before FROM leases WHERE name = 'orders' \gset
SELECT lease_renew('orders', :'t2', '2 hours') AS renewed;
SELECT expires_at > :'before' AS extended FROM leases WHERE name = 'orders';

-- release frees it at once; the row keeps the token
SELECT lease_release('orders', :'t2') AS released;
SELECT lease_release('orders', :'t2') AS released_twice,
       lease_renew('orders', :'t2', '1 hour') AS renew_after_release,
       lease_check('orders', :'t2') AS check_after_release;
SELECT holder, token = :'t2' AS keeps_token, expires_at <= clock_timestamp() AS expired
  FROM leases WHERE name = 'orders';

-- the next grant beats every earlier one
SELECT lease_acquire('orders', 'worker-b', '50 milliseconds') AS t3 \gset
SELECT :'t3'::fence > :'t2'::fence AS newer, counter(:'t3') AS counter;

-- expiry: once the ttl ran out the token is dead, even if nobody took it
SELECT pg_sleep(0.1);
SELECT lease_check('orders', :'t3') AS check_expired,
       lease_renew('orders', :'t3', '1 hour') AS renew_expired,
       lease_release('orders', :'t3') AS release_expired;
-- and anybody may take it
SELECT lease_acquire('orders', 'worker-a', '1 hour') AS t4 \gset
SELECT :'t4'::fence > :'t3'::fence AS newer, counter(:'t4') AS counter;
SELECT lease_renew('orders', :'t3', '1 hour') AS renew_taken_over;

-- tokens of other leases do not match
SELECT lease_acquire('payments', 'worker-a', '1 hour') AS p1 \gset
SELECT counter(:'p1') AS own_counter;
SELECT lease_check('payments', :'t4') AS wrong_lease,
       lease_renew('payments', :'t4', '1 hour') AS renew_wrong,
       lease_release('payments', :'t4') AS release_wrong,
       lease_check('nonexistent', :'t4') AS no_such_lease,
       lease_check('orders', NULL) AS null_token,
       lease_renew('orders', NULL, '1 hour') AS renew_null_token,
       lease_release('orders', NULL) AS release_null_token;

-- bad input: clear errors, nothing written
SELECT count(*) AS leases_before FROM leases \gset
SELECT lease_acquire(NULL, 'worker-a', '1 hour');
SELECT lease_acquire('', 'worker-a', '1 hour');
SELECT lease_acquire('x', NULL, '1 hour');
SELECT lease_acquire('x', '', '1 hour');
SELECT lease_acquire('x', 'worker-a', NULL);
SELECT lease_acquire('x', 'worker-a', '0');
SELECT lease_acquire('x', 'worker-a', '-5 seconds');
SELECT pg_temp.outcome($$SELECT fencing.lease_acquire('x', 'worker-a', '1 day -25 hours')$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_renew(NULL, '1:1', '1 hour')$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_renew('', '1:1', '1 hour')$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_renew('orders', '1:1', NULL)$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_renew('orders', '1:1', '-1 hour')$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_release(NULL, '1:1')$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_release('', '1:1')$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_check(NULL, '1:1')$$);
SELECT pg_temp.outcome($$SELECT fencing.lease_check('', '1:1')$$);
SELECT count(*) = :leases_before AS nothing_written FROM leases;
-- a bad ttl does not touch a live lease
SELECT pg_temp.outcome(format('SELECT fencing.lease_renew(%L, %L, %L)', 'orders', :'t4', '-1 hour'));
SELECT lease_check('orders', :'t4') AS still_live;

-- bump_epoch(): a larger epoch, and the next grant starts it at counter 1
SELECT current_epoch() AS e0 \gset
SELECT bump_epoch() > :e0 AS bumped;
SELECT current_epoch() > :e0 AS grown, current_epoch() >> 32 AS timeline;
SELECT lease_release('orders', :'t4');
SELECT lease_acquire('orders', 'worker-b', '1 hour') AS t5 \gset
SELECT :'t5'::fence > :'t4'::fence AS newer, epoch(:'t5') = current_epoch() AS new_epoch,
       counter(:'t5') AS counter;
SELECT bump_epoch() > :e0 AS bumped_again;
SELECT singleton, timeline, timeline_offset FROM epoch_state;

-- The tables are dumped with the database (pg_extension_config_dump)
SELECT c.relname
  FROM pg_extension e, unnest(e.extconfig) AS cfg(oid)
  JOIN pg_class c ON c.oid = cfg.oid
 WHERE e.extname = 'fencing' AND c.relname IN ('leases', 'epoch_state')
 ORDER BY 1;

-- Privileges: applications may use the leases, not write the tables or
-- bump the epoch
CREATE ROLE regress_lease_app;
-- a hostile schema ahead on the search_path does not reach into the functions
CREATE SCHEMA lease_evil;
CREATE FUNCTION lease_evil.next(fencing.fence) RETURNS fencing.fence
    LANGUAGE sql AS $$ SELECT '0:1'::fencing.fence $$;
CREATE FUNCTION lease_evil.epoch(fencing.fence) RETURNS bigint
    LANGUAGE sql AS $$ SELECT 0::bigint $$;
GRANT USAGE ON SCHEMA lease_evil TO regress_lease_app;
SET ROLE regress_lease_app;
SELECT lease_acquire('app-lease', 'app', '1 hour') IS NOT NULL AS app_acquires;
-- fencing.leases is not readable by PUBLIC (tokens are capabilities);
-- fencing.lease_status is, with the token of its own leases only
-- (test lease_security has the attacks)
SELECT pg_temp.outcome($$SELECT count(*) FROM fencing.leases$$);
SELECT name, token IS NOT NULL AS sees_token, live
  FROM fencing.lease_status ORDER BY name;
SELECT pg_temp.outcome($$SELECT fencing.bump_epoch()$$);
SELECT pg_temp.outcome($$UPDATE fencing.leases SET expires_at = 'infinity'$$);
SELECT pg_temp.outcome($$DELETE FROM fencing.leases$$);
SELECT pg_temp.outcome($$INSERT INTO fencing.epoch_state VALUES (true, 0, 99, 0, 0)$$);
SELECT pg_temp.outcome($$UPDATE fencing.epoch_state SET timeline = 0$$);
SELECT pg_temp.outcome($$SELECT fencing.epoch_internal(true, true)$$);
SELECT pg_temp.outcome($$SELECT fencing.server_timeline()$$);
SELECT pg_temp.outcome($$UPDATE fencing.leases SET owner = 'regress_lease_app'$$);
SET search_path = lease_evil, public, fencing;
SELECT lease_acquire('app-lease', 'app', '1 hour') AS a2 \gset
SELECT fencing.counter(:'a2') AS regranted_counter;
SELECT lease_acquire('app-lease', 'intruder', '1 hour') IS NULL AS still_refused;
RESET ROLE;
SET search_path = public, fencing;
DROP SCHEMA lease_evil CASCADE;
DROP ROLE regress_lease_app;
