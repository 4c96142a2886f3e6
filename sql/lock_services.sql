-- Tokens from lock services: fence_from_zxid() for ZooKeeper, set_token()
-- for a token bound as a parameter, and what a strict table says to the
-- same grant used in two transactions.

-- fence_from_zxid: ZooKeeper's epoch (the zxid's high 32 bits) and counter
-- (its low 32 bits), with a generation above ZooKeeper's epoch
SELECT fencing.fence_from_zxid(27);                        -- epoch 0, counter 27
SELECT fencing.fence_from_zxid((3::bigint << 32) | 4);     -- ZooKeeper epoch 3
SELECT fencing.fence_from_zxid(27, 1);                     -- generation 1
SELECT fencing.fence_from_zxid((3::bigint << 32) | 4, 2);  -- (2 << 32 | 3) : 4
SELECT fencing.fence_from_zxid(zxid => 4294967296, generation => 0);
SELECT fencing.fence_from_zxid(9223372036854775807, 2147483647);

-- the fences compare exactly as (generation, zxid) pairs do
WITH z(gen, zxid) AS (
    VALUES (0, 0::bigint), (0, 1), (0, 4294967295), (0, 4294967296),
           (0, 12884901892), (0, 9223372036854775807),
           (1, 0), (1, 4), (1, 4294967296), (2, 1), (2147483647, 0)
)
SELECT count(*) AS pairs,
       count(*) FILTER (WHERE ((a.gen, a.zxid) < (b.gen, b.zxid)) =
                              (fencing.fence_from_zxid(a.zxid, a.gen)
                               OPERATOR(fencing.<) fencing.fence_from_zxid(b.zxid, b.gen))
                          AND ((a.gen, a.zxid) = (b.gen, b.zxid)) =
                              (fencing.fence_from_zxid(a.zxid, a.gen)
                               OPERATOR(fencing.=) fencing.fence_from_zxid(b.zxid, b.gen)))
           AS ordered_alike
  FROM z a CROSS JOIN z b;

-- after ZooKeeper lost its data, zxids start again: generation 0 would
-- refuse the rightful holder for good, generation 1 lets it in
SELECT fencing.fence_from_zxid(4, 1) OPERATOR(fencing.>) fencing.fence_from_zxid(27, 0) AS new_generation_wins,
       fencing.fence_from_zxid(4, 0) OPERATOR(fencing.>) fencing.fence_from_zxid(27, 0) AS same_generation_wins;

-- bad input
SELECT fencing.fence_from_zxid(-1);
SELECT fencing.fence_from_zxid(27, -1);
SELECT fencing.fence_from_zxid(27, 2147483648::bigint::integer);
SELECT fencing.fence_from_zxid(NULL) IS NULL AS null_zxid,
       fencing.fence_from_zxid(27, NULL) IS NULL AS null_generation;

-- set_token: SET LOCAL for a token bound as a parameter
CREATE SCHEMA lock_services;
SET search_path = lock_services, public;
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-1', 'pending', NULL), ('r-2', 'pending', NULL);
SELECT fencing.protect('refunds');

-- SET LOCAL takes no parameter: this is what drivers with server-side
-- parameters send, and it fails
PREPARE set_local(text) AS SET LOCAL fencing.token = $1;

PREPARE pay(text) AS
    UPDATE refunds SET state = 'paid' WHERE id = $1 RETURNING id, state, fence;
PREPARE take(fencing.fence) AS SELECT fencing.set_token($1);
BEGIN;
EXECUTE take('0:5');
SHOW fencing.token;
EXECUTE pay('r-1');
COMMIT;
SHOW fencing.token;                -- gone with the transaction
UPDATE refunds SET state = 'paid' WHERE id = 'r-2';    -- no token: SF002

-- the token is text-typed in many drivers: the literal is a fence
BEGIN;
SELECT fencing.set_token('0:6');
UPDATE refunds SET state = 'refunded' WHERE id = 'r-1' RETURNING fence;
ROLLBACK;

