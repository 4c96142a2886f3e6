-- guard_privileges: a role that may write a protected table but does not own
-- it cannot lower or reset a fence by any path, and objects planted in the
-- search_path do not change what the guard or protect() does.
SET search_path = public, fencing;

-- The SQLSTATE a statement fails with ('ok' when it does not fail)
CREATE FUNCTION pg_temp.sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

CREATE ROLE regress_fencing_owner;
CREATE ROLE regress_fencing_app;
GRANT CREATE ON SCHEMA public TO regress_fencing_owner, regress_fencing_app;

SET SESSION AUTHORIZATION regress_fencing_owner;
SET search_path = public, fencing;
CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL,
                       fence fencing.fence);
CREATE TABLE ledger (id serial PRIMARY KEY, account_id text NOT NULL,
                     amount_cents bigint NOT NULL, fence fencing.fence);
INSERT INTO accounts VALUES ('acct-1', 100, '5');
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', 100, '5');
-- the table owner protects its tables (it needs no other privilege)
SELECT fencing.protect('accounts');
SELECT fencing.protect('ledger', key_columns => '{account_id}');
GRANT SELECT, INSERT, UPDATE, DELETE ON accounts, ledger TO regress_fencing_app;
GRANT USAGE ON SEQUENCE ledger_id_seq TO regress_fencing_app;
RESET SESSION AUTHORIZATION;

SET SESSION AUTHORIZATION regress_fencing_app;
SET search_path = public, fencing;
-- the catalog is readable ...
SELECT relid, key_columns, scope_name FROM fencing.protected ORDER BY relid::text;
SELECT scope_name, key, fence FROM fencing.scopes;
-- ... but not writable: not the view, not the tables that hold the fences,
-- not the registry of scopes
SELECT storage AS ledger_fences FROM fencing.scope_storage
 WHERE scope_name = 'public.ledger' \gset
UPDATE fencing.scopes SET fence = '0';
DELETE FROM fencing.scopes;
SELECT pg_temp.sqlstate_of(format('UPDATE %s SET fence = ''0''', :'ledger_fences')) AS update_fences,
       pg_temp.sqlstate_of(format('DELETE FROM %s', :'ledger_fences')) AS delete_fences,
       pg_temp.sqlstate_of(format('INSERT INTO %s VALUES (''acct-2'', ''0'')', :'ledger_fences')) AS insert_fences,
       pg_temp.sqlstate_of(format('TRUNCATE %s', :'ledger_fences')) AS truncate_fences,
       pg_temp.sqlstate_of(format('DROP TABLE %s', :'ledger_fences')) AS drop_fences,
       pg_temp.sqlstate_of(format('ALTER TABLE %s DROP COLUMN key_1', :'ledger_fences')) AS alter_fences;
SELECT pg_temp.sqlstate_of('DELETE FROM fencing.scope_storage') AS delete_registry,
       pg_temp.sqlstate_of('UPDATE fencing.scope_storage SET owner = current_user::regrole') AS take_scope,
       pg_temp.sqlstate_of('SELECT fencing.reset_scope(''public.ledger'')') AS reset_scope,
       pg_temp.sqlstate_of('SELECT fencing.scope_create(''x'', current_user::regrole, ''{text}'', ''{100}'')') AS create_scope;
UPDATE fencing.protected SET key_columns = NULL;
DELETE FROM fencing.protected;
INSERT INTO fencing.protected VALUES ('accounts', 'fence', NULL, false, 'x');
SELECT pg_temp.sqlstate_of('DELETE FROM fencing.protected') AS protected;
-- no break glass
SET fencing.bypass = on;
SELECT pg_temp.sqlstate_of('SET fencing.bypass = on') AS bypass;
-- no protect(), unprotect(), or switching triggers off
SELECT fencing.unprotect('accounts');
SELECT fencing.protect('ledger', strict => false);
ALTER TABLE accounts DISABLE TRIGGER zz_fencing_guard;
ALTER TABLE accounts DISABLE TRIGGER ALL;
ALTER TABLE ledger ENABLE REPLICA TRIGGER zz_fencing_guard;
DROP TRIGGER zz_fencing_guard ON accounts;
TRUNCATE accounts;
SELECT pg_temp.sqlstate_of('SELECT fencing.unprotect(''accounts'')') AS unprotect,
       pg_temp.sqlstate_of('ALTER TABLE accounts DISABLE TRIGGER ALL') AS disable;
