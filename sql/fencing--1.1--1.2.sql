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
