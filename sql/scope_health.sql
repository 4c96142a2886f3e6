-- scope_health: fencing.protected_tables says a guard is not intact when
-- its key or table scope's storage is missing or damaged (what a restore
-- into a database with colliding scopes, or a hand on the extension's
-- tables, can leave behind), and when any of the extension's event
-- triggers is missing or disabled.  Each damage is done by a superuser in
-- a transaction that is rolled back.
SET search_path = public, fencing;

CREATE TABLE health_ledger (id int, account text COLLATE "C", fence fencing.fence);
CREATE TABLE health_config (name text, fence fencing.fence);
CREATE TABLE health_rows (id int, fence fencing.fence);
SELECT fencing.protect('health_ledger', key_columns => '{account}', scope_name => 'health acct');
SELECT fencing.protect('health_config', key_columns => '{}', scope_name => 'health config');
SELECT fencing.protect('health_rows');
BEGIN; SET LOCAL fencing.token = '1:1';
INSERT INTO health_ledger VALUES (1, 'a');
INSERT INTO health_config VALUES ('mode');
COMMIT;
SELECT storage AS ledger_storage FROM fencing.scope_storage WHERE scope_name = 'health acct' \gset
SELECT storage AS config_storage FROM fencing.scope_storage WHERE scope_name = 'health config' \gset

-- What the view says of the three tables, storage names masked
CREATE FUNCTION pg_temp.health() RETURNS TABLE (relid regclass, guard_intact boolean, problem text)
LANGUAGE sql AS $$
    SELECT p.relid, p.guard_intact,
           regexp_replace(p.problem, 'scope_[0-9a-f]+(_[0-9]+)?', 'scope_<h>', 'g')
      FROM fencing.protected_tables p
     WHERE p.relid IN ('health_ledger'::regclass, 'health_config'::regclass,
                       'health_rows'::regclass)
     ORDER BY p.relid::text
$$;

SELECT * FROM pg_temp.health();

-- the storage table is gone
BEGIN;
DROP TABLE :ledger_storage;
SELECT * FROM pg_temp.health();
ROLLBACK;

-- the registry has no row for the scope
BEGIN;
DELETE FROM fencing.scope_storage WHERE scope_name = 'health acct';
SELECT * FROM pg_temp.health();
ROLLBACK;

-- the registry points elsewhere: to another scope's storage, to a table
-- of another schema
BEGIN;
ALTER TABLE fencing.scope_storage DROP CONSTRAINT scope_storage_storage_key;
UPDATE fencing.scope_storage SET storage = :'config_storage' WHERE scope_name = 'health acct';
SELECT * FROM pg_temp.health();
UPDATE fencing.scope_storage SET storage = 'health_rows' WHERE scope_name = 'health acct';
SELECT * FROM pg_temp.health();
ROLLBACK;

-- a key column of another type or collation, a column more
BEGIN;
ALTER TABLE :ledger_storage ALTER COLUMN key_1 TYPE bytea USING key_1::bytea;
SELECT * FROM pg_temp.health();
ROLLBACK;
BEGIN;
ALTER TABLE :ledger_storage ALTER COLUMN key_1 TYPE text COLLATE "POSIX";
SELECT * FROM pg_temp.health();
ROLLBACK;
BEGIN;
ALTER TABLE :config_storage ADD COLUMN extra int;
SELECT * FROM pg_temp.health();
ROLLBACK;

-- the unique index gone, or another index beside it
BEGIN;
DO $$ BEGIN
    EXECUTE format('DROP INDEX %s', (SELECT i.indexrelid::regclass FROM pg_index i
                                      JOIN fencing.scope_storage s ON s.storage = i.indrelid
                                     WHERE s.scope_name = 'health acct'));
END $$;
SELECT * FROM pg_temp.health();
ROLLBACK;
BEGIN;
CREATE INDEX health_extra ON :ledger_storage (fence);
SELECT * FROM pg_temp.health();
ROLLBACK;

-- a trigger of its own, row security
BEGIN;
CREATE FUNCTION pg_temp.noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER health_noop BEFORE INSERT ON :ledger_storage
    FOR EACH ROW EXECUTE FUNCTION pg_temp.noop();
SELECT * FROM pg_temp.health();
ROLLBACK;
BEGIN;
ALTER TABLE :config_storage ENABLE ROW LEVEL SECURITY;
SELECT * FROM pg_temp.health();
ROLLBACK;

-- any of the extension's event triggers disabled, or renamed away
BEGIN;
ALTER EVENT TRIGGER fencing_citus_ddl_end DISABLE;
SELECT * FROM pg_temp.health();
ROLLBACK;
BEGIN;
ALTER EVENT TRIGGER fencing_drop_extension ENABLE REPLICA;
SELECT * FROM pg_temp.health();
ROLLBACK;
BEGIN;
ALTER EVENT TRIGGER fencing_ddl_guard_drop RENAME TO health_renamed;
SELECT * FROM pg_temp.health();
ROLLBACK;
BEGIN;
ALTER EVENT TRIGGER fencing_indirect_ddl_end DISABLE;
SELECT * FROM pg_temp.health();
ROLLBACK;

-- and intact again
SELECT * FROM pg_temp.health();

DROP TABLE health_ledger, health_config, health_rows;
SELECT fencing.reset_scope('health acct'), fencing.reset_scope('health config');
