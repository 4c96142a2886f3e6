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
-- Scope lifecycle at every isolation level: reset_scope() in C
------------------------------------------------------------------------------

-- reset_scope() takes the lock that protect() takes on a scope's name and
-- reads the registry and fencing.protected as they are now (not as a
-- REPEATABLE READ or SERIALIZABLE snapshot saw them), so that it never
-- drops a scope that a table was protected into after the caller's
-- snapshot was taken: it fails with 55006, as at READ COMMITTED.  Same
-- argument, result, errors and privileges (EXECUTE revoked from PUBLIC);
-- the C function does its work as the extension's owner itself, so it is
-- no longer SECURITY DEFINER.
CREATE OR REPLACE FUNCTION @extschema@.reset_scope(scope_name text) RETURNS bigint
    AS 'MODULE_PATHNAME', 'fencing_reset_scope' LANGUAGE C VOLATILE PARALLEL UNSAFE;
REVOKE ALL ON FUNCTION @extschema@.reset_scope(text) FROM PUBLIC;

-- (end of scope lifecycle section)

------------------------------------------------------------------------------
-- Tokens from lock services (etcd, ZooKeeper, Redis)
------------------------------------------------------------------------------

-- fence_from_zxid() turns a ZooKeeper zxid and a generation into a fence;
-- set_token() sets the transaction's token from a value a driver binds as a
-- parameter (SET LOCAL takes no parameters).
CREATE FUNCTION @extschema@.fence_from_zxid(zxid bigint, generation integer DEFAULT 0)
    RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_from_zxid'
    LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.fence_from_zxid(bigint, integer) IS
    'ZooKeeper: the fence ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff) of a znode''s czxid; ordered as zxids are, and a raised generation beats every zxid of earlier generations (raise it after ZooKeeper loses its data)';

CREATE FUNCTION @extschema@.set_token(token @extschema@.fence)
    RETURNS @extschema@.fence
    AS 'MODULE_PATHNAME', 'fence_set_token'
    LANGUAGE C VOLATILE PARALLEL UNSAFE;
COMMENT ON FUNCTION @extschema@.set_token(@extschema@.fence) IS
    'sets fencing.token for the rest of the transaction, as SET LOCAL does (set_config(''fencing.token'', token, true)), from a value bound as a parameter ($1); returns the token; SF002 for NULL';

-- (end of lock services section)

------------------------------------------------------------------------------
-- Idempotency keys of fencing 1.0: to the extension's owner, not PUBLIC
------------------------------------------------------------------------------

