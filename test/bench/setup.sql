-- test/bench/setup.sql: the tables of the benchmark (test/bench/run.sh).
--
-- Every variant writes its own table, all of the same shape, so that the
-- variants differ only in what guards the write:
--
--   upd_*     100,000 accounts (id, balance, fence), one random row updated
--             per transaction: plain, fencing.advance(), the guard in row
--             scope (token in the column, or in fencing.token), and a
--             hand-written PL/pgSQL trigger on a bigint fence
--   led_*     an append-only ledger of 1,000 accounts: plain INSERT, the
--             guard in key scope (per account), a hand-written PL/pgSQL
--             trigger keeping the highest token per account in a side table,
--             and the key-scope floor: the same side table advanced by one
--             statement that inserts the ledger row only if the token won
--   bulk_*    1,000,000 rows updated by one statement, guarded or not
--   ledbulk_* ledgers loaded by COPY, guarded in key scope or not
--   bulk_floor, ledbulk_floor  the same with a C BEFORE ROW trigger that
--             does nothing (test/bench/floor): the floor of any row guard
--
-- The script variables are psql's: :rows (100000), :accounts (1000),
-- :bulk_rows (1000000).

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE EXTENSION IF NOT EXISTS fencing;

------------------------------------------------------------------------------
-- single-row UPDATE
------------------------------------------------------------------------------
CREATE TABLE upd_plain (id int PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence);
CREATE TABLE upd_advance (LIKE upd_plain INCLUDING ALL);
CREATE TABLE upd_guard (LIKE upd_plain INCLUDING ALL);
CREATE TABLE upd_token (LIKE upd_plain INCLUDING ALL);
CREATE TABLE upd_plpgsql (id int PRIMARY KEY, balance bigint NOT NULL, fence bigint NOT NULL);

INSERT INTO upd_plain SELECT g, 0, '1:0' FROM generate_series(1, :rows) g;
INSERT INTO upd_advance SELECT * FROM upd_plain;
INSERT INTO upd_guard SELECT * FROM upd_plain;
INSERT INTO upd_token SELECT * FROM upd_plain;
INSERT INTO upd_plpgsql SELECT g, 0, 0 FROM generate_series(1, :rows) g;

SELECT fencing.protect('upd_guard');
SELECT fencing.protect('upd_token');

-- What a careful user would write by hand: the row-scope check on a bigint.
CREATE FUNCTION bench_row_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.fence IS NULL OR NEW.fence <= OLD.fence THEN
        RAISE EXCEPTION 'stale fence token %', NEW.fence
            USING ERRCODE = 'SF001', DETAIL = format('The row''s fence is %s.', OLD.fence);
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER bench_row_guard BEFORE UPDATE ON upd_plpgsql
    FOR EACH ROW EXECUTE FUNCTION bench_row_guard();

-- The stale-token storm: a rejected write is caught, so that the pgbench
-- client goes on (pgbench 15 aborts a client on any other error).  Every
-- attempt is counted in bench_stale_attempts first, so that run.sh can
-- compare the guard's rejections with the attempts the database saw.
CREATE SEQUENCE bench_stale_attempts;
CREATE FUNCTION bench_try_update(p_id int, p_token fencing.fence) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM nextval('bench_stale_attempts');
    UPDATE upd_guard SET balance = balance + 1, fence = p_token WHERE id = p_id;
    RETURN true;
EXCEPTION WHEN SQLSTATE 'SF001' THEN
    RETURN false;
END
$$;

------------------------------------------------------------------------------
-- append-only ledger
------------------------------------------------------------------------------
CREATE TABLE led_plain (
    id bigserial PRIMARY KEY,
    account_id int NOT NULL,
    amount bigint NOT NULL,
    fence fencing.fence
);
CREATE TABLE led_guard (
    id bigserial PRIMARY KEY,
    account_id int NOT NULL,
    amount bigint NOT NULL,
    fence fencing.fence
);
CREATE TABLE led_plpgsql (
    id bigserial PRIMARY KEY,
    account_id int NOT NULL,
    amount bigint NOT NULL,
    fence bigint NOT NULL
);
CREATE TABLE led_plpgsql_fences (account_id int PRIMARY KEY, fence bigint NOT NULL);
-- The key-scope floor (scripts/insert_floor.sql): the least work key scope
-- needs, with no trigger at all: one statement advances the account's
-- fence in a side table (a fencing.fence, compared as the guard compares)
-- and inserts the ledger row only if it did.
CREATE TABLE led_floor (
    id bigserial PRIMARY KEY,
    account_id int NOT NULL,
    amount bigint NOT NULL,
    fence fencing.fence
);
CREATE TABLE led_floor_fences (account_id int PRIMARY KEY, fence fencing.fence NOT NULL);

