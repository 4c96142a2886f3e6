--
-- Idempotency keys across the update from 1.0: a database still at 1.0
-- keeps working with this library (keys without owners, as 1.0 had them),
-- and ALTER EXTENSION UPDATE gives the keys begun under 1.0 to the
-- extension's owner (never to PUBLIC) and says so; keys begun from then on
-- belong to their role.
--
\set SHOW_CONTEXT never
SELECT current_database() AS regress_db \gset
CREATE DATABASE regress_idem_update;
CREATE ROLE regress_upd_dba SUPERUSER;
\c regress_idem_update
SET client_min_messages = warning;
SET ROLE regress_upd_dba;
CREATE EXTENSION fencing VERSION '1.0';
RESET ROLE;
RESET client_min_messages;
CREATE ROLE regress_upd_app;
CREATE ROLE regress_upd_evil;
GRANT USAGE ON SCHEMA fencing TO regress_upd_app, regress_upd_evil;

-- The 1.0 table has no owner column; the helpers use it as 1.0 did,
-- directly ...
SELECT count(*) AS owner_columns FROM pg_attribute
 WHERE attrelid = 'fencing.idempotency_keys'::regclass AND attname = 'owner';
SET ROLE regress_upd_app;
SELECT state, token AS old1 FROM fencing.idem_begin('old:1', '{"n": 1}') \gset
\echo :state :old1
SELECT fencing.idem_complete('old:1', :'old1', '"done under 1.0"');
SELECT state, token AS old2 FROM fencing.idem_begin('old:2', '{"n": 2}') \gset
SELECT fencing.idem_checkpoint('old:2', :'old2', 'half-way');
RESET ROLE;
-- ... and through SPI, when the table does not qualify for the direct path
CREATE FUNCTION public.noop() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NEW; END';
CREATE TRIGGER noop BEFORE UPDATE ON fencing.idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION public.noop();
SET ROLE regress_upd_app;
SELECT state, token AS old3 FROM fencing.idem_begin('old:3', '{"n": 3}') \gset
SELECT fencing.idem_complete('old:3', :'old3', '"done through SPI"');
SELECT state, result FROM fencing.idem_begin('old:3', '{"n": 3}');
RESET ROLE;
DROP TRIGGER noop ON fencing.idempotency_keys;
-- As under 1.0, any role may use these keys (nothing says whose they are).
SET ROLE regress_upd_evil;
SELECT state, result FROM fencing.idem_begin('old:1', '{"n": 1}');
RESET ROLE;

-- The update: the keys go to the extension's owner, and the update says
-- how many (and, in a DETAIL and a HINT, until when and what to do about
-- it).
\set VERBOSITY terse
ALTER EXTENSION fencing UPDATE TO '1.1';
\set VERBOSITY default
SELECT key, owner, state, recovery_point FROM fencing.idempotency_keys ORDER BY key;
SELECT attnotnull, atthasdef FROM pg_attribute
 WHERE attrelid = 'fencing.idempotency_keys'::regclass AND attname = 'owner';

-- Until the extension's owner hands them over, the application's role is
-- refused too: it fails closed.
SET ROLE regress_upd_app;
SELECT fencing.idem_complete('old:2', :'old2', '"done under 1.1"');
-- New keys belong to the role that begins them.
SELECT state FROM fencing.idem_begin('new:1', '{}');
SET ROLE regress_upd_evil;
SELECT * FROM fencing.idem_begin('new:1', '{}');
RESET ROLE;
SELECT key, owner FROM fencing.idempotency_keys ORDER BY key;

-- The DBA who knows which role wrote the 1.0 keys gives them to it (best
-- in the transaction of the update).
UPDATE fencing.idempotency_keys SET owner = 'regress_upd_app' WHERE key LIKE 'old:%';
SET ROLE regress_upd_evil;
SELECT * FROM fencing.idem_begin('old:1', '{"n": 1}');
SET ROLE regress_upd_app;
SELECT state, result FROM fencing.idem_begin('old:1', '{"n": 1}');
-- The running 1.0 key: its role completes it.
SELECT fencing.idem_complete('old:2', :'old2', '"done under 1.1"');
SELECT state, result FROM fencing.idem_begin('old:2', '{"n": 2}');
RESET ROLE;

\c :regress_db
DROP DATABASE regress_idem_update WITH (FORCE);
DROP ROLE regress_upd_app;
DROP ROLE regress_upd_evil;
DROP ROLE regress_upd_dba;
