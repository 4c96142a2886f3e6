--
-- Idempotency keys: the direct path (no SPI) for new keys and claim
-- updates, its edges, and the SPI path it falls back to.
--
\set SHOW_CONTEXT never
TRUNCATE fencing.idempotency_keys;
SELECT setval('fencing.idempotency_claim_seq', 700, false) IS NOT NULL AS restarted;

-- Begin and complete in one statement: the completion sees the row the
-- begin wrote a moment before, in the same command.
SELECT fencing.idem_complete('same:1', b.token, '"one statement"')
  FROM fencing.idem_begin('same:1', '{}') AS b;
SELECT state, result FROM fencing.idem_begin('same:1', '{}');

-- REPEATABLE READ: the transaction sees its own rows, written after its
-- snapshot was taken, and its checkpoint and completion find them.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM fencing.idempotency_keys;
SELECT state, token AS rr FROM fencing.idem_begin('rr:1', '{}') \gset
SELECT fencing.idem_checkpoint('rr:1', :'rr', 'step-1');
SELECT fencing.idem_complete('rr:1', :'rr', '"rr"');
SELECT state, result FROM fencing.idem_begin('rr:1', '{}');
COMMIT;

-- A rolled-back savepoint takes the row with it: the claim is gone.
BEGIN;
SAVEPOINT s;
SELECT state, token AS sp FROM fencing.idem_begin('sp:1', '{}') \gset
ROLLBACK TO SAVEPOINT s;
SELECT fencing.idem_complete('sp:1', :'sp', '"lost"');
ROLLBACK;
BEGIN;
SELECT state, token AS sp FROM fencing.idem_begin('sp:2', '{}') \gset
SAVEPOINT s;
SELECT fencing.idem_checkpoint('sp:2', :'sp', 'rolled back');
ROLLBACK TO SAVEPOINT s;
SELECT fencing.idem_complete('sp:2', :'sp', '"kept"');
COMMIT;
SELECT key, state, result, recovery_point FROM fencing.idempotency_keys
 WHERE key LIKE 'sp:%' ORDER BY key;

-- TRUNCATE between begin and completion, in one transaction: the key is
-- gone, and the completion says so (it does not look for the old row).
BEGIN;
SELECT state, token AS tr FROM fencing.idem_begin('tr:1', '{}') \gset
TRUNCATE fencing.idempotency_keys;
SELECT fencing.idem_complete('tr:1', :'tr', '"x"');
ROLLBACK;

-- A checkpoint whose lease outlives the key moves expires_at, an indexed
-- column: not a HOT update, so both indexes get entries for the new
-- version, which the primary key and the expiry index then find (and the
-- completion after it too).
SELECT state, token AS nh FROM fencing.idem_begin('nonhot:1', '{}', lease => '1 minute',
                                                  retention => '1 minute') \gset
SELECT fencing.idem_checkpoint('nonhot:1', :'nh', 'long', lease => '2 hours');
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF)
SELECT key, recovery_point FROM fencing.idempotency_keys WHERE key = 'nonhot:1';
SELECT key, recovery_point FROM fencing.idempotency_keys WHERE key = 'nonhot:1';
EXPLAIN (COSTS OFF)
SELECT key FROM fencing.idempotency_keys
 WHERE expires_at BETWEEN now() + interval '90 minutes'
                      AND now() + interval '3 hours';
SELECT key FROM fencing.idempotency_keys
 WHERE expires_at BETWEEN now() + interval '90 minutes'
                      AND now() + interval '3 hours';
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT fencing.idem_complete('nonhot:1', :'nh', '"after a non-HOT update"');
SELECT state, result FROM fencing.idem_begin('nonhot:1', '{}');

-- A table that has grown an index (or a trigger, or row security) is
-- written through SPI, with the same answers.
CREATE INDEX idem_extra ON fencing.idempotency_keys (created_at);
SELECT state, token AS spi FROM fencing.idem_begin('spi:1', '{"n": 1}') \gset
\echo :state :spi
SELECT * FROM fencing.idem_begin('spi:1', '{"n": 1}', wait => false);
SELECT * FROM fencing.idem_begin('spi:1', '{"n": 2}');
SELECT fencing.idem_checkpoint('spi:1', :'spi', 'half', lease => '1 hour');
SELECT fencing.idem_complete('spi:1', fencing.next(:'spi'), '"no"');
SELECT fencing.idem_complete('spi:1', :'spi', '"yes"');
SELECT fencing.idem_complete('spi:1', :'spi', '"again"');
SELECT state, result, recovery_point FROM fencing.idem_begin('spi:1', '{"n": 1}');
DROP INDEX fencing.idem_extra;

-- And the same answers on the direct path again.
SELECT state, token AS dir FROM fencing.idem_begin('dir:1', '{"n": 1}') \gset
\echo :state :dir
SELECT * FROM fencing.idem_begin('dir:1', '{"n": 1}', wait => false);
SELECT * FROM fencing.idem_begin('dir:1', '{"n": 2}');
SELECT fencing.idem_checkpoint('dir:1', :'dir', 'half', lease => '1 hour');
SELECT fencing.idem_complete('dir:1', fencing.next(:'dir'), '"no"');
SELECT fencing.idem_complete('dir:1', :'dir', '"yes"');
SELECT fencing.idem_complete('dir:1', :'dir', '"again"');
SELECT state, result, recovery_point FROM fencing.idem_begin('dir:1', '{"n": 1}');

-- A read-only transaction may not begin or complete a key (25006), on
-- either path.
SELECT state, token AS ro FROM fencing.idem_begin('ro:1', '{}') \gset
BEGIN READ ONLY;
SELECT * FROM fencing.idem_begin('ro:2', '{}');
ROLLBACK;
BEGIN READ ONLY;
SELECT fencing.idem_complete('ro:1', :'ro', '"read only"');
ROLLBACK;
SELECT key, state FROM fencing.idempotency_keys WHERE key LIKE 'ro:%';

-- A table published for updates without a replica identity refuses the
-- update, as UPDATE would (55000).
SET client_min_messages = error;
CREATE PUBLICATION idem_pub FOR TABLE fencing.idempotency_keys;
RESET client_min_messages;
ALTER TABLE fencing.idempotency_keys REPLICA IDENTITY NOTHING;
SELECT fencing.idem_complete('ro:1', :'ro', '"published"');
ALTER TABLE fencing.idempotency_keys REPLICA IDENTITY DEFAULT;
SELECT fencing.idem_complete('ro:1', :'ro', '"published"');
DROP PUBLICATION idem_pub;
SELECT key, state, result FROM fencing.idempotency_keys WHERE key LIKE 'ro:%';

-- A NOT NULL that a DBA put on a column the helpers leave empty is
-- honoured on the direct path too (as the executor would: 23502).
TRUNCATE fencing.idempotency_keys;
ALTER TABLE fencing.idempotency_keys ALTER COLUMN recovery_point SET NOT NULL;
SELECT * FROM fencing.idem_begin('nn:1', '{}');
ALTER TABLE fencing.idempotency_keys ALTER COLUMN recovery_point DROP NOT NULL;
SELECT count(*) FROM fencing.idempotency_keys WHERE key = 'nn:1';

TRUNCATE fencing.idempotency_keys;
