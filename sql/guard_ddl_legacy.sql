-- A database still at 1.0 running the 1.1 library: the DDL guard of 1.1
-- works with 1.0's event triggers (whose ddl_command_end does not fire for
-- CREATE TRIGGER and ALTER TRIGGER: for those the target is locked in the
-- command's own mode before the check, as 1.0 did), and ALTER EXTENSION
-- UPDATE brings the new event triggers and view.
\set SHOW_CONTEXT never
SET client_min_messages = warning;
\set regress_db :DBNAME
CREATE DATABASE fencing_ddl_legacy;
\c fencing_ddl_legacy
SET client_min_messages = warning;
CREATE EXTENSION fencing VERSION '1.0';
CREATE TABLE ledger (id int, account text NOT NULL, fence fencing.fence);
INSERT INTO ledger VALUES (1, 'a', '0:10');
-- what 1.0's protect() left behind (the 1.1 library refuses protect() on
-- 1.0 objects), written the way pg_restore writes it: the catalog rows,
-- then the triggers, then ENABLE ALWAYS; the DDL guard lets that through
INSERT INTO fencing.protected (relid, fence_column, key_columns, strict, scope_name)
    VALUES ('ledger', 'fence', '{account}', true, 'public.ledger');
INSERT INTO fencing.scopes VALUES ('public.ledger', '["a"]', '0:10');
CREATE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION fencing.guard();
CREATE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate();
ALTER TABLE ledger ENABLE ALWAYS TRIGGER zz_fencing_guard;
ALTER TABLE ledger ENABLE ALWAYS TRIGGER zz_fencing_truncate;
-- ... but not a guard trigger of another shape
CREATE TABLE other (id int, fence fencing.fence);
INSERT INTO fencing.protected (relid, fence_column, key_columns, strict, scope_name)
    VALUES ('other', 'fence', NULL, true, 'public.other');
CREATE TRIGGER zz_fencing_guard BEFORE UPDATE ON other
    FOR EACH ROW EXECUTE FUNCTION fencing.guard();
\echo :LAST_ERROR_SQLSTATE
DELETE FROM fencing.protected WHERE relid = 'other'::regclass;
DROP TABLE other;
CREATE FUNCTION let_through() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN RETURN COALESCE(NEW, OLD); END $$;
CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER "é" BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE ledger ALTER COLUMN fence SET DEFAULT '9:9';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE ledger ALTER COLUMN id TYPE bigint USING id * 2;
\echo :LAST_ERROR_SQLSTATE
-- inheritance children are guarded with the 1.0 objects too
CREATE TABLE ledger_child () INHERITS (ledger);
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'ledger_child'::regclass ORDER BY 1;
INSERT INTO ledger_child VALUES (2, 'a', '0:9');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM ledger;
SELECT relid, guard_intact, problem FROM fencing.protected_tables;
-- the update brings 1.1's objects; the protection and its fences stay
ALTER EXTENSION fencing UPDATE TO '1.1';
SELECT relid, partitions, guard_intact, problem FROM fencing.protected_tables;
SELECT evtname, evtenabled, evttags FROM pg_event_trigger ORDER BY 1;
SELECT key, fence FROM fencing.scopes;
CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
\c :regress_db
SET client_min_messages = warning;
DROP DATABASE fencing_ddl_legacy;
