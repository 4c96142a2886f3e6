-- fencing.token comes from the session only: the token the guard judges
-- is the writer's, granted with its lock.  ALTER DATABASE/ROLE ... SET (any
-- form), a function's SET clause and trigger code cannot set it (55P02),
-- and fencing.bypass cannot be turned on by a stored setting either.
-- (Values stored before the library was loaded, configuration files and
-- connection options: test/t/090_token_source.pl.)
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE TABLE balances (id int PRIMARY KEY, balance int NOT NULL, fence fencing.fence);
INSERT INTO balances VALUES (1, 100, '0:10');
SELECT fencing.protect('balances');
CREATE TABLE journal (id int PRIMARY KEY, account int NOT NULL, amount int NOT NULL,
                     fence fencing.fence);
SELECT fencing.protect('journal', key_columns => '{account}');
CREATE ROLE fencing_ts_app;
CREATE ROLE fencing_ts_dbowner;
GRANT SELECT, INSERT, UPDATE ON balances, journal TO fencing_ts_app;

-- A stored default would give every write without a token the highest
-- token there is.  Each attempt runs in a transaction that is rolled back,
-- so that nothing stays behind if it were let through.
BEGIN;
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET fencing.token = %L',
                   current_database(), '9223372036854775807:0');
END $$;
ROLLBACK;
BEGIN;
ALTER ROLE fencing_ts_app SET fencing.token = '9223372036854775807:0';
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
DO $$ BEGIN
    EXECUTE format('ALTER ROLE fencing_ts_app IN DATABASE %I SET fencing.token = %L',
                   current_database(), '9223372036854775807:0');
END $$;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
ALTER ROLE ALL SET fencing.token = '9223372036854775807:0';
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- a database owner who is not a superuser is refused the same way
BEGIN;
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I OWNER TO fencing_ts_dbowner', current_database());
END $$;
SET ROLE fencing_ts_dbowner;
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET fencing.token = %L',
                   current_database(), '9223372036854775807:0');
END $$;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- a role cannot give itself one either
BEGIN;
SET ROLE fencing_ts_app;
ALTER ROLE fencing_ts_app SET fencing.token = '9223372036854775807:0';
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
-- nor can a function definition carry one
CREATE FUNCTION pay_with_fixed_token() RETURNS void LANGUAGE sql
    SET fencing.token = '9223372036854775807:0'
    AS $$ UPDATE balances SET balance = balance - 1 WHERE id = 1 $$;
\echo :LAST_ERROR_SQLSTATE
CREATE FUNCTION pay() RETURNS void LANGUAGE sql
    AS $$ UPDATE balances SET balance = balance - 1 WHERE id = 1 $$;
ALTER FUNCTION pay() SET fencing.token = '9223372036854775807:0';
\echo :LAST_ERROR_SQLSTATE
-- fencing.bypass: on only in a superuser's own session
BEGIN;
ALTER ROLE fencing_ts_app SET fencing.bypass = on;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
BEGIN;
DO $$ BEGIN
    EXECUTE format('ALTER DATABASE %I SET fencing.bypass = on', current_database());
END $$;
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
ALTER FUNCTION pay() SET fencing.bypass = on;
\echo :LAST_ERROR_SQLSTATE
-- (turning either off, or empty, stores nothing that could let a write in)
BEGIN;
ALTER ROLE fencing_ts_app SET fencing.bypass = off;
ALTER ROLE fencing_ts_app SET fencing.token = '';
SELECT setconfig FROM pg_db_role_setting WHERE setrole = 'fencing_ts_app'::regrole;
ROLLBACK;
SELECT count(*) AS stored_settings FROM pg_db_role_setting
 WHERE array_to_string(setconfig, ',') LIKE '%fencing.%';

-- The session's own ways work: SET, SET LOCAL, set_config(), in a
-- function too
BEGIN;
SET LOCAL fencing.token = '0:11';
UPDATE balances SET balance = 90 WHERE id = 1;
COMMIT;
SELECT set_config('fencing.token', '0:12', false);
UPDATE balances SET balance = 80 WHERE id = 1;
RESET fencing.token;
CREATE FUNCTION pay_with(token fencing.fence) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.token', token::text, true);
    UPDATE balances SET balance = balance - 10 WHERE id = 1;
END $$;
BEGIN;
SELECT pay_with('0:13');
COMMIT;
SET fencing.bypass = on;
RESET fencing.bypass;
SELECT * FROM balances;

-- Trigger code cannot set the token: a role holding TRIGGER on a table
-- that is not protected (here orders) would otherwise give the next write
-- of every transaction that writes orders first the highest token
CREATE TABLE orders (id int, account int, cents int);
GRANT SELECT, INSERT ON orders TO fencing_ts_app;
CREATE ROLE fencing_ts_trigger;
GRANT TRIGGER ON orders TO fencing_ts_trigger;
GRANT CREATE ON SCHEMA public TO fencing_ts_trigger;
SET ROLE fencing_ts_trigger;
CREATE FUNCTION max_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.token', '9223372036854775807:0', true);
    RETURN NEW;
END $$;
CREATE TRIGGER a_max BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION max_token();
RESET ROLE;
SET ROLE fencing_ts_app;
BEGIN;
INSERT INTO orders VALUES (1, 1, 5);
INSERT INTO journal VALUES (1, 1, -5);
COMMIT;
RESET ROLE;
DROP TRIGGER a_max ON orders;
-- nor with SET LOCAL, nor in an AFTER or statement trigger
CREATE FUNCTION set_local_token() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SET LOCAL fencing.token = '9223372036854775807:0';
    RETURN NULL;
END $$;
CREATE TRIGGER after_max AFTER INSERT ON orders
    FOR EACH STATEMENT EXECUTE FUNCTION set_local_token();
SET ROLE fencing_ts_app;
BEGIN;
INSERT INTO orders VALUES (2, 1, 5);
INSERT INTO journal VALUES (2, 1, -5);
COMMIT;
RESET ROLE;
DROP TRIGGER after_max ON orders;
-- A write without a token is still refused, and the scope is as it was
SET ROLE fencing_ts_app;
INSERT INTO orders VALUES (3, 1, 5);
INSERT INTO journal VALUES (3, 1, -5);
RESET ROLE;
SELECT * FROM journal;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.journal';
-- A trigger may clear the token (that lets nothing in), and forwards a
-- token by writing it into the fence column of the rows it writes
CREATE FUNCTION book_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('fencing.token', '', true);
    INSERT INTO journal VALUES (NEW.id, NEW.account, -NEW.cents, '0:20');
    RETURN NEW;
END $$;
CREATE TRIGGER book AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION book_order();
INSERT INTO orders VALUES (4, 1, 5);
SELECT * FROM journal;
-- and the writer's own token reaches the trigger's writes, as before
CREATE OR REPLACE FUNCTION book_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO journal VALUES (NEW.id, NEW.account, -NEW.cents);
    RETURN NEW;
END $$;
BEGIN;
SET LOCAL fencing.token = '0:21';
INSERT INTO orders VALUES (5, 1, 5);
COMMIT;
SELECT * FROM journal ORDER BY id;

DROP TABLE balances, journal, orders;
DROP FUNCTION pay(), pay_with(fencing.fence), max_token(), set_local_token(), book_order();
REVOKE CREATE ON SCHEMA public FROM fencing_ts_trigger;
-- its scope outlives the table: the extension owner removes it on purpose
SELECT fencing.reset_scope('public.journal');
DROP ROLE fencing_ts_app, fencing_ts_dbowner, fencing_ts_trigger;
