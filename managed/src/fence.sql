------------------------------------------------------------------------------
-- The type fencing.fence: (epoch, counter), ordered epoch first
------------------------------------------------------------------------------

-- A composite type under a domain, not a base type: a base type's input
-- function, its operator classes and its binary I/O need a superuser (or
-- pg_tle's base types, which are stored as text, cannot be indexed without
-- a superuser's operator class, and whose input can never be replaced).  A
-- composite needs nothing: PostgreSQL orders, hashes, indexes and sends it
-- in binary field by field, and (bigint, bigint) compares exactly as the C
-- edition's type does, epoch first.  Its text form is PostgreSQL's
-- composite form, (3,42); fencing.fence_text() writes 3:42, and everything
-- that takes a token also reads 3:42 (fencing.fence_from_text()).
CREATE TYPE fencing.fence_pair AS (epoch bigint, counter bigint);
COMMENT ON TYPE fencing.fence_pair IS
    'the two parts of a fence; use the domain fencing.fence, which refuses missing and negative parts';

-- A fence refused by the domain: a part negative (22003, as the C
-- edition's constructors report it) or missing.  STRICT: a NULL fence is
-- a fence column without a token, never refused (and never a call).
CREATE FUNCTION fencing.fence_invalid(f fencing.fence_pair) RETURNS boolean
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF f.epoch IS NULL OR f.counter IS NULL THEN
        RAISE EXCEPTION 'a fence has both an epoch and a counter'
            USING ERRCODE = 'null_value_not_allowed',
                  DETAIL = format('Fence (%s,%s) has %s.', f.epoch, f.counter,
                                  CASE WHEN f.epoch IS NULL AND f.counter IS NULL THEN 'neither'
                                       WHEN f.epoch IS NULL THEN 'no epoch' ELSE 'no counter' END),
                  HINT = 'A fence column without a token holds NULL.';
    END IF;
    RAISE EXCEPTION 'fence (%, %) is out of range', f.epoch, f.counter
        USING ERRCODE = 'numeric_value_out_of_range',
              DETAIL = 'The epoch and the counter of a fence must each be between 0 and 9223372036854775807.';
END
$$;
COMMENT ON FUNCTION fencing.fence_invalid(fencing.fence_pair) IS
    'internal: raise the error of a value the domain fencing.fence refuses';

-- NULL is a fence column without a token; (,), (3,) and negative parts
-- are no fence.  The check costs every write of a fence: two fields and
-- two comparisons, and the call only for a value it refuses.
CREATE DOMAIN fencing.fence AS fencing.fence_pair
    CONSTRAINT fence_parts CHECK (
        (VALUE).epoch OPERATOR(pg_catalog.>=) 0 AND (VALUE).counter OPERATOR(pg_catalog.>=) 0
        OR fencing.fence_invalid(VALUE));
COMMENT ON DOMAIN fencing.fence IS
    'fencing token (epoch, counter), ordered by epoch, then counter; text form (E,C), fencing.fence_text() gives E:C';

-- Not STRICT, but NULL in, NULL out all the same (a CASE without ELSE):
-- PostgreSQL inlines a SQL function only when it is not STRICT or its
-- body is, and an inlined constructor costs a tenth of a called one.  A
-- negative part is the domain's to refuse (22003, fence_invalid()).
CREATE FUNCTION fencing.fence(epoch bigint, counter bigint) RETURNS fencing.fence
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT (CASE WHEN epoch IS NOT NULL AND counter IS NOT NULL
                 THEN ROW(epoch, counter)::fencing.fence_pair END)::fencing.fence
$$;
COMMENT ON FUNCTION fencing.fence(bigint, bigint) IS
    'build a fence from its epoch and counter';

CREATE FUNCTION fencing.fence(counter bigint) RETURNS fencing.fence
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT fencing.fence(0, counter) $$;
COMMENT ON FUNCTION fencing.fence(bigint) IS 'a counter as a fence of epoch 0';

CREATE FUNCTION fencing.fence(counter integer) RETURNS fencing.fence
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT fencing.fence(0, counter::bigint) $$;
COMMENT ON FUNCTION fencing.fence(integer) IS 'a counter as a fence of epoch 0';

CREATE FUNCTION fencing.epoch(f fencing.fence) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT (f).epoch $$;
COMMENT ON FUNCTION fencing.epoch(fencing.fence) IS 'the epoch of a fence';

CREATE FUNCTION fencing.counter(f fencing.fence) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT (f).counter $$;
COMMENT ON FUNCTION fencing.counter(fencing.fence) IS 'the counter of a fence';

-- The text form of the C edition, E:C.
CREATE FUNCTION fencing.fence_text(f fencing.fence) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ((f).epoch)::pg_catalog.text OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) ((f).counter)::pg_catalog.text $$;
COMMENT ON FUNCTION fencing.fence_text(fencing.fence) IS
    'a fence written E:C, as the C edition writes it (3:42)';

-- Read a fence: E:C, a bare C (epoch 0), or the composite form (E,C), with
-- white space around; 22P02 for bad syntax, 22003 for a negative part or
-- one above the 64-bit maximum, as the C edition's input function.  No
-- regular expressions: this runs for every write that carries its token in
-- fencing.token, and string functions cost a fraction of a regex match.
CREATE FUNCTION fencing.fence_from_text(input text) RETURNS fencing.fence
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    s text := pg_catalog.btrim(input, E' \t\n\r\v\f');
    p integer := pg_catalog.strpos(s, ':');
    parts text[];
    part text;
    v bigint[] := '{}';
    bad boolean := false;
    too_big boolean := false;
BEGIN
    -- the usual token: two short runs of digits
    IF p OPERATOR(pg_catalog.>) 1
       AND pg_catalog.length(s) OPERATOR(pg_catalog.<) 38
       AND pg_catalog.translate(s, '0123456789', '') OPERATOR(pg_catalog.=) ':'
       AND p OPERATOR(pg_catalog.<) pg_catalog.length(s)
       AND p OPERATOR(pg_catalog.<=) 19
       AND pg_catalog.length(s) OPERATOR(pg_catalog.-) p OPERATOR(pg_catalog.<=) 18 THEN
        RETURN ROW(pg_catalog.substr(s, 1, p OPERATOR(pg_catalog.-) 1)::bigint,
                   pg_catalog.substr(s, p OPERATOR(pg_catalog.+) 1)::bigint)::fencing.fence_pair;
    END IF;
    IF p OPERATOR(pg_catalog.>) 0 THEN
        parts := ARRAY[pg_catalog.substr(s, 1, p OPERATOR(pg_catalog.-) 1),
                       pg_catalog.substr(s, p OPERATOR(pg_catalog.+) 1)];
    ELSIF pg_catalog.left(s, 1) OPERATOR(pg_catalog.=) '('
          AND pg_catalog.right(s, 1) OPERATOR(pg_catalog.=) ')'
          AND pg_catalog.strpos(s, ',') OPERATOR(pg_catalog.>) 0 THEN
        -- the composite form (E,C), as PostgreSQL prints a fence
        s := pg_catalog.substr(s, 2, pg_catalog.length(s) OPERATOR(pg_catalog.-) 2);
        parts := ARRAY[pg_catalog.split_part(s, ',', 1),
                       pg_catalog.substr(s, pg_catalog.strpos(s, ',') OPERATOR(pg_catalog.+) 1)];
    ELSE
        parts := ARRAY['0', s];
    END IF;
    FOREACH part IN ARRAY parts LOOP
        IF pg_catalog.left(part, 1) OPERATOR(pg_catalog.=) '-' THEN
            part := pg_catalog.substr(part, 2);
            -- "-0" is not a negative number, but it is not a fence either
            IF part OPERATOR(pg_catalog.=) '' OR pg_catalog.translate(part, '0123456789', '') OPERATOR(pg_catalog.<>) ''
               OR pg_catalog.ltrim(part, '0') OPERATOR(pg_catalog.=) '' THEN
                bad := true;
            ELSE
                too_big := true;
            END IF;
            CONTINUE;
        END IF;
        IF part OPERATOR(pg_catalog.=) '' OR pg_catalog.translate(part, '0123456789', '') OPERATOR(pg_catalog.<>) '' THEN
            bad := true;
            CONTINUE;
        END IF;
        part := pg_catalog.ltrim(part, '0');
        IF pg_catalog.length(part) OPERATOR(pg_catalog.>) 19
           OR (pg_catalog.length(part) OPERATOR(pg_catalog.=) 19
               AND part COLLATE "C" OPERATOR(pg_catalog.>) '9223372036854775807') THEN
            too_big := true;
        ELSIF NOT too_big THEN
            v := v OPERATOR(pg_catalog.||) (CASE WHEN part OPERATOR(pg_catalog.=) '' THEN 0 ELSE part::bigint END);
        END IF;
    END LOOP;
    IF bad THEN
        RAISE EXCEPTION 'invalid input syntax for type fence: "%"', input
            USING ERRCODE = 'invalid_text_representation',
                  HINT = 'A fence is written "epoch:counter" or "counter", for example "3:42".';
    ELSIF too_big THEN
        RAISE EXCEPTION 'value "%" is out of range for type fence', input
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = 'The epoch and the counter of a fence must each be between 0 and 9223372036854775807.';
    END IF;
    RETURN ROW(v[1], v[2])::fencing.fence_pair;
END
$$;
COMMENT ON FUNCTION fencing.fence_from_text(text) IS
    'read a fence written E:C, C (epoch 0) or (E,C); 22P02 for bad syntax, 22003 for a part out of range';

-- Casts.  PostgreSQL looks casts up between base types, so the casts of the
-- domain are those of its composite: bigint and integer become fences of
-- epoch 0 (explicitly and on assignment), text is read as E:C, C or (E,C),
-- and a fence cast to text is written E:C.  (A quoted literal written into
-- a fence column is read by PostgreSQL's composite input, which takes only
-- (E,C): write fencing.fence(3, 42), '(3,42)', or carry the token in
-- fencing.token.)
CREATE FUNCTION fencing.fence_pair_from_int8(counter bigint) RETURNS fencing.fence_pair
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT fencing.fence(0, counter)::fencing.fence_pair $$;
CREATE FUNCTION fencing.fence_pair_from_int4(counter integer) RETURNS fencing.fence_pair
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ SELECT fencing.fence(0, counter::bigint)::fencing.fence_pair $$;
CREATE FUNCTION fencing.fence_pair_from_text(input text) RETURNS fencing.fence_pair
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT fencing.fence_from_text(input)::fencing.fence_pair $$;
CREATE FUNCTION fencing.fence_pair_text(f fencing.fence_pair) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT ((f).epoch)::pg_catalog.text OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) ((f).counter)::pg_catalog.text $$;
COMMENT ON FUNCTION fencing.fence_pair_from_int8(bigint) IS 'internal: the cast bigint -> fence';
COMMENT ON FUNCTION fencing.fence_pair_from_int4(integer) IS 'internal: the cast integer -> fence';
COMMENT ON FUNCTION fencing.fence_pair_from_text(text) IS 'internal: the cast text -> fence (E:C, C or (E,C))';
COMMENT ON FUNCTION fencing.fence_pair_text(fencing.fence_pair) IS 'internal: the cast fence -> text (E:C)';
CREATE CAST (bigint AS fencing.fence_pair)
    WITH FUNCTION fencing.fence_pair_from_int8(bigint) AS ASSIGNMENT;
