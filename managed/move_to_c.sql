/* managed/move_to_c.sql: move a database from fencing_sql 1.4 (the edition
 * for managed PostgreSQL) to the C edition, fencing 1.4: the same
 * protections, scopes, fences, leases and idempotency keys, the same
 * functions.
 *
 *   psql -v ON_ERROR_STOP=1 -U postgres -d DATABASE -f managed/move_to_c.sql
 *
 * Run it as a superuser (CREATE EXTENSION fencing needs one), once the C
 * edition is installed on the server (fencing 1.4 in
 * pg_available_extension_versions), while nothing else is connected to the
 * database.  One transaction: all or nothing.  It refuses, changing
 * nothing, when a precondition does not hold (SQLSTATE, DETAIL and HINT
 * say which and what to do).
 *
 * What it does, in order:
 *   1. checks: a superuser; fencing_sql 1.4 here and the C edition not;
 *      fencing 1.4 available on the server; no other session connected to
 *      the database and no prepared transaction of it; then locks every
 *      table it reads or converts (ACCESS EXCLUSIVE, lock_timeout 30 s:
 *      a session that connects meanwhile waits for the move); every
 *      protected table's guard intact; no object outside the edition that
 *      depends on it (a view, a function or an index using its types or
 *      functions); warns about routines that call fencing.fence_text()
 *   2. records, in temporary tables: fencing.protected (each table's fence
 *      column, key columns, strict mode, scope name and lease), the owner
 *      of each scope and the fence of every key of every key and table
 *      scope, the leases, the idempotency keys, the epoch state and the
 *      claim sequence, and every column of type fencing.fence
 *   3. unprotects each table, converts each fence column to text (3:42),
 *      drops the edition (DROP EXTENSION fencing_sql, or the schema the
 *      plain script made), CREATE EXTENSION fencing, converts the columns
 *      to the C edition's fencing.fence
 *   4. restores the epoch state, the claim sequence, the leases and the
 *      idempotency keys; protects each table again with its recorded
 *      arguments (protect() seeds key and table scopes from the rows);
 *      gives each scope back to its owner; raises every recorded key's
 *      fence that the rows did not reach (fencing.raise_fence()); then the
 *      recorded leases of the tables protected with one
 *   5. checks that everything came back (every table protected with the
 *      same settings and its guard intact, every key's fence at least the
 *      recorded one, as many leases, keys and fence values as before, the
 *      epoch not lower) and says what it moved
 *
 * Not moved: the edition's statistics (the C edition counts from zero),
 * grants you made on the edition's own functions (grant them again), and
 * the fences of scopes that no protected table uses (it warns).  Each
 * table with a fence column is rewritten twice.  managed/README.md
 * (moving to the C edition later) has the steps around it.
 */
\set ON_ERROR_STOP on
\set SHOW_CONTEXT never
\set QUIET on
BEGIN;
SET LOCAL search_path = pg_catalog, pg_temp;
SET LOCAL client_min_messages = notice;
-- key values pass through their text forms (raise_fence() takes text):
-- forms that read back as the same values, whatever the session had
SET LOCAL DateStyle = 'ISO, YMD';
SET LOCAL IntervalStyle = 'postgres';
SET LOCAL TimeZone = 'UTC';
SET LOCAL extra_float_digits = 3;
SET LOCAL bytea_output = 'hex';

-- 1. preconditions ---------------------------------------------------------
DO $pre$
DECLARE
    ed record;
    others text;
    n integer;
