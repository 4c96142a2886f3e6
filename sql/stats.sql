-- fencing.stats and fencing.idempotency_stats: counters in shared memory.
-- This cluster preloads fencing (shared_preload_libraries = 'fencing');
-- test/t/020_stats_preload.pl covers a server without the preload.
SHOW fencing.stats_max_tables;

-- Start from zero: other tests of this run may have counted already.
SELECT fencing.stats_reset();
SELECT * FROM fencing.stats
 WHERE accepted + rejected_stale + rejected_missing + bypassed > 0;
SELECT * FROM fencing.idempotency_stats;

-- The columns users program against
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid IN ('fencing.stats'::regclass, 'fencing.idempotency_stats'::regclass)
   AND a.attnum > 0
 ORDER BY a.attrelid::regclass::text, a.attnum;

-- A reset is idempotent and returns nothing
SELECT fencing.stats_reset();
SELECT count(*) AS rows_with_counts FROM fencing.stats
 WHERE accepted + rejected_stale + rejected_missing + bypassed > 0;

-- Everyone may read the statistics; only superusers and the extension
-- owner may reset them.
CREATE ROLE regress_fencing_stats_reader;
GRANT USAGE ON SCHEMA fencing TO regress_fencing_stats_reader;
SELECT pg_catalog.has_table_privilege('regress_fencing_stats_reader',
                                      'fencing.stats', 'SELECT') AS read_stats,
       pg_catalog.has_table_privilege('regress_fencing_stats_reader',
                                      'fencing.idempotency_stats', 'SELECT') AS read_idem,
       pg_catalog.has_table_privilege('regress_fencing_stats_reader',
                                      'fencing.stats', 'INSERT') AS write_stats,
       pg_catalog.has_function_privilege('regress_fencing_stats_reader',
                                         'fencing.stats_reset()', 'EXECUTE') AS reset;
SET SESSION AUTHORIZATION regress_fencing_stats_reader;
SELECT count(*) >= 0 AS can_read FROM fencing.stats;
SELECT * FROM fencing.idempotency_stats;
SELECT fencing.stats_reset();
DO $$
BEGIN
    PERFORM fencing.stats_reset();
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE 'stats_reset refused with SQLSTATE %', SQLSTATE;
END
$$;
RESET SESSION AUTHORIZATION;
DROP OWNED BY regress_fencing_stats_reader;
DROP ROLE regress_fencing_stats_reader;

-- Every object of this feature has a comment
SELECT p.oid::regprocedure::text AS object, d.description IS NOT NULL AS commented
  FROM pg_catalog.pg_proc AS p
  LEFT JOIN pg_catalog.pg_description AS d
         ON d.objoid = p.oid AND d.classoid = 'pg_catalog.pg_proc'::regclass
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('stats_internal', 'idempotency_stats_internal', 'stats_reset')
UNION ALL
SELECT c.oid::regclass::text, pg_catalog.obj_description(c.oid, 'pg_class') IS NOT NULL
  FROM pg_catalog.pg_class AS c
 WHERE c.oid IN ('fencing.stats'::regclass, 'fencing.idempotency_stats'::regclass)
 ORDER BY 1;

-- Volatility and parallel safety of the C functions
SELECT p.proname, p.provolatile, p.proparallel
  FROM pg_catalog.pg_proc AS p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('stats_internal', 'idempotency_stats_internal', 'stats_reset')
 ORDER BY p.proname;
