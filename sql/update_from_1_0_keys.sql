--
-- ALTER EXTENSION fencing UPDATE from 1.0 reads the text keys of 1.0
-- exactly, merges keys that are one value, and is never stopped by
-- another role's data without an error that names the scope, its owner
-- and a command that lets it go on (the command of each HINT is run
-- below as printed).  Each case starts from a fresh 1.0 installation.
--
\set SHOW_CONTEXT never
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_keys_dba SUPERUSER;
CREATE ROLE regress_keys_alice;
CREATE ROLE regress_keys_mallory;
CREATE DATABASE regress_update_keys TEMPLATE template0 ENCODING 'UTF8';
\c regress_update_keys
SET ROLE regress_keys_dba;
-- What 1.0's protect() left behind for a table in key scope (this library
-- refuses protect() in key scope while the objects are at 1.0): the row of
-- fencing.protected and the two guard triggers, ENABLE ALWAYS.
CREATE FUNCTION public.protect_1_0(tbl regclass, keys name[], scope text)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fencing.protected VALUES (tbl, 'fence', keys, true, scope);
    EXECUTE format('CREATE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
                   'FOR EACH ROW EXECUTE FUNCTION fencing.guard()', tbl);
    EXECUTE format('CREATE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()', tbl);
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_guard, '
                   'ENABLE ALWAYS TRIGGER zz_fencing_truncate', tbl);
END $$;
-- A fresh 1.0 installation and schema c for the case's tables, and the
-- settings the update's messages show.
\set fresh 'SET ROLE regress_keys_dba; SET client_min_messages = warning; DROP EXTENSION IF EXISTS fencing CASCADE; DROP SCHEMA IF EXISTS c CASCADE; CREATE SCHEMA c; GRANT ALL ON SCHEMA c TO PUBLIC; CREATE EXTENSION fencing VERSION \'1.0\'; RESET client_min_messages; SET DateStyle = \'ISO, MDY\'; SET IntervalStyle = postgres; SET TimeZone = \'UTC\'; SET extra_float_digits = 1; SET bytea_output = hex; SET lc_monetary = \'C\';'
CREATE COLLATION public.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);

-- 1. Keys written under another DateStyle, and keys that are one value.
:fresh
SET ROLE regress_keys_alice;
CREATE TABLE c.bookings (day date, what text, fence fencing.fence);
CREATE TABLE c.amounts (n numeric, fence fencing.fence);
CREATE TABLE c.temps (t float8, fence fencing.fence);
CREATE TABLE c.accounts (id text COLLATE public.ci, fence fencing.fence);
CREATE TABLE c.notes (a text, b int, fence fencing.fence);
CREATE TABLE c.settings (name text, fence fencing.fence);
SET ROLE regress_keys_dba;
SELECT protect_1_0('c.bookings', '{day}', 'bookings'), protect_1_0('c.amounts', '{n}', 'amounts'),
       protect_1_0('c.temps', '{t}', 'temps'), protect_1_0('c.accounts', '{id}', 'accounts'),
       protect_1_0('c.notes', '{a,b}', 'notes'), protect_1_0('c.settings', '{}', 'settings');
SET ROLE regress_keys_alice;
-- 1 February (fence 0:50) and 2 January (0:20), as 'SQL, DMY' prints them
SET DateStyle = 'SQL, DMY';
INSERT INTO c.bookings VALUES ('01/02/2026', 'feb 1', '0:50'), ('02/01/2026', 'jan 2', '0:20');
SET DateStyle = 'ISO, MDY';
-- 1.0 kept 1.0 and 1, -0 and 0, ACCT-1 and acct-1 apart
INSERT INTO c.amounts VALUES (1.0, '0:7'), (1, '0:9'), (2.50, '0:3');
INSERT INTO c.temps VALUES ('-0', '0:3'), ('0', '0:4');
INSERT INTO c.accounts VALUES ('ACCT-1', '0:5'), ('acct-1', '0:9');
-- NULLs, characters that JSON escapes, and a table scope
INSERT INTO c.notes VALUES (NULL, 1, '0:3'), (NULL, NULL, '0:4'), (E'q"u\\o\te\n\x01', 2, '0:5');
INSERT INTO c.settings VALUES ('mode', '0:6');
SET ROLE regress_keys_dba;
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY 1, 2;

