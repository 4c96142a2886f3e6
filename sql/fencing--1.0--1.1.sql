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

-- Every backend caches which relations are protected, and through which
-- table (src/protection.c); protect(), unprotect() and the DDL guard tell
-- the other backends when that changes.  This statement trigger does it
-- for any other writer of fencing.protected (pg_restore, the extension
-- owner by hand).
CREATE FUNCTION @extschema@.protected_changed() RETURNS trigger
    AS 'MODULE_PATHNAME', 'fencing_protected_changed' LANGUAGE C;
COMMENT ON FUNCTION @extschema@.protected_changed() IS
    'internal: statement trigger of fencing.protected; invalidates every backend''s cache of protections';
REVOKE ALL ON FUNCTION @extschema@.protected_changed() FROM PUBLIC;
CREATE TRIGGER protected_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.protected
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.protected_changed();
ALTER TABLE @extschema@.protected ENABLE ALWAYS TRIGGER protected_changed;

-- ddl_command_end now checks again, under the command's own locks, what
-- ddl_command_start only looked at without locking (nothing is locked for
-- unprotected tables): it fires for the trigger commands and ALTER
-- FOREIGN TABLE too.
DROP EVENT TRIGGER fencing_ddl_guard_end;
CREATE EVENT TRIGGER fencing_ddl_guard_end ON ddl_command_end
    WHEN TAG IN ('CREATE TABLE', 'CREATE FOREIGN TABLE', 'ALTER TABLE',
                 'ALTER FOREIGN TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER')
    EXECUTE FUNCTION @extschema@.ddl_guard_end();
ALTER EVENT TRIGGER fencing_ddl_guard_end ENABLE ALWAYS;
COMMENT ON FUNCTION @extschema@.ddl_guard_end() IS
    'event trigger: checks DDL on protected tables again under the command''s locks; guards partitions and inheritance children created, attached or inherited under a protected table (seeding the scopes from their rows); a detached partition or disinherited child stays protected';

-- The on-call view, redefined with the same columns: a guard is intact
-- only when every member of the tree (partitions and inheritance
-- children) has both guard triggers, exactly as protect() installs them
-- (function, timing, events, no WHEN, no column list, ENABLE ALWAYS);
-- fencing.guard() and fencing.guard_truncate() are still the extension's
-- C functions; no BEFORE ROW trigger fires after the guard; the fence
-- column has no default and is not generated, no key column is generated;
-- and the three event triggers are in place, ENABLE ALWAYS, calling the
-- extension's C functions for the events and commands they were made for.
--
-- The members of every protected tree come from a function, not a
-- recursive CTE of the view: the planner's guess for a recursive CTE over
-- a never-analyzed table (thousands of rows) made the view cost enough to
-- be JIT-compiled, seconds for a handful of rows.
CREATE FUNCTION @extschema@.protected_members(OUT relid pg_catalog.oid,
                                              OUT member pg_catalog.oid)
    RETURNS SETOF record
    LANGUAGE sql STABLE PARALLEL SAFE ROWS 10
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE tree (relid, member) AS (
        SELECT p.relid::pg_catalog.oid, p.relid::pg_catalog.oid
          FROM @extschema@.protected p
        UNION
        SELECT t.relid, i.inhrelid
          FROM tree t
          JOIN pg_catalog.pg_inherits i ON i.inhparent OPERATOR(pg_catalog.=) t.member
    )
    SELECT relid, member FROM tree
$$;
COMMENT ON FUNCTION @extschema@.protected_members() IS
    'every protected table with itself and its partitions and inheritance children at any level (for fencing.protected_tables)';

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
           ('ddl_guard_drop', 'fencing_ddl_guard_drop')
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
    -- the event triggers that guard the guard
    SELECT p.relid,
           pg_catalog.format('event trigger %s is missing, disabled or changed', e.name)
      FROM prot p
      CROSS JOIN (VALUES ('fencing_ddl_guard_start'::pg_catalog.name, 'ddl_command_start'::pg_catalog.name,
                          'ddl_guard_start'::pg_catalog.text,
                          '{ALTER TABLE,ALTER FOREIGN TABLE,DROP TRIGGER,ALTER TRIGGER,CREATE TRIGGER}'::pg_catalog.text[]),
                         ('fencing_ddl_guard_end', 'ddl_command_end', 'ddl_guard_end',
                          '{CREATE TABLE,CREATE FOREIGN TABLE,ALTER TABLE,ALTER FOREIGN TABLE,CREATE TRIGGER,ALTER TRIGGER}'),
                         ('fencing_ddl_guard_drop', 'sql_drop', 'ddl_guard_drop', NULL)) e(name, event, fname, tags)
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
    'one row per protected table: scope, partitions and inheritance children (partitions), and whether its guard is intact (problem says what is wrong)';

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
