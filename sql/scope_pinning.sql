-- scope_pinning: no object that a role without ownership creates (a view
-- on a storage table, a function or a column of its row type, a scope of
-- its own) can make fencing.reset_scope(), fencing.unprotect() or DROP
-- EXTENSION fencing fail.  In a database of its own, so that the extension
-- can be dropped.
\set SHOW_CONTEXT never
SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_fencing_pinning;
CREATE ROLE regress_pin_bank;
CREATE ROLE regress_pin_mallory;
\c regress_fencing_pinning
SET search_path = public, fencing;
SET client_min_messages = warning;
CREATE EXTENSION fencing;
RESET client_min_messages;
CREATE SCHEMA bank AUTHORIZATION regress_pin_bank;
CREATE SCHEMA mallory AUTHORIZATION regress_pin_mallory;
GRANT USAGE ON SCHEMA bank TO regress_pin_mallory;

-- SQLSTATE of a statement, or ok
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

-- The bank's ledger, fenced per account
SET SESSION AUTHORIZATION regress_pin_bank;
CREATE TABLE bank.ledger (account text, amount int, fence fencing.fence);
SELECT fencing.protect('bank.ledger', key_columns => '{account}');
BEGIN; SET LOCAL fencing.token = '1:1';
INSERT INTO bank.ledger VALUES ('acct-1', 100);
COMMIT;
GRANT SELECT ON bank.ledger TO regress_pin_mallory;
RESET SESSION AUTHORIZATION;

-- Another role builds on the scope's storage table, which it may not read:
-- PostgreSQL checks no privilege on a view's tables when the view is
-- created, nor on a row type used as a column, argument or domain type.
SET SESSION AUTHORIZATION regress_pin_mallory;
SELECT storage AS storage FROM fencing.scope_storage
 WHERE scope_name = 'bank.ledger' \gset
SELECT pg_temp.outcome(format('CREATE VIEW mallory.pin_view AS SELECT * FROM %s', :'storage')) AS pin_view,
       pg_temp.outcome(format('CREATE TABLE mallory.pin_column (c %s)', :'storage')) AS pin_column,
       pg_temp.outcome(format('CREATE FUNCTION mallory.pin_arg(%s) RETURNS int LANGUAGE sql AS ''SELECT 1''', :'storage')) AS pin_arg,
       pg_temp.outcome(format('CREATE FUNCTION mallory.pin_body() RETURNS bigint LANGUAGE sql BEGIN ATOMIC SELECT count(*) FROM %s; END', :'storage')) AS pin_body,
       pg_temp.outcome(format('CREATE DOMAIN mallory.pin_domain AS %s', :'storage')) AS pin_domain;
-- reading through the view still needs the privilege it does not have
SELECT pg_temp.outcome('SELECT * FROM mallory.pin_view') AS read_view;
-- a view on the bank's table too (it holds up DROP TABLE of the bank's
-- table, as in any database, but nothing of fencing's)
CREATE VIEW mallory.ledger_view AS SELECT * FROM bank.ledger;
-- and a scope of its own whose key is made of the storage's row type is
-- refused, so that no key column can depend on a storage table
SELECT pg_temp.outcome(format('CREATE TABLE mallory.keyed (k %s, fence fencing.fence)', :'storage')) AS keyed;
\set VERBOSITY terse
SELECT fencing.protect('mallory.keyed', key_columns => '{k}');
CREATE TABLE mallory.keyed2 (k mallory.pin_domain[], fence fencing.fence);
SELECT fencing.protect('mallory.keyed2', key_columns => '{k}');
\set VERBOSITY default
-- its own scope, left behind by a table it drops
CREATE TABLE mallory.mine (k text, fence fencing.fence);
SELECT fencing.protect('mallory.mine', key_columns => '{k}');
BEGIN; SET LOCAL fencing.token = '9:9';
INSERT INTO mallory.mine VALUES ('x');
COMMIT;
DROP TABLE mallory.mine, mallory.keyed, mallory.keyed2;
RESET SESSION AUTHORIZATION;

-- unprotect() is not held up
SET SESSION AUTHORIZATION regress_pin_bank;
SELECT fencing.unprotect('bank.ledger');
RESET SESSION AUTHORIZATION;

-- reset_scope() drops the storage with what was built on it
\set VERBOSITY terse
SELECT fencing.reset_scope('bank.ledger');
\set VERBOSITY default
SELECT to_regclass('mallory.pin_view') AS pin_view,
       (SELECT count(*) FROM pg_attribute
         WHERE attrelid = 'mallory.pin_column'::regclass AND attname = 'c'
           AND NOT attisdropped) AS pin_column,
       to_regprocedure('mallory.pin_body()') AS pin_body,
       to_regtype('mallory.pin_domain') AS pin_domain,
       (SELECT count(*) FROM pg_proc WHERE proname = 'pin_arg') AS pin_arg,
       to_regclass('mallory.ledger_view') AS ledger_view;
SELECT count(*) AS bank_scopes FROM fencing.scope_storage WHERE scope_name = 'bank.ledger';

-- DROP EXTENSION (without CASCADE) is not held up by another role's scope
-- nor by what it built on a storage table
SET SESSION AUTHORIZATION regress_pin_bank;
SELECT fencing.protect('bank.ledger', key_columns => '{account}');
RESET SESSION AUTHORIZATION;
SET SESSION AUTHORIZATION regress_pin_mallory;
SELECT storage AS storage FROM fencing.scope_storage
 WHERE scope_name = 'bank.ledger' \gset
SELECT pg_temp.outcome(format('CREATE VIEW mallory.pin_view AS SELECT * FROM %s', :'storage')) AS pin_view;
RESET SESSION AUTHORIZATION;
SELECT scope_name, owner FROM fencing.scope_storage ORDER BY 1;
-- the bank's table still has a fence column: DROP EXTENSION fails because
-- of it, as for any extension's type, and nothing is dropped
\set VERBOSITY terse
DROP EXTENSION fencing;
\set VERBOSITY default
SELECT count(*) AS scopes_kept FROM fencing.scope_storage;
SELECT to_regclass('mallory.pin_view') IS NOT NULL AS pin_view_kept;
-- without it, DROP EXTENSION goes through, storage tables and all
DROP VIEW mallory.ledger_view;
DROP TABLE bank.ledger;
\set VERBOSITY terse
DROP EXTENSION fencing;
\set VERBOSITY default
SELECT count(*) AS fencing_tables_left FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'fencing';
SELECT to_regclass('mallory.pin_view') AS pin_view;
SET client_min_messages = warning;
CREATE EXTENSION fencing;
RESET client_min_messages;
SELECT count(*) AS scopes FROM fencing.scope_storage;

\c :regress_db
DROP DATABASE regress_fencing_pinning;
DROP ROLE regress_pin_bank, regress_pin_mallory;
