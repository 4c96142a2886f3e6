-- Only the owner adds code to a protected table's writes.  On a protected
-- table, its partitions and its inheritance children, a trigger of any
-- timing (and a rule) can be created only by a member of the table's
-- owner (42501 for anyone else, whatever privileges it holds), and every
-- trigger there runs code that the owner controls: its function, and the
-- functions of its WHEN clause, belong to a superuser or to a member of
-- the owner.  protect(), ATTACH PARTITION, INHERIT and CREATE TABLE ...
-- PARTITION OF refuse a trigger whose code belongs to another role, and so
-- does ALTER FUNCTION ... OWNER TO that would give it to one.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE ROLE fencing_to_owner;
CREATE ROLE fencing_to_member IN ROLE fencing_to_owner;
CREATE ROLE fencing_to_trigger;
CREATE ROLE fencing_to_writer;
GRANT CREATE ON SCHEMA public TO fencing_to_owner, fencing_to_trigger;

SET ROLE fencing_to_owner;
CREATE TABLE wallets (id int PRIMARY KEY, balance int NOT NULL, fence fencing.fence);
INSERT INTO wallets VALUES (1, 100, '0:10');
SELECT fencing.protect('wallets');
CREATE TABLE postings (id int PRIMARY KEY, account int NOT NULL, amount int NOT NULL,
                     fence fencing.fence);
SELECT fencing.protect('postings', key_columns => '{account}');
BEGIN;
SET LOCAL fencing.token = '0:10';
INSERT INTO postings VALUES (1, 1, 100);
COMMIT;
GRANT SELECT, INSERT, UPDATE, DELETE ON wallets, postings TO fencing_to_writer;
GRANT TRIGGER ON wallets, postings TO fencing_to_trigger;
RESET ROLE;

-- A role holding only the TRIGGER privilege writes code that would give
-- every write the next token, or the highest token there is
SET ROLE fencing_to_trigger;
CREATE FUNCTION bump_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fence := fencing.next(OLD.fence);
    RETURN NEW;
END $$;
CREATE FUNCTION max_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.token', '9223372036854775807:0', true);
    RETURN COALESCE(NEW, OLD);
END $$;
CREATE FUNCTION max_token_when() RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.token', '9223372036854775807:0', true);
    RETURN true;
END $$;
-- ... and cannot attach it: a BEFORE ROW trigger sorting before the guard
CREATE TRIGGER a_bump BEFORE UPDATE ON wallets
    FOR EACH ROW EXECUTE FUNCTION bump_fence();
CREATE TRIGGER a_max BEFORE INSERT ON postings
    FOR EACH ROW EXECUTE FUNCTION max_token();
\echo :LAST_ERROR_SQLSTATE
-- nor a trigger of any other timing or kind
CREATE TRIGGER after_max AFTER INSERT ON postings
    FOR EACH ROW EXECUTE FUNCTION max_token();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER stmt_max BEFORE INSERT ON postings
    FOR EACH STATEMENT EXECUTE FUNCTION max_token();
\echo :LAST_ERROR_SQLSTATE
CREATE CONSTRAINT TRIGGER deferred_max AFTER INSERT ON postings
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION max_token();
\echo :LAST_ERROR_SQLSTATE
CREATE OR REPLACE TRIGGER a_bump BEFORE UPDATE ON wallets
    FOR EACH ROW EXECUTE FUNCTION bump_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER a_when BEFORE UPDATE ON wallets
    FOR EACH ROW WHEN (max_token_when()) EXECUTE FUNCTION suppress_redundant_updates_trigger();
\echo :LAST_ERROR_SQLSTATE
-- a rule needs the owner in PostgreSQL itself
CREATE RULE keep_fence AS ON UPDATE TO wallets
    DO INSTEAD UPDATE wallets SET balance = NEW.balance WHERE id = OLD.id;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- So a write without a token, or with a stale one, is still refused
