-- Code the owner accepted stays the owner's.  A trigger's function must
-- belong to a superuser or a member of the table's owner when the write
-- happens, not only when the trigger was created: after a REVOKE of
-- membership, ALTER TABLE ... OWNER TO or REASSIGN OWNED, a write through
-- a trigger whose code no longer qualifies fails with SF005 naming the
-- trigger and the function's owner, and fencing.protected_tables says so.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE ROLE fencing_tcl_alice;
CREATE ROLE fencing_tcl_trudy IN ROLE fencing_tcl_alice;
CREATE ROLE fencing_tcl_carol;
CREATE ROLE fencing_tcl_bob;
CREATE SCHEMA tcl AUTHORIZATION fencing_tcl_alice;
GRANT USAGE, CREATE ON SCHEMA tcl TO fencing_tcl_trudy;
GRANT USAGE ON SCHEMA tcl TO fencing_tcl_bob;

SET ROLE fencing_tcl_alice;
CREATE TABLE tcl.pay (id int PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO tcl.pay VALUES (1, 'new', '0:10');
SELECT fencing.protect('tcl.pay');
GRANT SELECT, UPDATE ON tcl.pay TO fencing_tcl_bob;
RESET ROLE;

-- trudy, a member of alice, adds a trigger with her own function: allowed
SET ROLE fencing_tcl_trudy;
CREATE FUNCTION tcl.audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEW;
END $$;
CREATE TRIGGER audit BEFORE UPDATE ON tcl.pay FOR EACH ROW EXECUTE FUNCTION tcl.audit();
RESET ROLE;
SET ROLE fencing_tcl_bob;
UPDATE tcl.pay SET state = 'paid', fence = '0:11' WHERE id = 1;
RESET ROLE;

-- alice revokes the membership; trudy's function now gives every write
-- the next token
REVOKE fencing_tcl_alice FROM fencing_tcl_trudy;
SET ROLE fencing_tcl_trudy;
CREATE OR REPLACE FUNCTION tcl.audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fence := fencing.next(OLD.fence);
    RETURN NEW;
END $$;
RESET ROLE;
-- bob's stale and tokenless writes fail closed
SET ROLE fencing_tcl_bob;
UPDATE tcl.pay SET state = 'stale', fence = '0:5' WHERE id = 1;
UPDATE tcl.pay SET state = 'tokenless' WHERE id = 1;
RESET ROLE;
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'tcl.pay'::regclass;
SELECT id, state, fence FROM tcl.pay;

-- the remedy the HINT names: the function goes to the table's owner,
-- who puts its code right
REASSIGN OWNED BY fencing_tcl_trudy TO fencing_tcl_alice;
SET ROLE fencing_tcl_alice;
CREATE OR REPLACE FUNCTION tcl.audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEW;
END $$;
SET ROLE fencing_tcl_bob;
UPDATE tcl.pay SET state = 'stale', fence = '0:5' WHERE id = 1;
RESET ROLE;
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'tcl.pay'::regclass;

-- the table changes owner: alice's trigger code is no longer the owner's
ALTER TABLE tcl.pay OWNER TO fencing_tcl_carol;
SET ROLE fencing_tcl_bob;
UPDATE tcl.pay SET state = 'stale', fence = '0:5' WHERE id = 1;
RESET ROLE;
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'tcl.pay'::regclass;
ALTER FUNCTION tcl.audit() OWNER TO fencing_tcl_carol;
SET ROLE fencing_tcl_bob;
UPDATE tcl.pay SET state = 'paid again', fence = '0:12' WHERE id = 1;
RESET ROLE;
SELECT id, state, fence FROM tcl.pay;
SELECT relid, guard_intact, problem FROM fencing.protected_tables WHERE relid = 'tcl.pay'::regclass;

DROP SCHEMA tcl CASCADE;
DROP ROLE fencing_tcl_alice, fencing_tcl_trudy, fencing_tcl_carol, fencing_tcl_bob;
