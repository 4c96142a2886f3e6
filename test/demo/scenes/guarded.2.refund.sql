-- test/demo/scenes/guarded.2.refund.sql: step 2 of the guarded payout,
-- finishing the refund.
-- timeline: UPDATE r-1 paid
--
-- Run by test/demo/worker.sh after step 1 (guarded.1.ledger.sql), in a
-- transaction of its own.  Careless code again: no "AND state = 'pending'",
-- no fence in the SET list.  The guard compares the token with the fence
-- the refund row carries (row scope) and raises SF001 when it is not newer.

BEGIN;

SET LOCAL fencing.token = :'token';

UPDATE guarded.refunds
   SET state = 'paid',
       paid_by = :'worker'
 WHERE id = 'r-1';

COMMIT;
