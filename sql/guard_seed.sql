-- guard_seed: seeding a scope from existing rows sees every row, whatever
-- the row security policies; a scope whose owner was dropped, or whose
-- fences are gone, is refused with what to do, never rebuilt lower.
SET search_path = public, fencing;

CREATE ROLE regress_seed_owner;
CREATE ROLE regress_seed_app;
CREATE SCHEMA seed AUTHORIZATION regress_seed_owner;
GRANT USAGE ON SCHEMA seed TO regress_seed_app;

-- The review's case: the owner's own policy hides a row from the owner
-- (FORCE ROW LEVEL SECURITY); the application's role sees it.
SET SESSION AUTHORIZATION regress_seed_owner;
CREATE TABLE seed.ledger (account text, amount int, fence fencing.fence);
ALTER TABLE seed.ledger ENABLE ROW LEVEL SECURITY;
ALTER TABLE seed.ledger FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_view ON seed.ledger TO regress_seed_owner
    USING (account <> 'hidden') WITH CHECK (true);
CREATE POLICY app_view ON seed.ledger TO regress_seed_app USING (true);
GRANT SELECT, INSERT, UPDATE ON seed.ledger TO regress_seed_app;
INSERT INTO seed.ledger VALUES ('open', 1, '0:10'), ('hidden', 2, '0:50');
SELECT account, fence FROM seed.ledger ORDER BY 1;
SELECT fencing.protect('seed.ledger', key_columns => '{account}');
RESET SESSION AUTHORIZATION;
-- the hidden row's fence is in the scope
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'seed.ledger' ORDER BY key;
-- and the role that sees the row cannot write it with an older token
SET SESSION AUTHORIZATION regress_seed_app;
UPDATE seed.ledger SET amount = 3, fence = '0:20' WHERE account = 'hidden';
BEGIN; SET LOCAL fencing.token = '0:20';
INSERT INTO seed.ledger VALUES ('hidden', 4);
ROLLBACK;
UPDATE seed.ledger SET amount = 3, fence = '0:60' WHERE account = 'hidden';
RESET SESSION AUTHORIZATION;

-- Table scope: every row hidden from the owner, the highest fence seeded
SET SESSION AUTHORIZATION regress_seed_owner;
CREATE TABLE seed.journal (entry int, fence fencing.fence);
ALTER TABLE seed.journal ENABLE ROW LEVEL SECURITY;
ALTER TABLE seed.journal FORCE ROW LEVEL SECURITY;
CREATE POLICY nothing ON seed.journal USING (false) WITH CHECK (true);
INSERT INTO seed.journal VALUES (1, '0:5'), (2, '0:70');
SELECT count(*) AS owner_sees FROM seed.journal;
SELECT fencing.protect('seed.journal', key_columns => '{}');
RESET SESSION AUTHORIZATION;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'seed.journal';

-- A partition with policies of its own, attached: its hidden rows too
SET SESSION AUTHORIZATION regress_seed_owner;
CREATE TABLE seed.orders (account text, d int, fence fencing.fence) PARTITION BY RANGE (d);
CREATE TABLE seed.orders_1 PARTITION OF seed.orders FOR VALUES FROM (0) TO (10);
SELECT fencing.protect('seed.orders', key_columns => '{account}');
CREATE TABLE seed.orders_2 (account text, d int, fence fencing.fence);
INSERT INTO seed.orders_2 VALUES ('x', 15, '0:33');
ALTER TABLE seed.orders_2 ENABLE ROW LEVEL SECURITY;
ALTER TABLE seed.orders_2 FORCE ROW LEVEL SECURITY;
CREATE POLICY nothing ON seed.orders_2 USING (false) WITH CHECK (true);
SELECT count(*) AS owner_sees FROM seed.orders_2;
ALTER TABLE seed.orders ATTACH PARTITION seed.orders_2 FOR VALUES FROM (10) TO (20);
-- ... and an inheritance child with policies of its own, inherited
CREATE TABLE seed.notes (account text, fence fencing.fence);
SELECT fencing.protect('seed.notes', key_columns => '{account}');
CREATE TABLE seed.notes_old (account text, fence fencing.fence);
INSERT INTO seed.notes_old VALUES ('y', '0:44');
ALTER TABLE seed.notes_old ENABLE ROW LEVEL SECURITY;
ALTER TABLE seed.notes_old FORCE ROW LEVEL SECURITY;
CREATE POLICY nothing ON seed.notes_old USING (false) WITH CHECK (true);
ALTER TABLE seed.notes_old INHERIT seed.notes;
RESET SESSION AUTHORIZATION;
SELECT scope_name, key, fence FROM fencing.scopes
 WHERE scope_name IN ('seed.orders', 'seed.notes') ORDER BY 1, 2;
UPDATE seed.orders SET fence = '0:30' WHERE account = 'x';
UPDATE seed.notes SET fence = '0:40' WHERE account = 'y';

-- Keys that are equal under the key type's equality but spelled apart
-- are one key: the highest fence of them all is seeded
CREATE TABLE seed.amounts (n numeric, fence fencing.fence);
INSERT INTO seed.amounts VALUES (1, '0:3'), (1.0, '0:9'), (1.00, '0:4'), (2, '0:1'),
    (NULL, '0:6'), (NULL, '0:2'), (3, NULL);
