# Compare the fence type with plain (epoch, counter) row comparison.
#
# Many random pairs, drawn so that equal parts, small values and values
# near 2^63 are common, are compared through the fence operators, the
# btree support function, ORDER BY (sorted and through a btree index),
# hashing (fence_hash, fence_hash_extended, hash joins, hashed DISTINCT),
# min()/max() and advance(); every result must agree with the same
# question asked of ROW(epoch, counter).  Mismatches must be 0.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seed = $ENV{FENCING_ORACLE_SEED} // (time() % 1000000) / 1000000.0;
note "random seed $seed (set FENCING_ORACLE_SEED to a number in [0,1) to repeat)";

my $node = PostgreSQL::Test::Cluster->new('oracle');
$node->init;
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION fencing');

sub sql { return $node->safe_psql('postgres', $_[0]); }

# rnd_part(): a part of a fence; a third small, a third near the maximum,
# a third anywhere in [0, 2^63 - 1].
sql(qq{
SET search_path = public, fencing;
SELECT setseed($seed);
CREATE FUNCTION rnd_part() RETURNS bigint LANGUAGE sql VOLATILE AS \$\$
    SELECT CASE floor(random() * 3)::int
        WHEN 0 THEN floor(random() * 4)::bigint
        WHEN 1 THEN 9223372036854775807 - floor(random() * 4)::bigint
        ELSE (floor(random() * 2147483648)::bigint << 32)
             | floor(random() * 4294967296)::bigint
    END
\$\$;
CREATE TABLE pairs AS
  SELECT i, ae, ac,
         CASE WHEN random() < 0.2 THEN ae ELSE rnd_part() END AS be,
         CASE WHEN random() < 0.2 THEN ac ELSE rnd_part() END AS bc
    FROM (SELECT i, rnd_part() AS ae, rnd_part() AS ac
            FROM generate_series(1, 20000) AS i) s;
ALTER TABLE pairs ADD COLUMN a fencing.fence, ADD COLUMN b fencing.fence;
UPDATE pairs SET a = fencing.fence(ae, ac), b = fencing.fence(be, bc);
ANALYZE pairs;
});

my $path = 'SET search_path = public, fencing; ';

# The pairs cover the interesting cases
my ($eq, $lt, $gt, $same_epoch) = split /\|/, sql($path . q{
SELECT count(*) FILTER (WHERE ae = be AND ac = bc),
       count(*) FILTER (WHERE ROW(ae, ac) < ROW(be, bc)),
       count(*) FILTER (WHERE ROW(ae, ac) > ROW(be, bc)),
       count(*) FILTER (WHERE ae = be AND ac <> bc)
  FROM pairs});
note "pairs: $eq equal, $lt less, $gt greater, $same_epoch same epoch";
ok($eq > 500 && $lt > 5000 && $gt > 5000 && $same_epoch > 1000,
	'the random pairs cover equal, less, greater and same-epoch cases');

# The six operators and fence_cmp
is( sql($path . q{
SELECT count(*) FROM pairs
 WHERE (a < b) IS DISTINCT FROM (ROW(ae, ac) < ROW(be, bc))
    OR (a <= b) IS DISTINCT FROM (ROW(ae, ac) <= ROW(be, bc))
    OR (a = b) IS DISTINCT FROM (ROW(ae, ac) = ROW(be, bc))
    OR (a <> b) IS DISTINCT FROM (ROW(ae, ac) <> ROW(be, bc))
    OR (a >= b) IS DISTINCT FROM (ROW(ae, ac) >= ROW(be, bc))
    OR (a > b) IS DISTINCT FROM (ROW(ae, ac) > ROW(be, bc))
    OR fence_cmp(a, b) <> CASE WHEN ROW(ae, ac) < ROW(be, bc) THEN -1
                               WHEN ROW(ae, ac) > ROW(be, bc) THEN 1 ELSE 0 END
    OR fence_cmp(b, a) <> -fence_cmp(a, b)}),
	'0', 'operators and fence_cmp agree with row comparison');

# Accessors and I/O
is( sql($path . q{
SELECT count(*) FROM pairs
 WHERE epoch(a) <> ae OR counter(a) <> ac
    OR a::text <> ae || ':' || ac
    OR a::text::fence <> a
    OR fence_send(a) <> int8send(ae) || int8send(ac)}),
	'0', 'accessors, text output and send agree with the parts');

# ORDER BY: sorted, and through a btree index
my $order_check = q{
SELECT count(*) FROM (
  SELECT row_number() OVER (ORDER BY f, k) AS r1,
         row_number() OVER (ORDER BY e, c, k) AS r2
    FROM (SELECT a AS f, ae AS e, ac AS c, 'a' || i AS k FROM pairs
          UNION ALL
          SELECT b, be, bc, 'b' || i FROM pairs) u) s
 WHERE r1 <> r2};
