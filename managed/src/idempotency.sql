------------------------------------------------------------------------------
-- Idempotency keys
------------------------------------------------------------------------------

-- Each logical request names a key.  The first caller claims the key and
-- gets a claim token, a fence; a retry of the same request gets the
-- recorded result instead of running again; a caller whose predecessor
-- lost its lease takes the key over with a higher claim token, so that the
-- predecessor can no longer record a result (SF001).
--
-- Owners.  A key belongs to the role that began it.  Row security shows a
-- key's row, and lets it be written, to that role, its members and the
-- edition's owner only: the helpers run as their caller, and PostgreSQL
-- itself keeps every other role from a key's claim, result and recovery
-- point.  Another role's idem_begin() of the key finds the row's place in
-- the primary key taken and the row hidden, and gets 42501 (naming the
-- owner, nothing else); a key whose expires_at has passed counts as
-- absent for everyone, and fencing.idem_reclaim() removes it, as the
-- edition's owner, so that whoever begins it next owns the new incarnation.
-- (A role may write its own keys' rows directly; that harms only its own
-- keys.)
--
-- Claim tokens.  (E, n): E from fencing.idempotency_claim_seq whenever a
-- claim is issued (never issued twice, not after a rollback, an expiry or
-- a restore: the sequence is dumped with the table), n the claims of the
-- key's current incarnation, as in the C edition.
CREATE SEQUENCE fencing.idempotency_claim_seq;
COMMENT ON SEQUENCE fencing.idempotency_claim_seq IS
    'epochs of idempotency claim tokens: one per claim issued';
GRANT USAGE ON SEQUENCE fencing.idempotency_claim_seq TO PUBLIC;