BEGIN
    IF NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'must be superuser to move a database to the C edition of fencing'
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Role %I is not a superuser; CREATE EXTENSION fencing needs one (the C edition is not a trusted extension).', current_user),
                  HINT = 'Run managed/move_to_c.sql as a superuser, for example psql -U postgres.';
    END IF;
    IF EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'fencing') THEN
        RAISE EXCEPTION 'the C edition of fencing is installed in database "%" already', current_database()
            USING ERRCODE = 'duplicate_object',
                  DETAIL = format('Extension fencing %s is installed; there is nothing to move.',
                                  (SELECT e.extversion FROM pg_extension e WHERE e.extname = 'fencing')),
                  HINT = 'Run the script in a database that has the edition fencing_sql.';
    END IF;
    IF to_regprocedure('fencing.edition()') IS NULL THEN
        RAISE EXCEPTION 'the edition fencing_sql is not installed in database "%"', current_database()
            USING ERRCODE = 'undefined_object',
                  DETAIL = 'There is no function fencing.edition(): nothing to move.',
                  HINT = 'Connect to the database that has the edition (SELECT * FROM fencing.edition() shows it).';
    END IF;
    EXECUTE 'SELECT * FROM fencing.edition()' INTO ed;
    IF ed.edition IS DISTINCT FROM 'fencing_sql' OR ed.version IS DISTINCT FROM '1.4' THEN
        RAISE EXCEPTION 'this script moves fencing_sql 1.4, and the database has % %', ed.edition, ed.version
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Use the move_to_c.sql shipped with the version of the edition the database has, or update the edition to 1.4 first.';
    END IF;
    IF NOT EXISTS (SELECT FROM pg_available_extension_versions v
                    WHERE v.name = 'fencing' AND v.version = '1.4') THEN
        RAISE EXCEPTION 'the C edition of fencing 1.4 is not installed on this server'
            USING ERRCODE = 'undefined_file',
                  DETAIL = CASE WHEN EXISTS (SELECT FROM pg_available_extension_versions v WHERE v.name = 'fencing')
                                THEN format('The server has fencing %s, not 1.4.',
                                            (SELECT string_agg(v.version, ', ' ORDER BY v.version)
                                               FROM pg_available_extension_versions v WHERE v.name = 'fencing'))
                                ELSE 'pg_available_extension_versions has no extension fencing: its control file and scripts are not in the server''s extension directory.' END,
                  HINT = 'Install the C edition on the server first (make install, or the package for this PostgreSQL), preferably with shared_preload_libraries = ''fencing'', then run this script again.';
    END IF;
    SELECT count(*), string_agg(format('pid %s (user %s, application "%s", %s)', a.pid, a.usename,
                                       a.application_name, coalesce(a.state, '?')), ', ' ORDER BY a.pid)
      INTO n, others
      FROM pg_stat_activity a
     WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
       AND a.backend_type = 'client backend';
    IF n > 0 THEN
        RAISE EXCEPTION 'other sessions are connected to database "%"', current_database()
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('%s session(s): %s. A writer that goes on during the move could write with the edition''s types and lose its fences.', n, left(others, 2000)),
                  HINT = 'Stop the applications and workers that use the database (a maintenance window), or end their sessions with pg_terminate_backend(pid), then run the script again.';
    END IF;
    SELECT count(*) INTO n FROM pg_prepared_xacts x WHERE x.database = current_database();
    IF n > 0 THEN
        RAISE EXCEPTION 'database "%" has % prepared transaction(s)', current_database(), n
            USING ERRCODE = 'object_in_use',
                  DETAIL = 'A prepared transaction may hold writes judged by the edition and locks on protected tables.',
                  HINT = 'COMMIT PREPARED or ROLLBACK PREPARED them (pg_prepared_xacts lists them), then run the script again.';
    END IF;
END
$pre$;

-- From here to the end, nothing writes what the move reads: a session that
-- connected after the check above waits for the move and then finds the
-- C edition (or the edition untouched, if the move failed).  Waiting at
-- most lock_timeout: autovacuum gives way, a writer does not.
SET LOCAL lock_timeout = '30s';
DO $lock$
DECLARE
    r regclass;
BEGIN
    FOR r IN SELECT c.oid::regclass FROM pg_class c
              WHERE c.relkind IN ('r', 'p', 'f')
                AND (c.oid IN (SELECT p.relid FROM fencing.protected p)
                     OR c.oid IN (SELECT s.storage FROM fencing.scope_storage s)
                     OR c.oid IN (SELECT a.attrelid FROM pg_attribute a
                                   WHERE a.atttypid IN ('fencing.fence'::regtype, 'fencing.fence_pair'::regtype)
                                     AND NOT a.attisdropped)
                     OR c.oid IN ('fencing.protected'::regclass, 'fencing.scope_storage'::regclass,
                                  'fencing.leases'::regclass, 'fencing.epoch_state'::regclass,
                                  'fencing.idempotency_keys'::regclass))
              ORDER BY c.oid
    LOOP
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', r);
    END LOOP;
