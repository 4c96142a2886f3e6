-- Guarding the guard: DDL that would disable or break the guard of a
-- protected table fails with SF005; everything else works.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE TABLE accounts (
    id text PRIMARY KEY,
    region text NOT NULL,
    balance_cents bigint NOT NULL DEFAULT 0,
    fence fencing.fence
);
CREATE TABLE ledger (
    id bigserial PRIMARY KEY,
    account_id text NOT NULL,
    amount_cents bigint NOT NULL,
    fence fencing.fence
);
SELECT fencing.protect('accounts');
SELECT fencing.protect('ledger', key_columns => '{account_id}');
INSERT INTO accounts VALUES ('acct-1', 'eu', 100, '1:1');
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', 100, '1:1');

-- Disabling the fencing triggers, or changing their firing mode, is refused
ALTER TABLE accounts DISABLE TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts DISABLE TRIGGER zz_fencing_truncate;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts DISABLE TRIGGER ALL;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts DISABLE TRIGGER USER;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts ENABLE REPLICA TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts ENABLE TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts ENABLE TRIGGER ALL;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts ENABLE TRIGGER USER;
\echo :LAST_ERROR_SQLSTATE
-- ... with IF EXISTS, ONLY, or hidden among other subcommands
ALTER TABLE IF EXISTS ONLY accounts DISABLE TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts ADD COLUMN note text, DISABLE TRIGGER ALL;
\echo :LAST_ERROR_SQLSTATE

-- Dropping or renaming them is refused
DROP TRIGGER zz_fencing_guard ON accounts;
\echo :LAST_ERROR_SQLSTATE
DROP TRIGGER IF EXISTS zz_fencing_truncate ON public.accounts;
\echo :LAST_ERROR_SQLSTATE
ALTER TRIGGER zz_fencing_guard ON accounts RENAME TO not_the_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TRIGGER zz_fencing_guard ON accounts DEPENDS ON EXTENSION plpgsql;
\echo :LAST_ERROR_SQLSTATE

-- Dropping, retyping or renaming the fence column or a key column is refused
ALTER TABLE accounts DROP COLUMN fence;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts ALTER COLUMN fence TYPE fencing.fence USING '0:0';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts RENAME COLUMN fence TO token;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE ledger DROP COLUMN account_id CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE ledger ALTER COLUMN account_id TYPE varchar(20);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE ledger RENAME account_id TO account;
\echo :LAST_ERROR_SQLSTATE

-- Nothing above changed anything
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
 WHERE tgrelid IN ('accounts'::regclass, 'ledger'::regclass) ORDER BY 1, 2;

-- Everything else is allowed: other columns, indexes, ENABLE ALWAYS,
-- user triggers, renaming the table (fencing.protected keeps its OID)
ALTER TABLE accounts ADD COLUMN note text;
ALTER TABLE accounts ALTER COLUMN note TYPE varchar;
ALTER TABLE accounts RENAME COLUMN note TO remark;
ALTER TABLE accounts DROP COLUMN remark;
CREATE INDEX ON accounts (region);
ALTER TABLE accounts ENABLE ALWAYS TRIGGER zz_fencing_guard;
CREATE FUNCTION touch() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN RETURN NEW; END$$;
CREATE TRIGGER audit BEFORE UPDATE ON accounts
    FOR EACH ROW EXECUTE FUNCTION touch();
ALTER TABLE accounts DISABLE TRIGGER audit;
ALTER TABLE accounts ENABLE REPLICA TRIGGER audit;
DROP TRIGGER audit ON accounts;
ALTER TABLE accounts RENAME TO customer_accounts;
SELECT relid, fence_column FROM fencing.protected ORDER BY relid::text;
ALTER TABLE customer_accounts RENAME TO accounts;
-- the guard still works after all that
UPDATE accounts SET balance_cents = 0, fence = '1:2' WHERE id = 'acct-1';
UPDATE accounts SET balance_cents = 0, fence = '0:9' WHERE id = 'acct-1';
\echo :LAST_ERROR_SQLSTATE

