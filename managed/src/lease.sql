------------------------------------------------------------------------------
-- Leases: a lock service inside the database
------------------------------------------------------------------------------

-- Tokens.  Every grant of a name gets (current_epoch(), 1) when the epoch
-- has grown since the name's last grant, and the last token's next()
-- otherwise, so every grant beats all earlier grants of that name; a
-- released or expired lease keeps its row and its last token.
--
-- Epochs.  current_epoch() = (effective timeline << 32) + bumps, as in the
-- C edition.  The timeline is read from the name of the current WAL file
-- (pg_walfile_name(pg_current_wal_lsn())), the system identifier from
-- pg_control_system(), where the role may call them; where it may not
-- (a service that revokes them), the recorded timeline stays, and the
-- epoch moves only by fencing.bump_epoch(): run it after every failover
-- and restore.
CREATE TABLE fencing.epoch_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    system_identifier bigint,
    timeline bigint NOT NULL CHECK (timeline >= 0),
    timeline_offset bigint NOT NULL DEFAULT 0,
    bumps bigint NOT NULL DEFAULT 0 CHECK (bumps >= 0 AND bumps < 4294967296)
);
COMMENT ON TABLE fencing.epoch_state IS
    'what fencing.current_epoch() is computed from: the system and effective timeline last seen, the timeline offset, and the bumps; no row means none yet';
REVOKE ALL ON fencing.epoch_state FROM PUBLIC;
GRANT SELECT ON fencing.epoch_state TO PUBLIC;

-- The server's timeline and system identifier, as far as this role may read
-- them (NULL where it may not, and the timeline on a standby).
CREATE FUNCTION fencing.server_timeline(OUT timeline bigint, OUT system_identifier bigint)
    RETURNS record
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pg_is_in_recovery()
       AND has_function_privilege('pg_catalog.pg_current_wal_lsn()', 'EXECUTE')
       AND has_function_privilege('pg_catalog.pg_walfile_name(pg_lsn)', 'EXECUTE') THEN
        BEGIN
            timeline := ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint;
        EXCEPTION WHEN feature_not_supported OR object_not_in_prerequisite_state OR insufficient_privilege THEN
            -- a service that keeps the WAL to itself (Aurora refuses
            -- pg_current_wal_lsn()): no timeline, as for a role that may
            -- not read it; the epoch moves by fencing.bump_epoch()
            timeline := NULL;
        END;
    END IF;
    IF has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') THEN
        system_identifier := (SELECT s.system_identifier FROM pg_control_system() s);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.server_timeline() IS
    'internal: the WAL timeline of this server and its system identifier (NULL where the role may not read them)';

-- Compute the current epoch; with persist, record it in epoch_state; with
-- bump, bump it first.  The C edition's rules: another system identifier,
-- or a timeline lower than one recorded, counts as a new timeline above
-- every timeline recorded; a bump becomes the larger of bumps + 1 and the
-- Unix time in seconds.
CREATE FUNCTION fencing.epoch_internal(persist boolean, bump boolean)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    srv record;
    st fencing.epoch_state;
    have_row boolean;
    locked boolean := false;
    eff bigint;
    v_bumps bigint;