CREATE TABLE fencing.idempotency_keys (
    key             text PRIMARY KEY,
    request_hash    bytea NOT NULL,
    state           text NOT NULL,
    result          jsonb,
    claim           fencing.fence NOT NULL,
    recovery_point  text,
    locked_until    timestamptz,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    owner           regrole NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX idempotency_keys_expires_at_idx ON fencing.idempotency_keys (expires_at);
COMMENT ON INDEX fencing.idempotency_keys_expires_at_idx IS 'finds expired keys for fencing.idem_purge';
COMMENT ON TABLE fencing.idempotency_keys IS
    'idempotency keys: one row per logical request, written by the fencing.idem_* functions; each row visible to its owner role only';
COMMENT ON COLUMN fencing.idempotency_keys.key IS
    'the client''s key for one logical request, 1 to 255 characters, global to the database';
COMMENT ON COLUMN fencing.idempotency_keys.request_hash IS 'SHA-256 of the request''s jsonb text in UTF-8';
COMMENT ON COLUMN fencing.idempotency_keys.state IS
    'running (a claim owns the key, or did until its lease ran out) or done';
COMMENT ON COLUMN fencing.idempotency_keys.claim IS
    'the current claim token (E, n): n-th claim of the key, E unique to the claim; higher on every resume';
COMMENT ON COLUMN fencing.idempotency_keys.owner IS
    'the role that began the key: only it and its members may use the key';
ALTER TABLE fencing.idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY keys_of_their_owner ON fencing.idempotency_keys
    USING (pg_catalog.pg_has_role(owner, 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role(owner, 'USAGE'));
REVOKE ALL ON fencing.idempotency_keys FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON fencing.idempotency_keys TO PUBLIC;

-- Outcomes of idem_begin() and lost claims, counted in sequences.
CREATE SEQUENCE fencing.idem_stat_started;
CREATE SEQUENCE fencing.idem_stat_replayed;
CREATE SEQUENCE fencing.idem_stat_resumed;
CREATE SEQUENCE fencing.idem_stat_reused_rejected;
CREATE SEQUENCE fencing.idem_stat_in_progress_rejected;
CREATE SEQUENCE fencing.idem_stat_claim_taken_over;
GRANT USAGE ON SEQUENCE fencing.idem_stat_started, fencing.idem_stat_replayed, fencing.idem_stat_resumed,
    fencing.idem_stat_reused_rejected, fencing.idem_stat_in_progress_rejected,
    fencing.idem_stat_claim_taken_over TO PUBLIC;

-- Check a key and the arguments every helper needs: 22004, 22023.
CREATE FUNCTION fencing.idem_check_key(key text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'idempotency key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF key = '' THEN
        RAISE EXCEPTION 'idempotency key must not be empty' USING ERRCODE = 'invalid_parameter_value';
    ELSIF length(key) > 255 THEN
        RAISE EXCEPTION 'idempotency key is too long'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The key has %s characters; the maximum is 255.', length(key));
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_check_key(text) IS 'internal: 22004 or 22023 for a key that is NULL, empty or too long';

-- A key whose row the caller cannot see: 'gone' (no row, or an expired
-- one, which is removed here: an expired key counts as absent), or 42501
-- naming its owner.  As the edition's owner; says nothing else of the key.
CREATE FUNCTION fencing.idem_reclaim(key text, now timestamptz, wait boolean) RETURNS text
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o regrole;
    e timestamptz;
BEGIN
    IF wait THEN
        SELECT k.owner, k.expires_at INTO o, e FROM fencing.idempotency_keys k
         WHERE k.key = idem_reclaim.key FOR UPDATE;
    ELSE
        BEGIN
            SELECT k.owner, k.expires_at INTO o, e FROM fencing.idempotency_keys k
             WHERE k.key = idem_reclaim.key FOR UPDATE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM nextval('fencing.idem_stat_in_progress_rejected');
            RAISE EXCEPTION 'idempotency key "%" is in progress', key
                USING ERRCODE = 'SF004',
                      DETAIL = 'Another transaction is working on the key and has not finished yet.',
                      HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
        END;
    END IF;
    IF NOT FOUND THEN
        RETURN 'gone';
    END IF;
    IF e <= now THEN
        DELETE FROM fencing.idempotency_keys k WHERE k.key = idem_reclaim.key;
        RETURN 'gone';
    END IF;
    PERFORM fencing.idem_refuse_owner(key, o);
    RETURN 'gone';
END
$$;
COMMENT ON FUNCTION fencing.idem_reclaim(text, timestamptz, boolean) IS
    'internal: remove an expired key the caller cannot see, or raise 42501 naming the owner of a live one';

CREATE FUNCTION fencing.idem_refuse_owner(key text, owner regrole) RETURNS void
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = owner::oid) THEN
        RAISE EXCEPTION 'permission denied for idempotency key "%"', key
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The key belongs to a role that was dropped (OID %s); it can be used again once it expires.', owner::oid),
                  HINT = 'Keys are global to the database: each role must use keys of its own.';
    END IF;
    RAISE EXCEPTION 'permission denied for idempotency key "%"', key
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('The key belongs to role "%s"; only that role and its members may use it.', owner),
              HINT = 'Keys are global to the database: each role must use keys of its own.';
END
$$;
COMMENT ON FUNCTION fencing.idem_refuse_owner(text, regrole) IS 'internal: raise 42501 for a key of another role';

-- The owner of a live key the caller cannot see (NULL: none), for the
-- claim helpers' 42501.
CREATE FUNCTION fencing.idem_owner(key text, now timestamptz) RETURNS regrole
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT k.owner FROM fencing.idempotency_keys k WHERE k.key = idem_owner.key AND k.expires_at > now $$;
COMMENT ON FUNCTION fencing.idem_owner(text, timestamptz) IS 'internal: the owner of a live key';

CREATE FUNCTION fencing.idem_begin(key text, request jsonb,
                                   lease interval DEFAULT '1 minute',
                                   retention interval DEFAULT '24 hours',
                                   wait boolean DEFAULT true)
    RETURNS TABLE(state text, token fencing.fence, result jsonb,
                  recovery_point text, expires_at timestamptz)
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1
AS $$
#variable_conflict use_column
DECLARE
    h bytea;
    v_now timestamptz;
    lu timestamptz;
    ex timestamptz;
    r record;
    c fencing.fence;
    locked boolean;
    attempt integer;
    n bigint;
    saved_timeout text;
BEGIN
    -- The usual call is valid, and one expression says so (PL/pgSQL
    -- prepares each expression anew in every transaction, and PERFORM runs
    -- a query); only a call that is not goes through the checks that name
    -- what is wrong, in their order.
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_begin.key) OPERATOR(pg_catalog.<=) 255 AND idem_begin.key OPERATOR(pg_catalog.<>) ''
        AND idem_begin.request IS NOT NULL AND idem_begin.wait IS NOT NULL
        AND idem_begin.lease OPERATOR(pg_catalog.>) '0'::interval
        AND idem_begin.retention OPERATOR(pg_catalog.>=) idem_begin.lease) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_begin() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_begin.key);
        IF idem_begin.request IS NULL THEN
            RAISE EXCEPTION 'request must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.lease IS NULL THEN
            RAISE EXCEPTION 'lease must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.retention IS NULL THEN
            RAISE EXCEPTION 'retention must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.wait IS NULL THEN
            RAISE EXCEPTION 'wait must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.lease OPERATOR(pg_catalog.<=) '0'::interval THEN
            RAISE EXCEPTION 'lease must be a positive interval'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('The lease was %s.', idem_begin.lease);
        ELSIF idem_begin.retention OPERATOR(pg_catalog.<=) '0'::interval THEN
            RAISE EXCEPTION 'retention must be a positive interval'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('The retention was %s.', idem_begin.retention);
        ELSIF idem_begin.retention OPERATOR(pg_catalog.<) idem_begin.lease THEN
            RAISE EXCEPTION 'retention must not be shorter than the lease'
                USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = pg_catalog.format('The retention was %s and the lease %s.', idem_begin.retention, idem_begin.lease),
                    HINT = 'A key that expired while its claim''s lease was still running could be begun again by another caller.';
        END IF;
    END IF;
    h := pg_catalog.sha256(pg_catalog.convert_to(idem_begin.request::pg_catalog.text, 'UTF8'));
    LOOP
        v_now := pg_catalog.clock_timestamp();
        lu := v_now OPERATOR(pg_catalog.+) idem_begin.lease;
        ex := v_now OPERATOR(pg_catalog.+) idem_begin.retention;

        -- a new key: claim (E, 1)
        IF idem_begin.wait THEN
            INSERT INTO fencing.idempotency_keys AS k
                   (key, request_hash, state, result, claim, recovery_point, locked_until,
                    expires_at, created_at, updated_at, owner)
            VALUES (idem_begin.key, h, 'running', NULL,
                    ROW(pg_catalog.nextval('fencing.idempotency_claim_seq'), 1)::fencing.fence_pair,
                    NULL, lu, ex, v_now, v_now, current_user::pg_catalog.regrole)
            ON CONFLICT (key) DO NOTHING
            RETURNING (k.claim).* INTO c;
        ELSE
            -- without wait, any wait for another transaction is SF004: a
            -- row another transaction locked or changes is found at once;
            -- one it is inserting, after a millisecond
            saved_timeout := pg_catalog.current_setting('lock_timeout');
            PERFORM pg_catalog.set_config('lock_timeout', '1ms', true);
            BEGIN
                PERFORM FROM fencing.idempotency_keys k
                  WHERE k.key OPERATOR(pg_catalog.=) idem_begin.key FOR SHARE NOWAIT;
                INSERT INTO fencing.idempotency_keys AS k
                       (key, request_hash, state, result, claim, recovery_point, locked_until,
                        expires_at, created_at, updated_at, owner)
                VALUES (idem_begin.key, h, 'running', NULL,
                        ROW(pg_catalog.nextval('fencing.idempotency_claim_seq'), 1)::fencing.fence_pair,
                        NULL, lu, ex, v_now, v_now, current_user::pg_catalog.regrole)
                ON CONFLICT (key) DO NOTHING
                RETURNING (k.claim).* INTO c;
            EXCEPTION WHEN lock_not_available THEN
                PERFORM pg_catalog.set_config('lock_timeout', saved_timeout, true);
                PERFORM pg_catalog.nextval('fencing.idem_stat_in_progress_rejected');
                RAISE EXCEPTION 'idempotency key "%" is in progress', idem_begin.key
                    USING ERRCODE = 'SF004',
                          DETAIL = 'Another transaction is working on the key and has not finished yet.',
                          HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
            END;
            PERFORM pg_catalog.set_config('lock_timeout', saved_timeout, true);
        END IF;
        IF c IS NOT NULL THEN
            -- (a counter and the result row without a query each)
            n := pg_catalog.nextval('fencing.idem_stat_started');
            state := 'started';
            token := c;
            expires_at := ex;
            RETURN NEXT;
            RETURN;
        END IF;

        -- the key exists: read it; lock it only to change it, then decide
        -- again on the locked version
        locked := false;
        LOOP
            IF NOT locked THEN
                SELECT k.request_hash, k.state, k.result, k.claim, k.recovery_point,
                       k.locked_until, k.expires_at INTO r
                  FROM fencing.idempotency_keys k WHERE k.key = idem_begin.key;
            ELSIF idem_begin.wait THEN
                SELECT k.request_hash, k.state, k.result, k.claim, k.recovery_point,
                       k.locked_until, k.expires_at INTO r
                  FROM fencing.idempotency_keys k WHERE k.key = idem_begin.key FOR UPDATE;
            ELSE
                BEGIN
                    SELECT k.request_hash, k.state, k.result, k.claim, k.recovery_point,
                           k.locked_until, k.expires_at INTO r
                      FROM fencing.idempotency_keys k WHERE k.key = idem_begin.key FOR UPDATE NOWAIT;
                EXCEPTION WHEN lock_not_available THEN
                    PERFORM pg_catalog.nextval('fencing.idem_stat_in_progress_rejected');
                    RAISE EXCEPTION 'idempotency key "%" is in progress', idem_begin.key
                        USING ERRCODE = 'SF004',
                              DETAIL = 'Another transaction is working on the key and has not finished yet.',
                              HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
                END;
            END IF;
            IF NOT FOUND THEN
                -- purged meanwhile, or another role's (expired: removed):
                -- begin again (the usual call never gets here, and counts
                -- nothing)
                PERFORM fencing.idem_reclaim(idem_begin.key, v_now, idem_begin.wait);
                attempt := coalesce(attempt, 1) OPERATOR(pg_catalog.+) 1;
                IF attempt OPERATOR(pg_catalog.>) 10 THEN
                    RAISE EXCEPTION 'idempotency key "%" keeps disappearing', idem_begin.key
                        USING ERRCODE = 'internal_error';
                END IF;
                EXIT;
            END IF;
            IF r.expires_at OPERATOR(pg_catalog.<=) v_now THEN
                -- expired: counts as absent; a new incarnation replaces it
                IF NOT locked THEN
                    locked := true;
                    CONTINUE;
                END IF;
                UPDATE fencing.idempotency_keys AS k
                   SET request_hash = h, state = 'running', result = NULL,
                       claim = ROW(GREATEST(pg_catalog.nextval('fencing.idempotency_claim_seq'),
                                            (k.claim).epoch OPERATOR(pg_catalog.+) 1), 1)::fencing.fence_pair,
                       recovery_point = NULL, locked_until = lu, expires_at = ex,
                       created_at = v_now, updated_at = v_now, owner = current_user::pg_catalog.regrole
                 WHERE k.key = idem_begin.key
                RETURNING (k.claim).* INTO c;
                n := pg_catalog.nextval('fencing.idem_stat_started');
                state := 'started';
                token := c;
                expires_at := ex;
                RETURN NEXT;
                RETURN;
            END IF;
            IF r.request_hash OPERATOR(pg_catalog.<>) h THEN
                PERFORM pg_catalog.nextval('fencing.idem_stat_reused_rejected');
                RAISE EXCEPTION 'idempotency key "%" was already used with a different request', idem_begin.key
                    USING ERRCODE = 'SF003',
                          DETAIL = 'The fingerprint of this request differs from the one recorded for the key.',
                          HINT = 'A retry must send exactly the same request; a new request needs a new key.';
            END IF;
            IF r.state OPERATOR(pg_catalog.=) 'done' THEN
                n := pg_catalog.nextval('fencing.idem_stat_replayed');
                state := 'done';
                result := r.result;
                recovery_point := r.recovery_point;
                expires_at := r.expires_at;
                RETURN NEXT;
                RETURN;
            END IF;
            -- running: a live lease keeps the key; a lapsed one frees it
            IF r.locked_until IS NOT NULL AND r.locked_until OPERATOR(pg_catalog.>) v_now THEN
                PERFORM pg_catalog.nextval('fencing.idem_stat_in_progress_rejected');
                RAISE EXCEPTION 'idempotency key "%" is in progress', idem_begin.key
                    USING ERRCODE = 'SF004',
                          DETAIL = pg_catalog.format('Claim %s holds the key and its lease has not run out.', fencing.fence_text(r.claim)),
                          HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
            END IF;
            IF NOT locked THEN
                locked := true;
                CONTINUE;
            END IF;
            UPDATE fencing.idempotency_keys AS k
               SET claim = ROW(GREATEST(pg_catalog.nextval('fencing.idempotency_claim_seq'),
                                        (k.claim).epoch OPERATOR(pg_catalog.+) 1),
                               (k.claim).counter OPERATOR(pg_catalog.+) 1)::fencing.fence_pair,
                   locked_until = lu, expires_at = GREATEST(k.expires_at, ex), updated_at = v_now
             WHERE k.key = idem_begin.key
            RETURNING (k.claim).* INTO c;
            PERFORM pg_catalog.nextval('fencing.idem_stat_resumed');
            RETURN QUERY SELECT 'resumed'::pg_catalog.text, c, NULL::jsonb, r.recovery_point,
                                (SELECT k.expires_at FROM fencing.idempotency_keys k WHERE k.key OPERATOR(pg_catalog.=) idem_begin.key);
            RETURN;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.idem_begin(text, jsonb, interval, interval, boolean) IS
    'claim an idempotency key (started, resumed) or replay its result (done); SF003 for another request, SF004 while another owner holds it';

