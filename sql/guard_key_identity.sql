-- guard_key_identity: two rows have the same key exactly when their key
-- columns are equal under each column type's default btree equality (with
-- the column's collation).  No session setting, no spelling of an equal
-- value, no rename makes one key two, or two keys one.  Each attack below
-- got a stale write accepted in 1.0, where the key was the text form of
-- the values under the writer's settings.
SET search_path = public, fencing;

-- DateStyle: a date key spelled "SQL, DMY" is still the same day
CREATE TABLE daily (day date NOT NULL, amount int, fence fencing.fence);
SELECT fencing.protect('daily', key_columns => '{day}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO daily VALUES ('2026-01-15', 1);
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5'; SET LOCAL DateStyle = 'SQL, DMY';
INSERT INTO daily VALUES ('15/01/2026', 666);
ROLLBACK;
BEGIN; SET LOCAL fencing.token = '0:5'; SET LOCAL DateStyle = 'German';
DELETE FROM daily WHERE day = '2026-01-15';
ROLLBACK;
SELECT day, amount, fence FROM daily;

-- TimeZone: the same instant from a client in another time zone; an
-- honest client there shares the fence too
CREATE TABLE slots (starts timestamptz NOT NULL, booked text, fence fencing.fence);
SELECT fencing.protect('slots', key_columns => '{starts}');
BEGIN; SET LOCAL fencing.token = '0:10'; SET LOCAL TimeZone = 'UTC';
INSERT INTO slots VALUES ('2026-01-15 10:00:00+00', 'ann');
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5'; SET LOCAL TimeZone = 'Asia/Tokyo';
INSERT INTO slots VALUES ('2026-01-15 19:00:00', 'stale');
ROLLBACK;
BEGIN; SET LOCAL fencing.token = '0:11'; SET LOCAL TimeZone = 'America/New_York';
INSERT INTO slots VALUES ('2026-01-15 05:00:00', 'bob');
COMMIT;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.slots';

-- bytea_output
CREATE TABLE blobs (k bytea NOT NULL, fence fencing.fence);
SELECT fencing.protect('blobs', key_columns => '{k}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO blobs VALUES ('\x0102');
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5'; SET LOCAL bytea_output = 'escape';
INSERT INTO blobs VALUES ('\x0102');
ROLLBACK;

-- extra_float_digits, and -0 = 0 in float8
CREATE TABLE readings (sensor float8, fence fencing.fence);
SELECT fencing.protect('readings', key_columns => '{sensor}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO readings VALUES (0.1), (0);
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5'; SET LOCAL extra_float_digits = 0;
INSERT INTO readings VALUES (0.1);
ROLLBACK;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO readings VALUES ('-0');
ROLLBACK;

-- numeric: 1.0 and 1 are equal, so they are one key
CREATE TABLE prices (item numeric, fence fencing.fence);
SELECT fencing.protect('prices', key_columns => '{item}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO prices VALUES (1);
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO prices VALUES (1.0);
ROLLBACK;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO prices VALUES (1.000);
ROLLBACK;

-- citext: 'ACCT-1' and 'acct-1' are one key
CREATE EXTENSION citext;
CREATE TABLE ci_ledger (account citext, amount int, fence fencing.fence);
SELECT fencing.protect('ci_ledger', key_columns => '{account}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO ci_ledger VALUES ('acct-1', 1);
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO ci_ledger VALUES ('ACCT-1', 666);
ROLLBACK;

-- a case-insensitive (nondeterministic) collation does the same for text
CREATE COLLATION ignore_case (provider = icu, locale = 'und-u-ks-level2',
                              deterministic = false);
CREATE TABLE ci_text (account text COLLATE ignore_case, fence fencing.fence);
SELECT fencing.protect('ci_text', key_columns => '{account}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO ci_text VALUES ('Acct-1');
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO ci_text VALUES ('ACCT-1');
ROLLBACK;
-- while under the default collation case still matters
CREATE TABLE cs_text (account text, fence fencing.fence);
SELECT fencing.protect('cs_text', key_columns => '{account}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO cs_text VALUES ('Acct-1');
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO cs_text VALUES ('ACCT-1');
COMMIT;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.cs_text' ORDER BY key;

-- an enum key keeps its fence through ALTER TYPE ... RENAME VALUE
CREATE TYPE desk AS ENUM ('north', 'south');
CREATE TABLE desks (d desk, fence fencing.fence);
SELECT fencing.protect('desks', key_columns => '{d}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO desks VALUES ('north');
COMMIT;
ALTER TYPE desk RENAME VALUE 'north' TO 'nord';
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO desks VALUES ('nord');
ROLLBACK;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.desks';

-- a domain key is keyed by its base type's equality
CREATE DOMAIN account_id AS text CHECK (VALUE <> '');
CREATE TABLE dom_ledger (account account_id, fence fencing.fence);
SELECT fencing.protect('dom_ledger', key_columns => '{account}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO dom_ledger VALUES ('a');
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO dom_ledger VALUES ('a');
ROLLBACK;

-- NULL keys: all rows with a NULL key share one fence (NULLS NOT DISTINCT)
CREATE TABLE nullable (k int, fence fencing.fence);
SELECT fencing.protect('nullable', key_columns => '{k}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO nullable VALUES (NULL);
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO nullable VALUES (NULL);
ROLLBACK;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.nullable';

-- two key columns: (a, b) is one key, different from (a, c)
CREATE TABLE pairs (x text, y int, fence fencing.fence);
SELECT fencing.protect('pairs', key_columns => '{x,y}');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO pairs VALUES ('a', 1);
COMMIT;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO pairs VALUES ('a', 1);
ROLLBACK;
BEGIN; SET LOCAL fencing.token = '0:5';
INSERT INTO pairs VALUES ('a', 2);
COMMIT;
SELECT key, fence FROM fencing.scopes WHERE scope_name = 'public.pairs' ORDER BY key;

-- Every stale write above was refused, and nothing else moved:
SELECT scope_name, key, fence FROM fencing.scopes ORDER BY scope_name, key;
SELECT count(*) AS rows_666 FROM (SELECT amount FROM daily UNION ALL
                                  SELECT amount FROM ci_ledger) a
 WHERE amount = 666;

-- Keys of a type without a default btree operator class cannot key a scope
CREATE TABLE docs (body json, fence fencing.fence);
SELECT fencing.protect('docs', key_columns => '{body}');
CREATE TABLE spots (p point, fence fencing.fence);
SELECT fencing.protect('spots', key_columns => '{p}');
SELECT count(*) FROM fencing.protected WHERE relid IN ('docs'::regclass, 'spots'::regclass);

-- Tables share a scope only with key columns of the same types and collations
CREATE TABLE by_int (account int, fence fencing.fence);
SELECT fencing.protect('by_int', key_columns => '{account}', scope_name => 'public.daily');
CREATE TABLE by_text (account text COLLATE "C", fence fencing.fence);
SELECT fencing.protect('by_text', key_columns => '{account}', scope_name => 'public.cs_text');
SELECT fencing.protect('by_text', key_columns => '{}', scope_name => 'public.cs_text');
-- the same types do share: a second table writes the same fences
CREATE TABLE daily_audit (day date, note text, fence fencing.fence);
SELECT fencing.protect('daily_audit', key_columns => '{day}', scope_name => 'public.daily');
BEGIN; SET LOCAL fencing.token = '0:10';
INSERT INTO daily_audit VALUES ('2026-01-15', 'stale: the day is at 0:10');
ROLLBACK;

-- scope_name is 1 to 255 bytes
CREATE TABLE named (k int, fence fencing.fence);
SELECT fencing.protect('named', key_columns => '{k}', scope_name => '');
SELECT fencing.protect('named', key_columns => '{k}', scope_name => repeat('s', 256));
SELECT fencing.protect('named', key_columns => '{k}', scope_name => repeat('é', 128));
SELECT fencing.protect('named', key_columns => '{k}', scope_name => repeat('s', 255));
SELECT length(scope_name) FROM fencing.protected WHERE relid = 'named'::regclass;

-- The view shows keys for people; the key text depends on the session
SET DateStyle = 'SQL, DMY';
SELECT key FROM fencing.scopes WHERE scope_name = 'public.daily';
RESET DateStyle;
SELECT key FROM fencing.scopes WHERE scope_name = 'public.daily';
SELECT fencing.scope_key('2026-01-15') AS spelled;

SELECT fencing.unprotect(relid) FROM fencing.protected ORDER BY relid::text;
DROP TABLE daily, slots, blobs, readings, prices, ci_ledger, ci_text, cs_text,
    desks, dom_ledger, nullable, pairs, docs, spots, by_int, by_text,
    daily_audit, named;
-- a scope's fences outlive its tables, and keep their key types alive
DROP TYPE desk;
SELECT count(fencing.reset_scope(scope_name)) AS scopes_reset FROM fencing.scope_storage;
DROP TYPE desk;
DROP DOMAIN account_id;
DROP COLLATION ignore_case;
DROP EXTENSION citext;