BEGIN
    SELECT * INTO STRICT srv FROM fencing.server_timeline();
    IF bump THEN
        persist := true;
    END IF;
    LOOP
        IF locked THEN
            SELECT * INTO st FROM fencing.epoch_state FOR UPDATE;
        ELSE
            SELECT * INTO st FROM fencing.epoch_state;
        END IF;
        have_row := FOUND;

        IF srv.timeline IS NULL THEN
            -- the timeline cannot be read: the one recorded (bumps move on)
            eff := coalesce(st.timeline, 1);
        ELSE
            eff := srv.timeline + coalesce(st.timeline_offset, 0);
            IF have_row AND ((st.system_identifier IS DISTINCT FROM srv.system_identifier
                              AND srv.system_identifier IS NOT NULL AND st.system_identifier IS NOT NULL)
                             OR eff < st.timeline) THEN
                eff := greatest(eff, st.timeline + 1);
            END IF;
        END IF;
        v_bumps := coalesce(st.bumps, 0);
        IF bump AND locked THEN
            v_bumps := greatest(v_bumps + 1, floor(extract(epoch FROM clock_timestamp()))::bigint);
            IF v_bumps >= 4294967296 THEN
                RAISE EXCEPTION 'cannot bump the epoch any further'
                    USING ERRCODE = '22003', DETAIL = 'The bump count would reach 2^32.';
            END IF;
        END IF;

        IF NOT persist OR (have_row AND NOT bump
                           AND st.system_identifier IS NOT DISTINCT FROM coalesce(srv.system_identifier, st.system_identifier)
                           AND st.timeline = eff) THEN
            EXIT;
        END IF;
        IF NOT locked THEN
            INSERT INTO fencing.epoch_state (system_identifier, timeline)
                 VALUES (srv.system_identifier, coalesce(srv.timeline, 1))
            ON CONFLICT (singleton) DO NOTHING;
            locked := true;
            CONTINUE;
        END IF;
        UPDATE fencing.epoch_state
           SET system_identifier = coalesce(srv.system_identifier, system_identifier),
               timeline = eff,
               timeline_offset = CASE WHEN srv.timeline IS NULL THEN timeline_offset ELSE eff - srv.timeline END,
               bumps = v_bumps;
        EXIT;
    END LOOP;
    RETURN eff * 4294967296 + v_bumps;
END
$$;
COMMENT ON FUNCTION fencing.epoch_internal(boolean, boolean) IS
    'internal: compute (and with persist, record; with bump, bump) the epoch of fencing.current_epoch()';

CREATE FUNCTION fencing.current_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT fencing.epoch_internal(false, false) $$;
COMMENT ON FUNCTION fencing.current_epoch() IS
    'the epoch of the tokens granted now: (timeline << 32) + bumps; grows on promotion, point-in-time recovery (where the timeline is readable) and fencing.bump_epoch()';

CREATE FUNCTION fencing.bump_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT fencing.epoch_internal(true, true) $$;
COMMENT ON FUNCTION fencing.bump_epoch() IS
    'raise the epoch (after restoring a snapshot, and after a failover where the timeline cannot be read) and return it';
REVOKE ALL ON FUNCTION fencing.bump_epoch() FROM PUBLIC;
REVOKE ALL ON FUNCTION fencing.epoch_internal(boolean, boolean) FROM PUBLIC;

-- The epoch of a grant, recorded (lease_acquire, as its caller).
CREATE FUNCTION fencing.grant_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT fencing.epoch_internal(true, false) $$;
COMMENT ON FUNCTION fencing.grant_epoch() IS
    'internal: the current epoch, recorded in fencing.epoch_state (a grant''s epoch)';

-- The leases.  A lease name belongs to the role that first acquired it;
-- row security shows and lets write a lease's row to that role, its
-- members and the edition's owner only, so the lease functions run as
-- their caller and PostgreSQL itself keeps every other role from a
-- lease's token.  (A role may write its own leases' rows directly; that
-- harms only its own leases.)
CREATE TABLE fencing.leases (
    name text PRIMARY KEY CHECK (name <> ''),
    holder text,
    token fencing.fence,
    granted_at timestamptz,
    expires_at timestamptz,
    owner regrole NOT NULL
);
COMMENT ON TABLE fencing.leases IS
    'leases granted by fencing.lease_acquire(): a lease is live while expires_at is in the future; the row keeps the last token after expiry or release; each row visible to its owner role only (fencing.lease_status shows every lease, tokens masked)';
COMMENT ON COLUMN fencing.leases.owner IS
    'the role the lease belongs to: the first role that acquired it; the edition''s owner hands a lease over by changing it';