-- SF001 for a claim update whose token is not the key's running claim, or
-- 42501 for a key of another role.  As the caller: what it cannot see is
-- another role's (or gone).
CREATE FUNCTION fencing.idem_lost_claim(key text, token fencing.fence, now timestamptz) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    o regrole;
    detail text;
    t text := fencing.fence_text(token);
BEGIN
    SELECT k.state, k.claim, k.expires_at INTO r FROM fencing.idempotency_keys k WHERE k.key = idem_lost_claim.key;
    IF NOT FOUND THEN
        o := fencing.idem_owner(key, now);
        IF o IS NOT NULL THEN
            PERFORM fencing.idem_refuse_owner(key, o);
        END IF;
    END IF;
    IF NOT FOUND OR r.expires_at <= now THEN
        detail := format('Idempotency key "%s" does not exist or has expired.', key);
    ELSIF r.state = 'done' THEN
        detail := CASE WHEN r.claim = token THEN 'The claim has already completed the key.'
                       ELSE format('The key was completed under claim %s.', fencing.fence_text(r.claim)) END;
    ELSIF r.claim IS DISTINCT FROM token THEN
        detail := CASE WHEN r.claim IS NULL THEN 'The key has no claim.'
                       ELSE format('The key''s current claim is %s.', fencing.fence_text(r.claim)) END;
    ELSE
        detail := 'The claim was abandoned.';
    END IF;
    PERFORM nextval('fencing.idem_stat_claim_taken_over');
    RAISE EXCEPTION 'stale fence token % for idempotency key "%"', t, key
        USING ERRCODE = 'SF001', CONSTRAINT = 'claim_taken_over', DETAIL = detail,
              HINT = format('The claim with token %s was lost: stop, record no result, and call fencing.idem_begin() again to learn the key''s state.', t),
              TABLE = 'idempotency_keys', SCHEMA = 'fencing';
