------------------------------------------------------------------------------
-- Guarding the guard: the DDL guard (event triggers), where it can be
------------------------------------------------------------------------------

-- Only a superuser (RDS and Aurora: rds_superuser; Cloud SQL, Azure, Neon
-- and Supabase have their own such roles) may create event triggers.  The
-- install creates them when the installing role may, and records whether
-- it did (fencing.edition_state); where it may not, DDL that breaks a
-- guard (dropping or disabling its triggers, dropping or retyping its fence
-- or key columns, a BEFORE ROW trigger that fires after it) is not refused,
-- and fencing.protected_tables shows what it broke.
--
-- With it, a DDL command is judged by what it leaves behind: at the end of
-- every command that touches a protected table (ddl_command_end), the
-- tables it touched get the guards their new partitions and inheritance
-- children need (and their rows' fences seed the scope's), and then any
-- problem fencing.guard_problems() finds undoes the command with SF005.
-- A dropped guard trigger or fence or key column is refused at sql_drop; a
-- dropped protected table leaves fencing.protected.  protect() and
-- unprotect() run their own DDL with fencing_sql.ddl_guard_pause set to the
-- table (the setting says nothing to any other table).

-- Forget a protected table that was dropped (as the edition's owner: the
-- table is gone, so there is nobody's privilege left to check).
CREATE FUNCTION fencing.forget_dropped(relid oid) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    guard regprocedure;
    counter text;
BEGIN
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = relid) THEN
        RETURN;
    END IF;
    DELETE FROM fencing.protected p WHERE p.relid::oid = forget_dropped.relid RETURNING p.guard_function INTO guard;
    IF guard IS NOT NULL THEN
        PERFORM fencing.drop_guard_function(guard);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.forget_dropped(oid) IS
    'internal: remove a dropped table from fencing.protected, with its guard function and counters';

-- SF005 for a problem left by a DDL command on protected table root.
CREATE FUNCTION fencing.refuse_ddl(root regclass, kind text, member regclass, problem text, object text)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tname text := (SELECT c.relname FROM pg_class c WHERE c.oid = coalesce(member, root));
    qualified text := (SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
                         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = root);
    msg text;
    detail text := format('Table "%s" is protected by fencing: its fencing triggers check every write.', tname);
BEGIN
    msg := CASE kind
        WHEN 'disabled' THEN format('cannot disable trigger "%s" of protected table "%s"', object, tname)
        WHEN 'firing' THEN format('cannot change the firing mode of trigger "%s" of protected table "%s"', object, tname)
        WHEN 'missing' THEN format('cannot drop trigger "%s" of protected table "%s"', object, tname)
        WHEN 'renamed' THEN format('cannot rename trigger "%s" of protected table "%s"', object, tname)
        WHEN 'timing' THEN format('cannot replace trigger "%s" of protected table "%s"', object, tname)
        WHEN 'function' THEN format('cannot replace trigger "%s" of protected table "%s"', object, tname)
        WHEN 'after' THEN format('cannot create trigger "%s" on protected table "%s"', object, tname)
        WHEN 'fence' THEN format('cannot alter or drop column "%s" of protected table "%s"', object, tname)
        WHEN 'key' THEN format('cannot alter or drop column "%s" of protected table "%s"', object, tname)
        ELSE format('cannot alter protected table "%s"', tname) END;
    IF kind = 'after' THEN
        detail := format('Table "%s" is protected by fencing: BEFORE ROW triggers fire in name order, and trigger "%s" would fire after its guard.', tname, object);
    ELSIF kind = 'fence' THEN
        detail := format('Table "%s" is protected by fencing: column "%s" holds its fence tokens.', tname, object);
    ELSIF kind = 'key' THEN
        detail := format('Table "%s" is protected by fencing: column "%s" is a key column of its fence scope.', tname, object);
    ELSIF kind NOT IN ('disabled', 'firing', 'missing', 'renamed', 'timing', 'function') THEN
        detail := format('Table "%s" is protected by fencing, and the command would break its guard: %s.', tname, problem);
    END IF;
    RAISE EXCEPTION '%', msg
        USING ERRCODE = 'SF005', DETAIL = detail,
              HINT = format('Call fencing.unprotect(''%s'') first.', qualified);
END
$$;
COMMENT ON FUNCTION fencing.refuse_ddl(regclass, text, regclass, text, text) IS
    'internal: raise SF005 for a DDL command that would break a protected table''s guard';

