-- guard_bulk: COPY in key scope, the way to load in bulk with one token.
-- Every row is checked: a stale token for any one key refuses the whole
-- COPY and leaves nothing of it; the fence column holds the token; the
-- scope's fences advance.  Also what the per-statement caches of the
-- guard must not get wrong: many keys (more than the first size of the
-- cache in front of the scope cache), a rolled-back savepoint, two
-- protected tables written by one statement.
SET search_path = public, fencing;

CREATE TABLE bulk_ledger (id bigserial PRIMARY KEY, account int NOT NULL,
                          amount int NOT NULL, fence fencing.fence);
SELECT fencing.protect('bulk_ledger', key_columns => '{account}');
SELECT current_setting('data_directory') || '/fencing_guard_bulk.csv' AS copy_file
\gset

-- 3,000 accounts at 5:1
COPY (SELECT 1 + g % 3000, 1, '5:1' FROM generate_series(1, 9000) g) TO :'copy_file' (FORMAT csv);
COPY bulk_ledger (account, amount, fence) FROM :'copy_file' (FORMAT csv);
SELECT count(*), count(DISTINCT account), min(fence), max(fence) FROM bulk_ledger;
SELECT count(*) AS keys, min(fence), max(fence) FROM fencing.scopes WHERE scope_name = 'public.bulk_ledger';

-- account 2500 moves on to 6:1 ...
SET fencing.token = '6:1';
INSERT INTO bulk_ledger (account, amount) VALUES (2500, 1);
RESET fencing.token;
-- ... so a COPY with 5:2 for every account is refused, as late as its
-- 7,500th row, and leaves nothing: no row, no fence advanced
COPY (SELECT 1 + g % 3000, 2, '5:2' FROM generate_series(1, 9000) g) TO :'copy_file' (FORMAT csv);
COPY bulk_ledger (account, amount, fence) FROM :'copy_file' (FORMAT csv);
SELECT count(*) FILTER (WHERE amount = 2) AS rows_of_refused_copy FROM bulk_ledger;
SELECT count(*) FILTER (WHERE fence = '5:2') AS fences_at_5_2 FROM fencing.scopes WHERE scope_name = 'public.bulk_ledger';
-- the same with the token in fencing.token and no fence column
COPY (SELECT 1 + g % 3000, 2 FROM generate_series(1, 9000) g) TO :'copy_file' (FORMAT csv);
SET fencing.token = '5:2';
COPY bulk_ledger (account, amount) FROM :'copy_file' (FORMAT csv);
RESET fencing.token;
SELECT count(*) FILTER (WHERE amount = 2) AS rows_of_refused_copy FROM bulk_ledger;

-- with 6:2 it loads, and every row holds the token
COPY (SELECT 1 + g % 3000, 3 FROM generate_series(1, 9000) g) TO :'copy_file' (FORMAT csv);
SET fencing.token = '6:2';
COPY bulk_ledger (account, amount) FROM :'copy_file' (FORMAT csv);
RESET fencing.token;
SELECT count(*), count(DISTINCT fence), min(fence) FROM bulk_ledger WHERE amount = 3;
SELECT count(*) FILTER (WHERE fence = '6:2') AS fences_at_6_2 FROM fencing.scopes WHERE scope_name = 'public.bulk_ledger';