-- A role that does not own the table cannot do the DDL anyway
CREATE ROLE fencing_ddl_intruder;
GRANT SELECT, INSERT, UPDATE, DELETE ON accounts TO fencing_ddl_intruder;
SET ROLE fencing_ddl_intruder;
ALTER TABLE accounts DISABLE TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;

-- session_replication_role = replica: the DDL and the stale writes are
-- still refused (the triggers, event triggers included, fire ALWAYS)
SET session_replication_role = replica;
ALTER TABLE accounts DISABLE TRIGGER ALL;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts DROP COLUMN fence;
\echo :LAST_ERROR_SQLSTATE
UPDATE accounts SET balance_cents = 1, fence = '1:1' WHERE id = 'acct-1';
\echo :LAST_ERROR_SQLSTATE
TRUNCATE accounts;
\echo :LAST_ERROR_SQLSTATE
RESET session_replication_role;

-- Column changes that reach a protected table through inheritance are
-- refused too; with ONLY, the child keeps its own column and stays guarded
CREATE TABLE base (id int, fence fencing.fence);
CREATE TABLE child () INHERITS (base);
SELECT fencing.protect('child');
ALTER TABLE base DROP COLUMN fence;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE base RENAME COLUMN fence TO token;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE ONLY base DROP COLUMN fence;
SELECT relid, guard_intact FROM fencing.protected_tables WHERE relid = 'child'::regclass;
DROP TABLE base CASCADE;

-- After unprotect, the same DDL works
SELECT fencing.unprotect('accounts');
ALTER TABLE accounts ENABLE TRIGGER ALL;
ALTER TABLE accounts RENAME COLUMN fence TO token;
ALTER TABLE accounts DROP COLUMN token;

-- Partitions: those created or attached later are guarded like the others
CREATE TABLE events (
    tenant text NOT NULL,
    day date NOT NULL,
    payload text,
    fence fencing.fence
) PARTITION BY RANGE (day);
CREATE TABLE events_jan PARTITION OF events
    FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
SELECT fencing.protect('events', key_columns => '{tenant}');
-- created later, itself partitioned, with a sub-partition created later
CREATE TABLE events_feb PARTITION OF events
    FOR VALUES FROM ('2024-02-01') TO ('2024-03-01') PARTITION BY LIST (tenant);
CREATE TABLE events_feb_a PARTITION OF events_feb FOR VALUES IN ('a');
-- attached later
CREATE TABLE events_mar (LIKE events);
ALTER TABLE events ATTACH PARTITION events_mar
    FOR VALUES FROM ('2024-03-01') TO ('2024-04-01');
SELECT tgrelid::regclass, tgname, tgenabled FROM pg_trigger
 WHERE tgname LIKE 'zz_fencing%' AND tgrelid::regclass::text LIKE 'events%'
 ORDER BY 1, 2;
INSERT INTO events VALUES ('a', '2024-02-10', 'x', '1:1'), ('a', '2024-03-10', 'y', '1:2');
TRUNCATE events_mar;
\echo :LAST_ERROR_SQLSTATE
TRUNCATE events_feb_a;
\echo :LAST_ERROR_SQLSTATE
INSERT INTO events_mar VALUES ('a', '2024-03-11', 'stale', '1:1');
\echo :LAST_ERROR_SQLSTATE
-- the cloned triggers of partitions are guarded too
ALTER TABLE events_mar DISABLE TRIGGER zz_fencing_guard;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE events_feb_a ENABLE TRIGGER ALL;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE events DISABLE TRIGGER ALL;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE events DROP COLUMN tenant;
\echo :LAST_ERROR_SQLSTATE
-- a protected table cannot join a protected tree: one protection per tree
CREATE TABLE events_apr (LIKE events);
SELECT fencing.protect('events_apr');
ALTER TABLE events ATTACH PARTITION events_apr
    FOR VALUES FROM ('2024-04-01') TO ('2024-05-01');
\echo :LAST_ERROR_SQLSTATE
-- a detached partition stays protected on its own, with the same scope
ALTER TABLE events DETACH PARTITION events_mar CONCURRENTLY;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE events DETACH PARTITION events_mar;
SELECT relid, key_columns, scope_name FROM fencing.protected
 WHERE relid::text LIKE 'events%' ORDER BY relid::text;
