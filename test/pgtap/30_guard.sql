-- The guard's catalog shape: triggers, catalog tables, privileges, and the
-- SQLSTATEs of its refusals.
BEGIN;
SELECT plan(33);

CREATE TABLE public.tap_accounts (id int PRIMARY KEY, v int, fence fencing.fence);
INSERT INTO public.tap_accounts VALUES (1, 0, '5');
CREATE TABLE public.tap_ledger (account_id text, amount int, fence fencing.fence);
SELECT fencing.protect('public.tap_accounts');
SELECT fencing.protect('public.tap_ledger', key_columns => '{account_id}');

-- triggers
SELECT has_trigger('public', 'tap_accounts', 'zz_fencing_guard', 'row guard installed');
SELECT has_trigger('public', 'tap_accounts', 'zz_fencing_truncate', 'truncate guard installed');
SELECT trigger_is('public', 'tap_accounts', 'zz_fencing_guard', 'fencing', 'guard',
                  'row guard runs fencing.guard()');
SELECT trigger_is('public', 'tap_accounts', 'zz_fencing_truncate', 'fencing', 'guard_truncate',
                  'truncate guard runs fencing.guard_truncate()');
SELECT trigger_is('public', 'tap_ledger', 'zz_fencing_guard', 'fencing', 'guard',
                  'key-scope table has the same guard');
SELECT is((SELECT string_agg(tgname::text || '=' || tgenabled::text, ',' ORDER BY tgname)
             FROM pg_catalog.pg_trigger
            WHERE tgrelid = 'public.tap_accounts'::regclass AND NOT tgisinternal),
          'zz_fencing_guard=A,zz_fencing_truncate=A',
          'both triggers enabled ALWAYS');
SELECT ok((SELECT tgtype & (1 | 2 | 4 | 8 | 16) = (1 | 2 | 4 | 8 | 16)
             FROM pg_catalog.pg_trigger
            WHERE tgrelid = 'public.tap_accounts'::regclass AND tgname = 'zz_fencing_guard'),
          'row guard: FOR EACH ROW BEFORE INSERT OR DELETE OR UPDATE');

-- catalog tables
SELECT has_table('fencing', 'protected', 'fencing.protected exists');
SELECT has_view('fencing', 'scopes', 'fencing.scopes is a view of every scope''s fences');
SELECT col_type_is('fencing', 'protected', 'relid', 'regclass', 'protected.relid is regclass');
SELECT col_type_is('fencing', 'protected', 'fence_column', 'name', 'protected.fence_column is name');
SELECT col_type_is('fencing', 'protected', 'key_columns', 'name[]', 'protected.key_columns is name[]');
SELECT col_type_is('fencing', 'protected', 'strict', 'boolean', 'protected.strict is boolean');
SELECT col_type_is('fencing', 'protected', 'scope_name', 'text', 'protected.scope_name is text');
SELECT col_is_pk('fencing', 'protected', 'relid', 'protected is keyed by relid');
SELECT col_type_is('fencing', 'scopes', 'scope_name', 'text', 'scopes.scope_name is text');
SELECT col_type_is('fencing', 'scopes', 'key', 'text', 'scopes.key is text');
SELECT col_type_is('fencing', 'scopes', 'fence', 'fencing', 'fence', 'scopes.fence is fencing.fence');
SELECT col_is_pk('fencing', 'scope_storage', 'scope_name', 'the registry of scopes is keyed by scope_name');
SELECT is((SELECT string_agg(format('%s %s %s %s %s', relid, fence_column, key_columns,
                                    strict, scope_name), '; ' ORDER BY relid::text)
             FROM fencing.protected
            WHERE relid IN ('public.tap_accounts'::regclass, 'public.tap_ledger'::regclass)),
          'tap_accounts fence  t public.tap_accounts; tap_ledger fence {account_id} t public.tap_ledger',
          'protect() recorded both tables');

-- privileges: PUBLIC may only read the catalog, and call the user functions
SELECT table_privs_are('fencing', 'protected', 'public', ARRAY['SELECT'],
                       'PUBLIC may only read fencing.protected');
SELECT table_privs_are('fencing', 'scopes', 'public', ARRAY['SELECT'],
                       'PUBLIC may only read fencing.scopes');
SELECT function_privs_are('fencing', 'protect', ARRAY['regclass', 'name', 'name[]', 'boolean', 'text', 'text'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may call protect() (it checks ownership)');
SELECT function_privs_are('fencing', 'unprotect', ARRAY['regclass'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may call unprotect() (it checks ownership)');
SELECT function_privs_are('fencing', 'scope_key', ARRAY['text[]'],
                          'public', ARRAY['EXECUTE'], 'PUBLIC may call scope_key()');

-- the SQLSTATEs of refusals
SELECT throws_ok($$UPDATE public.tap_accounts SET v = 1, fence = '4' WHERE id = 1$$,
                 'SF001', NULL, 'stale UPDATE raises SF001');
-- (a DELETE: the rows were written by this very transaction, so an UPDATE
-- would carry their fence as a repeat token)
SELECT throws_ok($$DELETE FROM public.tap_accounts WHERE id = 1$$,
                 'SF002', NULL, 'DELETE without a token raises SF002');
SELECT throws_ok($$INSERT INTO public.tap_ledger VALUES ('a', 1)$$,
                 'SF002', NULL, 'key-scope INSERT without a token raises SF002');
SELECT throws_ok($$TRUNCATE public.tap_accounts$$,
                 'SF002', 'cannot truncate protected table "tap_accounts"', 'TRUNCATE raises SF002');
SELECT lives_ok($$INSERT INTO public.tap_ledger VALUES ('a', 1, '7')$$, 'a tokened INSERT passes');
SELECT throws_ok($$INSERT INTO public.tap_ledger VALUES ('a', 1, '6')$$,
                 'SF001', NULL, 'stale key-scope INSERT raises SF001');

CREATE ROLE tap_fencing_other;
GRANT SELECT, INSERT, UPDATE, DELETE ON public.tap_accounts TO tap_fencing_other;
SET LOCAL ROLE tap_fencing_other;
SELECT throws_ok($$SELECT fencing.unprotect('public.tap_accounts')$$,
                 '42501', NULL, 'a non-owner cannot unprotect');
SELECT throws_ok(format('DELETE FROM %s', s.storage),
                 '42501', NULL, 'a non-owner cannot write the fences of a scope')
  FROM fencing.scope_storage s WHERE s.scope_name = 'public.tap_ledger';
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