SET ROLE fencing_to_writer;
UPDATE wallets SET balance = 0 WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
UPDATE wallets SET balance = 0, fence = '0:9' WHERE id = 1;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO postings VALUES (2, 1, -100);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT * FROM wallets;
SELECT * FROM postings;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.postings';

-- On a table that is not protected, TRIGGER is what it always was
SET ROLE fencing_to_owner;
CREATE TABLE notes (id int, body text, fence fencing.fence);
GRANT TRIGGER ON notes TO fencing_to_trigger;
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_bump BEFORE UPDATE ON notes FOR EACH ROW EXECUTE FUNCTION bump_fence();
RESET ROLE;
-- ... but protecting it then refuses the trigger the other role left there
SET ROLE fencing_to_owner;
SELECT fencing.protect('notes');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- once the function is the owner's, the trigger is the owner's code
ALTER FUNCTION bump_fence() OWNER TO fencing_to_owner;
SET ROLE fencing_to_owner;
SELECT fencing.protect('notes');
-- and it cannot be given back while the table is protected
RESET ROLE;
ALTER FUNCTION bump_fence() OWNER TO fencing_to_trigger;
ALTER ROUTINE bump_fence() OWNER TO fencing_to_trigger;
\echo :LAST_ERROR_SQLSTATE
-- (to a member of the owner, or a superuser, it can)
ALTER FUNCTION bump_fence() OWNER TO fencing_to_member;
ALTER FUNCTION bump_fence() OWNER TO fencing_to_owner;
-- a WHEN clause is the trigger's code too
SET ROLE fencing_to_owner;
CREATE TABLE memos (id int, fence fencing.fence);
GRANT TRIGGER ON memos TO fencing_to_trigger;
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_when BEFORE UPDATE ON memos
    FOR EACH ROW WHEN (max_token_when()) EXECUTE FUNCTION suppress_redundant_updates_trigger();
RESET ROLE;
SET ROLE fencing_to_owner;
SELECT fencing.protect('memos');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER a_when ON memos;
SELECT fencing.protect('memos');
RESET ROLE;

-- The owner, and a member of the owner, add triggers whose code is theirs
-- or a superuser's (suppress_redundant_updates_trigger is built in)
SET ROLE fencing_to_member;
CREATE FUNCTION audit_wallets() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEW;
END $$;
CREATE TRIGGER a_audit BEFORE UPDATE ON wallets
    FOR EACH ROW EXECUTE FUNCTION audit_wallets();
CREATE TRIGGER a_same BEFORE UPDATE ON wallets
    FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger();
CREATE TRIGGER after_audit AFTER INSERT ON postings
    FOR EACH ROW EXECUTE FUNCTION audit_wallets();
RESET ROLE;
-- ... but not a trigger running another role's function
SET ROLE fencing_to_owner;
CREATE TRIGGER after_max AFTER INSERT ON postings
    FOR EACH ROW EXECUTE FUNCTION max_token();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER a_when BEFORE UPDATE ON wallets
    FOR EACH ROW WHEN (max_token_when()) EXECUTE FUNCTION audit_wallets();
\echo :LAST_ERROR_SQLSTATE
-- an operator in a WHEN clause runs its function: that function, too,
-- cannot go to another role
CREATE FUNCTION above(int, int) RETURNS boolean LANGUAGE sql IMMUTABLE
    AS 'SELECT $1 > $2';
CREATE OPERATOR >>> (LEFTARG = int, RIGHTARG = int, FUNCTION = above);
CREATE TRIGGER a_big BEFORE UPDATE ON wallets
    FOR EACH ROW WHEN (NEW.balance >>> 1000) EXECUTE FUNCTION audit_wallets();
RESET ROLE;
ALTER FUNCTION above(int, int) OWNER TO fencing_to_trigger;
\echo :LAST_ERROR_SQLSTATE
SELECT tgrelid::regclass, tgname, tgfoid::regproc FROM pg_trigger
 WHERE tgrelid IN ('wallets'::regclass, 'postings'::regclass, 'notes'::regclass)
 ORDER BY tgrelid::regclass::text, tgname COLLATE "C";

