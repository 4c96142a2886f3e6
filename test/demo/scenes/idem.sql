-- test/demo/scenes/idem.sql: booking refund r-2 and completing its key, in
-- one transaction.
-- timeline: book r-2 (ledger -{amount}, debit, paid) + idem_complete
--
-- Run by test/demo/idem-worker.sh with the psql variables worker, token (the
-- claim token), amount (cents), key, psp_ref (the PSP's re_N) and result
-- (the jsonb to record).  Nothing here checks whether r-2 is paid already:
-- idem_complete comes last and raises SF001 unless token is still the key's
-- running claim, and then the booking before it is rolled back with it.

BEGIN;

INSERT INTO idem.ledger (account, refund, amount_cents, psp_ref, booked_by, token)
VALUES ('merchant-1', 'r-2', -:amount, :'psp_ref', :'worker', :'token');

UPDATE idem.accounts
   SET balance_cents = balance_cents - :amount
 WHERE id = 'merchant-1';

UPDATE idem.refunds
   SET state = 'paid',
       paid_by = :'worker',
       psp_ref = :'psp_ref'
 WHERE id = 'r-2';

SELECT fencing.idem_complete(:'key', :'token', :'result');

COMMIT;
