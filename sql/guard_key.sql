-- guard_key: key scope (one fence per value of the key columns, kept in
-- fencing.scopes) and table scope (one fence for the whole table).
SET search_path = public, fencing;

-- The SQLSTATE a statement fails with ('ok' when it does not fail)
CREATE FUNCTION pg_temp.sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

-- An append-only ledger, fenced per account.  The rows already there seed
-- the scopes at protect(): a write older than a stored fence is refused
-- from the start.
CREATE TABLE ledger (id bigserial PRIMARY KEY, account_id text NOT NULL,
                     amount_cents bigint NOT NULL, fence fencing.fence);
INSERT INTO ledger (account_id, amount_cents, fence)
VALUES ('acct-1', 100, '1:5'), ('acct-1', 200, '1:7'), ('acct-2', 50, '1:3'),
       ('acct-3', 10, NULL);
SELECT fencing.protect('ledger', key_columns => '{account_id}');
SELECT relid, fence_column, key_columns, strict, scope_name FROM fencing.protected;
-- acct-3 has no fence yet: no scope row
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY scope_name, key;

-- An INSERT needs a token in key scope
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', -10);
-- a stale INSERT is refused, although the row itself is brand new
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', -10, '1:6');
-- the same fence is refused too (strict)
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', -10, '1:7');
SELECT pg_temp.sqlstate_of($$INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', -10, '1:6')$$) AS stale,
       pg_temp.sqlstate_of($$INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', -10)$$) AS missing;
-- a newer token is accepted and advances the account's fence
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', -10, '1:8');
-- the token of the setting is written into the row
BEGIN;
SET LOCAL fencing.token = '1:9';
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', -20);
-- one token, one transaction: more rows with the same token
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', -30), ('acct-1', -40);
COMMIT;
SELECT account_id, amount_cents, fence FROM ledger WHERE account_id = 'acct-1' ORDER BY id;
-- the same token in a later transaction is refused
BEGIN;
SET LOCAL fencing.token = '1:9';
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', -50);
ROLLBACK;
-- other accounts have fences of their own: 1:4 beats acct-2's 1:3
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-2', 1, '1:4');
-- an account without a fence takes any token; a brand-new account too
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-3', 1, '0:1');
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-9', 1, '0:1');
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY scope_name, key;
-- the SF001 of a scope names the scope and key
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-9', 1, '0:1');

-- UPDATE and DELETE in key scope are checked against the account's fence,
-- not the row's: a row written at 1:5 cannot be changed with 1:8 < 1:9
UPDATE ledger SET amount_cents = 0, fence = '1:8' WHERE account_id = 'acct-1' AND fence = '1:5';
BEGIN;
SET LOCAL fencing.token = '1:8';
DELETE FROM ledger WHERE account_id = 'acct-1';
ROLLBACK;
DELETE FROM ledger WHERE account_id = 'acct-1';
BEGIN;
SET LOCAL fencing.token = '1:10';
UPDATE ledger SET amount_cents = amount_cents WHERE account_id = 'acct-1' AND amount_cents = 100;
DELETE FROM ledger WHERE account_id = 'acct-1' AND amount_cents = -40;
COMMIT;
SELECT scope_name, key, fence FROM fencing.scopes WHERE key = '["acct-1"]';

-- Deleting every row of an account does not reset its fence: a stale
-- writer cannot start the account again
BEGIN;
SET LOCAL fencing.token = '2:0';
DELETE FROM ledger WHERE account_id = 'acct-2';
COMMIT;
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-2', 999, '1:4');
SELECT scope_name, key, fence FROM fencing.scopes WHERE key = '["acct-2"]';

-- UPDATE moving a row to another key must beat both fences:
-- acct-1 is at 1:10, acct-9 at 0:1
BEGIN;
SET LOCAL fencing.token = '1:0';
UPDATE ledger SET account_id = 'acct-1' WHERE account_id = 'acct-9';
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '1:0';
UPDATE ledger SET account_id = 'acct-9' WHERE account_id = 'acct-1' AND amount_cents = 100;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '1:11';
UPDATE ledger SET account_id = 'acct-1' WHERE account_id = 'acct-9';
COMMIT;
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY scope_name, key;

-- Two tables sharing one scope: accounts and ledger fenced per account.
-- The same key values, one fence.
SELECT fencing.unprotect('ledger');
-- unprotect keeps the scope fences
SELECT count(*) FROM fencing.scopes WHERE scope_name = 'public.ledger';
CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL,
                       fence fencing.fence);
INSERT INTO accounts VALUES ('acct-1', 1000, '1:20'), ('acct-2', 500, NULL);
SELECT fencing.protect('accounts', key_columns => '{id}', scope_name => 'account');
SELECT fencing.protect('ledger', key_columns => '{account_id}', scope_name => 'account');
SELECT relid, fence_column, key_columns, strict, scope_name
  FROM fencing.protected ORDER BY relid::text;
-- seeded from both tables: acct-1 from accounts (1:20 beats the ledger's 1:11),
-- acct-3 from the ledger; acct-2 has no fenced row left in either table
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name = 'account' ORDER BY key;
-- a transfer: one token for the balance and the ledger row
BEGIN;
SET LOCAL fencing.token = '1:21';
UPDATE accounts SET balance_cents = balance_cents - 5 WHERE id = 'acct-1';
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', -5);
COMMIT;
-- the ledger's INSERT with the token that the accounts table has accepted
-- in an earlier transaction is stale
BEGIN;
SET LOCAL fencing.token = '1:21';
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', -5);
ROLLBACK;
-- ... and an UPDATE of accounts with a token the ledger beat is stale too
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-2', 7, '3:0');
UPDATE accounts SET balance_cents = 0, fence = '2:0' WHERE id = 'acct-2';
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name = 'account' ORDER BY key;

-- Multi-column keys: one fence per (account, currency)
CREATE TABLE balances (account_id text, currency text, cents bigint,
                       fence fencing.fence, PRIMARY KEY (account_id, currency));
SELECT fencing.protect('balances', key_columns => '{account_id,currency}');
INSERT INTO balances VALUES ('acct-1', 'EUR', 0, '5'), ('acct-1', 'USD', 0, '3');
UPDATE balances SET cents = 1, fence = '4' WHERE account_id = 'acct-1';
UPDATE balances SET cents = 1, fence = '4' WHERE currency = 'USD';
SELECT * FROM balances ORDER BY currency;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.balances' ORDER BY key;
-- keys are JSON arrays of the values' text, so no two keys collide
SELECT fencing.scope_key('acct-1', 'EUR'), fencing.scope_key('acct-1,EUR'),
       fencing.scope_key('say "hi"'), fencing.scope_key('x', NULL),
       fencing.scope_key(VARIADIC '{}'::text[]);
SELECT fence FROM fencing.scopes
 WHERE scope_name = 'public.balances' AND key = fencing.scope_key('acct-1', 'USD');

-- NULL key values are a key of their own (null in the JSON array)
CREATE TABLE events (tenant int, note text, fence fencing.fence);
SELECT fencing.protect('events', key_columns => '{tenant}');
INSERT INTO events VALUES (NULL, 'a', '5'), (1, 'b', '1');
INSERT INTO events VALUES (NULL, 'c', '4');
INSERT INTO events VALUES (1, 'd', '2');
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.events' ORDER BY key;
-- the key is the value's text: integer 1 and text '1' share a fence
SELECT fencing.scope_key('1') = key AS same_key
  FROM fencing.scopes WHERE scope_name = 'public.events' AND key <> '[null]';

-- Table scope ('{}'): one fence for the whole table
CREATE TABLE config (name text PRIMARY KEY, value text, fence fencing.fence);
INSERT INTO config VALUES ('a', '1', '10'), ('b', '2', '12');
SELECT fencing.protect('config', key_columns => '{}');
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.config';
INSERT INTO config VALUES ('c', '3', '11');
UPDATE config SET value = 'x', fence = '11' WHERE name = 'a';
INSERT INTO config VALUES ('c', '3', '13');
UPDATE config SET value = 'x', fence = '13' WHERE name = 'a';
UPDATE config SET value = 'y' WHERE name = 'b';
SELECT * FROM config ORDER BY name;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.config';

-- Non-strict key scope: the same token is accepted again later, an older
-- one is not
CREATE TABLE jobs (queue text, payload text, fence fencing.fence);
SELECT fencing.protect('jobs', key_columns => '{queue}', strict => false);
INSERT INTO jobs VALUES ('q1', 'a', '5');
INSERT INTO jobs VALUES ('q1', 'b', '5');
INSERT INTO jobs VALUES ('q1', 'c', '4');
SELECT * FROM jobs ORDER BY payload;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.jobs';

-- Switching a table from row scope to key scope seeds the scopes then
CREATE TABLE docs (owner text, body text, fence fencing.fence);
INSERT INTO docs VALUES ('ann', 'x', '8'), ('ann', 'y', '9'), ('bob', 'z', '2');
SELECT fencing.protect('docs');
SELECT count(*) FROM fencing.scopes WHERE scope_name = 'public.docs';
SELECT fencing.protect('docs', key_columns => '{owner}');
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.docs' ORDER BY key;
INSERT INTO docs VALUES ('ann', 'w', '8');

SELECT fencing.unprotect(relid) FROM fencing.protected ORDER BY relid::text;
DROP TABLE ledger, accounts, balances, events, config, jobs, docs;
-- scopes outlive their tables: the extension owner removes them on purpose
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage;
SELECT count(*) FROM fencing.protected;
