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

-- Owners (SPEC section 7).  A lease name belongs to the role that first
-- acquired it: other roles (not members of it, nor superusers) get 42501
-- from lease_acquire, lease_renew, lease_release and lease_check of that
-- name, and its token is readable only by its owner roles, the extension's
-- owner and superusers.
--
-- The leases of 1.0 recorded no owner.  They go to the extension's owner:
-- nobody gains a lease by the update, and only the extension's owner (who
-- can write fencing.leases) hands them over, for example in the same
-- transaction as the update, so that applications renew without a break:
--     BEGIN;
--     ALTER EXTENSION fencing UPDATE;
--     UPDATE fencing.leases SET owner = 'app' WHERE name LIKE 'orders%';
--     COMMIT;
-- Until then an application role that is not a member of the extension's
-- owner gets 42501 from its next renew, and stops: it fails closed.
ALTER TABLE @extschema@.leases ADD COLUMN owner pg_catalog.regrole;
UPDATE @extschema@.leases
   SET owner = (SELECT e.extowner::pg_catalog.regrole
                  FROM pg_catalog.pg_extension AS e
                 WHERE e.extname OPERATOR(pg_catalog.=) 'fencing');
ALTER TABLE @extschema@.leases ALTER COLUMN owner SET NOT NULL;
COMMENT ON COLUMN @extschema@.leases.owner IS
    'the role the lease belongs to: the first role that acquired it (the extension''s owner for leases from before 1.1); the extension''s owner hands a lease over by changing it';
COMMENT ON TABLE @extschema@.leases IS
    'leases granted by fencing.lease_acquire(): a lease is live while expires_at is in the future; the row keeps the last token after expiry or release; readable by the extension''s owner only (fencing.lease_status shows it to everyone, tokens masked)';

DO $$
DECLARE
    n bigint;
BEGIN
    SELECT pg_catalog.count(*) INTO n FROM @extschema@.leases;
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE NOTICE 'the % leases from fencing 1.0 now belong to the extension''s owner, role %', n,
            (SELECT e.extowner::pg_catalog.regrole FROM pg_catalog.pg_extension AS e
              WHERE e.extname OPERATOR(pg_catalog.=) 'fencing')
        USING HINT = 'Hand each to the role of its application, for example UPDATE fencing.leases SET owner = ''app'' WHERE name = ''orders''; until then other roles get 42501 from them.';
    END IF;
END
$$;

-- Tokens are capabilities: the table is no longer readable by PUBLIC.
REVOKE ALL ON @extschema@.leases FROM PUBLIC;

-- The lease functions move to C (src/lease.c): they must know their
-- caller, which a SECURITY DEFINER function cannot (current_user is its
-- owner there), and they count their outcomes in fencing.lease_stats.
-- CREATE OR REPLACE keeps their ACLs (EXECUTE for PUBLIC) and makes them
-- SECURITY INVOKER without a SET clause: they run their own, fully
-- qualified statements as the extension's owner.
CREATE OR REPLACE FUNCTION @extschema@.lease_acquire(name text, holder text, ttl interval)
    RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fencing_lease_acquire'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_acquire(text, text, interval) IS
    'grant the lease for ttl and return its new token; NULL while another holder''s lease is live (the same holder gets a new token); a new name belongs to the calling role, other roles get 42501';

CREATE OR REPLACE FUNCTION @extschema@.lease_renew(name text, token @extschema@.fence, ttl interval)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'fencing_lease_renew'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_renew(text, @extschema@.fence, interval) IS
    'extend a live lease held with token to now + ttl; false once it expired, was released or was taken over; 42501 for roles the lease does not belong to';

CREATE OR REPLACE FUNCTION @extschema@.lease_release(name text, token @extschema@.fence)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'fencing_lease_release'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_release(text, @extschema@.fence) IS
    'give up a live lease held with token, so that the next lease_acquire succeeds at once; false when token does not hold it; 42501 for roles the lease does not belong to';

CREATE OR REPLACE FUNCTION @extschema@.lease_check(name text, token @extschema@.fence)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'fencing_lease_check'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_check(text, @extschema@.fence) IS
    'true while token is the lease''s current token and the lease is live; 42501 for roles the lease does not belong to (the answer would tell them its token)';

-- Their checks are done in C now.
DROP FUNCTION @extschema@.lease_check_name(text);
DROP FUNCTION @extschema@.lease_expiry(timestamptz, interval);

-- fencing.lease_status (SPEC section 9): every lease, for everyone, like
-- etcdctl lease timetolive.  The token is shown to the roles the lease
-- belongs to (members, superusers) and to the extension's owner; any
-- other role sees NULL there, and everything else.  The view reads the
-- table with its owner's rights, while pg_has_role() checks the querying
-- role.  One clock reading serves all rows.
CREATE VIEW @extschema@.lease_status AS
    SELECT l.name,
           l.holder,
           CASE WHEN pg_catalog.pg_has_role(l.owner::pg_catalog.oid, 'MEMBER')
                  OR pg_catalog.pg_has_role(e.extowner, 'MEMBER')
                THEN l.token END AS token,
           l.granted_at,
           l.expires_at,
           (l.token IS NOT NULL
            AND l.expires_at IS NOT NULL
            AND l.expires_at OPERATOR(pg_catalog.>) c.now) AS live,
           CASE WHEN l.token IS NOT NULL
                 AND l.expires_at OPERATOR(pg_catalog.>) c.now
                THEN l.expires_at OPERATOR(pg_catalog.-) c.now END AS remaining
      FROM @extschema@.leases AS l
     CROSS JOIN (SELECT pg_catalog.clock_timestamp() AS now) AS c
     CROSS JOIN (SELECT x.extowner FROM pg_catalog.pg_extension AS x
                  WHERE x.extname OPERATOR(pg_catalog.=) 'fencing') AS e;
COMMENT ON VIEW @extschema@.lease_status IS
    'every lease with its holder, grant, expiry, whether it is live and the time it has left (etcdctl lease timetolive); the token only for roles the lease belongs to; no preload needed';
COMMENT ON COLUMN @extschema@.lease_status.name IS 'the lease';
COMMENT ON COLUMN @extschema@.lease_status.holder IS 'the holder of the last grant';
COMMENT ON COLUMN @extschema@.lease_status.token IS 'the token of the last grant; NULL for roles the lease does not belong to';
COMMENT ON COLUMN @extschema@.lease_status.granted_at IS 'when the last grant was made';
COMMENT ON COLUMN @extschema@.lease_status.expires_at IS 'when the last grant runs out (or ran out, or was released)';
COMMENT ON COLUMN @extschema@.lease_status.live IS 'the last grant has neither run out nor been released (server clock)';
COMMENT ON COLUMN @extschema@.lease_status.remaining IS 'the time the live grant has left; NULL when it is not live';
REVOKE ALL ON @extschema@.lease_status FROM PUBLIC;
GRANT SELECT ON @extschema@.lease_status TO PUBLIC;

-- (end of lease section)

------------------------------------------------------------------------------
-- Distributed tables (issue 14)
------------------------------------------------------------------------------

-- (end of distributed tables section)