ALTER TABLE fencing.leases ENABLE ROW LEVEL SECURITY;
CREATE POLICY leases_of_their_owner ON fencing.leases
    USING (pg_catalog.pg_has_role(owner, 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role(owner, 'USAGE'));
REVOKE ALL ON fencing.leases FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON fencing.leases TO PUBLIC;

-- Counters (sequences: no rollback takes them back).
CREATE SEQUENCE fencing.lease_stat_acquired;
CREATE SEQUENCE fencing.lease_stat_acquire_refused;
CREATE SEQUENCE fencing.lease_stat_renewed;
CREATE SEQUENCE fencing.lease_stat_renew_failed;
CREATE SEQUENCE fencing.lease_stat_released;
CREATE SEQUENCE fencing.lease_stat_release_failed;
CREATE SEQUENCE fencing.lease_stat_rejected;
GRANT USAGE ON SEQUENCE fencing.lease_stat_acquired, fencing.lease_stat_acquire_refused,
    fencing.lease_stat_renewed, fencing.lease_stat_renew_failed, fencing.lease_stat_released,
    fencing.lease_stat_release_failed, fencing.lease_stat_rejected TO PUBLIC;

-- Who owns a lease name (NULL: nobody yet), whoever asks: the lease
-- functions name the owner in their 42501, as the C edition's do.
CREATE FUNCTION fencing.lease_owner(name text) RETURNS regrole
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT l.owner FROM fencing.leases l WHERE l.name = lease_owner.name $$;
COMMENT ON FUNCTION fencing.lease_owner(text) IS
    'internal: the role a lease name belongs to (NULL while no role acquired it)';

-- 42501 for a lease of another role (its row is there, hidden from us).
CREATE FUNCTION fencing.lease_refuse_foreign(name text) RETURNS void
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o regrole := fencing.lease_owner(name);
BEGIN
    IF o IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied for lease "%"', name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = CASE WHEN EXISTS (SELECT FROM pg_roles r WHERE r.oid = o::oid)
                                THEN format('Lease "%s" belongs to role "%s".', name, o)
                                ELSE format('Lease "%s" belongs to a role that was dropped (OID %s).', name, o::oid) END,
                  HINT = 'Only the lease''s owner role and its members may acquire, renew, release or check it; the extension''s owner can hand it to another role by setting its owner in fencing.leases.';
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.lease_refuse_foreign(text) IS
    'internal: raise 42501 when the lease name belongs to a role the caller does not act for';

-- Check the arguments shared by the lease functions: 22004 for a NULL
-- name (or ttl), 22023 for an empty name or a ttl that is not positive;
-- returns now + ttl (NULL without a ttl).
CREATE FUNCTION fencing.lease_args(name text, ttl interval, need_ttl boolean, now timestamptz)
    RETURNS timestamptz
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'lease name must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF name = '' THEN
        RAISE EXCEPTION 'lease name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF ttl IS NULL THEN
        IF need_ttl THEN
            RAISE EXCEPTION 'lease ttl must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        RETURN NULL;
    END IF;
    IF now + ttl <= now THEN
        RAISE EXCEPTION 'lease ttl must be positive'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = format('The ttl is "%s".', ttl);
    END IF;
    RETURN now + ttl;
END
$$;
COMMENT ON FUNCTION fencing.lease_args(text, interval, boolean, timestamptz) IS
    'internal: check a lease''s name and ttl (22004, 22023); now + ttl';

CREATE FUNCTION fencing.lease_acquire(name text, holder text, ttl interval)
    RETURNS fencing.fence
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz;
    v_epoch bigint;
    r fencing.leases;
    v_token fencing.fence;
    attempt integer := 0;
BEGIN
    IF lease_acquire.name IS NULL THEN
        RAISE EXCEPTION 'lease name must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF lease_acquire.name = '' THEN
        RAISE EXCEPTION 'lease name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    ELSIF lease_acquire.holder IS NULL THEN
        RAISE EXCEPTION 'lease holder must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF lease_acquire.holder = '' THEN
        RAISE EXCEPTION 'lease holder must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_expires := fencing.lease_args(lease_acquire.name, lease_acquire.ttl, true, v_now);
    v_epoch := fencing.grant_epoch();
    LOOP
        attempt := attempt + 1;
        IF attempt > 10 THEN
            RAISE EXCEPTION 'lease "%" keeps disappearing', lease_acquire.name
                USING ERRCODE = 'internal_error';
        END IF;
        SELECT * INTO r FROM fencing.leases l WHERE l.name = lease_acquire.name FOR UPDATE;
        IF NOT FOUND THEN
            PERFORM fencing.lease_refuse_foreign(lease_acquire.name);
            INSERT INTO fencing.leases AS l (name, holder, token, granted_at, expires_at, owner)
            VALUES (lease_acquire.name, lease_acquire.holder,
                    ROW(v_epoch, 1)::fencing.fence_pair, v_now, v_expires, current_user::regrole)
            ON CONFLICT (name) DO NOTHING
            RETURNING (l.token).* INTO v_token;
            CONTINUE WHEN NOT FOUND;
            EXIT;
        END IF;
        IF r.token IS NOT NULL AND r.expires_at IS NOT NULL AND r.expires_at > v_now
           AND r.holder IS DISTINCT FROM lease_acquire.holder THEN
            PERFORM nextval('fencing.lease_stat_acquire_refused');
            RETURN NULL;
        END IF;
        UPDATE fencing.leases AS l
           SET holder = lease_acquire.holder,
               token = CASE WHEN l.token IS NULL OR (l.token).epoch < v_epoch
                            THEN ROW(v_epoch, 1)::fencing.fence_pair
                            ELSE fencing.next(l.token) END,
               granted_at = v_now,
               expires_at = v_expires
         WHERE l.name = lease_acquire.name
        RETURNING (l.token).* INTO v_token;
        EXIT;
    END LOOP;
    PERFORM nextval('fencing.lease_stat_acquired');
    RETURN v_token;
END
$$;
COMMENT ON FUNCTION fencing.lease_acquire(text, text, interval) IS
    'grant the lease for ttl and return its new token; NULL while another holder''s lease is live (the same holder gets a new token); a new name belongs to the calling role, other roles get 42501';

-- Set the expiry of a live lease held with token: the body of renew and
-- release (and of lease_next, which also moves the token on).
CREATE FUNCTION fencing.lease_renew(name text, token fencing.fence, ttl interval)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz := fencing.lease_args(lease_renew.name, lease_renew.ttl, true, v_now);
BEGIN
    IF lease_renew.token IS NOT NULL THEN
        UPDATE fencing.leases AS l SET expires_at = v_expires
         WHERE l.name = lease_renew.name AND l.token = lease_renew.token AND l.expires_at > v_now;
        IF FOUND THEN
            PERFORM nextval('fencing.lease_stat_renewed');
            RETURN true;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM fencing.leases l WHERE l.name = lease_renew.name) THEN
        PERFORM fencing.lease_refuse_foreign(lease_renew.name);
    END IF;
    PERFORM nextval('fencing.lease_stat_renew_failed');
    RETURN false;