END
$lock$;

-- Every protected table's guard intact: a table whose guard or scope
-- storage is broken might have let writes past its fences, and its
-- missing fences cannot be moved.
DO $health$
DECLARE
    bad text;
BEGIN
    SELECT string_agg(format('%s: %s', t.relid, coalesce(t.problem, 'guard not intact')), '; ' ORDER BY t.relid::text)
      INTO bad
      FROM fencing.protected_tables t
     WHERE NOT t.guard_intact OR t.problem IS NOT NULL;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'a protected table''s guard is not intact'
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = left(bad, 3000),
                  HINT = 'Repair it first (SELECT fencing.protect(...) with the same arguments repairs the triggers; missing scope storage comes back only from a backup), or unprotect the table, then run the script again.';
    END IF;
END
$health$;

-- 2. what the edition holds ------------------------------------------------
CREATE TEMP TABLE move_protected ON COMMIT DROP AS
    SELECT p.relid::oid AS relid, p.relid::text AS name, p.fence_column, p.key_columns, p.strict AS is_strict,
           p.scope_name, p.lease, c.relowner::regrole AS table_owner
      FROM fencing.protected p JOIN pg_class c ON c.oid = p.relid;
CREATE TEMP TABLE move_scope_owner ON COMMIT DROP AS
    SELECT s.scope_name, s.owner::oid AS owner, s.table_scope, s.storage::oid AS storage
      FROM fencing.scope_storage s JOIN pg_class c ON c.oid = s.storage;
CREATE TEMP TABLE move_fences (scope_name text, key_values text[], key text, fence text) ON COMMIT DROP;
CREATE TEMP TABLE move_storage (scope_name text, storage oid, relid oid, pred text) ON COMMIT DROP;
CREATE TEMP TABLE move_columns ON COMMIT DROP AS
    SELECT a.attrelid AS relid, a.attrelid::regclass::text AS name, a.attname, a.attinhcount = 0 AS top,
           0::bigint AS row_count, 0::bigint AS fence_count, NULL::text AS fence_max
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE a.atttypid IN ('fencing.fence'::regtype, 'fencing.fence_pair'::regtype)
       AND a.attnum > 0 AND NOT a.attisdropped
       AND c.relkind IN ('r', 'p', 'f') AND c.relnamespace <> 'fencing'::regnamespace;
CREATE TEMP TABLE move_leases ON COMMIT DROP AS
    SELECT l.name, l.holder,
           CASE WHEN l.token IS NULL THEN NULL ELSE (l.token).epoch || ':' || (l.token).counter END AS token,
           l.granted_at, l.expires_at, l.owner::oid AS owner
      FROM fencing.leases l;
CREATE TEMP TABLE move_keys ON COMMIT DROP AS
    SELECT k.key, k.request_hash, k.state, k.result, (k.claim).epoch || ':' || (k.claim).counter AS claim,
           k.recovery_point, k.locked_until, k.expires_at, k.created_at, k.updated_at, k.owner::oid AS owner
      FROM fencing.idempotency_keys k;
CREATE TEMP TABLE move_state ON COMMIT DROP AS
    SELECT e.singleton IS NOT NULL AS has_epoch,
           e.system_identifier, e.timeline, e.timeline_offset, e.bumps,
           fencing.current_epoch() AS epoch_before,
           s.last_value AS claim_last, s.is_called AS claim_called
      FROM fencing.idempotency_claim_seq s LEFT JOIN fencing.epoch_state e ON true;

DO $record$
DECLARE
    s record;
    c record;
    cols text;
    orphans text;
