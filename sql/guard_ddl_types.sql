-- DDL keeps every value.  On a protected table (its partitions and
-- inheritance children, and the typed tables that ALTER TYPE ... CASCADE
-- reaches), ALTER COLUMN ... TYPE is allowed only where every stored value
-- is kept: binary-compatible types, a larger length or precision, and
-- integer widening (int2 -> int4 -> int8).  Any other change of type
-- would rewrite values without a token: SF005.
\set SHOW_CONTEXT never
SET client_min_messages = warning;

CREATE TABLE invoices (
    id int PRIMARY KEY,
    amount numeric(12,2),
    due timestamptz,
    code char(5),
    note varchar(10),
    qty int2,
    total int8,
    ref text,
    fence fencing.fence);
INSERT INTO invoices
VALUES (1, 10.49, '2024-01-01 12:00+00', 'ab', 'hello', 7, 42, 'r-1', '0:1');
SELECT fencing.protect('invoices');

-- Rounding numeric: 10.49 would become 10
ALTER TABLE invoices ALTER COLUMN amount TYPE numeric(12,0);
-- timestamptz to timestamp depends on the TimeZone of the session running
-- the DDL, and is refused under UTC too
SET TimeZone = 'America/New_York';
ALTER TABLE invoices ALTER COLUMN due TYPE timestamp;
\echo :LAST_ERROR_SQLSTATE
SET TimeZone = 'UTC';
ALTER TABLE invoices ALTER COLUMN due TYPE timestamp;
\echo :LAST_ERROR_SQLSTATE
RESET TimeZone;
ALTER TABLE invoices ALTER COLUMN due TYPE timestamptz(0);
\echo :LAST_ERROR_SQLSTATE
-- char(n) pads or drops blanks
ALTER TABLE invoices ALTER COLUMN code TYPE char(3);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN code TYPE char(8);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN code TYPE text;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN ref TYPE char(5);
\echo :LAST_ERROR_SQLSTATE
-- shorter strings, narrower or other numbers
ALTER TABLE invoices ALTER COLUMN note TYPE varchar(5);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN ref TYPE varchar(3);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN total TYPE int4;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN amount TYPE float8;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN qty TYPE numeric;
\echo :LAST_ERROR_SQLSTATE
-- one refused change stops the whole statement
ALTER TABLE invoices ALTER COLUMN note TYPE varchar(20),
                     ALTER COLUMN amount TYPE numeric(12,0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM invoices;

-- Changes that keep every value
ALTER TABLE invoices ALTER COLUMN amount TYPE numeric(14,2);
ALTER TABLE invoices ALTER COLUMN amount TYPE numeric;
ALTER TABLE invoices ALTER COLUMN note TYPE varchar(20);
ALTER TABLE invoices ALTER COLUMN note TYPE text;
ALTER TABLE invoices ALTER COLUMN ref TYPE varchar;
ALTER TABLE invoices ALTER COLUMN ref TYPE text COLLATE "C";
ALTER TABLE invoices ALTER COLUMN qty TYPE int4;
ALTER TABLE invoices ALTER COLUMN qty TYPE int8, ALTER COLUMN total TYPE int8;
CREATE DOMAIN positive_amount AS numeric CHECK (VALUE > 0);
ALTER TABLE invoices ALTER COLUMN amount TYPE positive_amount;
SELECT attname, format_type(atttypid, atttypmod), attcollation::regcollation
  FROM pg_attribute
 WHERE attrelid = 'invoices'::regclass AND attnum > 0 AND NOT attisdropped
 ORDER BY attnum;
SELECT * FROM invoices;

-- The rules from before stay: USING is refused on any column, and the
-- fence and key columns keep their type
ALTER TABLE invoices ALTER COLUMN ref TYPE text USING ref || '';
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE invoices ALTER COLUMN fence TYPE fencing.fence;
\echo :LAST_ERROR_SQLSTATE

-- Partitions and inheritance children
CREATE TABLE payments (region text NOT NULL, amount numeric(12,2), fence fencing.fence)
    PARTITION BY LIST (region);
CREATE TABLE payments_eu PARTITION OF payments FOR VALUES IN ('eu');
INSERT INTO payments VALUES ('eu', 10.49, '0:1');
SELECT fencing.protect('payments');
ALTER TABLE payments ALTER COLUMN amount TYPE numeric(12,0);
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE payments ALTER COLUMN amount TYPE numeric(13,2);
-- a protected child under a parent that is not protected
CREATE TABLE prices (sku text, price numeric(8,2));
CREATE TABLE shop_prices (fence fencing.fence) INHERITS (prices);
INSERT INTO shop_prices VALUES ('a', 1.5, '0:1');
SELECT fencing.protect('shop_prices');
ALTER TABLE prices ALTER COLUMN price TYPE numeric(8,0);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM payments UNION ALL SELECT 'shop', price, fence FROM shop_prices;

-- Typed tables: ALTER TYPE ... CASCADE changes the columns of the tables
-- of the type, by the same rules (and renames and drops none of the fence
-- and key columns)
CREATE TYPE account_row AS (id int, owner text, amount numeric(12,2), fence fencing.fence);
CREATE TABLE typed_accounts OF account_row (PRIMARY KEY (id));
INSERT INTO typed_accounts VALUES (1, 'ann', 10.49, '0:10');
SELECT fencing.protect('typed_accounts', key_columns => '{owner}');
ALTER TYPE account_row ALTER ATTRIBUTE amount TYPE numeric(12,0) CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TYPE account_row ALTER ATTRIBUTE fence TYPE text CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TYPE account_row ALTER ATTRIBUTE owner TYPE varchar(20) CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TYPE account_row RENAME ATTRIBUTE fence TO old_fence CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TYPE account_row RENAME ATTRIBUTE owner TO holder CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TYPE account_row DROP ATTRIBUTE fence CASCADE;
\echo :LAST_ERROR_SQLSTATE
ALTER TYPE account_row ALTER ATTRIBUTE amount TYPE numeric(14,2) CASCADE;
ALTER TYPE account_row RENAME ATTRIBUTE amount TO balance CASCADE;
SELECT * FROM typed_accounts;
SELECT relid, guard_intact, problem FROM fencing.protected_tables ORDER BY relid::text;

-- Tables that are not protected are left alone
CREATE TABLE scratch (amount numeric(12,2), at timestamptz);
INSERT INTO scratch VALUES (10.49, '2024-01-01 12:00+00');
ALTER TABLE scratch ALTER COLUMN amount TYPE numeric(12,0),
                    ALTER COLUMN at TYPE timestamp;
SELECT amount FROM scratch;
-- and after unprotect() the change is the owner's to make
SELECT fencing.unprotect('invoices');
ALTER TABLE invoices ALTER COLUMN amount TYPE numeric(12,0);
SELECT id, amount FROM invoices;

DROP TABLE invoices, payments, prices, typed_accounts, scratch CASCADE;
DROP TYPE account_row;
DROP DOMAIN positive_amount;
-- its scope outlives the table: the extension owner removes it on purpose
SELECT fencing.reset_scope('public.typed_accounts');
