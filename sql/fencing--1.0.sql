/* sql/fencing--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION fencing" to load this file. \quit

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

-- (end of guard section)

------------------------------------------------------------------------------
-- Guarding the guard: event triggers (src/ddl_guard.c)
------------------------------------------------------------------------------

-- (end of ddl guard section)

------------------------------------------------------------------------------
-- Statistics in shared memory (src/stats.c)
------------------------------------------------------------------------------

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
);
CREATE INDEX idempotency_keys_expires_at_idx
    ON @extschema@.idempotency_keys (expires_at);

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