BEGIN
    -- every key's fence of every scope (the storage tables' key columns are
    -- key_1 ... key_n; a table scope's single row has key_1 true)
    FOR s IN SELECT * FROM pg_temp.move_scope_owner LOOP
        IF s.table_scope THEN
            EXECUTE format('INSERT INTO pg_temp.move_fences SELECT $1, ''{}''::text[], ''[]'', '
                           '(x.fence).epoch || '':'' || (x.fence).counter FROM %s x', s.storage::regclass)
                USING s.scope_name;
        ELSE
            SELECT string_agg(format('(x.%I)::text', a.attname), ', ' ORDER BY a.attnum) INTO cols
              FROM pg_attribute a
             WHERE a.attrelid = s.storage AND a.attnum > 0 AND NOT a.attisdropped
               AND a.attname NOT IN ('fence', 'xact');
            EXECUTE format('INSERT INTO pg_temp.move_fences SELECT $1, ARRAY[%1$s], fencing.scope_key(VARIADIC ARRAY[%1$s]), '
                           '(x.fence).epoch || '':'' || (x.fence).counter FROM %2$s x', cols, s.storage::regclass)
                USING s.scope_name;
        END IF;
    END LOOP;
    SELECT string_agg(format('%L (%s keys)', o.scope_name,
                             (SELECT count(*) FROM pg_temp.move_fences f WHERE f.scope_name = o.scope_name)), ', ')
      INTO orphans
      FROM pg_temp.move_scope_owner o
     WHERE NOT EXISTS (SELECT FROM pg_temp.move_protected p WHERE p.scope_name = o.scope_name);
    IF orphans IS NOT NULL THEN
        RAISE WARNING 'scopes that no protected table uses are not moved: %', left(orphans, 2000)
            USING DETAIL = 'A scope''s fences move with the tables protected into it; these have none (they were unprotected or dropped).',
                  HINT = 'To keep such a scope''s fences, protect a table into it before the move (or raise them again with fencing.raise_fence() after protecting one with the C edition).';
    END IF;
    -- code of the database that calls the edition's own fencing.fence_text()
    -- (PL/pgSQL bodies record no dependency): the C edition has none
    SELECT string_agg(p.oid::regprocedure::text, ', ' ORDER BY p.oid::regprocedure::text) INTO orphans
      FROM pg_proc p
     WHERE p.pronamespace <> 'fencing'::regnamespace AND p.prosrc LIKE '%fence\_text%';
    IF orphans IS NOT NULL THEN
        RAISE WARNING 'routines that call fencing.fence_text() will fail after the move: %', left(orphans, 2000)
            USING DETAIL = 'fencing.fence_text() is the edition''s own: the C edition''s fence is written 3:42 by its own text form.',
                  HINT = 'Replace fencing.fence_text(f) with f::text in them after the move.';
    END IF;
    -- the values of every fence column, to compare after the move
    FOR c IN SELECT * FROM pg_temp.move_columns LOOP
        EXECUTE format('UPDATE pg_temp.move_columns m SET row_count = x.n, fence_count = x.f, fence_max = x.mx '
                       'FROM (SELECT count(*) AS n, count(t.%1$I) AS f, '
                       '             max(ARRAY[(t.%1$I).epoch, (t.%1$I).counter])::text AS mx FROM ONLY %2$s t) x '
                       'WHERE m.relid = $1 AND m.attname = $2', c.attname, c.relid::regclass)
            USING c.relid, c.attname;
    END LOOP;
END
$record$;

-- Objects outside the edition that depend on it would be dropped with it:
-- refused.  (The fence columns are converted, and the guard triggers go
-- with unprotect(); the edition's own objects are in schema fencing, its
-- casts and event triggers with them.)
DO $deps$
DECLARE
    held text;
    n integer;
