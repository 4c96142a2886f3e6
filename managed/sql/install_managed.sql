-- install_managed: what this database has: the edition, who owns it,
-- whether the DDL guard was installed.  (The suite installed it as a role
-- that is not a superuser: no event triggers, so no DDL guard.)
SELECT edition, version, installed_as IN ('extension', 'script') AS installed FROM fencing.edition();
SELECT r.rolsuper AS owner_is_superuser, r.rolname <> current_user AS owner_is_not_me
  FROM pg_roles r WHERE r.oid = fencing.owner_oid();
SELECT ddl_guard FROM fencing.edition_state;
SELECT count(*) AS event_triggers FROM pg_event_trigger WHERE evtname LIKE 'fencing%';
-- every function and table of the edition belongs to its owner
SELECT count(*) AS not_the_owners FROM pg_proc WHERE pronamespace = 'fencing'::regnamespace
   AND proowner <> fencing.owner_oid();
SELECT count(*) AS not_the_owners FROM pg_class WHERE relnamespace = 'fencing'::regnamespace
   AND relowner <> fencing.owner_oid();
-- what runs as the edition's owner sets its search_path, or qualifies every name
SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'fencing'::regnamespace AND p.prosecdef
   AND p.proconfig IS NULL AND p.proname !~ '^scope_[0-9a-f]+(_[0-9]+)?_write$' ORDER BY 1;
-- what PUBLIC may not do
SELECT has_function_privilege('public', 'fencing.reset_scope(text)', 'EXECUTE') AS reset_scope,
       has_function_privilege('public', 'fencing.bump_epoch()', 'EXECUTE') AS bump_epoch,
       has_function_privilege('public', 'fencing.stats_reset()', 'EXECUTE') AS stats_reset,
       has_function_privilege('public', 'fencing.idem_purge(integer)', 'EXECUTE') AS idem_purge,
       has_function_privilege('public', 'fencing.epoch_internal(boolean, boolean)', 'EXECUTE') AS epoch_internal,
       has_table_privilege('public', 'fencing.protected', 'INSERT') AS write_protected,
       has_table_privilege('public', 'fencing.scope_storage', 'UPDATE') AS write_scopes;
