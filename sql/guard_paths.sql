-- guard_paths: every write path of a protected table goes through the guard.
SET search_path = public, fencing;

-- The SQLSTATE a statement fails with ('ok' when it does not fail)
CREATE FUNCTION pg_temp.sqlstate_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

CREATE TABLE accounts (id text PRIMARY KEY, balance_cents bigint NOT NULL,
                       fence fencing.fence);
INSERT INTO accounts VALUES ('acct-1', 100, '5'), ('acct-2', 200, '5');
SELECT fencing.protect('accounts');
CREATE TABLE ledger (id serial PRIMARY KEY, account_id text NOT NULL,
                     amount_cents bigint NOT NULL, fence fencing.fence);
SELECT fencing.protect('ledger', key_columns => '{account_id}');
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', 1, '5');

-- COPY FROM: each row is checked (key scope: a token is needed)
COPY ledger (account_id, amount_cents) FROM stdin;
acct-1	10
\.
COPY ledger (account_id, amount_cents, fence) FROM stdin;
acct-1	10	4
\.
COPY ledger (account_id, amount_cents, fence) FROM stdin;
acct-1	10	6
acct-1	11	6
acct-2	12	1
\.
BEGIN;
SET LOCAL fencing.token = '7';
COPY ledger (account_id, amount_cents) FROM stdin;
acct-1	20
acct-2	21
\.
COMMIT;
SELECT account_id, amount_cents, fence FROM ledger ORDER BY id;

-- INSERT ... ON CONFLICT DO UPDATE: the insert arm ...
INSERT INTO accounts VALUES ('acct-3', 0, '1')
ON CONFLICT (id) DO UPDATE SET balance_cents = EXCLUDED.balance_cents;
-- ... and the update arm, with no token, a stale one, a new one
INSERT INTO accounts VALUES ('acct-1', 0)
ON CONFLICT (id) DO UPDATE SET balance_cents = EXCLUDED.balance_cents;
INSERT INTO accounts VALUES ('acct-1', 0, '4')
ON CONFLICT (id) DO UPDATE SET balance_cents = EXCLUDED.balance_cents, fence = EXCLUDED.fence;
INSERT INTO accounts VALUES ('acct-1', 0, '6')
ON CONFLICT (id) DO UPDATE SET balance_cents = EXCLUDED.balance_cents, fence = EXCLUDED.fence;
BEGIN;
SET LOCAL fencing.token = '5';
INSERT INTO accounts VALUES ('acct-2', 0)
ON CONFLICT (id) DO UPDATE SET balance_cents = EXCLUDED.balance_cents;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '7';
INSERT INTO accounts VALUES ('acct-2', 0)
ON CONFLICT (id) DO UPDATE SET balance_cents = EXCLUDED.balance_cents;
COMMIT;
SELECT * FROM accounts ORDER BY id;
-- in key scope the insert arm needs a token too
INSERT INTO ledger (id, account_id, amount_cents) VALUES (1000, 'acct-1', 0)
ON CONFLICT (id) DO NOTHING;

-- MERGE: the update, delete and insert actions
CREATE TABLE changes (id text, delta bigint, fence fencing.fence);
INSERT INTO changes VALUES ('acct-1', 1, '8'), ('acct-4', 4, '8');
MERGE INTO accounts a USING changes c ON a.id = c.id
WHEN MATCHED THEN UPDATE SET balance_cents = balance_cents + c.delta
WHEN NOT MATCHED THEN INSERT VALUES (c.id, c.delta, c.fence);
MERGE INTO accounts a USING changes c ON a.id = c.id
WHEN MATCHED THEN UPDATE SET balance_cents = balance_cents + c.delta, fence = '2'
WHEN NOT MATCHED THEN INSERT VALUES (c.id, c.delta, c.fence);
MERGE INTO accounts a USING changes c ON a.id = c.id
WHEN MATCHED THEN DELETE;
MERGE INTO accounts a USING changes c ON a.id = c.id
WHEN MATCHED THEN UPDATE SET balance_cents = balance_cents + c.delta, fence = c.fence
WHEN NOT MATCHED THEN INSERT VALUES (c.id, c.delta, c.fence);
SELECT * FROM accounts ORDER BY id;
MERGE INTO ledger l USING changes c ON false
WHEN NOT MATCHED THEN INSERT (account_id, amount_cents, fence) VALUES (c.id, c.delta, '1');

