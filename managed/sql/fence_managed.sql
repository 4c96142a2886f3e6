-- fence_managed: the edition's fence, a composite (epoch, counter) under
-- the domain fencing.fence, next to the C edition's type.
\set SHOW_CONTEXT never
SET search_path = public, fencing;

-- text form: PostgreSQL's composite form; fence_text() writes E:C
SELECT fencing.fence(3, 42) AS fence, fencing.fence_text(fencing.fence(3, 42)) AS c_form,
       fencing.fence(3, 42)::text AS cast_to_text;
SELECT '(3,42)'::fencing.fence = fencing.fence(3, 42) AS same;

-- what takes a token reads E:C (and C, and (E,C)), with the C edition's errors
SELECT fencing.fence_from_text('3:42'), fencing.fence_from_text(' 7 '), fencing.fence_from_text('(3,42)'),
       fencing.fence_from_text(E'\t0:0\n'), fencing.fence_from_text('9223372036854775807:9223372036854775807');
SELECT fencing.fence_from_text('');
SELECT fencing.fence_from_text('abc');
SELECT fencing.fence_from_text('1:2:3');
SELECT fencing.fence_from_text('1: 2');
SELECT fencing.fence_from_text('-0');
SELECT fencing.fence_from_text('-1');
SELECT fencing.fence_from_text('1:-5');
SELECT fencing.fence_from_text('9223372036854775808');
SELECT fencing.fence_from_text('00000000000000000000000000042:1');
SELECT '3:42'::text::fencing.fence AS cast_from_text;

-- parts: both present, neither negative
SELECT fencing.fence(-1, 0);
SELECT fencing.fence(0, -1);
SELECT '(-1,0)'::fencing.fence;
SELECT '(1,)'::fencing.fence;
SELECT '(,)'::fencing.fence;
SELECT NULL::fencing.fence IS NULL AS null_is_a_fence_column_without_token;
SELECT fencing.epoch(fencing.fence(3, 42)), fencing.counter(fencing.fence(3, 42)),
       fencing.next(fencing.fence(3, 42)), fencing.next_epoch(fencing.fence(3, 42));
SELECT fencing.next(fencing.fence(1, 9223372036854775807));
SELECT fencing.next_epoch(fencing.fence(9223372036854775807, 0));
SELECT 42::bigint::fencing.fence AS from_bigint, 7::fencing.fence AS from_integer;

-- ordered epoch first, then counter: as the C type, in ORDER BY, indexes,
-- primary keys, DISTINCT, max() and min()
CREATE TABLE fm (f fencing.fence PRIMARY KEY, note text);
INSERT INTO fm VALUES (fencing.fence(1, 10), 'a'), (fencing.fence(2, 0), 'b'), (fencing.fence(1, 9), 'c'),
                      (fencing.fence(0, 100), 'd');
SELECT f, note FROM fm ORDER BY f;
SELECT fencing.max(f), fencing.min(f) FROM fm;
INSERT INTO fm VALUES (fencing.fence(1, 10), 'duplicate');
SELECT count(DISTINCT f) FROM fm;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT note FROM fm WHERE f = fencing.fence(1, 9);
EXPLAIN (COSTS OFF) SELECT note FROM fm WHERE f < '(1,10)';
EXPLAIN (COSTS OFF) SELECT note FROM fm WHERE f OPERATOR(fencing.>) fencing.fence(1, 9);
RESET enable_seqscan;
SELECT note FROM fm WHERE f < '(1,10)' ORDER BY f;
SELECT note FROM fm WHERE f OPERATOR(fencing.>=) '(1,10)' ORDER BY f;
SELECT note FROM fm WHERE f = '1:9'::text;
-- hash joins and IN
SELECT count(*) FROM fm a JOIN fm b ON a.f = b.f;
SELECT note FROM fm WHERE f IN (fencing.fence(2, 0), fencing.fence(0, 100)) ORDER BY note;

-- advance() takes a token written E:C, or a fence
SELECT fencing.advance(fencing.fence(3, 0), '3:1'), fencing.advance('3:0', '3:1'),
       fencing.advance(NULL::fencing.fence, '0:5');
SELECT fencing.advance(fencing.fence(3, 1), '3:1');
SELECT fencing.advance(fencing.fence(3, 1), '3:1', strict => false);
SELECT fencing.advance(fencing.fence(3, 1), NULL::text);

-- COPY writes and reads the composite form
COPY (SELECT f FROM fm ORDER BY f) TO STDOUT;
DROP TABLE fm;