-- Give the new members of a protected table's tree their guards, seeding
-- the scope's fences from their rows (as the DDL's user, who owns them).
-- New: not members when the command started (fencing.ddl_guard_start()
-- notes them), so that a restore, which attaches the partitions before it
-- creates their triggers, finds none made for it and makes its own.
CREATE FUNCTION fencing.guard_new_members(root regclass) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p fencing.protected;
    m record;
    before text := E'\n' || coalesce(current_setting('fencing_sql.ddl_members_before', true), '') || E'\n';
BEGIN
    SELECT * INTO p FROM fencing.protected x WHERE x.relid = root;
    -- a filled table joins: no earlier token may write its keys
    IF p.key_columns IS NOT NULL THEN
        PERFORM fencing.seed_scope(root, true);
    END IF;
    FOR m IN SELECT * FROM fencing.tree_of(root) t
              WHERE t.depth > 0
                AND NOT EXISTS (SELECT FROM pg_trigger g WHERE g.tgrelid = t.member::oid
                                   AND g.tgname = 'zz_fencing_truncate')
                -- joined by this command (not a member whose trigger
                -- pg_restore is about to create)
                AND strpos(before, E'\n' || t.member::oid::text || E'\n') = 0
              ORDER BY t.depth LOOP
        IF NOT m.is_partition THEN
            EXECUTE format('CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s',
                           m.member, p.guard_function);
            EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_guard', m.member);
        END IF;
        EXECUTE format('CREATE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()',
                       m.member);
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_truncate', m.member);
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.guard_new_members(regclass) IS
    'internal: guard the partitions and inheritance children a protected table gained, and seed its scope from their rows';