is(sql($path . $order_check), '0', 'ORDER BY fence agrees with ORDER BY epoch, counter');

sql($path . q{
CREATE TABLE allf AS
  SELECT a AS f, ae AS e, ac AS c FROM pairs UNION ALL SELECT b, be, bc FROM pairs;
CREATE INDEX ON allf (f);
CREATE INDEX ON allf (e, c);
ANALYZE allf;
});
is( sql($path . q{
SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off;
CREATE TABLE by_index AS
  SELECT row_number() OVER () AS r, f FROM (SELECT f FROM allf ORDER BY f) s;
RESET enable_seqscan; RESET enable_bitmapscan; RESET enable_sort;
SELECT count(*) FROM by_index x
  JOIN (SELECT row_number() OVER (ORDER BY e, c) AS r, e, c FROM allf) y USING (r)
 WHERE epoch(x.f) <> y.e OR counter(x.f) <> y.c}),
	'0', 'an index-ordered scan agrees with ORDER BY epoch, counter');
like(
	sql($path . q{SET enable_seqscan = off; SET enable_bitmapscan = off; SET enable_sort = off;
	  EXPLAIN (COSTS OFF) SELECT f FROM allf ORDER BY f}),
	qr/Index Only Scan|Index Scan/, 'that scan did use the btree index');

# Range scans through the index agree with row comparison
is( sql($path . q{
SET enable_seqscan = off; SET enable_bitmapscan = off;
SELECT count(*) FROM (SELECT a, ae, ac FROM pairs ORDER BY i LIMIT 100) p
 WHERE (SELECT count(*) FROM allf WHERE f < p.a)
       <> (SELECT count(*) FROM allf WHERE ROW(e, c) < ROW(p.ae, p.ac))
    OR (SELECT count(*) FROM allf WHERE f = p.a)
       <> (SELECT count(*) FROM allf WHERE e = p.ae AND c = p.ac)}),
	'0', 'btree range and equality scans agree with row comparison');

# Hashing: equal values hash equally; distinct values rarely collide
my ($h_eq_bad, $h_ext_bad, $h32_coll, $h64_coll, $lowbits_bad) = split /\|/, sql($path . q{
SELECT count(*) FILTER (WHERE a = b AND fence_hash(a) <> fence_hash(b)),
       count(*) FILTER (WHERE a = b AND fence_hash_extended(a, 42) <> fence_hash_extended(b, 42)),
       count(*) FILTER (WHERE a <> b AND fence_hash(a) = fence_hash(b)),
       count(*) FILTER (WHERE a <> b AND fence_hash_extended(a, 7) = fence_hash_extended(b, 7)),
       count(*) FILTER (WHERE (fence_hash_extended(a, 0) & 4294967295)::bit(32)::int <> fence_hash(a))
  FROM pairs});
is($h_eq_bad, '0', 'equal fences have equal fence_hash');
is($h_ext_bad, '0', 'equal fences have equal fence_hash_extended');
ok($h32_coll <= 2, "distinct fences rarely share fence_hash ($h32_coll collisions)");
is($h64_coll, '0', 'distinct fences do not share fence_hash_extended');
is($lowbits_bad, '0', 'fence_hash_extended(x, 0) has fence_hash(x) in its low 32 bits');

# Joins: hash join, merge join and nested loop agree with a join on the
# parts (on 3000 x 20000 rows, to keep the nested loop short)
my $rowjoin = sql($path . q{
SELECT count(*) FROM (SELECT ae, ac FROM pairs WHERE i <= 3000) x
  JOIN (SELECT be, bc FROM pairs) y ON x.ae = y.be AND x.ac = y.bc});
ok($rowjoin > 100, "the join has many matches ($rowjoin)");
for my $plan (
	[ 'hash join', 'SET enable_mergejoin = off; SET enable_nestloop = off;', qr/Hash Join/ ],
	[ 'merge join', 'SET enable_hashjoin = off; SET enable_nestloop = off;', qr/Merge Join/ ],
	[ 'nested loop', 'SET enable_hashjoin = off; SET enable_mergejoin = off;', qr/Nested Loop/ ])
{
	my ($name, $set, $re) = @$plan;
	my $sql = 'SELECT count(*) FROM (SELECT a FROM pairs WHERE i <= 3000) x JOIN (SELECT b FROM pairs) y ON x.a = y.b';
	like(sql($path . $set . " EXPLAIN (COSTS OFF) $sql"), $re, "the $name plan is used");
	is(sql($path . $set . " $sql"), $rowjoin, "$name on fences agrees with a join on the parts");
}

