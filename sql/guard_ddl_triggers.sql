-- Guarding the guard, part 2: the guard triggers cannot be
-- replaced, renamed or outranked, by any route.  Every refused attack is
-- shown with its SQLSTATE, and the data is shown untouched afterwards.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE TABLE ledger (id int PRIMARY KEY, account text NOT NULL,
                     amount int NOT NULL, fence fencing.fence);
-- owned by a role of the test's own, whoever runs it
CREATE ROLE fencing_ledger_owner;
ALTER TABLE ledger OWNER TO fencing_ledger_owner;
INSERT INTO ledger VALUES (1, 'acct-1', 100, '0:10');
SELECT fencing.protect('ledger', key_columns => '{account}');
CREATE FUNCTION let_through() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN RETURN COALESCE(NEW, OLD); END $$;
CREATE FUNCTION lower_fence() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN NEW.fence := '0:0'; RETURN NEW; END $$;

-- A role holding only TRIGGER (and INSERT) replaces the guard under its
-- own name: refused.
CREATE ROLE fencing_trg_only;
GRANT TRIGGER, INSERT, SELECT ON ledger TO fencing_trg_only;
GRANT EXECUTE ON FUNCTION let_through() TO fencing_trg_only;
SET ROLE fencing_trg_only;
CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
CREATE OR REPLACE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
-- and the tokenless INSERT it wanted is still refused
INSERT INTO ledger VALUES (2, 'acct-1', -666, NULL);
\echo :LAST_ERROR_SQLSTATE
-- nor can it add a BEFORE ROW trigger that fires after the guard
CREATE TRIGGER zzz_late BEFORE INSERT ON ledger
    FOR EACH ROW EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- The owner cannot replace either guard trigger, nor empty the table
CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger
    FOR EACH ROW EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
CREATE OR REPLACE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON ledger
    FOR EACH STATEMENT EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
-- not even with the guard's own function and a WHEN clause
CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON ledger
    FOR EACH ROW WHEN (false) EXECUTE FUNCTION fencing.guard();
\echo :LAST_ERROR_SQLSTATE
TRUNCATE ledger;
\echo :LAST_ERROR_SQLSTATE

-- Renaming a guard trigger, or another trigger to the guard's name
ALTER TRIGGER zz_fencing_guard ON ledger RENAME TO aa_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TRIGGER zz_fencing_truncate ON ledger RENAME TO aa_truncate;
\echo :LAST_ERROR_SQLSTATE

-- BEFORE ROW triggers fire in the byte order of their names: every name
-- after "zz_fencing_guard" is refused, multibyte ones included ("é" is
-- 0xC3 0xA9, after "z"), and a quoted name is compared as stored
CREATE TRIGGER zzz BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION lower_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER zz_fencing_guard2 BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION lower_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER "zz_fencing_guard " BEFORE INSERT ON ledger FOR EACH ROW EXECUTE FUNCTION lower_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER été BEFORE DELETE ON ledger FOR EACH ROW EXECUTE FUNCTION let_through();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER "ñ" BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION lower_fence();
\echo :LAST_ERROR_SQLSTATE
-- names before the guard, and AFTER or statement triggers, are fine
CREATE TRIGGER "ZZZ_upper" BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION let_through();
CREATE TRIGGER zz_fencing_guarc BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION let_through();
CREATE TRIGGER zzz_after AFTER UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION let_through();
CREATE TRIGGER zzz_stmt BEFORE UPDATE ON ledger FOR EACH STATEMENT EXECUTE FUNCTION let_through();
-- renaming a BEFORE ROW trigger after the guard is refused; an AFTER one is fine
ALTER TRIGGER zz_fencing_guarc ON ledger RENAME TO zzzz;
\echo :LAST_ERROR_SQLSTATE
ALTER TRIGGER "ZZZ_upper" ON ledger RENAME TO "ÿ";
\echo :LAST_ERROR_SQLSTATE
ALTER TRIGGER zzz_after ON ledger RENAME TO zzzz_after;
SELECT tgname, tgenabled, tgfoid::regproc FROM pg_trigger
 WHERE tgrelid = 'ledger'::regclass ORDER BY tgname COLLATE "C";

-- Nothing got through: the row and the scope are as they were
SELECT * FROM ledger;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.ledger';
SELECT relid, guard_intact, problem FROM fencing.protected_tables;

-- Partition trees.  A BEFORE ROW trigger created on an unprotected
-- partitioned ancestor is cloned into its protected partitions: refused.
CREATE TABLE events (region text NOT NULL, day int NOT NULL, fence fencing.fence)
    PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu') PARTITION BY RANGE (day);
