-- test/demo/scenes/fenced.sql: the payout, carrying the lock's fencing token.
-- timeline: UPDATE r-1 paid + ledger -{amount} + debit
--
-- Run by test/demo/worker.sh with the psql variables worker, token (E:C)
-- and amount (cents).  The only difference from scenes/unfenced.sql is the
-- fence line: the refund row remembers the newest token that wrote it, and
-- fencing.advance() raises SF001 when this token is not newer.  The error
-- aborts the transaction, so no ledger row and no debit either.

BEGIN;

UPDATE fenced.refunds
   SET state = 'paid',
       paid_by = :'worker',
       fence = fencing.advance(fence, :'token')
 WHERE id = 'r-1';

INSERT INTO fenced.ledger (account, refund, amount_cents, booked_by, token)
VALUES ('merchant-1', 'r-1', -:amount, :'worker', :'token');

UPDATE fenced.accounts
   SET balance_cents = balance_cents - :amount
 WHERE id = 'merchant-1';

COMMIT;
