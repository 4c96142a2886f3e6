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