-- one opening row per account; protect() seeds each account's scope from it
INSERT INTO led_plain (account_id, amount, fence)
    SELECT a, 0, '1:0' FROM generate_series(1, :accounts) a;
INSERT INTO led_guard (account_id, amount, fence)
    SELECT a, 0, '1:0' FROM generate_series(1, :accounts) a;
INSERT INTO led_plpgsql (account_id, amount, fence)
    SELECT a, 0, 1 FROM generate_series(1, :accounts) a;
INSERT INTO led_plpgsql_fences SELECT a, 1 FROM generate_series(1, :accounts) a;
INSERT INTO led_floor (account_id, amount, fence)
    SELECT a, 0, '1:0' FROM generate_series(1, :accounts) a;
INSERT INTO led_floor_fences SELECT a, '1:0' FROM generate_series(1, :accounts) a;

SELECT fencing.protect('led_guard', key_columns => '{account_id}');

-- What a careful user would write by hand: the key-scope check, keeping the
-- highest token per account in a side table, atomically (the upsert locks
-- the account's row; no row comes back when the token lost).
CREATE FUNCTION bench_key_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO led_plpgsql_fences AS f VALUES (NEW.account_id, NEW.fence)
        ON CONFLICT (account_id) DO UPDATE SET fence = EXCLUDED.fence
        WHERE f.fence < EXCLUDED.fence;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale fence token %', NEW.fence USING ERRCODE = 'SF001';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER bench_key_guard BEFORE INSERT ON led_plpgsql
    FOR EACH ROW EXECUTE FUNCTION bench_key_guard();

------------------------------------------------------------------------------
-- bulk
------------------------------------------------------------------------------
CREATE TABLE bulk_plain (id int PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence);
CREATE TABLE bulk_guard (LIKE bulk_plain INCLUDING ALL);
INSERT INTO bulk_plain SELECT g, 0, '1:0' FROM generate_series(1, :bulk_rows) g;
INSERT INTO bulk_guard SELECT * FROM bulk_plain;
SELECT fencing.protect('bulk_guard');

CREATE TABLE ledbulk_plain (LIKE led_plain INCLUDING ALL);
CREATE TABLE ledbulk_guard (LIKE led_plain INCLUDING ALL);
CREATE TABLE ledbulk_guard_rows (LIKE led_plain INCLUDING ALL);
SELECT fencing.protect('ledbulk_guard', key_columns => '{account_id}');
SELECT fencing.protect('ledbulk_guard_rows', key_columns => '{account_id}');

-- The floor of any BEFORE ROW guard: PostgreSQL's cost of the trigger
-- alone (COPY row by row, UPDATE locking each row), built and installed by
-- the runner from test/bench/floor into its private copy of PostgreSQL.
CREATE FUNCTION bench_noop_trigger() RETURNS trigger
    LANGUAGE c AS '$libdir/bench_floor', 'bench_noop_trigger';
CREATE TABLE bulk_floor (LIKE bulk_plain INCLUDING ALL);
INSERT INTO bulk_floor SELECT * FROM bulk_plain;
CREATE TRIGGER bench_floor BEFORE UPDATE ON bulk_floor
    FOR EACH ROW EXECUTE FUNCTION bench_noop_trigger();
CREATE TABLE ledbulk_floor (LIKE led_plain INCLUDING ALL);
CREATE TRIGGER bench_floor BEFORE INSERT ON ledbulk_floor
    FOR EACH ROW EXECUTE FUNCTION bench_noop_trigger();

VACUUM ANALYZE;