-- A PL/pgSQL function writing (SECURITY DEFINER or not, the guard runs)
CREATE FUNCTION debit(acct text, cents bigint, token fencing.fence) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE accounts SET balance_cents = balance_cents - cents, fence = token
     WHERE id = acct;
END $$;
SELECT debit('acct-1', 1, '3');
SELECT debit('acct-1', 1, '9');
CREATE FUNCTION debit_untokened(acct text) RETURNS void
LANGUAGE sql SECURITY DEFINER AS $$
    UPDATE accounts SET balance_cents = 0 WHERE id = acct;
$$;
SELECT debit_untokened('acct-1');

-- Another table's trigger writing into a protected table
CREATE TABLE orders (id int, account_id text, cents bigint);
CREATE FUNCTION book_order() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO ledger (account_id, amount_cents) VALUES (NEW.account_id, -NEW.cents);
    RETURN NEW;
END $$;
CREATE TRIGGER book AFTER INSERT ON orders FOR EACH ROW EXECUTE FUNCTION book_order();
INSERT INTO orders VALUES (1, 'acct-1', 5);
BEGIN;
SET LOCAL fencing.token = '6';
INSERT INTO orders VALUES (1, 'acct-1', 5);
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '9';
INSERT INTO orders VALUES (1, 'acct-1', 5);
COMMIT;
SELECT account_id, amount_cents, fence FROM ledger WHERE amount_cents = -5;

-- FK cascades into a protected child need the token
CREATE TABLE owners (id text PRIMARY KEY);
CREATE TABLE cards (id int PRIMARY KEY,
                    owner_id text REFERENCES owners ON DELETE CASCADE ON UPDATE CASCADE,
                    fence fencing.fence);
INSERT INTO owners VALUES ('ann'), ('bob');
INSERT INTO cards VALUES (1, 'ann', '3'), (2, 'bob', '3');
SELECT fencing.protect('cards');
DELETE FROM owners WHERE id = 'ann';
UPDATE owners SET id = 'robert' WHERE id = 'bob';
BEGIN;
SET LOCAL fencing.token = '3';
UPDATE owners SET id = 'robert' WHERE id = 'bob';
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '4';
DELETE FROM owners WHERE id = 'ann';
UPDATE owners SET id = 'robert' WHERE id = 'bob';
COMMIT;
SELECT * FROM cards;

-- Savepoints: a rolled-back write leaves no trace, the retry is checked
BEGIN;
SET LOCAL fencing.token = '10';
SAVEPOINT s1;
UPDATE accounts SET balance_cents = 1 WHERE id = 'acct-1';
ROLLBACK TO s1;
-- still accepted (the token is newer than the committed fence)
UPDATE accounts SET balance_cents = 2 WHERE id = 'acct-1';
SAVEPOINT s2;
-- (the row now carries 10, written by this transaction: that is a token too,
-- so a different setting conflicts with it)
SET LOCAL fencing.token = '1';
UPDATE accounts SET balance_cents = 3 WHERE id = 'acct-1';
ROLLBACK TO s2;
UPDATE accounts SET balance_cents = 4 WHERE id = 'acct-1';
COMMIT;
SELECT * FROM accounts WHERE id = 'acct-1';
-- in key scope: a savepoint rolled back releases nothing it should keep
BEGIN;
SET LOCAL fencing.token = '10';
SAVEPOINT s1;
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', 100);
ROLLBACK TO s1;
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', 101);
SAVEPOINT s2;
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('acct-1', 102, '10');
RELEASE s2;
COMMIT;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.ledger' ORDER BY key;
BEGIN;
SET LOCAL fencing.token = '10';
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', 103);
ROLLBACK;