-- The update from 1.0 to 1.1 as released gave the idempotency keys begun
-- under 1.0 to PUBLIC (owner 0): every role could replay another's
-- finished key and read its result, or complete its running key.  They
-- belong to the extension's owner now, as the leases of 1.0 do; the
-- extension's owner hands them to the application's role, best in the
-- transaction of this update:
--     BEGIN;
--     ALTER EXTENSION fencing UPDATE;
--     UPDATE fencing.idempotency_keys SET owner = 'app' WHERE key LIKE 'order:%';
--     COMMIT;
-- (The update from 1.0 gives them to the extension's owner directly.)
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
        RAISE WARNING '% idempotency keys begun under fencing 1.0 belonged to PUBLIC and now belong to the extension''s owner, role %', n, ext_owner
            USING DETAIL = pg_catalog.format('Other roles get 42501 from them until the extension''s owner gives them to the roles that began them (the last expires at %s).', last_expiry),
                  HINT = 'As the extension''s owner, give them to the role of their application, best in the transaction of the update: UPDATE fencing.idempotency_keys SET owner = ''role_name'' WHERE key LIKE ''prefix%'';';
    END IF;
END
$$;

COMMENT ON COLUMN @extschema@.idempotency_keys.owner IS
    'the role that began the key: only it and its members may use the key (keys begun under fencing 1.0 belong to the extension''s owner until it hands them on)';

-- (end of section: idempotency keys of fencing 1.0)

------------------------------------------------------------------------------
-- Only the owner adds code to a protected table's writes: DDL that reaches
-- protected tables through other objects
------------------------------------------------------------------------------

-- The DDL guard's rules also hold where a command names another object
-- and changes protected tables on the way: ALTER TYPE ... ALTER, RENAME or
-- DROP ATTRIBUTE ... CASCADE (the typed tables of a composite type),
-- CREATE SCHEMA ... CREATE TABLE ... PARTITION OF (its subcommands fire no
-- event trigger of their own), and ALTER FUNCTION/ROUTINE ... OWNER TO of
-- a function that a protected table's trigger runs (only a superuser or a
-- member of the table's owner may own the code of its triggers).  Event
-- triggers of their own, calling the DDL guard's functions, so that
-- fencing_ddl_guard_start and fencing_ddl_guard_end keep their tags.
CREATE EVENT TRIGGER fencing_indirect_ddl_start ON ddl_command_start
    WHEN TAG IN ('ALTER TYPE')
    EXECUTE FUNCTION @extschema@.ddl_guard_start();
CREATE EVENT TRIGGER fencing_indirect_ddl_end ON ddl_command_end
    WHEN TAG IN ('ALTER TYPE', 'ALTER FUNCTION', 'ALTER ROUTINE', 'CREATE SCHEMA')
    EXECUTE FUNCTION @extschema@.ddl_guard_end();
-- fire with session_replication_role = replica too
ALTER EVENT TRIGGER fencing_indirect_ddl_start ENABLE ALWAYS;
ALTER EVENT TRIGGER fencing_indirect_ddl_end ENABLE ALWAYS;
COMMENT ON EVENT TRIGGER fencing_indirect_ddl_start IS
    'DDL guard: refuses early, without locking, ALTER TYPE ... ATTRIBUTE ... CASCADE that would retype, rename or drop a fence or key column of a protected typed table, or change its values';
COMMENT ON EVENT TRIGGER fencing_indirect_ddl_end IS
    'DDL guard: checks ALTER TYPE ... CASCADE again under its locks, guards tables that CREATE SCHEMA creates under a protected table, and refuses giving a function that a protected table''s trigger runs to a role not trusted with the table';

-- (end of indirect DDL section)

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
-- tables when the view is created).  reset_scope() (src/scope_storage.c)
-- drops the storage with CASCADE: what was built on it goes too, each
-- named in a NOTICE.  (No key column can be among it: protect() refuses key
-- columns made of the row type of the extension's tables.)
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

-- A scope's storage table is fencing.scope_<h>, <h> 16 hex digits of the
-- SHA-256 of the scope's name (in the database's encoding; _2, _3, ... when
-- the name is taken): the same in every database, so that a dump restored
-- into a database with scopes of other names brings tables of other names,
-- and a logical replica that protects the same tables has the same storage
-- tables as its publisher.  The numbered tables of 1.1 (fencing.scope_<n>)
-- are renamed so, with their index and constraints, as a new scope's
-- would be named: an updated database is then as a new one.  Not a storage
-- table that Citus distributes: the guard triggers of its shards name it.
-- The sequence that numbered them is no longer drawn from.
DO $$
DECLARE
    r record;
    k record;
    h text;
    new_name text;
    attempt int;
    distributed boolean;