-- Under ISO, MDY the dates would read as other days: the update stops.
ALTER EXTENSION fencing UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';
-- With the writers' DateStyle it converts them, to the days they were.
SET DateStyle = 'SQL, DMY';
ALTER EXTENSION fencing UPDATE;
SET DateStyle = 'ISO, MDY';
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY 1, 2;
-- A stale token is refused at its own key, and the fences of equal keys
-- are one, the highest
SET ROLE regress_keys_alice;
BEGIN;
SET LOCAL fencing.token = '0:21';
UPDATE c.bookings SET what = 'stale' WHERE day = '2026-02-01';
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:21';
UPDATE c.bookings SET what = 'jan 2, again' WHERE day = '2026-01-02';
COMMIT;
BEGIN;
SET LOCAL fencing.token = '0:8';
INSERT INTO c.amounts VALUES (1.000);
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:4';
INSERT INTO c.temps VALUES (0);
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:7';
INSERT INTO c.accounts VALUES ('Acct-1');
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:4';
INSERT INTO c.notes VALUES (NULL, NULL);
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:5';
INSERT INTO c.notes VALUES (E'q"u\\o\te\n\x01', 2);
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:6';
INSERT INTO c.settings VALUES ('limit');
ROLLBACK;
SET ROLE regress_keys_dba;

-- 2. Mallory's table with a scope name of 300 bytes.
:fresh
SET ROLE regress_keys_mallory;
CREATE TABLE c.m_long (k text, fence fencing.fence);
SET ROLE regress_keys_dba;
SELECT protect_1_0('c.m_long', '{k}', repeat('x', 300));
SET ROLE regress_keys_mallory;
INSERT INTO c.m_long VALUES ('k-1', '0:5');
SET ROLE regress_keys_dba;
ALTER EXTENSION fencing UPDATE;
BEGIN; LOCK TABLE c.m_long IN SHARE ROW EXCLUSIVE MODE; LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; UPDATE fencing.protected SET scope_name = 'scope ' || md5(scope_name) WHERE octet_length(scope_name) NOT BETWEEN 1 AND 255; UPDATE fencing.scopes SET scope_name = 'scope ' || md5(scope_name) WHERE octet_length(scope_name) NOT BETWEEN 1 AND 255; ALTER EXTENSION fencing UPDATE; COMMIT;
SELECT p.relid, s.scope_name, s.owner, f.key, f.fence
  FROM fencing.protected p JOIN fencing.scope_storage s USING (scope_name)
  JOIN fencing.scopes f USING (scope_name);

-- 3. Mallory protects a table keyed by integers into Alice's scope of
-- text keys: the tables of each key type need a scope of their own.
:fresh
SET ROLE regress_keys_alice;
CREATE TABLE c.a_ledger (acct text, fence fencing.fence);
SET ROLE regress_keys_mallory;
CREATE TABLE c.m_ledger (acct integer, fence fencing.fence);
SET ROLE regress_keys_dba;
SELECT protect_1_0('c.a_ledger', '{acct}', 'accounts'), protect_1_0('c.m_ledger', '{acct}', 'accounts');
SET ROLE regress_keys_alice;
INSERT INTO c.a_ledger VALUES ('acct-1', '0:5');
SET ROLE regress_keys_mallory;
INSERT INTO c.m_ledger VALUES (42, '0:6');
SET ROLE regress_keys_dba;
ALTER EXTENSION fencing UPDATE;
-- the command of the HINT: the copy holds Alice's text keys too, which
-- are no integers: the update names them
BEGIN; LOCK TABLE c.m_ledger IN SHARE ROW EXCLUSIVE MODE; LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; INSERT INTO fencing.scopes (scope_name, key, fence) SELECT 'accounts (integer)', key, fence FROM fencing.scopes WHERE scope_name = 'accounts'; UPDATE fencing.protected SET scope_name = 'accounts (integer)' WHERE relid IN ('c.m_ledger'::regclass); ALTER EXTENSION fencing UPDATE; COMMIT;
-- and so, deleting them from the copy, which lowers no fence of
-- Mallory's table
BEGIN; LOCK TABLE c.m_ledger IN SHARE ROW EXCLUSIVE MODE; LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; INSERT INTO fencing.scopes (scope_name, key, fence) SELECT 'accounts (integer)', key, fence FROM fencing.scopes WHERE scope_name = 'accounts'; UPDATE fencing.protected SET scope_name = 'accounts (integer)' WHERE relid IN ('c.m_ledger'::regclass); DELETE FROM fencing.scopes WHERE scope_name = 'accounts (integer)' AND key = '["acct-1"]'; ALTER EXTENSION fencing UPDATE; COMMIT;
SELECT s.scope_name, s.owner, f.key, f.fence
  FROM fencing.scope_storage s JOIN fencing.scopes f USING (scope_name) ORDER BY 1, 3;

-- 4. A scope no table uses any more, whose keys have one value or two.
:fresh
INSERT INTO fencing.scopes VALUES ('gone', '["a"]', '0:1'), ('gone', '["a","b"]', '0:2');
ALTER EXTENSION fencing UPDATE;
BEGIN; LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; UPDATE fencing.scopes SET scope_name = 'gone (2 values)' WHERE scope_name = 'gone' AND json_array_length(key::json) = 2; ALTER EXTENSION fencing UPDATE; COMMIT;
SELECT s.scope_name, s.owner = (SELECT extowner FROM pg_extension WHERE extname = 'fencing')::regrole AS extension_owner,
       f.key, f.fence
  FROM fencing.scope_storage s JOIN fencing.scopes f USING (scope_name) ORDER BY 1;

