-- One grant, many transactions: fencing.lease_next() gives the holder of
-- a live lease a new token for each transaction, so that a strict table
-- accepts each once, and proves the lease was still held when it was
-- taken.
\set SHOW_CONTEXT never
SET search_path = public, fencing;

CREATE TABLE ln_jobs (id int PRIMARY KEY, state text, fence fence);
INSERT INTO ln_jobs VALUES (1, 'new', NULL);
SELECT protect('ln_jobs', lease => 'ln-worker');

SELECT lease_acquire('ln-worker', 'worker-a', '1 hour') AS t1 \gset
SELECT lease_next('ln-worker', :'t1') AS t2 \gset
SELECT :'t2'::fence > :'t1'::fence AS newer,
       lease_check('ln-worker', :'t2') AS new_current,
       lease_check('ln-worker', :'t1') AS old_current;

-- each transaction with its own token: strict, and no refusal
BEGIN;
SELECT set_token(:'t2') IS NOT NULL AS set;
UPDATE ln_jobs SET state = 'step 1' WHERE id = 1;
COMMIT;
SELECT lease_next('ln-worker', :'t2', '1 hour') AS t3 \gset
BEGIN;
SELECT set_token(:'t3') IS NOT NULL AS set;
UPDATE ln_jobs SET state = 'step 2' WHERE id = 1;
COMMIT;
-- in one statement, pipelined with the transaction
BEGIN;
SELECT set_token(lease_next('ln-worker', :'t3')) AS t4 \gset
UPDATE ln_jobs SET state = 'step 3' WHERE id = 1;
COMMIT;
SELECT state FROM ln_jobs;

-- a token that is no longer current gets none, and writes nothing
SELECT lease_next('ln-worker', :'t2') IS NULL AS refused;
BEGIN;
SET LOCAL fencing.token = :'t3';
\set VERBOSITY sqlstate
UPDATE ln_jobs SET state = 'late' WHERE id = 1;
\set VERBOSITY default
ROLLBACK;

-- the next grant beats every token of the grant before it
SELECT lease_release('ln-worker', :'t4');
SELECT lease_next('ln-worker', :'t4') IS NULL AS after_release;
SELECT lease_acquire('ln-worker', 'worker-b', '1 hour') AS b1 \gset
SELECT :'b1'::fence > :'t4'::fence AS beats;

-- a new epoch (a failover, bump_epoch()) starts the counter again above
SELECT bump_epoch() > 0 AS bumped;
SELECT lease_next('ln-worker', :'b1') AS b2 \gset
SELECT epoch(:'b2') > epoch(:'b1') AS new_epoch, counter(:'b2') AS counter;

-- an expired lease gets none; a NULL token neither
SELECT lease_acquire('ln-short', 'worker-a', '10 ms') AS s1 \gset
SELECT pg_sleep(0.05);
SELECT lease_next('ln-short', :'s1') IS NULL AS expired,
       lease_next('ln-short', NULL) IS NULL AS no_token;
SELECT lease_next('ln-short', :'s1', '-1 s');

-- another role's lease: 42501, as for lease_renew()
CREATE ROLE regress_ln_other;
SET ROLE regress_ln_other;
\set VERBOSITY terse
SELECT lease_next('ln-worker', :'b2');
\set VERBOSITY default
RESET ROLE;
DROP ROLE regress_ln_other;

SELECT unprotect('ln_jobs');
DROP TABLE ln_jobs;
DELETE FROM fencing.leases WHERE name IN ('ln-worker', 'ln-short');
