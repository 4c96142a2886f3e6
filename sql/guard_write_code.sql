-- A write is judged by its session's token.  While a statement that
-- writes runs, nothing it evaluates can change fencing.token or
-- fencing.bypass (55P02): not a column DEFAULT, a domain's CHECK, a CHECK
-- constraint, a generated column, a row security policy, an index
-- expression, a trigger, nor the functions they call.  Each attack below
-- is another role's code (mallory's) in one of those places, and bob, a
-- stale holder, writing.  The session itself still sets its token: SET,
-- SET LOCAL, set_config() and set_token() as statements of their own, or
-- in a function of its own before that function writes.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE ROLE fencing_wc_alice;
CREATE ROLE fencing_wc_mallory;
CREATE ROLE fencing_wc_bob;
CREATE SCHEMA wc_types AUTHORIZATION fencing_wc_mallory;
CREATE SCHEMA wc AUTHORIZATION fencing_wc_alice;
GRANT USAGE ON SCHEMA wc_types TO PUBLIC;
GRANT USAGE ON SCHEMA wc TO fencing_wc_bob;

-- mallory's shared types and functions: harmless, for now
SET ROLE fencing_wc_mallory;
CREATE DOMAIN wc_types.acct AS int;
-- (PL/pgSQL, which the planner does not inline into the domain's check)
CREATE FUNCTION wc_types.f(v int) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN RETURN true; END $$;
CREATE FUNCTION wc_types.d() RETURNS text LANGUAGE sql AS $$ SELECT 'note' $$;
CREATE FUNCTION wc_types.visible(t text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
ALTER DOMAIN wc_types.acct ADD CONSTRAINT c CHECK (wc_types.f(VALUE));
RESET ROLE;

SET ROLE fencing_wc_alice;
SET search_path = wc;
-- a key-scope ledger keyed by mallory's domain
CREATE TABLE ledger (account wc_types.acct, amount int, note text DEFAULT wc_types.d(),
                     fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account}');
-- a row-scope table with mallory's domain on another column, her CHECK,
-- and a policy calling her function
CREATE TABLE pay (id int PRIMARY KEY, tenant text, acct wc_types.acct, state text,
                  fence fencing.fence, CHECK (wc_types.f(id)));
INSERT INTO pay VALUES (1, 't1', 1, 'new', '0:10'), (2, 't1', 1, 'new', '0:10');
SELECT fencing.protect('pay');
ALTER TABLE pay ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenants ON pay USING (wc_types.visible(tenant));
GRANT SELECT, INSERT, UPDATE ON ledger, pay TO fencing_wc_bob;
BEGIN;
SET LOCAL fencing.token = '0:10';
INSERT INTO ledger (account, amount) VALUES (1, 100);
COMMIT;
RESET ROLE;

-- now mallory makes every function of hers give writes the highest token
SET ROLE fencing_wc_mallory;
CREATE FUNCTION wc_types.max_token() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.token', '9223372036854775807:0', true);
END $$;
CREATE OR REPLACE FUNCTION wc_types.f(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wc_types.max_token();
    RETURN true;
END $$;
CREATE OR REPLACE FUNCTION wc_types.d() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fencing.set_token('9223372036854775807:0');
    RETURN 'note';
END $$;
CREATE OR REPLACE FUNCTION wc_types.visible(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wc_types.max_token();
    RETURN true;
END $$;
RESET ROLE;

SET ROLE fencing_wc_bob;
SET search_path = wc;
-- 1. the domain of the key column: a stale token, then no token
BEGIN;
SET LOCAL fencing.token = '0:5';
INSERT INTO ledger (account, amount, note) VALUES (1, -100, 'x');
ROLLBACK;
INSERT INTO ledger (account, amount, note) VALUES (1, -100, 'x');
-- 3. a DEFAULT calling set_token()
BEGIN;
SET LOCAL fencing.token = '0:5';
INSERT INTO ledger (account, amount) VALUES (2, -100);
ROLLBACK;
-- 2, 4, 5. the domain of another column, the policy, the CHECK
BEGIN;
SET LOCAL fencing.token = '0:5';
UPDATE pay SET state = 'paid' WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:11';
INSERT INTO pay (id, tenant, state) VALUES (3, 't1', 'new'), (4, 't1', 'new');
ROLLBACK;

-- COPY FROM evaluates the same defaults and checks
BEGIN;
SET LOCAL fencing.token = '0:12';
COPY ledger (account, amount) FROM stdin;
3	7
\.
ROLLBACK;
RESET ROLE;

-- nothing moved: the fences are where alice's writes left them
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'wc.ledger' ORDER BY key;
SELECT id, state, fence FROM wc.pay ORDER BY id;

-- mallory's code that swallows the refusal gains nothing: bob's stale
-- token is judged as it is (SF001)
SET ROLE fencing_wc_mallory;
CREATE OR REPLACE FUNCTION wc_types.f(v int) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wc_types.max_token();
    RETURN true;
EXCEPTION WHEN OTHERS THEN
    RETURN true;
END $$;
CREATE OR REPLACE FUNCTION wc_types.visible(t text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM wc_types.max_token();
    RETURN true;
EXCEPTION WHEN OTHERS THEN
    RETURN true;
END $$;
RESET ROLE;
SET ROLE fencing_wc_bob;
BEGIN;
SET LOCAL fencing.token = '0:5';
UPDATE wc.pay SET state = 'paid' WHERE id = 1;
ROLLBACK;
RESET ROLE;

-- generated columns and index expressions run inside the write too
SET ROLE fencing_wc_alice;
SET search_path = wc;
CREATE FUNCTION wc.sneaky(v int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    PERFORM set_config('fencing.token', '9223372036854775807:0', true);
    RETURN v;
END $$;
CREATE TABLE gen (id int PRIMARY KEY, g int GENERATED ALWAYS AS (wc.sneaky(id)) STORED,
                  fence fencing.fence);
SELECT fencing.protect('gen');
CREATE TABLE idx (id int PRIMARY KEY, fence fencing.fence);
CREATE INDEX ON idx (wc.sneaky(id));
SELECT fencing.protect('idx');
INSERT INTO gen (id) VALUES (1);
INSERT INTO idx (id) VALUES (1);
-- a trigger of the owner's: trigger code never sets the token
CREATE FUNCTION wc.after_max() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.token', '9223372036854775807:0', true);
    RETURN NULL;
END $$;
CREATE TABLE aft (id int PRIMARY KEY, fence fencing.fence);
SELECT fencing.protect('aft');
CREATE TRIGGER after_max AFTER INSERT ON aft FOR EACH ROW EXECUTE FUNCTION wc.after_max();
BEGIN;
SET LOCAL fencing.token = '0:1';
INSERT INTO aft VALUES (1);
ROLLBACK;
RESET ROLE;

-- RESET ALL assigns without asking: the guard notices and refuses
CREATE FUNCTION wc.reset_all() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'RESET ALL';
    RETURN 'note';
END $$;
CREATE TABLE wc.plain (id int PRIMARY KEY, note text DEFAULT wc.reset_all(), fence fencing.fence);
INSERT INTO wc.plain VALUES (1, 'n', '0:1');
SELECT fencing.protect('wc.plain');
SET fencing.token = '0:2';
UPDATE wc.plain SET note = DEFAULT WHERE id = 1;
SHOW fencing.token;
RESET fencing.token;
SELECT id, note, fence FROM wc.plain;

-- ... also after the last row: an AFTER trigger of the owner's that runs
-- RESET ALL fails the statement at its end, so no later statement
-- inherits a token the writer did not set
CREATE FUNCTION wc.after_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'RESET ALL';
    RETURN NULL;
END $$;
ALTER TABLE wc.plain ALTER COLUMN note DROP DEFAULT;
CREATE TRIGGER after_reset AFTER UPDATE ON wc.plain FOR EACH ROW EXECUTE FUNCTION wc.after_reset();
BEGIN;
SET LOCAL fencing.token = '0:2';
UPDATE wc.plain SET note = 'after' WHERE id = 1;
ROLLBACK;
DROP TRIGGER after_reset ON wc.plain;
SELECT id, note, fence FROM wc.plain;

-- fencing.bypass is fixed for the statement too
CREATE FUNCTION wc.bypass_on() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.bypass', 'on', true);
    RETURN 'note';
END $$;
ALTER TABLE wc.plain ALTER COLUMN note SET DEFAULT wc.bypass_on();
UPDATE wc.plain SET note = DEFAULT WHERE id = 1;

-- what the session still does: its own SET, set_config() and set_token()
-- as statements, and a function of its own that sets the token and then
-- writes; a token in the fence column for one-statement writes
ALTER TABLE wc.plain ALTER COLUMN note DROP DEFAULT;
BEGIN;
SELECT set_config('fencing.token', '0:3', true);
UPDATE wc.plain SET note = 'three' WHERE id = 1;
COMMIT;
BEGIN;
SELECT fencing.set_token('0:4');
UPDATE wc.plain SET note = 'four' WHERE id = 1;
COMMIT;
CREATE FUNCTION wc.pay_with(t text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fencing.set_token(t::fencing.fence);
    UPDATE wc.plain SET note = 'by function ' || t WHERE id = 1;
    RETURN current_setting('fencing.token');
END $$;
SELECT wc.pay_with('0:5');
SELECT wc.pay_with('0:6');
SELECT id, note, fence FROM wc.plain;
UPDATE wc.plain SET note = 'one statement', fence = '0:7' WHERE id = 1;
SELECT id, note, fence FROM wc.plain;
-- and a function called from inside a write cannot
BEGIN;
INSERT INTO wc.plain VALUES (2, wc.pay_with('0:9'));
ROLLBACK;

RESET ROLE;

-- checks before locks: protect() and unprotect() by a role that does not
-- own the table fail before they lock it (isolation checks_before_locks
-- shows that nobody waits), also when called with a bare OID
SELECT set_config('fencing_wc.oid', 'wc.plain'::regclass::oid::text, false) IS NOT NULL AS remembered;
SET client_min_messages = notice;
SET ROLE fencing_wc_mallory;
DO $$
BEGIN
    PERFORM fencing.protect(current_setting('fencing_wc.oid')::oid::regclass);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END $$;
DO $$
BEGIN
    PERFORM fencing.unprotect(current_setting('fencing_wc.oid')::oid::regclass);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE NOTICE '%: %', SQLSTATE, SQLERRM;
END $$;
RESET ROLE;
SET client_min_messages = warning;
DROP SCHEMA wc CASCADE;
DROP SCHEMA wc_types CASCADE;
DROP ROLE fencing_wc_alice, fencing_wc_mallory, fencing_wc_bob;
