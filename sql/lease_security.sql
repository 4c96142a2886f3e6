-- Leases have owners (the role that first acquired the name): another
-- role's lease cannot be renewed, released, taken over or checked, and its
-- token cannot be read, by any path: the functions, fencing.leases,
-- fencing.lease_status (and a leaky function over it), error messages, a
-- protected table's guard.
\set SHOW_CONTEXT never
SET search_path = public, fencing;
DELETE FROM fencing.leases WHERE name LIKE 'sec-%';

-- SQLSTATE, message and DETAIL of a statement, or ok (times masked)
CREATE FUNCTION pg_temp.outcome(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    det text;
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RETURN regexp_replace(regexp_replace(SQLSTATE || ': ' || msg || E'\n' || det,
                          '(until|at) \d[^,]*\.$', '\1 <time>.'),
                          'OID \d+', 'OID <n>');
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.outcome(text) TO PUBLIC;
-- a message with the lease's current token shown as <current>, any other
-- token as E:C (epochs follow the clock)
CREATE FUNCTION pg_temp.masked(t text, current_token text) RETURNS text LANGUAGE sql AS $$
    SELECT regexp_replace(replace(t, current_token, '<current>'), '\d+:\d+', 'E:C', 'g')
$$;

CREATE ROLE regress_lease_owner;
CREATE ROLE regress_lease_attacker;
CREATE ROLE regress_lease_member IN ROLE regress_lease_owner;
CREATE ROLE regress_lease_temp;

-- The owner takes two leases: they are its own from now on
SET ROLE regress_lease_owner;
SELECT lease_acquire('sec-orders', 'worker-a', '1 hour') AS t1 \gset
SELECT lease_acquire('sec-short', 'worker-a', '50 milliseconds') AS s1 \gset
RESET ROLE;
SELECT name, owner FROM fencing.leases WHERE name LIKE 'sec-%' ORDER BY name;

-- The attacker, an ordinary role, knows the name and even the token (say
-- from a log line).  Every lease function refuses it with 42501, before
-- anything about the lease is looked at: the answer tells it nothing.
SET ROLE regress_lease_attacker;
SELECT pg_temp.outcome(format('SELECT fencing.lease_renew(%L, %L, %L)', 'sec-orders', :'t1', '1 hour'));
SELECT pg_temp.outcome(format('SELECT fencing.lease_release(%L, %L)', 'sec-orders', :'t1'));
SELECT pg_temp.outcome(format('SELECT fencing.lease_check(%L, %L)', 'sec-orders', :'t1'));
SELECT pg_temp.outcome(format('SELECT fencing.lease_check(%L, %L)', 'sec-orders', '0:1'));
SELECT pg_temp.outcome(format('SELECT fencing.lease_renew(%L, NULL, %L)', 'sec-orders', '1 hour'));
SELECT pg_temp.outcome($$SELECT fencing.lease_acquire('sec-orders', 'evil', '1 hour')$$);
-- ... also once the lease ran out: no takeover
SELECT pg_sleep(0.1);
SELECT pg_temp.outcome($$SELECT fencing.lease_acquire('sec-short', 'evil', '1 hour')$$);
-- the table: not readable, not writable
SELECT pg_temp.outcome($$SELECT token FROM fencing.leases$$);
SELECT pg_temp.outcome($$UPDATE fencing.leases SET owner = 'regress_lease_attacker'$$);
SELECT pg_temp.outcome($$UPDATE fencing.leases SET expires_at = now()$$);
SELECT pg_temp.outcome($$DELETE FROM fencing.leases$$);
SELECT pg_temp.outcome($$INSERT INTO fencing.leases (name, holder, owner) VALUES ('sec-new', 'evil', 'regress_lease_attacker')$$);
-- fencing.lease_status: everything but the holder and the token
SELECT name, holder, token, live, remaining IS NOT NULL AS has_remaining
  FROM fencing.lease_status WHERE name LIKE 'sec-%' ORDER BY name;
-- a leaky function in the WHERE clause sees the masked column only
CREATE FUNCTION pg_temp.leak(t fencing.fence) RETURNS boolean
    LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
    RAISE NOTICE 'leaked: %', coalesce(t::text, 'nothing');
    RETURN true;
END $$;
SELECT name FROM fencing.lease_status WHERE pg_temp.leak(token) AND name = 'sec-orders';
RESET ROLE;

-- Nothing changed
SELECT name, holder, token = :'t1' AS same_token, expires_at > now() AS live
  FROM fencing.leases WHERE name = 'sec-orders';
SET ROLE regress_lease_owner;
SELECT lease_check('sec-orders', :'t1') AS owner_still_holds;
RESET ROLE;

-- A member of the owner role acts for it, and sees its tokens
SET ROLE regress_lease_member;
SELECT token = :'t1' AS member_sees_token FROM fencing.lease_status WHERE name = 'sec-orders';
SELECT lease_renew('sec-orders', :'t1', '2 hours') AS member_renews;
RESET ROLE;
-- and so does a superuser
SELECT token = :'t1' AS superuser_sees_token FROM fencing.lease_status WHERE name = 'sec-orders';

-- The caller is the current user: a SECURITY DEFINER function of the owner
-- (its decision) lets others renew through it, and only through it
CREATE SCHEMA sec_owner AUTHORIZATION regress_lease_owner;
GRANT USAGE ON SCHEMA sec_owner TO regress_lease_attacker;
SET ROLE regress_lease_owner;
CREATE FUNCTION sec_owner.renew_orders(t fencing.fence) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
    AS $$ SELECT fencing.lease_renew('sec-orders', t, '1 hour') $$;
REVOKE ALL ON FUNCTION sec_owner.renew_orders(fencing.fence) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION sec_owner.renew_orders(fencing.fence) TO regress_lease_attacker;
RESET ROLE;
SET ROLE regress_lease_attacker;
SELECT sec_owner.renew_orders(:'t1') AS renewed_through_definer;
-- a SECURITY DEFINER function of the attacker's own runs as the attacker
CREATE FUNCTION pg_temp.my_renew(t fencing.fence) RETURNS boolean
    LANGUAGE sql SECURITY DEFINER AS $$ SELECT fencing.lease_renew('sec-orders', t, '1 hour') $$;
SELECT pg_temp.outcome(format('SELECT pg_temp.my_renew(%L)', :'t1'));
RESET ROLE;
DROP SCHEMA sec_owner CASCADE;

-- The guard's messages do not show the lease's token to roles that may
-- write the table but do not own the lease
CREATE TABLE sec_jobs (id int PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO sec_jobs VALUES (1, 'new', NULL);
SELECT protect('sec_jobs', lease => 'sec-orders');
GRANT SELECT, UPDATE ON sec_jobs TO regress_lease_attacker;
SET ROLE regress_lease_attacker;
SELECT pg_temp.masked(pg_temp.outcome($$UPDATE sec_jobs SET state = 'evil', fence = '0:1' WHERE id = 1$$),
                      :'t1') AS attacker_sees;
RESET ROLE;
SET ROLE regress_lease_owner;
SELECT lease_acquire('sec-orders', 'worker-a', '1 hour') AS t2 \gset
RESET ROLE;
SET ROLE regress_lease_attacker;
SELECT pg_temp.masked(pg_temp.outcome(format('UPDATE sec_jobs SET state = %L, fence = %L WHERE id = 1', 'evil', :'t1')),
                      :'t2') AS attacker_sees;
RESET ROLE;
-- the owner's role is told the current token
GRANT SELECT, UPDATE ON sec_jobs TO regress_lease_owner;
SET ROLE regress_lease_owner;
SELECT pg_temp.masked(pg_temp.outcome(format('UPDATE sec_jobs SET state = %L, fence = %L WHERE id = 1', 'late', :'t1')),
                      :'t2') AS owner_sees;
RESET ROLE;
SELECT id, state FROM sec_jobs;

-- A table follows only the leases of roles its owner acts for.  Else an
-- attacker could protect a table of its own with the owner's lease and
-- learn, from which of its writes are accepted, the lease's current token.
CREATE SCHEMA sec_attacker AUTHORIZATION regress_lease_attacker;
SET ROLE regress_lease_attacker;
CREATE TABLE sec_attacker.probe (id int PRIMARY KEY, fence fencing.fence);
INSERT INTO sec_attacker.probe VALUES (1, NULL);
SELECT pg_temp.outcome($$SELECT fencing.protect('sec_attacker.probe', lease => 'sec-orders')$$);
-- a lease not acquired yet may be named, and is refused once it is
SELECT fencing.protect('sec_attacker.probe', lease => 'sec-later');
RESET ROLE;
SET ROLE regress_lease_owner;
SELECT lease_acquire('sec-later', 'worker-a', '1 hour') AS t3 \gset
RESET ROLE;
SET ROLE regress_lease_attacker;
-- the right token and a wrong one get the same answer, which names no token
SELECT pg_temp.outcome(format('UPDATE sec_attacker.probe SET fence = %L WHERE id = 1', :'t3')) AS right_token;
SELECT pg_temp.outcome($$UPDATE sec_attacker.probe SET fence = '0:1' WHERE id = 1$$) AS wrong_token;
SELECT fencing.unprotect('sec_attacker.probe');
RESET ROLE;
DROP SCHEMA sec_attacker CASCADE;

-- Squatting: a name belongs to whoever acquired it first.  The attacker
-- takes a name the application will want; the application gets 42501 with
-- the remedy, and the extension's owner hands the name over.
SET ROLE regress_lease_attacker;
SELECT lease_acquire('sec-payments', 'evil', '1 hour') IS NOT NULL AS squatted;
RESET ROLE;
SET ROLE regress_lease_owner;
SELECT pg_temp.outcome($$SELECT fencing.lease_acquire('sec-payments', 'worker-a', '1 hour')$$);
RESET ROLE;
UPDATE fencing.leases SET owner = 'regress_lease_owner', expires_at = clock_timestamp()
 WHERE name = 'sec-payments';
SET ROLE regress_lease_owner;
SELECT counter(lease_acquire('sec-payments', 'worker-a', '1 hour')) AS handed_over;
RESET ROLE;
SET ROLE regress_lease_attacker;
SELECT pg_temp.outcome($$SELECT fencing.lease_acquire('sec-payments', 'evil', '1 hour')$$);
RESET ROLE;

-- A lease whose owner role was dropped: only superusers act for it, and
-- fencing.lease_status still works for everyone
SET ROLE regress_lease_temp;
SELECT lease_acquire('sec-orphan', 'temp', '1 hour') IS NOT NULL AS acquired;
RESET ROLE;
DROP ROLE regress_lease_temp;
SET ROLE regress_lease_attacker;
SELECT name, token, live FROM fencing.lease_status WHERE name = 'sec-orphan';
SELECT pg_temp.outcome($$SELECT fencing.lease_acquire('sec-orphan', 'evil', '1 hour')$$);
RESET ROLE;
SELECT lease_acquire('sec-orphan', 'temp', '1 hour') IS NOT NULL AS superuser_acts;

-- The functions are SECURITY INVOKER C functions now, without a SET clause
SELECT p.proname, l.lanname, p.prosecdef, p.proconfig
  FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
 WHERE p.pronamespace = 'fencing'::regnamespace
   AND p.proname IN ('lease_acquire', 'lease_renew', 'lease_release', 'lease_check')
 ORDER BY p.proname;

DROP TABLE sec_jobs;
DELETE FROM fencing.leases WHERE name LIKE 'sec-%';
DROP ROLE regress_lease_member;
DROP OWNED BY regress_lease_attacker;
DROP ROLE regress_lease_attacker;
DROP OWNED BY regress_lease_owner;
DROP ROLE regress_lease_owner;
