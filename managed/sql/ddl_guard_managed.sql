-- ddl_guard_managed: installed by a role that may create event triggers
-- (here a superuser), the edition guards the guard: DDL that would break
-- a protected table's guard is undone with SF005, and partitions and
-- children that join a protected table are guarded (and seed its fences).
\set SHOW_CONTEXT never
SET search_path = public, fencing;
SELECT ddl_guard FROM fencing.edition_state;
CREATE TABLE accounts (id text PRIMARY KEY, balance bigint, fence fencing.fence);
CREATE TABLE ledger (acct text, amount int, fence fencing.fence);
SELECT fencing.protect('accounts'), fencing.protect('ledger', key_columns => '{acct}');
SELECT relid, guard_intact, ddl_guarded FROM fencing.protected_tables ORDER BY relid::text;

-- the guard triggers: not disabled, not made ORIGIN, not dropped, not renamed
ALTER TABLE accounts DISABLE TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts DISABLE TRIGGER ALL;
ALTER TABLE accounts ENABLE TRIGGER zz_fencing_truncate;
ALTER TABLE accounts ENABLE REPLICA TRIGGER zz_fencing_guard;
DROP TRIGGER zz_fencing_guard ON accounts;
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER zz_fencing_truncate ON accounts;
ALTER TRIGGER zz_fencing_guard ON accounts RENAME TO guard_renamed;
-- nor outranked: a BEFORE ROW trigger that would fire after the guard
CREATE TRIGGER zzz_late BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
-- (one that fires before it is the table owner's business)
CREATE TRIGGER aa_early BEFORE UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
DROP TRIGGER aa_early ON accounts;
-- the fence and key columns: not dropped, not retyped, no default
ALTER TABLE accounts DROP COLUMN fence;
ALTER TABLE accounts ALTER COLUMN fence TYPE text;
ALTER TABLE accounts ALTER COLUMN fence SET DEFAULT '(9,9)';
ALTER TABLE ledger DROP COLUMN acct;
ALTER TABLE ledger ALTER COLUMN acct TYPE varchar(3);
-- other DDL goes through
ALTER TABLE accounts ADD COLUMN note text;
ALTER TABLE ledger ALTER COLUMN amount TYPE bigint;
SELECT relid, guard_intact, problem FROM fencing.protected_tables ORDER BY relid::text;
-- unprotect() first, then anything goes
SELECT fencing.unprotect('accounts');
ALTER TABLE accounts DROP COLUMN fence;
SELECT count(*) FROM fencing.protected WHERE relid = 'accounts'::regclass;

-- partitions created or attached later are guarded; an attached table's
-- rows seed the scope, so no earlier token can write their keys
CREATE TABLE events (id int, k text, fence fencing.fence) PARTITION BY RANGE (id);
CREATE TABLE events_1 PARTITION OF events FOR VALUES FROM (0) TO (10);
SELECT fencing.protect('events', key_columns => '{k}');
CREATE TABLE events_2 PARTITION OF events FOR VALUES FROM (10) TO (20);
CREATE TABLE events_3 (id int, k text, fence fencing.fence);
INSERT INTO events_3 VALUES (25, 'x', fencing.fence(0, 33));
ALTER TABLE events ATTACH PARTITION events_3 FOR VALUES FROM (20) TO (30);
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
 WHERE tgrelid IN ('events_1'::regclass, 'events_2'::regclass, 'events_3'::regclass) ORDER BY 1, 2;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.events';
INSERT INTO events VALUES (5, 'x', fencing.fence(0, 30));
TRUNCATE events_2;
SELECT relid, partitions, guard_intact FROM fencing.protected_tables WHERE relid = 'events'::regclass;
-- an inheritance child too
CREATE TABLE parent (id int, fence fencing.fence);
SELECT fencing.protect('parent');
CREATE TABLE child () INHERITS (parent);
INSERT INTO child VALUES (1, fencing.fence(0, 5));
UPDATE child SET id = 2 WHERE id = 1;
SELECT relid, partitions, guard_intact FROM fencing.protected_tables WHERE relid = 'parent'::regclass;

-- a protected table dropped leaves fencing.protected (its scope's fences stay)
DROP TABLE ledger;
SELECT count(*) FROM fencing.protected p WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = p.relid);
SELECT count(*) > 0 AS ledger_fences_kept FROM fencing.scope_storage WHERE scope_name = 'public.ledger';
DROP TABLE events, parent, child, accounts CASCADE;
SELECT fencing.reset_scope('public.ledger') >= 0 AS reset;
SELECT fencing.reset_scope('public.events') >= 0 AS reset;
