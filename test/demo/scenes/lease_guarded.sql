-- test/demo/scenes/lease_guarded.sql: the payout, under a lease the guard checks.
-- timeline: UPDATE r-1 paid + ledger -{amount} + debit
--
-- Run by test/demo/worker.sh (DEMO_LOCK=postgres) with the psql variables
-- worker, token (from fencing.lease_acquire) and amount (cents).  The
-- same code as scenes/leased.sql; but the tables are protected with
-- lease => 'lease_guarded:refund-r1', so the guard also refuses (SF001) a
-- token that is not the lease's current one while the lease is live
-- (fencing.lease_check): a holder whose lease ran out is stopped at its
-- first write, even when nobody else has written since.

BEGIN;

SET LOCAL fencing.token = :'token';

UPDATE lease_guarded.refunds
   SET state = 'paid',
       paid_by = :'worker'
 WHERE id = 'r-1';

INSERT INTO lease_guarded.ledger (account, refund, amount_cents, booked_by, token)
VALUES ('merchant-1', 'r-1', -:amount, :'worker', :'token');

UPDATE lease_guarded.accounts
   SET balance_cents = balance_cents - :amount
 WHERE id = 'merchant-1';

COMMIT;