CREATE CAST (integer AS fencing.fence_pair)
    WITH FUNCTION fencing.fence_pair_from_int4(integer) AS ASSIGNMENT;
CREATE CAST (text AS fencing.fence_pair)
    WITH FUNCTION fencing.fence_pair_from_text(text);
CREATE CAST (fencing.fence_pair AS text)
    WITH FUNCTION fencing.fence_pair_text(fencing.fence_pair) AS ASSIGNMENT;

-- Comparisons with text.  PostgreSQL compares fences with its own record
-- operators (so btree indexes, ORDER BY and hash joins work with no
-- operator class of ours).  These compare a fence with a token held as
-- text (E:C, C or (E,C)), inlined into the record comparison with a
-- constant.  (A quoted literal beside a fence is read as a fence, (E,C),
-- by the operators below; with schema fencing off the search path, write
-- a typed fence: fence < fencing.fence(3, 42).)
CREATE FUNCTION fencing.fence_eq_text(a fencing.fence_pair, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.=) fencing.fence_from_text(b)::fencing.fence_pair $$;
CREATE FUNCTION fencing.text_eq_fence(a text, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT fencing.fence_from_text(a)::fencing.fence_pair OPERATOR(pg_catalog.=) b $$;
COMMENT ON FUNCTION fencing.fence_eq_text(fencing.fence_pair, text) IS 'internal: fence = a token written as text';
COMMENT ON FUNCTION fencing.text_eq_fence(text, fencing.fence_pair) IS 'internal: a token written as text = fence';
CREATE FUNCTION fencing.fence_ne_text(a fencing.fence_pair, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.<>) fencing.fence_from_text(b)::fencing.fence_pair $$;
CREATE FUNCTION fencing.text_ne_fence(a text, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT fencing.fence_from_text(a)::fencing.fence_pair OPERATOR(pg_catalog.<>) b $$;
COMMENT ON FUNCTION fencing.fence_ne_text(fencing.fence_pair, text) IS 'internal: fence <> a token written as text';
COMMENT ON FUNCTION fencing.text_ne_fence(text, fencing.fence_pair) IS 'internal: a token written as text <> fence';
CREATE FUNCTION fencing.fence_lt_text(a fencing.fence_pair, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.<) fencing.fence_from_text(b)::fencing.fence_pair $$;
CREATE FUNCTION fencing.text_lt_fence(a text, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT fencing.fence_from_text(a)::fencing.fence_pair OPERATOR(pg_catalog.<) b $$;
COMMENT ON FUNCTION fencing.fence_lt_text(fencing.fence_pair, text) IS 'internal: fence < a token written as text';
COMMENT ON FUNCTION fencing.text_lt_fence(text, fencing.fence_pair) IS 'internal: a token written as text < fence';
CREATE FUNCTION fencing.fence_le_text(a fencing.fence_pair, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.<=) fencing.fence_from_text(b)::fencing.fence_pair $$;
CREATE FUNCTION fencing.text_le_fence(a text, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT fencing.fence_from_text(a)::fencing.fence_pair OPERATOR(pg_catalog.<=) b $$;
COMMENT ON FUNCTION fencing.fence_le_text(fencing.fence_pair, text) IS 'internal: fence <= a token written as text';
COMMENT ON FUNCTION fencing.text_le_fence(text, fencing.fence_pair) IS 'internal: a token written as text <= fence';
CREATE FUNCTION fencing.fence_gt_text(a fencing.fence_pair, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.>) fencing.fence_from_text(b)::fencing.fence_pair $$;
CREATE FUNCTION fencing.text_gt_fence(a text, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT fencing.fence_from_text(a)::fencing.fence_pair OPERATOR(pg_catalog.>) b $$;
COMMENT ON FUNCTION fencing.fence_gt_text(fencing.fence_pair, text) IS 'internal: fence > a token written as text';
COMMENT ON FUNCTION fencing.text_gt_fence(text, fencing.fence_pair) IS 'internal: a token written as text > fence';
CREATE FUNCTION fencing.fence_ge_text(a fencing.fence_pair, b text) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.>=) fencing.fence_from_text(b)::fencing.fence_pair $$;
CREATE FUNCTION fencing.text_ge_fence(a text, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT fencing.fence_from_text(a)::fencing.fence_pair OPERATOR(pg_catalog.>=) b $$;
COMMENT ON FUNCTION fencing.fence_ge_text(fencing.fence_pair, text) IS 'internal: fence >= a token written as text';
COMMENT ON FUNCTION fencing.text_ge_fence(text, fencing.fence_pair) IS 'internal: a token written as text >= fence';
CREATE OPERATOR fencing.= (
    LEFTARG = fencing.fence_pair, RIGHTARG = text, FUNCTION = fencing.fence_eq_text,
    COMMUTATOR = OPERATOR(fencing.=), NEGATOR = OPERATOR(fencing.<>),
    RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel);
CREATE OPERATOR fencing.<> (
    LEFTARG = fencing.fence_pair, RIGHTARG = text, FUNCTION = fencing.fence_ne_text,
    COMMUTATOR = OPERATOR(fencing.<>), NEGATOR = OPERATOR(fencing.=),
    RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel);
CREATE OPERATOR fencing.< (
    LEFTARG = fencing.fence_pair, RIGHTARG = text, FUNCTION = fencing.fence_lt_text,
    COMMUTATOR = OPERATOR(fencing.>), NEGATOR = OPERATOR(fencing.>=),
    RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel);
CREATE OPERATOR fencing.<= (
    LEFTARG = fencing.fence_pair, RIGHTARG = text, FUNCTION = fencing.fence_le_text,
    COMMUTATOR = OPERATOR(fencing.>=), NEGATOR = OPERATOR(fencing.>),
    RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel);
CREATE OPERATOR fencing.> (
    LEFTARG = fencing.fence_pair, RIGHTARG = text, FUNCTION = fencing.fence_gt_text,
    COMMUTATOR = OPERATOR(fencing.<), NEGATOR = OPERATOR(fencing.<=),
    RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel);
CREATE OPERATOR fencing.>= (
    LEFTARG = fencing.fence_pair, RIGHTARG = text, FUNCTION = fencing.fence_ge_text,
    COMMUTATOR = OPERATOR(fencing.<=), NEGATOR = OPERATOR(fencing.<),
    RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel);
CREATE OPERATOR fencing.= (
    LEFTARG = text, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.text_eq_fence,
    COMMUTATOR = OPERATOR(fencing.=), NEGATOR = OPERATOR(fencing.<>),
    RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel);
CREATE OPERATOR fencing.<> (
    LEFTARG = text, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.text_ne_fence,
    COMMUTATOR = OPERATOR(fencing.<>), NEGATOR = OPERATOR(fencing.=),
    RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel);
CREATE OPERATOR fencing.< (
    LEFTARG = text, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.text_lt_fence,
    COMMUTATOR = OPERATOR(fencing.>), NEGATOR = OPERATOR(fencing.>=),
    RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel);
CREATE OPERATOR fencing.<= (
    LEFTARG = text, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.text_le_fence,
    COMMUTATOR = OPERATOR(fencing.>=), NEGATOR = OPERATOR(fencing.>),
    RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel);
CREATE OPERATOR fencing.> (
    LEFTARG = text, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.text_gt_fence,
    COMMUTATOR = OPERATOR(fencing.<), NEGATOR = OPERATOR(fencing.<=),
    RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel);
CREATE OPERATOR fencing.>= (
    LEFTARG = text, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.text_ge_fence,
    COMMUTATOR = OPERATOR(fencing.<=), NEGATOR = OPERATOR(fencing.<),
    RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel);

-- The six comparisons between fences, in schema fencing too, for code
-- written for the C edition (OPERATOR(fencing.<)).  Each is PostgreSQL's
-- record comparison, inlined where it is used, so an index on a fence
-- serves it as it serves the record operator.  A quoted literal beside a
-- fence is then read as a fence: (E,C).
CREATE FUNCTION fencing.fence_eq(a fencing.fence_pair, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.=) b $$;
COMMENT ON FUNCTION fencing.fence_eq(fencing.fence_pair, fencing.fence_pair) IS 'internal: fence = fence';
CREATE FUNCTION fencing.fence_ne(a fencing.fence_pair, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.<>) b $$;
COMMENT ON FUNCTION fencing.fence_ne(fencing.fence_pair, fencing.fence_pair) IS 'internal: fence <> fence';
CREATE FUNCTION fencing.fence_lt(a fencing.fence_pair, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.<) b $$;
COMMENT ON FUNCTION fencing.fence_lt(fencing.fence_pair, fencing.fence_pair) IS 'internal: fence < fence';
CREATE FUNCTION fencing.fence_le(a fencing.fence_pair, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.<=) b $$;
COMMENT ON FUNCTION fencing.fence_le(fencing.fence_pair, fencing.fence_pair) IS 'internal: fence <= fence';
CREATE FUNCTION fencing.fence_gt(a fencing.fence_pair, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.>) b $$;
COMMENT ON FUNCTION fencing.fence_gt(fencing.fence_pair, fencing.fence_pair) IS 'internal: fence > fence';
CREATE FUNCTION fencing.fence_ge(a fencing.fence_pair, b fencing.fence_pair) RETURNS boolean
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT a OPERATOR(pg_catalog.>=) b $$;
COMMENT ON FUNCTION fencing.fence_ge(fencing.fence_pair, fencing.fence_pair) IS 'internal: fence >= fence';
CREATE OPERATOR fencing.= (
    LEFTARG = fencing.fence_pair, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.fence_eq,
    COMMUTATOR = OPERATOR(fencing.=), NEGATOR = OPERATOR(fencing.<>),
    RESTRICT = pg_catalog.eqsel, JOIN = pg_catalog.eqjoinsel);
CREATE OPERATOR fencing.<> (
    LEFTARG = fencing.fence_pair, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.fence_ne,
    COMMUTATOR = OPERATOR(fencing.<>), NEGATOR = OPERATOR(fencing.=),
    RESTRICT = pg_catalog.neqsel, JOIN = pg_catalog.neqjoinsel);
CREATE OPERATOR fencing.< (
    LEFTARG = fencing.fence_pair, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.fence_lt,
    COMMUTATOR = OPERATOR(fencing.>), NEGATOR = OPERATOR(fencing.>=),
    RESTRICT = pg_catalog.scalarltsel, JOIN = pg_catalog.scalarltjoinsel);
CREATE OPERATOR fencing.<= (
    LEFTARG = fencing.fence_pair, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.fence_le,
    COMMUTATOR = OPERATOR(fencing.>=), NEGATOR = OPERATOR(fencing.>),
    RESTRICT = pg_catalog.scalarlesel, JOIN = pg_catalog.scalarlejoinsel);
CREATE OPERATOR fencing.> (
    LEFTARG = fencing.fence_pair, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.fence_gt,
    COMMUTATOR = OPERATOR(fencing.<), NEGATOR = OPERATOR(fencing.<=),
    RESTRICT = pg_catalog.scalargtsel, JOIN = pg_catalog.scalargtjoinsel);
CREATE OPERATOR fencing.>= (
    LEFTARG = fencing.fence_pair, RIGHTARG = fencing.fence_pair, FUNCTION = fencing.fence_ge,
    COMMUTATOR = OPERATOR(fencing.<=), NEGATOR = OPERATOR(fencing.<),
    RESTRICT = pg_catalog.scalargesel, JOIN = pg_catalog.scalargejoinsel);

CREATE FUNCTION fencing.next(f fencing.fence) RETURNS fencing.fence
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (f).counter = 9223372036854775807 THEN
        RAISE EXCEPTION 'fence counter out of range'
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = format('Fence %s has the largest counter there is.', fencing.fence_text(f)),
                  HINT = 'Use fencing.next_epoch() to start a new epoch.';
    END IF;
    RETURN ROW((f).epoch, (f).counter + 1)::fencing.fence_pair;
END
$$;
COMMENT ON FUNCTION fencing.next(fencing.fence) IS
    'the next fence in the same epoch (counter + 1)';

CREATE FUNCTION fencing.next_epoch(f fencing.fence) RETURNS fencing.fence
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF (f).epoch = 9223372036854775807 THEN
        RAISE EXCEPTION 'fence epoch out of range'
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = format('Fence %s has the largest epoch there is.', fencing.fence_text(f));
    END IF;
    RETURN ROW((f).epoch + 1, 0)::fencing.fence_pair;
END
$$;
COMMENT ON FUNCTION fencing.next_epoch(fencing.fence) IS
    'the first fence of the next epoch (epoch + 1, counter 0)';

-- Aggregates: PostgreSQL has no max() or min() of a composite.
CREATE FUNCTION fencing.fence_larger(a fencing.fence, b fencing.fence) RETURNS fencing.fence
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT CASE WHEN a OPERATOR(pg_catalog.>=) b THEN a ELSE b END $$;
CREATE FUNCTION fencing.fence_smaller(a fencing.fence, b fencing.fence) RETURNS fencing.fence
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    AS $$ SELECT CASE WHEN a OPERATOR(pg_catalog.<=) b THEN a ELSE b END $$;
COMMENT ON FUNCTION fencing.fence_larger(fencing.fence, fencing.fence) IS 'the larger of two fences';
COMMENT ON FUNCTION fencing.fence_smaller(fencing.fence, fencing.fence) IS 'the smaller of two fences';
CREATE AGGREGATE fencing.max(fencing.fence) (
    SFUNC = fencing.fence_larger, STYPE = fencing.fence,
    COMBINEFUNC = fencing.fence_larger, PARALLEL = SAFE
);
COMMENT ON AGGREGATE fencing.max(fencing.fence) IS 'the newest fence';
CREATE AGGREGATE fencing.min(fencing.fence) (
    SFUNC = fencing.fence_smaller, STYPE = fencing.fence,
    COMBINEFUNC = fencing.fence_smaller, PARALLEL = SAFE
);
COMMENT ON AGGREGATE fencing.min(fencing.fence) IS 'the oldest fence';

-- ZooKeeper: the fence ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff).
CREATE FUNCTION fencing.fence_from_zxid(zxid bigint, generation integer DEFAULT 0)
    RETURNS fencing.fence
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF zxid < 0 THEN
        RAISE EXCEPTION 'zxid % is out of range for a fence token', zxid
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = 'A ZooKeeper zxid is not negative: its high 32 bits are the leader''s epoch, its low 32 bits a counter.',
                  HINT = 'Pass the czxid of the lock''s znode as ZooKeeper reports it.';
    END IF;
    IF generation < 0 THEN
        RAISE EXCEPTION 'generation % is out of range for a fence token', generation
            USING ERRCODE = 'numeric_value_out_of_range',
                  DETAIL = 'The generation goes into the epoch above ZooKeeper''s own epoch: it must be between 0 and 2147483647.',
                  HINT = 'Start the generation at 0 and raise it by one after each loss of ZooKeeper''s data.';
    END IF;
    RETURN ROW((generation::bigint << 32) | (zxid >> 32), zxid & 4294967295)::fencing.fence_pair;
END
$$;
COMMENT ON FUNCTION fencing.fence_from_zxid(bigint, integer) IS
    'ZooKeeper: the fence ((generation << 32) | (zxid >> 32)) : (zxid & 0xffffffff) of a znode''s zxid; ordered as zxids are, and a raised generation beats every zxid of earlier generations (raise it after ZooKeeper loses its data)';