-- 5. Alice's table keyed by a type without a btree operator class.
:fresh
SET ROLE regress_keys_alice;
CREATE TABLE c.a_points (p point, fence fencing.fence);
SET ROLE regress_keys_dba;
SELECT protect_1_0('c.a_points', '{p}', 'points');
SET ROLE regress_keys_alice;
INSERT INTO c.a_points VALUES ('(1,2)', '0:5');
SET ROLE regress_keys_dba;
ALTER EXTENSION fencing UPDATE;
SELECT fencing.unprotect('c.a_points');
ALTER EXTENSION fencing UPDATE;
SELECT scope_name, key, fence FROM fencing.scopes;

-- 6. Mallory's objects on what the update drops: a view of fencing.scopes
-- and a function on a lease function of 1.0.
:fresh
SET ROLE regress_keys_mallory;
CREATE VIEW c.my_scopes AS SELECT * FROM fencing.scopes;
CREATE FUNCTION c.my_expiry() RETURNS timestamptz LANGUAGE sql
    BEGIN ATOMIC SELECT fencing.lease_expiry(now(), '1 hour'); END;
SET ROLE regress_keys_dba;
ALTER EXTENSION fencing UPDATE;
DROP VIEW c.my_scopes;
DROP FUNCTION c.my_expiry();
ALTER EXTENSION fencing UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'fencing';

-- 7. A key column that a protected table lost: fencing 1.0 let DROP
-- DOMAIN ... CASCADE drop it (here a superuser switches the DDL guard off
-- to do the same).
:fresh
SET ROLE regress_keys_alice;
CREATE DOMAIN c.code AS text;
CREATE TABLE c.a_lost (k c.code, fence fencing.fence);
SET ROLE regress_keys_dba;
SELECT protect_1_0('c.a_lost', '{k}', 'lost');
SET ROLE regress_keys_alice;
INSERT INTO c.a_lost VALUES ('k-1', '0:5');
SET ROLE regress_keys_dba;
ALTER EVENT TRIGGER fencing_ddl_guard_start DISABLE;
ALTER EVENT TRIGGER fencing_ddl_guard_end DISABLE;
ALTER EVENT TRIGGER fencing_ddl_guard_drop DISABLE;
SET client_min_messages = warning;
DROP DOMAIN c.code CASCADE;
RESET client_min_messages;
ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE ALWAYS;
ALTER EVENT TRIGGER fencing_ddl_guard_end ENABLE ALWAYS;
ALTER EVENT TRIGGER fencing_ddl_guard_drop ENABLE ALWAYS;
ALTER EXTENSION fencing UPDATE;
SELECT fencing.unprotect('c.a_lost');
ALTER EXTENSION fencing UPDATE;
SELECT scope_name, key, fence FROM fencing.scopes;

-- 8. Alice's key type refuses, during the update, keys it took before:
-- the update names them with their scope, owner and the type's reason.
-- An error that must stop the update at once (a cancel, here raised by
-- her type's code) says which scope it was reading, as whom.
:fresh
SET ROLE regress_keys_alice;
CREATE TABLE c.flags (refuse boolean, cancel boolean);
INSERT INTO c.flags VALUES (false, false);
GRANT SELECT ON c.flags TO PUBLIC;
CREATE FUNCTION c.picky(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF (SELECT refuse FROM c.flags) THEN
        RAISE EXCEPTION 'no more codes like %', v;
    END IF;
    IF (SELECT cancel FROM c.flags) THEN
        RAISE EXCEPTION 'enough' USING ERRCODE = 'query_canceled';
    END IF;
    RETURN true;
END $$;
CREATE DOMAIN c.code AS text CHECK (c.picky(VALUE));
CREATE TYPE c.ref AS (code c.code);
CREATE TABLE c.a_refs (r c.ref, fence fencing.fence);
SET ROLE regress_keys_dba;
SELECT protect_1_0('c.a_refs', '{r}', 'refs');
SET ROLE regress_keys_alice;
INSERT INTO c.a_refs VALUES (ROW('x-1'), '0:5'), (ROW('x-2'), '0:6');
UPDATE c.flags SET refuse = true;
SET ROLE regress_keys_dba;
ALTER EXTENSION fencing UPDATE;
SET ROLE regress_keys_alice;
UPDATE c.flags SET refuse = false, cancel = true;
SET ROLE regress_keys_dba;
ALTER EXTENSION fencing UPDATE;
SET ROLE regress_keys_alice;
UPDATE c.flags SET cancel = false;
SET ROLE regress_keys_dba;
ALTER EXTENSION fencing UPDATE;
SELECT scope_name, key, fence FROM fencing.scopes;

\c :regress_db
DROP DATABASE regress_update_keys WITH (FORCE);
DROP ROLE regress_keys_alice;
DROP ROLE regress_keys_mallory;
DROP ROLE regress_keys_dba;
