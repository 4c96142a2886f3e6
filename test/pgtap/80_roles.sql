-- The catalog shape of what keeps other roles out and each server's state
-- its own: who may read a scope's storage, the event trigger that drops
-- the storage with the extension, and the triggers that keep the
-- extension's local state local under logical replication.
BEGIN;
SELECT plan(17);

CREATE TABLE public.tap_roles_ledger (account text, fence fencing.fence);
SELECT fencing.protect('public.tap_roles_ledger', key_columns => '{account}');
SELECT s.storage AS storage FROM fencing.scope_storage s
 WHERE s.scope_name = 'public.tap_roles_ledger' \gset

-- reading keys: the storage is not PUBLIC's, scope_fences() decides
SELECT ok(NOT has_table_privilege('public', :'storage', 'SELECT'),
          'PUBLIC may not read a scope''s storage table');
SELECT is((SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
            WHERE p.oid = 'fencing.scope_fences()'::regprocedure),
          'c', 'fencing.scope_fences() is a C function');
SELECT ok(NOT (SELECT prosecdef FROM pg_proc WHERE oid = 'fencing.scope_fences()'::regprocedure),
          'fencing.scope_fences() runs as its caller (it reads the storage as the extension''s owner itself)');
SELECT is(:'storage', 'fencing.scope_' || left(encode(sha256(convert_to('public.tap_roles_ledger', 'UTF8')), 'hex'), 16),
          'a storage table is named after its scope');

-- pinning: the event trigger of DROP EXTENSION
SELECT has_function('fencing', 'drop_extension_start', '{}'::name[],
                    'function fencing.drop_extension_start() exists');
SELECT is((SELECT format('%s %s %s %s', evtevent, evtenabled, evttags, evtfoid::regproc)
             FROM pg_event_trigger WHERE evtname = 'fencing_drop_extension'),
          'ddl_command_start A {"DROP EXTENSION"} fencing.drop_extension_start',
          'event trigger fencing_drop_extension: ddl_command_start of DROP EXTENSION, ENABLE ALWAYS');
SELECT function_privs_are('fencing', 'drop_extension_start', '{}'::name[], 'public', '{}'::text[],
                          'PUBLIC may not call fencing.drop_extension_start()');

-- logical replication: the triggers of the local state
SELECT has_function('fencing', 'local_state', '{}'::name[], 'function fencing.local_state() exists');
SELECT function_privs_are('fencing', 'local_state', '{}'::name[], 'public', '{}'::text[],
                          'PUBLIC may not call fencing.local_state()');
SELECT is((SELECT string_agg(format('%s.%s=%s', c.relname, t.tgname, t.tgenabled), ' '
                             ORDER BY c.relname, t.tgname)
             FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            WHERE t.tgfoid = 'fencing.local_state()'::regprocedure
              AND c.relname IN ('protected', 'scope_storage', 'epoch_state')),
          'epoch_state.fencing_local_state=A epoch_state.fencing_local_state_truncate=A '
          'protected.fencing_local_state=A protected.fencing_local_state_truncate=A '
          'scope_storage.fencing_local_state=A scope_storage.fencing_local_state_truncate=A',
          'fencing.protected, the registry and the epoch state keep their rows local, ENABLE ALWAYS');
SELECT is((SELECT string_agg(format('%s=%s', t.tgname, t.tgenabled), ' ' ORDER BY t.tgname)
             FROM pg_trigger t
            WHERE t.tgrelid = :'storage'::regclass AND t.tgfoid = 'fencing.local_state()'::regprocedure),
          'fencing_local_state=A fencing_local_state_truncate=A',
          'a storage table keeps its rows local, ENABLE ALWAYS');
SELECT ok((SELECT tgtype & (1 | 2 | 4 | 8 | 16) = (1 | 2 | 4 | 8 | 16)
             FROM pg_trigger WHERE tgrelid = :'storage'::regclass AND tgname = 'fencing_local_state'),
          'fencing_local_state: FOR EACH ROW BEFORE INSERT OR DELETE OR UPDATE');
SELECT ok((SELECT tgtype & (1 | 2 | 32) = (2 | 32)
             FROM pg_trigger WHERE tgrelid = :'storage'::regclass AND tgname = 'fencing_local_state_truncate'),
          'fencing_local_state_truncate: FOR EACH STATEMENT BEFORE TRUNCATE');
SELECT is((SELECT relreplident::text FROM pg_class WHERE oid = :'storage'::regclass),
          'f', 'a storage table is REPLICA IDENTITY FULL');
SELECT is((SELECT count(*)::int FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
            WHERE c.relname IN ('idempotency_keys', 'leases')
              AND c.relnamespace = 'fencing'::regnamespace),
          0, 'idempotency keys and leases have no trigger (they replicate as they are)');

-- the guard writes through the storage's triggers, and health says intact
SET LOCAL fencing.token = '1:1';
INSERT INTO public.tap_roles_ledger VALUES ('a');
RESET fencing.token;
SELECT is((SELECT fence::text FROM fencing.scopes
            WHERE scope_name = 'public.tap_roles_ledger' AND key = '["a"]'),
          '1:1', 'the guard writes a storage table that has the local-state triggers');
SELECT is((SELECT guard_intact FROM fencing.protected_tables
            WHERE relid = 'public.tap_roles_ledger'::regclass),
          true, 'fencing.protected_tables: intact with the local-state triggers');

SELECT * FROM finish();
ROLLBACK;