SELECT tgname, tgenabled FROM pg_trigger
 WHERE tgrelid = 'events_mar'::regclass ORDER BY 1;
INSERT INTO events_mar VALUES ('a', '2024-03-12', 'stale', '1:1');
\echo :LAST_ERROR_SQLSTATE
DROP TABLE events_mar;

-- The on-call view: one row per protected table
SELECT relid, scope_kind, key_columns, strict, scope_name, partitions,
       guard_intact, problem
  FROM fencing.protected_tables ORDER BY relid::text;

-- A superuser can still break the guard behind the DDL guard's back, by
-- writing the catalogs; the view shows it
UPDATE pg_trigger SET tgenabled = 'D'
 WHERE tgrelid = 'events_feb_a'::regclass AND tgname = 'zz_fencing_guard';
SELECT relid, guard_intact, problem FROM fencing.protected_tables
 ORDER BY relid::text;
UPDATE pg_trigger SET tgenabled = 'A'
 WHERE tgrelid = 'events_feb_a'::regclass AND tgname = 'zz_fencing_guard';
SELECT relid, guard_intact FROM fencing.protected_tables ORDER BY relid::text;

-- Dropping a protected table is allowed; it leaves fencing.protected, and
-- its scope fences stay (a recreated table must not accept older tokens)
DROP TABLE ledger;
DROP TABLE events_apr;
CREATE SCHEMA doomed;
CREATE TABLE doomed.t (id int PRIMARY KEY, fence fencing.fence);
SELECT fencing.protect('doomed.t', key_columns => '{}');
INSERT INTO doomed.t VALUES (1, '5:0');
DROP SCHEMA doomed CASCADE;
CREATE ROLE fencing_ddl_owner;
GRANT CREATE ON SCHEMA public TO fencing_ddl_owner;
SET ROLE fencing_ddl_owner;
CREATE TABLE owned (id int PRIMARY KEY, fence fencing.fence);
SELECT fencing.protect('owned');
RESET ROLE;
DROP OWNED BY fencing_ddl_owner;
DROP ROLE fencing_ddl_owner;
SELECT relid FROM fencing.protected ORDER BY relid::text;
SELECT scope_name, key, fence FROM fencing.scopes
 WHERE scope_name IN ('public.ledger', 'doomed.t', 'public.owned') ORDER BY 1, 2;
DROP TABLE events;
SELECT count(*) FROM fencing.protected;

DROP FUNCTION touch();
DROP TABLE accounts;
DROP ROLE fencing_ddl_intruder;

-- BEFORE ROW triggers fire in name order: one firing after the guard could
-- change a row the guard has just checked (lower its fence), so none may be
-- named after zz_fencing_guard on a protected table
CREATE TABLE late (id int PRIMARY KEY, v int, fence fencing.fence);
INSERT INTO late VALUES (1, 0, '5');
CREATE FUNCTION lower_fence() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN NEW.fence := '0:0'; RETURN NEW; END $$;
CREATE TRIGGER zzz_after_guard BEFORE UPDATE ON late
    FOR EACH ROW EXECUTE FUNCTION lower_fence();
SELECT fencing.protect('late');
DROP TRIGGER zzz_after_guard ON late;
SELECT fencing.protect('late');
CREATE TRIGGER zzz_after_guard BEFORE UPDATE ON late
    FOR EACH ROW EXECUTE FUNCTION lower_fence();
-- AFTER triggers and triggers named before the guard are fine
CREATE TRIGGER zzz_audit AFTER UPDATE ON late
    FOR EACH ROW EXECUTE FUNCTION lower_fence();
CREATE TRIGGER early BEFORE UPDATE ON late
    FOR EACH ROW EXECUTE FUNCTION lower_fence();
-- but not renamed to fire after the guard
ALTER TRIGGER early ON late RENAME TO zzzz_early;
UPDATE late SET v = 1, fence = '6' WHERE id = 1;
SELECT * FROM late;
SELECT fencing.unprotect('late');
DROP TABLE late;
DROP FUNCTION lower_fence();