-- a rolled-back savepoint takes back what its writes did to every key,
-- also to the keys that the transaction's cache found without a look
BEGIN;
SET LOCAL fencing.token = '7:1';
COPY bulk_ledger (account, amount) FROM :'copy_file' (FORMAT csv);
SAVEPOINT s1;
SET LOCAL fencing.token = '7:5';
INSERT INTO bulk_ledger (account, amount) SELECT g, 4 FROM generate_series(1, 3000) g;
ROLLBACK TO s1;
-- the keys are back at 7:1: 7:3 is newer, 7:1 again is this transaction's own
SET LOCAL fencing.token = '7:3';
INSERT INTO bulk_ledger (account, amount) SELECT g, 5 FROM generate_series(1, 3000, 7) g;
SET LOCAL fencing.token = '7:1';
INSERT INTO bulk_ledger (account, amount) VALUES (2, 6);
-- new keys whose first fence a rolled-back savepoint wrote are looked up
-- again: 7:1 is simply newer than nothing
SAVEPOINT s2;
INSERT INTO bulk_ledger (account, amount) SELECT g, 6 FROM generate_series(5001, 5100) g;
ROLLBACK TO s2;
INSERT INTO bulk_ledger (account, amount) SELECT g, 6 FROM generate_series(5001, 5100) g;
SELECT count(*) AS new_keys FROM fencing.scopes
  WHERE scope_name = 'public.bulk_ledger' AND fence = '7:1' AND (key::jsonb->>0)::int > 5000;
-- and a key advanced to 7:3 refuses 7:1 again
INSERT INTO bulk_ledger (account, amount) VALUES (1, 6);
ROLLBACK;
SELECT count(*) FILTER (WHERE fence > '6:2') AS fences_after_rollback FROM fencing.scopes WHERE scope_name = 'public.bulk_ledger';

-- two protected tables, one statement: each row checked in its own scope
CREATE TABLE bulk_other (account int, amount int, fence fencing.fence);
SELECT fencing.protect('bulk_other', key_columns => '{account}');
SET fencing.token = '8:1';
WITH a AS (INSERT INTO bulk_ledger (account, amount) SELECT g % 10, 7 FROM generate_series(1, 100) g RETURNING account)
INSERT INTO bulk_other (account, amount) SELECT account, 7 FROM a;
RESET fencing.token;
SELECT count(*), min(fence), max(fence) FROM bulk_other;
SELECT scope_name, count(*) FILTER (WHERE fence = '8:1') AS at_8_1 FROM fencing.scopes
  WHERE scope_name IN ('public.bulk_ledger', 'public.bulk_other') GROUP BY scope_name ORDER BY scope_name;
-- one stale key of the second table refuses the statement
SET fencing.token = '9:1';
INSERT INTO bulk_other (account, amount) VALUES (5, 8);
SET fencing.token = '8:2';
WITH a AS (INSERT INTO bulk_ledger (account, amount) SELECT g % 10, 9 FROM generate_series(1, 100) g RETURNING account)
INSERT INTO bulk_other (account, amount) SELECT account, 9 FROM a;
RESET fencing.token;
SELECT count(*) FILTER (WHERE amount = 9) AS rows_of_refused_statement FROM bulk_ledger;

SELECT fencing.unprotect('bulk_other');
SELECT fencing.unprotect('bulk_ledger');
DROP TABLE bulk_other, bulk_ledger;
SELECT fencing.reset_scope('public.bulk_ledger') > 0 AS reset, fencing.reset_scope('public.bulk_other') > 0 AS reset;

-- A row this transaction's guard wrote carries its token in the fence
-- column, in key scope too: an UPDATE that leaves the column as it is
-- writes with that token (the scope row the check wrote is written in a
-- command of its own, after the row's)
CREATE TABLE bulk_cid (account int, amount int, fence fencing.fence);
SELECT fencing.protect('bulk_cid', key_columns => '{account}');
BEGIN;
COPY bulk_cid FROM STDIN (FORMAT csv);
1,1,3:1
2,1,3:1
\.
UPDATE bulk_cid SET amount = 5 WHERE account = 1;
INSERT INTO bulk_cid VALUES (3, 1, '3:1');
UPDATE bulk_cid SET amount = 6 WHERE account = 3;
COMMIT;
SELECT * FROM bulk_cid ORDER BY account;
-- not in the next transaction: the column carries no token there
UPDATE bulk_cid SET amount = 7 WHERE account = 1;
SELECT fencing.unprotect('bulk_cid');
DROP TABLE bulk_cid;
SELECT fencing.reset_scope('public.bulk_cid') > 0 AS reset;
