-- test/demo/scenes/leased.sql: the payout, its token from a PostgreSQL lease.
-- timeline: UPDATE r-1 paid + ledger -{amount} + debit
--
-- Run by test/demo/worker.sh (DEMO_LOCK=postgres) with the psql variables
-- worker, token (from fencing.lease_acquire) and amount (cents).  The
-- careless code of scenes/unfenced.sql plus SET LOCAL fencing.token, as in
-- the guarded run; the tables are protected as usual (no lease option), so
-- the guard rejects a token once a newer one has written.

BEGIN;

SET LOCAL fencing.token = :'token';

UPDATE leased.refunds
   SET state = 'paid',
       paid_by = :'worker'
 WHERE id = 'r-1';

INSERT INTO leased.ledger (account, refund, amount_cents, booked_by, token)
VALUES ('merchant-1', 'r-1', -:amount, :'worker', :'token');

UPDATE leased.accounts
   SET balance_cents = balance_cents - :amount
 WHERE id = 'merchant-1';

COMMIT;
