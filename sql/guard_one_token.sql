-- guard_one_token: in strict mode a transaction that has written a row or
-- a scope with a token may write it again with the same token ("one token,
-- one transaction"); that counts only writes the guard accepted.  Rows
-- that protect() seeded, a table rewrite touched, or a write made before
-- protect() in the same transaction do not make an equal token acceptable.
SET search_path = public, fencing;

-- Key scope: protect() seeds the scope from the rows in this transaction
CREATE TABLE ledger (account text, amount int, fence fencing.fence);
INSERT INTO ledger VALUES ('a', 1, '0:7');
BEGIN;
SELECT fencing.protect('ledger', key_columns => '{account}');
SET LOCAL fencing.token = '0:7';
INSERT INTO ledger VALUES ('a', 2);
ROLLBACK;
-- the same when the rows are written in the same transaction as protect()
BEGIN;
INSERT INTO ledger VALUES ('b', 1, '0:7');
SELECT fencing.protect('ledger', key_columns => '{account}');
SET LOCAL fencing.token = '0:7';
INSERT INTO ledger VALUES ('b', 2);
ROLLBACK;

-- Key scope: a transaction's own accepted write may be repeated ...
SELECT fencing.protect('ledger', key_columns => '{account}');
BEGIN;
SET LOCAL fencing.token = '0:8';
INSERT INTO ledger VALUES ('a', 3);
INSERT INTO ledger VALUES ('a', 4);
COMMIT;
-- ... but not by the next transaction
BEGIN;
SET LOCAL fencing.token = '0:8';
INSERT INTO ledger VALUES ('a', 5);
ROLLBACK;

-- Savepoints take back exactly what they did
BEGIN;
SET LOCAL fencing.token = '0:9';
INSERT INTO ledger VALUES ('a', 6);
SAVEPOINT s1;
SET LOCAL fencing.token = '0:10';
INSERT INTO ledger VALUES ('a', 7);
ROLLBACK TO s1;
-- the key is back at 0:9, which this transaction wrote: 0:9 again is fine
INSERT INTO ledger VALUES ('a', 8);
SAVEPOINT s2;
INSERT INTO ledger VALUES ('c', 9);
ROLLBACK TO s2;
-- c's first fence was rolled back: 0:9 is simply newer
INSERT INTO ledger VALUES ('c', 10);
COMMIT;
SELECT amount, fence FROM ledger ORDER BY amount;
-- a savepoint that advanced a committed fence and was rolled back leaves
-- the committed fence, which another transaction wrote
BEGIN;
SAVEPOINT s1;
SET LOCAL fencing.token = '0:11';
INSERT INTO ledger VALUES ('a', 11);
ROLLBACK TO s1;
SET LOCAL fencing.token = '0:9';
INSERT INTO ledger VALUES ('a', 12);
ROLLBACK;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.ledger' ORDER BY key;

-- Row scope: a table rewrite in this transaction leaves every row written
-- by it, but no guard checked those fences
CREATE TABLE accounts (id text PRIMARY KEY, balance int, fence fencing.fence);
INSERT INTO accounts VALUES ('x', 100, '0:7'), ('y', 100, '0:7');
SELECT fencing.protect('accounts');
-- (the unchanged fence column carries no token: SF002; the same token in
-- fencing.token is not newer: SF001)
BEGIN;
ALTER TABLE accounts ADD COLUMN touched timestamptz DEFAULT clock_timestamp();
UPDATE accounts SET balance = 0, fence = '0:7' WHERE id = 'x';
ROLLBACK;
BEGIN;
ALTER TABLE accounts ADD COLUMN touched timestamptz DEFAULT clock_timestamp();
SET LOCAL fencing.token = '0:7';
UPDATE accounts SET balance = 0 WHERE id = 'x';
ROLLBACK;
-- a write made unguarded in the same transaction, before protect()
BEGIN;
SELECT fencing.unprotect('accounts');
UPDATE accounts SET fence = '0:8' WHERE id = 'y';
SELECT fencing.protect('accounts');
UPDATE accounts SET balance = 0, fence = '0:8' WHERE id = 'y';
ROLLBACK;
BEGIN;
SELECT fencing.unprotect('accounts');
UPDATE accounts SET fence = '0:8' WHERE id = 'y';
SELECT fencing.protect('accounts');
SET LOCAL fencing.token = '0:8';
UPDATE accounts SET balance = 0 WHERE id = 'y';
ROLLBACK;
-- the guard's own write may be repeated in its transaction, through a
-- savepoint too
BEGIN;
SET LOCAL fencing.token = '0:8';
UPDATE accounts SET balance = balance - 1 WHERE id = 'x';
SAVEPOINT s1;
UPDATE accounts SET balance = balance - 1 WHERE id = 'x';
ROLLBACK TO s1;
UPDATE accounts SET balance = balance - 1 WHERE id = 'x';
COMMIT;
BEGIN;
SET LOCAL fencing.token = '0:8';
UPDATE accounts SET balance = balance - 1 WHERE id = 'x';
ROLLBACK;
SELECT id, balance, fence FROM accounts ORDER BY id;

SELECT fencing.unprotect('ledger'), fencing.unprotect('accounts');
DROP TABLE ledger, accounts;
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage;