END
$$;
COMMENT ON FUNCTION fencing.lease_renew(text, fencing.fence, interval) IS
    'extend a live lease held with token to now + ttl; false once it expired, was released or was taken over; 42501 for roles the lease does not belong to';

CREATE FUNCTION fencing.lease_release(name text, token fencing.fence)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM fencing.lease_args(lease_release.name, NULL, false, v_now);
    IF lease_release.token IS NOT NULL THEN
        -- the row and its token stay: the next grant must beat the token
        UPDATE fencing.leases AS l SET expires_at = v_now
         WHERE l.name = lease_release.name AND l.token = lease_release.token AND l.expires_at > v_now;
        IF FOUND THEN
            PERFORM nextval('fencing.lease_stat_released');
            RETURN true;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM fencing.leases l WHERE l.name = lease_release.name) THEN
        PERFORM fencing.lease_refuse_foreign(lease_release.name);
    END IF;
    PERFORM nextval('fencing.lease_stat_release_failed');
    RETURN false;
END
$$;
COMMENT ON FUNCTION fencing.lease_release(text, fencing.fence) IS
    'give up a live lease held with token, so that the next lease_acquire succeeds at once; false when token does not hold it; 42501 for roles the lease does not belong to';

CREATE FUNCTION fencing.lease_check(name text, token fencing.fence)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r fencing.leases;
BEGIN
    PERFORM fencing.lease_args(lease_check.name, NULL, false, NULL);
    SELECT * INTO r FROM fencing.leases l WHERE l.name = lease_check.name;
    IF NOT FOUND THEN
        PERFORM fencing.lease_refuse_foreign(lease_check.name);
        RETURN false;
    END IF;
    RETURN lease_check.token IS NOT NULL AND r.token = lease_check.token
           AND r.expires_at > clock_timestamp();
