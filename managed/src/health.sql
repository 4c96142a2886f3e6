------------------------------------------------------------------------------
-- Health: is every guard in place?  (fencing.protected_tables)
------------------------------------------------------------------------------

-- Whether the DDL guard was installed (the installing role may create
-- event triggers) and whether it must be there: see ddl_guard.sql.
CREATE TABLE fencing.edition_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    ddl_guard boolean NOT NULL
);
COMMENT ON TABLE fencing.edition_state IS
    'ddl_guard: whether the DDL guard (event triggers) was installed; when it was, its absence makes every guard not intact';
REVOKE ALL ON fencing.edition_state FROM PUBLIC;
GRANT SELECT ON fencing.edition_state TO PUBLIC;

-- What is wrong with the guard of protected table relid, one row per
-- problem: kind (for the DDL guard's message), the member table concerned
-- and the problem as the view shows it.
CREATE FUNCTION fencing.guard_problems(relid regclass,
                                       OUT kind text, OUT member regclass, OUT problem text)
    RETURNS SETOF record
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p fencing.protected;
    m record;
    g record;
    tg record;
    a record;
    k name;
    sc record;
BEGIN
    SELECT * INTO p FROM fencing.protected x WHERE x.relid = guard_problems.relid;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = p.relid) THEN
        kind := 'table'; member := p.relid;
        problem := format('table does not exist (dropped while the DDL guard was absent: SELECT fencing.unprotect(%s) forgets it)', p.relid::oid);
        RETURN NEXT;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_proc f WHERE f.oid = p.guard_function::oid
                      AND f.pronamespace = 'fencing'::regnamespace AND f.proowner = fencing.owner_oid()
                      AND f.prosecdef = false AND f.proconfig IS NULL
                      AND f.prosrc = fencing.guard_source_of(p.relid)) THEN
        kind := 'function'; member := p.relid;
        problem := format('function %s is not the guard fencing.protect() wrote for the table', p.guard_function);
        RETURN NEXT;
    END IF;
    FOR m IN SELECT t.member, t.depth FROM fencing.tree_of(p.relid) t ORDER BY t.depth, t.member::text LOOP
        member := m.member;
        -- the row guard, and the TRUNCATE guard
        FOR tg IN SELECT * FROM (VALUES ('zz_fencing_guard'::name, p.guard_function::oid, 31::int2),
                                       ('zz_fencing_truncate'::name, 'fencing.guard_truncate()'::regprocedure::oid, 34::int2)) e(tgname, fn, tgtype)
        LOOP
            SELECT x.* INTO g FROM pg_trigger x WHERE x.tgrelid = m.member AND x.tgname = tg.tgname;
            IF NOT FOUND THEN
                kind := 'missing';
                problem := format('trigger %s is missing on %s', tg.tgname, m.member);
                SELECT x.tgname INTO g FROM pg_trigger x WHERE x.tgrelid = m.member AND x.tgfoid = tg.fn LIMIT 1;
                IF FOUND THEN
                    kind := 'renamed';
                    problem := problem || format(' (renamed to %s?)', g.tgname);
                END IF;
                RETURN NEXT;
            ELSIF g.tgfoid <> tg.fn THEN
                kind := 'function';
                problem := format('trigger %s on %s calls another function', tg.tgname, m.member);
                RETURN NEXT;
            ELSIF g.tgtype <> tg.tgtype OR g.tgqual IS NOT NULL OR cardinality(g.tgattr::int2[]) <> 0 THEN
                kind := 'timing';
                problem := format('trigger %s on %s does not fire for every write (timing, events, WHEN or column list changed)', tg.tgname, m.member);
                RETURN NEXT;
            ELSIF g.tgenabled <> 'A' THEN
                kind := CASE WHEN g.tgenabled = 'D' THEN 'disabled' ELSE 'firing' END;
                problem := format('trigger %s on %s is not ENABLE ALWAYS (tgenabled = %s)', tg.tgname, m.member, g.tgenabled);
                RETURN NEXT;
            END IF;
        END LOOP;
        -- BEFORE ROW triggers that fire after the guard (name order)
        FOR g IN SELECT x.tgname FROM pg_trigger x
                  WHERE x.tgrelid = m.member AND (x.tgtype::int & 3) = 3
                    AND x.tgname::text COLLATE "C" > 'zz_fencing_guard' AND x.tgname <> 'zz_fencing_truncate'
                  ORDER BY 1 LOOP
            kind := 'after';
            problem := format('trigger %s on %s fires after the guard (BEFORE ROW triggers fire in name order)', g.tgname, m.member);
            RETURN NEXT;
        END LOOP;
        -- the fence column
        SELECT x.* INTO a FROM pg_attribute x
         WHERE x.attrelid = m.member AND x.attname = p.fence_column AND x.attnum > 0 AND NOT x.attisdropped;
        kind := 'fence';
        IF NOT FOUND THEN
            problem := format('fence column %I is missing on %s', p.fence_column, m.member);
            RETURN NEXT;
        ELSIF a.atttypid <> 'fencing.fence'::regtype THEN
            problem := format('fence column %I on %s is of type %s, not fencing.fence', p.fence_column, m.member, a.atttypid::regtype);
            RETURN NEXT;
        ELSIF a.attgenerated <> '' THEN
            problem := format('fence column %I on %s is a generated column', p.fence_column, m.member);
            RETURN NEXT;
        ELSIF a.atthasdef OR a.attidentity <> '' THEN
            problem := format('fence column %I on %s has a default', p.fence_column, m.member);
            RETURN NEXT;
        END IF;
        -- the key columns
        FOREACH k IN ARRAY coalesce(p.key_columns, '{}') LOOP
            SELECT x.* INTO a FROM pg_attribute x
             WHERE x.attrelid = m.member AND x.attname = k AND x.attnum > 0 AND NOT x.attisdropped;
            kind := 'key';
            IF NOT FOUND THEN
                problem := format('key column %I is missing on %s', k, m.member);
                RETURN NEXT;
            ELSIF a.attgenerated <> '' THEN
                problem := format('key column %I on %s is a generated column', k, m.member);
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;
    -- the scope's storage, as the guard will find it
    member := p.relid;
    IF p.key_columns IS NOT NULL THEN
        SELECT s.*, c.oid AS storage_oid INTO sc FROM fencing.scope_storage s
          LEFT JOIN pg_class c ON c.oid = s.storage
         WHERE s.scope_name = p.scope_name;
        kind := 'storage';
        IF NOT FOUND THEN
            problem := format('fencing scope %L is not registered in fencing.scope_storage', p.scope_name);
            RETURN NEXT;
        ELSIF sc.storage_oid IS NULL THEN
            problem := format('the storage table of fencing scope %L is missing', p.scope_name);
            RETURN NEXT;
        ELSIF NOT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = sc.storage_oid AND i.indisunique
                             AND i.indisvalid AND i.indnullsnotdistinct) THEN
            problem := format('the storage table %s of fencing scope %L has lost its unique index on the key columns', sc.storage, p.scope_name);
            RETURN NEXT;
        ELSIF EXISTS (SELECT FROM pg_trigger x WHERE x.tgrelid = sc.storage_oid)
              OR EXISTS (SELECT FROM pg_class c WHERE c.oid = sc.storage_oid AND c.relforcerowsecurity) THEN
            problem := format('the storage table %s of fencing scope %L has triggers or forced row security', sc.storage, p.scope_name);
            RETURN NEXT;
        END IF;
    END IF;
    -- the DDL guard, once installed, must stay
    IF (SELECT e.ddl_guard FROM fencing.edition_state e) AND NOT fencing.ddl_guard_present() THEN
        kind := 'ddl_guard';
        problem := 'the DDL guard''s event triggers are missing or disabled';
        RETURN NEXT;
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.guard_problems(regclass) IS
    'what is wrong with the guard of a protected table, one row per problem';

