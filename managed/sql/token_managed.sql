-- token_managed: fencing.token has no check hook in this edition (no
-- library): a bad value is refused by the first write it would judge, with
-- the C edition's SQLSTATE and message; set_token() refuses it at once.
\set SHOW_CONTEXT never
SET search_path = public, fencing;
CREATE TABLE tm (id int PRIMARY KEY, n int, fence fencing.fence);
INSERT INTO tm VALUES (1, 0, fencing.fence(1, 1));
SELECT fencing.protect('tm');
BEGIN;
SET LOCAL fencing.token = 'three';
UPDATE tm SET n = 1 WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '1:-5';
UPDATE tm SET n = 1 WHERE id = 1;
ROLLBACK;
BEGIN;
SET LOCAL fencing.token = '1:9223372036854775808';
DELETE FROM tm WHERE id = 1;
ROLLBACK;
SELECT fencing.set_token('three');
SELECT fencing.set_token('1:-5');
SELECT fencing.set_token(NULL::text);
-- the token in any of its forms, as SET, set_config() and set_token() take
-- it (one transaction each: a row this transaction wrote carries its token,
-- and a different one set later conflicts with it)
BEGIN;
SET LOCAL fencing.token = ' 1:2 ';
UPDATE tm SET n = 2 WHERE id = 1;
COMMIT;
BEGIN;
SELECT set_config('fencing.token', '(1,3)', true);
UPDATE tm SET n = 3 WHERE id = 1;
COMMIT;
BEGIN;
SELECT fencing.set_token('1:4');
UPDATE tm SET n = 4 WHERE id = 1;
COMMIT;
BEGIN;
SELECT fencing.set_token(fencing.fence(1, 5));
UPDATE tm SET n = 5 WHERE id = 1;
COMMIT;
SELECT * FROM tm;
SHOW fencing.token;
-- a superuser's bypass lets writes through; another role's is judged as off
SET fencing.bypass = on;
UPDATE tm SET n = 6 WHERE id = 1;
SELECT n, fence FROM tm;
SET fencing.bypass = 'maybe';
UPDATE tm SET n = 7 WHERE id = 1;
RESET fencing.bypass;
CREATE ROLE regress_tm_writer;
GRANT SELECT, UPDATE ON tm TO regress_tm_writer;
SET ROLE regress_tm_writer;
SET fencing.bypass = on;
UPDATE tm SET n = 8 WHERE id = 1;
RESET fencing.bypass;
RESET ROLE;
SELECT relid, rejected_stale, rejected_missing, bypassed FROM fencing.stats WHERE relid = 'tm'::regclass;
DROP TABLE tm;
DROP ROLE regress_tm_writer;
