--
-- Idempotency keys: the life of a key, the two usage patterns, what is
-- stored, the summary and purge.
--
-- Claim tokens are (E, n): E from fencing.idempotency_claim_seq for every
-- claim issued, n the claim's number for its key; start afresh so that
-- the tokens below are stable.
TRUNCATE fencing.idempotency_keys;
SELECT setval('fencing.idempotency_claim_seq', 1, false) IS NOT NULL AS restarted;

-- A new key: started, with a claim token.
SELECT state, token, result, recovery_point, expires_at > now() AS expires_later
  FROM fencing.idem_begin('refund:8842', '{"amount_cents": 1250, "currency": "EUR"}');

-- The owner records progress, then the result.
SELECT fencing.idem_checkpoint('refund:8842', '1:1', 'psp-called');
SELECT fencing.idem_complete('refund:8842', '1:1', '{"psp_ref": "re_123"}');

-- A retry of the same request (key order and white space do not matter):
-- done, with the recorded result, and no token.
SELECT state, token, result, recovery_point
  FROM fencing.idem_begin('refund:8842', '{ "currency":"EUR",  "amount_cents":1250 }');
SELECT state, token, result
  FROM fencing.idem_begin('refund:8842', '{"amount_cents": 1250, "currency": "EUR"}',
                          wait => false);

-- What is stored: the fingerprint is SHA-256 of the jsonb text in UTF-8.
SELECT key, state, result, claim, recovery_point,
       locked_until IS NULL AS unlocked,
       request_hash = sha256(convert_to('{"currency": "EUR", "amount_cents": 1250}'::jsonb::text, 'UTF8')) AS hash_matches,
       expires_at > created_at AS expires_later,
       updated_at >= created_at AS updated_later
  FROM fencing.idempotency_keys;

-- The single-transaction pattern: begin, business write, complete, commit.
CREATE TABLE refunds (id text PRIMARY KEY, amount_cents int);
BEGIN;
SELECT state, token FROM fencing.idem_begin('refund:9001', '{"amount_cents": 500}') \gset
INSERT INTO refunds VALUES ('r-9001', 500);
SELECT fencing.idem_complete('refund:9001', :'token', '{"refund_id": "r-9001"}');
COMMIT;
SELECT state, result FROM fencing.idem_begin('refund:9001', '{"amount_cents": 500}');
SELECT * FROM refunds;

-- A rolled-back attempt leaves no trace: the next one starts afresh.
BEGIN;
SELECT state, token FROM fencing.idem_begin('refund:9002', '{"amount_cents": 700}');
ROLLBACK;
SELECT count(*) FROM fencing.idempotency_keys WHERE key = 'refund:9002';
SELECT state, token FROM fencing.idem_begin('refund:9002', '{"amount_cents": 700}');

-- (Tokens come from a sequence, and a begin that finds its key already
-- there uses one up: from here on the script keeps them in variables.)

-- An error worth replaying is a result too; so is SQL NULL.
SELECT claim AS token FROM fencing.idempotency_keys WHERE key = 'refund:9002' \gset
SELECT fencing.idem_complete('refund:9002', :'token', '{"error": "card_declined"}');
SELECT state, result FROM fencing.idem_begin('refund:9002', '{"amount_cents": 700}');
SELECT state, token FROM fencing.idem_begin('ping:1', 'null') \gset
\echo :state :token
SELECT fencing.idem_complete('ping:1', :'token', NULL);
SELECT state, token, result IS NULL AS no_result FROM fencing.idem_begin('ping:1', 'null');

-- Abandon: the next caller resumes at once, with a higher claim (a new
-- epoch, and the counter says it is the key's second, third ... claim)
-- and the last recovery point.
SELECT state, token FROM fencing.idem_begin('refund:9003', '{"amount_cents": 900}') \gset
\echo :state :token
SELECT fencing.idem_checkpoint('refund:9003', :'token', 'ledger-written');
SELECT fencing.idem_abandon('refund:9003', :'token');
SELECT state, token, recovery_point
  FROM fencing.idem_begin('refund:9003', '{"amount_cents": 900}') \gset
\echo :state :token :recovery_point
SELECT fencing.idem_abandon('refund:9003', :'token');
SELECT state, token, recovery_point
  FROM fencing.idem_begin('refund:9003', '{"amount_cents": 900}') \gset
\echo :state :token :recovery_point
SELECT fencing.idem_complete('refund:9003', :'token', '{"refund_id": "r-9003"}');
SELECT state, token, result, recovery_point
  FROM fencing.idem_begin('refund:9003', '{"amount_cents": 900}');

-- The result columns and a call in the select list.
SELECT (fencing.idem_begin('refund:9003', '{"amount_cents": 900}')).state;

-- The summary: one key running (refund:9004, just begun), five done.
SELECT state FROM fencing.idem_begin('refund:9004', '{}');
SELECT running, running_unowned, done, expired_awaiting_purge,
       oldest_running_age >= '0'::interval AS has_age
  FROM fencing.idempotency_summary;

-- Expired keys count as absent before purge; purge deletes them.
-- (a key must outlive its lease: a short retention needs a short lease)
SELECT state, token FROM fencing.idem_begin('tmp:1', '{}', lease => '100 milliseconds',
                                            retention => '500 milliseconds');
SELECT state, token FROM fencing.idem_begin('tmp:2', '{}', lease => '100 milliseconds',
                                            retention => '500 milliseconds') \gset
\echo :state :token
SELECT fencing.idem_complete('tmp:2', :'token', '"first"');
SELECT pg_sleep(0.6);
SELECT running, done, expired_awaiting_purge FROM fencing.idempotency_summary;
-- a new incarnation, even with another request, and a claim of a new epoch
SELECT state, token, result FROM fencing.idem_begin('tmp:2', '{"other": true}');
SELECT fencing.idem_purge();
SELECT fencing.idem_purge();
SELECT key FROM fencing.idempotency_keys ORDER BY key;
SELECT running, done, expired_awaiting_purge FROM fencing.idempotency_summary;

-- purge in batches
SELECT count(*) FROM generate_series(1, 5) AS g,
       LATERAL fencing.idem_begin('batch:' || g, '{}', lease => '1 millisecond',
                                   retention => '1 millisecond');
SELECT pg_sleep(0.02);
SELECT fencing.idem_purge(2), fencing.idem_purge(2), fencing.idem_purge(2), fencing.idem_purge(2);

DROP TABLE refunds;