-- The source protect() would write for the guard of relid now.
CREATE FUNCTION fencing.guard_source_of(relid regclass) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT fencing.guard_source(p.fence_column, p.key_columns, p.strict, p.scope_name, s.writer, p.lease,
                                (SELECT array_agg(a.attname ORDER BY k.ord)
                                   FROM pg_index x
                                  CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
                                   JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
                                  WHERE x.indrelid = p.relid AND x.indisprimary),
                                c.relkind = 'p')
      FROM fencing.protected p
      JOIN pg_class c ON c.oid = p.relid
      LEFT JOIN fencing.scope_storage s ON s.scope_name = p.scope_name AND p.key_columns IS NOT NULL
     WHERE p.relid = guard_source_of.relid
$$;
COMMENT ON FUNCTION fencing.guard_source_of(regclass) IS
    'internal: the source of the guard function protect() would write for the table now';

-- Are the DDL guard's event triggers there and enabled ALWAYS?
CREATE FUNCTION fencing.ddl_guard_present() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*) = 3 FROM pg_event_trigger t
      JOIN pg_proc f ON f.oid = t.evtfoid AND f.pronamespace = 'fencing'::regnamespace
     WHERE (t.evtname, t.evtevent, f.proname) IN (('fencing_ddl_guard_start', 'ddl_command_start', 'ddl_guard_start'),
                                                  ('fencing_ddl_guard_end', 'ddl_command_end', 'ddl_guard_end'),
                                                  ('fencing_ddl_guard_drop', 'sql_drop', 'ddl_guard_drop'))
       AND t.evtenabled = 'A'
$$;
COMMENT ON FUNCTION fencing.ddl_guard_present() IS
    'internal: are the DDL guard''s event triggers there and enabled ALWAYS';

-- What the on-call engineer checks first.  guard_intact is false when a
-- guard trigger is missing, disabled, renamed or calls another function,
-- when a guard function is not the code protect() wrote, when a fence or
-- key column was dropped or changed, when the scope's storage is missing
-- or damaged, and, once installed, when the DDL guard is gone.
-- ddl_guarded says whether the DDL guard watches the table: false where
-- the installing role could not create event triggers (then DDL that
-- breaks a guard is not refused; this view shows what it broke).
CREATE VIEW fencing.protected_tables AS
SELECT p.relid,
       CASE WHEN p.key_columns IS NULL THEN 'row'
            WHEN cardinality(p.key_columns) = 0 THEN 'table'
            ELSE 'key' END AS scope_kind,
       p.key_columns,
       p.strict,
       p.scope_name,
       (SELECT count(*) FROM fencing.tree_of(p.relid) t WHERE t.depth > 0) AS partitions,
       pr.problem IS NULL AS guard_intact,
       pr.problem,
       fencing.ddl_guard_present() AS ddl_guarded
  FROM fencing.protected p
  LEFT JOIN LATERAL (
        SELECT string_agg(x.problem, '; ' ORDER BY x.problem) AS problem
          FROM fencing.guard_problems(p.relid) x) pr ON true;
COMMENT ON VIEW fencing.protected_tables IS
    'one row per protected table: scope, partitions and inheritance children (partitions), whether its guard is intact (problem says what is wrong), and whether the DDL guard watches it';
GRANT SELECT ON fencing.protected_tables TO PUBLIC;
