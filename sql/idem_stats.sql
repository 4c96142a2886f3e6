--
-- Idempotency keys: every outcome of idem_begin is counted once in
-- fencing.idempotency_stats (the test cluster preloads the library).
--
\set SHOW_CONTEXT never
\set VERBOSITY terse
TRUNCATE fencing.idempotency_keys;
SELECT fencing.stats_reset();

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

SELECT * FROM fencing.idempotency_stats;
TRUNCATE fencing.idempotency_keys;
