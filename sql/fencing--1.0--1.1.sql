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
-- Hardening, part 1: typed scope storage and scope owners (issue 10)
------------------------------------------------------------------------------

-- Key identity (SPEC 4a).  In 1.0 a key was the text form of its values
-- under the writer's session settings, so a stale writer could spell its
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
                                         key_types regtype[], key_collations oid[])
    RETURNS regclass
    AS 'MODULE_PATHNAME', 'fencing_scope_create' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.scope_create(text, regrole, regtype[], oid[]) IS
    'internal: create and register the storage table of a new scope (protect() does this itself)';

CREATE FUNCTION @extschema@.invalidate_guards() RETURNS void
    AS 'MODULE_PATHNAME', 'fencing_invalidate_guards' LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.invalidate_guards() IS
    'internal: make every session read its guard settings again once this transaction commits';

REVOKE ALL ON FUNCTION @extschema@.scope_create(text, regrole, regtype[], oid[]),
    @extschema@.invalidate_guards() FROM PUBLIC;

-- Convert the text keys of 1.0's fencing.scopes into typed storage.  A
-- scope used by protected tables takes their key columns' types (they
-- must agree) and their owner; a scope no protected table uses any more
-- keeps text keys and goes to the extension's owner, who may hand it on
-- (reset_scope) or keep it.  The text forms are parsed under fixed
-- settings; keys that several spellings made into several 1.0 keys merge
-- into one, with the highest fence.  A key that does not parse stops the
-- update with the list of such keys: nothing is converted by guesswork.
DO $convert$
DECLARE
    sc record;
    t record;
    types regtype[];
    colls oid[];
    t_types regtype[];
    t_colls oid[];
    scope_owner oid;
    ext_owner oid := (SELECT c.relowner FROM pg_catalog.pg_class c
                       WHERE c.oid OPERATOR(pg_catalog.=) '@extschema@.protected'::pg_catalog.regclass);
    storage regclass;
    arity_min integer;
    arity_max integer;
    cols text;
    keycols text;
    bad text;
    badkey record;
    saved_datestyle text := pg_catalog.current_setting('DateStyle');
    saved_intervalstyle text := pg_catalog.current_setting('IntervalStyle');
