/* sql/fencing--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION fencing UPDATE TO '1.1'" to load this file. \quit

-- 1.0 is frozen as released.  A fresh CREATE EXTENSION fencing runs
-- fencing--1.0.sql and then this script, as PostgreSQL's contrib modules
-- do, so an updated database and a new one have the same objects by
-- construction; test/suites/update.sh proves it on a filled database.
--
-- One section per concern, in the order of the 1.0 script.  Each section
-- qualifies every name (@extschema@, pg_catalog) as the 1.0 script does.

------------------------------------------------------------------------------
-- Hardening, part 1: typed scope storage and scope owners (issue 10)
------------------------------------------------------------------------------

-- (end of scope storage section)

------------------------------------------------------------------------------
-- Hardening, part 2: the DDL guard and the guard's health (issue 10)
------------------------------------------------------------------------------

-- (end of ddl guard section)

------------------------------------------------------------------------------
-- Statistics and observability (issue 13)
------------------------------------------------------------------------------

-- (end of observability section)

------------------------------------------------------------------------------
-- Idempotency keys (issues 10, 15)
------------------------------------------------------------------------------

-- Owners (issue 10; SPEC section 5).  A key belongs to the role that began
-- it (current_user of idem_begin), and any other role that is not a member
-- of it gets 42501 from every helper on the key.  regrole, not oid, so that
-- pg_dump writes role names, which a restore maps back to roles by name (and
-- refuses loudly where the role does not exist); pg_upgrade keeps role OIDs.
--
-- Keys begun under 1.0: nobody recorded who began them, and no choice of a
-- role can be right for every database.  Giving them to the extension's
-- owner would refuse the very applications that wrote them (42501 on every
-- retry of a done key, and a multi-step request could never record its
-- result, then run again once its key expired).  So they go to PUBLIC
-- (owner 0, shown as '-'): every role may use them, exactly as under 1.0,
-- until they expire (24 hours by default), and every key begun from now on
-- has its begetter as owner.  A DBA who knows which role wrote them can
-- narrow them at once (as the extension's owner), for example
--   UPDATE fencing.idempotency_keys SET owner = 'app' WHERE owner = '-'::regrole;
-- The update says how many keys this concerns, with a WARNING (extension
-- scripts run with client_min_messages = warning, and this is about who
-- may use what).  The default only fills
-- the existing rows (no table rewrite); it is dropped at once, so that no
-- insertion can forget an owner.
ALTER TABLE @extschema@.idempotency_keys
    ADD COLUMN owner pg_catalog.regrole NOT NULL DEFAULT 0;
ALTER TABLE @extschema@.idempotency_keys ALTER COLUMN owner DROP DEFAULT;
COMMENT ON COLUMN @extschema@.idempotency_keys.owner IS
    'the role that began the key: only it and its members may use the key; - (PUBLIC, for keys begun under fencing 1.0): every role';

DO $$
DECLARE
    n bigint;
    last_expiry timestamptz;
BEGIN
    SELECT pg_catalog.count(*), pg_catalog.max(k.expires_at)
      INTO n, last_expiry
      FROM @extschema@.idempotency_keys AS k
     WHERE k.expires_at OPERATOR(pg_catalog.>) pg_catalog.clock_timestamp();
    IF n OPERATOR(pg_catalog.>) 0 THEN
        RAISE WARNING '% idempotency keys begun under fencing 1.0 now belong to PUBLIC', n
            USING DETAIL = pg_catalog.format('Every role may use them, as under 1.0, until they expire (the last at %s); keys begun from now on belong to the role that begins them.', last_expiry),
                  HINT = 'If one role wrote them, give them to it: UPDATE fencing.idempotency_keys SET owner = ''role_name'' WHERE owner = ''-''::regrole;';
    END IF;
END
$$;

-- (end of idempotency section)

------------------------------------------------------------------------------
-- Leases (issues 10, 13)
------------------------------------------------------------------------------

-- (end of lease section)

------------------------------------------------------------------------------
-- Distributed tables (issue 14)
------------------------------------------------------------------------------

-- (end of distributed tables section)
