-- The fence type: I/O, ordering, indexes, hashing, aggregates, constructor,
-- accessors and casts.
SET search_path = public, fencing;

--
-- Text I/O
--
SELECT '3:42'::fence, '42'::fence, '0:0'::fence,
       '9223372036854775807:9223372036854775807'::fence AS largest;
-- surrounding white space is allowed (space, tab, newline, carriage return)
SELECT '  7:0  '::fence, E'\t1:2\n'::fence, E'\r\n 5 \t'::fence;
-- leading zeros are accepted; output is canonical
SELECT '007:0042'::fence, '00000000000000000000000000001'::fence;
-- a bare counter means epoch 0
SELECT '42'::fence = '0:42'::fence AS bare_counter_is_epoch_zero;
-- text output round-trips
SELECT f, f::text, f::text::fence = f AS round_trip
  FROM (VALUES ('1:2'::fence), ('0:0'), ('9223372036854775807:0'),
               ('0:9223372036854775807')) AS v(f);
SELECT NULL::fence IS NULL AS null_is_null;

--
-- Constructor and accessors
--
SELECT fence(3, 42), epoch('3:42'), counter('3:42');
SELECT fence(0, 0), fence(9223372036854775807, 9223372036854775807);
SELECT fence(NULL, 1) IS NULL AS null_epoch, fence(1, NULL) IS NULL AS null_counter,
       epoch(NULL) IS NULL AS null_accessor;
SELECT fence(-1, 0);
SELECT fence(0, -1);
SELECT next('3:42'), next_epoch('3:42'), next_epoch('0:0');
SELECT next('3:9223372036854775806');
-- overflow near the top
SELECT next('3:9223372036854775807');
SELECT next_epoch('9223372036854775806:5');
SELECT next_epoch('9223372036854775807:5');
SELECT next(NULL) IS NULL AS null_next;

--
-- Casts
--
SELECT 42::bigint::fence AS explicit_cast, CAST(0::bigint AS fence) AS zero,
       9223372036854775807::fence AS largest;
SELECT (-1)::bigint::fence;
SELECT '3:42'::fence::text AS to_text, '3:42'::text::fence AS from_text;
SELECT 'x:1'::text::fence;
CREATE TABLE cast_target (f fence, t text);
-- assignment casts: bigint -> fence and fence -> text
INSERT INTO cast_target VALUES (17::bigint, '1:2'::fence);
INSERT INTO cast_target (f) VALUES (-5::bigint);
-- and integer -> fence, so that plain integer literals work
INSERT INTO cast_target (f) VALUES (42);
SELECT 7::fence AS integer_cast;
INSERT INTO cast_target (f) VALUES (-1);
SELECT * FROM cast_target;
DROP TABLE cast_target;

--
-- Ordering: the epoch dominates the counter
--
SELECT '1:0'::fence > '0:9223372036854775807'::fence AS epoch_dominates,
       '1:5'::fence < '1:6'::fence AS counter_breaks_ties,
       '2:1'::fence > '1:100'::fence AS epoch_first;
SELECT a, b, a < b AS lt, a <= b AS le, a = b AS eq, a <> b AS ne,
       a >= b AS ge, a > b AS gt, fence_cmp(a, b) AS cmp
  FROM (VALUES ('1:1'::fence, '1:1'::fence), ('1:1', '1:2'), ('1:2', '1:1'),
               ('0:9', '1:0'), ('2:0', '1:9'), ('0:0', '0:0')) AS v(a, b);

CREATE TABLE fences (id int PRIMARY KEY, f fence NOT NULL);
INSERT INTO fences
  SELECT i, fence(i % 7, (i * 7919) % 100) FROM generate_series(1, 2000) AS i;
INSERT INTO fences VALUES (2001, '9223372036854775807:9223372036854775807'),
                          (2002, '0:0'), (2003, '1:0'), (2004, '0:9223372036854775807');
ANALYZE fences;
SELECT f FROM fences ORDER BY f LIMIT 5;
SELECT f FROM fences ORDER BY f DESC LIMIT 5;
-- ORDER BY agrees with ordering by (epoch, counter)
SELECT count(*) AS mismatches FROM (
  SELECT f, row_number() OVER (ORDER BY f, id) AS r1,
            row_number() OVER (ORDER BY epoch(f), counter(f), id) AS r2
    FROM fences) s WHERE r1 <> r2;

