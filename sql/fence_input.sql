-- Text input of fences: what is accepted, and what is refused with which
-- SQLSTATE (22P02 for bad syntax, 22003 for a part out of range).
SET search_path = public, fencing;

-- The errors as a user sees them
SELECT ''::fence;
SELECT 'abc'::fence;
SELECT '1:2:3'::fence;
SELECT '-1'::fence;
SELECT '1:-5'::fence;
SELECT '9223372036854775808'::fence;
SELECT '9223372036854775808:0'::fence;
\set VERBOSITY sqlstate
SELECT '1: 2'::fence;
SELECT '0x10'::fence;
\set VERBOSITY default

-- try_fence(input) returns the parsed value, or the SQLSTATE and message
CREATE FUNCTION try_fence(input text,
                          OUT result text, OUT state text, OUT message text)
LANGUAGE plpgsql AS $$
BEGIN
    result := input::fence::text;
EXCEPTION WHEN OTHERS THEN
    state := SQLSTATE;
    message := SQLERRM;
END $$;

-- show(s) makes white space and control characters visible, as \xNN,
-- and shortens long strings
CREATE FUNCTION show(s text) RETURNS text LANGUAGE sql AS $$
    SELECT '"' || coalesce(string_agg(CASE WHEN ascii(c) < 33 OR ascii(c) = 127
                                           THEN '\x' || lpad(to_hex(ascii(c)), 2, '0')
                                           ELSE c END, '' ORDER BY n), '') || '"'
      FROM regexp_split_to_table(CASE WHEN length(s) > 45
                                      THEN left(s, 20) || '...' || right(s, 20)
                                      ELSE s END, '') WITH ORDINALITY AS t(c, n)
     WHERE c <> ''
$$;

-- Refused inputs; the input is shown escaped so that control characters and
-- white space are visible.
SELECT n, show(i) AS input,
       t.state, t.result
  FROM (VALUES
    (1, ''),
    (2, ' '),
    (3, E'\t\n\r '),
    (4, '+1'),
    (5, '+1:2'),
    (6, '1:+2'),
    (7, '-0'),
    (8, '-0:1'),
    (9, '1:-0'),
    (10, '- 1'),
    (11, 'abc'),
    (12, '1a'),
    (13, 'a:1'),
    (14, '0x10'),
    (15, '1e3'),
    (16, '1E3'),
    (17, '1.0'),
    (18, '1.5:2'),
    (19, '1::2'),
    (20, '::'),
    (21, ':'),
    (22, ':1'),
    (23, '1:'),
    (24, '1 :2'),
    (25, '1: 2'),
    (26, '1 2'),
    (27, '1:2:3'),
    (28, '1:2x'),
    (29, '1:2 x'),
    (30, 'x 1:2'),
    (31, '1;2'),
    (32, '1,2'),
    (33, '(1,2)'),
    (34, '１:２'),          -- fullwidth digits
    (35, '١٢'),             -- Arabic-Indic digits
    (36, E'1\u00a0'),       -- no-break space is not white space
    (37, E'1:2\x01'),
    (38, E'\x7f1'),
    (39, E'1\x1b:2'),
    (40, 'NaN'),
    (41, 'Infinity'),
    (42, 'null'),
    (43, '3:42 -- comment'),
    (44, '99999999999999999999x'),    -- a syntax error wins over a range error
    (45, '-'),
    (46, '--1'),
    (47, '1--1')
  ) AS v(n, i), LATERAL try_fence(i) AS t
 ORDER BY n;

-- Out of range: a negative part or one above 9223372036854775807
SELECT n, show(i) AS input, t.state, t.result
  FROM (VALUES
    (1, '-1'),
    (2, '-1:0'),
    (3, '0:-1'),
    (4, '-9223372036854775808'),
    (5, '9223372036854775808'),
    (6, '9223372036854775808:0'),
    (7, '0:9223372036854775808'),
    (8, '18446744073709551615'),
    (9, '18446744073709551616'),
    (10, '99999999999999999999999999999999999999999999999999'),
    (11, '1:' || repeat('9', 1000)),
    (12, repeat('9', 1000) || ':1'),
    (13, ' -5 '),
    (14, '-1:-1'),
    (15, '9223372036854775807:9223372036854775808')
  ) AS v(n, i), LATERAL try_fence(i) AS t
 ORDER BY n;

-- Accepted inputs and their canonical form
SELECT n, show(i) AS input,
       t.result, t.state
  FROM (VALUES
    (1, '0'),
    (2, '00'),
    (3, '0:0'),
    (4, '007:0042'),
    (5, '000000000000000000000000000000000000042'),
    (6, '9223372036854775807'),
    (7, '09223372036854775807:09223372036854775807'),
    (8, ' 3:42 '),
    (9, E'\t3:42\t'),
    (10, E'\n3:42\n'),
    (11, E'\r\n\t 3:42 \r\n'),
    (12, E'\f3:42' || chr(11)),
    (13, '42')
  ) AS v(n, i), LATERAL try_fence(i) AS t
 ORDER BY n;

-- the input function is strict: NULL stays NULL
SELECT * FROM try_fence(NULL);

DROP FUNCTION try_fence(text);
DROP FUNCTION show(text);
