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

-- integer literals (INSERT ... VALUES (42)) need their own cast
CREATE FUNCTION @extschema@.fence(integer) RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_from_int4' LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.fence(integer) IS 'a counter as a fence of epoch 0';
CREATE CAST (integer AS @extschema@.fence)
    WITH FUNCTION @extschema@.fence(integer) AS ASSIGNMENT;
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
        FUNCTION 1 @extschema@.fence_cmp(@extschema@.fence, @extschema@.fence),
        -- equal means identical: btree indexes may deduplicate
        FUNCTION 4 pg_catalog.btequalimage(oid);

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
    WHEN TAG IN ('ALTER TABLE', 'ALTER FOREIGN TABLE', 'DROP TRIGGER', 'ALTER TRIGGER',
                 'CREATE TRIGGER')
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

-- Epochs of claim tokens: every claim issued takes one, so that a claim
-- token is never issued twice in a database (see src/idempotency.c).
CREATE SEQUENCE @extschema@.idempotency_claim_seq;
COMMENT ON SEQUENCE @extschema@.idempotency_claim_seq IS
    'epochs of idempotency claim tokens: one per claim issued';

-- Only the helpers write this table (as the extension's owner), and they
-- enforce what CHECK constraints would: a key of 1 to 255 characters
-- (22023), state 'running' or 'done'.  CHECK constraints would be compiled
-- again at every executor start-up of the helpers' statements, about a
-- third of an idempotent request's cost (measured with callgrind).
CREATE TABLE @extschema@.idempotency_keys (
    key             text PRIMARY KEY,
    request_hash    bytea NOT NULL,
    state           text NOT NULL,
    result          jsonb,
    claim           @extschema@.fence NOT NULL,
    recovery_point  text,
    locked_until    timestamptz,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL
) WITH (fillfactor = 80);
-- fillfactor: room on the page, so that checkpoint, complete and abandon
-- (which change no indexed column) are HOT updates: no index entries.
CREATE INDEX idempotency_keys_expires_at_idx
    ON @extschema@.idempotency_keys (expires_at);
COMMENT ON INDEX @extschema@.idempotency_keys_expires_at_idx IS
    'finds expired keys for fencing.idem_purge';

COMMENT ON TABLE @extschema@.idempotency_keys IS
    'idempotency keys: one row per logical request, written only by the fencing.idem_* functions';
COMMENT ON COLUMN @extschema@.idempotency_keys.key IS
    'the client''s key for one logical request, 1 to 255 characters, global to the database';
COMMENT ON COLUMN @extschema@.idempotency_keys.request_hash IS
    'SHA-256 of the request''s jsonb text in UTF-8';
COMMENT ON COLUMN @extschema@.idempotency_keys.state IS
    'running (a claim owns the key, or did until its lease ran out) or done';
COMMENT ON COLUMN @extschema@.idempotency_keys.result IS
    'the recorded result, returned to every retry (state done)';
COMMENT ON COLUMN @extschema@.idempotency_keys.claim IS
    'the current claim token (E, n): n-th claim of the key, E unique to the claim; higher on every resume';
COMMENT ON COLUMN @extschema@.idempotency_keys.recovery_point IS
    'how far the request got, as last recorded by fencing.idem_checkpoint';
COMMENT ON COLUMN @extschema@.idempotency_keys.locked_until IS
    'end of the current claim''s lease (server clock); NULL once completed or abandoned';
COMMENT ON COLUMN @extschema@.idempotency_keys.expires_at IS
    'from then on the key counts as absent, and fencing.idem_purge may delete it';
COMMENT ON COLUMN @extschema@.idempotency_keys.created_at IS
    'when the key was first begun (server clock)';
COMMENT ON COLUMN @extschema@.idempotency_keys.updated_at IS
    'when the key was last claimed, checkpointed, completed or abandoned';

-- pg_dump keeps the recorded results, and the claim epochs with them
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idempotency_keys', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.idempotency_claim_seq', '');

