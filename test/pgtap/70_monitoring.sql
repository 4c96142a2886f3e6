-- The catalog shape of the observability objects (the statistics and
-- lease views) and of the lease ownership.
BEGIN;
SELECT plan(22);

SELECT has_view('fencing', 'lease_stats', 'fencing.lease_stats exists');
SELECT columns_are('fencing', 'lease_stats',
    ARRAY['acquired', 'acquire_refused', 'renewed', 'renew_failed', 'released',
          'release_failed', 'expired', 'rejected', 'hold_count',
          'hold_seconds_sum', 'hold_seconds_max'],
    'fencing.lease_stats has its documented columns');
SELECT col_type_is('fencing', 'lease_stats', 'acquired', 'bigint', 'lease_stats.acquired is bigint');
SELECT col_type_is('fencing', 'lease_stats', 'hold_count', 'bigint', 'lease_stats.hold_count is bigint');
SELECT col_type_is('fencing', 'lease_stats', 'hold_seconds_sum', 'double precision',
                   'lease_stats.hold_seconds_sum is double precision');
SELECT col_type_is('fencing', 'lease_stats', 'hold_seconds_max', 'double precision',
                   'lease_stats.hold_seconds_max is double precision');
SELECT is((SELECT count(*)::int FROM fencing.lease_stats), 1,
          'fencing.lease_stats is one row');

SELECT has_view('fencing', 'lease_status', 'fencing.lease_status exists');
SELECT columns_are('fencing', 'lease_status',
    ARRAY['name', 'holder', 'token', 'granted_at', 'expires_at', 'live', 'remaining'],
    'fencing.lease_status has its documented columns');
SELECT col_type_is('fencing', 'lease_status', 'token', 'fencing.fence', 'lease_status.token is a fence');
SELECT col_type_is('fencing', 'lease_status', 'live', 'boolean', 'lease_status.live is boolean');
SELECT col_type_is('fencing', 'lease_status', 'remaining', 'interval', 'lease_status.remaining is an interval');

SELECT table_privs_are('fencing', 'lease_stats', 'public', ARRAY['SELECT'],
                       'PUBLIC may read fencing.lease_stats');
SELECT table_privs_are('fencing', 'lease_status', 'public', ARRAY['SELECT'],
                       'PUBLIC may read fencing.lease_status');
SELECT table_privs_are('fencing', 'leases', 'public', ARRAY[]::text[],
                       'PUBLIC may not read fencing.leases');
SELECT function_privs_are('fencing', 'stats_reset', ARRAY[]::text[], 'public', ARRAY[]::text[],
                          'PUBLIC may not reset the counters');

SELECT isnt_definer('fencing', 'lease_acquire', ARRAY['text', 'text', 'interval'],
                    'lease_acquire is not SECURITY DEFINER: it must know its caller');
SELECT isnt_definer('fencing', 'lease_renew', ARRAY['text', 'fencing.fence', 'interval'],
                    'lease_renew is not SECURITY DEFINER');
SELECT isnt_definer('fencing', 'lease_release', ARRAY['text', 'fencing.fence'],
                    'lease_release is not SECURITY DEFINER');
SELECT isnt_definer('fencing', 'lease_check', ARRAY['text', 'fencing.fence'],
                    'lease_check is not SECURITY DEFINER');
SELECT function_lang_is('fencing', 'lease_acquire', ARRAY['text', 'text', 'interval'], 'c',
                        'lease_acquire is written in C');
SELECT volatility_is('fencing', 'lease_stats_internal', ARRAY[]::text[], 'volatile',
                     'the counters are read as VOLATILE');

SELECT * FROM finish();
ROLLBACK;
