/* sql/fencing--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.4'" to load this file. \quit

-- A fresh CREATE EXTENSION fencing runs fencing--1.0.sql and every update
-- script up to this one, so an updated database and a new one have the
-- same objects by construction.
--
-- One section per concern.  Each section qualifies every name
-- (@extschema@, pg_catalog) as the earlier scripts do.

------------------------------------------------------------------------------
-- Statistics: a refusal counted by its reason (src/stats.c)
------------------------------------------------------------------------------

-- A lost lock (stale_token), a token used by a second transaction of a
-- strict table (token_already_used: a programming error, never a lost
-- lock) and a write whose built-in lease was not live are counted apart,
-- so that an alert can page on lost locks alone.  The views keep their
-- columns and gain new ones at the end; rejected_stale now counts
-- stale_token refusals only.  The functions behind them are new: a
-- function's result columns cannot change in place.

CREATE FUNCTION @extschema@.table_counters(
        OUT relid pg_catalog.regclass,
        OUT accepted bigint,
        OUT rejected_stale bigint,
        OUT rejected_missing bigint,
        OUT bypassed bigint,
        OUT rejected_already_used bigint,
        OUT rejected_lease_expired bigint)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'fencing_stats_internal'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.table_counters() IS
    'the guard''s counters for the tables of the current database (read it through the view fencing.stats)';

CREATE OR REPLACE VIEW @extschema@.stats AS
    SELECT s.relid, s.accepted, s.rejected_stale, s.rejected_missing, s.bypassed,
           s.rejected_already_used, s.rejected_lease_expired
      FROM @extschema@.table_counters() AS s;
DROP FUNCTION @extschema@.stats_internal();
COMMENT ON COLUMN @extschema@.stats.rejected_stale IS
    'writes rejected with SF001 stale_token: a newer token had written (the writer''s lock was lost)';
COMMENT ON COLUMN @extschema@.stats.rejected_already_used IS
    'writes rejected with SF001 token_already_used: a strict table refused a token that another transaction had used (a programming error, not a lost lock)';
COMMENT ON COLUMN @extschema@.stats.rejected_lease_expired IS
    'writes rejected by the table''s built-in lease (fencing.protect(..., lease => ...)): the token did not hold it, live';

CREATE FUNCTION @extschema@.idempotency_counters(
        OUT started bigint,
        OUT replayed bigint,
        OUT resumed bigint,
        OUT reused_rejected bigint,
        OUT in_progress_rejected bigint,
        OUT claim_taken_over bigint)
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencing_idempotency_stats_internal'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idempotency_counters() IS
    'the outcomes of fencing.idem_begin() and the lost claims (read it through the view fencing.idempotency_stats)';

CREATE OR REPLACE VIEW @extschema@.idempotency_stats AS
    SELECT s.started, s.replayed, s.resumed, s.reused_rejected, s.in_progress_rejected,
           s.claim_taken_over
      FROM @extschema@.idempotency_counters() AS s;
DROP FUNCTION @extschema@.idempotency_stats_internal();
COMMENT ON COLUMN @extschema@.idempotency_stats.claim_taken_over IS
    'calls of idem_checkpoint(), idem_complete() or idem_abandon() refused with SF001 claim_taken_over: the caller''s claim was lost';

------------------------------------------------------------------------------
-- Lease holders are shown to whom tokens are (fencing.lease_status)
------------------------------------------------------------------------------

-- A holder names a host and a process (host-a.internal:pid=4711): it is
-- shown, with the token, only to the lease's owner role and its members,
-- the extension's owner, superusers and members of pg_read_all_stats.
-- Everybody else still sees every lease, its times and whether it is live.
CREATE OR REPLACE VIEW @extschema@.lease_status AS
    SELECT l.name,
           CASE WHEN v.visible THEN l.holder END AS holder,
           CASE WHEN v.visible THEN l.token END AS token,
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
                  WHERE x.extname OPERATOR(pg_catalog.=) 'fencing') AS e
     CROSS JOIN LATERAL (
         SELECT (pg_catalog.pg_has_role(COALESCE(l.owner::pg_catalog.oid, e.extowner), 'MEMBER')
                 OR pg_catalog.pg_has_role(e.extowner, 'MEMBER')
                 OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')) AS visible
     ) AS v;
COMMENT ON VIEW @extschema@.lease_status IS
    'every lease with its grant, expiry, whether it is live and the time it has left (etcdctl lease timetolive); the holder and the token only for roles the lease belongs to, the extension''s owner and pg_read_all_stats; no preload needed';
COMMENT ON COLUMN @extschema@.lease_status.holder IS
    'the holder of the last grant; NULL for roles that may not see it';
COMMENT ON COLUMN @extschema@.lease_status.token IS
    'the token of the last grant; NULL for roles that may not see it';

------------------------------------------------------------------------------
-- One grant, many transactions; the first meter (src/lease.c, src/meter.c)
------------------------------------------------------------------------------

-- A holder that writes many transactions under one lease takes a new
-- token for each, while the lease is still its own: strict tables accept
-- each once, and the token proves the lease was live when it was taken.
CREATE FUNCTION @extschema@.lease_next(name text, token @extschema@.fence,
                                       ttl interval DEFAULT NULL)
    RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fencing_lease_next'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_next(text, @extschema@.fence, interval) IS
    'a new token of a live lease held with token (renewed to now + ttl when ttl is given), greater than every token granted for the name; NULL once the lease expired, was released or was taken over; 42501 for roles the lease does not belong to';

-- The first meter: a new holder raises the key- or table-scope fences of
-- what it is about to write the moment it takes the lock, so that an old
-- holder waking up before the new holder's first real write is refused.
-- A guarded write of the fence alone: a stale token is refused (SF001),
-- with the guard's rules of strict mode, ownership and privileges.
CREATE FUNCTION @extschema@.raise_fence(tbl pg_catalog.regclass,
                                        token @extschema@.fence,
                                        VARIADIC key text[] DEFAULT '{}')
    RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fencing_raise_fence'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.raise_fence(pg_catalog.regclass, @extschema@.fence, text[]) IS
    'raise the fence of a key (key values as text, in the order of the key columns) or of the table (no key) of a protected table in key or table scope to token, without writing a row; SF001 when token does not beat the fence; needs INSERT or UPDATE on the table';

------------------------------------------------------------------------------
-- Updates re-check what is already there: foreign keys whose action
-- another role starts (src/guard.c refuses such writes now)
------------------------------------------------------------------------------

-- A foreign key of a protected table (or of one of its partitions and
-- children) whose ON UPDATE or ON DELETE action writes it (CASCADE, SET
-- NULL, SET DEFAULT), referencing a table of a role that is not a member
-- of the protected table's owner: older versions judged the action's
-- writes by that role's token, so that role could move the protected
-- table's fences by changing rows of its own.  The 1.4 guard refuses such a
-- write (42501) unless the role may write the protected table itself; each
-- such foreign key is named here with its remedy.
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT m.member::pg_catalog.regclass AS tbl, c.conname,
               c.confrelid::pg_catalog.regclass AS referenced,
               pg_catalog.pg_get_userbyid(rc.relowner) AS referenced_owner
          FROM @extschema@.protected_members() AS m
          JOIN pg_catalog.pg_class AS pc ON pc.oid OPERATOR(pg_catalog.=) m.relid
          JOIN pg_catalog.pg_constraint AS c ON c.conrelid OPERATOR(pg_catalog.=) m.member
          JOIN pg_catalog.pg_class AS rc ON rc.oid OPERATOR(pg_catalog.=) c.confrelid
         WHERE c.contype OPERATOR(pg_catalog.=) 'f'
           AND (c.confupdtype OPERATOR(pg_catalog.=) ANY ('{c,n,d}'::"char"[])
                OR c.confdeltype OPERATOR(pg_catalog.=) ANY ('{c,n,d}'::"char"[]))
           AND NOT pg_catalog.pg_has_role(rc.relowner, pc.relowner, 'USAGE')
         ORDER BY 1, 2
    LOOP
        RAISE WARNING 'foreign key % of protected table % follows table % of role %',
                      r.conname, r.tbl, r.referenced, r.referenced_owner
            USING DETAIL = 'Its ON UPDATE or ON DELETE action writes the protected table when that role changes its own rows; such a write is now refused (42501) unless the role may write the protected table itself. Older versions judged it by that role''s token.',
                  HINT = 'Declare the foreign key ON UPDATE/ON DELETE RESTRICT or NO ACTION, or reference a table of the protected table''s owner.';
    END LOOP;
END $$;