-- Only the helpers touch the table; they run as the extension's owner.
REVOKE ALL ON TABLE @extschema@.idempotency_keys FROM PUBLIC;
REVOKE ALL ON SEQUENCE @extschema@.idempotency_claim_seq FROM PUBLIC;

-- The C helpers run their own SQL, every name qualified, as the extension's
-- owner: they switch to it around SPI, as the guard does (see
-- src/idempotency.c), so they need neither SECURITY DEFINER nor a SET
-- search_path clause.  The PL/pgSQL purge is SECURITY DEFINER and sets it.
CREATE FUNCTION @extschema@.idem_begin(key text, request jsonb,
                                       lease interval DEFAULT '1 minute',
                                       retention interval DEFAULT '24 hours',
                                       wait boolean DEFAULT true)
    RETURNS TABLE(state text, token @extschema@.fence, result jsonb,
                  recovery_point text, expires_at timestamptz)
    AS 'MODULE_PATHNAME', 'idem_begin'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1;
COMMENT ON FUNCTION @extschema@.idem_begin(text, jsonb, interval, interval, boolean) IS
    'claim an idempotency key (started, resumed) or replay its result (done); SF003 for another request, SF004 while another owner holds it';

CREATE FUNCTION @extschema@.idem_checkpoint(key text, token @extschema@.fence,
                                            recovery_point text,
                                            lease interval DEFAULT NULL)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_checkpoint'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.idem_checkpoint(text, @extschema@.fence, text, interval) IS
    'record how far the claim got and renew its lease; SF001 unless token is the key''s running claim';

CREATE FUNCTION @extschema@.idem_complete(key text, token @extschema@.fence, result jsonb)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_complete'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.idem_complete(text, @extschema@.fence, jsonb) IS
    'record the final result of the key''s request; SF001 unless token is the key''s running claim';

CREATE FUNCTION @extschema@.idem_abandon(key text, token @extschema@.fence)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_abandon'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.idem_abandon(text, @extschema@.fence) IS
    'give the claim up so that the next idem_begin resumes at once; SF001 unless token is the key''s running claim';

