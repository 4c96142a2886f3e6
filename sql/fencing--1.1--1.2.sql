/* sql/fencing--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.2'" to load this file. \quit

-- A fresh CREATE EXTENSION fencing runs fencing--1.0.sql, then
-- fencing--1.0--1.1.sql, then this script, so an updated database and a
-- new one have the same objects by construction.
--
-- One section per concern.  Each section qualifies every name
-- (@extschema@, pg_catalog) as the earlier scripts do.

------------------------------------------------------------------------------
-- Idempotency keys of fencing 1.0: to the extension's owner, not PUBLIC
------------------------------------------------------------------------------

-- The update from 1.0 to 1.1 as released gave the idempotency keys begun
-- under 1.0 to PUBLIC (owner 0): every role could replay another's
-- finished key and read its result, or complete its running key.  They
-- belong to the extension's owner now, as the leases of 1.0 do; the
-- extension's owner hands them to the application's role, best in the
-- transaction of this update:
--     BEGIN;
--     ALTER EXTENSION fencing UPDATE;
--     UPDATE fencing.idempotency_keys SET owner = 'app' WHERE key LIKE 'order:%';
--     COMMIT;
-- (The update from 1.0 gives them to the extension's owner directly.)
DO $$
DECLARE
    ext_owner pg_catalog.regrole := (SELECT e.extowner::pg_catalog.regrole
                                       FROM pg_catalog.pg_extension AS e
                                      WHERE e.extname OPERATOR(pg_catalog.=) 'fencing');
    n bigint;
    last_expiry timestamptz;
BEGIN
    WITH given AS (
        UPDATE @extschema@.idempotency_keys AS k
           SET owner = ext_owner
         WHERE k.owner OPERATOR(pg_catalog.=) 0::pg_catalog.regrole
        RETURNING k.expires_at)
    SELECT pg_catalog.count(*), pg_catalog.max(g.expires_at)
      INTO n, last_expiry
      FROM given AS g
     WHERE g.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE WARNING '% idempotency keys begun under fencing 1.0 belonged to PUBLIC and now belong to the extension''s owner, role %', n, ext_owner
            USING DETAIL = pg_catalog.format('Other roles get 42501 from them until the extension''s owner gives them to the roles that began them (the last expires at %s).', last_expiry),
                  HINT = 'As the extension''s owner, give them to the role of their application, best in the transaction of the update: UPDATE fencing.idempotency_keys SET owner = ''role_name'' WHERE key LIKE ''prefix%'';';
    END IF;
END
$$;

COMMENT ON COLUMN @extschema@.idempotency_keys.owner IS
    'the role that began the key: only it and its members may use the key (keys begun under fencing 1.0 belong to the extension''s owner until it hands them on)';

-- (end of section: idempotency keys of fencing 1.0)
