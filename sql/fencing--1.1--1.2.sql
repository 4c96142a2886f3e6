/* sql/fencing--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.2'" to load this file. \quit

-- A fresh CREATE EXTENSION fencing runs fencing--1.0.sql, then
-- fencing--1.0--1.1.sql, then this script, so an updated database and a
-- new one have the same objects by construction.
--
-- One section per concern.  Each section qualifies every name
-- (@extschema@, pg_catalog) as the earlier scripts do.

-- ---------------------------------------------------------------------------
-- Tokens from lock services (etcd, ZooKeeper, Redis): fence_from_zxid()
-- turns a ZooKeeper zxid and a generation into a fence; set_token() sets
-- the transaction's token from a value a driver binds as a parameter.
-- ---------------------------------------------------------------------------

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
