-- test/bench/managed_setup.sql: the tables of test/bench/managed.sh, made
-- alike in a database of the C edition and in one of the managed edition
-- (fencing_sql), by the same role, from this one file: it spells fences
-- with fencing.fence(), which both editions have.  The shapes and the
-- functions are those of setup.sql and setup_idem.sql, so that the
-- scripts of test/bench/scripts run unchanged against either database:
--
--   upd_*     :rows accounts (id, balance, fence), one row updated per
--             transaction: plain, the guard in row scope with the token in
--             the column (upd_guard) or in fencing.token (upd_token)
--   led_*     a ledger of :accounts accounts: plain INSERT, the guard in
--             key scope (per account)
--   orders_*  one order per business request: bare, or wrapped in
--             idem_begin() and idem_complete() (bench_order_idem)

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE TABLE upd_plain (id int PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence);
CREATE TABLE upd_guard (LIKE upd_plain INCLUDING ALL);
CREATE TABLE upd_token (LIKE upd_plain INCLUDING ALL);
INSERT INTO upd_plain SELECT g, 0, fencing.fence(1, 0) FROM generate_series(1, :rows) g;
INSERT INTO upd_guard SELECT * FROM upd_plain;
INSERT INTO upd_token SELECT * FROM upd_plain;
SELECT fencing.protect('upd_guard');
SELECT fencing.protect('upd_token');

CREATE TABLE led_plain (
    id bigserial PRIMARY KEY,
    account_id int NOT NULL,
    amount bigint NOT NULL,
    fence fencing.fence
);
CREATE TABLE led_guard (LIKE led_plain INCLUDING ALL);
INSERT INTO led_plain (account_id, amount, fence)
    SELECT a, 0, fencing.fence(1, 0) FROM generate_series(1, :accounts) a;
INSERT INTO led_guard (account_id, amount, fence)
    SELECT a, 0, fencing.fence(1, 0) FROM generate_series(1, :accounts) a;
SELECT fencing.protect('led_guard', key_columns => '{account_id}');

CREATE TABLE orders_bare (
    id bigserial PRIMARY KEY,
    ref bigint NOT NULL,
    amount_cents int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE orders_idem (LIKE orders_bare INCLUDING ALL);

CREATE FUNCTION bench_order_bare(r bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    order_id bigint;
BEGIN
    INSERT INTO orders_bare (ref, amount_cents) VALUES (r, 1250) RETURNING id INTO order_id;
    RETURN jsonb_build_object('order', order_id);
END
$$;

CREATE FUNCTION bench_order_idem(r bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    b record;
    order_id bigint;
    res jsonb;
BEGIN
    SELECT * INTO b FROM fencing.idem_begin('order:' || r, jsonb_build_object('amount_cents', 1250));
    IF b.state = 'done' THEN
        RETURN b.result;
    END IF;
    INSERT INTO orders_idem (ref, amount_cents) VALUES (r, 1250) RETURNING id INTO order_id;
    res := jsonb_build_object('order', order_id);
    PERFORM fencing.idem_complete('order:' || r, b.token, res);
    RETURN res;
END
$$;

VACUUM ANALYZE upd_plain, upd_guard, upd_token, led_plain, led_guard, orders_bare, orders_idem;
