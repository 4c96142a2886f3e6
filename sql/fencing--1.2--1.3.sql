/* sql/fencing--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.3'" to load this file. \quit

-- A fresh CREATE EXTENSION fencing runs fencing--1.0.sql and every update
-- script up to this one, so an updated database and a new one have the
-- same objects by construction.
--
-- One section per concern.  Each section qualifies every name
-- (@extschema@, pg_catalog) as the earlier scripts do.

------------------------------------------------------------------------------
-- Code the owner accepted stays the owner's (fencing.protected_tables)
------------------------------------------------------------------------------

-- What is wrong with the code of member's triggers, member protected under
-- root: a trigger whose function, or a function of whose WHEN clause,
-- belongs to a role that is neither a superuser nor a member of the
-- table's owner; NULL when nothing is.  The guard refuses writes through
-- such a trigger (SF005) by the same test.
CREATE FUNCTION @extschema@.trigger_code_problem(member pg_catalog.oid, root pg_catalog.oid)
    RETURNS text
    AS 'MODULE_PATHNAME', 'fencing_trigger_code_problem'
    LANGUAGE C STABLE STRICT PARALLEL SAFE;

-- The on-call view, redefined with the same columns: a guard is no longer
-- intact when a trigger of its table runs code that the table's owner no
-- longer controls.
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
           ('ddl_guard_drop', 'fencing_ddl_guard_drop'),
           ('citus_ddl_end', 'fencing_citus_ddl_end'),
           ('drop_extension_start', 'fencing_drop_extension_start'),
           ('local_state', 'fencing_local_state')
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
scoped AS MATERIALIZED (
    -- the key and table scope tables with their scope's registry entry
    SELECT p.relid, p.key_columns, q.scope_name,
           pg_catalog.cardinality(p.key_columns) AS nkeys,
           r.scope_name IS NOT NULL AS registered, r.table_scope,
           r.storage::pg_catalog.oid AS storage,
           c.oid IS NOT NULL AS storage_exists, c.relnamespace, c.relkind, c.relam,
           c.relrowsecurity, c.relname,
           c.relnamespace OPERATOR(pg_catalog.=) '@extschema@'::pg_catalog.regnamespace
           AND c.relkind OPERATOR(pg_catalog.=) 'r' AS ours
      FROM prot p
      JOIN @extschema@.protected q ON q.relid::pg_catalog.oid OPERATOR(pg_catalog.=) p.relid
      LEFT JOIN @extschema@.scope_storage r ON r.scope_name OPERATOR(pg_catalog.=) q.scope_name
      LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) r.storage
     WHERE p.key_columns IS NOT NULL
),
storage_problems (relid, problem) AS (
    SELECT s.relid,
           CASE WHEN NOT s.registered
                THEN pg_catalog.format('fencing scope %L is not registered in @extschema@.scope_storage',
                                       s.scope_name)
                WHEN NOT s.storage_exists
                THEN pg_catalog.format('the storage table of fencing scope %L is missing',
                                       s.scope_name)
                WHEN s.relnamespace OPERATOR(pg_catalog.<>) '@extschema@'::pg_catalog.regnamespace
                  OR s.relkind OPERATOR(pg_catalog.<>) 'r'
                THEN pg_catalog.format('the storage of fencing scope %L, %s, is not a table of schema @extschema@',
                                       s.scope_name, s.storage::pg_catalog.regclass)
                ELSE pg_catalog.format('fencing scope %L is a %s scope, and the table is protected in %s scope',
                                       s.scope_name,
                                       CASE WHEN s.table_scope THEN 'table' ELSE 'key' END,
                                       CASE WHEN s.nkeys OPERATOR(pg_catalog.=) 0 THEN 'table' ELSE 'key' END)
           END
      FROM scoped s
     WHERE NOT s.registered OR NOT s.storage_exists
        OR s.relnamespace OPERATOR(pg_catalog.<>) '@extschema@'::pg_catalog.regnamespace
        OR s.relkind OPERATOR(pg_catalog.<>) 'r'
        OR s.table_scope OPERATOR(pg_catalog.<>) (s.nkeys OPERATOR(pg_catalog.=) 0)
    UNION ALL
    -- its columns: the keys (attnum 1 .. n; table scope: one boolean),
    -- then the fence, nothing dropped in between
    SELECT s.relid,
           pg_catalog.format('the storage table %s of fencing scope %L does not have the columns of the scope (%s)',
                             s.storage::pg_catalog.regclass, s.scope_name, cols.why)
      FROM scoped s
      CROSS JOIN LATERAL (
            SELECT CASE
                     WHEN pg_catalog.count(*) FILTER (WHERE a.attisdropped) OPERATOR(pg_catalog.>) 0
                       THEN 'a column was dropped'
                     WHEN pg_catalog.count(*) OPERATOR(pg_catalog.<>)
                          (GREATEST(s.nkeys, 1) OPERATOR(pg_catalog.+) 1)
                       THEN pg_catalog.format('%s columns', pg_catalog.count(*))
                     WHEN pg_catalog.bool_or(a.attnum OPERATOR(pg_catalog.=) (GREATEST(s.nkeys, 1) OPERATOR(pg_catalog.+) 1)
                                             AND (a.attname OPERATOR(pg_catalog.<>) 'fence'
                                                  OR a.atttypid OPERATOR(pg_catalog.<>) '@extschema@.fence'::pg_catalog.regtype))
                       THEN 'no fence column of type @extschema@.fence last'
                     WHEN s.nkeys OPERATOR(pg_catalog.=) 0
                          AND NOT pg_catalog.bool_or(a.attnum OPERATOR(pg_catalog.=) 1
                                                     AND a.atttypid OPERATOR(pg_catalog.=) 'pg_catalog.bool'::pg_catalog.regtype)
                       THEN 'no boolean column first'
                   END AS why
              FROM pg_catalog.pg_attribute a
             WHERE a.attrelid OPERATOR(pg_catalog.=) s.storage
               AND a.attnum OPERATOR(pg_catalog.>) 0) AS cols
     WHERE s.registered AND s.ours AND cols.why IS NOT NULL
    UNION ALL
    -- each key column of the storage has the base type and collation of
    -- the table's key column
    SELECT s.relid,
           pg_catalog.format('key column %s of the storage table %s of fencing scope %L is of type %s%s, column %I of the table of type %s%s',
                             k.ord, s.storage::pg_catalog.regclass, s.scope_name,
                             sa.atttypid::pg_catalog.regtype,
                             CASE WHEN sa.attcollation OPERATOR(pg_catalog.<>) 0
                                  THEN ' COLLATE ' OPERATOR(pg_catalog.||) sa.attcollation::pg_catalog.regcollation::pg_catalog.text
                                  ELSE '' END,
                             k.name, b.base::pg_catalog.regtype,
                             CASE WHEN ta.attcollation OPERATOR(pg_catalog.<>) 0
                                  THEN ' COLLATE ' OPERATOR(pg_catalog.||) ta.attcollation::pg_catalog.regcollation::pg_catalog.text
                                  ELSE '' END)
      FROM scoped s
      CROSS JOIN LATERAL pg_catalog.unnest(s.key_columns) WITH ORDINALITY AS k(name, ord)
      JOIN pg_catalog.pg_attribute ta
        ON ta.attrelid OPERATOR(pg_catalog.=) s.relid
       AND ta.attname OPERATOR(pg_catalog.=) k.name
       AND NOT ta.attisdropped
      CROSS JOIN LATERAL (
            WITH RECURSIVE d(oid, basetype) AS (
                 SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                  WHERE ty.oid OPERATOR(pg_catalog.=) ta.atttypid
                 UNION ALL
                 SELECT ty.oid, ty.typbasetype FROM pg_catalog.pg_type ty
                   JOIN d ON ty.oid OPERATOR(pg_catalog.=) d.basetype)
            SELECT d.oid AS base FROM d WHERE d.basetype OPERATOR(pg_catalog.=) 0) b
      LEFT JOIN pg_catalog.pg_attribute sa
        ON sa.attrelid OPERATOR(pg_catalog.=) s.storage
       AND sa.attnum OPERATOR(pg_catalog.=) k.ord
       AND NOT sa.attisdropped
     WHERE s.registered AND s.ours AND NOT s.table_scope
       AND sa.attnum IS NOT NULL
       AND (sa.atttypid OPERATOR(pg_catalog.<>) b.base
            OR sa.attcollation OPERATOR(pg_catalog.<>) ta.attcollation)
    UNION ALL
    -- its unique index on the key columns, and no other index
    SELECT s.relid,
           CASE WHEN ix.good OPERATOR(pg_catalog.=) 0
                THEN pg_catalog.format('the storage table %s of fencing scope %L has lost its unique index on the key columns',
                                       s.storage::pg_catalog.regclass, s.scope_name)
                ELSE pg_catalog.format('the storage table %s of fencing scope %L has other indexes',
                                       s.storage::pg_catalog.regclass, s.scope_name)
           END
      FROM scoped s
      CROSS JOIN LATERAL (
            SELECT pg_catalog.count(*) FILTER (
                       WHERE i.indisunique AND i.indisvalid AND i.indnullsnotdistinct
                         AND ic.relam OPERATOR(pg_catalog.=) (SELECT am.oid FROM pg_catalog.pg_am am
                                                               WHERE am.amname OPERATOR(pg_catalog.=) 'btree')
                         AND i.indexprs IS NULL AND i.indpred IS NULL
                         AND i.indkey::pg_catalog.text OPERATOR(pg_catalog.=)
                             (SELECT pg_catalog.string_agg(g::pg_catalog.text, ' ' ORDER BY g)
                                FROM pg_catalog.generate_series(1, GREATEST(s.nkeys, 1)) g)) AS good,
                   pg_catalog.count(*) AS total
              FROM pg_catalog.pg_index i
              JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
             WHERE i.indrelid OPERATOR(pg_catalog.=) s.storage) AS ix
     WHERE s.registered AND s.ours
       AND (ix.good OPERATOR(pg_catalog.=) 0 OR ix.total OPERATOR(pg_catalog.>) 1)
    UNION ALL
    -- nothing the guard would write behind the back of
    SELECT s.relid,
           pg_catalog.format('the storage table %s of fencing scope %L %s',
                             s.storage::pg_catalog.regclass, s.scope_name,
                             CASE WHEN s.relrowsecurity THEN 'has row security'
                                  WHEN s.relam OPERATOR(pg_catalog.<>)
                                       (SELECT am.oid FROM pg_catalog.pg_am am
                                         WHERE am.amname OPERATOR(pg_catalog.=) 'heap')
                                    THEN 'is not a heap table'
                                  ELSE 'has triggers' END)
      FROM scoped s
     WHERE s.registered AND s.ours
       AND (s.relrowsecurity
            OR s.relam OPERATOR(pg_catalog.<>) (SELECT am.oid FROM pg_catalog.pg_am am
                                                 WHERE am.amname OPERATOR(pg_catalog.=) 'heap')
            OR EXISTS (SELECT FROM pg_catalog.pg_trigger t
                        WHERE t.tgrelid OPERATOR(pg_catalog.=) s.storage
                          AND NOT (t.tgqual IS NULL
                                   AND pg_catalog.cardinality(t.tgattr::pg_catalog.int2[]) OPERATOR(pg_catalog.=) 0
                                   AND t.tgfoid OPERATOR(pg_catalog.=) ANY
                                       (ARRAY(SELECT f.oid FROM fn f
                                               WHERE f.name OPERATOR(pg_catalog.=) 'local_state'
                                                 AND f.ours)))
                          -- Citus's own on a distributed storage (its shards are written)
                          AND NOT (t.tgisinternal
                                   AND t.tgfoid OPERATOR(pg_catalog.=) ANY
                                       (ARRAY(SELECT pr.oid FROM pg_catalog.pg_proc pr
                                               WHERE pr.proname OPERATOR(pg_catalog.=) 'citus_truncate_trigger'
                                                 AND pr.pronamespace OPERATOR(pg_catalog.=)
                                                     'pg_catalog'::pg_catalog.regnamespace)))))
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
       -- a guard itself may come later (Citus names a shard's guard_<shard>)
       AND o.tgfoid OPERATOR(pg_catalog.<>) ALL (SELECT f.oid FROM fn f
                                                  WHERE f.name OPERATOR(pg_catalog.=) 'guard'
                                                    AND f.ours)
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
    -- the scope's storage, as the guard will find it (scope_storage.c,
    -- scopes.c): registered, a heap table of schema fencing with the key
    -- columns' base types and collations and a fence column, its unique
    -- index on the key columns, and nothing the guard's direct writes
    -- would go behind the back of
    SELECT s.relid, s.problem
      FROM storage_problems s
    UNION ALL
    -- triggers whose code no longer belongs to a member of the table's
    -- owner (a membership revoked, a table or function given away)
    SELECT tr.relid, x.problem
      FROM tree tr
      CROSS JOIN LATERAL @extschema@.trigger_code_problem(tr.member, tr.relid) AS x(problem)
     WHERE x.problem IS NOT NULL
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
                         ('fencing_ddl_guard_drop', 'sql_drop', 'ddl_guard_drop', NULL),
                         ('fencing_citus_ddl_end', 'ddl_command_end', 'citus_ddl_end',
                          '{CREATE TRIGGER,DROP TRIGGER,CREATE TABLE,ALTER TABLE}'),
                         ('fencing_drop_extension', 'ddl_command_start', 'drop_extension_start',
                          '{DROP EXTENSION}'),
                         ('fencing_indirect_ddl_start', 'ddl_command_start', 'ddl_guard_start',
                          '{ALTER TYPE}'),
                         ('fencing_indirect_ddl_end', 'ddl_command_end', 'ddl_guard_end',
                          '{ALTER TYPE,ALTER FUNCTION,ALTER ROUTINE,CREATE SCHEMA}')) e(name, event, fname, tags)
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
    'one row per protected table: scope, partitions and inheritance children (partitions), and whether its guard is intact, its scope''s storage and its triggers'' code included (problem says what is wrong)';

-- (end of trigger code section)

------------------------------------------------------------------------------
-- The update re-checks what older rules let in
------------------------------------------------------------------------------

-- Objects that 1.2 accepted and 1.3's rules refuse: triggers on protected
-- tables running code of roles that are not members of the table's owner
-- (the guard refuses writes through them from now on, SF005), functions
-- whose SET clause sets fencing.token or fencing.bypass (refused inside
-- every writing statement from now on, 55P02), and stored settings of
-- either (ignored with a WARNING, as since 1.2).  Each is named with its
-- remedy; nothing is changed.
DO $check$
DECLARE
    r record;
BEGIN
    FOR r IN
        SELECT m.relid::pg_catalog.regclass AS tbl, x.problem
          FROM @extschema@.protected_members() m
          CROSS JOIN LATERAL @extschema@.trigger_code_problem(m.member, m.relid) AS x(problem)
         WHERE x.problem IS NOT NULL
         ORDER BY 1, 2
    LOOP
        RAISE WARNING 'protected table %: %', r.tbl, r.problem
            USING ERRCODE = 'SF005',
                  DETAIL = 'Writes to the table are refused (SF005) until the trigger runs code of a superuser or of a member of the table''s owner.',
                  HINT = 'Drop the trigger, or give its function to the table''s owner with ALTER FUNCTION ... OWNER TO.';
    END LOOP;
    FOR r IN
        SELECT p.oid::pg_catalog.regprocedure AS fn, c.setting
          FROM pg_catalog.pg_proc p
          CROSS JOIN LATERAL pg_catalog.unnest(p.proconfig) AS c(setting)
         WHERE c.setting OPERATOR(pg_catalog.~) '^fencing\.(token|bypass)='
         ORDER BY 1, 2
    LOOP
        RAISE WARNING 'function % sets % in its SET clause', r.fn, r.setting
            USING ERRCODE = '55P02',
                  DETAIL = 'A function''s SET clause cannot carry a write''s token: inside a writing statement it fails with 55P02.',
                  HINT = pg_catalog.format('ALTER FUNCTION %s RESET %s, and set the token in the writing session.',
                                           r.fn, pg_catalog.split_part(r.setting, '=', 1));
    END LOOP;
    FOR r IN
        SELECT s.setdatabase, s.setrole, c.setting
          FROM pg_catalog.pg_db_role_setting s
          CROSS JOIN LATERAL pg_catalog.unnest(s.setconfig) AS c(setting)
         WHERE c.setting OPERATOR(pg_catalog.~) '^fencing\.(token|bypass)='
         ORDER BY 1, 2, 3
    LOOP
        RAISE WARNING 'a stored setting % (%) is ignored', r.setting,
            CASE WHEN r.setrole OPERATOR(pg_catalog.=) 0 THEN 'ALTER DATABASE ... SET'
                 WHEN r.setdatabase OPERATOR(pg_catalog.=) 0 THEN 'ALTER ROLE ... SET'
                 ELSE 'ALTER ROLE ... IN DATABASE ... SET' END
            USING ERRCODE = '55P02',
                  DETAIL = 'fencing.token and fencing.bypass come from the writing session only.',
                  HINT = 'Remove it with ALTER DATABASE ... RESET or ALTER ROLE ... RESET (the view pg_db_role_setting lists them).';
    END LOOP;
END
$check$;

-- (end of re-check section)
