-- Guarding the guard, part 2: inheritance children, filled
-- tables joining a protected tree, the fence and key columns, and the
-- on-call view's health checks.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

------------------------------------------------------------------------
-- Inheritance children are guarded like partitions
------------------------------------------------------------------------
CREATE TABLE orders (id int, account text NOT NULL, fence fencing.fence);
CREATE TABLE orders_old () INHERITS (orders);
INSERT INTO orders_old VALUES (1, 'acct-1', '0:10');
SELECT fencing.protect('orders');
-- a child created later, and one that joins with ALTER TABLE ... INHERIT
CREATE TABLE orders_new () INHERITS (orders);
CREATE TABLE orders_imported (id int, account text NOT NULL, fence fencing.fence);
INSERT INTO orders_imported VALUES (2, 'acct-2', '0:20');
ALTER TABLE orders_imported INHERIT orders;
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
 WHERE tgrelid::regclass::text LIKE 'orders%' AND tgname LIKE 'zz_fencing%'
 ORDER BY 1, 2;
-- writes to a child, directly or through the parent, need a newer token
UPDATE orders_old SET account = 'x';
\echo :LAST_ERROR_SQLSTATE
UPDATE orders SET account = 'x', fence = '0:5' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM orders_imported;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE orders_imported;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE orders;
\echo :LAST_ERROR_SQLSTATE
SET session_replication_role = replica;
UPDATE orders SET account = 'x' WHERE id = 2;
\echo :LAST_ERROR_SQLSTATE
RESET session_replication_role;
UPDATE orders SET account = 'acct-1b', fence = '0:11' WHERE id = 1;
SELECT tableoid::regclass, * FROM orders ORDER BY id;
-- the children's guard triggers are guarded
ALTER TABLE orders_new DISABLE TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER zz_fencing_truncate ON orders_old;
\echo :LAST_ERROR_SQLSTATE
SELECT relid, partitions, guard_intact FROM fencing.protected_tables;
-- NO INHERIT keeps the child protected on its own, like DETACH PARTITION
ALTER TABLE orders_imported NO INHERIT orders;
SELECT relid, key_columns, scope_name FROM fencing.protected ORDER BY relid::text;
UPDATE orders_imported SET account = 'x', fence = '0:19';
\echo :LAST_ERROR_SQLSTATE
-- one protection per tree: a protected table cannot inherit into another
ALTER TABLE orders_imported INHERIT orders;
\echo :LAST_ERROR_SQLSTATE
-- unprotect removes the children's triggers too
SELECT fencing.unprotect('orders');
SELECT count(*) FROM pg_trigger
 WHERE tgrelid IN ('orders'::regclass, 'orders_old'::regclass, 'orders_new'::regclass);
DROP TABLE orders, orders_imported CASCADE;

------------------------------------------------------------------------
-- A filled table that joins a key- or table-scope tree carries its rows'
-- fences into the scope, in the same transaction
------------------------------------------------------------------------
CREATE TABLE payments (account text NOT NULL, day int NOT NULL, fence fencing.fence)
    PARTITION BY RANGE (day);
CREATE TABLE payments_1 PARTITION OF payments FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('payments', key_columns => '{account}');
INSERT INTO payments VALUES ('acct-1', 1, '0:3');
CREATE TABLE payments_2 (account text NOT NULL, day int NOT NULL, fence fencing.fence);
INSERT INTO payments_2 VALUES ('acct-1', 150, '0:7'), ('acct-1', 160, '0:9'),
                              ('acct-2', 170, '0:4');
BEGIN;
ALTER TABLE payments ATTACH PARTITION payments_2 FOR VALUES FROM (100) TO (200);
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.payments' ORDER BY key;
COMMIT;
-- a token older than the attached rows' fences cannot write that key
INSERT INTO payments VALUES ('acct-1', 2, '0:8');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO payments VALUES ('acct-2', 3, '0:4');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO payments VALUES ('acct-2', 3, '0:5');
SELECT * FROM payments ORDER BY day;