-- What a guard problem is about: the trigger or the fence or key column it
-- names, else the whole problem.  A command that changes what was broken
-- about one thing (creates a missing trigger, which pg_restore then
-- enables ALWAYS) leaves it no worse.
CREATE FUNCTION fencing.ddl_problem_subject(root regclass, member regclass, problem text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('%s|%s|%s', root::oid, member::oid,
                  coalesce(substring(problem FROM '^trigger (\S+)'),
                           substring(problem FROM '^((?:fence|key) column \S+)'), problem))
$$;
COMMENT ON FUNCTION fencing.ddl_problem_subject(regclass, regclass, text) IS
    'internal: what a problem of fencing.guard_problems() is about (table, member, and the trigger or column it names)';

-- What was broken before a command: the DDL guard refuses only what the
-- command itself breaks, as the C edition refuses only changes that lower
-- protection.  pg_restore recreates a protected table one command at a
-- time (its fencing.protected row, restored with the edition, comes first;
-- the table's constraints, then its triggers, later): each of those
-- commands finds the table's guard incomplete and leaves it no worse.
CREATE FUNCTION fencing.ddl_guard_start() RETURNS event_trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('fencing_sql.ddl_members_before',
                       coalesce((SELECT string_agg(t.member::oid::text, E'\n')
                                   FROM fencing.protected p, fencing.tree_of(p.relid) t
                                  WHERE t.depth > 0), ''),
                       true);
    PERFORM set_config('fencing_sql.ddl_broken_before',
                       coalesce((SELECT string_agg(fencing.ddl_problem_subject(p.relid, x.member, x.problem), E'\n')
                                   FROM fencing.protected p, fencing.guard_problems(p.relid) x
                                  WHERE x.kind <> 'ddl_guard'), ''),
                       true);
END
$$;
COMMENT ON FUNCTION fencing.ddl_guard_start() IS
    'event trigger: notes what was broken in protected tables before a command, so that the DDL guard refuses only what the command breaks';

CREATE FUNCTION fencing.ddl_guard_end() RETURNS event_trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    paused text := coalesce(current_setting('fencing_sql.ddl_guard_pause', true), '');
    -- (read before the commands this function runs note theirs)
    before text := E'\n' || coalesce(current_setting('fencing_sql.ddl_broken_before', true), '') || E'\n';
    root regclass;
    pr record;
BEGIN
    FOR root IN
        SELECT DISTINCT fencing.protected_root(t.rel)
          FROM (SELECT CASE WHEN c.classid = 'pg_trigger'::regclass
                            THEN (SELECT g.tgrelid FROM pg_trigger g WHERE g.oid = c.objid)
                            ELSE c.objid END AS rel
                  FROM pg_event_trigger_ddl_commands() c
                 WHERE c.classid IN ('pg_class'::regclass, 'pg_trigger'::regclass)) t
         WHERE t.rel IS NOT NULL
    LOOP
        CONTINUE WHEN root IS NULL OR root::oid::text = paused;
        PERFORM set_config('fencing_sql.ddl_guard_pause', root::oid::text, true);
        PERFORM fencing.guard_new_members(root);
        PERFORM set_config('fencing_sql.ddl_guard_pause', paused, true);
        FOR pr IN SELECT * FROM fencing.guard_problems(root) x
                   WHERE x.kind <> 'ddl_guard'
                     AND strpos(before, E'\n' || fencing.ddl_problem_subject(root, x.member, x.problem) || E'\n') = 0 LOOP
            PERFORM fencing.refuse_ddl(root, pr.kind, pr.member, pr.problem,
                                       coalesce(substring(pr.problem FROM '^trigger (\S+)'),
                                                substring(pr.problem FROM '^(?:fence|key) column (\S+)'), ''));
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.ddl_guard_end() IS
    'event trigger: guards partitions and children a protected table gains, and refuses (SF005) DDL that would break a protected table''s guard';

CREATE FUNCTION fencing.ddl_guard_drop() RETURNS event_trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    paused text := coalesce(current_setting('fencing_sql.ddl_guard_pause', true), '');
    o record;
    rel oid;
    root regclass;
    p fencing.protected;
BEGIN
    FOR o IN SELECT * FROM pg_event_trigger_dropped_objects() LOOP
        IF o.object_type IN ('table', 'foreign table') AND EXISTS (SELECT FROM fencing.protected x WHERE x.relid::oid = o.objid) THEN
            PERFORM fencing.forget_dropped(o.objid);
        ELSIF o.object_type IN ('trigger', 'table column') AND cardinality(o.address_names) = 3 THEN
            SELECT c.oid INTO rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = o.address_names[1] AND c.relname = o.address_names[2];
            CONTINUE WHEN rel IS NULL;
            root := fencing.protected_root(rel);
            CONTINUE WHEN root IS NULL OR root::oid::text = paused;
            SELECT * INTO p FROM fencing.protected x WHERE x.relid = root;
            IF o.object_type = 'trigger' AND o.address_names[3] IN ('zz_fencing_guard', 'zz_fencing_truncate') THEN
                PERFORM fencing.refuse_ddl(root, 'missing', rel::regclass, NULL, o.address_names[3]);
            ELSIF o.object_type = 'table column' AND o.address_names[3] = p.fence_column THEN
                PERFORM fencing.refuse_ddl(root, 'fence', rel::regclass, NULL, o.address_names[3]);
            ELSIF o.object_type = 'table column' AND o.address_names[3] = ANY (p.key_columns) THEN
                PERFORM fencing.refuse_ddl(root, 'key', rel::regclass, NULL, o.address_names[3]);
            END IF;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.ddl_guard_drop() IS
    'event trigger: refuses (SF005) dropping the guard triggers or the fence and key columns of a protected table; a dropped protected table leaves fencing.protected';

-- The event triggers, where the installing role may create them.
DO $ddl$
BEGIN
    BEGIN
        CREATE EVENT TRIGGER fencing_ddl_guard_start ON ddl_command_start
            WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER', 'CREATE TABLE AS')
            EXECUTE FUNCTION fencing.ddl_guard_start();
        CREATE EVENT TRIGGER fencing_ddl_guard_end ON ddl_command_end
            WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER', 'CREATE TABLE AS')
            EXECUTE FUNCTION fencing.ddl_guard_end();
        CREATE EVENT TRIGGER fencing_ddl_guard_drop ON sql_drop
            EXECUTE FUNCTION fencing.ddl_guard_drop();
        ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE ALWAYS;
        ALTER EVENT TRIGGER fencing_ddl_guard_end ENABLE ALWAYS;
        ALTER EVENT TRIGGER fencing_ddl_guard_drop ENABLE ALWAYS;
        COMMENT ON EVENT TRIGGER fencing_ddl_guard_start IS
            'the DDL guard: notes what was broken before a command (the guard refuses only what a command breaks)';
        COMMENT ON EVENT TRIGGER fencing_ddl_guard_end IS
            'the DDL guard: guards new partitions and children of protected tables, and refuses DDL that would break a guard';
        COMMENT ON EVENT TRIGGER fencing_ddl_guard_drop IS
            'the DDL guard: refuses dropping a protected table''s guard triggers, fence and key columns; forgets dropped protected tables';
        INSERT INTO fencing.edition_state (ddl_guard) VALUES (true);
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE WARNING 'the DDL guard is not installed: role % may not create event triggers', current_user
            USING DETAIL = 'DDL that breaks a protected table''s guard (dropping or disabling its triggers, changing its fence or key columns) is not refused; fencing.protected_tables shows what it broke.',
                  HINT = 'Install the edition as a role that may create event triggers (a superuser; on RDS and Aurora, a member of rds_superuser) to have the DDL guard.';
        INSERT INTO fencing.edition_state (ddl_guard) VALUES (false);
    END;
END
$ddl$;
