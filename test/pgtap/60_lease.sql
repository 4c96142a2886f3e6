-- The catalog shape of the leases: the table, its owner column, the
-- functions and who may run them.
BEGIN;
SELECT plan(26);

SELECT has_table('fencing', 'leases', 'fencing.leases exists');
SELECT col_is_pk('fencing', 'leases', 'name', 'leases is keyed by name');
SELECT col_type_is('fencing', 'leases', 'name', 'text', 'leases.name is text');
SELECT col_type_is('fencing', 'leases', 'holder', 'text', 'leases.holder is text');
SELECT col_type_is('fencing', 'leases', 'token', 'fencing.fence', 'leases.token is a fence');
SELECT col_type_is('fencing', 'leases', 'granted_at', 'timestamp with time zone', 'leases.granted_at is timestamptz');
SELECT col_type_is('fencing', 'leases', 'expires_at', 'timestamp with time zone', 'leases.expires_at is timestamptz');
SELECT col_type_is('fencing', 'leases', 'owner', 'regrole', 'leases.owner is a role');
SELECT col_not_null('fencing', 'leases', 'owner', 'every lease has an owner');
SELECT has_table('fencing', 'epoch_state', 'fencing.epoch_state exists');
SELECT col_type_is('fencing', 'protected', 'lease', 'text', 'protected.lease is text');

SELECT function_returns('fencing', 'lease_acquire', ARRAY['text', 'text', 'interval'], 'fencing.fence',
                        'lease_acquire(text, text, interval) returns a fence');
SELECT function_returns('fencing', 'lease_renew', ARRAY['text', 'fencing.fence', 'interval'], 'boolean',
                        'lease_renew(text, fence, interval) returns boolean');
SELECT function_returns('fencing', 'lease_release', ARRAY['text', 'fencing.fence'], 'boolean',
                        'lease_release(text, fence) returns boolean');
SELECT function_returns('fencing', 'lease_check', ARRAY['text', 'fencing.fence'], 'boolean',
                        'lease_check(text, fence) returns boolean');
SELECT function_returns('fencing', 'current_epoch', ARRAY[]::text[], 'bigint', 'current_epoch() returns bigint');
SELECT function_returns('fencing', 'bump_epoch', ARRAY[]::text[], 'bigint', 'bump_epoch() returns bigint');
SELECT is((SELECT count(*)::int FROM pg_proc
            WHERE proname = 'protect' AND pronamespace = 'fencing'::regnamespace),
          1, 'protect() has one signature');

SELECT table_privs_are('fencing', 'leases', 'public', ARRAY[]::text[],
                       'PUBLIC may not read fencing.leases: tokens are capabilities');
SELECT table_privs_are('fencing', 'epoch_state', 'public', ARRAY['SELECT'],
                       'PUBLIC may only read fencing.epoch_state');
SELECT function_privs_are('fencing', 'bump_epoch', ARRAY[]::text[], 'public', ARRAY[]::text[],
                          'PUBLIC may not bump the epoch');
SELECT function_privs_are('fencing', 'lease_acquire', ARRAY['text', 'text', 'interval'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may acquire leases');

SELECT throws_ok($$SELECT fencing.lease_acquire(NULL, 'h', '1 minute')$$, '22004', NULL,
                 'a NULL lease name raises 22004');
SELECT throws_ok($$SELECT fencing.lease_acquire('', 'h', '1 minute')$$, '22023', NULL,
                 'an empty lease name raises 22023');
SELECT throws_ok($$SELECT fencing.lease_acquire('n', 'h', '0')$$, '22023', NULL,
                 'a ttl of zero raises 22023');
SELECT ok(fencing.lease_acquire('pgtap-lease', 'h', '1 minute') IS NOT NULL, 'a free lease is granted');

SELECT * FROM finish();
ROLLBACK;
