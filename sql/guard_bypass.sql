-- guard_bypass: the superuser's break glass, and the guard's counters in
-- fencing.stats (this cluster preloads fencing).
SET search_path = public, fencing;

CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL,
                       fence fencing.fence);
INSERT INTO accounts VALUES ('acct-1', 100, '5'), ('acct-2', 100, '5');
SELECT fencing.protect('accounts');
CREATE TABLE ledger (account_id text NOT NULL, amount_cents bigint NOT NULL,
                     fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account_id}');
-- The tables are new: nothing is counted for them yet (no reset here, it
-- would zero the counters of every database; test/t/083_stats_reset.pl)
SELECT relid, accepted, rejected_stale, rejected_missing, bypassed
  FROM fencing.stats WHERE relid IN ('accounts'::regclass, 'ledger'::regclass)
 ORDER BY relid::text;

-- A known sequence of writes
UPDATE accounts SET balance_cents = 1, fence = '6' WHERE id = 'acct-1';  -- accepted
UPDATE accounts SET balance_cents = 1, fence = '7';                     -- 2 accepted
UPDATE accounts SET balance_cents = 2, fence = '3' WHERE id = 'acct-1';  -- stale
UPDATE accounts SET balance_cents = 2 WHERE id = 'acct-1';               -- missing
INSERT INTO accounts VALUES ('acct-3', 0);                              -- accepted
TRUNCATE accounts;                                                      -- missing
BEGIN;
SET LOCAL fencing.token = '8';
UPDATE accounts SET balance_cents = 0, fence = '9' WHERE id = 'acct-1'; -- missing (conflict)
ROLLBACK;
INSERT INTO ledger VALUES ('acct-1', 1, '5'), ('acct-2', 1, '5');       -- 2 accepted
INSERT INTO ledger VALUES ('acct-1', 1, '4');                           -- stale
INSERT INTO ledger VALUES ('acct-1', 1);                                -- missing
SELECT relid, accepted, rejected_stale, rejected_missing, bypassed
  FROM fencing.stats WHERE relid IN ('accounts'::regclass, 'ledger'::regclass)
 ORDER BY relid::text;

-- Break glass: a superuser lets writes through without a token ...
SET fencing.bypass = on;
-- (each one is logged; shown here by sending the log line to the client)
SET client_min_messages = log;
UPDATE accounts SET balance_cents = 1000 WHERE id = 'acct-1';
RESET client_min_messages;
DELETE FROM accounts WHERE id = 'acct-2';
INSERT INTO ledger VALUES ('acct-1', 1000);
-- ... or with a stale one, and the fence column keeps what was written
UPDATE accounts SET fence = '1' WHERE id = 'acct-3';
UPDATE accounts SET fence = '1' WHERE id = 'acct-1';
SELECT * FROM accounts ORDER BY id;
-- (bypassed writes do not touch the scopes)
INSERT INTO ledger VALUES ('acct-2', 1, '100');
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.ledger' ORDER BY key;
-- TRUNCATE stays refused: break glass is for rows, unprotect() for TRUNCATE
TRUNCATE ledger;
RESET fencing.bypass;
-- each bypassed write is counted
SELECT relid, accepted, rejected_stale, rejected_missing, bypassed
  FROM fencing.stats WHERE relid IN ('accounts'::regclass, 'ledger'::regclass)
 ORDER BY relid::text;
-- and the guard is back
UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-1';

-- SET LOCAL bypass ends with the transaction
BEGIN;
SET LOCAL fencing.bypass = on;
UPDATE accounts SET balance_cents = 5 WHERE id = 'acct-1';
COMMIT;
SHOW fencing.bypass;
UPDATE accounts SET balance_cents = 6 WHERE id = 'acct-1';

-- A non-superuser cannot set it, not even a table owner or a role that was
-- granted the table
CREATE ROLE regress_fencing_bypass_user;
ALTER TABLE accounts OWNER TO regress_fencing_bypass_user;
SET ROLE regress_fencing_bypass_user;
SET fencing.bypass = on;
BEGIN;
SET LOCAL fencing.bypass = on;
ROLLBACK;
SHOW fencing.bypass;
UPDATE accounts SET balance_cents = 7 WHERE id = 'acct-1';
RESET ROLE;
-- ... nor through a function's SET clause, which cannot carry it at all
-- (bypass is turned on by the session itself, SET or SET LOCAL)
CREATE FUNCTION sneaky() RETURNS void LANGUAGE sql
    SET fencing.bypass = on AS 'UPDATE accounts SET balance_cents = 8';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE accounts OWNER TO CURRENT_USER;

SELECT fencing.unprotect('accounts'), fencing.unprotect('ledger');
DROP TABLE accounts, ledger;
DROP ROLE regress_fencing_bypass_user;
-- scopes outlive their tables: the extension owner removes them on purpose
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage;
