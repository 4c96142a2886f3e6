/* sql/fencing--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.2'" to load this file. \quit

-- A fresh CREATE EXTENSION fencing runs fencing--1.0.sql, then
-- fencing--1.0--1.1.sql, then this script, so an updated database and a
-- new one have the same objects by construction.
--
-- One section per concern.  Each section qualifies every name
-- (@extschema@, pg_catalog) as the earlier scripts do.

------------------------------------------------------------------------------
-- Who may read keys and fences (src/visibility.c)
------------------------------------------------------------------------------

-- A scope's keys are values of the protected tables' key columns, and its
-- fences say how far each key's writers have come: fencing.scopes shows a
-- scope's rows only to roles that may read them from the tables (SELECT
-- on every table protected into the scope, or on its fence and key
-- columns), to the scope's owner and its members, to the extension's
-- owner and to superusers.  scope_fences() becomes a C function: it must
-- know its caller, and reads the storage tables as their owner.
CREATE OR REPLACE FUNCTION @extschema@.scope_fences(OUT scope_name text, OUT key text,
                                                    OUT fence @extschema@.fence)
    RETURNS SETOF record
    AS 'MODULE_PATHNAME', 'fencing_scope_fences'
    LANGUAGE C STABLE PARALLEL RESTRICTED;
COMMENT ON FUNCTION @extschema@.scope_fences() IS
    'every key''s fence of every key or table scope the caller may read: it owns the scope, or may read every table protected into it (read it through the view fencing.scopes)';
COMMENT ON VIEW @extschema@.scopes IS
    'the highest accepted token of each key of each key or table scope, shown to roles that own the scope or may read every table protected into it; key shows the key values as text, for people (the fences are kept in the tables of fencing.scope_storage)';

-- The storage tables are no longer readable by PUBLIC (protect() no longer
-- grants it to new ones).  They are no members of the extension: their
-- privileges are no extension's initial privileges, which a REVOKE in an
-- extension script would record.
DO $revoke$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT s.storage FROM @extschema@.scope_storage s
               JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.storage
              ORDER BY s.scope_name
    LOOP
        EXECUTE pg_catalog.format('REVOKE SELECT ON %s FROM PUBLIC', r.storage);
        DELETE FROM pg_catalog.pg_init_privs i
         WHERE i.objoid OPERATOR(pg_catalog.=) r.storage
           AND i.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass;
    END LOOP;
END
$revoke$;

-- (end of section on who may read keys and fences)

------------------------------------------------------------------------------
-- Other roles cannot pin the extension (src/drop.c, src/scope_storage.c)
------------------------------------------------------------------------------

-- A view, a function, a column of another role's table may depend on a
-- scope's storage table (PostgreSQL checks no privilege on a view's
-- tables when the view is created).  reset_scope() drops the storage with
-- CASCADE: what was built on it goes too, each named in a NOTICE.  (No key
-- column can be among it: protect() refuses key columns made of the row
-- type of the extension's tables.)  Everything else as in 1.1.
CREATE OR REPLACE FUNCTION @extschema@.reset_scope(scope_name text) RETURNS bigint
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
    EXECUTE pg_catalog.format('DROP TABLE %s CASCADE', r.storage);
    DELETE FROM @extschema@.scope_storage s
     WHERE s.scope_name OPERATOR(pg_catalog.=) reset_scope.scope_name;
    RETURN n;
END
$$;
COMMENT ON FUNCTION @extschema@.reset_scope(text) IS
    'forget a scope no protected table uses: drop its fences (and whatever other roles built on its storage table) and its owner, so that any role may protect into the name again; returns the number of fences dropped';

-- DROP EXTENSION fencing drops the scopes' storage tables first, with
-- CASCADE, as their owner: they are no members of the extension (pg_dump
-- dumps them with their rows), and would otherwise make it fail, whoever
-- created the scope or built on its storage.
CREATE FUNCTION @extschema@.drop_extension_start() RETURNS event_trigger
    AS 'MODULE_PATHNAME', 'fencing_drop_extension_start' LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.drop_extension_start() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.drop_extension_start() IS
    'event trigger: DROP EXTENSION fencing drops the scopes'' storage tables first (with what other roles built on them)';
CREATE EVENT TRIGGER fencing_drop_extension ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION')
    EXECUTE FUNCTION @extschema@.drop_extension_start();
ALTER EVENT TRIGGER fencing_drop_extension ENABLE ALWAYS;
COMMENT ON EVENT TRIGGER fencing_drop_extension IS
    'DROP EXTENSION fencing takes the scopes'' storage tables with it';

-- (end of section on pinning)

------------------------------------------------------------------------------
-- Storage tables named after their scopes (src/scope_storage.c)
------------------------------------------------------------------------------

-- A new scope's storage table is fencing.scope_<h>, <h> 16 hex digits of
-- the SHA-256 of the scope's name: the same in every database, so that a
-- dump restored into a database with scopes of other names brings tables
-- of other names, and a logical replica that protects the same tables has
-- the same storage tables as its publisher.  Existing ones keep their
-- names; the sequence that numbered them is no longer drawn from.
COMMENT ON SEQUENCE @extschema@.scope_storage_seq IS
    'numbers of the scope storage tables created by fencing 1.1 (fencing.scope_<n>); later ones are named after their scopes';

-- (end of section on storage names)

------------------------------------------------------------------------------
-- Logical replication of a whole database (src/replication.c)
------------------------------------------------------------------------------

-- A publication FOR ALL TABLES includes the extension's tables.  Those
-- that hold this server's own state (its protections, its scopes and
-- their fences, its epochs) get two triggers, enabled ALWAYS, that keep
-- it its own on a subscriber: in a logical replication worker a row is
-- skipped (a storage table's row first advances the subscriber's fence of
-- its key to the publisher's, when that is newer) and a TRUNCATE is
-- refused (SF001); in every other session they do nothing.  Idempotency
-- keys and leases replicate as they are.
CREATE FUNCTION @extschema@.local_state() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_local_state' LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.local_state() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.local_state() IS
    'internal: triggers of the extension''s tables of local state; under logical replication the subscriber keeps its own protections, scopes and epochs (its fences follow the publisher''s upwards only)';

DO $local$
DECLARE
    rels pg_catalog.regclass[];
    args pg_catalog.text[];
    i integer;
    citus boolean := pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL;
    distributed boolean;
BEGIN
    -- collected first: no scan of the registry may be open while it is altered
    SELECT pg_catalog.array_agg(t.rel ORDER BY t.ord), pg_catalog.array_agg(t.arg ORDER BY t.ord)
      INTO rels, args
      FROM (SELECT '@extschema@.protected'::pg_catalog.regclass AS rel, NULL::pg_catalog.text AS arg, 1 AS ord
            UNION ALL
            SELECT '@extschema@.scope_storage'::pg_catalog.regclass, NULL, 2
            UNION ALL
            SELECT '@extschema@.epoch_state'::pg_catalog.regclass, NULL, 3
            UNION ALL
            SELECT s.storage, 'storage', 4
              FROM @extschema@.scope_storage s
              JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.storage) AS t;
    FOR i IN 1 .. pg_catalog.cardinality(rels)
    LOOP
        IF args[i] IS NOT NULL THEN
            -- a distributed storage is moved by Citus's logical replication
            distributed := false;
            IF citus THEN
                EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition p
                                         WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1)'
                   INTO distributed USING rels[i];
            END IF;
            CONTINUE WHEN distributed;
            EXECUTE pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', rels[i]);
        END IF;
        EXECUTE pg_catalog.format(
            'CREATE TRIGGER fencing_local_state BEFORE INSERT OR UPDATE OR DELETE ON %s '
            'FOR EACH ROW EXECUTE FUNCTION @extschema@.local_state(%s)',
            rels[i], COALESCE(pg_catalog.quote_literal(args[i]), ''));
        EXECUTE pg_catalog.format(
            'CREATE TRIGGER fencing_local_state_truncate BEFORE TRUNCATE ON %s '
            'FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.local_state(%s)',
            rels[i], COALESCE(pg_catalog.quote_literal(args[i]), ''));
        EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER fencing_local_state', rels[i]);
        EXECUTE pg_catalog.format('ALTER TABLE %s ENABLE ALWAYS TRIGGER fencing_local_state_truncate', rels[i]);
    END LOOP;
END
$local$;

-- (end of logical replication section)