-- the app writes with tokens as usual
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', -1, '6');
UPDATE accounts SET balance_cents = 99, fence = '6' WHERE id = 'acct-1';
-- deleting every row of a key and inserting again does not reset its fence
BEGIN;
SET LOCAL fencing.token = '7';
DELETE FROM ledger WHERE account_id = 'acct-1';
COMMIT;
SELECT count(*) FROM ledger;
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', 1000, '1');
SELECT scope_name, key, fence FROM fencing.scopes;
-- the app's own table cannot borrow the ledger's scope: it could raise the
-- ledger's fences out of its writers' reach (and seeding never lowers one)
CREATE TABLE mine (account_id text, fence fencing.fence);
INSERT INTO mine VALUES ('acct-1', '0');
SELECT fencing.protect('mine', key_columns => '{account_id}', scope_name => 'public.ledger');
-- nor take the name of a table it does not own as its scope
SELECT fencing.protect('mine', key_columns => '{account_id}', scope_name => 'public.accounts');
SELECT fencing.unprotect('mine');
SELECT scope_name, key, fence FROM fencing.scopes;
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', 1000, '1');
DROP TABLE mine;
-- a view over the protected table does not get around the guard
CREATE VIEW my_accounts AS SELECT * FROM accounts;
UPDATE my_accounts SET balance_cents = 0 WHERE id = 'acct-1';
DROP VIEW my_accounts;
RESET SESSION AUTHORIZATION;

-- Hostile search_path: the app plants objects in a schema of its own that
-- an owner (or the app) may have first in search_path: = and < for fences
-- that always say yes, a function named advance, tables named scopes and
-- protected, an aggregate named max.
CREATE SCHEMA evil AUTHORIZATION regress_fencing_app;
SET SESSION AUTHORIZATION regress_fencing_app;
CREATE FUNCTION evil.yes(fencing.fence, fencing.fence) RETURNS boolean
    LANGUAGE sql IMMUTABLE AS 'SELECT true';
CREATE OPERATOR evil.= (FUNCTION = evil.yes, LEFTARG = fencing.fence, RIGHTARG = fencing.fence);
CREATE OPERATOR evil.< (FUNCTION = evil.yes, LEFTARG = fencing.fence, RIGHTARG = fencing.fence);
CREATE OPERATOR evil.<= (FUNCTION = evil.yes, LEFTARG = fencing.fence, RIGHTARG = fencing.fence);
CREATE OPERATOR evil.> (FUNCTION = evil.yes, LEFTARG = fencing.fence, RIGHTARG = fencing.fence);
CREATE FUNCTION evil.advance(fencing.fence, fencing.fence, boolean DEFAULT true)
    RETURNS fencing.fence LANGUAGE sql AS 'SELECT $2';
CREATE FUNCTION evil.first_fence(fencing.fence, fencing.fence) RETURNS fencing.fence
    LANGUAGE sql AS 'SELECT ''0''::fencing.fence';
CREATE AGGREGATE evil.max(fencing.fence) (SFUNC = evil.first_fence, STYPE = fencing.fence);
CREATE TABLE evil.scopes (scope_name text, key text, fence fencing.fence);
CREATE TABLE evil.protected (relid regclass, fence_column name, key_columns name[],
                             strict boolean, scope_name text);
CREATE TABLE evil.fence (x int);
GRANT USAGE ON SCHEMA evil TO PUBLIC;
GRANT SELECT ON evil.scopes, evil.protected TO PUBLIC;
SET search_path = evil, public, fencing;
-- the guard still refuses stale and missing tokens
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', 1, '1');
UPDATE accounts SET balance_cents = 0, fence = '1' WHERE id = 'acct-1';
UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-1';
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-2', 1, '1');
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-2', 1, '1');
RESET SESSION AUTHORIZATION;
-- the owner, with the hostile schema first in its search_path: protect()
-- seeds the scopes with the real maximum and the real comparison
SET SESSION AUTHORIZATION regress_fencing_owner;
SET search_path = evil, public, fencing;
CREATE TABLE public.docs (owner text, fence fencing.fence);
INSERT INTO public.docs VALUES ('ann', '3'), ('ann', '9'), ('ann', '4');
SELECT fencing.protect('public.docs', key_columns => '{owner}');
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name = 'public.docs';
INSERT INTO public.docs VALUES ('ann', '8');
-- protect() again (the settings change; the fence stays)
SELECT fencing.protect('public.docs', key_columns => '{owner}');
SELECT scope_name, key, fence FROM fencing.scopes WHERE scope_name = 'public.docs';
SELECT count(*) AS planted_rows FROM evil.scopes;
SELECT count(*) AS planted_rows FROM evil.protected;
SELECT fencing.unprotect('public.docs');
DROP TABLE public.docs;
RESET SESSION AUTHORIZATION;
SET search_path = public, fencing;

SELECT fencing.unprotect('accounts'), fencing.unprotect('ledger');
DROP SCHEMA evil CASCADE;
DROP TABLE accounts, ledger;
-- scopes outlive their tables: the extension owner removes them on purpose
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage;
REVOKE CREATE ON SCHEMA public FROM regress_fencing_owner, regress_fencing_app;
DROP ROLE regress_fencing_owner, regress_fencing_app;