BEGIN
    PERFORM pg_catalog.set_config('DateStyle', 'ISO, MDY', true);
    PERFORM pg_catalog.set_config('IntervalStyle', 'postgres', true);

    FOR sc IN SELECT s.scope_name FROM @extschema@.scopes s
              UNION
              SELECT p.scope_name FROM @extschema@.protected p
               WHERE p.key_columns IS NOT NULL
              ORDER BY 1
    LOOP
        types := NULL;
        scope_owner := NULL;
        FOR t IN SELECT p.relid, p.key_columns, c.relowner
                   FROM @extschema@.protected p
                   JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) p.relid
                  WHERE p.scope_name OPERATOR(pg_catalog.=) sc.scope_name
                    AND p.key_columns IS NOT NULL
                  ORDER BY p.relid
        LOOP
            -- the key columns' base types (domains unwrapped) and collations
            SELECT COALESCE(pg_catalog.array_agg(b.base::pg_catalog.regtype ORDER BY k.ord), '{}'),
                   COALESCE(pg_catalog.array_agg(a.attcollation ORDER BY k.ord), '{}')
              INTO t_types, t_colls
              FROM pg_catalog.unnest(t.key_columns) WITH ORDINALITY AS k(name, ord)
              JOIN pg_catalog.pg_attribute a
                ON a.attrelid OPERATOR(pg_catalog.=) t.relid
               AND a.attname OPERATOR(pg_catalog.=) k.name
             CROSS JOIN LATERAL (
                   WITH RECURSIVE d(oid, basetype) AS (
                        SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                         WHERE ty.oid OPERATOR(pg_catalog.=) a.atttypid
                        UNION ALL
                        SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                          JOIN d ON ty.oid OPERATOR(pg_catalog.=) d.basetype)
                   SELECT d.oid AS base FROM d
                    WHERE d.basetype OPERATOR(pg_catalog.=) 0) b;
            IF types IS NULL THEN
                types := t_types;
                colls := t_colls;
                scope_owner := t.relowner;
            ELSIF types OPERATOR(pg_catalog.<>) t_types OR colls OPERATOR(pg_catalog.<>) t_colls THEN
                RAISE EXCEPTION 'cannot convert fencing scope "%" to typed storage', sc.scope_name
                    USING ERRCODE = 'datatype_mismatch',
                          DETAIL = pg_catalog.format('Table %s keys the scope with (%s), another protected table with (%s).',
                                                     t.relid::pg_catalog.regclass,
                                                     pg_catalog.array_to_string(t_types, ', '),
                                                     pg_catalog.array_to_string(types, ', ')),
                          HINT = 'Give the tables key columns of the same types and collations, or protect one of them with another scope_name, then update again.';
            ELSIF scope_owner OPERATOR(pg_catalog.<>) t.relowner THEN
                -- tables of several owners: the extension's owner decides
                scope_owner := ext_owner;
            END IF;
        END LOOP;

        IF types IS NULL THEN
            -- no protected table uses the scope any more: text keys
            SELECT pg_catalog.min(pg_catalog.json_array_length(s.key::pg_catalog.json)),
                   pg_catalog.max(pg_catalog.json_array_length(s.key::pg_catalog.json))
              INTO arity_min, arity_max
              FROM @extschema@.scopes s
             WHERE s.scope_name OPERATOR(pg_catalog.=) sc.scope_name;
            IF arity_min OPERATOR(pg_catalog.<>) arity_max THEN
                RAISE EXCEPTION 'cannot convert fencing scope "%" to typed storage', sc.scope_name
                    USING ERRCODE = 'datatype_mismatch',
                          DETAIL = pg_catalog.format('No protected table uses the scope, and its keys have between %s and %s values.',
                                                     arity_min, arity_max),
                          HINT = 'Delete the rows of fencing.scopes of this scope that are no longer wanted, then update again.';
            END IF;
            SELECT COALESCE(pg_catalog.array_agg('pg_catalog.text'::pg_catalog.regtype), '{}'),
                   COALESCE(pg_catalog.array_agg(100::pg_catalog.oid), '{}')
              INTO types, colls
              FROM pg_catalog.generate_series(1, arity_min);
            scope_owner := ext_owner;
        END IF;

        storage := @extschema@.scope_create(sc.scope_name, scope_owner::pg_catalog.regrole,
                                            types, colls);

        IF pg_catalog.cardinality(types) OPERATOR(pg_catalog.=) 0 THEN
            cols := 'true';
            keycols := 'table_scope';
        ELSE
            SELECT pg_catalog.string_agg(pg_catalog.format('(s.key::pg_catalog.json OPERATOR(pg_catalog.->>) %s)::%s',
                                                           i OPERATOR(pg_catalog.-) 1, types[i]), ', ' ORDER BY i),
                   pg_catalog.string_agg(pg_catalog.format('key_%s', i), ', ' ORDER BY i)
              INTO cols, keycols
              FROM pg_catalog.generate_series(1, pg_catalog.cardinality(types)) AS i;
        END IF;

        BEGIN
            EXECUTE pg_catalog.format(
                'INSERT INTO %s (%s, fence) '
                'SELECT %s, @extschema@.max(c.fence) '
                '  FROM (SELECT %s, s.fence FROM @extschema@.scopes s '
                '         WHERE s.scope_name OPERATOR(pg_catalog.=) $1) AS c(%s, fence) '
                ' GROUP BY %s',
                storage, keycols, keycols, cols, keycols, keycols)
            USING sc.scope_name;
        EXCEPTION WHEN data_exception OR invalid_text_representation THEN
            -- find the keys that do not parse, for the error
            bad := NULL;
            FOR badkey IN SELECT s.key FROM @extschema@.scopes s
                           WHERE s.scope_name OPERATOR(pg_catalog.=) sc.scope_name ORDER BY s.key
            LOOP
                BEGIN
                    EXECUTE pg_catalog.format('SELECT %s FROM (SELECT $1::pg_catalog.text AS key) s', cols)
                        USING badkey.key;
                EXCEPTION WHEN data_exception OR invalid_text_representation THEN
                    bad := COALESCE(bad OPERATOR(pg_catalog.||) ', ', '')
                           OPERATOR(pg_catalog.||) badkey.key;
                END;
            END LOOP;
            RAISE EXCEPTION 'cannot convert the keys of fencing scope "%" to its key types (%)',
                            sc.scope_name, pg_catalog.array_to_string(types, ', ')
                USING ERRCODE = 'invalid_text_representation',
                      DETAIL = pg_catalog.format('These keys of fencing.scopes do not read as values of those types: %s.',
                                                 pg_catalog.left(bad, 2000)),
                      HINT = 'They were written under other session settings (DateStyle, for example) or by hand: as the extension''s owner, correct or delete those rows of fencing.scopes (a fence that is deleted no longer stops stale writers of its key), then update again.';
        END;
    END LOOP;

    PERFORM pg_catalog.set_config('DateStyle', saved_datestyle, true);
    PERFORM pg_catalog.set_config('IntervalStyle', saved_intervalstyle, true);
END
$convert$;

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
-- Hardening, part 2: the DDL guard and the guard's health (issue 10)
------------------------------------------------------------------------------

-- (end of ddl guard section)

------------------------------------------------------------------------------
-- Statistics and observability (issue 13)
------------------------------------------------------------------------------

-- (end of observability section)

------------------------------------------------------------------------------
-- Idempotency keys (issues 10, 15)
------------------------------------------------------------------------------

-- (end of idempotency section)

------------------------------------------------------------------------------
-- Leases (issues 10, 13)
------------------------------------------------------------------------------

-- (end of lease section)

------------------------------------------------------------------------------
-- Distributed tables (issue 14)
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