SELECT fencing.protect('seed.amounts', key_columns => '{n}');
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'seed.amounts' ORDER BY key;
-- a long key (stored out of line) is seeded by value
CREATE TABLE seed.docs (body text, fence fencing.fence);
ALTER TABLE seed.docs ALTER COLUMN body SET STORAGE EXTERNAL;
INSERT INTO seed.docs VALUES (repeat('x', 5000), '0:8'), (repeat('x', 5000), '0:9');
SELECT fencing.protect('seed.docs', key_columns => '{body}');
SELECT length(key), fence FROM fencing.scopes WHERE scope_name = 'seed.docs';
\set VERBOSITY terse
UPDATE seed.docs SET fence = '0:9' WHERE true;
\set VERBOSITY default
SELECT fencing.unprotect('seed.amounts'), fencing.unprotect('seed.docs');

-- A scope whose owner role was dropped: 42501 naming it, never 42704
CREATE ROLE regress_seed_gone;
GRANT USAGE, CREATE ON SCHEMA seed TO regress_seed_gone;
SET SESSION AUTHORIZATION regress_seed_gone;
CREATE TABLE seed.gone (account text, fence fencing.fence);
SELECT fencing.protect('seed.gone', key_columns => '{account}', scope_name => 'orphan');
SELECT fencing.unprotect('seed.gone');
DROP TABLE seed.gone;
RESET SESSION AUTHORIZATION;
REVOKE ALL ON SCHEMA seed FROM regress_seed_gone;
DROP ROLE regress_seed_gone;
SET SESSION AUTHORIZATION regress_seed_owner;
CREATE TABLE seed.heir (account text, fence fencing.fence);
-- (the OID of the dropped role varies: shown as N)
DO $$
DECLARE
    st text; msg text; det text; hint text;
BEGIN
    PERFORM fencing.protect('seed.heir', key_columns => '{account}', scope_name => 'orphan');
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                            det = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RAISE NOTICE E'%: %\nDETAIL: %\nHINT: %', st, msg,
        regexp_replace(det, 'OID [0-9]+', 'OID N'), hint;
END
$$;
RESET SESSION AUTHORIZATION;
-- the remedy: the extension's owner resets the scope
SELECT fencing.reset_scope('orphan');
SET SESSION AUTHORIZATION regress_seed_owner;
SELECT fencing.protect('seed.heir', key_columns => '{account}', scope_name => 'orphan');
RESET SESSION AUTHORIZATION;
SELECT s.scope_name, s.owner FROM fencing.scope_storage s WHERE s.scope_name = 'orphan';

-- A table whose owner changed: its scope stays with the old owner, and
-- the HINT hands the scope over rather than start another from the rows
CREATE ROLE regress_seed_heir;
GRANT CREATE, USAGE ON SCHEMA seed TO regress_seed_heir;
ALTER TABLE seed.ledger OWNER TO regress_seed_heir;
SET SESSION AUTHORIZATION regress_seed_heir;
SELECT fencing.protect('seed.ledger', key_columns => '{account}', strict => false);
RESET SESSION AUTHORIZATION;
UPDATE fencing.scope_storage SET owner = 'regress_seed_heir' WHERE scope_name = 'seed.ledger';
SET SESSION AUTHORIZATION regress_seed_heir;
SELECT fencing.protect('seed.ledger', key_columns => '{account}', strict => false);
RESET SESSION AUTHORIZATION;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'seed.ledger' ORDER BY key;

-- A scope whose fences are gone (its storage dropped by hand): writes are
-- refused, and protect() again does not start it over from the rows
SELECT storage AS journal_storage FROM fencing.scope_storage WHERE scope_name = 'seed.journal' \gset
DROP TABLE :journal_storage;
SET SESSION AUTHORIZATION regress_seed_owner;
BEGIN; SET LOCAL fencing.token = '0:80';
INSERT INTO seed.journal VALUES (3);
ROLLBACK;
SELECT fencing.protect('seed.journal', key_columns => '{}');
RESET SESSION AUTHORIZATION;
-- ... nor when its row of the registry is gone too
DELETE FROM fencing.scope_storage WHERE scope_name = 'seed.journal';
SET SESSION AUTHORIZATION regress_seed_owner;
SELECT fencing.protect('seed.journal', key_columns => '{}');
BEGIN; SET LOCAL fencing.token = '0:80';
INSERT INTO seed.journal VALUES (3);
ROLLBACK;
-- starting over is a deliberate two steps: unprotect, then protect
SELECT fencing.unprotect('seed.journal');
SELECT fencing.protect('seed.journal', key_columns => '{}');
RESET SESSION AUTHORIZATION;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'seed.journal';

-- reset_scope() of a registered scope whose storage was dropped by hand
SELECT fencing.unprotect('seed.journal');
SELECT storage AS journal_storage FROM fencing.scope_storage WHERE scope_name = 'seed.journal' \gset
DROP TABLE :journal_storage;
SELECT fencing.reset_scope('seed.journal');

SELECT fencing.unprotect(relid) FROM fencing.protected
 WHERE relid::text LIKE 'seed.%' ORDER BY relid::text;
DROP SCHEMA seed CASCADE;
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage
 WHERE scope_name LIKE 'seed.%' OR scope_name = 'orphan';
DROP ROLE regress_seed_owner, regress_seed_app, regress_seed_heir;
