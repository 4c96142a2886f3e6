-- The catalog shape of the extension.
BEGIN;
SELECT plan(3);
SELECT has_type('fencing', 'fence', 'type fencing.fence exists');
SELECT has_opclass('fencing', 'fence_ops', 'btree opclass exists');
SELECT throws_ok($$SELECT fencing.advance('1:2', '1:1')$$, 'SF001', NULL, 'stale token raises SF001');
SELECT * FROM finish();
ROLLBACK;