-- a savepoint rolled back takes the token back, as for SET LOCAL
BEGIN;
SELECT fencing.set_token('0:7');
SAVEPOINT s;
SELECT fencing.set_token('0:8');
ROLLBACK TO SAVEPOINT s;
SHOW fencing.token;
COMMIT;

-- NULL is refused at once (set_config would reset the token instead)
BEGIN;
SELECT fencing.set_token(NULL);
ROLLBACK;
-- a bad value is the type's input error
SELECT fencing.set_token('3:');

-- set_token() is set_config() in the caller's session: wherever one is
-- refused the other is too, with the same SQLSTATE
CREATE TABLE audit (id serial PRIMARY KEY, what text);
CREATE FUNCTION set_both() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    by_config text := 'accepted';
    by_helper text := 'accepted';
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('fencing.token', '0:9', true);
    EXCEPTION WHEN OTHERS THEN
        by_config := SQLSTATE;
    END;
    BEGIN
        PERFORM fencing.set_token('0:9');
    EXCEPTION WHEN OTHERS THEN
        by_helper := SQLSTATE;
    END;
    NEW.what := CASE WHEN by_config = by_helper THEN 'alike' ELSE
                format('set_config: %s, set_token: %s', by_config, by_helper) END;
    RETURN NEW;
END $$;
CREATE TRIGGER set_both BEFORE INSERT ON audit FOR EACH ROW EXECUTE FUNCTION set_both();
BEGIN;
INSERT INTO audit (what) VALUES ('?') RETURNING what;
ROLLBACK;

-- its catalog entries
SELECT p.oid::regprocedure AS function, pg_get_function_arguments(p.oid) AS arguments,
       p.provolatile, p.proisstrict, p.proparallel,
       obj_description(p.oid, 'pg_proc') IS NOT NULL AS has_comment
  FROM pg_proc p
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('fence_from_zxid', 'set_token')
 ORDER BY 1::text;
SELECT has_function_privilege('public', 'fencing.set_token(fencing.fence)', 'EXECUTE') AS public_set_token,
       has_function_privilege('public', 'fencing.fence_from_zxid(bigint, integer)', 'EXECUTE') AS public_from_zxid;

-- The same grant in two transactions.  A strict table accepts a token in
-- one transaction only (a second write in the same transaction is fine);
-- the second transaction is told what happened and what to do.
CREATE TABLE jobs (id text PRIMARY KEY, runs int, fence fencing.fence);
INSERT INTO jobs VALUES ('j-1', 0, NULL);
SELECT fencing.protect('jobs');
CREATE TABLE ledger (id serial PRIMARY KEY, account text, amount int, fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account}');
BEGIN;
SELECT fencing.set_token('0:12');
UPDATE jobs SET runs = runs + 1 WHERE id = 'j-1';
UPDATE jobs SET runs = runs + 1 WHERE id = 'j-1';   -- same transaction: accepted
INSERT INTO ledger (account, amount) VALUES ('acct-1', 10);
INSERT INTO ledger (account, amount) VALUES ('acct-1', 20);
COMMIT;
BEGIN;
SELECT fencing.set_token('0:12');
UPDATE jobs SET runs = runs + 1 WHERE id = 'j-1';   -- row scope: already used
ROLLBACK;
BEGIN;
SELECT fencing.set_token('0:12');
INSERT INTO ledger (account, amount) VALUES ('acct-1', 30);   -- key scope: already used
ROLLBACK;
-- an older token keeps the message of a lost lock
BEGIN;
SELECT fencing.set_token('0:11');
UPDATE jobs SET runs = runs + 1 WHERE id = 'j-1';
ROLLBACK;
-- advance() in strict mode: an equal token was already used
SELECT fencing.advance('0:12', '0:12');
SELECT fencing.advance('0:12', '0:11');
SELECT fencing.advance('0:12', '0:12', strict => false);
-- strict => false: one grant may write in several transactions
SELECT fencing.protect('jobs', strict => false);
BEGIN;
SELECT fencing.set_token('0:12');
UPDATE jobs SET runs = runs + 1 WHERE id = 'j-1' RETURNING runs, fence;
COMMIT;
SELECT * FROM jobs;

DEALLOCATE ALL;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA lock_services CASCADE;
RESET client_min_messages;