--
-- min() and max()
--
SELECT min(f), max(f) FROM fences;
SELECT min(f), max(f) FROM fences WHERE id < 0;
SELECT epoch(f) AS e, min(f), max(f) FROM fences
  WHERE id <= 2000 GROUP BY 1 ORDER BY 1;

--
-- btree index
--
CREATE INDEX fences_f_btree ON fences (f);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM fences WHERE f = '3:42';
SELECT id, f FROM fences WHERE f = '3:97' ORDER BY id;
EXPLAIN (COSTS OFF) SELECT f FROM fences WHERE f > '6:95' ORDER BY f;
SELECT f FROM fences WHERE f > '6:95' ORDER BY f;
EXPLAIN (COSTS OFF) SELECT f FROM fences WHERE f BETWEEN '0:97' AND '1:3' ORDER BY f;
SELECT f FROM fences WHERE f BETWEEN '0:97' AND '1:3' ORDER BY f;
EXPLAIN (COSTS OFF) SELECT f FROM fences ORDER BY f DESC LIMIT 3;
SELECT f FROM fences ORDER BY f DESC LIMIT 3;
-- min/max can use the index
EXPLAIN (COSTS OFF) SELECT max(f) FROM fences;
SELECT max(f), min(f) FROM fences;
-- IN lists
EXPLAIN (COSTS OFF) SELECT f FROM fences WHERE f IN ('0:0', '1:0', '5:5') ORDER BY f;
SELECT f FROM fences WHERE f IN ('0:0', '1:0', '5:5', '0:9223372036854775807') ORDER BY f;
-- the index agrees with a sequential scan
SELECT count(*) FROM fences WHERE f < '3:500';
RESET enable_seqscan;
RESET enable_bitmapscan;
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SELECT count(*) FROM fences WHERE f < '3:500';
RESET enable_indexscan;
RESET enable_indexonlyscan;
RESET enable_bitmapscan;
DROP INDEX fences_f_btree;

--
-- hash index
--
CREATE INDEX fences_f_hash ON fences USING hash (f);
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF) SELECT id FROM fences WHERE f = '3:97';
SELECT id, f FROM fences WHERE f = '3:97' ORDER BY id;
SELECT id, f FROM fences WHERE f = '9223372036854775807:9223372036854775807';
SELECT count(*) FROM fences WHERE f = '9:9';
RESET enable_seqscan;
RESET enable_bitmapscan;
DROP INDEX fences_f_hash;
-- the hash functions: equal values hash equally, and the extended hash with
-- seed 0 agrees with the 32-bit hash in its low bits (as PostgreSQL requires)
SELECT fence_hash('3:42') = fence_hash(' 3:042 ') AS equal_hash,
       fence_hash('3:42') <> fence_hash('42:3') AS parts_not_swappable,
       fence_hash_extended('3:42', 0)::bit(64)::bit(32)::int IS NOT NULL AS has_ext,
       (fence_hash_extended('3:42', 0) & 4294967295)::bit(32)::int = fence_hash('3:42')
         AS low_bits_agree,
       fence_hash_extended('3:42', 1) <> fence_hash_extended('3:42', 0) AS seed_matters;
SELECT count(*) AS low_bit_mismatches FROM fences
 WHERE (fence_hash_extended(f, 0) & 4294967295)::bit(32)::int <> fence_hash(f);

--
-- Joins: hash, merge and nested loop agree
--
CREATE TABLE other (f fence);
INSERT INTO other SELECT fence(i % 3, i % 100) FROM generate_series(90, 110) AS i;
ANALYZE other;
SET enable_mergejoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM fences JOIN other USING (f);
SELECT count(*) FROM fences JOIN other USING (f);
RESET enable_mergejoin;
RESET enable_nestloop;
SET enable_hashjoin = off;
SET enable_nestloop = off;
EXPLAIN (COSTS OFF) SELECT count(*) FROM fences JOIN other USING (f);
SELECT count(*) FROM fences JOIN other USING (f);
RESET enable_hashjoin;
RESET enable_nestloop;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SELECT count(*) FROM fences JOIN other USING (f);
RESET enable_hashjoin;
RESET enable_mergejoin;
SELECT o.f FROM other o WHERE o.f IN (SELECT f FROM fences) ORDER BY 1;
DROP TABLE other;