-- Writable CTEs
WITH moved AS (UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-1' RETURNING *)
SELECT count(*) FROM moved;
WITH booked AS (INSERT INTO ledger (account_id, amount_cents, fence)
                VALUES ('acct-1', 7, '9') RETURNING *)
SELECT count(*) FROM booked;
WITH gone AS (DELETE FROM accounts WHERE id = 'acct-2' RETURNING *)
SELECT count(*) FROM gone;
BEGIN;
SET LOCAL fencing.token = '11';
WITH moved AS (UPDATE accounts SET balance_cents = 50 WHERE id = 'acct-1' RETURNING *),
     booked AS (INSERT INTO ledger (account_id, amount_cents)
                SELECT id, 50 FROM moved RETURNING *)
SELECT (SELECT count(*) FROM moved) AS moved, (SELECT count(*) FROM booked) AS booked;
COMMIT;

-- session_replication_role = replica does not switch the guard off
SET session_replication_role = replica;
UPDATE accounts SET balance_cents = 0 WHERE id = 'acct-1';
UPDATE accounts SET balance_cents = 0, fence = '1' WHERE id = 'acct-1';
INSERT INTO ledger (account_id, amount_cents) VALUES ('acct-1', 1);
RESET session_replication_role;

-- TRUNCATE is refused, always
TRUNCATE accounts;
TRUNCATE ledger;
TRUNCATE accounts, ledger;
BEGIN;
SET LOCAL fencing.token = '99';
TRUNCATE accounts;
ROLLBACK;
SELECT pg_temp.sqlstate_of('TRUNCATE accounts') AS truncate;
-- TRUNCATE of an unprotected table still works
TRUNCATE changes;

-- Partitioned tables: protect() covers partitions made before and after
CREATE TABLE wallets (id int, region text, cents bigint, fence fencing.fence)
    PARTITION BY LIST (region);
CREATE TABLE wallets_eu PARTITION OF wallets FOR VALUES IN ('eu');
INSERT INTO wallets VALUES (1, 'eu', 10, '5'), (2, 'eu', 20, '5');
SELECT fencing.protect('wallets');
CREATE TABLE wallets_us PARTITION OF wallets FOR VALUES IN ('us');
-- a partition attached later, with its columns in another order
CREATE TABLE wallets_ap (fence fencing.fence, cents bigint, region text, id int);
INSERT INTO wallets_ap VALUES ('5', 30, 'ap', 3);
ALTER TABLE wallets ATTACH PARTITION wallets_ap FOR VALUES IN ('ap');
SELECT tgrelid::regclass, tgname, tgenabled
  FROM pg_catalog.pg_trigger
 WHERE tgrelid IN (SELECT relid FROM pg_catalog.pg_partition_tree('wallets'))
   AND tgname LIKE 'zz_fencing%'
 ORDER BY 1, 2;
INSERT INTO wallets VALUES (4, 'us', 40, '5');
UPDATE wallets SET cents = 0 WHERE id = 1;
UPDATE wallets SET cents = 0, fence = '4' WHERE id = 1;
UPDATE wallets SET cents = 0 WHERE id = 4;
UPDATE wallets SET cents = 0, fence = '4' WHERE id = 3;
UPDATE wallets_ap SET cents = 0, fence = '4' WHERE id = 3;
UPDATE wallets_ap SET cents = 31, fence = '6' WHERE id = 3;
BEGIN;
SET LOCAL fencing.token = '4';
DELETE FROM wallets WHERE id = 4;
ROLLBACK;
-- the replica role does not switch off a partition's guard either
SET session_replication_role = replica;
UPDATE wallets SET cents = 0 WHERE id = 4;
RESET session_replication_role;
-- TRUNCATE of the table or of a partition is refused
TRUNCATE wallets;
TRUNCATE wallets_eu;
-- and of a partition created or attached after protect(): the DDL guard
-- gave it the truncate trigger
TRUNCATE wallets_us;
TRUNCATE wallets_ap;
-- a row moving to another partition is one write, checked as an UPDATE
UPDATE wallets SET region = 'us' WHERE id = 1;
UPDATE wallets SET region = 'us', fence = '5' WHERE id = 1;
UPDATE wallets SET region = 'us', fence = '4' WHERE id = 2;
UPDATE wallets SET region = 'us', fence = '6' WHERE id = 1;
BEGIN;
SET LOCAL fencing.token = '7';
UPDATE wallets SET region = 'ap' WHERE id = 2;
COMMIT;
SELECT tableoid::regclass, * FROM wallets ORDER BY id;
-- moving back needs a newer token again
UPDATE wallets SET region = 'eu', fence = '7' WHERE id = 2;
UPDATE wallets SET region = 'eu', fence = '8' WHERE id = 2;
SELECT tableoid::regclass, * FROM wallets ORDER BY id;
-- a protected tree is protected once
SELECT fencing.protect('wallets_eu');

-- An accepted UPDATE of a partition that then fails must not leave anything
-- behind that lets a later write through unchecked
ALTER TABLE wallets ADD CONSTRAINT cents_small CHECK (cents < 1000);
UPDATE wallets SET cents = 5000, fence = '9' WHERE id = 2;
DELETE FROM wallets WHERE id = 2;
BEGIN;
UPDATE wallets SET cents = 5000, fence = '9' WHERE id = 2;
ROLLBACK;
DELETE FROM wallets WHERE id = 2;
BEGIN;
SAVEPOINT s;
UPDATE wallets SET cents = 5000, fence = '9' WHERE id = 2;
ROLLBACK TO s;
DELETE FROM wallets WHERE id = 2;
ROLLBACK;
DO $$
BEGIN
    BEGIN
        UPDATE wallets SET cents = 5000, fence = '9' WHERE id = 2;
    EXCEPTION WHEN check_violation THEN
        RAISE NOTICE 'update failed';
    END;
    DELETE FROM wallets WHERE id = 2;
END $$;
SELECT tableoid::regclass, * FROM wallets WHERE id = 2;

-- A user trigger on a partition that runs SQL does not break a move
CREATE TABLE wallet_audit (what text);
CREATE FUNCTION audit_wallet() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO wallet_audit VALUES (TG_OP || ' ' || TG_TABLE_NAME);
    RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
END $$;
CREATE TRIGGER audit BEFORE INSERT OR UPDATE OR DELETE ON wallets
    FOR EACH ROW EXECUTE FUNCTION audit_wallet();
UPDATE wallets SET region = 'us', fence = '9' WHERE id = 2;
BEGIN;
SET LOCAL fencing.token = '10';
UPDATE wallets SET region = 'ap' WHERE id = 2;
COMMIT;
SELECT * FROM wallet_audit;
SELECT tableoid::regclass, * FROM wallets WHERE id = 2;
-- and a stale move is still refused
UPDATE wallets SET region = 'eu', fence = '9' WHERE id = 2;
DROP TRIGGER audit ON wallets;

-- Partitioned table in key scope: a move between partitions that also
-- changes the key must beat both keys' fences
CREATE TABLE entries (account_id text, region text, cents bigint, fence fencing.fence)
    PARTITION BY LIST (region);
CREATE TABLE entries_eu PARTITION OF entries FOR VALUES IN ('eu');
SELECT fencing.protect('entries', key_columns => '{account_id}');
CREATE TABLE entries_us PARTITION OF entries FOR VALUES IN ('us');
INSERT INTO entries VALUES ('a', 'eu', 1, '5'), ('b', 'us', 1, '9');
INSERT INTO entries VALUES ('a', 'us', 1, '4');
UPDATE entries SET region = 'us', fence = '6' WHERE account_id = 'a';
UPDATE entries SET region = 'us', account_id = 'b', fence = '8' WHERE account_id = 'a';
UPDATE entries SET region = 'us', account_id = 'b', fence = '10' WHERE account_id = 'a';
SELECT tableoid::regclass, * FROM entries ORDER BY account_id, fence;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.entries' ORDER BY key;
-- DELETE is checked against the old row's key
BEGIN;
SET LOCAL fencing.token = '9';
DELETE FROM entries WHERE account_id = 'b';
ROLLBACK;

-- A user BEFORE trigger that changes the key or the fence column: the guard
-- fires last (zz_fencing_guard) and checks the final row
CREATE FUNCTION reroute() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.account_id = 'a' THEN
        NEW.account_id := 'b';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER a_reroute BEFORE INSERT OR UPDATE ON ledger
    FOR EACH ROW EXECUTE FUNCTION reroute();
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('b', 1, '20');
-- 'a' is new, but the row lands in 'b', whose fence is 20
INSERT INTO ledger (account_id, amount_cents, fence) VALUES ('a', 1, '15');
SELECT key, fence FROM fencing.scopes
 WHERE scope_name = 'public.ledger' AND key IN ('["a"]', '["b"]') ORDER BY key;
CREATE FUNCTION stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.fence := '1';
    RETURN NEW;
END $$;
CREATE TRIGGER a_stamp BEFORE UPDATE ON accounts
    FOR EACH ROW EXECUTE FUNCTION stamp();
-- the trigger overwrites the good token with a stale one: refused
UPDATE accounts SET balance_cents = 7, fence = '100' WHERE id = 'acct-1';
DROP TRIGGER a_stamp ON accounts;
SELECT tgname FROM pg_catalog.pg_trigger
 WHERE tgrelid = 'ledger'::regclass AND NOT tgisinternal ORDER BY tgname;

SELECT fencing.unprotect(relid) FROM fencing.protected ORDER BY relid::text;
DROP TABLE accounts, ledger, changes, orders, owners, cards, wallets, wallet_audit, entries;
DROP FUNCTION debit, debit_untokened, book_order, audit_wallet, reroute, stamp;
-- scopes outlive their tables: the extension owner removes them on purpose
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage;
