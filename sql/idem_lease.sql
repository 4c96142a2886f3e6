--
-- Idempotency keys: leases, resumes and stale owners; a multi-step
-- request that calls an external service (the refund of the incident).
--
\set SHOW_CONTEXT never
TRUNCATE fencing.idempotency_keys;
SELECT setval('fencing.idempotency_claim_seq', 200, false) IS NOT NULL AS restarted;

-- Worker A claims refund:8842 with a three-second lease, calls the payment
-- service, records that it did, and then stalls (a GC pause).
SELECT state, token AS a_token
  FROM fencing.idem_begin('refund:8842', '{"amount_cents": 1250}', lease => '3 seconds') \gset
\echo :state :a_token
SELECT fencing.idem_checkpoint('refund:8842', :'a_token', 'psp:re_123');
-- while A's lease is live, a retry is told to come back later
SELECT * FROM fencing.idem_begin('refund:8842', '{"amount_cents": 1250}');
SELECT pg_sleep(3.1);

-- A's lease has run out: worker B resumes with a higher claim and learns
-- how far A got, so it queries the payment service instead of paying twice.
SELECT state, token AS b_token, recovery_point
  FROM fencing.idem_begin('refund:8842', '{"amount_cents": 1250}') \gset
\echo :state :b_token :recovery_point
SELECT :'b_token'::fencing.fence OPERATOR(fencing.>) :'a_token'::fencing.fence AS b_beats_a;

-- A wakes up: every write with its old claim is refused.
SELECT fencing.idem_checkpoint('refund:8842', :'a_token', 'psp:re_999');
SELECT fencing.idem_complete('refund:8842', :'a_token', '{"psp_ref": "re_999"}');
SELECT fencing.idem_abandon('refund:8842', :'a_token');

-- B finishes; everybody now gets B's result.
SELECT fencing.idem_complete('refund:8842', :'b_token', '{"psp_ref": "re_123"}');
SELECT state, token, result, recovery_point
  FROM fencing.idem_begin('refund:8842', '{"amount_cents": 1250}');

-- An owner whose lease ran out may still finish as long as nobody took
-- the key over: its claim is still the current one.
SELECT state, token FROM fencing.idem_begin('refund:8843', '{}', lease => '1 millisecond') \gset
SELECT pg_sleep(0.01);
SELECT fencing.idem_complete('refund:8843', :'token', '"late but fine"');
SELECT state, result FROM fencing.idem_begin('refund:8843', '{}');

-- idem_checkpoint renews the lease: by the given lease ...
SELECT state, token FROM fencing.idem_begin('refund:8844', '{}', lease => '1 millisecond') \gset
SELECT fencing.idem_checkpoint('refund:8844', :'token', 'step-1', lease => '1 hour');
SELECT pg_sleep(0.01);
SELECT * FROM fencing.idem_begin('refund:8844', '{}');
SELECT locked_until - updated_at AS lease FROM fencing.idempotency_keys WHERE key = 'refund:8844';
-- ... or, without one, by the lease's current length; a NULL recovery
-- point keeps the last one (a heartbeat)
SELECT fencing.idem_checkpoint('refund:8844', :'token', NULL);
SELECT recovery_point, locked_until - updated_at AS lease
  FROM fencing.idempotency_keys WHERE key = 'refund:8844';
SELECT fencing.idem_checkpoint('refund:8844', :'token', 'step-2', '5 minutes');
SELECT recovery_point, locked_until - updated_at AS lease
  FROM fencing.idempotency_keys WHERE key = 'refund:8844';

-- The resumed caller gets the new lease, and the key's expiry never
-- moves earlier.
SELECT state, token FROM fencing.idem_begin('refund:8845', '{}', lease => '1 millisecond',
                                            retention => '2 hours') \gset
SELECT expires_at AS first_expiry FROM fencing.idempotency_keys WHERE key = 'refund:8845' \gset
SELECT pg_sleep(0.01);
SELECT state, token, recovery_point, expires_at >= :'first_expiry' AS kept
  FROM fencing.idem_begin('refund:8845', '{}', lease => '1 hour', retention => '1 hour');
SELECT locked_until - updated_at AS lease, expires_at = :'first_expiry' AS same_expiry
  FROM fencing.idempotency_keys WHERE key = 'refund:8845';

-- A key that expired before its owner completed it: it counts as absent,
-- a new incarnation starts with a new epoch, and the old owner is refused.
-- (The key cannot expire while the lease runs: idem_begin refuses a
-- retention shorter than the lease, see idem_owner.)
SELECT state, token AS old_token
  FROM fencing.idem_begin('refund:8846', '{}', lease => '1 millisecond',
                          retention => '1 millisecond') \gset
SELECT pg_sleep(0.01);
SELECT state, token AS new_token, recovery_point
  FROM fencing.idem_begin('refund:8846', '{}') \gset
\echo :state :new_token
SELECT fencing.epoch(:'new_token') > fencing.epoch(:'old_token') AS new_epoch;
SELECT fencing.idem_complete('refund:8846', :'old_token', '"stale"');
SELECT fencing.idem_complete('refund:8846', :'new_token', '"fresh"');
SELECT state, result FROM fencing.idem_begin('refund:8846', '{}');

-- Even after a purge, a key's next incarnation never reuses a claim.
SELECT state, token AS old_token
  FROM fencing.idem_begin('refund:8847', '{}', lease => '1 millisecond',
                          retention => '1 millisecond') \gset
SELECT pg_sleep(0.01);
SELECT fencing.idem_purge() > 0 AS purged;
SELECT state, token AS new_token FROM fencing.idem_begin('refund:8847', '{}') \gset
SELECT :'new_token'::fencing.fence OPERATOR(fencing.>) :'old_token'::fencing.fence AS higher;
SELECT fencing.idem_checkpoint('refund:8847', :'old_token', 'stale');

-- Resumes under a lease that keeps running out: the counter counts them.
SELECT state, token FROM fencing.idem_begin('refund:8848', '{}', lease => '1 millisecond');
SELECT pg_sleep(0.01);
SELECT state, fencing.counter(token) FROM fencing.idem_begin('refund:8848', '{}', lease => '1 millisecond');
SELECT pg_sleep(0.01);
SELECT state, fencing.counter(token) FROM fencing.idem_begin('refund:8848', '{}', lease => '1 millisecond');
-- the last claim's 1 ms lease must have run out before the summary looks
SELECT pg_sleep(0.01);
SELECT running, running_unowned >= 1 AS some_unowned
  FROM fencing.idempotency_summary;
