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
