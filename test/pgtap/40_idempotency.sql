-- The idempotency keys' catalog shape: table, functions, privileges, and
-- the SQLSTATEs of their refusals.
BEGIN;
SELECT plan(41);

-- the table, with the columns the reference lists
SELECT has_table('fencing', 'idempotency_keys', 'table fencing.idempotency_keys exists');
SELECT columns_are('fencing', 'idempotency_keys',
                   ARRAY['key', 'request_hash', 'state', 'result', 'claim', 'recovery_point',
                         'locked_until', 'expires_at', 'created_at', 'updated_at', 'owner'],
                   'idempotency_keys has its documented columns, and the owner role');
SELECT col_type_is('fencing', 'idempotency_keys', 'key', 'text', 'key is text');
SELECT col_is_pk('fencing', 'idempotency_keys', 'key', 'key is the primary key');
SELECT col_type_is('fencing', 'idempotency_keys', 'request_hash', 'bytea', 'request_hash is bytea');
SELECT col_not_null('fencing', 'idempotency_keys', 'request_hash', 'request_hash is NOT NULL');
SELECT col_type_is('fencing', 'idempotency_keys', 'state', 'text', 'state is text');
SELECT col_type_is('fencing', 'idempotency_keys', 'result', 'jsonb', 'result is jsonb');
SELECT col_type_is('fencing', 'idempotency_keys', 'claim', 'fencing.fence', 'claim is a fence');
SELECT col_type_is('fencing', 'idempotency_keys', 'recovery_point', 'text', 'recovery_point is text');
SELECT col_type_is('fencing', 'idempotency_keys', 'locked_until', 'timestamp with time zone', 'locked_until is timestamptz');
SELECT col_type_is('fencing', 'idempotency_keys', 'expires_at', 'timestamp with time zone', 'expires_at is timestamptz');
SELECT col_type_is('fencing', 'idempotency_keys', 'owner', 'regrole', 'owner is a regrole (pg_dump writes role names)');
SELECT col_not_null('fencing', 'idempotency_keys', 'owner', 'owner is NOT NULL');
-- the key's length is enforced by the helpers (the only writers), not by a
-- CHECK constraint compiled again at every executor start-up
SELECT throws_ok($$SELECT fencing.idem_begin(repeat('k', 256), '{}')$$, '22023', NULL,
                 'a key of 256 characters is refused');
SELECT lives_ok($$SELECT fencing.idem_begin(repeat('k', 255), '{}')$$,
                'a key of 255 characters is taken');
SELECT has_index('fencing', 'idempotency_keys', 'idempotency_keys_expires_at_idx', 'expires_at',
                 'an index on expires_at for purge');
SELECT ok((SELECT c.oid = ANY (e.extconfig)
             FROM pg_catalog.pg_extension AS e, pg_catalog.pg_class AS c
            WHERE e.extname = 'fencing' AND c.oid = 'fencing.idempotency_keys'::regclass),
          'idempotency_keys is dumped by pg_dump');
SELECT ok((SELECT c.oid = ANY (e.extconfig)
             FROM pg_catalog.pg_extension AS e, pg_catalog.pg_class AS c
            WHERE e.extname = 'fencing' AND c.oid = 'fencing.idempotency_claim_seq'::regclass),
          'the claim sequence is dumped by pg_dump');
SELECT has_view('fencing', 'idempotency_summary', 'view fencing.idempotency_summary exists');

-- the functions and their signatures
SELECT has_function('fencing', 'idem_begin', ARRAY['text', 'jsonb', 'interval', 'interval', 'boolean'],
                    'idem_begin(key, request, lease, retention, wait)');
SELECT function_returns('fencing', 'idem_begin', ARRAY['text', 'jsonb', 'interval', 'interval', 'boolean'],
                        'setof record', 'idem_begin returns a table');
SELECT has_function('fencing', 'idem_checkpoint', ARRAY['text', 'fencing.fence', 'text', 'interval'],
                    'idem_checkpoint(key, token, recovery_point, lease)');
SELECT function_returns('fencing', 'idem_checkpoint', ARRAY['text', 'fencing.fence', 'text', 'interval'],
                        'void', 'idem_checkpoint returns void');
SELECT has_function('fencing', 'idem_complete', ARRAY['text', 'fencing.fence', 'jsonb'],
                    'idem_complete(key, token, result)');
SELECT has_function('fencing', 'idem_abandon', ARRAY['text', 'fencing.fence'],
                    'idem_abandon(key, token)');
SELECT has_function('fencing', 'idem_purge', ARRAY['integer'], 'idem_purge(batch)');
SELECT function_returns('fencing', 'idem_purge', ARRAY['integer'], 'bigint', 'idem_purge returns bigint');
-- idem_begin switches to the extension owner around its own SQL only, so
-- it is not SECURITY DEFINER (see src/idempotency.c)
SELECT isnt_definer('fencing', 'idem_begin', ARRAY['text', 'jsonb', 'interval', 'interval', 'boolean'],
                    'idem_begin is not SECURITY DEFINER');
SELECT is((SELECT pg_catalog.array_to_string(proargnames, ',') FROM pg_catalog.pg_proc
            WHERE oid = 'fencing.idem_begin(text, jsonb, interval, interval, boolean)'::regprocedure),
          'key,request,lease,retention,wait,state,token,result,recovery_point,expires_at',
          'idem_begin argument and result column names');

-- privileges: applications call the helpers, only the owner reads the table
SELECT table_privs_are('fencing', 'idempotency_keys', 'public', ARRAY[]::text[],
                       'PUBLIC has no privilege on the table');
SELECT function_privs_are('fencing', 'idem_begin', ARRAY['text', 'jsonb', 'interval', 'interval', 'boolean'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may call idem_begin');
SELECT function_privs_are('fencing', 'idem_purge', ARRAY['integer'], 'public', ARRAY[]::text[],
                          'PUBLIC may not call idem_purge');

-- the SQLSTATEs
SELECT lives_ok($$SELECT fencing.idem_begin('tap:1', '{"a": 1}')$$, 'a new key starts');
SELECT throws_ok($$SELECT fencing.idem_begin('tap:1', '{"a": 2}')$$, 'SF003', NULL,
                 'another request under the key: SF003');
SELECT throws_ok($$SELECT fencing.idem_begin('tap:1', '{"a": 1}')$$, 'SF004', NULL,
                 'a live claim: SF004');
SELECT throws_ok($$SELECT fencing.idem_complete('tap:1', '0:1', '{}')$$, 'SF001', NULL,
                 'not the current claim: SF001');
SELECT throws_ok($$SELECT fencing.idem_begin('', '{}')$$, '22023', NULL, 'empty key: 22023');
SELECT throws_ok($$SELECT fencing.idem_begin(repeat('x', 256), '{}')$$, '22023', NULL,
                 'over-long key: 22023');
SELECT throws_ok($$SELECT fencing.idem_begin('tap:2', '{}', lease => '0')$$, '22023', NULL,
                 'non-positive lease: 22023');
SELECT throws_ok($$SELECT fencing.idem_begin(NULL, '{}')$$, '22004', NULL, 'NULL key: 22004');

SELECT * FROM finish();
ROLLBACK;
