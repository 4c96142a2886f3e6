-- The SQLSTATEs of the fence type and advance(), and the behaviour that
-- a client program relies on.
BEGIN;
SELECT plan(29);

-- 22P02: bad syntax
SELECT throws_ok($$SELECT ''::fencing.fence$$, '22P02',
                 'invalid input syntax for type fence: ""', 'empty input: 22P02');
SELECT throws_ok($$SELECT 'abc'::fencing.fence$$, '22P02',
                 'invalid input syntax for type fence: "abc"', 'letters: 22P02');
SELECT throws_ok($$SELECT '1:2:3'::fencing.fence$$, '22P02', NULL, 'two colons: 22P02');
SELECT throws_ok($$SELECT '1 :2'::fencing.fence$$, '22P02', NULL, 'internal space: 22P02');
SELECT throws_ok($$SELECT '+1'::fencing.fence$$, '22P02', NULL, 'plus sign: 22P02');
SELECT throws_ok($$SELECT 'x'::text::fencing.fence$$, '22P02', NULL, 'text cast: 22P02');

-- 22003: out of range
SELECT throws_ok($$SELECT '-1'::fencing.fence$$, '22003',
                 'value "-1" is out of range for type fence', 'negative counter: 22003');
SELECT throws_ok($$SELECT '-1:0'::fencing.fence$$, '22003', NULL, 'negative epoch: 22003');
SELECT throws_ok($$SELECT '9223372036854775808'::fencing.fence$$, '22003', NULL,
                 'counter above 2^63-1: 22003');
SELECT throws_ok($$SELECT '9223372036854775808:1'::fencing.fence$$, '22003', NULL,
                 'epoch above 2^63-1: 22003');
SELECT throws_ok($$SELECT fencing.fence(-1, 0)$$, '22003', NULL, 'fence() with a negative epoch: 22003');
SELECT throws_ok($$SELECT fencing.fence(0, -1)$$, '22003', NULL, 'fence() with a negative counter: 22003');
SELECT throws_ok($$SELECT (-1)::bigint::fencing.fence$$, '22003', NULL, 'negative bigint cast: 22003');
SELECT throws_ok($$SELECT fencing.next('1:9223372036854775807')$$, '22003', NULL,
                 'next() overflow: 22003');
SELECT throws_ok($$SELECT fencing.next_epoch('9223372036854775807:0')$$, '22003', NULL,
                 'next_epoch() overflow: 22003');

-- SF001: stale token
SELECT throws_ok($$SELECT fencing.advance('1:2', '1:1')$$, 'SF001',
                 'stale fence token 1:1', 'older token: SF001');
SELECT throws_ok($$SELECT fencing.advance('1:2', '1:2')$$, 'SF001', NULL, 'equal token, strict: SF001');
SELECT throws_ok($$SELECT fencing.advance('1:2', '1:2', NULL)$$, 'SF001', NULL,
                 'equal token, NULL strict flag: SF001');
SELECT throws_ok($$SELECT fencing.advance('2:0', '1:9223372036854775807', false)$$, 'SF001', NULL,
                 'older epoch, not strict: SF001');

-- SF002: no token
SELECT throws_ok($$SELECT fencing.advance('1:2', NULL)$$, 'SF002', NULL, 'NULL token: SF002');
SELECT throws_ok($$SELECT fencing.advance(NULL, NULL)$$, 'SF002', NULL, 'NULL token on NULL fence: SF002');

-- What is accepted (compared as text: the operators live in schema fencing,
-- which is not on this search_path)
SELECT is(fencing.advance(NULL, '1:1')::text, '1:1', 'NULL current accepts any token');
SELECT is(fencing.advance('1:1', '1:2')::text, '1:2', 'a newer token is returned');
SELECT is(fencing.advance('1:2', '1:2', false)::text, '1:2', 'not strict accepts an equal token');
SELECT is(fencing.advance('1:9', '2:0')::text, '2:0', 'a new epoch beats any counter');
SELECT lives_ok($$SELECT fencing.advance('0:0', '9223372036854775807:9223372036854775807')$$,
                'the largest token is accepted');

-- The error fields a client sees for SF001
CREATE FUNCTION pg_temp.sf001_fields() RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    d text; h text;
BEGIN
    PERFORM fencing.advance('5:10', '5:9');
    RETURN NULL;
EXCEPTION WHEN SQLSTATE 'SF001' THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN ARRAY[d, h];
END $$;
SELECT matches((pg_temp.sf001_fields())[1], '5:10', 'SF001 DETAIL names the fence the token lost to');
SELECT matches((pg_temp.sf001_fields())[2], 're-acquire', 'SF001 HINT says to re-acquire the lock');

-- No SF error is in class 40 (retry loops must not retry a stale write)
SELECT ok(NOT EXISTS (SELECT 1 FROM unnest(ARRAY['SF001', 'SF002', 'SF003', 'SF004', 'SF005']) c
                       WHERE c LIKE '40%'), 'the SF codes are not in class 40');

SELECT * FROM finish();
ROLLBACK;