BEGIN
    FOR r IN
        SELECT s.scope_name, t.relname::text AS relname
          FROM @extschema@.scope_storage s
          JOIN pg_catalog.pg_class t ON t.oid OPERATOR(pg_catalog.=) s.storage::pg_catalog.oid
         WHERE t.relname::text OPERATOR(pg_catalog.~) '^scope_[0-9]+$'
         ORDER BY t.relname
    LOOP
        IF pg_catalog.to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
            EXECUTE 'SELECT EXISTS (SELECT FROM pg_catalog.pg_dist_partition '
                    'WHERE logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass)'
               INTO distributed USING '@extschema@.' || pg_catalog.quote_ident(r.relname);
            CONTINUE WHEN distributed;
        END IF;
        h := pg_catalog.substr(pg_catalog.encode(pg_catalog.sha256(
                 pg_catalog.convert_to(r.scope_name, pg_catalog.current_setting('server_encoding'))),
                 'hex'), 1, 16);
        attempt := 1;
        LOOP
            new_name := 'scope_' || h || CASE WHEN attempt > 1 THEN '_' || attempt ELSE '' END;
            EXIT WHEN pg_catalog.to_regclass('@extschema@.' || pg_catalog.quote_ident(new_name)) IS NULL
                  AND pg_catalog.to_regclass('@extschema@.' || pg_catalog.quote_ident(new_name || '_key')) IS NULL;
            attempt := attempt + 1;
        END LOOP;
        FOR k IN
            SELECT con.conname::text AS conname
              FROM pg_catalog.pg_constraint con
             WHERE con.conrelid OPERATOR(pg_catalog.=) ('@extschema@.' || pg_catalog.quote_ident(r.relname))::pg_catalog.regclass
               AND con.contype OPERATOR(pg_catalog.<>) 'u'
               AND pg_catalog.starts_with(con.conname::text, r.relname || '_')
        LOOP
            EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I RENAME CONSTRAINT %I TO %I',
                                      r.relname, k.conname,
                                      new_name || pg_catalog.substr(k.conname, pg_catalog.length(r.relname) + 1));
        END LOOP;
        IF pg_catalog.to_regclass('@extschema@.' || pg_catalog.quote_ident(r.relname || '_key')) IS NOT NULL THEN
            EXECUTE pg_catalog.format('ALTER INDEX @extschema@.%I RENAME TO %I',
                                      r.relname || '_key', new_name || '_key');
        END IF;
        EXECUTE pg_catalog.format('ALTER TABLE @extschema@.%I RENAME TO %I', r.relname, new_name);
    END LOOP;
END
$$;
COMMENT ON SEQUENCE @extschema@.scope_storage_seq IS
    'numbered the scope storage tables of fencing 1.1 (fencing.scope_<n>); storage tables are named after their scopes since 1.2';

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

------------------------------------------------------------------------------
-- Health covers the storage and every event trigger (fencing.protected_tables)
------------------------------------------------------------------------------

