------------------------------------------------------------------------------
-- Statistics: the guard's counters, read from their sequences
------------------------------------------------------------------------------

-- Each protected table's refusals and bypasses (see fencing.count()).
-- accepted is NULL: counting every accepted write would cost every write.
CREATE FUNCTION fencing.stats_internal(
        OUT relid regclass, OUT accepted bigint, OUT rejected_stale bigint,
        OUT rejected_missing bigint, OUT bypassed bigint,
        OUT rejected_already_used bigint, OUT rejected_lease_expired bigint)
    RETURNS SETOF record
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
    g text;
BEGIN
    FOR p IN SELECT x.relid, f.proname FROM fencing.protected x
               JOIN pg_proc f ON f.oid = x.guard_function::oid ORDER BY x.relid LOOP
        g := p.proname;
        relid := p.relid;
        accepted := NULL;
        rejected_stale := fencing.stat_of(g, 'rejected_stale');
        rejected_missing := fencing.stat_of(g, 'rejected_missing');
        bypassed := fencing.stat_of(g, 'bypassed');
        rejected_already_used := fencing.stat_of(g, 'rejected_already_used');
        rejected_lease_expired := fencing.stat_of(g, 'rejected_lease_expired');
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.stats_internal() IS
    'the guard''s counters for the protected tables of this database (read it through the view fencing.stats)';

CREATE FUNCTION fencing.stat_of(guard text, counter text) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce(pg_sequence_last_value(to_regclass(format('fencing.%I', guard || '_' || counter))), 0) $$;
COMMENT ON FUNCTION fencing.stat_of(text, text) IS 'internal: one counter of a protected table';
REVOKE ALL ON FUNCTION fencing.stat_of(text, text) FROM PUBLIC;

CREATE VIEW fencing.stats AS
    SELECT s.relid, s.accepted, s.rejected_stale, s.rejected_missing, s.bypassed,
           s.rejected_already_used, s.rejected_lease_expired
      FROM fencing.stats_internal() AS s;
COMMENT ON VIEW fencing.stats IS
    'writes to protected tables of this database refused or bypassed by the guard since fencing.stats_reset(), counted in sequences (no rollback takes them back); accepted is NULL in this edition';
COMMENT ON COLUMN fencing.stats.accepted IS 'NULL: the edition does not count accepted writes (it would cost every write)';
COMMENT ON COLUMN fencing.stats.rejected_stale IS 'writes rejected with SF001 stale_token (a lost lock)';
COMMENT ON COLUMN fencing.stats.rejected_missing IS 'writes rejected with SF002 (no token, or two that differ), TRUNCATE included';
COMMENT ON COLUMN fencing.stats.bypassed IS 'writes let through without a check by fencing.bypass';
COMMENT ON COLUMN fencing.stats.rejected_already_used IS 'writes rejected with SF001 token_already_used (a programming error, never a lost lock)';
COMMENT ON COLUMN fencing.stats.rejected_lease_expired IS 'writes rejected because their built-in lease was not live';
GRANT SELECT ON fencing.stats TO PUBLIC;

-- Zero every counter of the edition in this database.
CREATE FUNCTION fencing.stats_reset() RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s regclass;
BEGIN
    FOR s IN SELECT c.oid::regclass FROM pg_class c
              WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind = 'S'
                AND (c.relname LIKE 'guard\_%' OR c.relname LIKE 'lease\_stat\_%' OR c.relname LIKE 'idem\_stat\_%')
    LOOP
        PERFORM setval(s, 1, false);
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.stats_reset() IS
    'zero fencing.stats, fencing.lease_stats and fencing.idempotency_stats of this database';
REVOKE ALL ON FUNCTION fencing.stats_reset() FROM PUBLIC;