END
$$;
COMMENT ON FUNCTION fencing.idem_lost_claim(text, fencing.fence, timestamptz) IS
    'internal: raise SF001 (or 42501) for a claim update that found no running claim of token';

CREATE FUNCTION fencing.idem_checkpoint(key text, token fencing.fence,
                                        recovery_point text, lease interval DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- (one expression for the usual valid call: see fencing.idem_begin())
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_checkpoint.key) OPERATOR(pg_catalog.<=) 255 AND idem_checkpoint.key OPERATOR(pg_catalog.<>) ''
        AND idem_checkpoint.token IS NOT NULL) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_checkpoint() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_checkpoint.key);
        IF idem_checkpoint.token IS NULL THEN
            RAISE EXCEPTION 'token must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    IF idem_checkpoint.lease OPERATOR(pg_catalog.<=) '0'::interval THEN
        RAISE EXCEPTION 'lease must be a positive interval'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('The lease was %s.', idem_checkpoint.lease);
    END IF;
    -- without a lease, the lease keeps its length; the key never expires
    -- before its lease runs out
    UPDATE fencing.idempotency_keys AS k
       SET recovery_point = COALESCE(idem_checkpoint.recovery_point, k.recovery_point),
           locked_until = v_now OPERATOR(pg_catalog.+) COALESCE(idem_checkpoint.lease, k.locked_until OPERATOR(pg_catalog.-) k.updated_at),
           expires_at = GREATEST(k.expires_at, v_now OPERATOR(pg_catalog.+) COALESCE(idem_checkpoint.lease, k.locked_until OPERATOR(pg_catalog.-) k.updated_at)),
           updated_at = v_now
     WHERE k.key OPERATOR(pg_catalog.=) idem_checkpoint.key
       AND (k.claim).epoch OPERATOR(pg_catalog.=) (idem_checkpoint.token).epoch
       AND (k.claim).counter OPERATOR(pg_catalog.=) (idem_checkpoint.token).counter
       AND k.state OPERATOR(pg_catalog.=) 'running' AND k.locked_until IS NOT NULL
       AND k.expires_at OPERATOR(pg_catalog.>) v_now;
    IF NOT FOUND THEN
        PERFORM fencing.idem_lost_claim(idem_checkpoint.key, idem_checkpoint.token, v_now);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_checkpoint(text, fencing.fence, text, interval) IS
    'record how far the claim got and renew its lease; SF001 unless token is the key''s running claim';