-- the same for INHERIT, in table scope
CREATE TABLE config (name text, fence fencing.fence);
INSERT INTO config VALUES ('a', '1:1');
SELECT fencing.protect('config', key_columns => '{}');
CREATE TABLE config_extra (name text, fence fencing.fence);
INSERT INTO config_extra VALUES ('b', '2:5'), ('c', '2:2');
ALTER TABLE config_extra INHERIT config;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.config';
INSERT INTO config VALUES ('d', '2:4');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM config ORDER BY name;
DROP TABLE payments, config CASCADE;

------------------------------------------------------------------------
-- The fence and key columns
------------------------------------------------------------------------
-- protect() refuses a default or generation expression on the fence
-- column and a generated key column (0A000)
CREATE TABLE d1 (id int, fence fencing.fence DEFAULT '9:9');
SELECT fencing.protect('d1');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d2 (id bigint, fence fencing.fence GENERATED ALWAYS AS (fencing.fence(id)) STORED);
SELECT fencing.protect('d2');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE d3 (account text, k text GENERATED ALWAYS AS (lower(account)) STORED,
                 fence fencing.fence);
SELECT fencing.protect('d3', key_columns => '{k}');
\echo :LAST_ERROR_SQLSTATE
-- ... also where only a child has one
CREATE TABLE d4 (id int, fence fencing.fence);
CREATE TABLE d4_child (fence fencing.fence DEFAULT '9:9') INHERITS (d4);
SELECT fencing.protect('d4');
\echo :LAST_ERROR_SQLSTATE
-- a domain over fencing.fence is not a fence column (so no domain default
-- can ever give one a value)
CREATE DOMAIN fence_d AS fencing.fence DEFAULT '9:9';
CREATE TABLE d5 (id int, fence fence_d);
SELECT fencing.protect('d5');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE d1, d2, d3, d4, d5 CASCADE;
DROP DOMAIN fence_d;

-- later DDL that would add one fails with SF005
CREATE TYPE tier AS ENUM ('gold', 'silver');
CREATE DOMAIN account_id AS text CHECK (VALUE <> '');
CREATE TABLE wallets (id int PRIMARY KEY, account account_id NOT NULL,
                      tier tier NOT NULL, note text, cents int,
                      fence fencing.fence);
INSERT INTO wallets VALUES (1, 'acct-1', 'gold', 'n', 100, '0:10');
SELECT fencing.protect('wallets', key_columns => '{account,tier}');
ALTER TABLE wallets ALTER COLUMN fence SET DEFAULT '9:9';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE wallets ALTER COLUMN fence ADD GENERATED ALWAYS AS IDENTITY;
\echo :LAST_ERROR_SQLSTATE
-- a default on a key column is harmless (applied before the guard runs)
ALTER TABLE wallets ALTER COLUMN tier SET DEFAULT 'silver';
-- a partition or child joining with a default on its fence column
CREATE TABLE wallets_child (fence fencing.fence DEFAULT '9:9') INHERITS (wallets);
\echo :LAST_ERROR_SQLSTATE
-- dropping a key column by any route
DROP DOMAIN account_id CASCADE;
\echo :LAST_ERROR_SQLSTATE
DROP TYPE tier CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE wallets DROP COLUMN tier;
\echo :LAST_ERROR_SQLSTATE
-- retyping them, or rewriting any column's values with USING
ALTER TABLE wallets ALTER COLUMN account TYPE text;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE wallets ALTER COLUMN note TYPE text USING 'tampered';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE wallets ALTER COLUMN cents TYPE bigint USING cents * 1000;
\echo :LAST_ERROR_SQLSTATE
-- a type change without USING is the column type's own cast: allowed
ALTER TABLE wallets ALTER COLUMN cents TYPE bigint;
-- other columns may come and go
ALTER TABLE wallets DROP COLUMN note;
SELECT * FROM wallets;
SELECT attname, format_type(atttypid, atttypmod), atthasdef FROM pg_attribute
 WHERE attrelid = 'wallets'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
