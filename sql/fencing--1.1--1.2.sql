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
