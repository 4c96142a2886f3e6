--
-- Idempotency keys: every outcome of idem_begin is counted once in
-- fencing.idempotency_stats (the test cluster preloads the library).
--
\set SHOW_CONTEXT never
\set VERBOSITY terse
TRUNCATE fencing.idempotency_keys;
-- The counters are the server's (every database's): what this file counts
-- is the difference from before, not the counters themselves (a reset
-- would zero every database's; test/t/083_stats_reset.pl tests it).
CREATE TEMP TABLE idem_before AS SELECT * FROM fencing.idempotency_stats;

SELECT state FROM fencing.idem_begin('stats:1', '{}');                  -- started
SELECT state FROM fencing.idem_begin('stats:1', '{}');                  -- SF004
SELECT state FROM fencing.idem_begin('stats:1', '{}', wait => false);   -- SF004
SELECT state FROM fencing.idem_begin('stats:1', '{"other": 1}');        -- SF003
SELECT claim AS token FROM fencing.idempotency_keys WHERE key = 'stats:1' \gset
SELECT fencing.idem_abandon('stats:1', :'token');
SELECT state FROM fencing.idem_begin('stats:1', '{}');                  -- resumed
SELECT claim AS token FROM fencing.idempotency_keys WHERE key = 'stats:1' \gset
SELECT fencing.idem_complete('stats:1', :'token', '"ok"');
SELECT state FROM fencing.idem_begin('stats:1', '{}');                  -- done
SELECT state FROM fencing.idem_begin('stats:1', '{}');                  -- done
-- argument errors are not outcomes
SELECT state FROM fencing.idem_begin('', '{}');

SELECT a.started - b.started AS started, a.replayed - b.replayed AS replayed,
       a.resumed - b.resumed AS resumed,
       a.reused_rejected - b.reused_rejected AS reused_rejected,
       a.in_progress_rejected - b.in_progress_rejected AS in_progress_rejected
  FROM fencing.idempotency_stats AS a, idem_before AS b;
DROP TABLE idem_before;
TRUNCATE fencing.idempotency_keys;
