--
-- ALTER EXTENSION fencing UPDATE from 1.0 runs no role's code with the
-- rights of the role that runs it, and gives nothing to PUBLIC.  Each case
-- is a state that fencing 1.0 let a role make; a superuser updates.
--
\set SHOW_CONTEXT never
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_sec_dba SUPERUSER;
CREATE ROLE regress_sec_mallory;
CREATE ROLE regress_sec_alice;
CREATE ROLE regress_sec_app;
CREATE DATABASE regress_update_sec;
\c regress_update_sec
SET ROLE regress_sec_dba;
SET client_min_messages = warning;
CREATE EXTENSION fencing VERSION '1.0';
RESET client_min_messages;
GRANT CREATE ON SCHEMA public TO regress_sec_mallory, regress_sec_alice;
SET DateStyle = 'SQL, MDY';
SET TimeZone = 'UTC';

-- What 1.0's protect() left behind for a table in key scope (this library
-- refuses protect() in key scope while the objects are at 1.0): the row of
-- fencing.protected and the two guard triggers, ENABLE ALWAYS.
CREATE FUNCTION pg_temp.protect_1_0(tbl regclass, keys name[], scope text)
    RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fencing.protected VALUES (tbl, 'fence', keys, true, scope);
    EXECUTE format('CREATE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s '
                   'FOR EACH ROW EXECUTE FUNCTION fencing.guard()', tbl);
    EXECUTE format('CREATE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON %s '
                   'FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()', tbl);
    EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_guard, '
                   'ENABLE ALWAYS TRIGGER zz_fencing_truncate', tbl);
END $$;

