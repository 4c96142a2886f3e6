--
-- ALTER EXTENSION fencing UPDATE to 1.4 re-checks what older rules let in:
-- a foreign key of a protected table whose ON UPDATE/ON DELETE action
-- another role starts by changing rows of its own.  Each is named in a
-- WARNING with its remedy, and the guard refuses such writes from then on.
--
\set SHOW_CONTEXT never
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_u14_alice;
CREATE ROLE regress_u14_mallory;
CREATE ROLE regress_u14_team;
-- alice acts as her team, but the team is not alice: its changes of its
-- own rows must not write alice's ledger either
GRANT regress_u14_team TO regress_u14_alice;
CREATE DATABASE regress_update_14;
\c regress_update_14
SET client_min_messages = warning;
CREATE EXTENSION fencing VERSION '1.3';
RESET client_min_messages;
GRANT CREATE ON SCHEMA public TO regress_u14_alice, regress_u14_mallory, regress_u14_team;

SET ROLE regress_u14_mallory;
CREATE TABLE currencies (code text PRIMARY KEY);
INSERT INTO currencies VALUES ('EUR'), ('USD');
GRANT REFERENCES ON currencies TO regress_u14_alice;
RESET ROLE;
SET ROLE regress_u14_team;
CREATE TABLE desks (desk text PRIMARY KEY);
INSERT INTO desks VALUES ('d1');
RESET ROLE;
SET ROLE regress_u14_alice;
CREATE TABLE fx (acct int, currency text REFERENCES currencies ON UPDATE CASCADE
                                         ON DELETE CASCADE,
                 desk text REFERENCES desks ON DELETE SET NULL,
                 cents int, fence fencing.fence);
CREATE TABLE own (code text PRIMARY KEY);
CREATE TABLE fx_own (acct int, code text REFERENCES own ON DELETE CASCADE, fence fencing.fence);
SET client_min_messages = error;
SELECT fencing.protect('fx', key_columns => '{acct}');
SELECT fencing.protect('fx_own', key_columns => '{acct}');
RESET client_min_messages;
BEGIN;
SET LOCAL fencing.token = '0:10';
INSERT INTO fx (acct, currency, desk, cents) VALUES (1, 'EUR', 'd1', 100);
COMMIT;
RESET ROLE;

-- the update names the foreign keys that follow mallory's and the team's
-- tables (not the one that follows alice's own)
ALTER EXTENSION fencing UPDATE TO '1.4';
SELECT extversion FROM pg_extension WHERE extname = 'fencing';

-- and from now on mallory's change of her own row cannot write the
-- ledger with her token
SET ROLE regress_u14_mallory;
SET fencing.token = '9223372036854775807:0';
\set VERBOSITY terse
DELETE FROM currencies WHERE code = 'EUR';
\set VERBOSITY default
RESET ROLE;
SET ROLE regress_u14_team;
SET fencing.token = '9223372036854775807:0';
\set VERBOSITY terse
DELETE FROM desks WHERE desk = 'd1';
\set VERBOSITY default
RESET ROLE;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.fx';

-- protect() says the same when it is called again
SET ROLE regress_u14_alice;
SELECT fencing.protect('fx', key_columns => '{acct}');
RESET ROLE;

\c :regress_db
DROP DATABASE regress_update_14;
DROP ROLE regress_u14_alice, regress_u14_mallory, regress_u14_team;
