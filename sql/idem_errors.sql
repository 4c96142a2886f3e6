--
-- Idempotency keys: every error a caller can meet, with its SQLSTATE.
--
\set SHOW_CONTEXT never
-- The SQLSTATE and the table of an error, for the checks at the end.
CREATE FUNCTION pg_temp.sqlstate_of(query text, OUT code text, OUT tbl text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE query;
    code := 'none';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, tbl = TABLE_NAME;
END
$$;
TRUNCATE fencing.idempotency_keys;
SELECT setval('fencing.idempotency_claim_seq', 100, false) IS NOT NULL AS restarted;

-- 22004: a NULL where a value is required
SELECT * FROM fencing.idem_begin(NULL, '{}');
SELECT * FROM fencing.idem_begin('k', NULL);
SELECT * FROM fencing.idem_begin('k', '{}', lease => NULL);
SELECT * FROM fencing.idem_begin('k', '{}', retention => NULL);
SELECT * FROM fencing.idem_begin('k', '{}', wait => NULL);
SELECT fencing.idem_checkpoint(NULL, '1:1', 'x');
SELECT fencing.idem_checkpoint('k', NULL, 'x');
SELECT fencing.idem_complete('k', NULL, '{}');
SELECT fencing.idem_abandon('k', NULL);
SELECT fencing.idem_purge(NULL);

-- 22023: an empty or over-long key, a lease, retention or batch that is
-- not positive
SELECT * FROM fencing.idem_begin('', '{}');
SELECT * FROM fencing.idem_begin(repeat('k', 256), '{}');
SELECT fencing.idem_complete(repeat('k', 256), '1:1', '{}');
SELECT * FROM fencing.idem_begin('k', '{}', lease => '0');
SELECT * FROM fencing.idem_begin('k', '{}', lease => '-1 second');
SELECT * FROM fencing.idem_begin('k', '{}', retention => '0');
SELECT * FROM fencing.idem_begin('k', '{}', retention => '1 month -30 days');
SELECT fencing.idem_checkpoint('k', '1:1', 'x', lease => '-1 minute');
SELECT fencing.idem_purge(0);
-- 255 characters are fine, multibyte ones too; nothing was written above
SELECT state FROM fencing.idem_begin(repeat('k', 255), '{}');
SELECT state FROM fencing.idem_begin(repeat('é', 255), '{}');
SELECT count(*) FROM fencing.idempotency_keys;

-- SF003: the key was used for another request, whatever its state
SELECT state, token FROM fencing.idem_begin('order:1', '{"sku": "A", "qty": 1}') \gset
SELECT * FROM fencing.idem_begin('order:1', '{"sku": "A", "qty": 2}');
SELECT * FROM fencing.idem_begin('order:1', '{"sku": "A", "qty": 2}', wait => false);
SELECT fencing.idem_complete('order:1', :'token', '{"order_id": 17}');
SELECT * FROM fencing.idem_begin('order:1', '{"sku": "A", "qty": 2}');
SELECT state FROM fencing.idem_begin('order:2', '{"sku": "B"}', lease => '1 millisecond');
SELECT pg_sleep(0.01);
SELECT * FROM fencing.idem_begin('order:2', '{"sku": "C"}');
-- JSON that differs only in key order and white space is the same request
SELECT state, result FROM fencing.idem_begin('order:1', '{"qty":1,   "sku":"A"}');

-- SF004: another owner holds the key and its lease has not run out
SELECT state, token FROM fencing.idem_begin('order:3', '{}') \gset
SELECT * FROM fencing.idem_begin('order:3', '{}');
SELECT * FROM fencing.idem_begin('order:3', '{}', wait => false);

-- SF001: a token that is not the key's current running claim
SELECT fencing.idem_checkpoint('order:3', '1:1', 'x');
SELECT fencing.idem_complete('order:3', fencing.next(:'token'), '{}');
SELECT fencing.idem_abandon('order:3', '0:0');
-- the claim completed the key: it cannot complete it again
SELECT fencing.idem_complete('order:3', :'token', '{"n": 1}');
SELECT fencing.idem_complete('order:3', :'token', '{"n": 2}');
SELECT fencing.idem_checkpoint('order:3', :'token', 'late');
SELECT fencing.idem_abandon('order:3', :'token');
SELECT state, result FROM fencing.idem_begin('order:3', '{}');
-- an abandoned claim is no claim
SELECT state, token FROM fencing.idem_begin('order:4', '{}') \gset
SELECT fencing.idem_abandon('order:4', :'token');
SELECT fencing.idem_complete('order:4', :'token', '{}');
-- keys that do not exist, or have expired
SELECT fencing.idem_complete('no-such-key', '1:1', '{}');
SELECT state, token FROM fencing.idem_begin('order:5', '{}', lease => '1 millisecond',
                                            retention => '1 millisecond') \gset
SELECT pg_sleep(0.01);
SELECT fencing.idem_checkpoint('order:5', :'token', 'too late');

-- A failed call writes nothing.
SELECT key, state, result, recovery_point, locked_until IS NULL AS unlocked
  FROM fencing.idempotency_keys WHERE key LIKE 'order:%' ORDER BY key;

-- The SQLSTATEs, and the table in the error fields of SF001.  (order:5 has
-- expired, so it starts afresh; order:2's lease ran out, so it resumes, and
-- then it is in progress.)
SELECT e.code, e.tbl, t.q
  FROM (VALUES ($$SELECT fencing.idem_begin(NULL, '{}')$$),
               ($$SELECT fencing.idem_complete('order:3', NULL, '{}')$$),
               ($$SELECT fencing.idem_begin('', '{}')$$),
               ($$SELECT fencing.idem_begin('k', '{}', lease => '0')$$),
               ($$SELECT fencing.idem_purge(-1)$$),
               ($$SELECT fencing.idem_begin('order:1', '{"sku": "Z"}')$$),
               ($$SELECT fencing.idem_begin('order:5', '{}')$$),
               ($$SELECT fencing.idem_begin('order:2', '{"sku": "B"}', lease => '1 hour')$$),
               ($$SELECT fencing.idem_begin('order:2', '{"sku": "B"}', wait => false)$$),
               ($$SELECT fencing.idem_complete('order:3', '0:1', '{}')$$)) AS t(q),
       LATERAL pg_temp.sqlstate_of(t.q) AS e;
