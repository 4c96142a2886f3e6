-- test/demo/scenes/guarded.1.ledger.sql: step 1 of the guarded payout,
-- booking the money.
-- timeline: INSERT ledger -{amount} for merchant-1 + debit
--
-- Run by test/demo/worker.sh with the psql variables worker, token (E:C)
-- and amount (cents), then step 2 (guarded.2.refund.sql) in a transaction
-- of its own, whatever this one did.  The SQL is the careless code of
-- scenes/unfenced.sql: nothing checks the lock or the token.  The one added
-- line hands the token to the guard, which checks the INSERT against the
-- newest token that booked anything for account merchant-1 (key scope) and
-- raises SF001 when this one is not newer.  The debit then never runs.

BEGIN;

SET LOCAL fencing.token = :'token';

INSERT INTO guarded.ledger (account, refund, amount_cents, booked_by, token)
VALUES ('merchant-1', 'r-1', -:amount, :'worker', :'token');

UPDATE guarded.accounts
   SET balance_cents = balance_cents - :amount
 WHERE id = 'merchant-1';

COMMIT;