END
$$;
COMMENT ON FUNCTION fencing.lease_check(text, fencing.fence) IS
    'true while token is the lease''s current token and the lease is live; 42501 for roles the lease does not belong to (the answer would tell them its token)';

-- A new token of the lease while token is its current token and the lease
-- is live (renewed to ttl when given): one token per transaction of a
-- holder that still holds its lease.  Greater than every token granted
-- for the name; NULL when the lease is not held with token.
CREATE FUNCTION fencing.lease_next(name text, token fencing.fence, ttl interval DEFAULT NULL)
    RETURNS fencing.fence
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz := fencing.lease_args(lease_next.name, lease_next.ttl, false, v_now);
    v_epoch bigint;
    v_token fencing.fence;
BEGIN
    IF lease_next.token IS NOT NULL THEN
        v_epoch := fencing.grant_epoch();
        -- the next token of the same grant (its holder and start unchanged),
        -- beating every earlier one as a grant's does
        UPDATE fencing.leases AS l
           SET token = CASE WHEN (l.token).epoch < v_epoch THEN ROW(v_epoch, 1)::fencing.fence_pair
                            ELSE fencing.next(l.token) END,
               expires_at = coalesce(v_expires, l.expires_at)
         WHERE l.name = lease_next.name AND l.token = lease_next.token AND l.expires_at > v_now
        RETURNING (l.token).* INTO v_token;
        IF FOUND THEN
            PERFORM nextval('fencing.lease_stat_renewed');
            RETURN v_token;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM fencing.leases l WHERE l.name = lease_next.name) THEN
        PERFORM fencing.lease_refuse_foreign(lease_next.name);
    END IF;
    PERFORM nextval('fencing.lease_stat_renew_failed');
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION fencing.lease_next(text, fencing.fence, interval) IS
    'a new token of the lease while token is its current token and the lease is live (renewed to ttl when given): greater than every token granted for the name; NULL when the lease is not held with token; 42501 for roles the lease does not belong to';

-- The same with tokens written as text (E:C or (E,C)).
CREATE FUNCTION fencing.lease_renew(name text, token text, ttl interval) RETURNS boolean
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_renew(name, fencing.fence_from_text(token), ttl) $$;
CREATE FUNCTION fencing.lease_release(name text, token text) RETURNS boolean
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_release(name, fencing.fence_from_text(token)) $$;
CREATE FUNCTION fencing.lease_check(name text, token text) RETURNS boolean
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_check(name, fencing.fence_from_text(token)) $$;
CREATE FUNCTION fencing.lease_next(name text, token text, ttl interval DEFAULT NULL) RETURNS fencing.fence
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_next(name, fencing.fence_from_text(token), ttl) $$;
COMMENT ON FUNCTION fencing.lease_renew(text, text, interval) IS 'fencing.lease_renew() with the token written E:C';
COMMENT ON FUNCTION fencing.lease_release(text, text) IS 'fencing.lease_release() with the token written E:C';
COMMENT ON FUNCTION fencing.lease_check(text, text) IS 'fencing.lease_check() with the token written E:C';
COMMENT ON FUNCTION fencing.lease_next(text, text, interval) IS 'fencing.lease_next() with the token written E:C';

-- Every lease, for everyone (etcdctl lease timetolive): holder and token
-- only for the lease's owner role (its members), the edition's owner and
-- members of pg_read_all_stats.  The view reads the table as its owner.
CREATE VIEW fencing.lease_status AS
    SELECT l.name,
           CASE WHEN pg_catalog.pg_has_role(l.owner::pg_catalog.oid, 'MEMBER')
                  OR pg_catalog.pg_has_role(fencing.owner_oid(), 'MEMBER')
                  OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')
                THEN l.holder END AS holder,
           CASE WHEN pg_catalog.pg_has_role(l.owner::pg_catalog.oid, 'MEMBER')
                  OR pg_catalog.pg_has_role(fencing.owner_oid(), 'MEMBER')
                  OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')
                THEN l.token END AS token,
           l.granted_at,
           l.expires_at,
           (l.token IS NOT NULL AND l.expires_at IS NOT NULL AND l.expires_at > c.now) AS live,
           CASE WHEN l.token IS NOT NULL AND l.expires_at > c.now THEN l.expires_at - c.now END AS remaining
      FROM fencing.leases AS l
     CROSS JOIN (SELECT pg_catalog.clock_timestamp() AS now) AS c;
