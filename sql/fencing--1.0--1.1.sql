/* sql/fencing--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

-- 1.0 is frozen as released.  A fresh CREATE EXTENSION fencing runs
-- fencing--1.0.sql and then this script, as PostgreSQL's contrib modules
-- do, so an updated database and a new one have the same objects by
-- construction; test/suites/update.sh proves it on a filled database.
--
-- One section per concern, in the order of the 1.0 script.  Each section
-- qualifies every name (@extschema@, pg_catalog) as the 1.0 script does.

------------------------------------------------------------------------------
-- Hardening: typed scope storage, scope owners, guard health (issue 10)
------------------------------------------------------------------------------

-- (end of hardening section)

------------------------------------------------------------------------------
-- Statistics and observability (issue 13)
------------------------------------------------------------------------------

-- The counters of the built-in leases (src/stats.c, counted by
-- src/lease.c), one row for the current database.  Like fencing.stats they
-- need shared_preload_libraries = 'fencing' (55000 with a HINT otherwise)
-- and are zeroed by fencing.stats_reset().  All counters (fencing.stats,
-- fencing.idempotency_stats, fencing.lease_stats) are saved at a clean
-- shutdown and loaded at start; after a crash they start from zero.
CREATE FUNCTION @extschema@.lease_stats_internal(
        OUT acquired bigint,
        OUT acquire_refused bigint,
        OUT renewed bigint,
        OUT renew_failed bigint,
        OUT released bigint,
        OUT release_failed bigint,
        OUT expired bigint,
        OUT rejected bigint,
        OUT hold_count bigint,
        OUT hold_seconds_sum double precision,
        OUT hold_seconds_max double precision)
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencing_lease_stats_internal'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.lease_stats_internal() IS
    'the counters of the leases of the current database (read it through the view fencing.lease_stats)';

CREATE VIEW @extschema@.lease_stats AS
    SELECT s.acquired, s.acquire_refused, s.renewed, s.renew_failed,
           s.released, s.release_failed, s.expired, s.rejected,
           s.hold_count, s.hold_seconds_sum, s.hold_seconds_max
      FROM @extschema@.lease_stats_internal() AS s;
COMMENT ON VIEW @extschema@.lease_stats IS
    'what happened to the leases of the current database since fencing.stats_reset() (kept across clean restarts); needs shared_preload_libraries = ''fencing''';
COMMENT ON COLUMN @extschema@.lease_stats.acquired IS 'grants by fencing.lease_acquire()';
COMMENT ON COLUMN @extschema@.lease_stats.acquire_refused IS 'fencing.lease_acquire() calls that returned NULL: another holder''s lease was live';
COMMENT ON COLUMN @extschema@.lease_stats.renewed IS 'fencing.lease_renew() calls that extended a live lease';
COMMENT ON COLUMN @extschema@.lease_stats.renew_failed IS 'fencing.lease_renew() calls that returned false: the lease had expired, was released or was taken over';
COMMENT ON COLUMN @extschema@.lease_stats.released IS 'fencing.lease_release() calls that gave a live lease up';
COMMENT ON COLUMN @extschema@.lease_stats.release_failed IS 'fencing.lease_release() calls that returned false';
COMMENT ON COLUMN @extschema@.lease_stats.expired IS 'grants that ended by running out rather than by release, counted once, by the first acquire, renew, release or check of the name (the guard''s included) that noticed';
COMMENT ON COLUMN @extschema@.lease_stats.rejected IS 'writes the guard refused (SF001) because their token was not the current, live token of the table''s lease';
COMMENT ON COLUMN @extschema@.lease_stats.hold_count IS 'grants whose end was counted: released, expired, or replaced by their own holder''s next acquire';
COMMENT ON COLUMN @extschema@.lease_stats.hold_seconds_sum IS 'the hold times of those grants, in seconds: grant to release, or to expiry for expired grants';
COMMENT ON COLUMN @extschema@.lease_stats.hold_seconds_max IS 'the longest of those hold times, in seconds';

COMMENT ON FUNCTION @extschema@.stats_reset() IS
    'zero fencing.stats and fencing.lease_stats (of all databases) and fencing.idempotency_stats';

REVOKE ALL ON @extschema@.lease_stats FROM PUBLIC;
GRANT SELECT ON @extschema@.lease_stats TO PUBLIC;

-- (end of observability section)

------------------------------------------------------------------------------
-- Idempotency keys (issues 10, 15)
------------------------------------------------------------------------------

-- (end of idempotency section)

------------------------------------------------------------------------------
-- Leases (issues 10, 13)
------------------------------------------------------------------------------

-- (end of lease section)

------------------------------------------------------------------------------
-- Distributed tables (issue 14)
------------------------------------------------------------------------------

-- (end of distributed tables section)
