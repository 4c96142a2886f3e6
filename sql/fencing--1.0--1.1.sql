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

-- (end of distributed tables section)