CREATE FUNCTION fencing.idem_complete(key text, token fencing.fence, result jsonb)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- (one expression for the usual valid call: see fencing.idem_begin())
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_complete.key) OPERATOR(pg_catalog.<=) 255 AND idem_complete.key OPERATOR(pg_catalog.<>) ''
        AND idem_complete.token IS NOT NULL) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_complete() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_complete.key);
        IF idem_complete.token IS NULL THEN
            RAISE EXCEPTION 'token must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    UPDATE fencing.idempotency_keys AS k
       SET state = 'done', result = idem_complete.result, locked_until = NULL, updated_at = v_now
     WHERE k.key OPERATOR(pg_catalog.=) idem_complete.key
       AND (k.claim).epoch OPERATOR(pg_catalog.=) (idem_complete.token).epoch
       AND (k.claim).counter OPERATOR(pg_catalog.=) (idem_complete.token).counter
       AND k.state OPERATOR(pg_catalog.=) 'running' AND k.locked_until IS NOT NULL
       AND k.expires_at OPERATOR(pg_catalog.>) v_now;
    IF NOT FOUND THEN
        PERFORM fencing.idem_lost_claim(idem_complete.key, idem_complete.token, v_now);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_complete(text, fencing.fence, jsonb) IS
    'record the final result of the key''s request; SF001 unless token is the key''s running claim';

