--
-- ALTER EXTENSION fencing UPDATE to 1.3 re-checks what older rules let in:
-- a trigger whose code a revoked member still owns, a function whose SET
-- clause carries a token.  Each is named in a WARNING with its remedy, and
-- the guard fails closed on the trigger until it is fixed.
--
\set SHOW_CONTEXT never
SELECT current_database() AS regress_db \gset
CREATE ROLE regress_u13_alice;
CREATE ROLE regress_u13_trudy IN ROLE regress_u13_alice;
CREATE DATABASE regress_update_13;
\c regress_update_13
SET client_min_messages = warning;
CREATE EXTENSION fencing VERSION '1.2';
RESET client_min_messages;
GRANT CREATE ON SCHEMA public TO regress_u13_alice, regress_u13_trudy;

SET ROLE regress_u13_alice;
CREATE TABLE pay (id int PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO pay VALUES (1, 'new', '0:10');
SELECT fencing.protect('pay');
RESET ROLE;
-- trudy, a member then, adds a trigger with her own function
SET ROLE regress_u13_trudy;
CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER audit BEFORE UPDATE ON pay FOR EACH ROW EXECUTE FUNCTION audit();
RESET ROLE;
REVOKE regress_u13_alice FROM regress_u13_trudy;
-- a function whose SET clause carries a token (made before the library
-- refused such clauses; written here into the catalog as it was left)
CREATE FUNCTION pay_with_token() RETURNS void LANGUAGE sql AS $$ SELECT $$;
UPDATE pg_proc SET proconfig = '{fencing.token=0:99}'
 WHERE oid = 'pay_with_token()'::regprocedure;

ALTER EXTENSION fencing UPDATE TO '1.3';
SELECT extversion FROM pg_extension WHERE extname = 'fencing';

-- the guard fails closed until the trigger runs the owner's code
UPDATE pay SET state = 'paid', fence = '0:11' WHERE id = 1;
SELECT relid, guard_intact, problem FROM fencing.protected_tables;
ALTER FUNCTION audit() OWNER TO regress_u13_alice;
UPDATE pay SET state = 'paid', fence = '0:11' WHERE id = 1;
SELECT relid, guard_intact, problem FROM fencing.protected_tables;
-- the function's SET clause is refused inside a writing statement
ALTER TABLE pay ADD COLUMN note text;
UPDATE pay SET note = (SELECT 'x' FROM pay_with_token()), fence = '0:12' WHERE id = 1;

\c :regress_db
DROP DATABASE regress_update_13;
DROP ROLE regress_u13_alice, regress_u13_trudy;