-- DROP COLUMN reaching a protected child through inheritance
CREATE TABLE base (id int, account text, fence fencing.fence);
CREATE TABLE mid () INHERITS (base);
CREATE TABLE leaf () INHERITS (mid);
SELECT fencing.protect('mid', key_columns => '{account}');
ALTER TABLE base DROP COLUMN account;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE base ALTER COLUMN fence SET DEFAULT '1:1';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE base RENAME COLUMN fence TO token;
\echo :LAST_ERROR_SQLSTATE
SELECT relid, partitions, guard_intact, problem FROM fencing.protected_tables ORDER BY relid::text;
DROP TABLE base CASCADE;

------------------------------------------------------------------------
-- Health: fencing.protected_tables says what a superuser broke behind
-- the DDL guard's back (each in a transaction rolled back)
------------------------------------------------------------------------
CREATE TABLE h (id int, fence fencing.fence);
CREATE TABLE h_child () INHERITS (h);
SELECT fencing.protect('h');
CREATE FUNCTION noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER aaa_noop BEFORE UPDATE ON h FOR EACH ROW EXECUTE FUNCTION noop();
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
-- renamed
BEGIN;
UPDATE pg_trigger SET tgname = 'renamed' WHERE tgrelid = 'h'::regclass AND tgname = 'zz_fencing_guard';
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
-- calls another function
BEGIN;
UPDATE pg_trigger SET tgfoid = 'noop'::regproc WHERE tgrelid = 'h_child'::regclass AND tgname = 'zz_fencing_guard';
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
-- fires for UPDATE only
BEGIN;
UPDATE pg_trigger SET tgtype = 19 WHERE tgrelid = 'h'::regclass AND tgname = 'zz_fencing_guard';
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
-- an inheritance child without its TRUNCATE trigger
BEGIN;
DELETE FROM pg_trigger WHERE tgrelid = 'h_child'::regclass AND tgname = 'zz_fencing_truncate';
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
-- a BEFORE ROW trigger renamed to fire after the guard
BEGIN;
UPDATE pg_trigger SET tgname = 'zzz_noop' WHERE tgrelid = 'h'::regclass AND tgname = 'aaa_noop';
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
-- fencing.guard() no longer the extension's C function
BEGIN;
CREATE OR REPLACE FUNCTION fencing.guard() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN RETURN NEW; END $$;
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
BEGIN;
UPDATE pg_proc SET prosrc = 'fencing_guard_truncate' WHERE oid = 'fencing.guard()'::regprocedure;
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
-- the DDL guard's event triggers missing or disabled
BEGIN;
ALTER EVENT TRIGGER fencing_ddl_guard_end DISABLE;
ALTER EVENT TRIGGER fencing_ddl_guard_drop ENABLE;
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
BEGIN;
ALTER EXTENSION fencing DROP EVENT TRIGGER fencing_ddl_guard_start;
DROP EVENT TRIGGER fencing_ddl_guard_start;
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
-- a fence column that got a default
BEGIN;
UPDATE pg_attribute SET atthasdef = true WHERE attrelid = 'h_child'::regclass AND attname = 'fence';
SELECT guard_intact, problem FROM fencing.protected_tables WHERE relid = 'h'::regclass;
ROLLBACK;
SELECT relid, guard_intact, problem FROM fencing.protected_tables ORDER BY relid::text;
DROP TABLE h CASCADE;
DROP FUNCTION noop();
-- the fences of a dropped table stay in its scope's storage, whose key
-- columns have the table's types: a cascade cannot drop them either
DROP TABLE wallets;
DROP TYPE tier CASCADE;
\echo :LAST_ERROR_SQLSTATE
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.wallets';
SELECT fencing.reset_scope('public.wallets');
DROP TYPE tier;
DROP DOMAIN account_id;