--
-- DISTINCT and GROUP BY, hashed and sorted
--
SET enable_sort = off;
EXPLAIN (COSTS OFF) SELECT DISTINCT f FROM fences;
SELECT count(*) FROM (SELECT DISTINCT f FROM fences) s;
EXPLAIN (COSTS OFF) SELECT f, count(*) FROM fences GROUP BY f;
SELECT f, count(*) FROM fences GROUP BY f HAVING count(*) > 1 ORDER BY count(*) DESC, f LIMIT 3;
RESET enable_sort;
SET enable_hashagg = off;
EXPLAIN (COSTS OFF) SELECT DISTINCT f FROM fences;
SELECT count(*) FROM (SELECT DISTINCT f FROM fences) s;
EXPLAIN (COSTS OFF) SELECT f, count(*) FROM fences GROUP BY f;
SELECT f, count(*) FROM fences GROUP BY f HAVING count(*) > 1 ORDER BY count(*) DESC, f LIMIT 3;
RESET enable_hashagg;
-- the number of distinct (epoch, counter) pairs, for comparison
SELECT count(*) FROM (SELECT DISTINCT epoch(f), counter(f) FROM fences) s;
DROP TABLE fences;

--
-- Primary key and unique constraints
--
CREATE TABLE tokens (t fence PRIMARY KEY, note text);
INSERT INTO tokens VALUES ('1:1', 'a'), ('1:2', 'b'), ('2:1', 'c');
INSERT INTO tokens VALUES ('0001:01', 'duplicate written differently');
INSERT INTO tokens VALUES ('1:1', 'x') ON CONFLICT (t) DO UPDATE SET note = 'updated';
SELECT * FROM tokens ORDER BY t;
CREATE TABLE uniq (t fence UNIQUE);
INSERT INTO uniq VALUES ('5'), (NULL), (NULL);
INSERT INTO uniq VALUES ('0:5');
SELECT * FROM uniq ORDER BY t NULLS FIRST;
DROP TABLE uniq;

--
-- Binary I/O: fence_send, and a binary COPY round trip through fence_recv
--
SELECT fence_send('3:42');
SELECT fence_send('0:0'), fence_send('9223372036854775807:1');
CREATE TABLE tokens_copy (LIKE tokens);
-- the file lives in the data directory, so that parallel clusters do not
-- share it; COPY TO needs an absolute path
SELECT current_setting('data_directory') || '/fencing_fence_type.bin' AS copy_file
\gset
COPY tokens TO :'copy_file' WITH (FORMAT binary);
COPY tokens_copy FROM :'copy_file' WITH (FORMAT binary);
SELECT * FROM tokens_copy ORDER BY t;
SELECT count(*) AS differences FROM
  ((TABLE tokens EXCEPT TABLE tokens_copy) UNION ALL
   (TABLE tokens_copy EXCEPT TABLE tokens)) d;
DROP TABLE tokens_copy;
DROP TABLE tokens;
-- fence_recv rejects, never repairs: write binary COPY files by hand
-- (header, one tuple of one field of the given bytes, trailer)
CREATE FUNCTION write_copy_file(field bytea) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    lo oid;
BEGIN
    lo := lo_from_bytea(0, '\x5047434f50590aff0d0a00'::bytea
                           || '\x0000000000000000'::bytea || '\x0001'::bytea
                           || int4send(length(field)) || field || '\xffff'::bytea);
    PERFORM lo_export(lo, current_setting('data_directory') || '/fencing_fence_type.bin');
    PERFORM lo_unlink(lo);
END $$;
CREATE TABLE recv_target (f fence);
-- a well-formed value
SELECT write_copy_file(int8send(7) || int8send(9));
COPY recv_target FROM :'copy_file' WITH (FORMAT binary);
SELECT * FROM recv_target;
-- the largest value
SELECT write_copy_file('\x7fffffffffffffff7fffffffffffffff');
COPY recv_target FROM :'copy_file' WITH (FORMAT binary);
-- a negative epoch, a negative counter: 22003
SELECT write_copy_file(int8send(-1) || int8send(9));
COPY recv_target FROM :'copy_file' WITH (FORMAT binary);
SELECT write_copy_file(int8send(1) || '\x8000000000000000'::bytea);
COPY recv_target FROM :'copy_file' WITH (FORMAT binary);
-- too short (8 bytes) and too long (17 bytes)
SELECT write_copy_file(int8send(1));
COPY recv_target FROM :'copy_file' WITH (FORMAT binary);
SELECT write_copy_file(int8send(1) || int8send(2) || '\x00'::bytea);
COPY recv_target FROM :'copy_file' WITH (FORMAT binary);
SELECT * FROM recv_target ORDER BY f;
DROP TABLE recv_target;
DROP FUNCTION write_copy_file(bytea);
\unset copy_file