CREATE FUNCTION fencing.idem_abandon(key text, token fencing.fence)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- (one expression for the usual valid call: see fencing.idem_begin())
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_abandon.key) OPERATOR(pg_catalog.<=) 255 AND idem_abandon.key OPERATOR(pg_catalog.<>) ''
        AND idem_abandon.token IS NOT NULL) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_abandon() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_abandon.key);
        IF idem_abandon.token IS NULL THEN
            RAISE EXCEPTION 'token must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    UPDATE fencing.idempotency_keys AS k
       SET locked_until = NULL, updated_at = v_now
     WHERE k.key OPERATOR(pg_catalog.=) idem_abandon.key
       AND (k.claim).epoch OPERATOR(pg_catalog.=) (idem_abandon.token).epoch
       AND (k.claim).counter OPERATOR(pg_catalog.=) (idem_abandon.token).counter
       AND k.state OPERATOR(pg_catalog.=) 'running' AND k.locked_until IS NOT NULL
       AND k.expires_at OPERATOR(pg_catalog.>) v_now;
    IF NOT FOUND THEN
        PERFORM fencing.idem_lost_claim(idem_abandon.key, idem_abandon.token, v_now);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_abandon(text, fencing.fence) IS
    'give the claim up so that the next idem_begin resumes at once; SF001 unless token is the key''s running claim';

