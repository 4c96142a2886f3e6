-- ddl_guard_absent: installed by a role that may not create event
-- triggers, the edition has no DDL guard: DDL that breaks a guard is not
-- refused, and fencing.protected_tables says what it broke.
\set SHOW_CONTEXT never
SET search_path = public, fencing;
CREATE TABLE dga (id int PRIMARY KEY, fence fencing.fence);
SELECT fencing.protect('dga');
SELECT relid, guard_intact, problem, ddl_guarded FROM fencing.protected_tables WHERE relid = 'dga'::regclass;
ALTER TABLE dga DISABLE TRIGGER zz_fencing_guard;
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'dga'::regclass;
ALTER TABLE dga ENABLE ALWAYS TRIGGER zz_fencing_guard;
CREATE TRIGGER zzz_after BEFORE UPDATE ON dga FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'dga'::regclass;
DROP TRIGGER zzz_after ON dga;
-- protect() again repairs the guard
DROP TRIGGER zz_fencing_truncate ON dga;
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'dga'::regclass;
SELECT fencing.protect('dga');
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'dga'::regclass;
-- a protected table dropped is not forgotten: the view says so, unprotect() forgets it
SELECT 'dga'::regclass::oid AS dga_oid \gset
DROP TABLE dga;
SELECT guard_intact, problem ~ '^table does not exist' AS gone FROM fencing.protected_tables WHERE relid = :dga_oid;
SELECT fencing.unprotect(:dga_oid);
SELECT count(*) FROM fencing.protected WHERE relid = :dga_oid;