-- 1. Mallory's key types check her function: a domain with CHECK
-- (evil(VALUE)) in a composite type, as array elements and as the subtype
-- of a range; and, as the key column's own type, the domain itself.  The
-- function tries to make her a superuser, to change the session's
-- DateStyle and to write a table of hers; a key read with a superuser's
-- rights would have made her one.
SET ROLE regress_sec_mallory;
CREATE TABLE public.evil_log (who text, at text);
GRANT SELECT, INSERT ON public.evil_log TO PUBLIC;
CREATE FUNCTION public.evil(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.evil_log VALUES (current_user, v);
    PERFORM pg_catalog.set_config('DateStyle', 'SQL, DMY', false);
    BEGIN
        EXECUTE 'ALTER ROLE regress_sec_mallory SUPERUSER';
        RAISE WARNING 'evil(%) as %: made regress_sec_mallory a superuser', v, current_user;
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE WARNING 'evil(%) as %: %', v, current_user, SQLSTATE;
    END;
    RETURN true;
END $$;
CREATE DOMAIN public.evil_text AS text CHECK (public.evil(VALUE));
CREATE DOMAIN public.evil_int AS integer CHECK (public.evil(VALUE::text));
CREATE TYPE public.acct AS (bank text, id public.evil_text);
CREATE TYPE public.evil_range AS RANGE (subtype = public.evil_int);
CREATE TABLE public.m_comp (k public.acct, fence fencing.fence);
CREATE TABLE public.m_arr (k public.evil_text[], fence fencing.fence);
CREATE TABLE public.m_range (k public.evil_range, fence fencing.fence);
CREATE TABLE public.m_domain (k public.evil_text, fence fencing.fence);
-- and a composite type of hers without a domain, with a cast from text
-- that calls her function: reading keys by casts would run it
CREATE TYPE public.plain AS (bank text, id text);
CREATE FUNCTION public.evil_cast(v text) RETURNS public.plain LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.evil(v);
    RETURN pg_catalog.record_in(v::cstring, 'public.plain'::regtype, -1);
END $$;
CREATE CAST (text AS public.plain) WITH FUNCTION public.evil_cast(text);
CREATE TABLE public.m_cast (k public.plain, fence fencing.fence);
-- Alice keys by dates, written under DateStyle 'SQL, MDY' (1 February is
-- 02/01/2026); and both protect a table in scope a-shared, keyed by
-- Mallory's composite type (case 2 below).
SET ROLE regress_sec_alice;
CREATE TABLE public.a_dates (day date, fence fencing.fence);
CREATE TABLE public.a_shared (k public.acct, fence fencing.fence);
SET ROLE regress_sec_mallory;
CREATE TABLE public.m_shared (k public.acct, fence fencing.fence);
SET ROLE regress_sec_dba;
SELECT pg_temp.protect_1_0('public.m_comp', '{k}', 'm-comp'),
       pg_temp.protect_1_0('public.m_arr', '{k}', 'm-arr'),
       pg_temp.protect_1_0('public.m_range', '{k}', 'm-range'),
       pg_temp.protect_1_0('public.m_domain', '{k}', 'm-domain'),
       pg_temp.protect_1_0('public.m_cast', '{k}', 'm-cast'),
       pg_temp.protect_1_0('public.a_dates', '{day}', 'b-dates'),
       pg_temp.protect_1_0('public.a_shared', '{k}', 'a-shared'),
       pg_temp.protect_1_0('public.m_shared', '{k}', 'a-shared');
SET ROLE regress_sec_mallory;
SET client_min_messages = error;
INSERT INTO public.m_comp VALUES (ROW('b', 'c-1'), '0:5');
INSERT INTO public.m_arr VALUES (ARRAY['a-1']::public.evil_text[], '0:5');
INSERT INTO public.m_range VALUES ('[1,3)', '0:5');
INSERT INTO public.m_domain VALUES ('d-1', '0:5');
INSERT INTO public.m_cast VALUES (ROW('b', 'p-1'), '0:5');
RESET client_min_messages;
SET DateStyle = 'SQL, MDY';
SET ROLE regress_sec_alice;
INSERT INTO public.a_dates VALUES ('02/01/2026', '0:50'), ('01/02/2026', '0:20');
SET ROLE regress_sec_dba;
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY 1, 2;
SELECT count(*) AS evil_log_rows FROM public.evil_log;

-- 2. The scope shared by Alice and Mallory is keyed by Mallory's composite
-- type: reading its keys runs Mallory's code, and the scope has no single
-- owner to run it as.  The update stops, and says how to go on.
SET ROLE regress_sec_alice;
SET client_min_messages = error;
INSERT INTO public.a_shared VALUES (ROW('b', 's-1'), '0:7');
RESET client_min_messages;
SET ROLE regress_sec_dba;
SET DateStyle = 'SQL, MDY';

ALTER EXTENSION fencing UPDATE;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_sec_mallory';

-- The command of the HINT: Mallory's table gets a copy of the scope under
-- a name of its own (no fence is lowered), in the update's transaction.
-- Each key is read as the owner of its scope: Mallory's function runs as
-- Mallory (and as Alice for Alice's scope), in a security-restricted
-- operation, and nothing it does stays.
BEGIN; LOCK TABLE public.m_shared IN SHARE ROW EXCLUSIVE MODE; LOCK TABLE fencing.protected, fencing.scopes IN EXCLUSIVE MODE; INSERT INTO fencing.scopes (scope_name, key, fence) SELECT 'a-shared (regress_sec_mallory)', key, fence FROM fencing.scopes WHERE scope_name = 'a-shared'; UPDATE fencing.protected SET scope_name = 'a-shared (regress_sec_mallory)' WHERE relid IN ('public.m_shared'::regclass); ALTER EXTENSION fencing UPDATE; COMMIT;

SELECT extversion FROM pg_extension WHERE extname = 'fencing';
-- Mallory is no superuser; what her function wrote and set is gone
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_sec_mallory';
SELECT count(*) AS evil_log_rows FROM public.evil_log;
SHOW DateStyle;
-- every key kept its fence, each scope has its tables' owner, and Alice's
-- dates were read under the update's DateStyle: 02/01/2026 is 1 February
SET DateStyle = 'ISO, MDY';
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY 1, 2;
SELECT scope_name, owner FROM fencing.scope_storage ORDER BY 1;
SET DateStyle = 'SQL, MDY';
-- and the guard keeps them
BEGIN;
SET LOCAL fencing.token = '0:21';
UPDATE public.a_dates SET fence = fence WHERE day = '2026-02-01';
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '0:6';
SET LOCAL client_min_messages = error;
UPDATE public.m_shared SET fence = fence;
INSERT INTO public.m_shared VALUES (ROW('b', 's-1'), '0:6');
ROLLBACK;

-- 3. Idempotency keys and leases of 1.0 go to the extension's owner, not
-- to PUBLIC.  The README's recipe hands them to the application's role in
-- the transaction of the update, so that its retries never see a refusal.
\c regress_update_sec
SET ROLE regress_sec_dba;
SET client_min_messages = warning;
DROP EXTENSION fencing CASCADE;
CREATE EXTENSION fencing VERSION '1.0';
RESET client_min_messages;
SET ROLE regress_sec_app;
SELECT token AS paid FROM fencing.idem_begin('order:1', '{"pay": 1}') \gset
SELECT fencing.idem_complete('order:1', :'paid', '{"card": "4111-1111-1111-1111"}');
SELECT token AS running FROM fencing.idem_begin('order:2', '{"pay": 2}', lease => '1 hour') \gset
SELECT token AS misc FROM fencing.idem_begin('misc:1', '{"x": 1}') \gset
SELECT fencing.lease_acquire('orders-a', 'worker-1', '1 hour') AS lease_token \gset
-- under 1.0 every role may use every key (nothing says whose it is)
SET ROLE regress_sec_mallory;
SELECT state, result FROM fencing.idem_begin('order:1', '{"pay": 1}');
SET ROLE regress_sec_dba;

\set VERBOSITY terse
BEGIN;
ALTER EXTENSION fencing UPDATE;
UPDATE fencing.idempotency_keys SET owner = 'regress_sec_app' WHERE key LIKE 'order:%';
UPDATE fencing.leases SET owner = 'regress_sec_app' WHERE name LIKE 'orders%';
COMMIT;
\set VERBOSITY default
SELECT key, owner, state FROM fencing.idempotency_keys ORDER BY key;
SELECT name, owner FROM fencing.leases ORDER BY name;

-- another role sees neither the result nor the claim
SET ROLE regress_sec_mallory;
SELECT * FROM fencing.idem_begin('order:1', '{"pay": 1}');
SELECT * FROM fencing.idem_begin('order:2', '{"pay": 2}');
SELECT fencing.idem_complete('order:2', :'running', '{"stolen": true}');
\set VERBOSITY terse
SELECT fencing.lease_renew('orders-a', :'lease_token', '1 hour');
\set VERBOSITY default
-- the application goes on as if nothing happened
SET ROLE regress_sec_app;
SELECT state, result FROM fencing.idem_begin('order:1', '{"pay": 1}');
SELECT fencing.idem_complete('order:2', :'running', '{"card": "5500-0000-0000-0004"}');
SELECT fencing.lease_renew('orders-a', :'lease_token', '1 hour') AS renewed;
-- a key it was not given is the extension's owner's
SELECT * FROM fencing.idem_begin('misc:1', '{"x": 1}');
SET ROLE regress_sec_dba;

-- 4. A database that ran the update to 1.1 as released: its 1.0 keys
-- belong to PUBLIC (owner 0; the state is made by hand here, as that
-- script left it).  This library lets no role but the extension's owner
-- use them, and the update to 1.2 gives them to the extension's owner.
SET client_min_messages = warning;
DROP EXTENSION fencing CASCADE;
CREATE EXTENSION fencing VERSION '1.0';
RESET client_min_messages;
SET ROLE regress_sec_app;
SELECT token AS paid FROM fencing.idem_begin('order:1', '{"pay": 1}') \gset
SELECT fencing.idem_complete('order:1', :'paid', '{"card": "4111-1111-1111-1111"}');
SELECT token AS running FROM fencing.idem_begin('order:2', '{"pay": 2}', lease => '1 hour') \gset
SET ROLE regress_sec_dba;
SET client_min_messages = error;
ALTER EXTENSION fencing UPDATE TO '1.1';
RESET client_min_messages;
UPDATE fencing.idempotency_keys SET owner = 0;
SELECT key, owner FROM fencing.idempotency_keys ORDER BY key;
SET ROLE regress_sec_mallory;
SELECT * FROM fencing.idem_begin('order:1', '{"pay": 1}');
SELECT * FROM fencing.idem_begin('order:2', '{"pay": 2}');
SELECT fencing.idem_complete('order:2', :'running', '{"stolen": true}');
SET ROLE regress_sec_dba;
SELECT state, result FROM fencing.idem_begin('order:1', '{"pay": 1}');
\set VERBOSITY terse
ALTER EXTENSION fencing UPDATE TO '1.2';
\set VERBOSITY default
SELECT key, owner FROM fencing.idempotency_keys ORDER BY key;
SELECT col_description('fencing.idempotency_keys'::regclass, attnum)
  FROM pg_attribute WHERE attrelid = 'fencing.idempotency_keys'::regclass AND attname = 'owner';
BEGIN;
UPDATE fencing.idempotency_keys SET owner = 'regress_sec_app';
SET ROLE regress_sec_app;
SELECT fencing.idem_complete('order:2', :'running', '{"card": "5500-0000-0000-0004"}');
SELECT state, result FROM fencing.idem_begin('order:2', '{"pay": 2}');
COMMIT;

\c :regress_db
DROP DATABASE regress_update_sec WITH (FORCE);
DROP ROLE regress_sec_mallory;
DROP ROLE regress_sec_alice;
DROP ROLE regress_sec_app;
DROP ROLE regress_sec_dba;
