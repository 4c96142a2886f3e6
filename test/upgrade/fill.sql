-- test/upgrade/fill.sql: a realistic state for the upgrade suites
-- (test/suites/update.sh, test/suites/pg_upgrade.sh).
--
-- Written against the 1.0 interface, so that it fills a database at any
-- version.  Everything the application owns lives in schema app; what the
-- checks must find again afterwards is recorded in app.expect_* tables,
-- which are ordinary tables and so travel with the database (dump, restore,
-- pg_upgrade) like the rest.
--
-- Tokens: the fill writes epoch 5 tokens; the writers (test/upgrade/
-- writers.sql) write epoch 10 tokens; epoch 1 tokens are stale everywhere.

SET client_min_messages = warning;
CREATE SCHEMA app;

-- row scope
CREATE TABLE app.accounts (id int PRIMARY KEY, balance bigint NOT NULL,
                           fence fencing.fence);
INSERT INTO app.accounts
     SELECT i, 1000, fencing.fence(5, i) FROM generate_series(1, 50) i;
SELECT fencing.protect('app.accounts');

-- key scope, two tables sharing one scope name and key: one fence per account
CREATE TABLE app.ledger (id bigserial PRIMARY KEY, account text NOT NULL,
                         amount bigint NOT NULL, fence fencing.fence);
CREATE TABLE app.holds (id bigserial PRIMARY KEY, account text NOT NULL,
                        amount bigint NOT NULL, fence fencing.fence);
SELECT fencing.protect('app.ledger', key_columns => '{account}', scope_name => 'account');
SELECT fencing.protect('app.holds', key_columns => '{account}', scope_name => 'account');
INSERT INTO app.ledger (account, amount, fence)
     SELECT 'acct-' || i, 10, fencing.fence(5, 100 + i) FROM generate_series(1, 50) i;
INSERT INTO app.holds (account, amount, fence)
     SELECT 'acct-' || i, 1, fencing.fence(5, 200 + i) FROM generate_series(1, 20) i;

-- key scope on a partitioned table, two key columns, a partition added later
CREATE TABLE app.events (tenant text NOT NULL, region text NOT NULL,
                         day date NOT NULL, payload text,
                         fence fencing.fence) PARTITION BY RANGE (day);
CREATE TABLE app.events_2024 PARTITION OF app.events
    FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
SELECT fencing.protect('app.events', key_columns => '{tenant,region}');
CREATE TABLE app.events_2025 PARTITION OF app.events
    FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
INSERT INTO app.events
     SELECT 't' || (i % 5), CASE WHEN i % 2 = 0 THEN 'eu' ELSE 'us' END,
            DATE '2024-06-01' + i * 2, 'x', fencing.fence(5, 300 + i)
       FROM generate_series(1, 200) i;

-- table scope, not strict
CREATE TABLE app.settings (name text PRIMARY KEY, value text, fence fencing.fence);
SELECT fencing.protect('app.settings', key_columns => '{}', strict => false);
INSERT INTO app.settings VALUES ('mode', 'on', '5:500'), ('limit', '10', '5:501');

-- a table no writer touches after the fill (its fences must stay as they are)
CREATE TABLE app.archive (k int NOT NULL, fence fencing.fence);
SELECT fencing.protect('app.archive', key_columns => '{k}', scope_name => 'archive');
INSERT INTO app.archive SELECT i % 7, fencing.fence(5, 600 + i) FROM generate_series(1, 70) i;

-- leases: live, expired, released
SELECT fencing.lease_acquire('lease-live', 'worker-a', '1 day');
SELECT fencing.lease_acquire('lease-expired', 'worker-b', '1 millisecond');
SELECT fencing.lease_release('lease-released', t)
  FROM fencing.lease_acquire('lease-released', 'worker-c', '1 hour') t;

-- idempotency keys in every state
-- done, with a result to replay
SELECT fencing.idem_complete('req-done-' || i, b.token, jsonb_build_object('paid', i))
  FROM generate_series(1, 10) i,
       LATERAL fencing.idem_begin('req-done-' || i, jsonb_build_object('refund', i)) b;
-- running, its lease live
SELECT state FROM fencing.idem_begin('req-running', '{"refund": "live"}', lease => '1 day',
                                     retention => '2 days');
-- running with a checkpoint, its lease run out: the next begin resumes
SELECT fencing.idem_checkpoint('req-stalled', b.token, 'step-2')
  FROM fencing.idem_begin('req-stalled', '{"refund": "stalled"}', lease => '1 millisecond',
                          retention => '2 days') b;
-- abandoned: the next begin resumes at once
SELECT fencing.idem_abandon('req-abandoned', b.token)
  FROM fencing.idem_begin('req-abandoned', '{"refund": "abandoned"}') b;
-- expired, awaiting purge: counts as absent
SELECT fencing.idem_complete('req-expired', b.token, '{"paid": -1}')
  FROM fencing.idem_begin('req-expired', '{"refund": "expired"}', lease => '1 millisecond',
                          retention => '2 milliseconds') b;
SELECT pg_sleep(0.01);

-- planner statistics of every table
ANALYZE app.accounts, app.ledger, app.holds, app.events, app.settings, app.archive;

-- What the checks must find again.
-- Every token granted so far (lease tokens and idempotency claims): the
-- first lease granted afterwards must beat them all.
CREATE TABLE app.expect_tokens AS
    SELECT 'lease ' || name AS what, token FROM fencing.leases
    UNION ALL
    SELECT 'claim ' || key, claim FROM fencing.idempotency_keys;
-- The fences that only the fill wrote (archive's keys, the settings table).
CREATE TABLE app.expect_archive AS
    SELECT k, fencing.max(fence) AS fence FROM app.archive GROUP BY k;
-- The done keys and their results.
CREATE TABLE app.expect_done AS
    SELECT key, result FROM fencing.idempotency_keys WHERE state = 'done'
       AND expires_at > clock_timestamp();

-- The writers' bookkeeping (test/upgrade/writers.sql).
CREATE TABLE app.control (stop boolean NOT NULL);
INSERT INTO app.control VALUES (false);
CREATE TABLE app.acked (writer int NOT NULL, n int NOT NULL,
                        tok fencing.fence NOT NULL, at timestamptz DEFAULT clock_timestamp(),
                        PRIMARY KEY (writer, n));
CREATE TABLE app.failed (writer int, n int, sqlstate text, message text,
                         at timestamptz DEFAULT clock_timestamp());
CREATE TABLE app.stale (writer int, what text, tok fencing.fence, sqlstate text,
                        message text, at timestamptz DEFAULT clock_timestamp());
CREATE TABLE app.watch (at timestamptz DEFAULT clock_timestamp(), what text,
                        fence fencing.fence, n bigint);
-- The protections themselves.
CREATE TABLE app.expect_protected AS
    SELECT relid::text AS relid, fence_column, key_columns, strict, scope_name
      FROM fencing.protected;