BEGIN
    WITH edition AS (
        SELECT 'pg_class'::regclass AS cls, c.oid FROM pg_class c WHERE c.relnamespace = 'fencing'::regnamespace
        UNION ALL SELECT 'pg_type'::regclass, t.oid FROM pg_type t WHERE t.typnamespace = 'fencing'::regnamespace
        UNION ALL SELECT 'pg_proc'::regclass, p.oid FROM pg_proc p WHERE p.pronamespace = 'fencing'::regnamespace
        UNION ALL SELECT 'pg_operator'::regclass, o.oid FROM pg_operator o WHERE o.oprnamespace = 'fencing'::regnamespace
        UNION ALL SELECT 'pg_opfamily'::regclass, f.oid FROM pg_opfamily f WHERE f.opfnamespace = 'fencing'::regnamespace
        UNION ALL SELECT 'pg_opclass'::regclass, f.oid FROM pg_opclass f WHERE f.opcnamespace = 'fencing'::regnamespace
    ), dependents AS (
        SELECT DISTINCT d.classid, d.objid, d.objsubid
          FROM pg_depend d JOIN edition e ON d.refclassid = e.cls AND d.refobjid = e.oid
         WHERE d.deptype IN ('n', 'a')
    ), outside AS (
        SELECT x.classid, x.objid, x.objsubid,
               CASE x.classid
                   WHEN 'pg_class'::regclass THEN (SELECT c.relnamespace FROM pg_class c WHERE c.oid = x.objid)
                   WHEN 'pg_type'::regclass THEN (SELECT t.typnamespace FROM pg_type t WHERE t.oid = x.objid)
                   WHEN 'pg_proc'::regclass THEN (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = x.objid)
                   WHEN 'pg_operator'::regclass THEN (SELECT o.oprnamespace FROM pg_operator o WHERE o.oid = x.objid)
                   WHEN 'pg_trigger'::regclass THEN (SELECT c.relnamespace FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid WHERE g.oid = x.objid)
                   WHEN 'pg_policy'::regclass THEN (SELECT c.relnamespace FROM pg_policy y JOIN pg_class c ON c.oid = y.polrelid WHERE y.oid = x.objid)
                   WHEN 'pg_rewrite'::regclass THEN (SELECT c.relnamespace FROM pg_rewrite r JOIN pg_class c ON c.oid = r.ev_class WHERE r.oid = x.objid)
                   WHEN 'pg_attrdef'::regclass THEN (SELECT c.relnamespace FROM pg_attrdef r JOIN pg_class c ON c.oid = r.adrelid WHERE r.oid = x.objid)
                   WHEN 'pg_constraint'::regclass THEN (SELECT coalesce(c.connamespace, 0) FROM pg_constraint c WHERE c.oid = x.objid)
                   WHEN 'pg_cast'::regclass THEN 'fencing'::regnamespace::oid
                   WHEN 'pg_event_trigger'::regclass THEN 'fencing'::regnamespace::oid
                   ELSE 0 END AS nsp
          FROM dependents x
    )
    SELECT count(*), string_agg(o.what, ', ' ORDER BY o.what) INTO n, held
      FROM (SELECT o.*, CASE WHEN o.classid = 'pg_rewrite'::regclass
                             THEN (SELECT pg_describe_object('pg_class'::regclass, r.ev_class, 0)
                                     FROM pg_rewrite r WHERE r.oid = o.objid)
                             ELSE pg_describe_object(o.classid, o.objid, o.objsubid) END AS what
              FROM outside o) o
     WHERE o.nsp IS DISTINCT FROM 'fencing'::regnamespace::oid
       -- the fence columns (converted)
       AND NOT (o.classid = 'pg_class'::regclass AND o.objsubid > 0
                AND EXISTS (SELECT FROM pg_temp.move_columns m WHERE m.relid = o.objid
                               AND m.attname = (SELECT a.attname FROM pg_attribute a
                                                 WHERE a.attrelid = o.objid AND a.attnum = o.objsubid)))
       -- the guard triggers (unprotect() and the drop remove them)
       AND NOT (o.classid = 'pg_trigger'::regclass
                AND EXISTS (SELECT FROM pg_trigger g WHERE g.oid = o.objid
                               AND g.tgname IN ('zz_fencing_guard', 'zz_fencing_truncate')
                               AND (SELECT p.pronamespace FROM pg_proc p WHERE p.oid = g.tgfoid) = 'fencing'::regnamespace));
    IF n > 0 THEN
        RAISE EXCEPTION '% object(s) outside the edition depend on it', n
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = format('%s. Dropping the edition would drop them.', left(held, 3000)),
                  HINT = 'Drop them before the move and create them again after it (the C edition has the same schema, types and functions), then run the script again.';
    END IF;
