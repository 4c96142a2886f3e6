-- fencing.stats and fencing.idempotency_stats: counters in shared memory.
-- This cluster preloads fencing (shared_preload_libraries = 'fencing');
-- test/t/020_stats_preload.pl covers a server without the preload.
SHOW fencing.stats_max_tables;

-- This file never calls fencing.stats_reset(): `make installcheck` may run
-- against a server of yours, and the reset zeroes the counters of every
-- database.  What the reset does is tested on a cluster of its own
-- (test/t/083_stats_reset.pl); the counting itself by the files that count
-- (guard_bypass, idem_stats, lease_stats, stats_forget), on tables of
-- their own or as differences.

-- The columns users program against
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) AS type
  FROM pg_catalog.pg_attribute AS a
 WHERE a.attrelid IN ('fencing.stats'::regclass, 'fencing.idempotency_stats'::regclass)
   AND a.attnum > 0
 ORDER BY a.attrelid::regclass::text, a.attnum;

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
SELECT count(*) = 1 AS can_read_idem FROM fencing.idempotency_stats;
-- (refused when the function is initialized, before it runs; were the
-- reader allowed, the WHERE clause would keep it from resetting, and the
-- output would differ)
SELECT fencing.stats_reset()
 WHERE NOT pg_catalog.has_function_privilege('fencing.stats_reset()', 'EXECUTE');
DO $$
BEGIN
    IF pg_catalog.has_function_privilege('fencing.stats_reset()', 'EXECUTE') THEN
        RAISE EXCEPTION 'the reader may reset the statistics';
    END IF;
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
   AND p.proname IN ('table_counters', 'idempotency_counters', 'stats_reset')
UNION ALL
SELECT c.oid::regclass::text, pg_catalog.obj_description(c.oid, 'pg_class') IS NOT NULL
  FROM pg_catalog.pg_class AS c
 WHERE c.oid IN ('fencing.stats'::regclass, 'fencing.idempotency_stats'::regclass)
 ORDER BY 1;

-- Volatility and parallel safety of the C functions
SELECT p.proname, p.provolatile, p.proparallel
  FROM pg_catalog.pg_proc AS p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('table_counters', 'idempotency_counters', 'stats_reset')
 ORDER BY p.proname;
