-- test/demo/scenes/unfenced.sql: the payout as it was written before fencing.
-- timeline: UPDATE r-1 paid + ledger -{amount} + debit
--
-- Run by test/demo/worker.sh with the psql variables worker, token (E:C)
-- and amount (cents).  The worker holds "the lock", so it trusts what it
-- read before and writes.  The token is only recorded in the ledger, where
-- nothing checks it.

BEGIN;

UPDATE unfenced.refunds
   SET state = 'paid',
       paid_by = :'worker'
 WHERE id = 'r-1';

INSERT INTO unfenced.ledger (account, refund, amount_cents, booked_by, token)
VALUES ('merchant-1', 'r-1', -:amount, :'worker', :'token');

UPDATE unfenced.accounts
   SET balance_cents = balance_cents - :amount
 WHERE id = 'merchant-1';

COMMIT;