END
$deps$;

-- 3. from the edition to the C edition --------------------------------------
DO $convert$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT * FROM pg_temp.move_protected ORDER BY relid LOOP
        PERFORM fencing.unprotect(t.relid::regclass);
    END LOOP;
    FOR t IN SELECT * FROM pg_temp.move_columns WHERE top ORDER BY relid, attname LOOP
        EXECUTE format('ALTER TABLE %1$s ALTER COLUMN %2$I TYPE text USING '
                       'CASE WHEN %2$I IS NULL THEN NULL ELSE (%2$I).epoch || '':'' || (%2$I).counter END',
                       t.relid::regclass, t.attname);
    END LOOP;
    -- the edition, and with it what its protect() created in schema
    -- fencing (nothing outside it depends on it any more: checked above);
    -- its DDL guard first, before the objects it watches go
    PERFORM set_config('client_min_messages', 'warning', true);
    IF EXISTS (SELECT FROM pg_extension e WHERE e.extname = 'fencing_sql') THEN
        DROP EXTENSION fencing_sql CASCADE;
    ELSE
        FOR t IN SELECT e.evtname FROM pg_event_trigger e JOIN pg_proc p ON p.oid = e.evtfoid
                  WHERE p.pronamespace = 'fencing'::regnamespace LOOP
            EXECUTE format('DROP EVENT TRIGGER %I', t.evtname);
        END LOOP;
    END IF;
    DROP SCHEMA IF EXISTS fencing CASCADE;
    PERFORM set_config('client_min_messages', 'notice', true);
END
$convert$;

CREATE EXTENSION fencing VERSION '1.4';

-- 4. back into the C edition's tables, the tables protected again ---------
DO $restore$
DECLARE
    t record;
    f record;
    st record;