# DISTINCT and GROUP BY, hashed and sorted
my $distinct_rows = sql($path . q{SELECT count(*) FROM (SELECT DISTINCT e, c FROM allf) s});
for my $set ('SET enable_sort = off;', 'SET enable_hashagg = off;')
{
	is(sql($path . $set . q{ SELECT count(*) FROM (SELECT DISTINCT f FROM allf) s}),
		$distinct_rows, "DISTINCT ($set) agrees with DISTINCT epoch, counter");
	is( sql($path . $set . q{
SELECT count(*) FROM (SELECT f, count(*) AS n FROM allf GROUP BY f) g
  FULL JOIN (SELECT e, c, count(*) AS n FROM allf GROUP BY e, c) h
    ON epoch(g.f) = h.e AND counter(g.f) = h.c AND g.n = h.n
 WHERE g.f IS NULL OR h.e IS NULL}),
		'0', "GROUP BY ($set) agrees with GROUP BY epoch, counter");
}

# min() and max()
is( sql($path . q{
SELECT (SELECT min(f)::text || ' ' || max(f)::text FROM allf)
     = (SELECT (SELECT e || ':' || c FROM allf ORDER BY e, c LIMIT 1) || ' ' ||
               (SELECT e || ':' || c FROM allf ORDER BY e DESC, c DESC LIMIT 1))}),
	't', 'min() and max() agree with ordering by epoch, counter');
is( sql($path . q{
SELECT count(*) FROM (
  SELECT i % 100 AS g, max(a) AS mx, min(a) AS mn FROM pairs GROUP BY 1) x
  JOIN (SELECT DISTINCT ON (i % 100) i % 100 AS g, ae, ac FROM pairs
         ORDER BY i % 100, ae DESC, ac DESC) hi USING (g)
  JOIN (SELECT DISTINCT ON (i % 100) i % 100 AS g, ae, ac FROM pairs
         ORDER BY i % 100, ae, ac) lo USING (g)
 WHERE x.mx <> fence(hi.ae, hi.ac) OR x.mn <> fence(lo.ae, lo.ac)}),
	'0', 'grouped min() and max() agree with ordering by epoch, counter');

# advance(): accepted exactly when the token is newer (or equal, not strict)
is( sql($path . q{
CREATE TABLE adv (i int, strict boolean, result fencing.fence, state text);
DO $$
DECLARE
    r record;
    s boolean;
    v fencing.fence;
BEGIN
    FOR r IN SELECT * FROM pairs WHERE i <= 5000 LOOP
        FOREACH s IN ARRAY ARRAY[true, false] LOOP
            BEGIN
                v := fencing.advance(r.a, r.b, s);
                INSERT INTO adv VALUES (r.i, s, v, NULL);
            EXCEPTION WHEN OTHERS THEN
                INSERT INTO adv VALUES (r.i, s, NULL, SQLSTATE);
            END;
        END LOOP;
    END LOOP;
END $$;
SELECT count(*) FROM adv JOIN pairs USING (i)
 WHERE CASE WHEN ROW(be, bc) > ROW(ae, ac)
              OR (NOT adv.strict AND ROW(be, bc) = ROW(ae, ac))
            THEN adv.state IS NOT NULL OR adv.result <> b
            ELSE adv.state IS DISTINCT FROM 'SF001' OR adv.result IS NOT NULL
       END}),
	'0', 'advance() accepts and rejects exactly as row comparison says');
is(sql($path . q{SELECT count(*) FROM adv}), '10000', 'advance() was tried 10000 times');

# advance() inside UPDATE: a sequence of random tokens applied to one row
# leaves the running maximum, and each write succeeds exactly when its token
# beats the maximum so far
is( sql($path . q{
CREATE TABLE res (id int PRIMARY KEY, f fencing.fence);
INSERT INTO res VALUES (1, NULL);
CREATE TABLE upd (i int, ok boolean);
DO $$
DECLARE
    r record;
BEGIN
    FOR r IN SELECT i, b FROM pairs WHERE i <= 2000 ORDER BY i LOOP
        BEGIN
            UPDATE res SET f = fencing.advance(f, r.b) WHERE id = 1;
            INSERT INTO upd VALUES (r.i, true);
        EXCEPTION WHEN SQLSTATE 'SF001' THEN
            INSERT INTO upd VALUES (r.i, false);
        END;
    END LOOP;
END $$;
SELECT count(*) FROM (
  SELECT u.ok, ROW(p.be, p.bc) > ALL (SELECT q.be, q.bc FROM pairs q WHERE q.i < p.i)
         AS newer
    FROM upd u JOIN pairs p USING (i)) s
 WHERE ok IS DISTINCT FROM newer}),
	'0', 'advance() in UPDATE accepts exactly the tokens newer than all before');
is( sql($path . q{
SELECT (SELECT f FROM res) = (SELECT max(b) FROM pairs WHERE i <= 2000)}),
	't', 'the row holds the largest token');

$node->stop;
done_testing();
