/* sql/fencing--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.4'" to load this file. \quit

-- A fresh CREATE EXTENSION fencing runs fencing--1.0.sql and every update
-- script up to this one, so an updated database and a new one have the
-- same objects by construction.
--
-- One section per concern.  Each section qualifies every name
-- (@extschema@, pg_catalog) as the earlier scripts do.