-- The on-call view, redefined with the same columns.  Beyond what 1.1
-- checks, a guard is intact only when its key or table scope's storage is
-- as the guard will find it: registered, a heap table of schema fencing
-- whose columns have the key columns' base types and collations and end
-- with the fence, with its unique index on the key columns (NULLS NOT
-- DISTINCT) and no other index, no row security and no triggers but
-- fencing.local_state()'s; and when every event trigger of the extension
-- (fencing_citus_ddl_end, fencing_drop_extension and the two that watch
-- DDL reaching protected tables through other objects too) is in place,
-- ENABLE ALWAYS, calling the extension's C function for its event and
-- commands.  A restore into a database whose scopes collide with the
-- dump's, a storage table dropped or altered by hand, an event trigger
-- disabled: the view says so.
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
           ('ddl_guard_drop', 'fencing_ddl_guard_drop'),
           ('citus_ddl_end', 'fencing_citus_ddl_end'),
           ('drop_extension_start', 'fencing_drop_extension_start'),
           ('local_state', 'fencing_local_state')
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
scoped AS MATERIALIZED (
    -- the key and table scope tables with their scope's registry entry
    SELECT p.relid, p.key_columns, q.scope_name,
           pg_catalog.cardinality(p.key_columns) AS nkeys,
           r.scope_name IS NOT NULL AS registered, r.table_scope,
           r.storage::pg_catalog.oid AS storage,
           c.oid IS NOT NULL AS storage_exists, c.relnamespace, c.relkind, c.relam,
           c.relrowsecurity, c.relname,
           c.relnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) 'r' AS ours
      FROM prot p
      JOIN @extschema@.protected q ON q.relid::pg_catalog.oid OPERATOR(pg_catalog.=) p.relid
      LEFT JOIN @extschema@.scope_storage r ON r.scope_name OPERATOR(pg_catalog.=) q.scope_name
      LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.storage
     WHERE p.key_columns IS NOT NULL
),
storage_problems (relid, problem) AS (
    SELECT s.relid,
           CASE WHEN NOT s.registered
                THEN pg_catalog.format('fencing scope %L is not registered in @extschema@.scope_storage',
                                       s.scope_name)
                WHEN NOT s.storage_exists
                THEN pg_catalog.format('the storage table of fencing scope %L is missing',
                                       s.scope_name)
                WHEN s.relnamespace OPERATOR(pg_catalog.<>) '@extschema@'::pg_catalog.regnamespace
                  OR s.relkind OPERATOR(pg_catalog.<>) 'r'
                THEN pg_catalog.format('the storage of fencing scope %L, %s, is not a table of schema @extschema@',
                                       s.scope_name, s.storage::pg_catalog.regclass)
                ELSE pg_catalog.format('fencing scope %L is a %s scope, and the table is protected in %s scope',
                                       s.scope_name,
                                       CASE WHEN s.table_scope THEN 'table' ELSE 'key' END,
                                       CASE WHEN s.nkeys OPERATOR(pg_catalog.=) 0 THEN 'table' ELSE 'key' END)
           END
      FROM scoped s
     WHERE NOT s.registered OR NOT s.storage_exists
        OR s.relnamespace OPERATOR(pg_catalog.<>) '@extschema@'::pg_catalog.regnamespace
        OR s.relkind OPERATOR(pg_catalog.<>) 'r'
        OR s.table_scope OPERATOR(pg_catalog.<>) (s.nkeys OPERATOR(pg_catalog.=) 0)
    UNION ALL
    -- its columns: the keys (attnum 1 .. n; table scope: one boolean),
    -- then the fence, nothing dropped in between
    SELECT s.relid,
           pg_catalog.format('the storage table %s of fencing scope %L does not have the columns of the scope (%s)',
                             s.storage::pg_catalog.regclass, s.scope_name, cols.why)
      FROM scoped s
      CROSS JOIN LATERAL (
            SELECT CASE
                     WHEN pg_catalog.count(*) FILTER (WHERE a.attisdropped) OPERATOR(pg_catalog.>) 0
                       THEN 'a column was dropped'
                     WHEN pg_catalog.count(*) OPERATOR(pg_catalog.<>)
                          (GREATEST(s.nkeys, 1) OPERATOR(pg_catalog.+) 1)
                       THEN pg_catalog.format('%s columns', pg_catalog.count(*))
                     WHEN pg_catalog.bool_or(a.attnum OPERATOR(pg_catalog.=) (GREATEST(s.nkeys, 1) OPERATOR(pg_catalog.+) 1)
                                             AND (a.attname OPERATOR(pg_catalog.<>) 'fence'
                                                  OR a.atttypid OPERATOR(pg_catalog.<>) '@extschema@.fence'::pg_catalog.regtype))
                       THEN 'no fence column of type @extschema@.fence last'
                     WHEN s.nkeys OPERATOR(pg_catalog.=) 0
                          AND NOT pg_catalog.bool_or(a.attnum OPERATOR(pg_catalog.=) 1
                                                     AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.bool'::pg_catalog.regtype)
                       THEN 'no boolean column first'
                   END AS why
              FROM pg_catalog.pg_attribute a
             WHERE a.attrelid OPERATOR(pg_catalog.=) s.storage
               AND a.attnum OPERATOR(pg_catalog.>) 0) AS cols
     WHERE s.registered AND s.ours AND cols.why IS NOT NULL
    UNION ALL
    -- each key column of the storage has the base type and collation of
    -- the table's key column
    SELECT s.relid,
           pg_catalog.format('key column %s of the storage table %s of fencing scope %L is of type %s%s, column %I of the table of type %s%s',
                             k.ord, s.storage::pg_catalog.regclass, s.scope_name,
                             sa.atttypid::pg_catalog.regtype,
                             CASE WHEN sa.attcollation OPERATOR(pg_catalog.<>) 0
                                  THEN ' COLLATE ' OPERATOR(pg_catalog.||) sa.attcollation::pg_catalog.regcollation::pg_catalog.text
                                  ELSE '' END,
                             k.name, b.base::pg_catalog.regtype,
                             CASE WHEN ta.attcollation OPERATOR(pg_catalog.<>) 0
                                  THEN ' COLLATE ' OPERATOR(pg_catalog.||) ta.attcollation::pg_catalog.regcollation::pg_catalog.text
                                  ELSE '' END)
      FROM scoped s
      CROSS JOIN LATERAL pg_catalog.unnest(s.key_columns) WITH ORDINALITY AS k(name, ord)
      JOIN pg_catalog.pg_attribute ta
        ON ta.attrelid OPERATOR(pg_catalog.=) s.relid
       AND ta.attname OPERATOR(pg_catalog.=) k.name
       AND NOT ta.attisdropped
      CROSS JOIN LATERAL (
            WITH RECURSIVE d(oid, basetype) AS (
                 SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                  WHERE ty.oid OPERATOR(pg_catalog.=) ta.atttypid
                 UNION ALL
                 SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                   JOIN d ON ty.oid OPERATOR(pg_catalog.=) d.basetype)
            SELECT d.oid AS base FROM d WHERE d.basetype OPERATOR(pg_catalog.=) 0) b
      LEFT JOIN pg_catalog.pg_attribute sa
        ON sa.attrelid OPERATOR(pg_catalog.=) s.storage
       AND sa.attnum OPERATOR(pg_catalog.=) k.ord
       AND NOT sa.attisdropped
     WHERE s.registered AND s.ours AND NOT s.table_scope
       AND sa.attnum IS NOT NULL
       AND (sa.atttypid OPERATOR(pg_catalog.<>) b.base
            OR sa.attcollation OPERATOR(pg_catalog.<>) ta.attcollation)
    UNION ALL
    -- its unique index on the key columns, and no other index
    SELECT s.relid,
           CASE WHEN ix.good OPERATOR(pg_catalog.=) 0
                THEN pg_catalog.format('the storage table %s of fencing scope %L has lost its unique index on the key columns',
                                       s.storage::pg_catalog.regclass, s.scope_name)
                ELSE pg_catalog.format('the storage table %s of fencing scope %L has other indexes',
                                       s.storage::pg_catalog.regclass, s.scope_name)
           END
      FROM scoped s
      CROSS JOIN LATERAL (
            SELECT pg_catalog.count(*) FILTER (
                       WHERE i.indisunique AND i.indisvalid AND i.indnullsnotdistinct
                         AND ic.relam OPERATOR(pg_catalog.=) (SELECT am.oid FROM pg_catalog.pg_am am
                                                               WHERE am.amname OPERATOR(pg_catalog.=) 'btree')
                         AND i.indexprs IS NULL AND i.indpred IS NULL
                         AND i.indkey::pg_catalog.text OPERATOR(pg_catalog.=)
                             (SELECT pg_catalog.string_agg(g::pg_catalog.text, ' ' ORDER BY g)
                                FROM pg_catalog.generate_series(1, GREATEST(s.nkeys, 1)) g)) AS good,
                   pg_catalog.count(*) AS total
              FROM pg_catalog.pg_index i
              JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
             WHERE i.indrelid OPERATOR(pg_catalog.=) s.storage) AS ix
     WHERE s.registered AND s.ours
       AND (ix.good OPERATOR(pg_catalog.=) 0 OR ix.total OPERATOR(pg_catalog.>) 1)
    UNION ALL
    -- nothing the guard would write behind the back of
    SELECT s.relid,
           pg_catalog.format('the storage table %s of fencing scope %L %s',
                             s.storage::pg_catalog.regclass, s.scope_name,
                             CASE WHEN s.relrowsecurity THEN 'has row security'
                                  WHEN s.relam OPERATOR(pg_catalog.<>)
                                       (SELECT am.oid FROM pg_catalog.pg_am am
                                         WHERE am.amname OPERATOR(pg_catalog.=) 'heap')
                                    THEN 'is not a heap table'
                                  ELSE 'has triggers' END)
      FROM scoped s
     WHERE s.registered AND s.ours
       AND (s.relrowsecurity
            OR s.relam OPERATOR(pg_catalog.<>) (SELECT am.oid FROM pg_catalog.pg_am am
                                                 WHERE am.amname OPERATOR(pg_catalog.=) 'heap')
            OR EXISTS (SELECT FROM pg_catalog.pg_trigger t
                        WHERE t.tgrelid OPERATOR(pg_catalog.=) s.storage
                          AND NOT (t.tgqual IS NULL
                                   AND pg_catalog.cardinality(t.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.=) 0
                                   AND t.tgfoid OPERATOR(pg_catalog.=) ANY
                                       (ARRAY(SELECT f.oid FROM fn f
                                               WHERE f.name OPERATOR(pg_catalog.=) 'local_state'
                                                 AND f.ours)))
                          -- Citus's own on a distributed storage (its shards are written)
                          AND NOT (t.tgisinternal
                                   AND t.tgfoid OPERATOR(pg_catalog.=) ANY
                                       (ARRAY(SELECT pr.oid FROM pg_catalog.pg_proc pr
                                               WHERE pr.proname OPERATOR(pg_catalog.=) 'citus_truncate_trigger'
                                                 AND pr.pronamespace OPERATOR(pg_catalog.=)
                                                     'pg_catalog'::pg_catalog.regnamespace)))))
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
    -- the scope's storage, as the guard will find it (scope_storage.c,
    -- scopes.c): registered, a heap table of schema fencing with the key
    -- columns' base types and collations and a fence column, its unique
    -- index on the key columns, and nothing the guard's direct writes
    -- would go behind the back of
    SELECT s.relid, s.problem
      FROM storage_problems s
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
                         ('fencing_ddl_guard_drop', 'sql_drop', 'ddl_guard_drop', NULL),
                         ('fencing_citus_ddl_end', 'ddl_command_end', 'citus_ddl_end',
                          '{CREATE TRIGGER,DROP TRIGGER,CREATE TABLE,ALTER TABLE}'),
                         ('fencing_drop_extension', 'ddl_command_start', 'drop_extension_start',
                          '{DROP EXTENSION}'),
                         ('fencing_indirect_ddl_start', 'ddl_command_start', 'ddl_guard_start',
                          '{ALTER TYPE}'),
                         ('fencing_indirect_ddl_end', 'ddl_command_end', 'ddl_guard_end',
                          '{ALTER TYPE,ALTER FUNCTION,ALTER ROUTINE,CREATE SCHEMA}')) e(name, event, fname, tags)
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
    'one row per protected table: scope, partitions and inheritance children (partitions), and whether its guard is intact, its scope''s storage included (problem says what is wrong)';

-- (end of health section)

------------------------------------------------------------------------------
-- Storage tables' row types are no members of the extension
------------------------------------------------------------------------------

-- On PostgreSQL 18, a table created while an extension script runs makes
-- its row type (and that type's array type) a member of the extension.
-- The update from 1.0 created the storage of every converted scope so:
-- the tables were taken out of the extension, their row types were not,
-- and DROP EXTENSION fencing, dropping the storage first, then found that
-- the extension depended on them.  Those row types leave the extension
-- (ALTER EXTENSION ... DROP TYPE takes the array type with it).
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT c.reltype::pg_catalog.regtype AS rowtype
          FROM @extschema@.scope_storage s
          JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) s.storage::pg_catalog.oid
          JOIN pg_catalog.pg_depend d
            ON d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) c.reltype
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.deptype OPERATOR(pg_catalog.=) 'e'
          JOIN pg_catalog.pg_extension e
            ON e.oid OPERATOR(pg_catalog.=) d.refobjid AND e.extname OPERATOR(pg_catalog.=) 'fencing'
         ORDER BY 1
    LOOP
        EXECUTE pg_catalog.format('ALTER EXTENSION fencing DROP TYPE %s', r.rowtype);
    END LOOP;
END
$$;

-- (end of section on storage row types)
