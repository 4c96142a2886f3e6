-- Row security hides keys too.  When policies of a protected table apply
-- to a role, fencing.scopes and SF001 DETAILs show it no key of the
-- table's scope and no fence of one, whatever it may SELECT; roles that
-- bypass row security (superusers, BYPASSRLS, the owner without FORCE
-- ROW LEVEL SECURITY) see them as before.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE ROLE fencing_srs_alice;
CREATE ROLE fencing_srs_bob;
CREATE ROLE fencing_srs_auditor BYPASSRLS;
CREATE SCHEMA srs AUTHORIZATION fencing_srs_alice;
GRANT USAGE ON SCHEMA srs TO fencing_srs_bob, fencing_srs_auditor;

SET ROLE fencing_srs_alice;
CREATE TABLE srs.ledger (tenant text, account int, amount int, fence fencing.fence);
SELECT fencing.protect('srs.ledger', key_columns => '{tenant,account}');
BEGIN;
SET LOCAL fencing.token = '0:5';
INSERT INTO srs.ledger VALUES ('t1', 1, 10), ('t2', 7, 20);
COMMIT;
ALTER TABLE srs.ledger ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_tenant ON srs.ledger USING (tenant = 't1');
GRANT SELECT, INSERT ON srs.ledger TO fencing_srs_bob, fencing_srs_auditor;
-- the owner bypasses its table's policies: it sees both keys
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'srs.ledger' ORDER BY key;
RESET ROLE;

-- bob may read the table, through a policy that shows tenant t1 only
SET ROLE fencing_srs_bob;
SELECT tenant, account FROM srs.ledger;
SELECT count(*) AS keys_shown FROM fencing.scopes WHERE scope_name = 'srs.ledger';
-- a stale probe of tenant t2's key learns nothing of it: the policy's
-- WITH CHECK answers first, whatever the key's fence
BEGIN;
SET LOCAL fencing.token = '0:1';
INSERT INTO srs.ledger VALUES ('t2', 7, 0);
ROLLBACK;
RESET ROLE;

-- a role with BYPASSRLS, and a superuser, see the keys
SET ROLE fencing_srs_auditor;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'srs.ledger' ORDER BY key;
RESET ROLE;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'srs.ledger' ORDER BY key;

-- FORCE ROW LEVEL SECURITY: the owner is under its policies too, and
-- sees no key of the scope it owns
ALTER TABLE srs.ledger FORCE ROW LEVEL SECURITY;
SET ROLE fencing_srs_alice;
SELECT count(*) AS keys_shown FROM fencing.scopes WHERE scope_name = 'srs.ledger';
BEGIN;
SET LOCAL fencing.token = '0:1';
INSERT INTO srs.ledger VALUES ('t1', 1, 0);
ROLLBACK;
RESET ROLE;

-- without row security, bob sees every key again
ALTER TABLE srs.ledger DISABLE ROW LEVEL SECURITY;
SET ROLE fencing_srs_bob;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'srs.ledger' ORDER BY key;
RESET ROLE;

DROP SCHEMA srs CASCADE;
SELECT fencing.reset_scope('srs.ledger');
DROP ROLE fencing_srs_alice, fencing_srs_bob, fencing_srs_auditor;
