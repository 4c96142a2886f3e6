-- test/bench/setup_idem.sql: the idempotency variants of the benchmark
-- (test/bench/run.sh), loaded once fencing.idem_begin() exists.
--
-- One business request is one INSERT of an order.  Each variant is one
-- PL/pgSQL function called in one statement, one round trip and one
-- transaction, so that they differ only in the work done in the server:
--
--   bench_order_bare(r)   the bare INSERT
--   bench_order_idem(r)   idem_begin + the INSERT + idem_complete
--   bench_order_hand(r)   the same done by hand in PL/pgSQL: a key table,
--                         INSERT ... ON CONFLICT DO NOTHING to claim the key,
--                         the request's SHA-256, the replay of a done key,
--                         and the final UPDATE of the claim (no lease
--                         expiry or resume: the hand-made one does less)
--   bench_order_floor(r)  the floor: the least work an idempotent request
--                         needs when it runs in one transaction.  One
--                         statement draws the order's id, inserts the key
--                         row already holding its result (and the request's
--                         SHA-256), and inserts the order only if the key
--                         was new; a known key replays its result or, for
--                         another request, raises SF003.  No claim, no
--                         lease, no second write of the key row.  Its key
--                         table is a copy of fencing.idempotency_keys
--                         (columns, indexes, fillfactor), so the two differ
--                         only in the work done.
--   bench_order_strict(r) the strict floor: the same one statement on a key
--                         table holding only what replaying needs (the key,
--                         the request's SHA-256 and the result; the primary
--                         key its only index): no owner, no times, no
--                         retention, so no purge either.

\set ON_ERROR_STOP 1
SET client_min_messages = warning;

CREATE TABLE orders_bare (
    id bigserial PRIMARY KEY,
    ref bigint NOT NULL,
    amount_cents int NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE orders_idem (LIKE orders_bare INCLUDING ALL);
CREATE TABLE orders_hand (LIKE orders_bare INCLUDING ALL);

CREATE TABLE hand_keys (
    key text PRIMARY KEY,
    request_hash bytea NOT NULL,
    state text NOT NULL,
    result jsonb,
    claim bigint NOT NULL,
    locked_until timestamptz,
    expires_at timestamptz NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at timestamptz
) WITH (fillfactor = 80);

CREATE TABLE orders_floor (LIKE orders_bare INCLUDING ALL);
CREATE TABLE floor_keys (LIKE fencing.idempotency_keys INCLUDING ALL) WITH (fillfactor = 80);
-- (a no-op from 1.1 on; lets the benchmark run against a 1.0 build too,
-- for before-and-after figures)
ALTER TABLE floor_keys ADD COLUMN IF NOT EXISTS owner regrole NOT NULL DEFAULT 0;

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

CREATE FUNCTION bench_order_hand(r bigint) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    k text := 'order:' || r;
    req jsonb := jsonb_build_object('amount_cents', 1250);
    h bytea;
    st record;
    order_id bigint;
    res jsonb;
BEGIN
    h := sha256(convert_to(req::text, 'UTF8'));
    INSERT INTO hand_keys (key, request_hash, state, claim, locked_until, expires_at)
        VALUES (k, h, 'running', 1, clock_timestamp() + interval '1 minute',
                clock_timestamp() + interval '24 hours')
        ON CONFLICT (key) DO NOTHING;
    IF NOT FOUND THEN
        SELECT * INTO st FROM hand_keys WHERE key = k FOR UPDATE;
        IF st.request_hash <> h THEN
            RAISE EXCEPTION 'idempotency key % reused', k USING ERRCODE = 'SF003';
        END IF;
        IF st.state = 'done' THEN
            RETURN st.result;
        END IF;
        RAISE EXCEPTION 'idempotency key % in progress', k USING ERRCODE = 'SF004';
    END IF;
    INSERT INTO orders_hand (ref, amount_cents) VALUES (r, 1250) RETURNING id INTO order_id;
    res := jsonb_build_object('order', order_id);
    UPDATE hand_keys SET state = 'done', result = res, locked_until = NULL,
                         updated_at = clock_timestamp()
     WHERE key = k AND claim = 1 AND state = 'running';
    IF NOT FOUND THEN
        RAISE EXCEPTION 'stale claim on %', k USING ERRCODE = 'SF001';
    END IF;
    RETURN res;
END
$$;

-- (orders_bare_id_seq numbers every orders_* table: LIKE ... INCLUDING ALL
-- copies the default.  The owner is a constant: storing the caller's OID
-- would cost no more.)
CREATE FUNCTION bench_order_floor(r bigint, cents int DEFAULT 1250) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    k text := 'order:' || r;
    req jsonb := jsonb_build_object('amount_cents', cents);
    res jsonb;
    old record;
BEGIN
    WITH key AS (
        INSERT INTO floor_keys (key, request_hash, state, result, claim,
                                expires_at, created_at, updated_at, owner)
        VALUES (k, sha256(convert_to(req::text, 'UTF8')), 'done',
                jsonb_build_object('order', nextval('orders_bare_id_seq')),
                '0:1', now() + interval '24 hours', now(), now(), '-')
        ON CONFLICT (key) DO NOTHING
        RETURNING result)
    INSERT INTO orders_floor (id, ref, amount_cents)
        SELECT (key.result ->> 'order')::bigint, r, cents FROM key
    RETURNING jsonb_build_object('order', id) INTO res;
    IF res IS NULL THEN
        -- the key was known: replay its result, or refuse another request
        SELECT f.request_hash, f.result INTO old FROM floor_keys AS f WHERE f.key = k;
        IF old.request_hash <> sha256(convert_to(req::text, 'UTF8')) THEN
            RAISE EXCEPTION 'idempotency key % was already used with a different request', k
                USING ERRCODE = 'SF003';
        END IF;
        RETURN old.result;
    END IF;
    RETURN res;
END
$$;

CREATE TABLE orders_strict (LIKE orders_bare INCLUDING ALL);
CREATE TABLE strict_keys (
    key text PRIMARY KEY,
    request_hash bytea NOT NULL,
    result jsonb NOT NULL
);

CREATE FUNCTION bench_order_strict(r bigint, cents int DEFAULT 1250) RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    k text := 'order:' || r;
    req jsonb := jsonb_build_object('amount_cents', cents);
    res jsonb;
    old record;
BEGIN
    WITH key AS (
        INSERT INTO strict_keys (key, request_hash, result)
        VALUES (k, sha256(convert_to(req::text, 'UTF8')),
                jsonb_build_object('order', nextval('orders_bare_id_seq')))
        ON CONFLICT (key) DO NOTHING
        RETURNING result)
    INSERT INTO orders_strict (id, ref, amount_cents)
        SELECT (key.result ->> 'order')::bigint, r, cents FROM key
    RETURNING jsonb_build_object('order', id) INTO res;
    IF res IS NULL THEN
        SELECT s.request_hash, s.result INTO old FROM strict_keys AS s WHERE s.key = k;
        IF old.request_hash <> sha256(convert_to(req::text, 'UTF8')) THEN
            RAISE EXCEPTION 'idempotency key % was already used with a different request', k
                USING ERRCODE = 'SF003';
        END IF;
        RETURN old.result;
    END IF;
    RETURN res;
END
$$;

VACUUM ANALYZE;