COMMENT ON VIEW fencing.lease_status IS
    'every lease with its holder, grant, expiry, whether it is live and the time it has left (etcdctl lease timetolive); holder and token only for roles the lease belongs to, the edition''s owner and pg_read_all_stats';
REVOKE ALL ON fencing.lease_status FROM PUBLIC;
GRANT SELECT ON fencing.lease_status TO PUBLIC;

-- The guard of a table protected with a lease: its write's token must be
-- the lease's current token, and the lease live.  lease_held() answers
-- as the edition's owner without showing the token; lease_guard() raises
-- the C edition's SF001, showing the lease's token to those who may see it.
CREATE FUNCTION fencing.lease_held(name text, token fencing.fence, relid oid,
                                   OUT state text, OUT expires_at text, OUT owner text)
    RETURNS record
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET datestyle = 'ISO, MDY'
AS $$
DECLARE
    r fencing.leases;
BEGIN
    SELECT * INTO r FROM fencing.leases l WHERE l.name = lease_held.name;
    expires_at := r.expires_at::text;
    owner := r.owner::text;
    IF FOUND AND NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = relid), r.owner, 'USAGE') THEN
        state := 'foreign';
    ELSIF NOT FOUND OR r.token IS NULL OR r.expires_at IS NULL THEN
        state := 'never';
    ELSIF r.token < token THEN
        state := 'newer';
    ELSIF r.token = token THEN
        state := CASE WHEN r.expires_at > clock_timestamp() THEN 'held' ELSE 'expired' END;
    ELSE
        state := CASE WHEN r.expires_at > clock_timestamp() THEN 'moved_live' ELSE 'moved_expired' END;
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.lease_held(text, fencing.fence, oid) IS
    'internal: whether token holds the lease of table relid (held), or why not (times in ISO style)';

CREATE FUNCTION fencing.lease_guard(lease text, token fencing.fence, relid oid) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    h record;
    t text := fencing.fence_text(token);
    cur fencing.fence;
    relname text;
    nspname text;