CREATE TABLE events_eu_1 PARTITION OF events_eu FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('events_eu');
INSERT INTO events VALUES ('eu', 1, '0:5');
CREATE TRIGGER zzz_root BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION lower_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER aaa_root BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION let_through();
ALTER TRIGGER aaa_root ON events RENAME TO zzz_root;
\echo :LAST_ERROR_SQLSTATE
-- ATTACH PARTITION of a table that brings a late BEFORE ROW trigger
CREATE TABLE events_eu_2 (region text NOT NULL, day int NOT NULL, fence fencing.fence);
CREATE TRIGGER zzz_brought BEFORE UPDATE ON events_eu_2 FOR EACH ROW EXECUTE FUNCTION lower_fence();
ALTER TABLE events_eu ATTACH PARTITION events_eu_2 FOR VALUES FROM (100) TO (200);
\echo :LAST_ERROR_SQLSTATE
-- ... at a deeper level too: a partitioned table whose partition has one
CREATE TABLE events_eu_3 (region text NOT NULL, day int NOT NULL, fence fencing.fence)
    PARTITION BY RANGE (day);
CREATE TABLE events_eu_3a (region text NOT NULL, day int NOT NULL, fence fencing.fence);
CREATE TRIGGER "zzz_deep" BEFORE INSERT ON events_eu_3a FOR EACH ROW EXECUTE FUNCTION lower_fence();
ALTER TABLE events_eu_3 ATTACH PARTITION events_eu_3a FOR VALUES FROM (200) TO (250);
ALTER TABLE events_eu ATTACH PARTITION events_eu_3 FOR VALUES FROM (200) TO (300);
\echo :LAST_ERROR_SQLSTATE
-- without it, the attach works and the new partitions are guarded
DROP TRIGGER zzz_brought ON events_eu_2;
ALTER TABLE events_eu ATTACH PARTITION events_eu_2 FOR VALUES FROM (100) TO (200);
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
 WHERE tgrelid = 'events_eu_2'::regclass ORDER BY 2;

-- CREATE TABLE ... PARTITION OF / INHERITS under a protected table, when
-- another event trigger adds a late BEFORE ROW trigger to every new table
CREATE FUNCTION add_audit() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    FOR r IN SELECT objid FROM pg_event_trigger_ddl_commands()
              WHERE command_tag = 'CREATE TABLE' LOOP
        EXECUTE format('CREATE TRIGGER zzz_audit BEFORE INSERT OR UPDATE ON %s FOR EACH ROW EXECUTE FUNCTION lower_fence()',
                       r.objid::regclass);
    END LOOP;
END $$;
CREATE EVENT TRIGGER zzz_add_audit ON ddl_command_end WHEN TAG IN ('CREATE TABLE')
    EXECUTE FUNCTION add_audit();
CREATE TABLE events_eu_4 PARTITION OF events_eu FOR VALUES FROM (300) TO (400);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE ledger_archive () INHERITS (ledger);
\echo :LAST_ERROR_SQLSTATE
DROP EVENT TRIGGER zzz_add_audit;

-- INHERIT of a table that has a late BEFORE ROW trigger
CREATE TABLE ledger_2025 (id int, account text NOT NULL, amount int NOT NULL,
                          fence fencing.fence);
CREATE TRIGGER zzz_x BEFORE INSERT ON ledger_2025 FOR EACH ROW EXECUTE FUNCTION lower_fence();
ALTER TABLE ledger_2025 INHERIT ledger;
\echo :LAST_ERROR_SQLSTATE
DROP TABLE ledger_2025;

-- Nothing got through
SELECT * FROM events ORDER BY day;
SELECT tgrelid::regclass, tgname FROM pg_trigger
 WHERE tgrelid::regclass::text LIKE 'events%' AND tgname LIKE 'zzz%' ORDER BY 1, 2;
SELECT relid, partitions, guard_intact, problem FROM fencing.protected_tables ORDER BY relid::text;

-- protect() itself refuses a tree with a late trigger on an inheritance child
CREATE TABLE stock (sku text, fence fencing.fence);
CREATE TABLE stock_old () INHERITS (stock);
CREATE TRIGGER zzz_child BEFORE UPDATE ON stock_old FOR EACH ROW EXECUTE FUNCTION lower_fence();
SELECT fencing.protect('stock');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE stock CASCADE;

-- After unprotect, all of it is allowed again
SELECT fencing.unprotect('ledger');
CREATE TRIGGER zzz BEFORE UPDATE ON ledger FOR EACH ROW EXECUTE FUNCTION lower_fence();
DROP TABLE ledger, events, events_eu_3 CASCADE;
DROP FUNCTION add_audit(), let_through(), lower_fence();
DROP ROLE fencing_trg_only, fencing_ledger_owner;