-- Partitions.  TRIGGER on a protected partition, or on an unprotected
-- partitioned table whose triggers are cloned into a protected partition,
-- gives nothing either.
SET ROLE fencing_to_owner;
CREATE TABLE events (region text NOT NULL, day int NOT NULL, fence fencing.fence)
    PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu') PARTITION BY RANGE (day);
CREATE TABLE events_eu_1 PARTITION OF events_eu FOR VALUES FROM (0) TO (100);
SELECT fencing.protect('events_eu');
GRANT TRIGGER ON events, events_eu, events_eu_1 TO fencing_to_trigger;
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_bump BEFORE UPDATE ON events_eu_1 FOR EACH ROW EXECUTE FUNCTION bump_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER a_bump BEFORE UPDATE ON events_eu FOR EACH ROW EXECUTE FUNCTION bump_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE TRIGGER a_max BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION max_token();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- the owner's trigger on the root is cloned into every partition
SET ROLE fencing_to_owner;
CREATE TRIGGER a_audit BEFORE UPDATE ON events FOR EACH ROW EXECUTE FUNCTION audit_wallets();
RESET ROLE;
-- A table joining the tree brings its triggers: their code must be the
-- owner's too (ATTACH PARTITION, at any depth, and INHERIT)
SET ROLE fencing_to_owner;
CREATE TABLE events_eu_2 (region text NOT NULL, day int NOT NULL, fence fencing.fence);
GRANT TRIGGER ON events_eu_2 TO fencing_to_trigger;
CREATE TABLE events_eu_3 (region text NOT NULL, day int NOT NULL, fence fencing.fence)
    PARTITION BY RANGE (day);
CREATE TABLE events_eu_3a (region text NOT NULL, day int NOT NULL, fence fencing.fence);
ALTER TABLE events_eu_3 ATTACH PARTITION events_eu_3a FOR VALUES FROM (200) TO (250);
GRANT TRIGGER ON events_eu_3a TO fencing_to_trigger;
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_max BEFORE INSERT ON events_eu_2 FOR EACH ROW EXECUTE FUNCTION max_token();
CREATE TRIGGER after_max AFTER INSERT ON events_eu_3a FOR EACH ROW EXECUTE FUNCTION max_token();
RESET ROLE;
SET ROLE fencing_to_owner;
ALTER TABLE events_eu ATTACH PARTITION events_eu_2 FOR VALUES FROM (100) TO (200);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE events_eu ATTACH PARTITION events_eu_3 FOR VALUES FROM (200) TO (300);
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE postings_2024 (id int NOT NULL, account int NOT NULL, amount int NOT NULL,
                          fence fencing.fence);
GRANT TRIGGER ON postings_2024 TO fencing_to_trigger;
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_max BEFORE INSERT ON postings_2024 FOR EACH ROW EXECUTE FUNCTION max_token();
RESET ROLE;
SET ROLE fencing_to_owner;
ALTER TABLE postings_2024 INHERIT postings;
\echo :LAST_ERROR_SQLSTATE
-- without them, the tables join
DROP TRIGGER a_max ON events_eu_2;
DROP TRIGGER after_max ON events_eu_3a;
DROP TRIGGER a_max ON postings_2024;
ALTER TABLE events_eu ATTACH PARTITION events_eu_2 FOR VALUES FROM (100) TO (200);
ALTER TABLE events_eu ATTACH PARTITION events_eu_3 FOR VALUES FROM (200) TO (300);
ALTER TABLE postings_2024 INHERIT postings;
-- and TRIGGER on an inheritance child of a protected table gives nothing
GRANT TRIGGER ON postings_2024 TO fencing_to_trigger;
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_max BEFORE INSERT ON postings_2024 FOR EACH ROW EXECUTE FUNCTION max_token();
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- A protected table attached under a partitioned table that is not
-- protected gets that table's row triggers cloned into it: checked as if
-- created on it
SET ROLE fencing_to_owner;
CREATE FUNCTION lower_fence() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN NEW.fence := '0:0'; RETURN NEW; END $$;
CREATE TABLE archive (region text NOT NULL, day int NOT NULL, fence fencing.fence)
    PARTITION BY LIST (region);