BEGIN
    SELECT * INTO h FROM fencing.lease_held(lease, token, relid);
    IF h.state = 'held' THEN
        RETURN;
    END IF;
    IF h.state = 'foreign' THEN
        SELECT c.relname, n.nspname INTO relname, nspname
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = relid;
        RAISE EXCEPTION 'permission denied for lease "%" of table "%"', lease, relname
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The lease belongs to role "%s", which the owner of the table, role "%s", is not a member of.',
                                  h.owner, (SELECT c.relowner::regrole FROM pg_class c WHERE c.oid = relid)),
                  HINT = 'Protect the table with a lease of its owner''s, or grant the lease''s owner role to the table''s owner.',
                  TABLE = relname, SCHEMA = nspname;
    END IF;
    PERFORM nextval('fencing.lease_stat_rejected');
    PERFORM fencing.count(relid, 'rejected_lease_expired');
    SELECT c.relname, n.nspname INTO relname, nspname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = relid;
    -- the lease's token, for the roles that may see it (row security)
    SELECT (l.token).* INTO cur FROM fencing.leases l WHERE l.name = lease;
    IF h.state = 'never' THEN
        RAISE EXCEPTION 'fence token % does not hold lease "%" of table "%"', t, lease, relname
            USING ERRCODE = 'SF001', CONSTRAINT = 'lease_expired',
                  DETAIL = format('Lease "%s" has never been granted.', lease),
                  HINT = 'Acquire the lease with fencing.lease_acquire() and write with the token it returns.',
                  TABLE = relname, SCHEMA = nspname;
    ELSIF h.state = 'newer' THEN
        RAISE EXCEPTION 'fence token % does not hold lease "%" of table "%"', t, lease, relname
            USING ERRCODE = 'SF001', CONSTRAINT = 'lease_expired',
                  DETAIL = CASE WHEN cur IS NOT NULL
                                THEN format('Token %s is newer than the current token of the lease, %s.', t, fencing.fence_text(cur))
                                ELSE format('Token %s is newer than the current token of the lease.', t) END,
                  HINT = 'Acquire the lease with fencing.lease_acquire() and write with the token it returns.',
                  TABLE = relname, SCHEMA = nspname;
    ELSIF h.state = 'expired' THEN
        RAISE EXCEPTION 'lease "%" of table "%" expired: fence token % is no longer valid', lease, relname, t
            USING ERRCODE = 'SF001', CONSTRAINT = 'lease_expired',
                  DETAIL = format('Lease "%s" with token %s ran out or was released at %s.', lease, t, h.expires_at),
                  HINT = 'The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token.',
                  TABLE = relname, SCHEMA = nspname;
    ELSIF cur IS NOT NULL THEN
        RAISE EXCEPTION 'lease "%" of table "%" has moved on: fence token % is no longer valid', lease, relname, t
            USING ERRCODE = 'SF001', CONSTRAINT = 'stale_token',
                  DETAIL = CASE WHEN h.state = 'moved_live'
                                THEN format('The current token of lease "%s" is %s, live until %s.', lease, fencing.fence_text(cur), h.expires_at)
                                ELSE format('The current token of lease "%s" is %s, expired at %s.', lease, fencing.fence_text(cur), h.expires_at) END,
                  HINT = 'The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token.',
                  TABLE = relname, SCHEMA = nspname;
    ELSE
        RAISE EXCEPTION 'lease "%" of table "%" has moved on: fence token % is no longer valid', lease, relname, t
            USING ERRCODE = 'SF001', CONSTRAINT = 'stale_token',
                  DETAIL = CASE WHEN h.state = 'moved_live'
                                THEN format('Lease "%s" is held with a newer token, live until %s.', lease, h.expires_at)
                                ELSE format('Lease "%s" was last granted with a newer token, which expired at %s.', lease, h.expires_at) END,
                  HINT = 'The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token.',
                  TABLE = relname, SCHEMA = nspname;
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.lease_guard(text, fencing.fence, oid) IS
    'internal: raise SF001 unless token is the lease''s current token and the lease is live (the guard of tables protected with a lease)';

-- What happened to the leases of this database, counted in sequences.
-- expired and the hold times need the C edition's shared memory (a grant's
-- end counted once, whichever session notices it): NULL here.
CREATE FUNCTION fencing.seq_value(seq regclass) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce(pg_sequence_last_value(seq), 0) $$;
COMMENT ON FUNCTION fencing.seq_value(regclass) IS
    'internal: the count a counter sequence of the edition holds';
GRANT EXECUTE ON FUNCTION fencing.seq_value(regclass) TO PUBLIC;

CREATE VIEW fencing.lease_stats AS
    SELECT fencing.seq_value('fencing.lease_stat_acquired') AS acquired,
           fencing.seq_value('fencing.lease_stat_acquire_refused') AS acquire_refused,
           fencing.seq_value('fencing.lease_stat_renewed') AS renewed,
           fencing.seq_value('fencing.lease_stat_renew_failed') AS renew_failed,
           fencing.seq_value('fencing.lease_stat_released') AS released,
           fencing.seq_value('fencing.lease_stat_release_failed') AS release_failed,
           NULL::bigint AS expired,
           fencing.seq_value('fencing.lease_stat_rejected') AS rejected,
           NULL::bigint AS hold_count,
           NULL::double precision AS hold_seconds_sum,
           NULL::double precision AS hold_seconds_max;
COMMENT ON VIEW fencing.lease_stats IS
    'what happened to the leases of this database since fencing.stats_reset(), counted in sequences; expired and the hold times are NULL (they need the C edition''s shared memory)';
GRANT SELECT ON fencing.lease_stats TO PUBLIC;
