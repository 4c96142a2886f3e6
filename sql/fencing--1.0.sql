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

CREATE TABLE @extschema@.scopes (
    scope_name text NOT NULL,
    key text NOT NULL,
    fence @extschema@.fence NOT NULL,
    PRIMARY KEY (scope_name, key)
);
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

CREATE TABLE @extschema@.idempotency_keys (
    key             text PRIMARY KEY
                    CONSTRAINT idempotency_keys_key_length
                    CHECK (pg_catalog.char_length(key) BETWEEN 1 AND 255),
    request_hash    bytea NOT NULL,
    state           text NOT NULL
                    CONSTRAINT idempotency_keys_state
                    CHECK (state IN ('running', 'done')),
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

-- The helpers run as the extension's owner (SECURITY DEFINER).  The C
-- helpers carry no SET search_path: the only SQL they run is their own,
-- with every name qualified, operators included (see src/idempotency.c);
-- the PL/pgSQL purge sets it, as usual.
CREATE FUNCTION @extschema@.idem_begin(key text, request jsonb,
                                       lease interval DEFAULT '1 minute',
                                       retention interval DEFAULT '24 hours',
                                       wait boolean DEFAULT true)
    RETURNS TABLE(state text, token @extschema@.fence, result jsonb,
                  recovery_point text, expires_at timestamptz)
    AS 'MODULE_PATHNAME', 'idem_begin'
    LANGUAGE C VOLATILE PARALLEL UNSAFE ROWS 1 SECURITY DEFINER;
COMMENT ON FUNCTION @extschema@.idem_begin(text, jsonb, interval, interval, boolean) IS
    'claim an idempotency key (started, resumed) or replay its result (done); SF003 for another request, SF004 while another owner holds it';

CREATE FUNCTION @extschema@.idem_checkpoint(key text, token @extschema@.fence,
                                            recovery_point text,
                                            lease interval DEFAULT NULL)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_checkpoint'
    LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER;
COMMENT ON FUNCTION @extschema@.idem_checkpoint(text, @extschema@.fence, text, interval) IS
    'record how far the claim got and renew its lease; SF001 unless token is the key''s running claim';

CREATE FUNCTION @extschema@.idem_complete(key text, token @extschema@.fence, result jsonb)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_complete'
    LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER;
COMMENT ON FUNCTION @extschema@.idem_complete(text, @extschema@.fence, jsonb) IS
    'record the final result of the key''s request; SF001 unless token is the key''s running claim';

CREATE FUNCTION @extschema@.idem_abandon(key text, token @extschema@.fence)
    RETURNS void
    AS 'MODULE_PATHNAME', 'idem_abandon'
    LANGUAGE C VOLATILE PARALLEL UNSAFE SECURITY DEFINER;
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

-- (end of lease section)
