/* sql/fencing--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION fencing" to load this file. \quit

-- every role may use the type and the functions meant for it; what must not
-- be public is revoked object by object below
GRANT USAGE ON SCHEMA @extschema@ TO PUBLIC;

------------------------------------------------------------------------------
-- The type fencing.fence: (epoch, counter), ordered lexicographically
------------------------------------------------------------------------------

CREATE TYPE @extschema@.fence;

CREATE FUNCTION @extschema@.fence_in(cstring) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_in' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_out(@extschema@.fence) RETURNS cstring
    AS 'MODULE_PATHNAME', 'fence_out' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_recv(internal) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_recv' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_send(@extschema@.fence) RETURNS bytea
    AS 'MODULE_PATHNAME', 'fence_send' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE TYPE @extschema@.fence (
    INPUT = @extschema@.fence_in,
    OUTPUT = @extschema@.fence_out,
    RECEIVE = @extschema@.fence_recv,
    SEND = @extschema@.fence_send,
    INTERNALLENGTH = 16,
    ALIGNMENT = double,
    STORAGE = plain
);
COMMENT ON TYPE @extschema@.fence IS
    'fencing token (epoch, counter), written E:C; ordered by epoch, then counter';

CREATE FUNCTION @extschema@.fence(epoch bigint, counter bigint) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_make' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.fence(bigint, bigint) IS
    'build a fence from its epoch and counter';

CREATE FUNCTION @extschema@.epoch(@extschema@.fence) RETURNS bigint
    AS 'MODULE_PATHNAME', 'fence_epoch' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.epoch(@extschema@.fence) IS 'the epoch of a fence';

CREATE FUNCTION @extschema@.counter(@extschema@.fence) RETURNS bigint
    AS 'MODULE_PATHNAME', 'fence_counter' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.counter(@extschema@.fence) IS 'the counter of a fence';

CREATE FUNCTION @extschema@.next(@extschema@.fence) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_next' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.next(@extschema@.fence) IS
    'the next fence in the same epoch (counter + 1)';

CREATE FUNCTION @extschema@.next_epoch(@extschema@.fence) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_next_epoch' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.next_epoch(@extschema@.fence) IS
    'the first fence of the next epoch (epoch + 1, counter 0)';

-- Casts
CREATE FUNCTION @extschema@.fence(bigint) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_from_int8' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.fence(bigint) IS 'a counter as a fence of epoch 0';

CREATE CAST (bigint AS @extschema@.fence)
    WITH FUNCTION @extschema@.fence(bigint) AS ASSIGNMENT;
CREATE CAST (@extschema@.fence AS text) WITH INOUT AS ASSIGNMENT;
CREATE CAST (text AS @extschema@.fence) WITH INOUT;

-- Comparison
CREATE FUNCTION @extschema@.fence_eq(@extschema@.fence, @extschema@.fence) RETURNS boolean
    AS 'MODULE_PATHNAME', 'fence_eq' LANGUAGE C IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_ne(@extschema@.fence, @extschema@.fence) RETURNS boolean
    AS 'MODULE_PATHNAME', 'fence_ne' LANGUAGE C IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_lt(@extschema@.fence, @extschema@.fence) RETURNS boolean
    AS 'MODULE_PATHNAME', 'fence_lt' LANGUAGE C IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_le(@extschema@.fence, @extschema@.fence) RETURNS boolean
    AS 'MODULE_PATHNAME', 'fence_le' LANGUAGE C IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_gt(@extschema@.fence, @extschema@.fence) RETURNS boolean
    AS 'MODULE_PATHNAME', 'fence_gt' LANGUAGE C IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_ge(@extschema@.fence, @extschema@.fence) RETURNS boolean
    AS 'MODULE_PATHNAME', 'fence_ge' LANGUAGE C IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_cmp(@extschema@.fence, @extschema@.fence) RETURNS integer
    AS 'MODULE_PATHNAME', 'fence_cmp' LANGUAGE C IMMUTABLE STRICT LEAKPROOF PARALLEL SAFE;

CREATE OPERATOR @extschema@.= (
    LEFTARG = @extschema@.fence, RIGHTARG = @extschema@.fence,
    FUNCTION = @extschema@.fence_eq,
    COMMUTATOR = OPERATOR(@extschema@.=), NEGATOR = OPERATOR(@extschema@.<>),
    RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel,
    HASHES, MERGES
);
CREATE OPERATOR @extschema@.<> (
    LEFTARG = @extschema@.fence, RIGHTARG = @extschema@.fence,
    FUNCTION = @extschema@.fence_ne,
    COMMUTATOR = OPERATOR(@extschema@.<>), NEGATOR = OPERATOR(@extschema@.=),
    RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel
);
CREATE OPERATOR @extschema@.< (
    LEFTARG = @extschema@.fence, RIGHTARG = @extschema@.fence,
    FUNCTION = @extschema@.fence_lt,
    COMMUTATOR = OPERATOR(@extschema@.>), NEGATOR = OPERATOR(@extschema@.>=),
    RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel
);
CREATE OPERATOR @extschema@.<= (
    LEFTARG = @extschema@.fence, RIGHTARG = @extschema@.fence,
    FUNCTION = @extschema@.fence_le,
    COMMUTATOR = OPERATOR(@extschema@.>=), NEGATOR = OPERATOR(@extschema@.>),
    RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel
);
CREATE OPERATOR @extschema@.> (
    LEFTARG = @extschema@.fence, RIGHTARG = @extschema@.fence,
    FUNCTION = @extschema@.fence_gt,
    COMMUTATOR = OPERATOR(@extschema@.<), NEGATOR = OPERATOR(@extschema@.<=),
    RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel
);
CREATE OPERATOR @extschema@.>= (
    LEFTARG = @extschema@.fence, RIGHTARG = @extschema@.fence,
    FUNCTION = @extschema@.fence_ge,
    COMMUTATOR = OPERATOR(@extschema@.<=), NEGATOR = OPERATOR(@extschema@.<),
    RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel
);

-- Hashing: frozen from 1.0 on (hash indexes and hash partitions store it)
CREATE FUNCTION @extschema@.fence_hash(@extschema@.fence) RETURNS integer
    AS 'MODULE_PATHNAME', 'fence_hash' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_hash_extended(@extschema@.fence, bigint) RETURNS bigint
    AS 'MODULE_PATHNAME', 'fence_hash_extended' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE OPERATOR CLASS @extschema@.fence_ops
    DEFAULT FOR TYPE @extschema@.fence USING btree AS
        OPERATOR 1 @extschema@.<,
        OPERATOR 2 @extschema@.<=,
        OPERATOR 3 @extschema@.=,
        OPERATOR 4 @extschema@.>=,
        OPERATOR 5 @extschema@.>,
        FUNCTION 1 @extschema@.fence_cmp(@extschema@.fence, @extschema@.fence);

CREATE OPERATOR CLASS @extschema@.fence_hash_ops
    DEFAULT FOR TYPE @extschema@.fence USING hash AS
        OPERATOR 1 @extschema@.=,
        FUNCTION 1 @extschema@.fence_hash(@extschema@.fence),
        FUNCTION 2 @extschema@.fence_hash_extended(@extschema@.fence, bigint);

-- Aggregates
CREATE FUNCTION @extschema@.fence_larger(@extschema@.fence, @extschema@.fence) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_larger' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION @extschema@.fence_smaller(@extschema@.fence, @extschema@.fence) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_smaller' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE @extschema@.max(@extschema@.fence) (
    SFUNC = @extschema@.fence_larger, STYPE = @extschema@.fence,
    COMBINEFUNC = @extschema@.fence_larger,
    SORTOP = OPERATOR(@extschema@.>), PARALLEL = SAFE
);
COMMENT ON AGGREGATE @extschema@.max(@extschema@.fence) IS 'the newest fence';
CREATE AGGREGATE @extschema@.min(@extschema@.fence) (
    SFUNC = @extschema@.fence_smaller, STYPE = @extschema@.fence,
    COMBINEFUNC = @extschema@.fence_smaller,
    SORTOP = OPERATOR(@extschema@.<), PARALLEL = SAFE
);
COMMENT ON AGGREGATE @extschema@.min(@extschema@.fence) IS 'the oldest fence';

------------------------------------------------------------------------------
-- Compare-and-advance without triggers
------------------------------------------------------------------------------

CREATE FUNCTION @extschema@.advance(current @extschema@.fence, token @extschema@.fence,
                                    strict boolean DEFAULT true)
    RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_advance' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.advance(@extschema@.fence, @extschema@.fence, boolean) IS
    'return token if it beats current (>, or >= when not strict); raise SF001 otherwise';

------------------------------------------------------------------------------
-- The guard: protect(), unprotect(), fencing.protected, fencing.scopes
-- (src/guard.c, src/protect.c, src/scopes.c)
------------------------------------------------------------------------------

CREATE TABLE @extschema@.protected (
    relid regclass PRIMARY KEY,
    fence_column name NOT NULL,
    key_columns name[],
    strict boolean NOT NULL DEFAULT true,
    scope_name text NOT NULL
);
COMMENT ON TABLE @extschema@.protected IS
    'tables protected by the fencing guard, with their settings; written by fencing.protect()';

-- Every guarded write of a key looks its row up and updates it (HOT): the
-- "C" collation spares strcoll() in each look-up (keys are only ever
-- compared for equality), and half-full pages halve the cost of the page
-- pruning that a hot row's updates bring on nearly every visit.
CREATE TABLE @extschema@.scopes (
    scope_name text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    fence @extschema@.fence NOT NULL,
    PRIMARY KEY (scope_name, key)
) WITH (fillfactor = 50);
COMMENT ON TABLE @extschema@.scopes IS
    'the highest accepted token of each key (or table) scope; key is a JSON array of the key values';

-- pg_dump keeps protections and fences: a restore must not let a stale writer in
SELECT pg_catalog.pg_extension_config_dump('@extschema@.protected', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.scopes', '');

REVOKE ALL ON @extschema@.protected, @extschema@.scopes FROM PUBLIC;
GRANT SELECT ON @extschema@.protected, @extschema@.scopes TO PUBLIC;

CREATE FUNCTION @extschema@.guard() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_guard' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.guard() IS
    'the fencing guard: BEFORE ROW trigger of protected tables (installed by fencing.protect)';

CREATE FUNCTION @extschema@.guard_truncate() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_guard_truncate' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.guard_truncate() IS
    'refuses TRUNCATE of protected tables (installed by fencing.protect)';

CREATE FUNCTION @extschema@.protect(tbl regclass,
                                    fence_column name DEFAULT 'fence',
                                    key_columns name[] DEFAULT NULL,
                                    strict boolean DEFAULT true,
                                    scope_name text DEFAULT NULL)
    RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_protect' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.protect(regclass, name, name[], boolean, text) IS
    'protect a table: every write must carry a token newer than its scope''s fence';

CREATE FUNCTION @extschema@.unprotect(tbl regclass) RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_unprotect' LANGUAGE C STRICT VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.unprotect(regclass) IS
    'remove the fencing guard from a table (its scope fences are kept)';

CREATE FUNCTION @extschema@.scope_key(VARIADIC key_values text[]) RETURNS text
    AS 'MODULE_PATHNAME', 'fencing_scope_key' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.scope_key(text[]) IS
    'the key under which fencing.scopes stores the fence of these key values';

-- (end of guard section)

------------------------------------------------------------------------------
-- Guarding the guard: event triggers (src/ddl_guard.c)
------------------------------------------------------------------------------

-- ddl_command_start: refuse DDL that lowers a protected table's protection (SF005)
CREATE FUNCTION @extschema@.ddl_guard_start() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_ddl_guard_start' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.ddl_guard_start() IS
    'event trigger: refuses DDL that would disable or break the guard of a protected table (SF005)';

-- ddl_command_end: guard partitions created or attached later; keep detached ones protected
CREATE FUNCTION @extschema@.ddl_guard_end() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_ddl_guard_end' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.ddl_guard_end() IS
    'event trigger: guards partitions created or attached under a protected table; a detached partition stays protected';

-- sql_drop: a dropped table leaves fencing.protected (its scope fences stay)
CREATE FUNCTION @extschema@.ddl_guard_drop() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_ddl_guard_drop' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.ddl_guard_drop() IS
    'event trigger: removes dropped tables from fencing.protected (their fences in fencing.scopes are kept)';

CREATE EVENT TRIGGER fencing_ddl_guard_start ON ddl_command_start
    WHEN TAG IN ('ALTER TABLE', 'ALTER FOREIGN TABLE', 'DROP TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION @extschema@.ddl_guard_start();
CREATE EVENT TRIGGER fencing_ddl_guard_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'CREATE FOREIGN TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION @extschema@.ddl_guard_end();
CREATE EVENT TRIGGER fencing_ddl_guard_drop ON sql_drop
    EXECUTE FUNCTION @extschema@.ddl_guard_drop();

-- fire with session_replication_role = replica too
ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE ALWAYS;
ALTER EVENT TRIGGER fencing_ddl_guard_end ENABLE ALWAYS;
ALTER EVENT TRIGGER fencing_ddl_guard_drop ENABLE ALWAYS;

-- What the on-call engineer checks first: is every guard in place?
CREATE VIEW @extschema@.protected_tables AS
WITH tree AS (
    -- the protected table and, when partitioned, every partition at any level
    SELECT p.relid, t.relid AS member
      FROM @extschema@.protected p
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relid
      CROSS JOIN LATERAL pg_catalog.pg_partition_tree(p.relid) t
     WHERE c.relkind OPERATOR(pg_catalog.=) 'p'
    UNION ALL
    SELECT p.relid, p.relid
      FROM @extschema@.protected p
      JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relid
     WHERE c.relkind OPERATOR(pg_catalog.<>) 'p'
),
expected (tgname, tgfoid) AS (
    VALUES ('zz_fencing_guard'::pg_catalog.name,
            '@extschema@.guard()'::pg_catalog.regprocedure::pg_catalog.oid),
           ('zz_fencing_truncate'::pg_catalog.name,
            '@extschema@.guard_truncate()'::pg_catalog.regprocedure::pg_catalog.oid)
),
problems AS (
    -- the triggers of every member
    SELECT tr.relid,
           pg_catalog.format(
               CASE WHEN g.oid IS NULL THEN 'trigger %s is missing on %s'
                    WHEN g.tgfoid OPERATOR(pg_catalog.<>) e.tgfoid
                        THEN 'trigger %s on %s calls the wrong function'
                    ELSE 'trigger %s on %s is not ENABLE ALWAYS (tgenabled = %s)'
               END, e.tgname, tr.member::pg_catalog.regclass, g.tgenabled) AS problem
      FROM tree tr
      CROSS JOIN expected e
      LEFT JOIN pg_catalog.pg_trigger g
             ON g.tgrelid OPERATOR(pg_catalog.=) tr.member
            AND g.tgname OPERATOR(pg_catalog.=) e.tgname
     WHERE g.oid IS NULL
        OR g.tgfoid OPERATOR(pg_catalog.<>) e.tgfoid
        OR g.tgenabled OPERATOR(pg_catalog.<>) 'A'
    UNION ALL
    -- the fence column
    SELECT p.relid,
           CASE WHEN a.attnum IS NULL
                THEN pg_catalog.format('fence column %I is missing', p.fence_column)
                ELSE pg_catalog.format('fence column %I is of type %s, not @extschema@.fence',
                                       p.fence_column, a.atttypid::pg_catalog.regtype)
           END
      FROM @extschema@.protected p
      LEFT JOIN pg_catalog.pg_attribute a
             ON a.attrelid OPERATOR(pg_catalog.=) p.relid
            AND a.attname OPERATOR(pg_catalog.=) p.fence_column
            AND a.attnum OPERATOR(pg_catalog.>) 0
            AND NOT a.attisdropped
     WHERE a.attnum IS NULL
        OR a.atttypid OPERATOR(pg_catalog.<>) '@extschema@.fence'::pg_catalog.regtype
    UNION ALL
    -- the key columns
    SELECT p.relid, pg_catalog.format('key column %I is missing', k.name)
      FROM @extschema@.protected p
      CROSS JOIN LATERAL pg_catalog.unnest(p.key_columns) AS k(name)
     WHERE NOT EXISTS (
            SELECT FROM pg_catalog.pg_attribute a
             WHERE a.attrelid OPERATOR(pg_catalog.=) p.relid
               AND a.attname OPERATOR(pg_catalog.=) k.name
               AND a.attnum OPERATOR(pg_catalog.>) 0
               AND NOT a.attisdropped)
    UNION ALL
    -- the table itself (gone only if the event triggers were bypassed)
    SELECT p.relid, 'table does not exist'
      FROM @extschema@.protected p
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                        WHERE c.oid OPERATOR(pg_catalog.=) p.relid)
    UNION ALL
    -- the event triggers that guard the guard
    SELECT p.relid,
           pg_catalog.format('event trigger %s is not ENABLE ALWAYS', e.name)
      FROM @extschema@.protected p
      CROSS JOIN (VALUES ('fencing_ddl_guard_start'::pg_catalog.name),
                         ('fencing_ddl_guard_end'), ('fencing_ddl_guard_drop')) e(name)
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger t
                        WHERE t.evtname OPERATOR(pg_catalog.=) e.name
                          AND t.evtenabled OPERATOR(pg_catalog.=) 'A')
)
SELECT p.relid,
       CASE WHEN p.key_columns IS NULL THEN 'row'
            WHEN pg_catalog.cardinality(p.key_columns) OPERATOR(pg_catalog.=) 0 THEN 'table'
            ELSE 'key'
       END AS scope_kind,
       p.key_columns,
       p.strict,
       p.scope_name,
       (SELECT pg_catalog.count(*) FROM tree t
         WHERE t.relid OPERATOR(pg_catalog.=) p.relid
           AND t.member OPERATOR(pg_catalog.<>) p.relid) AS partitions,
       pr.problem IS NULL AS guard_intact,
       pr.problem
  FROM @extschema@.protected p
  LEFT JOIN LATERAL (
        SELECT pg_catalog.string_agg(x.problem, '; ' ORDER BY x.problem) AS problem
          FROM problems x
         WHERE x.relid OPERATOR(pg_catalog.=) p.relid) pr ON true;

COMMENT ON VIEW @extschema@.protected_tables IS
    'one row per protected table: scope, partitions, and whether its guard is intact (problem says what is wrong)';
GRANT SELECT ON @extschema@.protected_tables TO PUBLIC;

-- (end of ddl guard section)

------------------------------------------------------------------------------
-- Statistics in shared memory (src/stats.c)
------------------------------------------------------------------------------

-- The counters live in shared memory, so they need
-- shared_preload_libraries = 'fencing'; without it these functions raise
-- 55000 with a HINT to preload.  The readers are VOLATILE (the counters move
-- while a statement runs) and PARALLEL SAFE (a parallel worker sees the same
-- shared memory and the same database); stats_reset only zeroes shared
-- counters and writes no database state, so it is PARALLEL SAFE as well.

CREATE FUNCTION @extschema@.stats_internal(
        OUT relid pg_catalog.regclass,
        OUT accepted bigint,
        OUT rejected_stale bigint,
        OUT rejected_missing bigint,
        OUT bypassed bigint)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'fencing_stats_internal'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.stats_internal() IS
    'the guard''s counters for the tables of the current database (read it through the view fencing.stats)';

CREATE VIEW @extschema@.stats AS
    SELECT s.relid, s.accepted, s.rejected_stale, s.rejected_missing, s.bypassed
      FROM @extschema@.stats_internal() AS s;
COMMENT ON VIEW @extschema@.stats IS
    'writes to protected tables of the current database, accepted or rejected by the guard, since the server started or fencing.stats_reset(); needs shared_preload_libraries = ''fencing''';
COMMENT ON COLUMN @extschema@.stats.relid IS
    'the table; NULL for the tables beyond fencing.stats_max_tables (all databases together); a bare OID for a dropped table';
COMMENT ON COLUMN @extschema@.stats.accepted IS 'writes accepted';
COMMENT ON COLUMN @extschema@.stats.rejected_stale IS 'writes rejected with SF001 (stale token)';
COMMENT ON COLUMN @extschema@.stats.rejected_missing IS 'writes rejected with SF002 (no token, or two that differ)';
COMMENT ON COLUMN @extschema@.stats.bypassed IS 'writes let through without a check by fencing.bypass';

CREATE FUNCTION @extschema@.idempotency_stats_internal(
        OUT started bigint,
        OUT replayed bigint,
        OUT resumed bigint,
        OUT reused_rejected bigint,
        OUT in_progress_rejected bigint)
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencing_idempotency_stats_internal'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.idempotency_stats_internal() IS
    'the outcomes of fencing.idem_begin() (read it through the view fencing.idempotency_stats)';

CREATE VIEW @extschema@.idempotency_stats AS
    SELECT s.started, s.replayed, s.resumed, s.reused_rejected, s.in_progress_rejected
      FROM @extschema@.idempotency_stats_internal() AS s;
COMMENT ON VIEW @extschema@.idempotency_stats IS
    'outcomes of fencing.idem_begin() in all databases, since the server started or fencing.stats_reset(); needs shared_preload_libraries = ''fencing''';
COMMENT ON COLUMN @extschema@.idempotency_stats.started IS 'new keys (state started)';
COMMENT ON COLUMN @extschema@.idempotency_stats.replayed IS 'recorded results returned (state done)';
COMMENT ON COLUMN @extschema@.idempotency_stats.resumed IS 'claims taken over after a lease ran out or was abandoned (state resumed)';
COMMENT ON COLUMN @extschema@.idempotency_stats.reused_rejected IS 'keys reused with a different request (SF003)';
COMMENT ON COLUMN @extschema@.idempotency_stats.in_progress_rejected IS 'keys held by a live owner (SF004)';

CREATE FUNCTION @extschema@.stats_reset() RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_stats_reset'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.stats_reset() IS
    'zero fencing.stats (of all databases) and fencing.idempotency_stats';

-- Reading is for everyone; resetting for superusers and the extension owner
-- (and whoever they grant it to).
REVOKE ALL ON FUNCTION @extschema@.stats_reset() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats, @extschema@.idempotency_stats FROM PUBLIC;
GRANT SELECT ON @extschema@.stats, @extschema@.idempotency_stats TO PUBLIC;

-- (end of stats section)

------------------------------------------------------------------------------
-- Idempotency keys (src/idempotency.c)
------------------------------------------------------------------------------

-- (end of idempotency section)

------------------------------------------------------------------------------
-- Leases (src/lease.c)
------------------------------------------------------------------------------

-- (end of lease section)
