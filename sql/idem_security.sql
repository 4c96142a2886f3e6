--
-- Idempotency keys: privileges and a hostile search_path.
--
\set SHOW_CONTEXT never
TRUNCATE fencing.idempotency_keys;
SELECT setval('fencing.idempotency_claim_seq', 1, false) IS NOT NULL AS restarted;
CREATE ROLE regress_idem_app;
CREATE ROLE regress_idem_other;
GRANT USAGE ON SCHEMA fencing TO regress_idem_app, regress_idem_other;

-- The table is reachable only through the helpers.
SET ROLE regress_idem_app;
SELECT state FROM fencing.idem_begin('app:1', '{"n": 1}');
SELECT count(*) FROM fencing.idempotency_keys;
INSERT INTO fencing.idempotency_keys (key, request_hash, state, claim, expires_at,
                                      created_at, updated_at)
VALUES ('forged', '\x00', 'done', '0:1', 'infinity', now(), now());
UPDATE fencing.idempotency_keys SET state = 'done';
SELECT nextval('fencing.idempotency_claim_seq');
SELECT fencing.idem_purge();
SELECT running, done FROM fencing.idempotency_summary;
RESET ROLE;

-- Keys are global to the database, and belong to the role that began
-- them: another role can do nothing with one (42501), and learns neither
-- its claim nor whether its request matched (idem_owner has the rest).
SET ROLE regress_idem_other;
SELECT * FROM fencing.idem_begin('app:1', '{"n": 1}', wait => false);
SELECT * FROM fencing.idem_begin('app:1', '{"n": 2}');
SELECT fencing.idem_abandon('app:1', '0:1');
RESET ROLE;

-- Which functions PUBLIC may call.
SELECT p.proname, p.prosecdef, has_function_privilege('regress_idem_app', p.oid, 'EXECUTE') AS app_may_call
  FROM pg_proc AS p
 WHERE p.pronamespace = 'fencing'::regnamespace AND p.proname LIKE 'idem\_%'
 ORDER BY p.proname;

-- A hostile search_path: a schema of the caller's, first on the path,
-- with its own "=" for text and fence and look-alike objects.  The helpers
-- qualify every name they use, so nothing here is called.
CREATE SCHEMA evil AUTHORIZATION regress_idem_app;
SET ROLE regress_idem_app;
CREATE FUNCTION evil.always(text, text) RETURNS boolean
    LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.always);
CREATE FUNCTION evil.always_fence(fencing.fence, fencing.fence) RETURNS boolean
    LANGUAGE sql AS 'SELECT true';
CREATE OPERATOR evil.= (LEFTARG = fencing.fence, RIGHTARG = fencing.fence,
                        FUNCTION = evil.always_fence);
CREATE TABLE evil.idempotency_keys (key text);
CREATE FUNCTION evil.sha256(bytea) RETURNS bytea LANGUAGE sql AS 'SELECT ''\x00''::bytea';
CREATE FUNCTION evil.nextval(regclass) RETURNS bigint LANGUAGE sql AS 'SELECT 1::bigint';
SET search_path = evil, pg_catalog, fencing;
SELECT state FROM fencing.idem_begin('app:2', '{"n": 1}');
SELECT * FROM fencing.idem_begin('app:2', '{"n": 2}');
SELECT fencing.idem_complete('app:2', '0:0', '"forged"');
SELECT fencing.idem_complete('app:1', '0:0', '"forged"');
SELECT count(*) FROM evil.idempotency_keys;
RESET search_path;
RESET ROLE;
SELECT key, state, result FROM fencing.idempotency_keys ORDER BY key;

DROP SCHEMA evil CASCADE;
REVOKE USAGE ON SCHEMA fencing FROM regress_idem_app, regress_idem_other;
DROP ROLE regress_idem_app;
DROP ROLE regress_idem_other;