-- The claim helpers with tokens written as text (E:C or (E,C)).
CREATE FUNCTION fencing.idem_checkpoint(key text, token text, recovery_point text, lease interval DEFAULT NULL)
    RETURNS void LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.idem_checkpoint(key, fencing.fence_from_text(token), recovery_point, lease) $$;
CREATE FUNCTION fencing.idem_complete(key text, token text, result jsonb)
    RETURNS void LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.idem_complete(key, fencing.fence_from_text(token), result) $$;
CREATE FUNCTION fencing.idem_abandon(key text, token text)
    RETURNS void LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.idem_abandon(key, fencing.fence_from_text(token)) $$;
COMMENT ON FUNCTION fencing.idem_checkpoint(text, text, text, interval) IS 'fencing.idem_checkpoint() with the token written E:C';
COMMENT ON FUNCTION fencing.idem_complete(text, text, jsonb) IS 'fencing.idem_complete() with the token written E:C';
COMMENT ON FUNCTION fencing.idem_abandon(text, text) IS 'fencing.idem_abandon() with the token written E:C';

CREATE FUNCTION fencing.idem_purge(batch integer DEFAULT 10000)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    purged bigint;
BEGIN
    IF batch IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'batch must not be null';
    END IF;
    IF batch < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'batch must be positive',
            DETAIL = format('The batch was %s.', batch);
    END IF;
    -- rows that a helper has locked are skipped: the next run gets them
    WITH doomed AS (
        SELECT k.key FROM fencing.idempotency_keys AS k
         WHERE k.expires_at <= clock_timestamp()
         ORDER BY k.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM fencing.idempotency_keys AS k USING doomed WHERE k.key = doomed.key;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$$;
COMMENT ON FUNCTION fencing.idem_purge(integer) IS
    'delete at most batch expired idempotency keys and return how many; schedule it (pg_cron)';
REVOKE ALL ON FUNCTION fencing.idem_purge(integer) FROM PUBLIC;

CREATE VIEW fencing.idempotency_summary AS
SELECT pg_catalog.count(*) FILTER (WHERE k.expires_at > c.now AND k.state = 'running') AS running,
       pg_catalog.count(*) FILTER (WHERE k.expires_at > c.now AND k.state = 'running'
                                     AND (k.locked_until IS NULL OR k.locked_until <= c.now)) AS running_unowned,
       pg_catalog.count(*) FILTER (WHERE k.expires_at > c.now AND k.state = 'done') AS done,
       pg_catalog.count(*) FILTER (WHERE k.expires_at <= c.now) AS expired_awaiting_purge,
       c.now - pg_catalog.min(k.created_at) FILTER (WHERE k.expires_at > c.now AND k.state = 'running') AS oldest_running_age
  FROM (SELECT pg_catalog.clock_timestamp() AS now) AS c
  LEFT JOIN fencing.idempotency_keys AS k ON true
 GROUP BY c.now;
COMMENT ON VIEW fencing.idempotency_summary IS
    'idempotency keys at a glance: running (and of those, without a live lease), done, expired awaiting purge, age of the oldest running request';
GRANT SELECT ON fencing.idempotency_summary TO PUBLIC;

CREATE VIEW fencing.idempotency_stats AS
    SELECT fencing.seq_value('fencing.idem_stat_started') AS started,
           fencing.seq_value('fencing.idem_stat_replayed') AS replayed,
           fencing.seq_value('fencing.idem_stat_resumed') AS resumed,
           fencing.seq_value('fencing.idem_stat_reused_rejected') AS reused_rejected,
           fencing.seq_value('fencing.idem_stat_in_progress_rejected') AS in_progress_rejected,
           fencing.seq_value('fencing.idem_stat_claim_taken_over') AS claim_taken_over;
COMMENT ON VIEW fencing.idempotency_stats IS
    'outcomes of fencing.idem_begin() in this database since fencing.stats_reset(), and claims taken over, counted in sequences (no rollback takes them back)';
GRANT SELECT ON fencing.idempotency_stats TO PUBLIC;