BEGIN
    FOR t IN SELECT * FROM pg_temp.move_columns WHERE top ORDER BY relid, attname LOOP
        EXECUTE format('ALTER TABLE %1$s ALTER COLUMN %2$I TYPE fencing.fence USING %2$I::fencing.fence',
                       t.relid::regclass, t.attname);
    END LOOP;
    INSERT INTO fencing.epoch_state (singleton, system_identifier, timeline, timeline_offset, bumps)
        SELECT true, coalesce(s.system_identifier, (SELECT c.system_identifier FROM pg_control_system() c)),
               s.timeline, s.timeline_offset, s.bumps
          FROM pg_temp.move_state s WHERE s.has_epoch;
    PERFORM setval('fencing.idempotency_claim_seq', s.claim_last, s.claim_called) FROM pg_temp.move_state s;
    INSERT INTO fencing.leases (name, holder, token, granted_at, expires_at, owner)
        SELECT l.name, l.holder, l.token::fencing.fence, l.granted_at, l.expires_at, l.owner::regrole
          FROM pg_temp.move_leases l;
    INSERT INTO fencing.idempotency_keys (key, request_hash, state, result, claim, recovery_point,
                                          locked_until, expires_at, created_at, updated_at, owner)
        SELECT k.key, k.request_hash, k.state, k.result, k.claim::fencing.fence, k.recovery_point,
               k.locked_until, k.expires_at, k.created_at, k.updated_at, k.owner::regrole
          FROM pg_temp.move_keys k;
    -- protected again, without their leases first: raise_fence() on a
    -- table protected with a lease takes only the lease's live token
    FOR t IN SELECT * FROM pg_temp.move_protected ORDER BY relid LOOP
        PERFORM fencing.protect(t.relid::regclass, t.fence_column, t.key_columns, t.is_strict, t.scope_name);
    END LOOP;
    UPDATE fencing.scope_storage s SET owner = o.owner::regrole
      FROM pg_temp.move_scope_owner o
     WHERE o.scope_name = s.scope_name AND s.owner::oid <> o.owner;
    -- each scope's storage in the C edition, and how a recorded key is
    -- found there: its key columns key_1 ... key_n (a table scope's one
    -- row: any), each equal to the recorded value read back as its type
    INSERT INTO pg_temp.move_storage
        SELECT o.scope_name, s.storage::oid,
               (SELECT p.relid FROM pg_temp.move_protected p WHERE p.scope_name = o.scope_name ORDER BY p.relid LIMIT 1),
               CASE WHEN s.table_scope THEN 'true' ELSE
                   (SELECT string_agg(format('s.%I IS NOT DISTINCT FROM (m.key_values[%s])::%s', a.attname,
                                             substr(a.attname, 5)::integer, format_type(a.atttypid, a.atttypmod)),
                                      ' AND ' ORDER BY a.attnum)
                      FROM pg_attribute a
                     WHERE a.attrelid = s.storage AND a.attnum > 0 AND NOT a.attisdropped AND a.attname ~ '^key_[0-9]+$')
               END
          FROM pg_temp.move_scope_owner o JOIN fencing.scope_storage s ON s.scope_name = o.scope_name;
    -- every recorded fence the rows did not reach (seeding raised the rest)
    FOR st IN SELECT * FROM pg_temp.move_storage LOOP
        FOR f IN EXECUTE format('SELECT m.key_values, m.fence FROM pg_temp.move_fences m WHERE m.scope_name = $1 '
                                'AND NOT EXISTS (SELECT FROM %s s WHERE %s AND s.fence OPERATOR(fencing.>=) m.fence::fencing.fence)',
                                st.storage::regclass, st.pred)
                 USING st.scope_name
        LOOP
            PERFORM fencing.raise_fence(st.relid::regclass, f.fence::fencing.fence, VARIADIC f.key_values);
        END LOOP;
    END LOOP;
    FOR t IN SELECT * FROM pg_temp.move_protected WHERE lease IS NOT NULL ORDER BY relid LOOP
        PERFORM fencing.protect(t.relid::regclass, t.fence_column, t.key_columns, t.is_strict, t.scope_name, t.lease);
    END LOOP;
END
$restore$;

-- 5. everything back? -------------------------------------------------------
DO $verify$
DECLARE
    bad text;
    missing text;
    st record;
    c record;
    n bigint;
    fc bigint;
    mx text;
    epoch_after bigint;
