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
