------------------------------------------------------------------------------
-- The guard: helpers of the trigger functions that protect() writes
------------------------------------------------------------------------------

-- The protected table whose guard covers relid: relid itself, or the
-- nearest ancestor (partitioned table or inheritance parent) in
-- fencing.protected.  For the slow paths (errors, counters) only.
CREATE FUNCTION fencing.protected_root(relid oid) RETURNS regclass
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE up(rel, depth) AS (
        SELECT relid, 0
        UNION ALL
        SELECT i.inhparent, up.depth + 1 FROM pg_inherits i JOIN up ON i.inhrelid = up.rel
         WHERE up.depth < 100)
    SELECT p.relid FROM up JOIN fencing.protected p ON p.relid::oid = up.rel
     ORDER BY up.depth LIMIT 1
$$;
COMMENT ON FUNCTION fencing.protected_root(oid) IS
    'internal: the protected table whose guard covers relid (itself, or the partitioned table or inheritance parent it belongs to)';

-- The edition's own settings are named fencing_sql.*: fencing.token and
-- fencing.bypass are the C edition's, and where its library is loaded
-- (a server moving to it) it reserves every other name under fencing.

-- Has this transaction's guard written a row version of relid with token?
-- A transaction-local setting, fencing_sql.accepted, lists the (table, token)
-- pairs whose writes the guard accepted: a row version whose fence is such
-- a token was written by this transaction's guard, or by an earlier
-- transaction with the same token (told apart, where the table has a
-- primary key, by the version's xmin: see fencing.xid_is_mine()).
CREATE FUNCTION fencing.xid_is_mine(x xid) RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur numeric := pg_current_xact_id()::text::numeric;
    full_xid numeric := cur - mod(cur, 4294967296) + x::text::numeric;
BEGIN
    -- the xids of this transaction (subtransactions' above the top one's)
    -- lie within 2^31 of the top-level xid
    IF full_xid > cur + 2147483648 THEN
        full_xid := full_xid - 4294967296;
    ELSIF full_xid < cur - 2147483648 THEN
        full_xid := full_xid + 4294967296;
    END IF;
    -- the version is the newest one (locked by the write): its creator has
    -- committed, or it is this transaction (or one of its subtransactions)
    RETURN full_xid >= 3 AND pg_xact_status(full_xid::text::xid8) = 'in progress';
END
$$;
COMMENT ON FUNCTION fencing.xid_is_mine(xid) IS
    'internal: true when the row version with this xmin was written by the current transaction';

-- May the current role see the key and the fence a write to rel lost to?
-- Roles that may read the table (or its protected root) past its row
-- security, the edition's owner, and (when no row security applies) the
-- scope's owner.  For the error path only.
CREATE FUNCTION fencing.may_read_keys(rel oid, scope_name text) RETURNS boolean
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    root oid := fencing.protected_root(rel);
    o oid;
BEGIN
    IF has_table_privilege(rel, 'SELECT') AND NOT row_security_active(rel) THEN
        RETURN true;
    END IF;
    IF root IS NOT NULL AND root <> rel AND has_table_privilege(root, 'SELECT')
       AND NOT row_security_active(root) THEN
        RETURN true;
    END IF;
    IF fencing.acts_for_owner() THEN
        RETURN true;
    END IF;
    IF scope_name IS NOT NULL AND NOT row_security_active(rel) THEN
        SELECT s.owner INTO o FROM fencing.scope_storage s WHERE s.scope_name = may_read_keys.scope_name;
        RETURN o IS NOT NULL AND pg_has_role(o, 'USAGE');
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION fencing.may_read_keys(oid, text) IS
    'internal: may the current role see the keys and fences of table rel (for SF001''s DETAIL)';

------------------------------------------------------------------------------
-- Statistics: counted in sequences, which no rollback takes back
------------------------------------------------------------------------------

-- Each protected table counts its refusals (and bypasses) in sequences of
-- its own, fencing.<guard function>_<counter>: a refused write's
-- transaction rolls back, and nextval() is the one write a rollback keeps,
-- so the counts are exact, without shared memory.  Accepted writes are not
-- counted (a counter row or sequence that every write advances would cost
-- every write and make all writers of a table queue on one page).
CREATE FUNCTION fencing.count(relid oid, counter text) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g regprocedure;
    seq regclass;
BEGIN
    SELECT p.guard_function INTO g FROM fencing.protected p
     WHERE p.relid::oid = fencing.protected_root(count.relid);
    IF g IS NULL OR counter NOT IN ('rejected_stale', 'rejected_missing', 'bypassed',
                                    'rejected_already_used', 'rejected_lease_expired') THEN
        RETURN;
    END IF;
    seq := to_regclass(format('fencing.%I', (SELECT proname FROM pg_proc WHERE oid = g) || '_' || counter));
    IF seq IS NOT NULL THEN
        PERFORM nextval(seq);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.count(oid, text) IS
    'internal: count a refusal (or bypass) of a write to a protected table';

------------------------------------------------------------------------------
-- Break glass: fencing.bypass
------------------------------------------------------------------------------

-- fencing.bypass = on lets a superuser's writes through without a token,
-- each logged and counted.  The edition cannot refuse the setting when it
-- is made (no library, no check hook), so the guard judges the write of
-- any other role that set it as if it were off, and refuses a value that is
-- not a boolean (22023).  Managed services have no superuser: there, fencing.unprotect()
-- by the table's owner is the way to write without tokens.
CREATE FUNCTION fencing.bypassing(relid oid, what text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := lower(btrim(current_setting('fencing.bypass', true)));
    relname text := (SELECT c.relname FROM pg_class c WHERE c.oid = relid);
BEGIN
    IF v IS NULL OR v IN ('', 'off', 'of', 'false', 'fals', 'fal', 'fa', 'f', 'no', 'n', '0') THEN
        RETURN false;
    END IF;
    IF v NOT IN ('on', 'true', 'tru', 'tr', 't', 'yes', 'ye', 'y', '1') THEN
        RAISE EXCEPTION 'parameter "fencing.bypass" requires a Boolean value'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('fencing.bypass is "%s".', current_setting('fencing.bypass', true));
    END IF;
    IF NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
        -- only a superuser's bypass counts: another role's write is judged
        -- as if the setting were off (the C edition refuses the SET itself)
        RETURN false;
    END IF;
    PERFORM fencing.count(relid, 'bypassed');
    RAISE LOG 'fencing bypass: % on table "%" let through without a fence check', what, relname;
    RETURN true;
END
$$;
COMMENT ON FUNCTION fencing.bypassing(oid, text) IS
    'internal: true when fencing.bypass lets this write through (a superuser''s; other roles'' writes are judged as without it)';

-- A write refused for want of a token (SF002): counted, then raised.
CREATE FUNCTION fencing.refuse_missing(relid oid, what text) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM fencing.count(relid, 'rejected_missing');
    PERFORM fencing.raise_token_required(relid, what);
END
$$;

-- A write whose setting and fence column disagree (SF002).
CREATE FUNCTION fencing.refuse_conflict(relid oid, setting fencing.fence, col fencing.fence) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM fencing.count(relid, 'rejected_missing');
    PERFORM fencing.raise_conflicting_tokens(setting, col, relid);
END
$$;

-- A write whose token lost (SF001): counted by reason, then raised with the
-- fence it lost to, or without it for a writer that may not read it.
-- scope_name and key: the key or table scope lost to (NULL: the row).
CREATE FUNCTION fencing.refuse_stale(relid oid, token fencing.fence, lost_to fencing.fence,
                                     scope_name text, key text) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM fencing.count(relid, CASE WHEN token = lost_to THEN 'rejected_already_used'
                                      ELSE 'rejected_stale' END);
    IF NOT fencing.may_read_keys(relid, scope_name) THEN
        PERFORM fencing.raise_stale_hidden(token, relid, scope_name);
    END IF;
    PERFORM fencing.raise_stale(token, lost_to, relid,
                                CASE WHEN scope_name IS NOT NULL AND key IS NOT NULL
                                     THEN format('scope "%s" key %s', scope_name, key)
                                     WHEN scope_name IS NOT NULL
                                     THEN format('scope "%s"', scope_name) END);
END
$$;

REVOKE ALL ON FUNCTION fencing.refuse_missing(oid, text), fencing.refuse_conflict(oid, fencing.fence, fencing.fence),
    fencing.refuse_stale(oid, fencing.fence, fencing.fence, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.refuse_missing(oid, text), fencing.refuse_conflict(oid, fencing.fence, fencing.fence),
    fencing.refuse_stale(oid, fencing.fence, fencing.fence, text, text) TO PUBLIC;
COMMENT ON FUNCTION fencing.refuse_missing(oid, text) IS 'internal: count and raise SF002 (no token)';
COMMENT ON FUNCTION fencing.refuse_conflict(oid, fencing.fence, fencing.fence) IS 'internal: count and raise SF002 (two tokens)';
COMMENT ON FUNCTION fencing.refuse_stale(oid, fencing.fence, fencing.fence, text, text) IS 'internal: count and raise SF001';

-- TRUNCATE of a protected table (or of a member of its tree): SF002, always.
CREATE FUNCTION fencing.guard_truncate() RETURNS trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    root regclass := fencing.protected_root(TG_RELID);
BEGIN
    IF TG_OP <> 'TRUNCATE' OR TG_LEVEL <> 'STATEMENT' THEN
        RAISE EXCEPTION 'fencing.guard_truncate() must be fired for TRUNCATE'
            USING ERRCODE = 'E0000';
    END IF;
    PERFORM fencing.count(TG_RELID, 'rejected_missing');
    RAISE EXCEPTION 'cannot truncate protected table "%"', TG_TABLE_NAME
        USING ERRCODE = 'SF002',
              DETAIL = 'TRUNCATE would remove every row and its fence at once, with no token to check.',
              HINT = format('Call fencing.unprotect(''%s'') first if you really mean it.',
                            (SELECT format('%I.%I', n.nspname, c.relname)
                               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE c.oid = coalesce(root, TG_RELID::regclass))),
              TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
END
$$;
COMMENT ON FUNCTION fencing.guard_truncate() IS
    'refuses TRUNCATE of protected tables (installed by fencing.protect)';