BEGIN
    SELECT string_agg(m.name, ', ') INTO bad
      FROM pg_temp.move_protected m
      LEFT JOIN fencing.protected p ON p.relid::oid = m.relid
     WHERE p.relid IS NULL OR p.fence_column IS DISTINCT FROM m.fence_column
        OR p.key_columns IS DISTINCT FROM m.key_columns OR p.strict IS DISTINCT FROM m.is_strict
        OR p.scope_name IS DISTINCT FROM m.scope_name OR p.lease IS DISTINCT FROM m.lease;
    IF bad IS NOT NULL OR (SELECT count(*) FROM fencing.protected) <> (SELECT count(*) FROM pg_temp.move_protected) THEN
        RAISE EXCEPTION 'the move did not protect every table as before: %', coalesce(bad, 'another count')
            USING ERRCODE = 'internal_error', HINT = 'Nothing was changed (the transaction is rolled back). Report this.';
    END IF;
    SELECT string_agg(format('%s: %s', t.relid, coalesce(t.problem, 'guard not intact')), '; ') INTO bad
      FROM fencing.protected_tables t WHERE NOT t.guard_intact OR t.problem IS NOT NULL;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'a table''s guard is not intact after the move: %', bad
            USING ERRCODE = 'internal_error', HINT = 'Nothing was changed (the transaction is rolled back). Report this.';
    END IF;
    FOR st IN SELECT * FROM pg_temp.move_storage LOOP
        EXECUTE format('SELECT string_agg(format(''%%s %%s (%%s)'', m.scope_name, m.key, m.fence), '', '') '
                       'FROM pg_temp.move_fences m WHERE m.scope_name = $1 '
                       'AND NOT EXISTS (SELECT FROM %s s WHERE %s AND s.fence OPERATOR(fencing.>=) m.fence::fencing.fence)',
                       st.storage::regclass, st.pred)
            INTO missing USING st.scope_name;
        IF missing IS NOT NULL THEN
            bad := concat_ws(', ', bad, missing);
        END IF;
    END LOOP;
    IF (SELECT count(*) FROM pg_temp.move_storage)
       <> (SELECT count(DISTINCT m.scope_name) FROM pg_temp.move_fences m
            WHERE EXISTS (SELECT FROM pg_temp.move_protected p WHERE p.scope_name = m.scope_name)) THEN
        bad := concat_ws(', ', bad, 'a scope''s storage');
    END IF;
    IF bad IS NOT NULL THEN
        RAISE EXCEPTION 'fences of keys did not come back: %', left(bad, 3000)
            USING ERRCODE = 'internal_error', HINT = 'Nothing was changed (the transaction is rolled back). Report this.';
    END IF;
    FOR c IN SELECT * FROM pg_temp.move_columns LOOP
        EXECUTE format('SELECT count(*), count(t.%1$I), max(ARRAY[fencing.epoch(t.%1$I), fencing.counter(t.%1$I)])::text '
                       'FROM ONLY %2$s t', c.attname, c.relid::regclass) INTO n, fc, mx;
        IF (n, fc, mx) IS DISTINCT FROM (c.row_count, c.fence_count, c.fence_max) THEN
            RAISE EXCEPTION 'the values of %.% changed in the move', c.name, c.attname
                USING ERRCODE = 'internal_error', HINT = 'Nothing was changed (the transaction is rolled back). Report this.';
        END IF;
    END LOOP;
    IF (SELECT count(*) FROM fencing.leases) <> (SELECT count(*) FROM pg_temp.move_leases)
       OR (SELECT count(*) FROM fencing.idempotency_keys) <> (SELECT count(*) FROM pg_temp.move_keys) THEN
        RAISE EXCEPTION 'leases or idempotency keys did not all come back'
            USING ERRCODE = 'internal_error', HINT = 'Nothing was changed (the transaction is rolled back). Report this.';
    END IF;
    epoch_after := fencing.current_epoch();
    IF epoch_after < (SELECT s.epoch_before FROM pg_temp.move_state s) THEN
        RAISE EXCEPTION 'the epoch would go down in the move (% to %)', (SELECT s.epoch_before FROM pg_temp.move_state s), epoch_after
            USING ERRCODE = 'internal_error', HINT = 'Nothing was changed (the transaction is rolled back). Report this.';
    END IF;
    RAISE NOTICE 'moved to the C edition, fencing 1.4: % protected table(s), % key fence(s) in % scope(s), % lease(s), % idempotency key(s), % fence column(s)',
        (SELECT count(*) FROM pg_temp.move_protected),
        (SELECT count(*) FROM pg_temp.move_fences m WHERE EXISTS (SELECT FROM pg_temp.move_protected p WHERE p.scope_name = m.scope_name)),
        (SELECT count(DISTINCT m.scope_name) FROM pg_temp.move_fences m WHERE EXISTS (SELECT FROM pg_temp.move_protected p WHERE p.scope_name = m.scope_name)),
        (SELECT count(*) FROM pg_temp.move_leases), (SELECT count(*) FROM pg_temp.move_keys),
        (SELECT count(*) FROM pg_temp.move_columns);
    IF NOT (SELECT 'fencing' = ANY (string_to_array(replace(current_setting('shared_preload_libraries'), ' ', ''), ','))) THEN
        RAISE WARNING 'the fencing library is not preloaded'
            USING DETAIL = 'Without shared_preload_libraries = ''fencing'', a token set with SET before the library is loaded in a session is refused (55000), code that sets the token during another session''s write is not refused, and the statistics are not kept.',
                  HINT = 'Add fencing to shared_preload_libraries in postgresql.conf and restart the server.';
    END IF;
END
$verify$;

COMMIT;