GRANT TRIGGER ON archive TO fencing_to_trigger;
CREATE TABLE archive_us (region text NOT NULL, day int NOT NULL, fence fencing.fence);
INSERT INTO archive_us VALUES ('us', 1, '0:3');
SELECT fencing.protect('archive_us');
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_max BEFORE INSERT OR UPDATE ON archive FOR EACH ROW EXECUTE FUNCTION max_token();
RESET ROLE;
SET ROLE fencing_to_owner;
ALTER TABLE archive ATTACH PARTITION archive_us FOR VALUES IN ('us');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER a_max ON archive;
CREATE TRIGGER zzz_late BEFORE UPDATE ON archive FOR EACH ROW EXECUTE FUNCTION lower_fence();
ALTER TABLE archive ATTACH PARTITION archive_us FOR VALUES IN ('us');
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER zzz_late ON archive;
ALTER TABLE archive ATTACH PARTITION archive_us FOR VALUES IN ('us');
GRANT SELECT, UPDATE ON archive TO fencing_to_writer;
RESET ROLE;
SET ROLE fencing_to_writer;
UPDATE archive SET day = 2;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT * FROM archive;

-- CREATE SCHEMA ... CREATE TABLE ... PARTITION OF guards the new partition
-- as CREATE TABLE does (both guard triggers, and the same checks)
DO $$ BEGIN
    EXECUTE format('GRANT CREATE ON DATABASE %I TO fencing_to_owner', current_database());
END $$;
SET ROLE fencing_to_owner;
CREATE SCHEMA fencing_to_archive
    CREATE TABLE events_eu_4 PARTITION OF public.events_eu FOR VALUES FROM (300) TO (400)
    CREATE TRIGGER zzz_late BEFORE UPDATE ON events_eu_4
        FOR EACH ROW EXECUTE FUNCTION public.lower_fence();
\echo :LAST_ERROR_SQLSTATE
CREATE SCHEMA fencing_to_archive
    CREATE TABLE events_eu_4 PARTITION OF public.events_eu FOR VALUES FROM (300) TO (400);
RESET ROLE;
SELECT tgrelid::regclass, tgname, tgenabled, tgfoid::regproc FROM pg_trigger
 WHERE tgrelid::regclass::text LIKE '%events_eu_%' OR tgrelid = 'postings_2024'::regclass
 ORDER BY tgrelid::regclass::text, tgname COLLATE "C";
SELECT relid, partitions, guard_intact, problem FROM fencing.protected_tables ORDER BY relid::text;

-- After unprotect, TRIGGER works as it always did
SET ROLE fencing_to_owner;
SELECT fencing.unprotect('wallets');
RESET ROLE;
SET ROLE fencing_to_trigger;
CREATE TRIGGER a_bump BEFORE UPDATE ON wallets FOR EACH ROW EXECUTE FUNCTION bump_fence();
RESET ROLE;

DROP SCHEMA fencing_to_archive CASCADE;
DROP TABLE wallets, postings, postings_2024, notes, memos, events, events_eu_3, archive CASCADE;
DROP OPERATOR >>> (int, int);
DROP FUNCTION bump_fence(), max_token(), max_token_when(), audit_wallets(), lower_fence(),
    above(int, int);
DO $$ BEGIN
    EXECUTE format('REVOKE CREATE ON DATABASE %I FROM fencing_to_owner', current_database());
END $$;
REVOKE CREATE ON SCHEMA public FROM fencing_to_owner, fencing_to_trigger;
-- its scope outlives the table: the extension owner removes it on purpose
SELECT fencing.reset_scope('public.postings');
DROP ROLE fencing_to_owner, fencing_to_member, fencing_to_trigger, fencing_to_writer;
