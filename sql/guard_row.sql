-- guard_row: a table protected in row scope (each row's fence column holds
-- the highest token that wrote it), as a user meets it in psql.
SET search_path = public, fencing;

-- The SQLSTATE a statement fails with ('ok' when it does not fail)
CREATE FUNCTION pg_temp.sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

-- Protecting a table takes three lines: a fence column, protect(), done.
CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL,
                       fence fencing.fence);
INSERT INTO accounts VALUES ('acct-1', 1000, '3:40'), ('acct-2', 500, NULL);
SELECT fencing.protect('accounts');
SELECT relid, fence_column, key_columns, strict, scope_name FROM fencing.protected;

-- The token in the fence column
UPDATE accounts SET balance_cents = balance_cents - 100, fence = '3:41'
 WHERE id = 'acct-1';
SELECT * FROM accounts ORDER BY id;

-- The token in the setting: the guard writes it into the fence column
BEGIN;
SET LOCAL fencing.token = '3:42';
UPDATE accounts SET balance_cents = balance_cents - 100 WHERE id = 'acct-1';
SELECT * FROM accounts WHERE id = 'acct-1';
COMMIT;
SHOW fencing.token;

-- A stale token: SF001 names the token, DETAIL the fence it lost to, HINT
-- what to do
UPDATE accounts SET balance_cents = 0, fence = '3:41' WHERE id = 'acct-1';
BEGIN;
SET LOCAL fencing.token = '3:5';
UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-1';
ROLLBACK;
-- the error carries the table in its fields
DO $$
DECLARE
    st text; sch text; tbl text;
BEGIN
    UPDATE accounts SET balance_cents = 0, fence = '1:1' WHERE id = 'acct-1';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, sch = SCHEMA_NAME, tbl = TABLE_NAME;
    RAISE NOTICE 'sqlstate %, schema %, table %', st, sch, tbl;
END $$;
SELECT pg_temp.sqlstate_of($$UPDATE accounts SET fence = '3:1' WHERE id = 'acct-1'$$) AS stale,
       pg_temp.sqlstate_of($$UPDATE accounts SET balance_cents = 1 WHERE id = 'acct-1'$$) AS missing;
SELECT balance_cents, fence FROM accounts WHERE id = 'acct-1';

-- No token: SF002
UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-1';
-- writing the same fence again is not a token (the column did not change)
UPDATE accounts SET balance_cents = 0, fence = '3:42' WHERE id = 'acct-1';
-- setting NULL into the fence column is not a token either
UPDATE accounts SET balance_cents = 0, fence = NULL WHERE id = 'acct-1';
-- a row whose fence is NULL still needs a token to be updated
UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-2';

-- Setting and column disagree: SF002
BEGIN;
SET LOCAL fencing.token = '3:50';
UPDATE accounts SET balance_cents = 0, fence = '3:51' WHERE id = 'acct-1';
ROLLBACK;
-- ... agreeing is fine
BEGIN;
SET LOCAL fencing.token = '3:50';
UPDATE accounts SET balance_cents = 900, fence = '3:50' WHERE id = 'acct-1';
COMMIT;
SELECT * FROM accounts WHERE id = 'acct-1';

-- One token, one transaction: the same token may write twice in the
-- transaction that first used it ...
BEGIN;
SET LOCAL fencing.token = '3:60';
UPDATE accounts SET balance_cents = balance_cents - 1 WHERE id = 'acct-1';
UPDATE accounts SET balance_cents = balance_cents - 1 WHERE id = 'acct-1';
-- ... also without the setting: the row carries the token this transaction wrote
RESET fencing.token;
UPDATE accounts SET balance_cents = balance_cents - 1 WHERE id = 'acct-1';
COMMIT;
SELECT * FROM accounts WHERE id = 'acct-1';
-- ... but not in a later transaction
BEGIN;
SET LOCAL fencing.token = '3:60';
UPDATE accounts SET balance_cents = balance_cents - 1 WHERE id = 'acct-1';
ROLLBACK;
-- a token that was used by a transaction that rolled back was never accepted
BEGIN;
SET LOCAL fencing.token = '3:61';
UPDATE accounts SET balance_cents = balance_cents - 1 WHERE id = 'acct-1';
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '3:61';
UPDATE accounts SET balance_cents = balance_cents - 1 WHERE id = 'acct-1';
COMMIT;

