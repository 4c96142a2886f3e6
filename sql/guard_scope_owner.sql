-- guard_scope_owner: a key or table scope belongs to the role whose
-- protect() created it.  No role can create, advance or leave behind
-- fences that a later protect() by another role (not a member of the
-- scope's owner) would use.
SET search_path = public, fencing;

CREATE ROLE regress_fencing_bank;
CREATE ROLE regress_fencing_mallory;
CREATE ROLE regress_fencing_teller IN ROLE regress_fencing_bank;
CREATE SCHEMA bank AUTHORIZATION regress_fencing_bank;
CREATE SCHEMA mallory AUTHORIZATION regress_fencing_mallory;
GRANT USAGE, CREATE ON SCHEMA bank TO regress_fencing_teller;

-- The review's attack: a role that can only create tables in its own
-- schema protects its own table under the name of a scope to come, writes
-- the largest token and drops its table.
SET SESSION AUTHORIZATION regress_fencing_mallory;
CREATE TABLE mallory.decoy (account text, fence fencing.fence);
SELECT fencing.protect('mallory.decoy', key_columns => '{account}',
                       scope_name => 'bank.ledger');
BEGIN; SET LOCAL fencing.token = '999:999';
INSERT INTO mallory.decoy VALUES ('acct-1');
COMMIT;
SELECT fencing.unprotect('mallory.decoy');
DROP TABLE mallory.decoy;
RESET SESSION AUTHORIZATION;
SELECT scope_name, owner FROM fencing.scope_storage WHERE scope_name = 'bank.ledger';

-- The bank's protect() of bank.ledger (its default scope name) is refused
-- with 42501, naming the owner and the remedy: it would inherit 999:999.
SET SESSION AUTHORIZATION regress_fencing_bank;
CREATE TABLE bank.ledger (id serial, account text, amount int, fence fencing.fence);
CREATE TABLE bank.accounts (id text PRIMARY KEY, fence fencing.fence);
SELECT fencing.protect('bank.ledger', key_columns => '{account}');
SELECT count(*) AS protected FROM fencing.protected WHERE relid = 'bank.ledger'::regclass;
RESET SESSION AUTHORIZATION;

-- The extension's owner removes the squatted scope on purpose ...
SELECT fencing.reset_scope('bank.ledger');
SELECT count(*) FROM fencing.scope_storage WHERE scope_name = 'bank.ledger';
-- ... and the bank protects its ledger; the squatter's fence is gone
SET SESSION AUTHORIZATION regress_fencing_bank;
SELECT fencing.protect('bank.ledger', key_columns => '{account}');
BEGIN; SET LOCAL fencing.token = '0:1';
INSERT INTO bank.ledger (account, amount) VALUES ('acct-1', 100);
COMMIT;
SELECT scope_name, owner FROM fencing.scope_storage WHERE scope_name = 'bank.ledger';
GRANT SELECT, INSERT ON bank.ledger TO regress_fencing_mallory;
GRANT USAGE ON SCHEMA bank TO regress_fencing_mallory;
GRANT USAGE ON SEQUENCE bank.ledger_id_seq TO regress_fencing_mallory;
RESET SESSION AUTHORIZATION;

-- Now the scope is the bank's: another role cannot protect into it, nor
-- take the name of another of the bank's tables for a scope of its own ...
SET SESSION AUTHORIZATION regress_fencing_mallory;
CREATE TABLE mallory.decoy (account text, fence fencing.fence);
SELECT fencing.protect('mallory.decoy', key_columns => '{account}',
                       scope_name => 'bank.ledger');
SELECT fencing.protect('mallory.decoy', key_columns => '{account}',
                       scope_name => 'bank.accounts');
-- ... cannot reset it, nor rewrite the registry or the fences ...
SELECT fencing.reset_scope('bank.ledger');
UPDATE fencing.scope_storage SET owner = 'regress_fencing_mallory';
-- ... and its stale writes to the bank's ledger are refused as any
BEGIN; SET LOCAL fencing.token = '0:0';
INSERT INTO bank.ledger (account, amount) VALUES ('acct-1', -100);
ROLLBACK;
DROP TABLE mallory.decoy;
RESET SESSION AUTHORIZATION;

-- A member of the owner may protect its own table into the scope
SET SESSION AUTHORIZATION regress_fencing_teller;
CREATE TABLE bank.holds (account text, fence fencing.fence);
SELECT fencing.protect('bank.holds', key_columns => '{account}', scope_name => 'bank.ledger');
BEGIN; SET LOCAL fencing.token = '0:1';
INSERT INTO bank.holds VALUES ('acct-1');
ROLLBACK;
RESET SESSION AUTHORIZATION;

-- reset_scope() refuses a scope in use, and one that does not exist
SELECT fencing.reset_scope('bank.ledger');
SELECT fencing.reset_scope('no such scope');
SELECT fencing.reset_scope(NULL);
-- and is the extension owner's: PUBLIC may not call it
SELECT has_function_privilege('public', 'fencing.reset_scope(text)', 'EXECUTE') AS public_may_reset;

-- Two scopes of the same name cannot be created at once: the second
-- protect() waits for the first and then uses its scope (see the
-- isolation spec guard_scope_race)

SELECT fencing.unprotect('bank.ledger'), fencing.unprotect('bank.holds');
DROP TABLE bank.ledger, bank.holds, bank.accounts;
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage;
DROP SCHEMA bank, mallory;
DROP ROLE regress_fencing_teller, regress_fencing_bank, regress_fencing_mallory;
