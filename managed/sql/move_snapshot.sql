-- move_snapshot: what a database filled by move_fill holds, spelled alike
-- under both editions (fences as E:C through fencing.epoch() and
-- fencing.counter(), which both have), read by a superuser with psql (not
-- a regression file): the managed suites take it before and after
-- managed/move_to_c.sql, and the two must be equal.
\pset footer off
\pset null (null)
SET search_path = moved, public;
SELECT relid, fence_column, key_columns, strict, scope_name, lease FROM fencing.protected ORDER BY relid::text;
SELECT relid, scope_kind, key_columns, strict, scope_name, partitions, guard_intact, problem
  FROM fencing.protected_tables ORDER BY relid::text;
SELECT scope_name, owner, table_scope FROM fencing.scope_storage ORDER BY 1;
SELECT scope_name, key, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence
  FROM fencing.scopes ORDER BY 1, 2;
SELECT name, holder, fencing.epoch(token) || ':' || fencing.counter(token) AS token, granted_at, expires_at, owner
  FROM fencing.leases ORDER BY name;
SELECT key, encode(request_hash, 'hex') AS request_hash, state, result,
       fencing.epoch(claim) || ':' || fencing.counter(claim) AS claim, recovery_point,
       locked_until, expires_at, created_at, updated_at, owner
  FROM fencing.idempotency_keys ORDER BY key;
SELECT fencing.current_epoch() AS current_epoch;
SELECT last_value, is_called FROM fencing.idempotency_claim_seq;
SELECT system_identifier, timeline, timeline_offset, bumps FROM fencing.epoch_state;
SELECT id, balance, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM accounts ORDER BY id;
SELECT account, cents, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM ledger ORDER BY 1, 2;
SELECT region, shard, state, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM jobs ORDER BY 1, 2;
SELECT region, shard, event, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM job_events ORDER BY 1, 2;
SELECT name, value, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM settings ORDER BY 1;
SELECT k, v, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM leased ORDER BY 1;
SELECT region, day, total, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM orders ORDER BY 1, 2;
SELECT n, fencing.epoch(fence) || ':' || fencing.counter(fence) AS fence FROM history ORDER BY 1;
SELECT attrelid::regclass, attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid IN (SELECT c.oid FROM pg_class c WHERE c.relnamespace = 'moved'::regnamespace AND c.relkind IN ('r', 'p'))
   AND attname = 'fence' ORDER BY attrelid::regclass::text;