-- With strict => false the same token is accepted again later
CREATE TABLE counters (id int PRIMARY KEY, n int, fence fencing.fence);
INSERT INTO counters VALUES (1, 0, '7');
SELECT fencing.protect('counters', strict => false);
BEGIN;
SET LOCAL fencing.token = '7';
UPDATE counters SET n = n + 1 WHERE id = 1;
COMMIT;
BEGIN;
SET LOCAL fencing.token = '7';
UPDATE counters SET n = n + 1 WHERE id = 1;
COMMIT;
-- ... but an older one is not
BEGIN;
SET LOCAL fencing.token = '6';
UPDATE counters SET n = n + 1 WHERE id = 1;
ROLLBACK;
SELECT * FROM counters;

-- INSERT in row scope: there is nothing to compare a new row against, so it
-- is accepted with or without a token; a token is written into the row
INSERT INTO accounts VALUES ('acct-3', 0);
INSERT INTO accounts VALUES ('acct-4', 0, '2:1');
BEGIN;
SET LOCAL fencing.token = '2:2';
INSERT INTO accounts VALUES ('acct-5', 0);
COMMIT;
-- the setting and a different column value conflict on INSERT too
BEGIN;
SET LOCAL fencing.token = '2:2';
INSERT INTO accounts VALUES ('acct-6', 0, '2:3');
ROLLBACK;
SELECT * FROM accounts ORDER BY id;

-- DELETE needs a token (from the setting: a DELETE has no new row)
DELETE FROM accounts WHERE id = 'acct-4';
BEGIN;
SET LOCAL fencing.token = '2:0';
DELETE FROM accounts WHERE id = 'acct-4';
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '2:2';
DELETE FROM accounts WHERE id = 'acct-4';
COMMIT;
-- a row with a NULL fence: any token will do
BEGIN;
SET LOCAL fencing.token = '0';
DELETE FROM accounts WHERE id = 'acct-3';
COMMIT;
SELECT * FROM accounts ORDER BY id;

-- Epochs dominate counters: 4:0 beats 3:9999, 3:9999 loses to 4:0
UPDATE accounts SET fence = '3:9999' WHERE id = 'acct-1';
UPDATE accounts SET fence = '4:0' WHERE id = 'acct-1';
UPDATE accounts SET fence = '3:99999' WHERE id = 'acct-1';
-- a bare counter means epoch 0
UPDATE accounts SET fence = '999999' WHERE id = 'acct-1';
SELECT id, fence FROM accounts WHERE id = 'acct-1';

-- A bad fencing.token is rejected when it is set, not at the first write
SET fencing.token = 'three';
SET fencing.token = '3:-1';
SET fencing.token = '1:9223372036854775808';
SELECT pg_temp.sqlstate_of($$SET fencing.token = 'three'$$) AS syntax,
       pg_temp.sqlstate_of($$SET fencing.token = '3:-1'$$) AS negative,
       pg_temp.sqlstate_of($$SET fencing.token = '9223372036854775808'$$) AS too_big;
SET fencing.token = ' 5:1 ';
SHOW fencing.token;
SET fencing.token = '';
-- an empty setting means no token
UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-1';
RESET fencing.token;

-- Calling protect() twice changes the settings
SELECT fencing.protect('counters');
SELECT relid, fence_column, key_columns, strict, scope_name
  FROM fencing.protected ORDER BY relid::text;
