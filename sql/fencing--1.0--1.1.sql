/* sql/fencing--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

-- 1.0 is frozen as released.  A fresh CREATE EXTENSION fencing runs
-- fencing--1.0.sql and then this script, as PostgreSQL's contrib modules
-- do, so an updated database and a new one have the same objects by
-- construction; test/suites/update.sh proves it on a filled database.
--
-- One section per concern, in the order of the 1.0 script.  Each section
-- qualifies every name (@extschema@, pg_catalog) as the 1.0 script does.

------------------------------------------------------------------------------
-- Typed scope storage and scope owners
------------------------------------------------------------------------------

-- Objects outside the extension must not hold what the update drops:
-- 1.0's table fencing.scopes (readable by every role, so that any role
-- could build a view or a column type on it) and two lease functions of
-- 1.0.  Without this the update would fail at the DROP, naming an object
-- but not its owner nor what to do; the error below names both.  Dropping
-- such an object lowers no fence.
DO $$
DECLARE
    held text;
    n integer;
BEGIN
    WITH dropped(classid, objid) AS (
        SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid
          FROM pg_catalog.pg_class c
         WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.scopes'::pg_catalog.regclass
        UNION ALL
        SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid
          FROM pg_catalog.pg_type t
         WHERE t.typrelid OPERATOR(pg_catalog.=) '@extschema@.scopes'::pg_catalog.regclass
        UNION ALL
        SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, a.oid
          FROM pg_catalog.pg_type t
          JOIN pg_catalog.pg_type a ON a.oid OPERATOR(pg_catalog.=) t.typarray
         WHERE t.typrelid OPERATOR(pg_catalog.=) '@extschema@.scopes'::pg_catalog.regclass
        UNION ALL
        SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid
          FROM pg_catalog.pg_proc p
         WHERE p.oid OPERATOR(pg_catalog.=) ANY (ARRAY['@extschema@.lease_check_name(text)'::pg_catalog.regprocedure,
                                                     '@extschema@.lease_expiry(timestamptz, interval)'::pg_catalog.regprocedure])
    ),
    dependent AS (
        -- a view's rule stands for the view
        SELECT DISTINCT
               CASE WHEN d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                    THEN 'pg_catalog.pg_class'::pg_catalog.regclass ELSE d.classid END AS classid,
               CASE WHEN d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                    THEN (SELECT w.ev_class FROM pg_catalog.pg_rewrite w WHERE w.oid OPERATOR(pg_catalog.=) d.objid)
                    ELSE d.objid END AS objid,
               CASE WHEN d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass
                    THEN 0 ELSE d.objsubid END AS objsubid,
               d.refclassid, d.refobjid
          FROM pg_catalog.pg_depend d
          JOIN dropped x ON x.classid OPERATOR(pg_catalog.=) d.refclassid
                        AND x.objid OPERATOR(pg_catalog.=) d.refobjid
         WHERE d.deptype OPERATOR(pg_catalog.=) 'n'
    )
    SELECT pg_catalog.count(*),
           pg_catalog.string_agg(pg_catalog.format('%s %s (owner %s) depends on %s %s',
                                     (pg_catalog.pg_identify_object(o.classid, o.objid, o.objsubid)).type,
                                     (pg_catalog.pg_identify_object(o.classid, o.objid, o.objsubid)).identity,
                                     COALESCE(o.owner::pg_catalog.regrole::pg_catalog.text, 'unknown'),
                                     (pg_catalog.pg_identify_object(o.refclassid, o.refobjid, 0)).type,
                                     (pg_catalog.pg_identify_object(o.refclassid, o.refobjid, 0)).identity),
                                 '; ' ORDER BY o.classid, o.objid, o.objsubid)
      INTO n, held
      FROM (SELECT dep.*,
                   CASE dep.classid
                       WHEN 'pg_catalog.pg_class'::pg_catalog.regclass THEN
                           (SELECT c.relowner FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) dep.objid)
                       WHEN 'pg_catalog.pg_proc'::pg_catalog.regclass THEN
                           (SELECT p.proowner FROM pg_catalog.pg_proc p WHERE p.oid OPERATOR(pg_catalog.=) dep.objid)
                       WHEN 'pg_catalog.pg_type'::pg_catalog.regclass THEN
                           (SELECT t.typowner FROM pg_catalog.pg_type t WHERE t.oid OPERATOR(pg_catalog.=) dep.objid)
                       WHEN 'pg_catalog.pg_constraint'::pg_catalog.regclass THEN
                           (SELECT COALESCE(c.relowner, t.typowner) FROM pg_catalog.pg_constraint k
                              LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) k.conrelid
                              LEFT JOIN pg_catalog.pg_type t ON t.oid OPERATOR(pg_catalog.=) k.contypid
                             WHERE k.oid OPERATOR(pg_catalog.=) dep.objid)
                       WHEN 'pg_catalog.pg_attrdef'::pg_catalog.regclass THEN
                           (SELECT c.relowner FROM pg_catalog.pg_attrdef a
                              JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) a.adrelid
                             WHERE a.oid OPERATOR(pg_catalog.=) dep.objid)
                       WHEN 'pg_catalog.pg_policy'::pg_catalog.regclass THEN
                           (SELECT c.relowner FROM pg_catalog.pg_policy y
                              JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) y.polrelid
                             WHERE y.oid OPERATOR(pg_catalog.=) dep.objid)
                   END AS owner
              FROM dependent dep
             WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_depend e
                                WHERE e.classid OPERATOR(pg_catalog.=) dep.classid
                                  AND e.objid OPERATOR(pg_catalog.=) dep.objid
                                  AND e.deptype OPERATOR(pg_catalog.=) 'e')) o;
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'cannot update extension "fencing": % objects outside it depend on objects of fencing 1.0 that the update drops', n
            USING ERRCODE = 'dependent_objects_still_exist',
                  DETAIL = pg_catalog.format('%s.', pg_catalog.left(held, 3000)),
                  HINT = 'Drop those objects (as their owners or a superuser), in the transaction of the update if nothing may miss them, and create them again afterwards where they still make sense: fencing.scopes becomes a view with the same columns, and the two lease functions are gone. Dropping them lowers no fence.';
    END IF;
END
$$;

-- Key identity.  In 1.0 a key was the text form of its values under the
-- writer's session settings, so a stale writer could spell its
-- key anew (DateStyle, TimeZone, bytea_output, extra_float_digits, 1.0 for
-- 1 in numeric, -0 for 0, a renamed enum value) and meet no fence.  From
-- 1.1 each key or table scope keeps its fences in a typed table of its own
-- (src/scope_storage.c), keyed by the key columns' values under their
-- types' default btree equality; this registry names it and its owner.
CREATE SEQUENCE @extschema@.scope_storage_seq;
COMMENT ON SEQUENCE @extschema@.scope_storage_seq IS
    'numbers of the scope storage tables fencing.scope_<n>';

CREATE TABLE @extschema@.scope_storage (
    scope_name text PRIMARY KEY
        CHECK (pg_catalog.octet_length(scope_name) OPERATOR(pg_catalog.>=) 1
               AND pg_catalog.octet_length(scope_name) OPERATOR(pg_catalog.<=) 255),
    owner regrole NOT NULL,
    storage regclass NOT NULL UNIQUE,
    table_scope boolean NOT NULL
);
COMMENT ON TABLE @extschema@.scope_storage IS
    'one row per key or table scope: the role that owns it (whose protect() created it) and the table that holds its fences';
COMMENT ON COLUMN @extschema@.scope_storage.owner IS
    'only this role, its members and superusers may protect tables into the scope';
COMMENT ON COLUMN @extschema@.scope_storage.storage IS
    'the fences: one row per key, key columns of the protected tables'' types and collations, unique NULLS NOT DISTINCT';
COMMENT ON COLUMN @extschema@.scope_storage.table_scope IS
    'true for a table scope (one fence for the whole table)';

-- pg_dump keeps the registry; the storage tables are ordinary tables of
-- schema fencing (not extension members), dumped with their rows
SELECT pg_catalog.pg_extension_config_dump('@extschema@.scope_storage', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.scope_storage_seq', '');
REVOKE ALL ON @extschema@.scope_storage, @extschema@.scope_storage_seq FROM PUBLIC;
GRANT SELECT ON @extschema@.scope_storage TO PUBLIC;

CREATE FUNCTION @extschema@.scope_create(scope_name text, owner regrole,
                                         key_types regtype[], key_collations oid[],
                                         key_names name[] DEFAULT NULL)
    RETURNS regclass
    AS 'MODULE_PATHNAME', 'fencing_scope_create' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.scope_create(text, regrole, regtype[], oid[], name[]) IS
    'internal: create and register the storage table of a new scope (protect() does this itself)';

CREATE FUNCTION @extschema@.invalidate_guards() RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_invalidate_guards' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.invalidate_guards() IS
    'internal: make every session read its guard settings again once this transaction commits';

REVOKE ALL ON FUNCTION @extschema@.scope_create(text, regrole, regtype[], oid[], name[]),
    @extschema@.invalidate_guards() FROM PUBLIC;

-- Convert the text keys of 1.0's fencing.scopes into typed storage.  A
-- scope used by protected tables takes their key columns' types (they
-- must agree) and their owner; a scope no protected table uses any more
-- keeps text keys and goes to the extension's owner, who may hand it on
-- (reset_scope) or keep it.
--
-- The keys are read exactly: each key's text is read as values of the
-- key types under this session's settings and converted only when those
-- values print back to the very text that 1.0 stored (which its writer's
-- output functions printed).  Any other key (written under another
-- DateStyle, say) stops the update with the list of such keys, and the
-- update is run again with the writers' settings: no key is converted to
-- another value, nothing by guesswork.  Keys that are one value of the
-- key types (numeric 1.0 and 1, 'ACCT-1' and 'acct-1' under a
-- case-insensitive collation) become one key, with the highest fence.
--
-- Reading a key may run code of a role: the CHECK constraints of domains
-- in the key types (a composite's attributes, array elements, a range's
-- subtype).  The update runs it only as the owner of the scope's tables,
-- in a security-restricted operation whose every effect is rolled back
-- (src/scopes_1_0.c), never with the rights of the role running the
-- update.  A scope shared by tables of several owners has no owner to run
-- it as: when reading its keys would run such code, the update stops and
-- says how to give each owner's tables a scope of their own.
--
-- Data of other roles (a scope name, key types, keys) can stop the update
-- only with an error that names the scope, its tables' owners and a
-- command that lets the update go on: one that renames or copies a scope,
-- and lowers no fence.  Such commands run in the transaction of the update,
-- after locking the tables whose scope they change (so that their writers
-- wait before their statements' snapshots, and then read the new scope
-- names) and the two tables that the update locks, so that no writer
-- writes the old names in between.
--
-- Writers keep writing meanwhile, through the 1.0 text keys; the locks
-- hold them (and any protect() of a 1.0 library) at the door until the
-- update commits, so that no fence is read here and advanced there: they
-- then write through the typed storage, or fail once and retry.
LOCK TABLE @extschema@.protected, @extschema@.scopes IN EXCLUSIVE MODE;

-- Helpers of the conversion, dropped again below: it reads the keys of
-- one scope into its storage (src/scopes_1_0.c); it looks at the key
-- types; and it finds a scope name that no 1.0 scope uses.
CREATE FUNCTION @extschema@.convert_scope_1_0(scope_name text, read_as regrole,
                                              OUT fences bigint, OUT unread bigint,
                                              OUT unread_keys text[])
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencing_convert_scope_1_0' LANGUAGE C VOLATILE PARALLEL UNSAFE;
CREATE FUNCTION @extschema@.key_types_1_0(types regtype[],
                                          OUT unkeyable regtype, OUT runs_code text)
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencing_key_types_1_0' LANGUAGE C STABLE PARALLEL UNSAFE;
CREATE FUNCTION @extschema@.free_scope_name_1_0(base text) RETURNS text
    LANGUAGE sql STABLE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT n.name
      FROM (SELECT CASE WHEN pg_catalog.octet_length(base) OPERATOR(pg_catalog.<=) 240 THEN base
                        ELSE 'scope ' OPERATOR(pg_catalog.||) pg_catalog.md5(base) END) AS b(name),
           LATERAL pg_catalog.generate_series(1, 1000) AS i,
           LATERAL (SELECT CASE WHEN i OPERATOR(pg_catalog.=) 1 THEN b.name
                                ELSE b.name OPERATOR(pg_catalog.||) ' ' OPERATOR(pg_catalog.||) i END) AS n(name)
     WHERE NOT EXISTS (SELECT FROM @extschema@.scopes s WHERE s.scope_name OPERATOR(pg_catalog.=) n.name)
       AND NOT EXISTS (SELECT FROM @extschema@.protected p WHERE p.scope_name OPERATOR(pg_catalog.=) n.name)
     ORDER BY i
     LIMIT 1
$$;
REVOKE ALL ON FUNCTION @extschema@.convert_scope_1_0(text, regrole),
    @extschema@.key_types_1_0(regtype[]),
    @extschema@.free_scope_name_1_0(text) FROM PUBLIC;

DO $convert$
DECLARE
    sc record;
    t record;
    r record;
    types regtype[];
    colls oid[];
    t_types regtype[];
    t_colls oid[];
    t_kind text;
    t_found integer;
    names name[];
    owners oid[];
    rels regclass[];
    rel_owners oid[];
    rel_kinds text[];
    table_lines text[];
    tables text;
    owner_desc text;
    shown_name text;
    mismatch boolean;
    fix text;
    read_as oid;
    scope_owner oid;
    ext_owner oid := (SELECT c.relowner FROM pg_catalog.pg_class c
                       WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.protected'::pg_catalog.regclass);
    storage regclass;
    arity_min integer;
    arity_max integer;
    unread_total bigint := 0;
    unread_lines text[] := '{}';
    -- the command that lets the update go on: it locks the tables whose
    -- scope it changes (their writers wait before they read fencing.protected
    -- and so read its new row afterwards), then the tables the update locks
    moved text;
    fix_begin text;
    fix_end constant text := 'ALTER EXTENSION fencing UPDATE; COMMIT;';
BEGIN
    FOR sc IN SELECT s.scope_name FROM @extschema@.scopes s
              UNION
              SELECT p.scope_name FROM @extschema@.protected p
               WHERE p.key_columns IS NOT NULL
              ORDER BY 1
    LOOP
        -- the name as messages show it (a name too long to convert, shortened)
        shown_name := CASE WHEN pg_catalog.octet_length(sc.scope_name) OPERATOR(pg_catalog.>) 255
                           THEN pg_catalog.left(sc.scope_name, 60) OPERATOR(pg_catalog.||) '...'
                           ELSE sc.scope_name END;
        types := NULL;
        colls := NULL;
        names := NULL;
        mismatch := false;
        owners := '{}';
        rels := '{}';
        rel_owners := '{}';
        rel_kinds := '{}';
        table_lines := '{}';
        FOR t IN SELECT p.relid, p.key_columns, c.relowner
                   FROM @extschema@.protected p
                   JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relid
                  WHERE p.scope_name OPERATOR(pg_catalog.=) sc.scope_name
                    AND p.key_columns IS NOT NULL
                  ORDER BY p.relid
        LOOP
            -- the key columns' base types (domains unwrapped) and collations
            SELECT COALESCE(pg_catalog.array_agg(b.base::pg_catalog.regtype ORDER BY k.ord), '{}'),
                   COALESCE(pg_catalog.array_agg(a.attcollation ORDER BY k.ord), '{}'),
                   COALESCE(pg_catalog.string_agg(
                       pg_catalog.format_type(b.base, NULL) OPERATOR(pg_catalog.||)
                       CASE WHEN a.attcollation OPERATOR(pg_catalog.=) b.typcollation THEN ''
                            ELSE ' COLLATE ' OPERATOR(pg_catalog.||) a.attcollation::pg_catalog.regcollation::pg_catalog.text
                       END, ', ' ORDER BY k.ord), ''),
                   pg_catalog.count(a.attnum)
              INTO t_types, t_colls, t_kind, t_found
              FROM pg_catalog.unnest(t.key_columns) WITH ORDINALITY AS k(name, ord)
              JOIN pg_catalog.pg_attribute a
                ON a.attrelid OPERATOR(pg_catalog.=) t.relid
               AND a.attname OPERATOR(pg_catalog.=) k.name
               AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
             CROSS JOIN LATERAL (
                   WITH RECURSIVE d(oid, basetype) AS (
                        SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                         WHERE ty.oid OPERATOR(pg_catalog.=) a.atttypid
                        UNION ALL
                        SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                          JOIN d ON ty.oid OPERATOR(pg_catalog.=) d.basetype)
                   SELECT d.oid AS base, ty.typcollation FROM d
                     JOIN pg_catalog.pg_type ty ON ty.oid OPERATOR(pg_catalog.=) d.oid
                    WHERE d.basetype OPERATOR(pg_catalog.=) 0) b;
            IF t_found OPERATOR(pg_catalog.<>) pg_catalog.cardinality(t.key_columns) THEN
                RAISE EXCEPTION 'cannot convert fencing scope "%": table % has lost a key column',
                                shown_name, t.relid
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          DETAIL = pg_catalog.format('Table %s of role %s is protected in the scope with key columns %s, and does not have them all.',
                                                     t.relid, t.relowner::pg_catalog.regrole, t.key_columns),
                          HINT = pg_catalog.format('Give the table its key columns back (as its owner), or unprotect it before the update (as its owner or the extension''s owner: SELECT fencing.unprotect(%L);), which keeps the scope''s fences; then update again.',
                                                   t.relid::pg_catalog.text);
            END IF;
            rels := rels OPERATOR(pg_catalog.||) t.relid;
            rel_owners := rel_owners OPERATOR(pg_catalog.||) t.relowner;
            rel_kinds := rel_kinds OPERATOR(pg_catalog.||) t_kind;
            table_lines := table_lines OPERATOR(pg_catalog.||)
                           pg_catalog.format('%s of role %s, keys (%s)', t.relid,
                                             t.relowner::pg_catalog.regrole, t_kind);
            IF types IS NULL THEN
                types := t_types;
                colls := t_colls;
                names := t.key_columns;
            ELSIF types OPERATOR(pg_catalog.<>) t_types OR colls OPERATOR(pg_catalog.<>) t_colls THEN
                mismatch := true;
            END IF;
            IF NOT t.relowner OPERATOR(pg_catalog.=) ANY (owners) THEN
                owners := owners OPERATOR(pg_catalog.||) t.relowner;
            END IF;
        END LOOP;
        tables := pg_catalog.array_to_string(table_lines[1:20], '; ')
                  OPERATOR(pg_catalog.||)
                  CASE WHEN pg_catalog.cardinality(table_lines) OPERATOR(pg_catalog.>) 20
                       THEN pg_catalog.format(' and %s more', pg_catalog.cardinality(table_lines) OPERATOR(pg_catalog.-) 20)
                       ELSE '' END;
        owner_desc := CASE pg_catalog.cardinality(owners)
                          WHEN 0 THEN 'no table'
                          WHEN 1 THEN pg_catalog.format('role %s', owners[1]::pg_catalog.regrole)
                          ELSE pg_catalog.format('roles %s', (SELECT pg_catalog.string_agg(o::pg_catalog.regrole::pg_catalog.text, ', ')
                                                               FROM pg_catalog.unnest(owners) AS o))
                      END;

        -- a scope name has 1 to 255 bytes: rename the others
        IF pg_catalog.octet_length(sc.scope_name) NOT BETWEEN 1 AND 255 THEN
            SELECT pg_catalog.string_agg(p.relid::pg_catalog.text, ', ' ORDER BY p.relid)
              INTO moved
              FROM @extschema@.protected p
             WHERE pg_catalog.octet_length(p.scope_name) NOT BETWEEN 1 AND 255
               AND p.key_columns IS NOT NULL;
            fix_begin := 'BEGIN; ' OPERATOR(pg_catalog.||)
                         COALESCE(pg_catalog.format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE; ', moved), '')
                         OPERATOR(pg_catalog.||) 'LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; ';
            RAISE EXCEPTION 'cannot convert fencing scope "%": its name has % bytes',
                            shown_name, pg_catalog.octet_length(sc.scope_name)
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = pg_catalog.format('A scope name has 1 to 255 bytes from fencing 1.1 on. %s.',
                                                 CASE WHEN tables OPERATOR(pg_catalog.=) ''
                                                      THEN 'No protected table uses the scope'
                                                      ELSE 'Protected in the scope: ' OPERATOR(pg_catalog.||) tables END),
                      HINT = 'As the extension''s owner, rename such scopes in the transaction of the update, which lowers no fence: '
                             OPERATOR(pg_catalog.||) fix_begin OPERATOR(pg_catalog.||)
                             'UPDATE fencing.protected SET scope_name = ''scope '' || md5(scope_name) WHERE octet_length(scope_name) NOT BETWEEN 1 AND 255; '
                             'UPDATE fencing.scopes SET scope_name = ''scope '' || md5(scope_name) WHERE octet_length(scope_name) NOT BETWEEN 1 AND 255; '
                             OPERATOR(pg_catalog.||) fix_end;
        END IF;

        -- one scope, one set of key types: the tables of other types get a
        -- copy of the scope under a name of their own
        IF mismatch THEN
            SELECT pg_catalog.string_agg(u.rel::pg_catalog.text, ', ' ORDER BY u.ord)
              INTO moved
              FROM ROWS FROM (pg_catalog.unnest(rels), pg_catalog.unnest(rel_kinds))
                   WITH ORDINALITY AS u(rel, kind, ord)
             WHERE u.kind OPERATOR(pg_catalog.<>) rel_kinds[1];
            fix_begin := pg_catalog.format('BEGIN; LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE; ', moved)
                         OPERATOR(pg_catalog.||) 'LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; ';
            SELECT pg_catalog.string_agg(pg_catalog.format(
                       'INSERT INTO fencing.scopes (scope_name, key, fence) SELECT %1$L, key, fence FROM fencing.scopes WHERE scope_name = %2$L; '
                       'UPDATE fencing.protected SET scope_name = %1$L WHERE relid IN (%3$s); ',
                       @extschema@.free_scope_name_1_0(sc.scope_name OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||) g.kind OPERATOR(pg_catalog.||) ')'),
                       sc.scope_name, g.rels), '' ORDER BY g.first)
              INTO fix
              FROM (SELECT u.kind, pg_catalog.min(u.ord) AS first,
                           pg_catalog.string_agg(pg_catalog.quote_literal(u.rel::pg_catalog.text) OPERATOR(pg_catalog.||) '::regclass',
                                                 ', ' ORDER BY u.ord) AS rels
                      FROM ROWS FROM (pg_catalog.unnest(rels), pg_catalog.unnest(rel_kinds))
                           WITH ORDINALITY AS u(rel, kind, ord)
                     GROUP BY u.kind) g
             WHERE g.kind OPERATOR(pg_catalog.<>) rel_kinds[1];
            RAISE EXCEPTION 'cannot convert fencing scope "%": its tables have key columns of different types',
                            shown_name
                USING ERRCODE = 'datatype_mismatch',
                      DETAIL = pg_catalog.format('From fencing 1.1 on a scope keeps its fences in a table of its key types and collations, which all its tables share. Protected in the scope: %s.',
                                                 tables),
                      HINT = 'As the extension''s owner, give the tables of the other key types scopes of their own with a copy of this scope''s fences, in the transaction of the update, which lowers no fence: '
                             OPERATOR(pg_catalog.||) fix_begin OPERATOR(pg_catalog.||) fix OPERATOR(pg_catalog.||) fix_end
                             OPERATOR(pg_catalog.||) ' Keys of a copy that do not read as its types are then listed, for you to delete from the copy.';
        END IF;

        IF types IS NULL THEN
            -- no protected table uses the scope any more: text keys
            SELECT pg_catalog.min(pg_catalog.json_array_length(s.key::pg_catalog.json)),
                   pg_catalog.max(pg_catalog.json_array_length(s.key::pg_catalog.json))
              INTO arity_min, arity_max
              FROM @extschema@.scopes s
             WHERE s.scope_name OPERATOR(pg_catalog.=) sc.scope_name;
            IF arity_min OPERATOR(pg_catalog.<>) arity_max THEN
                fix_begin := 'BEGIN; LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; ';
                RAISE EXCEPTION 'cannot convert fencing scope "%": its keys have between % and % values',
                                shown_name, arity_min, arity_max
                    USING ERRCODE = 'datatype_mismatch',
                          DETAIL = 'No protected table uses the scope: it becomes a scope of text keys of the extension''s owner, whose keys all have one number of values.',
                          HINT = pg_catalog.format('As the extension''s owner, move the keys of %s values to a scope of their own, in the transaction of the update, which lowers no fence: %sUPDATE fencing.scopes SET scope_name = %L WHERE scope_name = %L AND json_array_length(key::json) = %s; %s',
                                                   arity_max, fix_begin,
                                                   @extschema@.free_scope_name_1_0(pg_catalog.format('%s (%s values)', sc.scope_name, arity_max)),
                                                   sc.scope_name, arity_max, fix_end);
            END IF;
            SELECT COALESCE(pg_catalog.array_agg('pg_catalog.text'::pg_catalog.regtype), '{}'),
                   COALESCE(pg_catalog.array_agg(100::pg_catalog.oid), '{}')
              INTO types, colls
              FROM pg_catalog.generate_series(1, arity_min);
            -- text keys: reading them runs no role's code
            scope_owner := ext_owner;
            read_as := ext_owner;
            owner_desc := 'no table, the extension''s owner';
        ELSE
            SELECT * INTO r FROM @extschema@.key_types_1_0(types);
            IF r.unkeyable IS NOT NULL THEN
                RAISE EXCEPTION 'cannot convert fencing scope "%": type % cannot key a scope',
                                shown_name, r.unkeyable
                    USING ERRCODE = 'feature_not_supported',
                          DETAIL = pg_catalog.format('From fencing 1.1 on, keys are the same when their values are equal under the default btree operator class of their types, and %s has none. Protected in the scope: %s.',
                                                     r.unkeyable, tables),
                          HINT = pg_catalog.format('Unprotect those tables before the update (as their owners, or as the extension''s owner: %s); the scope''s fences stay, as text keys. Protect them again afterwards with key columns of another type.',
                                                   (SELECT pg_catalog.string_agg(pg_catalog.format('SELECT fencing.unprotect(%L);', x::pg_catalog.text), ' ')
                                                      FROM pg_catalog.unnest(rels) AS x));
            END IF;
            IF pg_catalog.cardinality(owners) OPERATOR(pg_catalog.=) 1 THEN
                scope_owner := owners[1];
                read_as := owners[1];
            ELSIF r.runs_code IS NOT NULL THEN
                -- each owner's tables get a copy of the scope, but the first's
                SELECT pg_catalog.string_agg(u.rel::pg_catalog.text, ', ' ORDER BY u.ord)
                  INTO moved
                  FROM ROWS FROM (pg_catalog.unnest(rels), pg_catalog.unnest(rel_owners))
                       WITH ORDINALITY AS u(rel, owner, ord)
                 WHERE u.owner OPERATOR(pg_catalog.<>) rel_owners[1];
                fix_begin := pg_catalog.format('BEGIN; LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE; ', moved)
                             OPERATOR(pg_catalog.||) 'LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; ';
                SELECT pg_catalog.string_agg(pg_catalog.format(
                           'INSERT INTO fencing.scopes (scope_name, key, fence) SELECT %1$L, key, fence FROM fencing.scopes WHERE scope_name = %2$L; '
                           'UPDATE fencing.protected SET scope_name = %1$L WHERE relid IN (%3$s); ',
                           @extschema@.free_scope_name_1_0(sc.scope_name OPERATOR(pg_catalog.||) ' (' OPERATOR(pg_catalog.||)
                                                           g.owner::pg_catalog.regrole::pg_catalog.text OPERATOR(pg_catalog.||) ')'),
                           sc.scope_name, g.rels), '' ORDER BY g.first)
                  INTO fix
                  FROM (SELECT u.owner, pg_catalog.min(u.ord) AS first,
                               pg_catalog.string_agg(pg_catalog.quote_literal(u.rel::pg_catalog.text) OPERATOR(pg_catalog.||) '::regclass',
                                                     ', ' ORDER BY u.ord) AS rels
                          FROM ROWS FROM (pg_catalog.unnest(rels), pg_catalog.unnest(rel_owners))
                               WITH ORDINALITY AS u(rel, owner, ord)
                         GROUP BY u.owner) g
                 WHERE g.owner OPERATOR(pg_catalog.<>) rel_owners[1];
                RAISE EXCEPTION 'cannot convert fencing scope "%": reading its keys runs code of a role, and its tables have several owners',
                                shown_name
                    USING ERRCODE = 'object_not_in_prerequisite_state',
                          DETAIL = pg_catalog.format('Reading the keys as values of their types checks the constraints of %s. The update runs such code only as the owner of the keys, which this scope does not have: protected in it are %s.',
                                                     r.runs_code, tables),
                          HINT = 'As the extension''s owner, give the tables of each other owner a scope of their own with a copy of this scope''s fences, in the transaction of the update, which lowers no fence: '
                                 OPERATOR(pg_catalog.||) fix_begin OPERATOR(pg_catalog.||) fix OPERATOR(pg_catalog.||) fix_end;
            ELSE
                -- tables of several owners: the extension's owner decides;
                -- reading the keys runs no role's code
                scope_owner := ext_owner;
                read_as := ext_owner;
            END IF;
        END IF;

        storage := @extschema@.scope_create(sc.scope_name, scope_owner::pg_catalog.regrole,
                                            types, colls, names);
        SELECT * INTO r FROM @extschema@.convert_scope_1_0(sc.scope_name, read_as::pg_catalog.regrole);
        IF r.unread OPERATOR(pg_catalog.>) 0 THEN
            unread_total := unread_total OPERATOR(pg_catalog.+) r.unread;
            unread_lines := unread_lines OPERATOR(pg_catalog.||)
                ARRAY(SELECT pg_catalog.format('scope "%s" (%s): key %s', shown_name, owner_desc, k)
                        FROM pg_catalog.unnest(r.unread_keys) AS k)
                OPERATOR(pg_catalog.||)
                CASE WHEN r.unread OPERATOR(pg_catalog.>) pg_catalog.cardinality(r.unread_keys)
                     THEN ARRAY[pg_catalog.format('scope "%s": %s more keys', shown_name,
                                                  r.unread OPERATOR(pg_catalog.-) pg_catalog.cardinality(r.unread_keys))]
                     ELSE '{}'::text[] END;
        END IF;
    END LOOP;

    IF unread_total OPERATOR(pg_catalog.>) 0 THEN
        RAISE EXCEPTION 'cannot convert % keys of fencing.scopes exactly', unread_total
            USING ERRCODE = 'invalid_text_representation',
                  DETAIL = pg_catalog.format(E'The update converts a key only when its values print back to the text that fencing 1.0 stored, under this session''s settings (DateStyle %s, IntervalStyle %s, TimeZone %s, extra_float_digits %s, bytea_output %s, lc_monetary %s); no key is converted to another value. These keys do not:\n%s%s',
                                             pg_catalog.current_setting('DateStyle'),
                                             pg_catalog.current_setting('IntervalStyle'),
                                             pg_catalog.current_setting('TimeZone'),
                                             pg_catalog.current_setting('extra_float_digits'),
                                             pg_catalog.current_setting('bytea_output'),
                                             pg_catalog.current_setting('lc_monetary'),
                                             pg_catalog.array_to_string(unread_lines[1:30], E'\n'),
                                             CASE WHEN pg_catalog.cardinality(unread_lines) OPERATOR(pg_catalog.>) 30
                                                  THEN E'\n(and more)' ELSE '' END),
                  HINT = 'Keys that read as other values were written under other settings: set them as the keys'' writers had them in this session and update again, for example SET DateStyle = ''SQL, DMY''; ALTER EXTENSION fencing UPDATE. Keys that a constraint of their type refuses need the type corrected by its owner. Or, as the extension''s owner, in the transaction of the update and after LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE, correct those rows of fencing.scopes to the text this session prints, or delete those that cannot be keys of the scope''s tables (a deleted fence no longer stops stale writers of its key).';
    END IF;
END
$convert$;

DROP FUNCTION @extschema@.convert_scope_1_0(text, regrole);
DROP FUNCTION @extschema@.key_types_1_0(regtype[]);
DROP FUNCTION @extschema@.free_scope_name_1_0(text);

-- Sessions read their guard settings again at commit: from then on the
-- guard uses the typed storage.
SELECT @extschema@.invalidate_guards();
-- out of the extension first, which also takes it off pg_dump's list of
-- configuration tables (a dropped member would leave its OID there)
ALTER EXTENSION fencing DROP TABLE @extschema@.scopes;
DROP TABLE @extschema@.scopes;

-- fencing.scopes is now a view over every scope's storage, for people:
-- key spells the values as text, as the session's settings print them.
CREATE FUNCTION @extschema@.scope_fences(OUT scope_name text, OUT key text,
                                         OUT fence @extschema@.fence)
    RETURNS SETOF record
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    keyexpr text;
BEGIN
    FOR r IN SELECT s.scope_name, s.storage, s.table_scope
               FROM @extschema@.scope_storage s ORDER BY s.scope_name
    LOOP
        IF r.table_scope THEN
            keyexpr := '''[]''';
        ELSE
            SELECT '''['' || ' OPERATOR(pg_catalog.||)
                   pg_catalog.string_agg(pg_catalog.format(
                       'CASE WHEN %1$I IS NULL THEN ''null'' '
                       'ELSE pg_catalog.to_json(pg_catalog.format(''%%s'', %1$I))::pg_catalog.text END',
                       a.attname), ' || '','' || ' ORDER BY a.attnum)
                   OPERATOR(pg_catalog.||) ' || '']'''
              INTO keyexpr
              FROM pg_catalog.pg_attribute a
             WHERE a.attrelid OPERATOR(pg_catalog.=) r.storage
               AND a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped
               AND a.attname OPERATOR(pg_catalog.<>) 'fence';
        END IF;
        RETURN QUERY EXECUTE pg_catalog.format('SELECT %L::pg_catalog.text, %s, fence FROM %s',
                                               r.scope_name, keyexpr, r.storage);
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.scope_fences() IS
    'every key''s fence of every key or table scope (read it through the view fencing.scopes)';

CREATE VIEW @extschema@.scopes AS
    SELECT f.scope_name, f.key, f.fence FROM @extschema@.scope_fences() AS f;
COMMENT ON VIEW @extschema@.scopes IS
    'the highest accepted token of each key of each key or table scope; key shows the key values as text, for people (the fences are kept in the tables of fencing.scope_storage)';
COMMENT ON COLUMN @extschema@.scopes.key IS
    'the key values as a JSON array of their text forms ([] for table scope): for reading, not an identity (fencing.scope_key() spells it)';
GRANT SELECT ON @extschema@.scopes TO PUBLIC;

CREATE FUNCTION @extschema@.reset_scope(scope_name text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r @extschema@.scope_storage;
    users text;
    n bigint;
BEGIN
    IF reset_scope.scope_name IS NULL THEN
        RAISE EXCEPTION 'scope_name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO r FROM @extschema@.scope_storage s
     WHERE s.scope_name OPERATOR(pg_catalog.=) reset_scope.scope_name
       FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencing scope "%" does not exist', reset_scope.scope_name
            USING ERRCODE = 'undefined_object';
    END IF;
    SELECT pg_catalog.string_agg(p.relid::pg_catalog.text, ', ' ORDER BY p.relid::pg_catalog.text)
      INTO users
      FROM @extschema@.protected p
     WHERE p.scope_name OPERATOR(pg_catalog.=) reset_scope.scope_name
       AND p.key_columns IS NOT NULL;
    IF users IS NOT NULL THEN
        RAISE EXCEPTION 'fencing scope "%" is in use', reset_scope.scope_name
            USING ERRCODE = 'object_in_use',
                  DETAIL = pg_catalog.format('Protected in this scope: %s.', users),
                  HINT = 'Call fencing.unprotect() on those tables first.';
    END IF;
    EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s', r.storage) INTO n;
    EXECUTE pg_catalog.format('DROP TABLE %s', r.storage);
    DELETE FROM @extschema@.scope_storage s
     WHERE s.scope_name OPERATOR(pg_catalog.=) reset_scope.scope_name;
    RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.reset_scope(text) IS
    'forget a scope no protected table uses: drop its fences and its owner, so that any role may protect into the name again; returns the number of fences dropped';
REVOKE ALL ON FUNCTION @extschema@.reset_scope(text) FROM PUBLIC;

-- (end of scope storage section)

------------------------------------------------------------------------------
-- The DDL guard and the guard's health
------------------------------------------------------------------------------

-- Every backend caches which relations are protected, and through which
-- table (src/protection.c); protect(), unprotect() and the DDL guard tell
-- the other backends when that changes.  This statement trigger does it
-- for any other writer of fencing.protected (pg_restore, the extension
-- owner by hand).
CREATE FUNCTION @extschema@.protected_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_protected_changed' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.protected_changed() IS
    'internal: statement trigger of fencing.protected; invalidates every backend''s cache of protections';
REVOKE ALL ON FUNCTION @extschema@.protected_changed() FROM PUBLIC;
CREATE TRIGGER protected_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.protected
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.protected_changed();
ALTER TABLE @extschema@.protected ENABLE ALWAYS TRIGGER protected_changed;

-- ddl_command_end now checks again, under the command's own locks, what
-- ddl_command_start only looked at without locking (nothing is locked for
-- unprotected tables): it fires for the trigger commands and ALTER
-- FOREIGN TABLE too.
DROP EVENT TRIGGER fencing_ddl_guard_end;
CREATE EVENT TRIGGER fencing_ddl_guard_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'CREATE FOREIGN TABLE', 'ALTER TABLE',
                 'ALTER FOREIGN TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION @extschema@.ddl_guard_end();
ALTER EVENT TRIGGER fencing_ddl_guard_end ENABLE ALWAYS;
COMMENT ON FUNCTION @extschema@.ddl_guard_end() IS
    'event trigger: checks DDL on protected tables again under the command''s locks; guards partitions and inheritance children created, attached or inherited under a protected table (seeding the scopes from their rows); a detached partition or disinherited child stays protected';

-- The on-call view, redefined with the same columns: a guard is intact
-- only when every member of the tree (partitions and inheritance
-- children) has both guard triggers, exactly as protect() installs them
-- (function, timing, events, no WHEN, no column list, ENABLE ALWAYS);
-- fencing.guard() and fencing.guard_truncate() are still the extension's
-- C functions; no BEFORE ROW trigger fires after the guard; the fence
-- column has no default and is not generated, no key column is generated;
-- and the three event triggers are in place, ENABLE ALWAYS, calling the
-- extension's C functions for the events and commands they were made for.
--
-- The members of every protected tree come from a function, not a
-- recursive CTE of the view: the planner's guess for a recursive CTE over
-- a never-analyzed table (thousands of rows) made the view cost enough to
-- be JIT-compiled, seconds for a handful of rows.
CREATE FUNCTION @extschema@.protected_members(OUT relid pg_catalog.oid,
                                              OUT member pg_catalog.oid)
    RETURNS SETOF record
    LANGUAGE sql STABLE PARALLEL SAFE ROWS 10
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE tree (relid, member) AS (
        SELECT p.relid::pg_catalog.oid, p.relid::pg_catalog.oid
          FROM @extschema@.protected p
        UNION
        SELECT t.relid, i.inhrelid
          FROM tree t
          JOIN pg_catalog.pg_inherits i ON i.inhparent OPERATOR(pg_catalog.=) t.member
    )
    SELECT relid, member FROM tree
$$;
COMMENT ON FUNCTION @extschema@.protected_members() IS
    'every protected table with itself and its partitions and inheritance children at any level (for fencing.protected_tables)';

CREATE OR REPLACE VIEW @extschema@.protected_tables AS
WITH tree (relid, member) AS MATERIALIZED (
    -- the protected table, its partitions and inheritance children, any level
    SELECT m.relid, m.member FROM @extschema@.protected_members() m
),
prot AS MATERIALIZED (
    SELECT p.relid::pg_catalog.oid AS relid, p.fence_column, p.key_columns
      FROM @extschema@.protected_members() m
      JOIN @extschema@.protected p ON p.relid::pg_catalog.oid OPERATOR(pg_catalog.=) m.relid
     WHERE m.member OPERATOR(pg_catalog.=) m.relid
),
funcs (name, symbol) AS (
    VALUES ('guard'::pg_catalog.text, 'fencing_guard'::pg_catalog.text),
           ('guard_truncate', 'fencing_guard_truncate'),
           ('ddl_guard_start', 'fencing_ddl_guard_start'),
           ('ddl_guard_end', 'fencing_ddl_guard_end'),
           ('ddl_guard_drop', 'fencing_ddl_guard_drop')
),
fn AS (
    -- each function by name, and whether it is still the extension's C function
    SELECT f.name, f.symbol, pr.oid,
           pr.oid IS NOT NULL
           AND pr.prolang OPERATOR(pg_catalog.=)
               (SELECT l.oid FROM pg_catalog.pg_language l WHERE l.lanname OPERATOR(pg_catalog.=) 'c')
           AND pr.probin OPERATOR(pg_catalog.=) 'MODULE_PATHNAME'
           AND pr.prosrc OPERATOR(pg_catalog.=) f.symbol
           AND EXISTS (SELECT FROM pg_catalog.pg_depend d
                        WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
                          AND d.objid OPERATOR(pg_catalog.=) pr.oid
                          AND d.deptype OPERATOR(pg_catalog.=) 'e'
                          AND d.refobjid OPERATOR(pg_catalog.=)
                              (SELECT x.oid FROM pg_catalog.pg_extension x
                                WHERE x.extname OPERATOR(pg_catalog.=) 'fencing')) AS ours
      FROM funcs f
      LEFT JOIN pg_catalog.pg_proc pr
             ON pr.proname OPERATOR(pg_catalog.=) f.name
            AND pr.pronamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
            AND pr.pronargs OPERATOR(pg_catalog.=) 0
),
expected (tgname, fname, tgtype) AS (
    -- tgtype: ROW | BEFORE | INSERT | DELETE | UPDATE, and BEFORE | TRUNCATE
    VALUES ('zz_fencing_guard'::pg_catalog.name, 'guard'::pg_catalog.text, 31::pg_catalog.int2),
           ('zz_fencing_truncate', 'guard_truncate', 34::pg_catalog.int2)
),
problems AS (
    -- the guard triggers of every member
    SELECT tr.relid,
           pg_catalog.format(
               CASE WHEN g.oid IS NULL AND r.tgname IS NOT NULL
                        THEN 'trigger %1$s is missing on %2$s (renamed to %4$s?)'
                    WHEN g.oid IS NULL THEN 'trigger %1$s is missing on %2$s'
                    WHEN g.tgfoid OPERATOR(pg_catalog.<>) f.oid OR f.oid IS NULL
                        THEN 'trigger %1$s on %2$s calls another function'
                    WHEN g.tgtype OPERATOR(pg_catalog.<>) e.tgtype
                         OR g.tgqual IS NOT NULL
                         OR pg_catalog.cardinality(g.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.<>) 0
                        THEN 'trigger %1$s on %2$s does not fire for every write (timing, events, WHEN or column list changed)'
                    ELSE 'trigger %1$s on %2$s is not ENABLE ALWAYS (tgenabled = %3$s)'
               END, e.tgname, tr.member::pg_catalog.regclass, g.tgenabled, r.tgname) AS problem
      FROM tree tr
      CROSS JOIN expected e
      JOIN fn f ON f.name OPERATOR(pg_catalog.=) e.fname
      LEFT JOIN pg_catalog.pg_trigger g
             ON g.tgrelid OPERATOR(pg_catalog.=) tr.member
            AND g.tgname OPERATOR(pg_catalog.=) e.tgname
      LEFT JOIN LATERAL (
            SELECT o.tgname FROM pg_catalog.pg_trigger o
             WHERE o.tgrelid OPERATOR(pg_catalog.=) tr.member
               AND o.tgfoid OPERATOR(pg_catalog.=) f.oid
               AND o.tgname OPERATOR(pg_catalog.<>) e.tgname
             ORDER BY o.tgname LIMIT 1) r ON g.oid IS NULL
     WHERE g.oid IS NULL
        OR f.oid IS NULL
        OR g.tgfoid OPERATOR(pg_catalog.<>) f.oid
        OR g.tgtype OPERATOR(pg_catalog.<>) e.tgtype
        OR g.tgqual IS NOT NULL
        OR pg_catalog.cardinality(g.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.<>) 0
        OR g.tgenabled OPERATOR(pg_catalog.<>) 'A'
    UNION ALL
    -- BEFORE ROW triggers that fire after the guard (byte order of names)
    SELECT tr.relid,
           pg_catalog.format('trigger %s on %s fires after the guard (BEFORE ROW triggers fire in name order)',
                             o.tgname, tr.member::pg_catalog.regclass)
      FROM tree tr
      JOIN pg_catalog.pg_trigger o ON o.tgrelid OPERATOR(pg_catalog.=) tr.member
     WHERE (o.tgtype::pg_catalog.int4 OPERATOR(pg_catalog.&) 3) OPERATOR(pg_catalog.=) 3
       AND o.tgname::pg_catalog.text COLLATE "C" OPERATOR(pg_catalog.>) 'zz_fencing_guard'
       AND o.tgname OPERATOR(pg_catalog.<>) 'zz_fencing_truncate'
       -- a guard itself may come later (Citus names a shard's guard_<shard>)
       AND o.tgfoid OPERATOR(pg_catalog.<>) ALL (SELECT f.oid FROM fn f
                                                  WHERE f.name OPERATOR(pg_catalog.=) 'guard'
                                                    AND f.ours)
    UNION ALL
    -- the guard functions themselves
    SELECT p.relid,
           pg_catalog.format('function @extschema@.%s() is not the extension''s C function %s',
                             f.name, f.symbol)
      FROM prot p
      CROSS JOIN fn f
     WHERE NOT f.ours
    UNION ALL
    -- the fence column of every member
    SELECT tr.relid,
           CASE WHEN a.attnum IS NULL
                THEN pg_catalog.format('fence column %I is missing on %s', p.fence_column,
                                       tr.member::pg_catalog.regclass)
                WHEN a.atttypid OPERATOR(pg_catalog.<>) '@extschema@.fence'::pg_catalog.regtype
                THEN pg_catalog.format('fence column %I on %s is of type %s, not @extschema@.fence',
                                       p.fence_column, tr.member::pg_catalog.regclass,
                                       a.atttypid::pg_catalog.regtype)
                WHEN a.attgenerated OPERATOR(pg_catalog.<>) ''
                THEN pg_catalog.format('fence column %I on %s is a generated column',
                                       p.fence_column, tr.member::pg_catalog.regclass)
                ELSE pg_catalog.format('fence column %I on %s has a default',
                                       p.fence_column, tr.member::pg_catalog.regclass)
           END
      FROM tree tr
      JOIN prot p ON p.relid OPERATOR(pg_catalog.=) tr.relid
      LEFT JOIN pg_catalog.pg_attribute a
             ON a.attrelid OPERATOR(pg_catalog.=) tr.member
            AND a.attname OPERATOR(pg_catalog.=) p.fence_column
            AND a.attnum OPERATOR(pg_catalog.>) 0
            AND NOT a.attisdropped
     WHERE a.attnum IS NULL
        OR a.atttypid OPERATOR(pg_catalog.<>) '@extschema@.fence'::pg_catalog.regtype
        OR a.atthasdef
        OR a.attgenerated OPERATOR(pg_catalog.<>) ''
        OR a.attidentity OPERATOR(pg_catalog.<>) ''
    UNION ALL
    -- the key columns of every member
    SELECT tr.relid,
           CASE WHEN a.attnum IS NULL
                THEN pg_catalog.format('key column %I is missing on %s', k.name,
                                       tr.member::pg_catalog.regclass)
                ELSE pg_catalog.format('key column %I on %s is a generated column', k.name,
                                       tr.member::pg_catalog.regclass)
           END
      FROM tree tr
      JOIN prot p ON p.relid OPERATOR(pg_catalog.=) tr.relid
      CROSS JOIN LATERAL pg_catalog.unnest(p.key_columns) AS k(name)
      LEFT JOIN pg_catalog.pg_attribute a
             ON a.attrelid OPERATOR(pg_catalog.=) tr.member
            AND a.attname OPERATOR(pg_catalog.=) k.name
            AND a.attnum OPERATOR(pg_catalog.>) 0
            AND NOT a.attisdropped
     WHERE a.attnum IS NULL
        OR a.attgenerated OPERATOR(pg_catalog.<>) ''
    UNION ALL
    -- the table itself (gone only if the event triggers were bypassed)
    SELECT p.relid, 'table does not exist'
      FROM @extschema@.protected p
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                        WHERE c.oid OPERATOR(pg_catalog.=) p.relid)
    UNION ALL
    -- the event triggers that guard the guard
    SELECT p.relid,
           pg_catalog.format('event trigger %s is missing, disabled or changed', e.name)
      FROM prot p
      CROSS JOIN (VALUES ('fencing_ddl_guard_start'::pg_catalog.name, 'ddl_command_start'::pg_catalog.name,
                          'ddl_guard_start'::pg_catalog.text,
                          '{ALTER TABLE,ALTER FOREIGN TABLE,DROP TRIGGER,ALTER TRIGGER,CREATE TRIGGER}'::pg_catalog.text[]),
                         ('fencing_ddl_guard_end', 'ddl_command_end', 'ddl_guard_end',
                          '{CREATE TABLE,CREATE FOREIGN TABLE,ALTER TABLE,ALTER FOREIGN TABLE,CREATE TRIGGER,ALTER TRIGGER}'),
                         ('fencing_ddl_guard_drop', 'sql_drop', 'ddl_guard_drop', NULL)) e(name, event, fname, tags)
      JOIN fn f ON f.name OPERATOR(pg_catalog.=) e.fname
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_event_trigger t
                        WHERE t.evtname OPERATOR(pg_catalog.=) e.name
                          AND t.evtenabled OPERATOR(pg_catalog.=) 'A'
                          AND t.evtevent OPERATOR(pg_catalog.=) e.event
                          AND t.evtfoid OPERATOR(pg_catalog.=) f.oid
                          AND f.ours
                          AND t.evttags IS NOT DISTINCT FROM e.tags)
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
         WHERE t.relid OPERATOR(pg_catalog.=) p.relid::pg_catalog.oid
           AND t.member OPERATOR(pg_catalog.<>) p.relid::pg_catalog.oid) AS partitions,
       pr.problem IS NULL AS guard_intact,
       pr.problem
  FROM @extschema@.protected p
  LEFT JOIN (
        SELECT x.relid, pg_catalog.string_agg(x.problem, '; ' ORDER BY x.problem) AS problem
          FROM problems x
         GROUP BY x.relid) pr ON pr.relid OPERATOR(pg_catalog.=) p.relid::pg_catalog.oid;

COMMENT ON VIEW @extschema@.protected_tables IS
    'one row per protected table: scope, partitions and inheritance children (partitions), and whether its guard is intact (problem says what is wrong)';

-- (end of ddl guard section)

------------------------------------------------------------------------------
-- Statistics and observability
------------------------------------------------------------------------------

-- The counters of the built-in leases (src/stats.c, counted by
-- src/lease.c), one row for the current database.  Like fencing.stats they
-- need shared_preload_libraries = 'fencing' (55000 with a HINT otherwise)
-- and are zeroed by fencing.stats_reset().  All counters (fencing.stats,
-- fencing.idempotency_stats, fencing.lease_stats) are saved at a clean
-- shutdown and loaded at start; after a crash they start from zero.
CREATE FUNCTION @extschema@.lease_stats_internal(
        OUT acquired bigint,
        OUT acquire_refused bigint,
        OUT renewed bigint,
        OUT renew_failed bigint,
        OUT released bigint,
        OUT release_failed bigint,
        OUT expired bigint,
        OUT rejected bigint,
        OUT hold_count bigint,
        OUT hold_seconds_sum double precision,
        OUT hold_seconds_max double precision)
    RETURNS record
    AS 'MODULE_PATHNAME', 'fencing_lease_stats_internal'
    LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.lease_stats_internal() IS
    'the counters of the leases of the current database (read it through the view fencing.lease_stats)';

CREATE VIEW @extschema@.lease_stats AS
    SELECT s.acquired, s.acquire_refused, s.renewed, s.renew_failed,
           s.released, s.release_failed, s.expired, s.rejected,
           s.hold_count, s.hold_seconds_sum, s.hold_seconds_max
      FROM @extschema@.lease_stats_internal() AS s;
COMMENT ON VIEW @extschema@.lease_stats IS
    'what happened to the leases of the current database since fencing.stats_reset() (kept across clean restarts); needs shared_preload_libraries = ''fencing''';
COMMENT ON COLUMN @extschema@.lease_stats.acquired IS 'grants by fencing.lease_acquire()';
COMMENT ON COLUMN @extschema@.lease_stats.acquire_refused IS 'fencing.lease_acquire() calls that returned NULL: another holder''s lease was live';
COMMENT ON COLUMN @extschema@.lease_stats.renewed IS 'fencing.lease_renew() calls that extended a live lease';
COMMENT ON COLUMN @extschema@.lease_stats.renew_failed IS 'fencing.lease_renew() calls that returned false: the lease had expired, was released or was taken over';
COMMENT ON COLUMN @extschema@.lease_stats.released IS 'fencing.lease_release() calls that gave a live lease up';
COMMENT ON COLUMN @extschema@.lease_stats.release_failed IS 'fencing.lease_release() calls that returned false';
COMMENT ON COLUMN @extschema@.lease_stats.expired IS 'grants that ended by running out rather than by release, counted once, by the first acquire, renew, release or check of the name (the guard''s included) that noticed';
COMMENT ON COLUMN @extschema@.lease_stats.rejected IS 'writes the guard refused (SF001) because their token was not the current, live token of the table''s lease';
COMMENT ON COLUMN @extschema@.lease_stats.hold_count IS 'grants whose end was counted: released, expired, or replaced by their own holder''s next acquire';
COMMENT ON COLUMN @extschema@.lease_stats.hold_seconds_sum IS 'the hold times of those grants, in seconds: grant to release, or to expiry for expired grants';
COMMENT ON COLUMN @extschema@.lease_stats.hold_seconds_max IS 'the longest of those hold times, in seconds';

COMMENT ON FUNCTION @extschema@.stats_reset() IS
    'zero fencing.stats and fencing.lease_stats (of all databases) and fencing.idempotency_stats';

REVOKE ALL ON @extschema@.lease_stats FROM PUBLIC;
GRANT SELECT ON @extschema@.lease_stats TO PUBLIC;

-- (end of observability section)

------------------------------------------------------------------------------
-- Idempotency keys
------------------------------------------------------------------------------

-- Owners.  A key belongs to the role that began it (current_user of
-- idem_begin), and any other role that is not a member of it gets 42501
-- from every helper on the key.  regrole, not oid, so that pg_dump writes
-- role names, which a restore maps back to roles by name (and refuses
-- loudly where the role does not exist); pg_upgrade keeps role OIDs.
--
-- Keys begun under 1.0: nobody recorded who began them.  They go to the
-- extension's owner, as the leases of 1.0 do: nothing goes to PUBLIC.  A
-- key is a capability (replaying a finished key reads its result, and a
-- running key's claim completes it), and under PUBLIC every role could use
-- every other role's keys.  The extension's owner hands them to the
-- application's role, best in the transaction of the update, so that no
-- retry is ever refused:
--     BEGIN;
--     ALTER EXTENSION fencing UPDATE;
--     UPDATE fencing.idempotency_keys SET owner = 'app' WHERE key LIKE 'order:%';
--     COMMIT;
-- Until then other roles get 42501 from them: they fail closed.  The
-- update says how many keys this concerns, with a WARNING (extension
-- scripts run with client_min_messages = warning, and this is about who
-- may use what).
--
-- The column and its comment are made as in 1.1 as released (which gave
-- these keys to PUBLIC, owner 0): the default only fills the existing rows
-- (no table rewrite) and is dropped at once, so that no insertion can
-- forget an owner; the keys then go to the extension's owner.  The update
-- to 1.2 gives the keys that the released 1.1 gave to PUBLIC to the
-- extension's owner too, and rewrites the comment.
ALTER TABLE @extschema@.idempotency_keys
    ADD COLUMN owner pg_catalog.regrole NOT NULL DEFAULT 0;
ALTER TABLE @extschema@.idempotency_keys ALTER COLUMN owner DROP DEFAULT;
COMMENT ON COLUMN @extschema@.idempotency_keys.owner IS
    'the role that began the key: only it and its members may use the key; - (PUBLIC, for keys begun under fencing 1.0): every role';

DO $$
DECLARE
    ext_owner pg_catalog.regrole := (SELECT e.extowner::pg_catalog.regrole
                                       FROM pg_catalog.pg_extension AS e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'fencing');
    n bigint;
    last_expiry timestamptz;
BEGIN
    WITH given AS (
        UPDATE @extschema@.idempotency_keys AS k
           SET owner = ext_owner
         WHERE k.owner OPERATOR(pg_catalog.=) 0::pg_catalog.regrole
        RETURNING k.expires_at)
    SELECT pg_catalog.count(*), pg_catalog.max(g.expires_at)
      INTO n, last_expiry
      FROM given AS g
     WHERE g.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE WARNING '% idempotency keys begun under fencing 1.0 now belong to the extension''s owner, role %', n, ext_owner
            USING DETAIL = pg_catalog.format('Other roles get 42501 from them until the extension''s owner gives them to the roles that began them (the last expires at %s). Keys begun from now on belong to the role that begins them.', last_expiry),
                  HINT = 'As the extension''s owner, give them to the role of their application, best in the transaction of the update: UPDATE fencing.idempotency_keys SET owner = ''role_name'' WHERE key LIKE ''prefix%'';';
    END IF;
END
$$;

-- (end of idempotency section)

------------------------------------------------------------------------------
-- Leases
------------------------------------------------------------------------------

-- Owners.  A lease name belongs to the role that first acquired it: other
-- roles (not members of it, nor superusers) get 42501 from lease_acquire,
-- lease_renew, lease_release and lease_check of that name, and its token
-- is readable only by its owner roles, the extension's owner and
-- superusers.
--
-- The leases of 1.0 recorded no owner.  They go to the extension's owner:
-- nobody gains a lease by the update, and only the extension's owner (who
-- can write fencing.leases) hands them over, for example in the same
-- transaction as the update, so that applications renew without a break:
--     BEGIN;
--     ALTER EXTENSION fencing UPDATE;
--     UPDATE fencing.leases SET owner = 'app' WHERE name LIKE 'orders%';
--     COMMIT;
-- Until then an application role that is not a member of the extension's
-- owner gets 42501 from its next renew, and stops: it fails closed.
ALTER TABLE @extschema@.leases ADD COLUMN owner pg_catalog.regrole;
UPDATE @extschema@.leases
   SET owner = (SELECT e.extowner::pg_catalog.regrole
                  FROM pg_catalog.pg_extension AS e
                 WHERE e.extname OPERATOR(pg_catalog.=) 'fencing');
ALTER TABLE @extschema@.leases ALTER COLUMN owner SET NOT NULL;
COMMENT ON COLUMN @extschema@.leases.owner IS
    'the role the lease belongs to: the first role that acquired it (the extension''s owner for leases from before 1.1); the extension''s owner hands a lease over by changing it';
COMMENT ON TABLE @extschema@.leases IS
    'leases granted by fencing.lease_acquire(): a lease is live while expires_at is in the future; the row keeps the last token after expiry or release; readable by the extension''s owner only (fencing.lease_status shows it to everyone, tokens masked)';

DO $$
DECLARE
    n bigint;
BEGIN
    SELECT pg_catalog.count(*) INTO n FROM @extschema@.leases;
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE NOTICE 'the % leases from fencing 1.0 now belong to the extension''s owner, role %', n,
            (SELECT e.extowner::pg_catalog.regrole FROM pg_catalog.pg_extension AS e
              WHERE e.extname OPERATOR(pg_catalog.=) 'fencing')
        USING HINT = 'Hand each to the role of its application, for example UPDATE fencing.leases SET owner = ''app'' WHERE name = ''orders''; until then other roles get 42501 from them.';
    END IF;
END
$$;

-- Tokens are capabilities: the table is no longer readable by PUBLIC.
REVOKE ALL ON @extschema@.leases FROM PUBLIC;

-- The lease functions move to C (src/lease.c): they must know their
-- caller, which a SECURITY DEFINER function cannot (current_user is its
-- owner there), and they count their outcomes in fencing.lease_stats.
-- CREATE OR REPLACE keeps their ACLs (EXECUTE for PUBLIC) and makes them
-- SECURITY INVOKER without a SET clause: they run their own, fully
-- qualified statements as the extension's owner.
CREATE OR REPLACE FUNCTION @extschema@.lease_acquire(name text, holder text, ttl interval)
    RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fencing_lease_acquire'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_acquire(text, text, interval) IS
    'grant the lease for ttl and return its new token; NULL while another holder''s lease is live (the same holder gets a new token); a new name belongs to the calling role, other roles get 42501';

CREATE OR REPLACE FUNCTION @extschema@.lease_renew(name text, token @extschema@.fence, ttl interval)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'fencing_lease_renew'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_renew(text, @extschema@.fence, interval) IS
    'extend a live lease held with token to now + ttl; false once it expired, was released or was taken over; 42501 for roles the lease does not belong to';

CREATE OR REPLACE FUNCTION @extschema@.lease_release(name text, token @extschema@.fence)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'fencing_lease_release'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_release(text, @extschema@.fence) IS
    'give up a live lease held with token, so that the next lease_acquire succeeds at once; false when token does not hold it; 42501 for roles the lease does not belong to';

CREATE OR REPLACE FUNCTION @extschema@.lease_check(name text, token @extschema@.fence)
    RETURNS boolean
    AS 'MODULE_PATHNAME', 'fencing_lease_check'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.lease_check(text, @extschema@.fence) IS
    'true while token is the lease''s current token and the lease is live; 42501 for roles the lease does not belong to (the answer would tell them its token)';

-- Their checks are done in C now.
DROP FUNCTION @extschema@.lease_check_name(text);
DROP FUNCTION @extschema@.lease_expiry(timestamptz, interval);

-- fencing.lease_status: every lease, for everyone, like
-- etcdctl lease timetolive.  The token is shown to the roles the lease
-- belongs to (members, superusers) and to the extension's owner; any
-- other role sees NULL there, and everything else.  The view reads the
-- table with its owner's rights, while pg_has_role() checks the querying
-- role.  One clock reading serves all rows.
CREATE VIEW @extschema@.lease_status AS
    SELECT l.name,
           l.holder,
           CASE WHEN pg_catalog.pg_has_role(l.owner::pg_catalog.oid, 'MEMBER')
                  OR pg_catalog.pg_has_role(e.extowner, 'MEMBER')
                THEN l.token END AS token,
           l.granted_at,
           l.expires_at,
           (l.token IS NOT NULL
            AND l.expires_at IS NOT NULL
            AND l.expires_at OPERATOR(pg_catalog.>) c.now) AS live,
           CASE WHEN l.token IS NOT NULL
                 AND l.expires_at OPERATOR(pg_catalog.>) c.now
                THEN l.expires_at OPERATOR(pg_catalog.-) c.now END AS remaining
      FROM @extschema@.leases AS l
     CROSS JOIN (SELECT pg_catalog.clock_timestamp() AS now) AS c
     CROSS JOIN (SELECT x.extowner FROM pg_catalog.pg_extension AS x
                  WHERE x.extname OPERATOR(pg_catalog.=) 'fencing') AS e;
COMMENT ON VIEW @extschema@.lease_status IS
    'every lease with its holder, grant, expiry, whether it is live and the time it has left (etcdctl lease timetolive); the token only for roles the lease belongs to; no preload needed';
COMMENT ON COLUMN @extschema@.lease_status.name IS 'the lease';
COMMENT ON COLUMN @extschema@.lease_status.holder IS 'the holder of the last grant';
COMMENT ON COLUMN @extschema@.lease_status.token IS 'the token of the last grant; NULL for roles the lease does not belong to';
COMMENT ON COLUMN @extschema@.lease_status.granted_at IS 'when the last grant was made';
COMMENT ON COLUMN @extschema@.lease_status.expires_at IS 'when the last grant runs out (or ran out, or was released)';
COMMENT ON COLUMN @extschema@.lease_status.live IS 'the last grant has neither run out nor been released (server clock)';
COMMENT ON COLUMN @extschema@.lease_status.remaining IS 'the time the live grant has left; NULL when it is not live';
REVOKE ALL ON @extschema@.lease_status FROM PUBLIC;
GRANT SELECT ON @extschema@.lease_status TO PUBLIC;

-- (end of lease section)

------------------------------------------------------------------------------
-- Distributed tables
------------------------------------------------------------------------------

-- On a node with Citus, the guard row trigger of a distributed table is
-- created on every shard by Citus; this event trigger gives each shard its
-- TRUNCATE guard as it gets the row guard (Citus does not propagate
-- TRUNCATE triggers to shards) and takes it away with it.  Elsewhere it
-- returns at once.
CREATE FUNCTION @extschema@.citus_ddl_end() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_citus_ddl_end' LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.citus_ddl_end() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.citus_ddl_end() IS
    'event trigger: keeps the TRUNCATE guard of each shard of a protected Citus table in line with its row guard';

CREATE EVENT TRIGGER fencing_citus_ddl_end ON ddl_command_end
    WHEN TAG IN ('CREATE TRIGGER', 'DROP TRIGGER', 'CREATE TABLE', 'ALTER TABLE')
    EXECUTE FUNCTION @extschema@.citus_ddl_end();
-- fire with session_replication_role = replica too
ALTER EVENT TRIGGER fencing_citus_ddl_end ENABLE ALWAYS;
COMMENT ON EVENT TRIGGER fencing_citus_ddl_end IS
    'gives each shard of a protected Citus table its TRUNCATE guard';

-- (end of distributed tables section)
