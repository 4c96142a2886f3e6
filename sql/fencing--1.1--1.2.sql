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