-- now strict: the same token later is refused
BEGIN;
SET LOCAL fencing.token = '7';
UPDATE counters SET n = n + 1 WHERE id = 1;
ROLLBACK;
-- another fence column, and back
ALTER TABLE counters ADD COLUMN lease fencing.fence;
SELECT fencing.protect('counters', fence_column => 'lease');
UPDATE counters SET n = n + 1, lease = '1' WHERE id = 1;
SELECT * FROM counters;
SELECT fencing.protect('counters', 'fence', NULL, false, 'my counters');
SELECT relid, fence_column, key_columns, strict, scope_name
  FROM fencing.protected WHERE relid = 'counters'::regclass;
SELECT tgname, tgenabled, tgfoid::regprocedure
  FROM pg_catalog.pg_trigger WHERE tgrelid = 'counters'::regclass ORDER BY tgname;

-- protect() errors
SELECT fencing.protect('no_such_table');
SELECT fencing.protect('accounts', 'no_such_column');
SELECT fencing.protect('accounts', 'balance_cents');
SELECT fencing.protect('accounts', 'xmin');
CREATE VIEW accounts_view AS SELECT * FROM accounts;
SELECT fencing.protect('accounts_view');
CREATE SEQUENCE some_seq;
SELECT fencing.protect('some_seq');
SELECT fencing.protect(NULL);
SELECT fencing.protect('accounts', NULL);
SELECT fencing.protect('accounts', 'fence', NULL, NULL);
SELECT fencing.protect('accounts', key_columns => '{id,id}');
SELECT fencing.protect('accounts', key_columns => '{nope}');
SELECT fencing.protect('accounts', key_columns => '{fence}');
SELECT fencing.protect('accounts', key_columns => '{id,NULL}');
SELECT fencing.protect('accounts', key_columns => '{{id},{id}}');
SELECT fencing.protect('accounts', scope_name => '');
SELECT fencing.unprotect(NULL);
SELECT fencing.unprotect('accounts_view');
-- the failed calls changed nothing
SELECT relid, fence_column, key_columns, strict, scope_name
  FROM fencing.protected WHERE relid = 'accounts'::regclass;
-- not the owner: 42501
CREATE ROLE regress_fencing_row_other;
SET ROLE regress_fencing_row_other;
SELECT fencing.protect('accounts');
SELECT fencing.unprotect('accounts');
SELECT pg_temp.sqlstate_of($$SELECT fencing.protect('accounts')$$) AS protect,
       pg_temp.sqlstate_of($$SELECT fencing.unprotect('accounts')$$) AS unprotect;
RESET ROLE;

-- unprotect: writes are free again, the triggers and the catalog row gone
SELECT fencing.unprotect('counters');
UPDATE counters SET n = 100 WHERE id = 1;
DELETE FROM counters;
SELECT count(*) FROM fencing.protected WHERE relid = 'counters'::regclass;
SELECT count(*) FROM pg_catalog.pg_trigger WHERE tgrelid = 'counters'::regclass;
-- a second unprotect is a notice
SELECT fencing.unprotect('counters');

-- The limitation of row scope: the fence lives in the row, so a DELETE with a
-- newer token followed by an INSERT (which row scope cannot check) starts the
-- row's history again.  A writer holding any token newer than the row's can
-- do this; a stale writer cannot do the DELETE.  Protect append-only tables
-- and tables whose rows are deleted and re-created in key scope instead
-- (guard_key).
SELECT fence FROM accounts WHERE id = 'acct-1';
BEGIN;
SET LOCAL fencing.token = '1000:0';
DELETE FROM accounts WHERE id = 'acct-1';
COMMIT;
INSERT INTO accounts VALUES ('acct-1', 1000000, '0:1');
-- the old row's fence is gone: a token older than the deleted row's is accepted
UPDATE accounts SET balance_cents = 0, fence = '0:2' WHERE id = 'acct-1';
SELECT * FROM accounts WHERE id = 'acct-1';

SELECT fencing.unprotect('accounts');
DROP VIEW accounts_view;
DROP TABLE accounts, counters;
DROP SEQUENCE some_seq;
DROP ROLE regress_fencing_row_other;
SELECT count(*) FROM fencing.protected;