CREATE FUNCTION @extschema@.idem_purge(batch integer DEFAULT 10000)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    purged bigint;
BEGIN
    IF batch IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'batch must not be null';
    END IF;
    IF batch OPERATOR(pg_catalog.<) 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'batch must be positive',
            DETAIL = pg_catalog.format('The batch was %s.', batch);
    END IF;
    -- rows that a helper has locked are skipped: the next run gets them
    WITH doomed AS (
        SELECT k.key
          FROM @extschema@.idempotency_keys AS k
         WHERE k.expires_at OPERATOR(pg_catalog.<=) pg_catalog.clock_timestamp()
         ORDER BY k.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM @extschema@.idempotency_keys AS k
     USING doomed
     WHERE k.key OPERATOR(pg_catalog.=) doomed.key;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$$;
COMMENT ON FUNCTION @extschema@.idem_purge(integer) IS
    'delete at most batch expired idempotency keys and return how many; schedule it (pg_cron)';

CREATE VIEW @extschema@.idempotency_summary AS
SELECT pg_catalog.count(*) FILTER (
           WHERE k.expires_at OPERATOR(pg_catalog.>) c.now
             AND k.state OPERATOR(pg_catalog.=) 'running') AS running,
       pg_catalog.count(*) FILTER (
           WHERE k.expires_at OPERATOR(pg_catalog.>) c.now
             AND k.state OPERATOR(pg_catalog.=) 'running'
             AND (k.locked_until IS NULL
                  OR k.locked_until OPERATOR(pg_catalog.<=) c.now)) AS running_unowned,
       pg_catalog.count(*) FILTER (
           WHERE k.expires_at OPERATOR(pg_catalog.>) c.now
             AND k.state OPERATOR(pg_catalog.=) 'done') AS done,
       pg_catalog.count(*) FILTER (
           WHERE k.expires_at OPERATOR(pg_catalog.<=) c.now) AS expired_awaiting_purge,
       c.now OPERATOR(pg_catalog.-) pg_catalog.min(k.created_at) FILTER (
           WHERE k.expires_at OPERATOR(pg_catalog.>) c.now
             AND k.state OPERATOR(pg_catalog.=) 'running') AS oldest_running_age
  FROM (SELECT pg_catalog.clock_timestamp() AS now) AS c
  LEFT JOIN @extschema@.idempotency_keys AS k ON true
 GROUP BY c.now;
COMMENT ON VIEW @extschema@.idempotency_summary IS
    'idempotency keys at a glance: running (and of those, without a live lease), done, expired awaiting purge, age of the oldest running request';
COMMENT ON COLUMN @extschema@.idempotency_summary.running IS
    'keys in state running that have not expired';
COMMENT ON COLUMN @extschema@.idempotency_summary.running_unowned IS
    'running keys whose lease ran out or was abandoned: the next idem_begin resumes them';
COMMENT ON COLUMN @extschema@.idempotency_summary.done IS
    'keys with a recorded result that have not expired';
COMMENT ON COLUMN @extschema@.idempotency_summary.expired_awaiting_purge IS
    'expired keys (absent to idem_begin) not yet deleted by idem_purge';
COMMENT ON COLUMN @extschema@.idempotency_summary.oldest_running_age IS
    'time since the oldest running key was first begun';

-- Applications call the helpers; keys are global to the database, so any
-- role that may call them shares one key space.  Purging is for the owner
-- (GRANT EXECUTE to a maintenance role if another should run it).
REVOKE ALL ON FUNCTION @extschema@.idem_begin(text, jsonb, interval, interval, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_checkpoint(text, @extschema@.fence, text, interval) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_complete(text, @extschema@.fence, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_abandon(text, @extschema@.fence) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.idem_purge(integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.idem_begin(text, jsonb, interval, interval, boolean) TO PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.idem_checkpoint(text, @extschema@.fence, text, interval) TO PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.idem_complete(text, @extschema@.fence, jsonb) TO PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.idem_abandon(text, @extschema@.fence) TO PUBLIC;
REVOKE ALL ON TABLE @extschema@.idempotency_summary FROM PUBLIC;
GRANT SELECT ON TABLE @extschema@.idempotency_summary TO PUBLIC;

-- (end of idempotency section)

------------------------------------------------------------------------------
-- Leases (src/lease.c)
------------------------------------------------------------------------------

-- A lock service inside the database: fencing.lease_acquire() grants a
-- named lease with a fencing token, and the tables protected with
-- fencing.protect(..., lease => 'name') refuse writes whose token is not
-- that lease's current, live token.
--
-- Tokens.  Every grant of a name gets (current_epoch(), 1) when the epoch
-- has grown since the name's last grant, and the last token's next()
-- otherwise, so every grant beats all earlier grants of that name.  A
-- released or expired lease keeps its row and its last token: the row is
-- the memory that keeps the next token above it.
--
-- Epochs.  current_epoch() = (effective timeline << 32) + bumps:
--   * the effective timeline is the server's WAL timeline (a promotion or
--     a point-in-time recovery makes it grow) plus timeline_offset, which
--     is 0 until the database turns up in a cluster with another system
--     identifier (pg_dump/restore, pg_upgrade) or on a lower timeline;
--     then the database is treated as if on the timeline after the
--     highest one it has recorded;
--   * bumps counts fencing.bump_epoch(): it becomes the larger of bumps + 1
--     and the Unix time in seconds, so that a bump on a restored snapshot
--     beats any bump the lost server made before it (at least a second
--     earlier), without the operator knowing how many there were.
-- Because the timeline part alone decides between timelines, a standby
-- promoted without the last grants and bumps of its old primary still
-- issues larger epochs than the old primary ever did.  Limits: bumps stay
-- below 2^32 (the Unix time reaches it in 2106); timelines below 2^31.

CREATE TABLE @extschema@.leases (
    name text PRIMARY KEY CHECK (name <> ''),
    holder text,
    token @extschema@.fence,
    granted_at timestamptz,
    expires_at timestamptz
);
COMMENT ON TABLE @extschema@.leases IS
    'leases granted by fencing.lease_acquire(): a lease is live while expires_at is in the future; the row keeps the last token after expiry or release';

CREATE TABLE @extschema@.epoch_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    system_identifier bigint NOT NULL,
    timeline bigint NOT NULL CHECK (timeline >= 0),
    timeline_offset bigint NOT NULL DEFAULT 0,
    bumps bigint NOT NULL DEFAULT 0 CHECK (bumps >= 0 AND bumps < 4294967296)
);
COMMENT ON TABLE @extschema@.epoch_state IS
    'what fencing.current_epoch() is computed from: the system and effective timeline last seen, the timeline offset, and the bumps; no row means none yet';

-- pg_dump keeps the leases and the epoch state: a restored database must
-- go on granting tokens above the ones granted before the dump
SELECT pg_catalog.pg_extension_config_dump('@extschema@.leases', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.epoch_state', '');

REVOKE ALL ON @extschema@.leases, @extschema@.epoch_state FROM PUBLIC;
GRANT SELECT ON @extschema@.leases, @extschema@.epoch_state TO PUBLIC;

CREATE FUNCTION @extschema@.server_timeline(OUT timeline bigint,
                                            OUT system_identifier bigint)
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencing_server_timeline' LANGUAGE C VOLATILE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.server_timeline() IS
    'internal: the WAL timeline of this server (on a standby: the one it replays) and its system identifier';

-- Compute the current epoch; with persist, record it in epoch_state (the
-- row is locked only when something changed); with bump, bump it first.
CREATE FUNCTION @extschema@.epoch_internal(persist boolean, bump boolean)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    srv record;
    st @extschema@.epoch_state;
    have_row boolean;
    locked boolean := false;
    eff bigint;
    v_bumps bigint;
BEGIN
    SELECT * INTO STRICT srv FROM @extschema@.server_timeline();
    IF bump THEN
        persist := true;
    END IF;
    LOOP
        IF locked THEN
            SELECT * INTO st FROM @extschema@.epoch_state FOR UPDATE;
        ELSE
            SELECT * INTO st FROM @extschema@.epoch_state;
        END IF;
        have_row := FOUND;

        eff := srv.timeline + COALESCE(st.timeline_offset, 0);
        IF have_row AND (st.system_identifier <> srv.system_identifier
                         OR eff < st.timeline) THEN
            -- another cluster, or a timeline lower than one seen before:
            -- count it as a new timeline above every timeline recorded
            eff := GREATEST(eff, st.timeline + 1);
        END IF;
        v_bumps := COALESCE(st.bumps, 0);
        IF bump AND locked THEN
            v_bumps := GREATEST(v_bumps + 1,
                                floor(extract(epoch FROM clock_timestamp()))::bigint);
            IF v_bumps >= 4294967296 THEN
                RAISE EXCEPTION 'cannot bump the epoch any further'
                    USING ERRCODE = '22003',
                          DETAIL = 'The bump count would reach 2^32.';
            END IF;
        END IF;

        IF NOT persist OR (have_row AND NOT bump
                           AND st.system_identifier = srv.system_identifier
                           AND st.timeline = eff) THEN
            EXIT;
        END IF;
        IF NOT locked THEN
            -- create the row (no history: this server, this timeline), lock it
            -- and compute again
            INSERT INTO @extschema@.epoch_state (system_identifier, timeline)
                 VALUES (srv.system_identifier, srv.timeline)
            ON CONFLICT (singleton) DO NOTHING;
            locked := true;
            CONTINUE;
        END IF;
        UPDATE @extschema@.epoch_state
           SET system_identifier = srv.system_identifier,
               timeline = eff,
               timeline_offset = eff - srv.timeline,
               bumps = v_bumps;
        EXIT;
    END LOOP;
    RETURN eff * 4294967296 + v_bumps;
END
$$;
COMMENT ON FUNCTION @extschema@.epoch_internal(boolean, boolean) IS
    'internal: compute (and with persist, record; with bump, bump) the epoch of fencing.current_epoch()';

CREATE FUNCTION @extschema@.current_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT @extschema@.epoch_internal(false, false) $$;
COMMENT ON FUNCTION @extschema@.current_epoch() IS
    'the epoch of the tokens granted now: (timeline << 32) + bumps; grows on promotion, point-in-time recovery and fencing.bump_epoch()';

CREATE FUNCTION @extschema@.bump_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT @extschema@.epoch_internal(true, true) $$;
COMMENT ON FUNCTION @extschema@.bump_epoch() IS
    'raise the epoch (for example after restoring a file-system snapshot, which keeps the timeline) and return it';

-- Validate a lease name: 22004 when NULL, 22023 when empty.
CREATE FUNCTION @extschema@.lease_check_name(name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'lease name must not be null' USING ERRCODE = '22004';
    ELSIF name = '' THEN
        RAISE EXCEPTION 'lease name must not be empty' USING ERRCODE = '22023';
    END IF;
END
$$;
COMMENT ON FUNCTION @extschema@.lease_check_name(text) IS
    'internal: raise 22004 for a NULL lease name, 22023 for an empty one';

-- The expiry of a lease granted or renewed at start_time for ttl: 22004 when ttl
-- is NULL, 22023 when it does not lie in the future.
CREATE FUNCTION @extschema@.lease_expiry(start_time timestamptz, ttl interval)
    RETURNS timestamptz
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF ttl IS NULL THEN
        RAISE EXCEPTION 'lease ttl must not be null' USING ERRCODE = '22004';
    ELSIF start_time + ttl <= start_time THEN
        RAISE EXCEPTION 'lease ttl must be positive'
            USING ERRCODE = '22023', DETAIL = format('The ttl is "%s".', ttl);
    END IF;
    RETURN start_time + ttl;
END
$$;
COMMENT ON FUNCTION @extschema@.lease_expiry(timestamptz, interval) IS
    'internal: start_time + ttl, raising 22004 for a NULL ttl and 22023 for one that is not positive';

CREATE FUNCTION @extschema@.lease_acquire(name text, holder text, ttl interval)
    RETURNS @extschema@.fence
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz;
    v_epoch bigint;
    v_token @extschema@.fence;
BEGIN
    PERFORM @extschema@.lease_check_name(lease_acquire.name);
    IF lease_acquire.holder IS NULL THEN
        RAISE EXCEPTION 'lease holder must not be null' USING ERRCODE = '22004';
    ELSIF lease_acquire.holder = '' THEN
        RAISE EXCEPTION 'lease holder must not be empty' USING ERRCODE = '22023';
    END IF;
    v_expires := @extschema@.lease_expiry(v_now, lease_acquire.ttl);
    v_epoch := @extschema@.epoch_internal(true, false);

    -- insert the lease, or lock its row (ON CONFLICT locks the newest
    -- version, whatever the snapshot) and take it over when it is free,
    -- expired or held by the same holder; concurrent acquirers serialise on
    -- the row, and the second sees the first's grant
    INSERT INTO @extschema@.leases AS l (name, holder, token, granted_at, expires_at)
    VALUES (lease_acquire.name, lease_acquire.holder,
            @extschema@.fence(v_epoch, 1), v_now, v_expires)
    ON CONFLICT (name) DO UPDATE
       SET holder = EXCLUDED.holder,
           token = CASE
                     WHEN l.token IS NULL OR @extschema@.epoch(l.token) < v_epoch
                     THEN EXCLUDED.token
                     ELSE @extschema@.next(l.token)
                   END,
           granted_at = EXCLUDED.granted_at,
           expires_at = EXCLUDED.expires_at
     WHERE l.token IS NULL OR l.expires_at IS NULL OR l.expires_at <= v_now
           OR l.holder = EXCLUDED.holder
    RETURNING l.token INTO v_token;
    RETURN v_token;
END
$$;
COMMENT ON FUNCTION @extschema@.lease_acquire(text, text, interval) IS
    'grant the lease for ttl and return its new token; NULL while another holder''s lease is live (the same holder gets a new token)';

CREATE FUNCTION @extschema@.lease_renew(name text, token @extschema@.fence, ttl interval)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz;
BEGIN
    PERFORM @extschema@.lease_check_name(lease_renew.name);
    v_expires := @extschema@.lease_expiry(v_now, lease_renew.ttl);
    IF lease_renew.token IS NULL THEN
        RETURN false;
    END IF;
    UPDATE @extschema@.leases AS l
       SET expires_at = v_expires
     WHERE l.name = lease_renew.name
       AND l.token OPERATOR(@extschema@.=) lease_renew.token
       AND l.expires_at > v_now;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION @extschema@.lease_renew(text, @extschema@.fence, interval) IS
    'extend a live lease held with token to now + ttl; false once it expired, was released or was taken over';

CREATE FUNCTION @extschema@.lease_release(name text, token @extschema@.fence)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM @extschema@.lease_check_name(lease_release.name);
    IF lease_release.token IS NULL THEN
        RETURN false;
    END IF;
    -- the row and its token stay: the next grant must beat the token
    UPDATE @extschema@.leases AS l
       SET expires_at = v_now
     WHERE l.name = lease_release.name
       AND l.token OPERATOR(@extschema@.=) lease_release.token
       AND l.expires_at > v_now;
    RETURN FOUND;
END
$$;
COMMENT ON FUNCTION @extschema@.lease_release(text, @extschema@.fence) IS
    'give up a live lease held with token, so that the next lease_acquire succeeds at once; false when token does not hold it';

CREATE FUNCTION @extschema@.lease_check(name text, token @extschema@.fence)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    PERFORM @extschema@.lease_check_name(lease_check.name);
    RETURN lease_check.token IS NOT NULL AND EXISTS (
        SELECT FROM @extschema@.leases AS l
         WHERE l.name = lease_check.name
           AND l.token OPERATOR(@extschema@.=) lease_check.token
           AND l.expires_at > clock_timestamp());
END
$$;
COMMENT ON FUNCTION @extschema@.lease_check(text, @extschema@.fence) IS
    'true while token is the lease''s current token and the lease is live';

-- Applications acquire, renew, release and check; bumping the epoch is for
-- operators (superusers and the extension owner, and whom they grant it).
REVOKE ALL ON FUNCTION @extschema@.bump_epoch() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.server_timeline(),
    @extschema@.epoch_internal(boolean, boolean) FROM PUBLIC;

-- protect() gains a sixth, trailing argument, lease: the five-argument form
-- of the guard section is replaced so that only one signature exists.
ALTER TABLE @extschema@.protected ADD COLUMN lease text CHECK (lease <> '');
COMMENT ON COLUMN @extschema@.protected.lease IS
    'the lease whose current, live token every write must carry (NULL: none)';

DROP FUNCTION @extschema@.protect(regclass, name, name[], boolean, text);
CREATE FUNCTION @extschema@.protect(tbl regclass,
                                    fence_column name DEFAULT 'fence',
                                    key_columns name[] DEFAULT NULL,
                                    strict boolean DEFAULT true,
                                    scope_name text DEFAULT NULL,
                                    lease text DEFAULT NULL)
    RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_protect' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.protect(regclass, name, name[], boolean, text, text) IS
    'protect a table: every write must carry a token newer than its scope''s fence (and, with lease, the lease''s current live token)';

-- (end of lease section)
