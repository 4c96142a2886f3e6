/* managed/fencing_sql_pgtle.sql: registers fencing_sql 1.4 with pg_tle
 * (built by managed/build.sh from managed/src/; do not edit).
 *
 *   psql -v ON_ERROR_STOP=1 -d DATABASE -f fencing_sql_pgtle.sql
 *   psql -d DATABASE -c 'CREATE EXTENSION fencing_sql'
 *
 * Run it as a member of pgtle_admin (on RDS and Aurora: the master user,
 * after CREATE EXTENSION pg_tle).  It registers the extension in this
 * database only; CREATE EXTENSION then installs it as the role that runs
 * it, which becomes the edition's owner.
 */
\set ON_ERROR_STOP on
SELECT pgtle.install_extension(
    'fencing_sql',
    '1.4',
    'fencing tokens in SQL and PL/pgSQL for managed PostgreSQL: stop stale lock holders at the database, plus idempotency keys',
    $_fencing_sql_$

------------------------------------------------------------------------------
-- The edition: its name and version, its owner, one edition per database
------------------------------------------------------------------------------

-- The two editions are never installed in one database: both own schema
-- fencing and the same names in it.  (The plain script checks this before
-- it creates the schema; CREATE EXTENSION finds the schema of the C
-- edition in place and would fail later, on the first name both define.)
DO $edition$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension e
                WHERE e.extname OPERATOR(pg_catalog.=) 'fencing') THEN
        RAISE EXCEPTION 'the C edition of fencing is installed in this database'
            USING ERRCODE = 'duplicate_object',
                  DETAIL = 'Extension "fencing" owns schema fencing; the two editions are never installed in one database.',
                  HINT = 'Use the C edition where it is installed; to move a database from one edition to the other, see the edition''s README (moving to the C edition).';
    END IF;
END
$edition$;

GRANT USAGE ON SCHEMA fencing TO PUBLIC;

-- The role that owns the edition: the owner of schema fencing, which is the
-- role that installed it (CREATE EXTENSION creates the schema as that role;
-- the plain script creates it first).  It owns every table and function of
-- the edition, and the functions that must write the edition's tables run
-- as it (SECURITY DEFINER), as the C edition's functions switch to the
-- extension's owner.
CREATE FUNCTION fencing.owner_oid() RETURNS pg_catalog.oid
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT n.nspowner FROM pg_catalog.pg_namespace n
           WHERE n.nspname OPERATOR(pg_catalog.=) 'fencing' $$;
COMMENT ON FUNCTION fencing.owner_oid() IS
    'the role that owns the edition (the owner of schema fencing: the role that installed it)';

-- Which edition and version this database has, and how it was installed.
CREATE FUNCTION fencing.edition(OUT edition text, OUT version text, OUT installed_as text)
    RETURNS record
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT 'fencing_sql'::text, '1.4'::text,
           CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension e
                              WHERE e.extname OPERATOR(pg_catalog.=) 'fencing_sql')
                THEN 'extension' ELSE 'script' END
$$;
COMMENT ON FUNCTION fencing.edition() IS
    'fencing_sql, the edition for managed PostgreSQL: its version and whether it was installed as an extension (pg_tle, CREATE EXTENSION) or by the plain script';

-- Is the current role the edition's owner or a member of it (or a superuser)?
CREATE FUNCTION fencing.acts_for_owner() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT pg_catalog.pg_has_role(fencing.owner_oid(), 'USAGE') $$;
COMMENT ON FUNCTION fencing.acts_for_owner() IS
    'internal: true when the current role acts for the edition''s owner (a member of it, or a superuser)';

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

------------------------------------------------------------------------------
-- The errors of the SF class, raised in one place so that advance(), the
-- guard and the idempotency helpers speak with one voice (the C edition's
-- messages, DETAILs, HINTs and SF001 reasons, word for word)
------------------------------------------------------------------------------

-- SF001: token is not newer than lost_to.  rel, when given, goes into the
-- error's table and schema fields; scope_desc names the scope lost to (NULL:
-- the row).  A token equal to the fence is no lost lock but a token used
-- already: its reason (the error's constraint name) is token_already_used,
-- else stale_token.
CREATE FUNCTION fencing.raise_stale(token fencing.fence, lost_to fencing.fence,
                                    rel regclass DEFAULT NULL, scope_desc text DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := fencing.fence_text(token);
    f text := fencing.fence_text(lost_to);
    equal boolean := token = lost_to;
    -- a token of an older epoch comes from before a raise of the
    -- generation (or a failover): take the lock again, read the generation
    -- after it; a token of the fence's own epoch may also be a rightful
    -- holder's after the lock service lost its numbers
    hint text := CASE WHEN (token).epoch < (lost_to).epoch
                      THEN format('Token %s is of an older epoch than the fence: the lock was lost, or the generation was raised since it was granted. Stop writing, take the lock again and read the generation after taking it.', t)
                      ELSE format('The lock that issued token %s was lost: stop writing, re-acquire the lock and retry with the new token. If every holder is refused, even right after it takes the lock, the lock service lost its numbers: raise its generation.', t) END;
    relname text;
    nspname text;
BEGIN
    IF rel IS NULL THEN
        IF equal THEN
            RAISE EXCEPTION 'fence token % was already used', t
                USING ERRCODE = 'SF001', CONSTRAINT = 'token_already_used',
                      DETAIL = format('The resource has already accepted fence token %s.', f),
                      HINT = 'fencing.advance() in strict mode accepts a token once. Retry a write through an idempotency key, take the lock again for a new token, or pass strict => false to accept the same token again.';
        END IF;
        RAISE EXCEPTION 'stale fence token %', t
            USING ERRCODE = 'SF001', CONSTRAINT = 'stale_token',
                  DETAIL = format('The resource has already accepted fence token %s.', f),
                  HINT = hint;
    END IF;
    SELECT c.relname, n.nspname INTO relname, nspname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rel;
    IF equal THEN
        RAISE EXCEPTION 'fence token % for table "%" was already used', t, relname
            USING ERRCODE = 'SF001', CONSTRAINT = 'token_already_used',
                  DETAIL = format('The %s has already accepted fence token %s.', coalesce(scope_desc, 'row'), f),
                  HINT = 'A strict table accepts a token in one transaction only: the one whose write it accepted first. Retry a write through an idempotency key, take the lock again for a new token, or protect the table with strict => false to let one grant write in several transactions.',
                  TABLE = relname, SCHEMA = nspname;
    END IF;
    RAISE EXCEPTION 'stale fence token % for table "%"', t, relname
        USING ERRCODE = 'SF001', CONSTRAINT = 'stale_token',
              DETAIL = format('The %s has already accepted fence token %s.', coalesce(scope_desc, 'row'), f),
              HINT = hint,
              TABLE = relname, SCHEMA = nspname;
END
$$;
COMMENT ON FUNCTION fencing.raise_stale(fencing.fence, fencing.fence, regclass, text) IS
    'internal: raise SF001 (stale_token, or token_already_used for an equal token)';

-- SF001 for a writer that may not read what it lost to: the message names
-- its own token, DETAIL says that the fence (and key) is not shown.
CREATE FUNCTION fencing.raise_stale_hidden(token fencing.fence, rel regclass, scope_name text)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t text := fencing.fence_text(token);
    relname text;
    nspname text;
BEGIN
    SELECT c.relname, n.nspname INTO relname, nspname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rel;
    RAISE EXCEPTION 'stale fence token % for table "%"', t, relname
        USING ERRCODE = 'SF001', CONSTRAINT = 'stale_token',
              DETAIL = CASE WHEN scope_name IS NOT NULL
                            THEN format('A key of scope "%s" has already accepted a fence token that token %s does not beat; the key and that fence are shown only to roles that may read table "%s" past its row security policies.', scope_name, t, relname)
                            ELSE format('The row has already accepted a fence token that token %s does not beat; that fence is shown only to roles that may read table "%s" past its row security policies.', t, relname) END,
              HINT = format('The lock that issued token %s was lost: stop writing, re-acquire the lock and retry with the new token.', t),
              TABLE = relname, SCHEMA = nspname;
END
$$;
COMMENT ON FUNCTION fencing.raise_stale_hidden(fencing.fence, regclass, text) IS
    'internal: raise SF001 without showing the fence (or key) the token lost to';

-- SF002: a write that needs a token has none (what: INSERT, UPDATE, DELETE).
CREATE FUNCTION fencing.raise_token_required(rel regclass, what text) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    relname text;
    nspname text;
BEGIN
    SELECT c.relname, n.nspname INTO relname, nspname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rel;
    RAISE EXCEPTION '% on table "%" requires a fence token', what, relname
        USING ERRCODE = 'SF002',
              DETAIL = format('Table "%s" is protected by fencing and this write carries no token.', relname),
              HINT = 'Set the token with SET LOCAL fencing.token = ''<epoch>:<counter>'', or write the new token into the fence column.',
              TABLE = relname, SCHEMA = nspname;
END
$$;
COMMENT ON FUNCTION fencing.raise_token_required(regclass, text) IS
    'internal: raise SF002 for a write without a token';

-- SF002: fencing.token and the fence column disagree.
CREATE FUNCTION fencing.raise_conflicting_tokens(setting fencing.fence, col fencing.fence, rel regclass)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    relname text;
    nspname text;
BEGIN
    SELECT c.relname, n.nspname INTO relname, nspname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = rel;
    RAISE EXCEPTION 'conflicting fence tokens for table "%"', relname
        USING ERRCODE = 'SF002',
              DETAIL = format('The setting fencing.token is %s but the write puts %s in the fence column.',
                              fencing.fence_text(setting), fencing.fence_text(col)),
              HINT = 'Carry one token per write: either set fencing.token or write the fence column, not two different tokens.',
              TABLE = relname, SCHEMA = nspname;
END
$$;
COMMENT ON FUNCTION fencing.raise_conflicting_tokens(fencing.fence, fencing.fence, regclass) IS
    'internal: raise SF002 for a write whose setting and fence column carry different tokens';

REVOKE ALL ON FUNCTION fencing.raise_stale(fencing.fence, fencing.fence, regclass, text),
    fencing.raise_stale_hidden(fencing.fence, regclass, text),
    fencing.raise_token_required(regclass, text),
    fencing.raise_conflicting_tokens(fencing.fence, fencing.fence, regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.raise_stale(fencing.fence, fencing.fence, regclass, text),
    fencing.raise_stale_hidden(fencing.fence, regclass, text),
    fencing.raise_token_required(regclass, text),
    fencing.raise_conflicting_tokens(fencing.fence, fencing.fence, regclass) TO PUBLIC;

------------------------------------------------------------------------------
-- Compare-and-advance without triggers; the session's token
------------------------------------------------------------------------------

CREATE FUNCTION fencing.advance(current fencing.fence, token fencing.fence,
                                strict boolean DEFAULT true)
    RETURNS fencing.fence
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF token IS NULL THEN
        RAISE EXCEPTION 'fence token must not be null'
            USING ERRCODE = 'SF002',
                  DETAIL = 'fencing.advance() was called without a token.',
                  HINT = 'Pass the fence token that came with the lock.';
    END IF;
    IF current IS NULL
       OR (token).epoch OPERATOR(pg_catalog.>) (current).epoch
       OR ((token).epoch OPERATOR(pg_catalog.=) (current).epoch
           AND ((token).counter OPERATOR(pg_catalog.>) (current).counter
                OR ((token).counter OPERATOR(pg_catalog.=) (current).counter
                    AND strict IS NOT DISTINCT FROM false))) THEN
        RETURN token;
    END IF;
    PERFORM fencing.raise_stale(token, current);
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION fencing.advance(fencing.fence, fencing.fence, boolean) IS
    'return token if it beats current (>, or >= when not strict); raise SF001 otherwise';

-- A token written as text (3:42, or (3,42)): PostgreSQL reads a quoted
-- literal for a fence parameter with the composite's input, so these take
-- it as text and read it as the C edition does.
CREATE FUNCTION fencing.advance(current fencing.fence, token text, strict boolean DEFAULT true)
    RETURNS fencing.fence
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT fencing.advance(current, fencing.fence_from_text(token), strict) $$;
COMMENT ON FUNCTION fencing.advance(fencing.fence, text, boolean) IS
    'fencing.advance() with the token written E:C';
CREATE FUNCTION fencing.advance(current text, token text, strict boolean DEFAULT true)
    RETURNS fencing.fence
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT fencing.advance(fencing.fence_from_text(current), fencing.fence_from_text(token), strict) $$;
COMMENT ON FUNCTION fencing.advance(text, text, boolean) IS
    'fencing.advance() with both fences written E:C';

-- fencing.token for the rest of the transaction, as SET LOCAL sets it, from
-- a value a driver binds as a parameter ($1), which SET LOCAL cannot take.
-- Stored as E:C.
CREATE FUNCTION fencing.set_token(token fencing.fence) RETURNS fencing.fence
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
BEGIN
    IF token IS NULL THEN
        RAISE EXCEPTION 'fence token must not be null'
            USING ERRCODE = 'SF002',
                  DETAIL = 'fencing.set_token() was called without a token.',
                  HINT = 'Pass the fence token that came with the lock.';
    END IF;
    PERFORM pg_catalog.set_config('fencing.token', fencing.fence_text(token), true);
    RETURN token;
END
$$;
COMMENT ON FUNCTION fencing.set_token(fencing.fence) IS
    'sets fencing.token for the rest of the transaction, as SET LOCAL does (set_config(''fencing.token'', token, true)), from a value bound as a parameter ($1); returns the token; SF002 for NULL';
CREATE FUNCTION fencing.set_token(token text) RETURNS fencing.fence
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.set_token(fencing.fence_from_text(token)) $$;
COMMENT ON FUNCTION fencing.set_token(text) IS
    'fencing.set_token() with the token written E:C (a parameter bound as text)';

------------------------------------------------------------------------------
-- The catalog: protected tables, scopes and their storage
------------------------------------------------------------------------------

-- One row per protected table, as in the C edition, and the guard function
-- that protect() wrote for it (guard_function): the edition writes one
-- PL/pgSQL trigger function per protected table, with the table's fence
-- and key columns, its scope's storage and its settings written into its
-- code, so that a write reads no catalog and no setting of the table, and
-- every statement in it keeps its plan for the session.
CREATE TABLE fencing.protected (
    relid regclass PRIMARY KEY,
    fence_column name NOT NULL,
    key_columns name[],
    strict boolean NOT NULL DEFAULT true,
    scope_name text NOT NULL,
    lease text CHECK (lease OPERATOR(pg_catalog.<>) ''),
    guard_function regprocedure NOT NULL UNIQUE
);
COMMENT ON TABLE fencing.protected IS
    'tables protected by the fencing guard, with their settings; written by fencing.protect()';
COMMENT ON COLUMN fencing.protected.lease IS
    'the lease whose current, live token every write must carry (NULL: none)';
COMMENT ON COLUMN fencing.protected.guard_function IS
    'the trigger function fencing.protect() wrote for the table (its zz_fencing_guard trigger runs it)';

-- One row per key or table scope: who owns it, where its fences are kept.
-- A scope's fences live in a table of their own, fencing.scope_<h> (<h>: 16
-- hex digits of the SHA-256 of the scope's name), whose key columns have
-- the base types and collations of the protected tables' key columns and a
-- unique index NULLS NOT DISTINCT on them, so that two keys are one key
-- exactly when their types' default btree equality says so, whatever the
-- session's settings; writer is the function that checks and advances a
-- key's fence there (the guard calls it; it runs as the edition's owner,
-- who alone may write the storage).
CREATE TABLE fencing.scope_storage (
    scope_name text PRIMARY KEY
        CHECK (pg_catalog.octet_length(scope_name) OPERATOR(pg_catalog.>=) 1
               AND pg_catalog.octet_length(scope_name) OPERATOR(pg_catalog.<=) 255),
    owner regrole NOT NULL,
    storage regclass NOT NULL UNIQUE,
    table_scope boolean NOT NULL,
    writer regprocedure NOT NULL UNIQUE
);
COMMENT ON TABLE fencing.scope_storage IS
    'one row per key or table scope: the role that owns it (whose protect() created it), the table that holds its fences and the function that advances them';
COMMENT ON COLUMN fencing.scope_storage.owner IS
    'only this role, its members and the edition''s owner may protect tables into the scope';

REVOKE ALL ON fencing.protected, fencing.scope_storage FROM PUBLIC;
GRANT SELECT ON fencing.protected, fencing.scope_storage TO PUBLIC;

-- A key as fencing.scopes and the DETAIL of SF001 spell it: the JSON array
-- of the values' text forms (null for NULL), for people only.
CREATE FUNCTION fencing.scope_key(VARIADIC key_values text[]) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT '[' || coalesce(string_agg(coalesce(to_json(v.value)::text, 'null'), ',' ORDER BY v.ord), '') || ']'
      FROM unnest(key_values) WITH ORDINALITY AS v(value, ord)
$$;
COMMENT ON FUNCTION fencing.scope_key(text[]) IS
    'the key under which fencing.scopes shows the fence of these key values';

-- May the current role read the keys and fences of a scope?  Its owner
-- (and members), the edition's owner, and roles that may read every table
-- protected into it past their row security.  The row security policy of
-- every storage table (SELECT only: only the edition's owner writes it).
CREATE FUNCTION fencing.may_read_scope(scope_name text) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT coalesce((SELECT pg_has_role(s.owner, 'USAGE') FROM fencing.scope_storage s
                      WHERE s.scope_name = may_read_scope.scope_name), false)
        OR fencing.acts_for_owner()
        OR coalesce((SELECT bool_and(has_table_privilege(p.relid, 'SELECT') AND NOT row_security_active(p.relid))
                       FROM fencing.protected p
                      WHERE p.scope_name = may_read_scope.scope_name AND p.key_columns IS NOT NULL
                        AND EXISTS (SELECT FROM pg_class c WHERE c.oid = p.relid)), false)
$$;
COMMENT ON FUNCTION fencing.may_read_scope(text) IS
    'internal: may the current role read a scope''s keys and fences (its owner, the edition''s owner, readers of all its tables)';

-- The fences of every scope the caller may read (fencing.may_read_scope(),
-- the row security of the storage tables).
CREATE FUNCTION fencing.scope_fences(OUT scope_name text, OUT key text, OUT fence fencing.fence)
    RETURNS SETOF record
    LANGUAGE plpgsql STABLE PARALLEL RESTRICTED
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s record;
    keys text;
BEGIN
    FOR s IN SELECT r.scope_name AS name, r.storage, r.table_scope
               FROM fencing.scope_storage r
               JOIN pg_class c ON c.oid = r.storage
              WHERE fencing.may_read_scope(r.scope_name)
              ORDER BY r.scope_name
    LOOP
        IF s.table_scope THEN
            keys := '''[]''';
        ELSE
            SELECT 'fencing.scope_key(VARIADIC ARRAY[' ||
                   string_agg(format('(x.%I)::text', a.attname), ', ' ORDER BY a.attnum) || '])'
              INTO keys
              FROM pg_attribute a
             WHERE a.attrelid = s.storage AND a.attnum > 0 AND NOT a.attisdropped
               AND a.attname NOT IN ('fence', 'xact');
        END IF;
        RETURN QUERY EXECUTE format('SELECT $1, %s, x.fence::fencing.fence FROM %s x', keys, s.storage)
            USING s.name;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.scope_fences() IS
    'every key''s fence of every key or table scope the caller may read (read it through the view fencing.scopes)';

CREATE VIEW fencing.scopes AS
    SELECT f.scope_name, f.key, f.fence FROM fencing.scope_fences() f;
COMMENT ON VIEW fencing.scopes IS
    'the highest accepted token of each key of each key or table scope, shown to roles that own the scope or may read every table protected into it; key shows the key values as text, for people';
GRANT SELECT ON fencing.scopes TO PUBLIC;

------------------------------------------------------------------------------
-- The guard: helpers of the trigger functions that protect() writes
------------------------------------------------------------------------------

-- The protected table whose guard covers relid: relid itself, or the
-- nearest ancestor (partitioned table or inheritance parent) in
-- fencing.protected.  For the slow paths (errors, counters) only.
CREATE FUNCTION fencing.protected_root(relid oid) RETURNS regclass
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE up(rel, depth) AS (
        SELECT relid, 0
        UNION ALL
        SELECT i.inhparent, up.depth + 1 FROM pg_inherits i JOIN up ON i.inhrelid = up.rel
         WHERE up.depth < 100)
    SELECT p.relid FROM up JOIN fencing.protected p ON p.relid::oid = up.rel
     ORDER BY up.depth LIMIT 1
$$;
COMMENT ON FUNCTION fencing.protected_root(oid) IS
    'internal: the protected table whose guard covers relid (itself, or the partitioned table or inheritance parent it belongs to)';

-- The edition's own settings are named fencing_sql.*: fencing.token and
-- fencing.bypass are the C edition's, and where its library is loaded
-- (a server moving to it) it reserves every other name under fencing.

-- Has this transaction's guard written a row version of relid with token?
-- A transaction-local setting, fencing_sql.accepted, lists the (table, token)
-- pairs whose writes the guard accepted: a row version whose fence is such
-- a token was written by this transaction's guard, or by an earlier
-- transaction with the same token (told apart, where the table has a
-- primary key, by the version's xmin: see fencing.xid_is_mine()).
CREATE FUNCTION fencing.xid_is_mine(x xid) RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    cur numeric := pg_current_xact_id()::text::numeric;
    full_xid numeric := cur - mod(cur, 4294967296) + x::text::numeric;
BEGIN
    -- the xids of this transaction (subtransactions' above the top one's)
    -- lie within 2^31 of the top-level xid
    IF full_xid > cur + 2147483648 THEN
        full_xid := full_xid - 4294967296;
    ELSIF full_xid < cur - 2147483648 THEN
        full_xid := full_xid + 4294967296;
    END IF;
    -- the version is the newest one (locked by the write): its creator has
    -- committed, or it is this transaction (or one of its subtransactions)
    RETURN full_xid >= 3 AND pg_xact_status(full_xid::text::xid8) = 'in progress';
END
$$;
COMMENT ON FUNCTION fencing.xid_is_mine(xid) IS
    'internal: true when the row version with this xmin was written by the current transaction';

-- May the current role see the key and the fence a write to rel lost to?
-- Roles that may read the table (or its protected root) past its row
-- security, the edition's owner, and (when no row security applies) the
-- scope's owner.  For the error path only.
CREATE FUNCTION fencing.may_read_keys(rel oid, scope_name text) RETURNS boolean
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    root oid := fencing.protected_root(rel);
    o oid;
BEGIN
    IF has_table_privilege(rel, 'SELECT') AND NOT row_security_active(rel) THEN
        RETURN true;
    END IF;
    IF root IS NOT NULL AND root <> rel AND has_table_privilege(root, 'SELECT')
       AND NOT row_security_active(root) THEN
        RETURN true;
    END IF;
    IF fencing.acts_for_owner() THEN
        RETURN true;
    END IF;
    IF scope_name IS NOT NULL AND NOT row_security_active(rel) THEN
        SELECT s.owner INTO o FROM fencing.scope_storage s WHERE s.scope_name = may_read_keys.scope_name;
        RETURN o IS NOT NULL AND pg_has_role(o, 'USAGE');
    END IF;
    RETURN false;
END
$$;
COMMENT ON FUNCTION fencing.may_read_keys(oid, text) IS
    'internal: may the current role see the keys and fences of table rel (for SF001''s DETAIL)';

------------------------------------------------------------------------------
-- Statistics: counted in sequences, which no rollback takes back
------------------------------------------------------------------------------

-- Each protected table counts its refusals (and bypasses) in sequences of
-- its own, fencing.<guard function>_<counter>: a refused write's
-- transaction rolls back, and nextval() is the one write a rollback keeps,
-- so the counts are exact, without shared memory.  Accepted writes are not
-- counted (a counter row or sequence that every write advances would cost
-- every write and make all writers of a table queue on one page).
CREATE FUNCTION fencing.count(relid oid, counter text) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g regprocedure;
    seq regclass;
BEGIN
    SELECT p.guard_function INTO g FROM fencing.protected p
     WHERE p.relid::oid = fencing.protected_root(count.relid);
    IF g IS NULL OR counter NOT IN ('rejected_stale', 'rejected_missing', 'bypassed',
                                    'rejected_already_used', 'rejected_lease_expired') THEN
        RETURN;
    END IF;
    seq := to_regclass(format('fencing.%I', (SELECT proname FROM pg_proc WHERE oid = g) || '_' || counter));
    IF seq IS NOT NULL THEN
        PERFORM nextval(seq);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.count(oid, text) IS
    'internal: count a refusal (or bypass) of a write to a protected table';

------------------------------------------------------------------------------
-- Break glass: fencing.bypass
------------------------------------------------------------------------------

-- fencing.bypass = on lets a superuser's writes through without a token,
-- each logged and counted.  The edition cannot refuse the setting when it
-- is made (no library, no check hook), so the guard judges the write of
-- any other role that set it as if it were off, and refuses a value that is
-- not a boolean (22023).  Managed services have no superuser: there, fencing.unprotect()
-- by the table's owner is the way to write without tokens.
CREATE FUNCTION fencing.bypassing(relid oid, what text) RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v text := lower(btrim(current_setting('fencing.bypass', true)));
    relname text := (SELECT c.relname FROM pg_class c WHERE c.oid = relid);
BEGIN
    IF v IS NULL OR v IN ('', 'off', 'of', 'false', 'fals', 'fal', 'fa', 'f', 'no', 'n', '0') THEN
        RETURN false;
    END IF;
    IF v NOT IN ('on', 'true', 'tru', 'tr', 't', 'yes', 'ye', 'y', '1') THEN
        RAISE EXCEPTION 'parameter "fencing.bypass" requires a Boolean value'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('fencing.bypass is "%s".', current_setting('fencing.bypass', true));
    END IF;
    IF NOT (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user) THEN
        -- only a superuser's bypass counts: another role's write is judged
        -- as if the setting were off (the C edition refuses the SET itself)
        RETURN false;
    END IF;
    PERFORM fencing.count(relid, 'bypassed');
    RAISE LOG 'fencing bypass: % on table "%" let through without a fence check', what, relname;
    RETURN true;
END
$$;
COMMENT ON FUNCTION fencing.bypassing(oid, text) IS
    'internal: true when fencing.bypass lets this write through (a superuser''s; other roles'' writes are judged as without it)';

-- A write refused for want of a token (SF002): counted, then raised.
CREATE FUNCTION fencing.refuse_missing(relid oid, what text) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM fencing.count(relid, 'rejected_missing');
    PERFORM fencing.raise_token_required(relid, what);
END
$$;

-- A write whose setting and fence column disagree (SF002).
CREATE FUNCTION fencing.refuse_conflict(relid oid, setting fencing.fence, col fencing.fence) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM fencing.count(relid, 'rejected_missing');
    PERFORM fencing.raise_conflicting_tokens(setting, col, relid);
END
$$;

-- A write whose token lost (SF001): counted by reason, then raised with the
-- fence it lost to, or without it for a writer that may not read it.
-- scope_name and key: the key or table scope lost to (NULL: the row).
CREATE FUNCTION fencing.refuse_stale(relid oid, token fencing.fence, lost_to fencing.fence,
                                     scope_name text, key text) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM fencing.count(relid, CASE WHEN token = lost_to THEN 'rejected_already_used'
                                      ELSE 'rejected_stale' END);
    IF NOT fencing.may_read_keys(relid, scope_name) THEN
        PERFORM fencing.raise_stale_hidden(token, relid, scope_name);
    END IF;
    PERFORM fencing.raise_stale(token, lost_to, relid,
                                CASE WHEN scope_name IS NOT NULL AND key IS NOT NULL
                                     THEN format('scope "%s" key %s', scope_name, key)
                                     WHEN scope_name IS NOT NULL
                                     THEN format('scope "%s"', scope_name) END);
END
$$;

REVOKE ALL ON FUNCTION fencing.refuse_missing(oid, text), fencing.refuse_conflict(oid, fencing.fence, fencing.fence),
    fencing.refuse_stale(oid, fencing.fence, fencing.fence, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.refuse_missing(oid, text), fencing.refuse_conflict(oid, fencing.fence, fencing.fence),
    fencing.refuse_stale(oid, fencing.fence, fencing.fence, text, text) TO PUBLIC;
COMMENT ON FUNCTION fencing.refuse_missing(oid, text) IS 'internal: count and raise SF002 (no token)';
COMMENT ON FUNCTION fencing.refuse_conflict(oid, fencing.fence, fencing.fence) IS 'internal: count and raise SF002 (two tokens)';
COMMENT ON FUNCTION fencing.refuse_stale(oid, fencing.fence, fencing.fence, text, text) IS 'internal: count and raise SF001';

-- TRUNCATE of a protected table (or of a member of its tree): SF002, always.
CREATE FUNCTION fencing.guard_truncate() RETURNS trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    root regclass := fencing.protected_root(TG_RELID);
BEGIN
    IF TG_OP <> 'TRUNCATE' OR TG_LEVEL <> 'STATEMENT' THEN
        RAISE EXCEPTION 'fencing.guard_truncate() must be fired for TRUNCATE'
            USING ERRCODE = 'E0000';
    END IF;
    PERFORM fencing.count(TG_RELID, 'rejected_missing');
    RAISE EXCEPTION 'cannot truncate protected table "%"', TG_TABLE_NAME
        USING ERRCODE = 'SF002',
              DETAIL = 'TRUNCATE would remove every row and its fence at once, with no token to check.',
              HINT = format('Call fencing.unprotect(''%s'') first if you really mean it.',
                            (SELECT format('%I.%I', n.nspname, c.relname)
                               FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE c.oid = coalesce(root, TG_RELID::regclass))),
              TABLE = TG_TABLE_NAME, SCHEMA = TG_TABLE_SCHEMA;
END
$$;
COMMENT ON FUNCTION fencing.guard_truncate() IS
    'refuses TRUNCATE of protected tables (installed by fencing.protect)';

------------------------------------------------------------------------------
-- protect() and unprotect(): the code written for each protected table
------------------------------------------------------------------------------

-- Who is calling.  A function that runs as the edition's owner (SECURITY
-- DEFINER) sees its owner as current_user, never its caller; protect() and
-- unprotect() must know the caller (it owns the table, it owns the scope).
-- The caller proves who it is with a temporary table it creates in its own
-- session just before the call (a role can create tables owned by itself
-- only), and drops right after: fencing.caller_of() reads that table's
-- owner, in this session's temporary schema.
CREATE FUNCTION fencing.caller_proof() RETURNS oid
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    n text := format('fencing_caller_%s_%s', pg_backend_pid(), floor(random() * 1e12)::bigint);
BEGIN
    EXECUTE format('CREATE TEMPORARY TABLE %I () ON COMMIT DROP', n);
    RETURN (SELECT c.oid FROM pg_class c
             WHERE c.relname = n AND c.relnamespace = pg_my_temp_schema());
END
$$;
COMMENT ON FUNCTION fencing.caller_proof() IS
    'internal: a temporary table of the calling role, proof of who calls a function that runs as the edition''s owner';

CREATE FUNCTION fencing.caller_of(proof oid) RETURNS oid
    LANGUAGE plpgsql STABLE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    who oid;
BEGIN
    SELECT c.relowner INTO who FROM pg_class c
     WHERE c.oid = proof AND c.relnamespace = pg_my_temp_schema()
       AND c.relname LIKE 'fencing\_caller\_%' AND c.relkind = 'r';
    IF who IS NULL THEN
        RAISE EXCEPTION 'no proof of the calling role'
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Call fencing.protect() and fencing.unprotect(), not the functions they use.';
    END IF;
    RETURN who;
END
$$;
COMMENT ON FUNCTION fencing.caller_of(oid) IS
    'internal: the role that made the proof (fencing.caller_proof())';

CREATE FUNCTION fencing.drop_proof(proof oid) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF proof IS NOT NULL AND EXISTS (SELECT FROM pg_class c WHERE c.oid = proof
                                      AND c.relnamespace = pg_my_temp_schema()) THEN
        EXECUTE format('DROP TABLE %s', proof::regclass);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.drop_proof(oid) IS 'internal: drop a proof of the calling role';

-- Check a scope name: 1 to 255 bytes (22023).
CREATE FUNCTION fencing.check_scope_name(scope_name text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF scope_name = '' THEN
        RAISE EXCEPTION 'scope_name must not be empty'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass NULL to use the table''s qualified name.';
    ELSIF octet_length(scope_name) > 255 THEN
        RAISE EXCEPTION 'scope_name is too long'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The scope name has %s bytes; the maximum is 255.', octet_length(scope_name));
    END IF;
END
$$;

-- The storage table and the writer of a new scope, as the edition's owner:
-- fencing.scope_<h>(key columns..., fence, xact) with a unique index NULLS
-- NOT DISTINCT on the key columns, and fencing.scope_<h>_write(keys...,
-- token, strict, seed), which checks a write's token against the key's
-- fence and advances it, in one statement that locks the key's row:
-- INSERT ... ON CONFLICT DO UPDATE.  xact is the transaction that advanced
-- the fence to its value, so that an equal token is accepted again in that
-- transaction only (strict mode); seeding leaves it NULL.
CREATE FUNCTION fencing.scope_create(scope_name text, owner regrole,
                                     key_types regtype[], key_collations oid[])
    RETURNS regclass
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    h text := substr(encode(sha256(convert_to(scope_name, current_setting('server_encoding'))), 'hex'), 1, 16);
    tname text;
    attempt int := 1;
    table_scope boolean := cardinality(key_types) = 0;
    cols text := '';
    keys text := '';
    params text := '';
    args text := '';
    n int := cardinality(key_types);
    i int;
    storage regclass;
    writer regprocedure;
    eqops text[];
BEGIN
    LOOP
        tname := 'scope_' || h || CASE WHEN attempt > 1 THEN '_' || attempt ELSE '' END;
        EXIT WHEN to_regclass(format('fencing.%I', tname)) IS NULL
              AND to_regprocedure(format('fencing.%I(fencing.fence)', tname || '_write')) IS NULL
              AND NOT EXISTS (SELECT FROM pg_proc p WHERE p.proname = tname || '_write'
                                 AND p.pronamespace = 'fencing'::regnamespace);
        attempt := attempt + 1;
    END LOOP;
    IF table_scope THEN
        cols := 'key_1 boolean NOT NULL';
        keys := 'key_1';
        args := 'true';
    ELSE
        FOR i IN 1 .. n LOOP
            cols := cols || format('key_%s %s%s, ', i, format_type(key_types[i], NULL),
                                   CASE WHEN key_collations[i] <> 0
                                        THEN ' COLLATE ' || key_collations[i]::regcollation::text ELSE '' END);
            keys := keys || CASE WHEN i > 1 THEN ', ' ELSE '' END || 'key_' || i;
            params := params || format('p%s %s, ', i, format_type(key_types[i], NULL));
            args := args || CASE WHEN i > 1 THEN ', ' ELSE '' END || '$' || i;
        END LOOP;
        cols := left(cols, -2);
    END IF;
    BEGIN
        -- (fence a pair, not the domain: only the writer writes it, from
        -- tokens already checked, and the domain's check would cost every
        -- write of the scope)
        EXECUTE format('CREATE TABLE fencing.%I (%s, fence fencing.fence_pair NOT NULL, xact xid8) WITH (fillfactor = 50)',
                       tname, cols);
        EXECUTE format('CREATE UNIQUE INDEX %I ON fencing.%I (%s) NULLS NOT DISTINCT',
                       tname || '_key', tname, keys);
    EXCEPTION WHEN undefined_object OR undefined_function THEN
        RAISE EXCEPTION 'a key type of fencing scope "%" has no default btree operator class', scope_name
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = SQLERRM,
                  HINT = 'Use key columns of types with a default btree operator class, such as text, integer, uuid or date.';
    END;
    storage := format('fencing.%I', tname)::regclass;
    -- each key column's equality, the one its index compares with (an
    -- extension's type has its operator in the extension's schema)
    SELECT array_agg(format('OPERATOR(%I.%s)', n.nspname, o.oprname) ORDER BY k.ord) INTO eqops
      FROM pg_index x
      CROSS JOIN LATERAL unnest(x.indclass::oid[]) WITH ORDINALITY AS k(opclass, ord)
      JOIN pg_opclass c ON c.oid = k.opclass
      JOIN pg_amop a ON a.amopfamily = c.opcfamily AND a.amoplefttype = c.opcintype
                    AND a.amoprighttype = c.opcintype AND a.amopstrategy = 3
      JOIN pg_operator o ON o.oid = a.amopopr
      JOIN pg_namespace n ON n.oid = o.oprnamespace
     WHERE x.indexrelid = format('fencing.%I', tname || '_key')::regclass;
    -- readable by the roles fencing.may_read_scope() names, writable by
    -- its owner (the edition's) alone
    EXECUTE format('REVOKE ALL ON %s FROM PUBLIC', storage);
    EXECUTE format('ALTER TABLE %s ENABLE ROW LEVEL SECURITY', storage);
    EXECUTE format('CREATE POLICY readers ON %s FOR SELECT USING (fencing.may_read_scope(%L))', storage, scope_name);
    EXECUTE format('GRANT SELECT ON %s TO PUBLIC', storage);
    -- the writer: every name qualified, no SET clause (it runs for every
    -- write of the scope's tables, and a SET clause costs a GUC save and
    -- restore per call)
    EXECUTE format($f$
        CREATE FUNCTION fencing.%1$I(%2$s te bigint, tc bigint, strict boolean, seed boolean DEFAULT false)
            RETURNS fencing.fence_pair
            LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
        AS $w$
        DECLARE
            fe bigint;
            fc bigint;
            mine boolean;
        BEGIN
            IF te IS NULL THEN
                -- no token: the key's fence when this transaction wrote it, else NULL
                SELECT s.fence INTO fe FROM fencing.%3$I AS s
                 WHERE %7$s AND s.xact OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id();
                RETURN fe;
            ELSIF seed THEN
                INSERT INTO fencing.%3$I AS s (%4$s, fence, xact) VALUES (%5$s, ROW(te, tc)::fencing.fence_pair, NULL)
                ON CONFLICT (%4$s) DO UPDATE SET fence = EXCLUDED.fence
                 WHERE s.fence OPERATOR(pg_catalog.<) EXCLUDED.fence;
                RETURN NULL;
            END IF;
            -- the usual write: a newer token for a key there is
            UPDATE fencing.%3$I AS s SET fence = ROW(te, tc)::fencing.fence_pair, xact = pg_catalog.pg_current_xact_id()
             WHERE %6$s AND s.fence OPERATOR(pg_catalog.<) ROW(te, tc)::fencing.fence_pair;
            IF FOUND THEN
                RETURN NULL;
            END IF;
            -- a new key (or a NULL one), the same token or an older one
            INSERT INTO fencing.%3$I AS s (%4$s, fence, xact)
            VALUES (%5$s, ROW(te, tc)::fencing.fence_pair, pg_catalog.pg_current_xact_id())
            ON CONFLICT (%4$s) DO UPDATE
               SET fence = CASE WHEN s.fence OPERATOR(pg_catalog.<) EXCLUDED.fence
                                THEN EXCLUDED.fence ELSE s.fence END,
                   xact = CASE WHEN s.fence OPERATOR(pg_catalog.<) EXCLUDED.fence
                               THEN EXCLUDED.xact ELSE s.xact END
            RETURNING (s.fence).epoch, (s.fence).counter,
                      s.xact OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id() INTO fe, fc, mine;
            IF fe OPERATOR(pg_catalog.=) te AND fc OPERATOR(pg_catalog.=) tc AND (mine OR NOT strict) THEN
                RETURN NULL;
            END IF;
            RETURN ROW(fe, fc)::fencing.fence_pair;
        END
        $w$
        $f$, tname || '_write', params, tname, keys,
        CASE WHEN table_scope THEN 'true'
             ELSE (SELECT string_agg(format('p%s', g.g), ', ' ORDER BY g.g) FROM generate_series(1, n) g(g)) END,
        -- the key there is: equal, so that its index finds it (a NULL key
        -- is the upsert's)
        CASE WHEN table_scope THEN 's.key_1'
             ELSE (SELECT string_agg(format('s.key_%s %s p%s', g.g, eqops[g.g], g.g), ' AND ' ORDER BY g.g)
                     FROM generate_series(1, n) g(g)) END,
        CASE WHEN table_scope THEN 's.key_1'
             ELSE (SELECT string_agg(format('(s.key_%s %s p%s OR (s.key_%s IS NULL AND p%s IS NULL))',
                                            g.g, eqops[g.g], g.g, g.g, g.g), ' AND ' ORDER BY g.g)
                     FROM generate_series(1, n) g(g)) END);
    writer := (SELECT p.oid FROM pg_proc p WHERE p.proname = tname || '_write'
                AND p.pronamespace = 'fencing'::regnamespace)::regprocedure;
    EXECUTE format('COMMENT ON FUNCTION %s IS %L', writer,
                   format('internal: check a write''s token against a key''s fence of fencing scope %s and advance it', scope_name));
    EXECUTE format('COMMENT ON TABLE %s IS %L', storage,
                   format('the fences of fencing scope %s: one row per key', scope_name));
    INSERT INTO fencing.scope_storage (scope_name, owner, storage, table_scope, writer)
    VALUES (scope_name, owner, storage, table_scope, writer);
    RETURN storage;
END
$$;
COMMENT ON FUNCTION fencing.scope_create(text, regrole, regtype[], oid[]) IS
    'internal: create and register the storage table and writer of a new scope (protect() does this itself)';

-- The fast paths of a guard (see guard_source): the usual accepted write,
-- decided in one or two expressions and left at once.  Part 'first' is
-- the guard's first statement, before its other variables are made: the
-- write whose token is the fence column's, with no setting; part 'inner'
-- follows once the setting is read into s: the rest of row scope.  Row
-- scope: a
-- write whose token is the fence column's (an INSERT's, or an UPDATE's
-- newer than the row's fence: an INSERT's OLD is NULL), an INSERT without
-- a token, an UPDATE whose token is the setting's (newer than the row's
-- fence, the column unchanged or the token, in a transaction whose guards
-- have written nothing yet: fencing_sql.written).  Key and table scope: an
-- INSERT whose token is the column's, accepted by the scope's writer.  A
-- partitioned table's UPDATE always takes the general path (a row that
-- moves takes its token to its DELETE there).  A table without a primary
-- key remembers each accepted token for the transaction
-- (fencing_sql.accepted); see guard_source.  Whatever they do not
-- decide, the general path does.
--
-- What they cost is what PostgreSQL does for every expression a
-- PL/pgSQL function evaluates in a transaction for the first time: it
-- prepares it anew, each function call in it with a permission check; so
-- the conditions test the common case first and call few functions.
CREATE FUNCTION fencing.guard_fast_source(key_columns name[], strict boolean, writer regprocedure,
                                          lease text, remember boolean, partitioned boolean,
                                          part text)
    RETURNS text
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rem text := '';
    keys text;
    src text;
BEGIN
    IF lease IS NOT NULL THEN
        RETURN '';      -- every write is checked against its lease
    END IF;
    IF remember THEN
        rem := $r$
        a := CASE WHEN pg_catalog.strpos(coalesce(pg_catalog.current_setting('fencing_sql.accepted', true), ''),
                                         pg_catalog.format(',%s/%s,', TG_RELID, @T@)) OPERATOR(pg_catalog.=) 0
                  THEN pg_catalog.set_config('fencing_sql.accepted',
                           coalesce(nullif(pg_catalog.current_setting('fencing_sql.accepted', true), ''), ',')
                           OPERATOR(pg_catalog.||) pg_catalog.format('%s/%s,', TG_RELID, @T@), true) END;$r$;
    END IF;
    IF part = 'first' THEN
        -- the usual write, decided in one expression before the function's
        -- variables are made: no setting, and the fence column's token
        -- newer than the row's (row scope) or accepted by the scope's
        -- writer (an INSERT in key or table scope; a refused one is the
        -- general path's to report: it asks the writer again, which
        -- changes nothing)
        IF key_columns IS NULL THEN
            src := CASE WHEN partitioned
                        THEN 'TG_OP OPERATOR(pg_catalog.=) ''INSERT'' AND NEW.@F@ IS NOT NULL'
                        ELSE 'NEW.@F@ IS NOT NULL AND (OLD.@F@ IS NULL OR NEW.@F@ OPERATOR(pg_catalog.>) OLD.@F@)' END
                   || ' AND @MARK@';
        ELSE
            keys := CASE WHEN cardinality(key_columns) = 0 THEN ''
                         ELSE (SELECT string_agg(format('NEW.%I, ', k), '' ORDER BY o)
                                 FROM unnest(key_columns) WITH ORDINALITY AS x(k, o)) END;
            src := replace(replace(replace(
                   'TG_OP OPERATOR(pg_catalog.=) ''INSERT'' AND NEW.@F@ IS NOT NULL
       AND @W@(@KEYS@(NEW.@F@).epoch, (NEW.@F@).counter, @STRICT@) IS NULL',
                   '@W@', writer::oid::regproc::text), '@KEYS@', keys), '@STRICT@', strict::text);
        END IF;
        RETURN $f$
    IF coalesce(pg_catalog.current_setting('fencing.bypass', true), 'off') OPERATOR(pg_catalog.=) 'off'
       AND coalesce(pg_catalog.current_setting('fencing.token', true), '') OPERATOR(pg_catalog.=) ''
       AND $f$ || src || $f$ THEN
$f$ || replace(rem, '@T@', 'NEW.@F@') || $f$
        RETURN NEW;
    END IF;$f$;
    END IF;
    -- part 'inner': the other usual writes of row scope, once the setting
    -- is read into s ('' none, '!' fencing.bypass set)
    IF key_columns IS NOT NULL THEN
        RETURN '';
    END IF;
    src := $f$
    IF s OPERATOR(pg_catalog.=) '' THEN
        IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' AND NEW.@F@ IS NULL AND @MARK@ THEN
            -- a new row without a token: nothing to beat
            RETURN NEW;
        END IF;
@SETTING@
    END IF;
$f$;
    src := replace(src, '@SETTING@', CASE WHEN partitioned THEN '' ELSE $t$
    ELSIF s OPERATOR(pg_catalog.<>) '!' AND TG_OP OPERATOR(pg_catalog.=) 'UPDATE'
          AND coalesce(pg_catalog.current_setting('fencing_sql.written', true), '') OPERATOR(pg_catalog.=) '' THEN
        -- the setting's token, in a transaction whose guards have written
        -- nothing yet: the row version being replaced is not theirs
        lost := fencing.token_of(s);
        IF lost IS NULL THEN
            lost := fencing.fence_from_text(s);
        END IF;
        IF (OLD.@F@ IS NULL OR lost OPERATOR(pg_catalog.>) OLD.@F@)
           AND (NEW.@F@ IS NOT DISTINCT FROM OLD.@F@ OR NEW.@F@ OPERATOR(pg_catalog.=) lost)
           AND @MARK@ THEN
            NEW.@F@ := lost;
@REM_T@
            RETURN NEW;
        END IF;$t$ END);
    RETURN replace(src, '@REM_T@', replace(rem, '@T@', 'lost'));
END
$$;
COMMENT ON FUNCTION fencing.guard_fast_source(name[], boolean, regprocedure, text, boolean, boolean, text) IS
    'internal: the fast paths of a protected table''s guard trigger function';

-- A token held as text (the setting): digits:digits (19 characters at
-- most, so that neither part can overflow) read in place; NULL for any
-- other form, which the caller reads with fencing.fence_from_text() (and
-- its errors).  Inlined; a regular expression would cost more than these
-- five calls.
CREATE FUNCTION fencing.token_of(s text) RETURNS fencing.fence_pair
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN pg_catalog.translate(s, '0123456789', '') OPERATOR(pg_catalog.=) ':'
                     AND pg_catalog.length(s) OPERATOR(pg_catalog.<=) 19
                     AND pg_catalog.strpos(s, ':') OPERATOR(pg_catalog.>) 1
                     AND pg_catalog.strpos(s, ':') OPERATOR(pg_catalog.<) pg_catalog.length(s)
                THEN ROW(pg_catalog.split_part(s, ':', 1)::pg_catalog.int8,
                         pg_catalog.split_part(s, ':', 2)::pg_catalog.int8)::fencing.fence_pair END
$$;
COMMENT ON FUNCTION fencing.token_of(text) IS
    'internal: the token of a setting when it is digits:digits, else NULL';

-- The source of the guard trigger function of a protected table.  Row,
-- key or table scope, strict or not, with a lease or not: each table's
-- guard holds only the code its settings need.  The order of a write's
-- token is the C edition's: fencing.token when it is set; else the fence
-- column, for an UPDATE when the statement changed it or when this
-- transaction's guard wrote the row version it replaces, for an INSERT
-- when it is not NULL; else none.  Both and different: SF002.
--
-- Written for speed: a token is two bigints (te, tc; the column's ce, cc,
-- the old row's oe, oc), compared field by field; every statement on the
-- way of an accepted write is an expression PL/pgSQL evaluates without
-- the executor (no PERFORM, no query); the usual token, digits:digits, is
-- read in place; the error paths call helpers.
CREATE FUNCTION fencing.guard_source(fence_column name, key_columns name[], strict boolean,
                                     scope_name text, writer regprocedure, lease text,
                                     pk_columns name[], partitioned boolean)
    RETURNS text
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    src text;
    row_scope boolean := key_columns IS NULL;
    table_scope boolean := cardinality(key_columns) = 0;
    new_keys text;
    old_keys text;
    new_text text;
    old_text text;
    wrote_src text;
    scope_check text;
BEGIN
    src := $g$
DECLARE
    a text;
BEGIN
@FIRST@
    DECLARE
    s text;
    te bigint;
    tc bigint;
    ce bigint;
    cc bigint;
    oe bigint;
    oc bigint;
    has_t boolean;
    has_c boolean;
    wrote boolean;
    lost fencing.fence_pair;
    xm pg_catalog.xid;
    k text;
    BEGIN
    -- the setting: '' when none; '!' when fencing.bypass is set to
    -- anything but off (whether it lets the write through is the general
    -- path's to decide).  A session that never set it has none, or, where
    -- the C edition's library is loaded, 'off'
    s := CASE WHEN coalesce(pg_catalog.current_setting('fencing.bypass', true), 'off') OPERATOR(pg_catalog.=) 'off'
              THEN coalesce(pg_catalog.current_setting('fencing.token', true), '') ELSE '!' END;
@FAST@
    -- the general path: every case, the fast paths' too
    has_t := false;
    has_c := false;
    IF s OPERATOR(pg_catalog.=) '!' THEN
        IF fencing.bypassing(TG_RELID, TG_OP) THEN
            IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN RETURN OLD; END IF;
            a := pg_catalog.set_config('fencing_sql.written', '1', true);
            RETURN NEW;
        END IF;
        s := coalesce(pg_catalog.current_setting('fencing.token', true), '');
    END IF;
    -- the token of the setting
    IF s OPERATOR(pg_catalog.<>) '' THEN
        lost := coalesce(fencing.token_of(s), fencing.fence_from_text(s));
        te := lost.epoch;
        tc := lost.counter;
        has_t := true;
    END IF;
    -- the token of the fence column
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        ce := (NEW.@F@).epoch;
        cc := (NEW.@F@).counter;
        has_c := ce IS NOT NULL;
    ELSIF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' THEN
        ce := (NEW.@F@).epoch;
        cc := (NEW.@F@).counter;
        oe := (OLD.@F@).epoch;
        oc := (OLD.@F@).counter;
        IF ce IS NOT NULL THEN
            IF oe IS NOT NULL AND ce OPERATOR(pg_catalog.=) oe AND cc OPERATOR(pg_catalog.=) oc THEN
                -- unchanged: a token only when this transaction's guard
                -- wrote the version it replaces (a repeat write)
@WROTE@
                has_c := wrote;
            ELSE
                has_c := true;
            END IF;
        END IF;
    ELSE
        oe := (OLD.@F@).epoch;
        oc := (OLD.@F@).counter;
    END IF;
    IF has_t THEN
        IF has_c AND (te OPERATOR(pg_catalog.<>) ce OR tc OPERATOR(pg_catalog.<>) cc) THEN
            PERFORM fencing.refuse_conflict(TG_RELID, ROW(te, tc)::fencing.fence_pair, ROW(ce, cc)::fencing.fence_pair);
        END IF;
    ELSIF has_c THEN
        te := ce;
        tc := cc;
        has_t := true;
    ELSE
        IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
            -- the DELETE of an UPDATE that moves its row to another
            -- partition carries the token the UPDATE was accepted with
            a := pg_catalog.current_setting('fencing_sql.move', true);
            IF a IS NOT NULL AND a OPERATOR(pg_catalog.<>) ''
               AND pg_catalog.split_part(a, '/', 1) OPERATOR(pg_catalog.=) TG_RELID::pg_catalog.text
               AND pg_catalog.split_part(a, '/', 2) OPERATOR(pg_catalog.=) pg_catalog.md5(OLD::pg_catalog.text) THEN
                lost := fencing.fence_from_text(pg_catalog.split_part(a, '/', 3));
                te := lost.epoch;
                tc := lost.counter;
                has_t := true;
                a := pg_catalog.set_config('fencing_sql.move', '', true);
            END IF;
        END IF;
        IF NOT has_t THEN
            @NO_TOKEN@
            PERFORM fencing.refuse_missing(TG_RELID, TG_OP);
        END IF;
    END IF;
@LEASE@
@CHECK@
    IF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        RETURN OLD;
    END IF;
    IF NOT has_c OR ce OPERATOR(pg_catalog.<>) te OR cc OPERATOR(pg_catalog.<>) tc THEN
        NEW.@F@ := ROW(te, tc)::fencing.fence_pair;
    END IF;
@REMEMBER@
@MOVE@
    a := pg_catalog.set_config('fencing_sql.written', '1', true);
    RETURN NEW;
    END;
END
$g$;
    -- the fast paths: the usual accepted writes, decided in a handful of
    -- expressions (PL/pgSQL prepares every expression it meets anew in
    -- each transaction, so their number is the cost); anything else falls
    -- through to the general path
    src := replace(src, '@FIRST@', fencing.guard_fast_source(key_columns, strict, writer, lease,
                                                            pk_columns IS NULL OR cardinality(pk_columns) = 0,
                                                            partitioned, 'first'));
    src := replace(src, '@FAST@', fencing.guard_fast_source(key_columns, strict, writer, lease,
                                                           pk_columns IS NULL OR cardinality(pk_columns) = 0,
                                                           partitioned, 'inner'));
    -- fencing_sql.written: set (transaction-local) by every write a guard
    -- lets through, so that a row version can be this transaction's only
    -- once it is set
    src := replace(src, '@MARK@', $m$pg_catalog.set_config('fencing_sql.written', '1', true) IS NOT NULL$m$);
    src := replace(src, '@F@', quote_ident(fence_column));

    -- an INSERT without a token: accepted in row scope without a lease
    -- (there is nothing to check a new row against)
    src := replace(src, '@NO_TOKEN@',
                   CASE WHEN row_scope AND lease IS NULL
                        THEN 'IF TG_OP OPERATOR(pg_catalog.=) ''INSERT'' THEN a := pg_catalog.set_config(''fencing_sql.written'', ''1'', true); RETURN NEW; END IF;'
                        ELSE '' END);

    -- wrote: did this transaction's guard write the row version being
    -- replaced?  It accepted the version's fence as a token for this table
    -- (fencing_sql.accepted); where a primary key finds the version, its xmin
    -- tells a repeat write from another transaction's write with the same
    -- token
    IF pk_columns IS NULL OR cardinality(pk_columns) = 0 THEN
        -- no primary key: the transaction remembers the tokens its guard
        -- accepted for each table (fencing_sql.accepted)
        wrote_src := $w$
                wrote := pg_catalog.strpos(coalesce(pg_catalog.current_setting('fencing_sql.accepted', true), ''),
                                           pg_catalog.format(',%s/(%s,%s),', TG_RELID, oe, oc)) OPERATOR(pg_catalog.>) 0;$w$;
        src := replace(src, '@REMEMBER@', $m$
    -- one token, one transaction: remember what this guard accepted
    a := CASE WHEN pg_catalog.strpos(coalesce(pg_catalog.current_setting('fencing_sql.accepted', true), ''),
                                     pg_catalog.format(',%s/(%s,%s),', TG_RELID, te, tc)) OPERATOR(pg_catalog.=) 0
              THEN pg_catalog.set_config('fencing_sql.accepted',
                       coalesce(nullif(pg_catalog.current_setting('fencing_sql.accepted', true), ''), ',')
                       OPERATOR(pg_catalog.||) pg_catalog.format('%s/(%s,%s),', TG_RELID, te, tc), true) END;$m$);
    ELSE
        -- a primary key finds the row version being replaced: it was
        -- written by this transaction's guard when its xmin is (one of) this
        -- transaction's and, in row scope, the transaction's guards have
        -- written (fencing_sql.written), in key and table scope, the
        -- transaction wrote the key's fence (which the writer tells)
        wrote_src := format($p$
                wrote := false;
                IF %s pg_catalog.has_table_privilege(TG_RELID, 'SELECT') THEN
                    EXECUTE 'SELECT x.xmin FROM ONLY ' OPERATOR(pg_catalog.||) TG_RELID::pg_catalog.regclass::pg_catalog.text
                            OPERATOR(pg_catalog.||) ' x WHERE %s' INTO xm USING %s;
                    wrote := xm IS NOT NULL AND fencing.xid_is_mine(xm)%s;
                END IF;$p$,
            CASE WHEN row_scope
                 THEN $c$pg_catalog.current_setting('fencing_sql.written', true) OPERATOR(pg_catalog.=) '1' AND$c$
                 ELSE '' END,
            (SELECT string_agg(format('x.%I = $%s', k.name, k.ord), ' AND ' ORDER BY k.ord)
               FROM unnest(pk_columns) WITH ORDINALITY AS k(name, ord)),
            (SELECT string_agg(format('OLD.%I', k.name), ', ' ORDER BY k.ord)
               FROM unnest(pk_columns) WITH ORDINALITY AS k(name, ord)),
            CASE WHEN row_scope THEN ''
                 ELSE format(' AND %s(%sNULL, NULL, false) IS NOT NULL', writer::oid::regproc::text,
                             CASE WHEN table_scope THEN ''
                                  ELSE (SELECT string_agg(format('OLD.%I, ', k), '' ORDER BY o)
                                          FROM unnest(key_columns) WITH ORDINALITY AS x(k, o)) END) END);
        src := replace(src, '@REMEMBER@', '');
    END IF;

    -- the lease every write must hold
    IF lease IS NOT NULL THEN
        src := replace(src, '@LEASE@', format($l$
    PERFORM fencing.lease_guard(%L, ROW(te, tc)::fencing.fence_pair, TG_RELID);$l$, lease));
    ELSE
        src := replace(src, '@LEASE@', '');
    END IF;

    IF row_scope THEN
        -- row scope: beat the fence of the row version being replaced
        src := replace(src, '@CHECK@', replace($r$
    IF oe IS NOT NULL THEN
        IF te OPERATOR(pg_catalog.<) oe OR (te OPERATOR(pg_catalog.=) oe AND tc OPERATOR(pg_catalog.<) oc) THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, ROW(oe, oc)::fencing.fence_pair, NULL, NULL);
        ELSIF @STRICT@ AND te OPERATOR(pg_catalog.=) oe AND tc OPERATOR(pg_catalog.=) oc THEN
@WROTE@
            IF NOT wrote THEN
                PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, ROW(oe, oc)::fencing.fence_pair, NULL, NULL);
            END IF;
        END IF;
    END IF;$r$, '@STRICT@', strict::text));
    ELSE
        -- key or table scope: beat the scope's fence, of both keys when an
        -- UPDATE moves the row to another key (in a fixed order, so that
        -- two such moves cannot deadlock)
        IF table_scope THEN
            new_keys := '';
            old_keys := '';
            new_text := '''[]''';
            old_text := '''[]''';
        ELSE
            SELECT string_agg(format('NEW.%I, ', k), '' ORDER BY o),
                   string_agg(format('OLD.%I, ', k), '' ORDER BY o),
                   'fencing.scope_key(VARIADIC ARRAY[' || string_agg(format('(NEW.%I)::pg_catalog.text', k), ', ' ORDER BY o) || '])',
                   'fencing.scope_key(VARIADIC ARRAY[' || string_agg(format('(OLD.%I)::pg_catalog.text', k), ', ' ORDER BY o) || '])'
              INTO new_keys, old_keys, new_text, old_text
              FROM unnest(key_columns) WITH ORDINALITY AS x(k, o);
        END IF;
        scope_check := $k$
    IF TG_OP OPERATOR(pg_catalog.=) 'INSERT' THEN
        lost := @W@(@NEW@te, tc, @STRICT@);
        IF lost IS NOT NULL THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, lost, @SCOPE@, @NEWTEXT@);
        END IF;
    ELSIF TG_OP OPERATOR(pg_catalog.=) 'DELETE' THEN
        lost := @W@(@OLD@te, tc, @STRICT@);
        IF lost IS NOT NULL THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, lost, @SCOPE@, @OLDTEXT@);
        END IF;
    ELSIF @SAMEKEY@ THEN
        lost := @W@(@NEW@te, tc, @STRICT@);
        IF lost IS NOT NULL THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, lost, @SCOPE@, @NEWTEXT@);
        END IF;
    ELSIF @OLDFIRST@ THEN
        lost := @W@(@OLD@te, tc, @STRICT@);
        IF lost IS NOT NULL THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, lost, @SCOPE@, @OLDTEXT@);
        END IF;
        lost := @W@(@NEW@te, tc, @STRICT@);
        IF lost IS NOT NULL THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, lost, @SCOPE@, @NEWTEXT@);
        END IF;
    ELSE
        lost := @W@(@NEW@te, tc, @STRICT@);
        IF lost IS NOT NULL THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, lost, @SCOPE@, @NEWTEXT@);
        END IF;
        lost := @W@(@OLD@te, tc, @STRICT@);
        IF lost IS NOT NULL THEN
            PERFORM fencing.refuse_stale(TG_RELID, ROW(te, tc)::fencing.fence_pair, lost, @SCOPE@, @OLDTEXT@);
        END IF;
    END IF;$k$;
        IF table_scope THEN
            scope_check := replace(scope_check, '@SAMEKEY@', 'true');
            scope_check := replace(scope_check, '@OLDFIRST@', 'true');
        ELSE
            scope_check := replace(scope_check, '@SAMEKEY@',
                (SELECT format('ROW(%s) IS NOT DISTINCT FROM ROW(%s)',
                               string_agg(format('OLD.%I', k), ', ' ORDER BY o),
                               string_agg(format('NEW.%I', k), ', ' ORDER BY o))
                   FROM unnest(key_columns) WITH ORDINALITY AS x(k, o)));
            scope_check := replace(scope_check, '@OLDFIRST@',
                (SELECT format('coalesce(ROW(%s) OPERATOR(pg_catalog.<) ROW(%s), true)',
                               string_agg(format('OLD.%I', k), ', ' ORDER BY o),
                               string_agg(format('NEW.%I', k), ', ' ORDER BY o))
                   FROM unnest(key_columns) WITH ORDINALITY AS x(k, o)));
        END IF;
        scope_check := replace(scope_check, '@W@', writer::oid::regproc::text);
        scope_check := replace(scope_check, '@NEW@', new_keys);
        scope_check := replace(scope_check, '@OLD@', old_keys);
        scope_check := replace(scope_check, '@NEWTEXT@', new_text);
        scope_check := replace(scope_check, '@OLDTEXT@', old_text);
        scope_check := replace(scope_check, '@STRICT@', strict::text);
        scope_check := replace(scope_check, '@SCOPE@', quote_literal(scope_name));
        src := replace(src, '@CHECK@', scope_check);
    END IF;

    -- an UPDATE of a partition's row whose token came from the fence
    -- column: if the row moves to another partition, its DELETE from this
    -- one carries no token of its own (the INSERT carries the column)
    IF partitioned THEN
        src := replace(src, '@MOVE@', $m$
    IF TG_OP OPERATOR(pg_catalog.=) 'UPDATE' AND has_c THEN
        a := pg_catalog.set_config('fencing_sql.move',
            TG_RELID::pg_catalog.text OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) pg_catalog.md5(OLD::pg_catalog.text)
            OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) te::pg_catalog.text
            OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) tc::pg_catalog.text, true);
    END IF;$m$);
    ELSE
        src := replace(src, '@MOVE@', '');
    END IF;
    src := replace(src, '@WROTE@', wrote_src);
    RETURN src;
END
$$;
COMMENT ON FUNCTION fencing.guard_source(name, name[], boolean, text, regprocedure, text, name[], boolean) IS
    'internal: the PL/pgSQL source of a protected table''s guard trigger function';


-- The edition's side of protect(), as its owner: the scope (created, or
-- checked: its owner, its key types), the guard function, its counters
-- and the row of fencing.protected.  Returns the guard function, for the
-- caller to install as the table's trigger.
CREATE FUNCTION fencing.protect_apply(tbl regclass, fence_column name, key_columns name[],
                                      strict boolean, scope_name text, lease text,
                                      key_types regtype[], key_collations oid[],
                                      pk_columns name[], proof oid)
    RETURNS regprocedure
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    caller oid := fencing.caller_of(proof);
    rel record;
    sc record;
    writer regprocedure;
    gname text;
    guard regprocedure;
    parts text[];
    other oid;
    why text;
    lease_owner oid;
    counter text;
BEGIN
    SELECT c.oid, c.relname, c.relowner, c.relkind INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF NOT pg_has_role(caller, rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', rel.relname USING ERRCODE = 'insufficient_privilege';
    END IF;

    -- a lease of a role the table's owner acts for
    IF lease IS NOT NULL THEN
        SELECT l.owner INTO lease_owner FROM fencing.leases l WHERE l.name = lease;
        IF lease_owner IS NOT NULL AND NOT pg_has_role(rel.relowner, lease_owner, 'USAGE') THEN
            RAISE EXCEPTION 'permission denied for lease "%" of table "%"', lease, rel.relname
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = format('The lease belongs to role "%s", which the owner of the table, role "%s", is not a member of.',
                                      lease_owner::regrole, rel.relowner::regrole),
                      HINT = 'Protect the table with a lease of its owner''s, or grant the lease''s owner role to the table''s owner.';
        END IF;
    END IF;

    IF key_columns IS NOT NULL THEN
        -- protect() and reset_scope() take turns on a scope's name
        PERFORM pg_advisory_xact_lock('fencing.scope_storage'::regclass::oid::integer, hashtext(scope_name));
        SELECT s.* INTO sc FROM fencing.scope_storage s WHERE s.scope_name = protect_apply.scope_name;
        IF FOUND THEN
            IF NOT pg_has_role(caller, sc.owner, 'USAGE') THEN
                IF EXISTS (SELECT FROM fencing.protected p WHERE p.relid = tbl
                              AND p.scope_name = protect_apply.scope_name) THEN
                    RAISE EXCEPTION 'permission denied for fencing scope "%"', scope_name
                        USING ERRCODE = 'insufficient_privilege',
                              DETAIL = format('Table "%s" is protected in this scope, which belongs to role "%s".', rel.relname, sc.owner),
                              HINT = format('Have the extension''s owner give the scope to the table''s owner: UPDATE fencing.scope_storage SET owner = %L WHERE scope_name = %L.',
                                            rel.relowner::regrole::text, scope_name);
                END IF;
                IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = sc.owner::oid) THEN
                    RAISE EXCEPTION 'permission denied for fencing scope "%"', scope_name
                        USING ERRCODE = 'insufficient_privilege',
                              DETAIL = format('The scope belongs to a role that no longer exists (OID %s); its fences were set by that role''s tables.', sc.owner::oid),
                              HINT = format('Have the extension''s owner remove the scope with fencing.reset_scope(%L), or protect the table with another scope_name.', scope_name);
                END IF;
                RAISE EXCEPTION 'permission denied for fencing scope "%"', scope_name
                    USING ERRCODE = 'insufficient_privilege',
                          DETAIL = format('The scope belongs to role "%s"; its fences were set by that role''s tables.', sc.owner),
                          HINT = format('Protect the table with another scope_name, or have the extension''s owner remove the scope with fencing.reset_scope(%L) if its fences are no longer wanted.', scope_name);
            END IF;
            -- the storage's key columns: the table's key types and collations
            IF sc.table_scope <> (cardinality(key_columns) = 0) THEN
                why := format('The scope is a %s scope, and the table is protected in %s scope.',
                              CASE WHEN sc.table_scope THEN 'table' ELSE 'key' END,
                              CASE WHEN cardinality(key_columns) = 0 THEN 'table' ELSE 'key' END);
            ELSIF NOT sc.table_scope THEN
                SELECT format('Key column %s of the scope is of type %s%s, and column "%s" of the table of type %s%s.',
                              t.ord, format_type(a.atttypid, NULL),
                              CASE WHEN a.attcollation <> 0 THEN ' COLLATE ' || a.attcollation::regcollation::text ELSE '' END,
                              key_columns[t.ord], format_type(t.typ, NULL),
                              CASE WHEN t.coll <> 0 THEN ' COLLATE ' || t.coll::regcollation::text ELSE '' END)
                  INTO why
                  FROM unnest(key_types, key_collations) WITH ORDINALITY AS t(typ, coll, ord)
                  LEFT JOIN pg_attribute a ON a.attrelid = sc.storage AND a.attnum = t.ord AND NOT a.attisdropped
                 WHERE a.attnum IS NULL OR a.atttypid <> t.typ OR a.attcollation <> t.coll
                 ORDER BY t.ord LIMIT 1;
                IF why IS NULL AND (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = sc.storage AND a.attnum > 0
                                       AND NOT a.attisdropped AND a.attname LIKE 'key\_%') <> cardinality(key_columns) THEN
                    why := format('The scope has %s key columns, and the table %s.',
                                  (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = sc.storage AND a.attnum > 0
                                      AND NOT a.attisdropped AND a.attname LIKE 'key\_%'), cardinality(key_columns));
                END IF;
            END IF;
            IF why IS NOT NULL THEN
                RAISE EXCEPTION 'the key columns of table "%" do not match fencing scope "%"', rel.relname, scope_name
                    USING ERRCODE = 'datatype_mismatch', DETAIL = why,
                          HINT = 'Tables share a scope only with key columns of the same types and collations; a table not yet protected in this scope may use another scope_name instead.';
            END IF;
            writer := sc.writer;
        ELSE
            -- a new scope may not take the name of a table the caller does not own
            parts := parse_ident(scope_name, false);
            IF cardinality(parts) = 2 THEN
                SELECT c.oid INTO other FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 WHERE n.nspname = parts[1] AND c.relname = parts[2];
                IF other IS NOT NULL AND other <> tbl
                   AND NOT pg_has_role(caller, (SELECT c.relowner FROM pg_class c WHERE c.oid = other), 'USAGE') THEN
                    RAISE EXCEPTION 'permission denied for fencing scope "%"', scope_name
                        USING ERRCODE = 'insufficient_privilege',
                              DETAIL = format('The scope name is the name of table "%s", which you do not own.', parts[2]),
                              HINT = 'Choose another scope_name.';
                END IF;
            END IF;
            BEGIN
                PERFORM fencing.scope_create(scope_name, caller::regrole, key_types, key_collations);
            EXCEPTION WHEN unique_violation THEN
                -- created since this transaction's snapshot (REPEATABLE READ)
                RAISE EXCEPTION 'permission denied for fencing scope "%"', scope_name
                    USING ERRCODE = 'insufficient_privilege',
                          DETAIL = 'The scope was created by a concurrent transaction.',
                          HINT = 'Try again in a new transaction.';
            END;
            SELECT s.writer INTO writer FROM fencing.scope_storage s WHERE s.scope_name = protect_apply.scope_name;
        END IF;
    END IF;

    -- the guard function: the table's own, written anew with its settings
    SELECT p.guard_function::oid::regproc::text INTO gname FROM fencing.protected p WHERE p.relid = tbl;
    IF gname IS NULL THEN
        -- named after the table's name when first protected (_2, _3, ...
        -- when a guard of another table has that name)
        gname := 'guard_' || substr(md5((SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
                                           JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl)), 1, 16);
        WHILE EXISTS (SELECT FROM pg_proc f WHERE f.pronamespace = 'fencing'::regnamespace
                         AND f.proname = gname) LOOP
            gname := regexp_replace(gname, '_\d+$', '') || '_'
                     || (coalesce(substring(gname FROM '^guard_[0-9a-f]{16}_(\d+)$')::int, 1) + 1);
        END LOOP;
    ELSE
        gname := (SELECT p.proname FROM pg_proc p JOIN fencing.protected x ON x.guard_function::oid = p.oid
                   WHERE x.relid = tbl);
    END IF;
    EXECUTE format('CREATE OR REPLACE FUNCTION fencing.%I() RETURNS trigger LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE AS %L',
                   gname, fencing.guard_source(fence_column, key_columns, strict, scope_name, writer, lease,
                                               pk_columns, rel.relkind = 'p'));
    guard := format('fencing.%I()', gname)::regprocedure;
    EXECUTE format('COMMENT ON FUNCTION %s IS %L', guard,
                   format('the fencing guard of table %s (written by fencing.protect())', tbl));
    -- EXECUTE for every role: CREATE TRIGGER needs it, and a role that
    -- attached it to a table of its own could do no more with it than
    -- with the scope's writer, which advances fences only
    EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO PUBLIC', guard);
    FOREACH counter IN ARRAY ARRAY['rejected_stale', 'rejected_missing', 'bypassed',
                                   'rejected_already_used', 'rejected_lease_expired'] LOOP
        IF to_regclass(format('fencing.%I', gname || '_' || counter)) IS NULL THEN
            EXECUTE format('CREATE SEQUENCE fencing.%I', gname || '_' || counter);
        END IF;
    END LOOP;

    INSERT INTO fencing.protected AS p (relid, fence_column, key_columns, strict, scope_name, lease, guard_function)
    VALUES (tbl, fence_column, key_columns, strict, scope_name, lease, guard)
    ON CONFLICT (relid) DO UPDATE
       SET fence_column = EXCLUDED.fence_column, key_columns = EXCLUDED.key_columns,
           strict = EXCLUDED.strict, scope_name = EXCLUDED.scope_name, lease = EXCLUDED.lease,
           guard_function = EXCLUDED.guard_function;
    RETURN guard;
END
$$;
COMMENT ON FUNCTION fencing.protect_apply(regclass, name, name[], boolean, text, text, regtype[], oid[], name[], oid) IS
    'internal: the part of fencing.protect() that runs as the edition''s owner';

-- The tables a protected table's writes can reach: itself, its partitions
-- and its inheritance children, at any level.
CREATE FUNCTION fencing.tree_of(tbl regclass, OUT member regclass, OUT depth integer, OUT is_partition boolean)
    RETURNS SETOF record
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE down(member, depth, is_partition) AS (
        SELECT tbl::oid, 0, false
        UNION ALL
        SELECT i.inhrelid, d.depth + 1, c.relispartition
          FROM pg_inherits i JOIN down d ON i.inhparent = d.member
          JOIN pg_class c ON c.oid = i.inhrelid
         WHERE d.depth < 100)
    SELECT member::regclass, depth, is_partition FROM down
$$;
COMMENT ON FUNCTION fencing.tree_of(regclass) IS
    'internal: a table with its partitions and inheritance children, at any level';

-- Seed a key or table scope from the fences in a table's rows (every
-- member of its tree, or with only_new, the members that just joined it):
-- no earlier token may write a key whose rows already carry a later one.
-- As the table's owner, whose row security is switched off meanwhile
-- (FORCE ROW LEVEL SECURITY is lifted and put back in this transaction,
-- under the lock the caller holds), so that no policy hides a row.
CREATE FUNCTION fencing.seed_scope(tbl regclass, only_new boolean) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p fencing.protected;
    writer regprocedure;
    keylist text;
    m record;
    owner_name text;
    prev_role text := current_setting('role');
    prev_rls text := current_setting('row_security');
    forced regclass[];
    f regclass;
BEGIN
    SELECT * INTO p FROM fencing.protected x WHERE x.relid = tbl;
    SELECT s.writer INTO writer FROM fencing.scope_storage s WHERE s.scope_name = p.scope_name;
    SELECT c.relowner::regrole::text INTO owner_name FROM pg_class c WHERE c.oid = tbl;
    IF current_user::text <> owner_name THEN
        PERFORM set_config('role', owner_name, true);
    END IF;
    SELECT array_agg(t.member) INTO forced FROM fencing.tree_of(tbl) t
      JOIN pg_class c ON c.oid = t.member WHERE c.relforcerowsecurity;
    FOREACH f IN ARRAY coalesce(forced, '{}') LOOP
        EXECUTE format('ALTER TABLE %s NO FORCE ROW LEVEL SECURITY', f);
    END LOOP;
    PERFORM set_config('row_security', 'off', true);
    FOR m IN SELECT t.member FROM fencing.tree_of(tbl) t
              WHERE NOT only_new OR t.depth > 0 AND NOT EXISTS (SELECT FROM pg_trigger g WHERE g.tgrelid = t.member::oid
                                                                   AND g.tgname = 'zz_fencing_truncate')
              ORDER BY t.depth LOOP
        IF cardinality(p.key_columns) = 0 THEN
            EXECUTE format('SELECT %s((m.f).epoch, (m.f).counter, true, true) FROM (SELECT fencing.max(x.%I) AS f FROM ONLY %s x) m WHERE m.f IS NOT NULL',
                           writer::oid::regproc, p.fence_column, m.member);
        ELSE
            keylist := (SELECT string_agg(format('x.%I', c), ', ' ORDER BY o)
                          FROM unnest(p.key_columns) WITH ORDINALITY AS u(c, o));
            EXECUTE format('SELECT count(%s(%s, (g.f).epoch, (g.f).counter, true, true)) FROM (SELECT %s, fencing.max(x.%I) AS f FROM ONLY %s x WHERE x.%I IS NOT NULL GROUP BY %s) g',
                           writer::oid::regproc,
                           (SELECT string_agg(format('g.%I', c), ', ' ORDER BY o) FROM unnest(p.key_columns) WITH ORDINALITY AS u(c, o)),
                           keylist, p.fence_column, m.member, p.fence_column, keylist);
        END IF;
    END LOOP;
    PERFORM set_config('row_security', prev_rls, true);
    FOREACH f IN ARRAY coalesce(forced, '{}') LOOP
        EXECUTE format('ALTER TABLE %s FORCE ROW LEVEL SECURITY', f);
    END LOOP;
    PERFORM set_config('role', prev_role, true);
END
$$;
COMMENT ON FUNCTION fencing.seed_scope(regclass, boolean) IS
    'internal: seed a key or table scope from the fences in a protected table''s rows, none hidden by row security';

CREATE FUNCTION fencing.protect(tbl regclass,
                                fence_column name DEFAULT 'fence',
                                key_columns name[] DEFAULT NULL,
                                strict boolean DEFAULT true,
                                scope_name text DEFAULT NULL,
                                lease text DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel record;
    att record;
    k name;
    i integer;
    key_types regtype[] := '{}';
    key_collations oid[] := '{}';
    pk_columns name[];
    proof oid;
    guard regprocedure;
    m record;
    writer regprocedure;
    keylist text;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF fence_column IS NULL THEN
        RAISE EXCEPTION 'fence_column must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF strict IS NULL THEN
        RAISE EXCEPTION 'strict must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT c.oid, c.relname, c.relkind, c.relowner, n.nspname INTO rel
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid USING ERRCODE = 'undefined_table';
    END IF;
    -- checks come before locks
    IF NOT pg_has_role(rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of % %', CASE WHEN rel.relkind IN ('r', 'p') THEN 'table' ELSE 'relation' END, rel.relname
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'cannot protect "%"', rel.relname
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Only tables and partitioned tables can be protected by fencing.';
    END IF;
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    IF fencing.protected_root(tbl) IS DISTINCT FROM tbl AND fencing.protected_root(tbl) IS NOT NULL THEN
        RAISE EXCEPTION 'table "%" is already protected through "%"', rel.relname,
                        (SELECT c.relname FROM pg_class c WHERE c.oid = fencing.protected_root(tbl))
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('Change the settings on "%s" instead.',
                                (SELECT c.relname FROM pg_class c WHERE c.oid = fencing.protected_root(tbl)));
    END IF;

    -- the fence column
    SELECT a.attnum, a.atttypid, a.atthasdef, a.attgenerated INTO att
      FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = fence_column AND NOT a.attisdropped;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'column "%" of table "%" does not exist', fence_column, rel.relname
            USING ERRCODE = 'undefined_column';
    ELSIF att.attnum < 0 THEN
        RAISE EXCEPTION 'system column "%" cannot be used by fencing', fence_column
            USING ERRCODE = 'invalid_parameter_value';
    ELSIF att.atttypid <> 'fencing.fence'::regtype THEN
        RAISE EXCEPTION 'column "%" of table "%" is not of type fencing.fence', fence_column, rel.relname
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = format('Column "%s" is of type %s.', fence_column, format_type(att.atttypid, NULL)),
                  HINT = format('Add a column of type fencing.fence: ALTER TABLE %s ADD COLUMN fence fencing.fence;', quote_ident(rel.relname));
    ELSIF att.attgenerated <> '' THEN
        RAISE EXCEPTION 'the fence column "%" of table "%" cannot be a generated column', fence_column, rel.relname
            USING ERRCODE = 'feature_not_supported';
    ELSIF att.atthasdef THEN
        RAISE EXCEPTION 'the fence column "%" of table "%" cannot have a default', fence_column, rel.relname
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A default would put a token into writes that carry none.',
                  HINT = format('ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT;', quote_ident(rel.relname), quote_ident(fence_column));
    END IF;

    -- the key columns
    IF key_columns IS NOT NULL THEN
        IF array_ndims(key_columns) > 1 THEN
            RAISE EXCEPTION 'key_columns must be a one-dimensional array' USING ERRCODE = 'array_subscript_error';
        ELSIF array_position(key_columns, NULL) IS NOT NULL THEN
            RAISE EXCEPTION 'key_columns must not contain nulls' USING ERRCODE = 'null_value_not_allowed';
        ELSIF cardinality(key_columns) > 32 THEN
            RAISE EXCEPTION 'too many key columns: %', cardinality(key_columns)
                USING ERRCODE = 'program_limit_exceeded', DETAIL = 'A key scope has at most 32 columns.';
        END IF;
        FOR i IN 1 .. coalesce(cardinality(key_columns), 0) LOOP
            k := key_columns[i];
            IF k = fence_column THEN
                RAISE EXCEPTION 'the fence column "%" cannot be a key column', k USING ERRCODE = 'invalid_parameter_value';
            ELSIF array_position(key_columns, k) < i THEN
                RAISE EXCEPTION 'key column "%" is listed twice', k USING ERRCODE = 'duplicate_column';
            END IF;
            SELECT a.attnum, a.atttypid, a.attcollation, a.attgenerated INTO att
              FROM pg_attribute a WHERE a.attrelid = tbl AND a.attname = k AND NOT a.attisdropped;
            IF NOT FOUND THEN
                RAISE EXCEPTION 'column "%" of table "%" does not exist', k, rel.relname USING ERRCODE = 'undefined_column';
            ELSIF att.attnum < 0 THEN
                RAISE EXCEPTION 'system column "%" cannot be used by fencing', k USING ERRCODE = 'invalid_parameter_value';
            ELSIF att.attgenerated <> '' THEN
                RAISE EXCEPTION 'key column "%" of table "%" cannot be a generated column', k, rel.relname
                    USING ERRCODE = 'feature_not_supported';
            END IF;
            key_types := key_types || fencing.base_type(att.atttypid)::regtype;
            key_collations := key_collations || att.attcollation;
            IF NOT fencing.has_btree_equality(att.atttypid) THEN
                RAISE EXCEPTION 'key column "%" of table "%" cannot key a fence scope', k, rel.relname
                    USING ERRCODE = 'feature_not_supported',
                          DETAIL = format('Type %s has no default btree operator class, so fencing cannot tell when two of its values are the same key.',
                                          format_type(fencing.base_type(att.atttypid), NULL)),
                          HINT = 'Use a key column of a type with a default btree operator class, such as text, integer, uuid or date.',
                          TABLE = rel.relname, SCHEMA = rel.nspname, COLUMN = k;
            END IF;
        END LOOP;
    END IF;

    IF scope_name IS NULL THEN
        scope_name := format('%s.%s', quote_ident(rel.nspname), quote_ident(rel.relname));
    ELSE
        PERFORM fencing.check_scope_name(scope_name);
    END IF;
    IF lease = '' THEN
        RAISE EXCEPTION 'lease must not be empty'
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Pass NULL to protect the table without a lease.';
    END IF;
    IF key_columns IS NOT NULL AND current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'fencing.protect() in key or table scope must run at READ COMMITTED'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'It seeds the scope''s fences from every row committed before it returns, and this transaction''s snapshot may not see rows committed while it waited for the table''s lock.',
                  HINT = 'Call it in a transaction of its own at READ COMMITTED.';
    END IF;

    -- the primary key of the table (for telling repeat writes apart)
    SELECT array_agg(a.attname ORDER BY k.ord) INTO pk_columns
      FROM pg_index x
      CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
      JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
     WHERE x.indrelid = tbl AND x.indisprimary;

    proof := fencing.caller_proof();
    guard := fencing.protect_apply(tbl, fence_column, key_columns, strict, scope_name, lease,
                                   key_types, key_collations, pk_columns, proof);
    PERFORM fencing.drop_proof(proof);

    -- (the DDL guard leaves this table's DDL to us until we are done)
    PERFORM set_config('fencing_sql.ddl_guard_pause', tbl::oid::text, true);

    -- the triggers, as the caller, who owns the table: the row guard (a
    -- partitioned table's partitions get it from the table, now and when
    -- created or attached later; inheritance children get their own) and
    -- the TRUNCATE guard of every member
    FOR m IN SELECT * FROM fencing.tree_of(tbl) t ORDER BY t.depth LOOP
        IF m.depth = 0 OR NOT m.is_partition THEN
            EXECUTE format('CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s',
                           m.member, guard);
            EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_guard', m.member);
        END IF;
        EXECUTE format('CREATE OR REPLACE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()',
                       m.member);
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_truncate', m.member);
    END LOOP;

    PERFORM set_config('fencing_sql.ddl_guard_pause', '', true);

    -- key and table scope: the fences already in the rows, every row
    IF key_columns IS NOT NULL THEN
        PERFORM fencing.seed_scope(tbl, false);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.protect(regclass, name, name[], boolean, text, text) IS
    'protect a table: every write must carry a token newer than its scope''s fence (and, with lease, the lease''s current live token)';

-- The base type of a domain (itself for other types).
CREATE FUNCTION fencing.base_type(typ oid) RETURNS oid
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    WITH RECURSIVE d(oid, base) AS (
        SELECT t.oid, t.typbasetype FROM pg_type t WHERE t.oid = typ
        UNION ALL
        SELECT t.oid, t.typbasetype FROM pg_type t JOIN d ON t.oid = d.base)
    SELECT d.oid FROM d WHERE d.base = 0
$$;
COMMENT ON FUNCTION fencing.base_type(oid) IS 'internal: the base type of a domain (itself for other types)';

-- Does the type (a domain: its base type) have a default btree operator
-- class, so that its values can be told equal or not as keys?
CREATE FUNCTION fencing.has_btree_equality(typ oid) RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT EXISTS (
        SELECT FROM pg_opclass o
          JOIN pg_am a ON a.oid = o.opcmethod AND a.amname = 'btree'
          JOIN pg_type t ON t.oid = fencing.base_type(typ)
         WHERE o.opcdefault
           AND (o.opcintype = t.oid
                OR (o.opcintype = 'anyenum'::regtype AND t.typtype = 'e')
                OR (o.opcintype = 'anyrange'::regtype AND t.typtype = 'r')
                OR (o.opcintype = 'anymultirange'::regtype AND t.typtype = 'm')
                OR (o.opcintype = 'record'::regtype AND t.typtype = 'c')
                OR (o.opcintype = 'anyarray'::regtype AND t.typelem <> 0 AND t.typsubscript = 'array_subscript_handler'::regproc
                    AND fencing.has_btree_equality(t.typelem))
                OR EXISTS (SELECT FROM pg_cast c WHERE c.castsource = t.oid AND c.casttarget = o.opcintype
                              AND c.castmethod = 'b')))
$$;
COMMENT ON FUNCTION fencing.has_btree_equality(oid) IS
    'internal: does the type have a default btree operator class (the equality that tells keys apart)';

-- Drop a guard function and its counters.
CREATE FUNCTION fencing.drop_guard_function(guard regprocedure) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    g text := (SELECT f.proname FROM pg_proc f WHERE f.oid = guard::oid);
    s regclass;
BEGIN
    IF g IS NULL THEN
        RETURN;
    END IF;
    FOR s IN SELECT c.oid::regclass FROM pg_class c
              WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind = 'S'
                AND c.relname IN (g || '_rejected_stale', g || '_rejected_missing', g || '_bypassed',
                                  g || '_rejected_already_used', g || '_rejected_lease_expired') LOOP
        EXECUTE format('DROP SEQUENCE %s', s);
    END LOOP;
    EXECUTE format('DROP FUNCTION %s', guard);
END
$$;
COMMENT ON FUNCTION fencing.drop_guard_function(regprocedure) IS
    'internal: drop a protected table''s guard function and its counters';
REVOKE ALL ON FUNCTION fencing.drop_guard_function(regprocedure) FROM PUBLIC;

-- The edition's side of unprotect(), as its owner.
CREATE FUNCTION fencing.unprotect_apply(tbl regclass, proof oid) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    caller oid := fencing.caller_of(proof);
    owner oid := (SELECT c.relowner FROM pg_class c WHERE c.oid = tbl);
    guard regprocedure;
    counter text;
BEGIN
    IF owner IS NOT NULL AND NOT pg_has_role(caller, owner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', tbl USING ERRCODE = 'insufficient_privilege';
    END IF;
    DELETE FROM fencing.protected p WHERE p.relid = tbl RETURNING p.guard_function INTO guard;
    IF guard IS NOT NULL THEN
        PERFORM fencing.drop_guard_function(guard);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.unprotect_apply(regclass, oid) IS
    'internal: the part of fencing.unprotect() that runs as the edition''s owner';

CREATE FUNCTION fencing.unprotect(tbl regclass) RETURNS void
    LANGUAGE plpgsql STRICT VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    rel record;
    m record;
    proof oid;
BEGIN
    SELECT c.oid, c.relname, c.relkind, c.relowner INTO rel FROM pg_class c WHERE c.oid = tbl;
    IF NOT FOUND THEN
        -- a table dropped while the DDL guard was not there to forget it
        IF EXISTS (SELECT FROM fencing.protected p WHERE p.relid = tbl) THEN
            proof := fencing.caller_proof();
            PERFORM fencing.unprotect_apply(tbl, proof);
            PERFORM fencing.drop_proof(proof);
            RETURN;
        END IF;
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid USING ERRCODE = 'undefined_table';
    END IF;
    IF NOT pg_has_role(rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of % %', CASE WHEN rel.relkind IN ('r', 'p') THEN 'table' ELSE 'relation' END, rel.relname
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'cannot unprotect "%"', rel.relname
            USING ERRCODE = 'wrong_object_type',
                  DETAIL = 'Only tables and partitioned tables can be protected by fencing.';
    END IF;
    EXECUTE format('LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE', tbl);
    IF NOT EXISTS (SELECT FROM fencing.protected p WHERE p.relid = tbl) THEN
        RAISE NOTICE 'table "%" is not protected, skipping', rel.relname;
        RETURN;
    END IF;
    PERFORM set_config('fencing_sql.ddl_guard_pause', tbl::oid::text, true);
    FOR m IN SELECT * FROM fencing.tree_of(tbl) t ORDER BY t.depth DESC LOOP
        IF (m.depth = 0 OR NOT m.is_partition)
           AND EXISTS (SELECT FROM pg_trigger g WHERE g.tgrelid = m.member::oid AND g.tgname = 'zz_fencing_guard') THEN
            EXECUTE format('DROP TRIGGER zz_fencing_guard ON %s', m.member);
        END IF;
        IF EXISTS (SELECT FROM pg_trigger g WHERE g.tgrelid = m.member::oid AND g.tgname = 'zz_fencing_truncate') THEN
            EXECUTE format('DROP TRIGGER zz_fencing_truncate ON %s', m.member);
        END IF;
    END LOOP;
    proof := fencing.caller_proof();
    PERFORM fencing.unprotect_apply(tbl, proof);
    PERFORM fencing.drop_proof(proof);
    PERFORM set_config('fencing_sql.ddl_guard_pause', '', true);
END
$$;
COMMENT ON FUNCTION fencing.unprotect(regclass) IS
    'remove the fencing guard from a table (its scope fences are kept)';

-- The first meter: raise a key- or table-scope fence of a protected table
-- to a new holder's token without writing a row, the moment the lock is
-- taken, so that an old holder that wakes before the new holder's first
-- write is refused.  A guarded write of the fence alone, with the guard's
-- rules: INSERT or UPDATE needed, a stale token refused, strict mode, the
-- table's lease; row scope refused (its fences are its rows').  The key
-- values are text, converted to the key columns' types as a literal
-- written into the columns would be.
CREATE FUNCTION fencing.raise_fence(tbl regclass, token fencing.fence, VARIADIC key text[] DEFAULT '{}')
    RETURNS fencing.fence
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    root regclass;
    p fencing.protected;
    rel record;
    writer regprocedure;
    lost fencing.fence_pair;
    ncols integer;
    keytext text;
    args text;
    is_strict boolean;
BEGIN
    IF tbl IS NULL THEN
        RAISE EXCEPTION 'table must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF key IS NULL THEN
        RAISE EXCEPTION 'the array of key values must not be null'
            USING ERRCODE = 'null_value_not_allowed', HINT = 'Pass no key values for a table-scope fence.';
    END IF;
    SELECT c.relname, n.nspname INTO rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE c.oid = tbl;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'relation with OID % does not exist', tbl::oid USING ERRCODE = 'undefined_table';
    END IF;
    -- checks before locks: a role that may not write learns it at once
    IF NOT (has_table_privilege(tbl, 'INSERT') OR has_table_privilege(tbl, 'UPDATE')
            OR has_any_column_privilege(tbl, 'INSERT') OR has_any_column_privilege(tbl, 'UPDATE')) THEN
        RAISE EXCEPTION 'permission denied for table %', rel.relname
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Raising a table''s fence is a write: it needs the INSERT or UPDATE privilege on the table.';
    END IF;
    root := fencing.protected_root(tbl);
    IF root IS NULL THEN
        RAISE EXCEPTION 'table "%" is not protected', rel.relname
            USING ERRCODE = 'object_not_in_prerequisite_state', HINT = 'Protect it first with fencing.protect().';
    END IF;
    IF token IS NULL THEN
        RAISE EXCEPTION 'fencing.raise_fence() on table "%" requires a fence token', rel.relname
            USING ERRCODE = 'SF002', HINT = 'Pass the token of the lock just taken.';
    END IF;
    IF current_setting('transaction_read_only') = 'on' THEN
        RAISE EXCEPTION 'cannot execute fencing.raise_fence() in a read-only transaction'
            USING ERRCODE = 'read_only_sql_transaction';
    END IF;
    -- the lock of a write
    EXECUTE format('LOCK TABLE %s IN ROW EXCLUSIVE MODE', tbl);
    SELECT * INTO p FROM fencing.protected x WHERE x.relid = root;
    SELECT x.strict INTO is_strict FROM fencing.protected x WHERE x.relid = root;
    IF p.key_columns IS NULL THEN
        RAISE EXCEPTION 'table "%" is protected in row scope: it has no fence apart from its rows', rel.relname
            USING ERRCODE = 'feature_not_supported',
                  HINT = format('Raise a row''s fence with UPDATE %s SET %s = ''%s'' WHERE ...',
                                format('%I.%I', rel.nspname, rel.relname), quote_ident(p.fence_column),
                                fencing.fence_text(token));
    END IF;
    -- row security: the answer would tell whether a key the role cannot
    -- see exists, and how new its fence is
    IF row_security_active(tbl) THEN
        RAISE EXCEPTION 'fencing.raise_fence() is not available to role "%" on table "%"', current_user, rel.relname
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = 'Row security applies to the role on this table, and the fence of a key belongs to every row with that key, visible or not.',
                  HINT = 'Raise the fence by a write of the row itself, carrying the token, or call fencing.raise_fence() as a role that bypasses row security.';
    END IF;
    ncols := cardinality(p.key_columns);
    IF ncols = 0 AND cardinality(key) <> 0 THEN
        RAISE EXCEPTION 'table "%" is protected in table scope: its fence has no key', rel.relname
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('fencing.raise_fence() got %s key value(s).', cardinality(key)),
                  HINT = format('Call fencing.raise_fence(''%s'', token) with no key values.', format('%I.%I', rel.nspname, rel.relname));
    ELSIF ncols > 0 AND coalesce(cardinality(key), 0) <> ncols THEN
        RAISE EXCEPTION 'table "%" has % key column(s) (%), and fencing.raise_fence() got % key value(s)',
                        rel.relname, ncols,
                        (SELECT string_agg(quote_ident(k), ', ' ORDER BY o) FROM unnest(p.key_columns) WITH ORDINALITY AS u(k, o)),
                        coalesce(cardinality(key), 0)
            USING ERRCODE = 'invalid_parameter_value', HINT = 'Give one value per key column, in this order.';
    END IF;
    -- with a lease, only its current, live token may write
    IF p.lease IS NOT NULL THEN
        PERFORM fencing.lease_guard(p.lease, token, tbl);
    END IF;
    SELECT s.writer INTO writer FROM fencing.scope_storage s WHERE s.scope_name = p.scope_name;
    IF ncols = 0 THEN
        lost := fencing.call_writer(writer, '', '{}', token, is_strict);
    ELSE
        -- each value through the input function of its column's type
        SELECT string_agg(format('$1[%s]::%s', u.o, format_type(a.atttypid, a.atttypmod)), ', ' ORDER BY u.o)
          INTO args
          FROM unnest(p.key_columns) WITH ORDINALITY AS u(k, o)
          JOIN pg_attribute a ON a.attrelid = tbl AND a.attname = u.k AND NOT a.attisdropped;
        lost := fencing.call_writer(writer, args || ', ', key, token, is_strict);
        keytext := fencing.scope_key(VARIADIC key);
    END IF;
    IF lost IS NOT NULL THEN
        PERFORM fencing.refuse_stale(tbl, token, lost, p.scope_name, keytext);
    END IF;
    RETURN token;
END
$$;
COMMENT ON FUNCTION fencing.raise_fence(regclass, fencing.fence, text[]) IS
    'the first meter: raise the key-scope fence of the key given by its values (table scope: no values) of a protected table to token, without writing a row; SF001 when token does not beat it; returns token';

CREATE FUNCTION fencing.raise_fence(tbl regclass, token text, VARIADIC key text[] DEFAULT '{}')
    RETURNS fencing.fence
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.raise_fence(tbl, fencing.fence_from_text(token), VARIADIC key) $$;
COMMENT ON FUNCTION fencing.raise_fence(regclass, text, text[]) IS
    'fencing.raise_fence() with the token written E:C';

-- Call a scope's writer with key values converted by args ($1[i]::type, ...).
CREATE FUNCTION fencing.call_writer(writer regprocedure, args text, key text[], token fencing.fence, strict boolean)
    RETURNS fencing.fence_pair
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lost fencing.fence_pair;
BEGIN
    EXECUTE format('SELECT (%s(%s$2, $3, $4)).*', writer::oid::regproc, args) INTO lost USING key, (token).epoch, (token).counter, strict;
    RETURN lost;
END
$$;
COMMENT ON FUNCTION fencing.call_writer(regprocedure, text, text[], fencing.fence, boolean) IS
    'internal: call a scope''s writer with key values given as text';

-- Forget a scope no protected table uses: its fences and its owner, so that
-- any role may protect into the name again.  For the edition's owner (and
-- whom it grants it to).
CREATE FUNCTION fencing.reset_scope(scope_name text) RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    sc record;
    users text;
    n bigint;
BEGIN
    IF scope_name IS NULL THEN
        RAISE EXCEPTION 'scope_name must not be null' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM pg_advisory_xact_lock('fencing.scope_storage'::regclass::oid::integer, hashtext(scope_name));
    SELECT s.* INTO sc FROM fencing.scope_storage s WHERE s.scope_name = reset_scope.scope_name FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'fencing scope "%" does not exist', scope_name USING ERRCODE = 'undefined_object';
    END IF;
    -- tables dropped while the DDL guard was not there to forget them
    PERFORM fencing.forget_dropped(p.relid::oid) FROM fencing.protected p
      WHERE p.scope_name = reset_scope.scope_name AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = p.relid::oid);
    SELECT string_agg(p.relid::text, ', ' ORDER BY p.relid::text) INTO users
      FROM fencing.protected p WHERE p.scope_name = reset_scope.scope_name AND p.key_columns IS NOT NULL;
    IF users IS NOT NULL THEN
        RAISE EXCEPTION 'fencing scope "%" is in use', scope_name
            USING ERRCODE = 'object_in_use',
                  DETAIL = format('Protected in this scope: %s.', users),
                  HINT = 'Call fencing.unprotect() on those tables first.';
    END IF;
    n := 0;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = sc.storage::oid) THEN
        EXECUTE format('SELECT count(*) FROM %s', sc.storage) INTO n;
        EXECUTE format('DROP TABLE %s CASCADE', sc.storage);
    END IF;
    DELETE FROM fencing.scope_storage s WHERE s.scope_name = reset_scope.scope_name;
    IF EXISTS (SELECT FROM pg_proc f WHERE f.oid = sc.writer::oid) THEN
        EXECUTE format('DROP FUNCTION %s', sc.writer);
    END IF;
    RETURN n;
END
$$;
COMMENT ON FUNCTION fencing.reset_scope(text) IS
    'forget a scope no protected table uses: drop its fences (and whatever other roles built on its storage table) and its owner, so that any role may protect into the name again; returns the number of fences dropped';
REVOKE ALL ON FUNCTION fencing.reset_scope(text) FROM PUBLIC;

REVOKE ALL ON FUNCTION fencing.protect_apply(regclass, name, name[], boolean, text, text, regtype[], oid[], name[], oid),
    fencing.unprotect_apply(regclass, oid),
    fencing.scope_create(text, regrole, regtype[], oid[]),
    fencing.count(oid, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION fencing.protect_apply(regclass, name, name[], boolean, text, text, regtype[], oid[], name[], oid),
    fencing.unprotect_apply(regclass, oid), fencing.count(oid, text) TO PUBLIC;

------------------------------------------------------------------------------
-- Health: is every guard in place?  (fencing.protected_tables)
------------------------------------------------------------------------------

-- Whether the DDL guard was installed (the installing role may create
-- event triggers) and whether it must be there: see ddl_guard.sql.
CREATE TABLE fencing.edition_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    ddl_guard boolean NOT NULL
);
COMMENT ON TABLE fencing.edition_state IS
    'ddl_guard: whether the DDL guard (event triggers) was installed; when it was, its absence makes every guard not intact';
REVOKE ALL ON fencing.edition_state FROM PUBLIC;
GRANT SELECT ON fencing.edition_state TO PUBLIC;

-- What is wrong with the guard of protected table relid, one row per
-- problem: kind (for the DDL guard's message), the member table concerned
-- and the problem as the view shows it.
CREATE FUNCTION fencing.guard_problems(relid regclass,
                                       OUT kind text, OUT member regclass, OUT problem text)
    RETURNS SETOF record
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p fencing.protected;
    m record;
    g record;
    tg record;
    a record;
    k name;
    sc record;
BEGIN
    SELECT * INTO p FROM fencing.protected x WHERE x.relid = guard_problems.relid;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = p.relid) THEN
        kind := 'table'; member := p.relid;
        problem := format('table does not exist (dropped while the DDL guard was absent: SELECT fencing.unprotect(%s) forgets it)', p.relid::oid);
        RETURN NEXT;
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_proc f WHERE f.oid = p.guard_function::oid
                      AND f.pronamespace = 'fencing'::regnamespace AND f.proowner = fencing.owner_oid()
                      AND f.prosecdef = false AND f.proconfig IS NULL
                      AND f.prosrc = fencing.guard_source_of(p.relid)) THEN
        kind := 'function'; member := p.relid;
        problem := format('function %s is not the guard fencing.protect() wrote for the table', p.guard_function);
        RETURN NEXT;
    END IF;
    FOR m IN SELECT t.member, t.depth FROM fencing.tree_of(p.relid) t ORDER BY t.depth, t.member::text LOOP
        member := m.member;
        -- the row guard, and the TRUNCATE guard
        FOR tg IN SELECT * FROM (VALUES ('zz_fencing_guard'::name, p.guard_function::oid, 31::int2),
                                       ('zz_fencing_truncate'::name, 'fencing.guard_truncate()'::regprocedure::oid, 34::int2)) e(tgname, fn, tgtype)
        LOOP
            SELECT x.* INTO g FROM pg_trigger x WHERE x.tgrelid = m.member AND x.tgname = tg.tgname;
            IF NOT FOUND THEN
                kind := 'missing';
                problem := format('trigger %s is missing on %s', tg.tgname, m.member);
                SELECT x.tgname INTO g FROM pg_trigger x WHERE x.tgrelid = m.member AND x.tgfoid = tg.fn LIMIT 1;
                IF FOUND THEN
                    kind := 'renamed';
                    problem := problem || format(' (renamed to %s?)', g.tgname);
                END IF;
                RETURN NEXT;
            ELSIF g.tgfoid <> tg.fn THEN
                kind := 'function';
                problem := format('trigger %s on %s calls another function', tg.tgname, m.member);
                RETURN NEXT;
            ELSIF g.tgtype <> tg.tgtype OR g.tgqual IS NOT NULL OR cardinality(g.tgattr::int2[]) <> 0 THEN
                kind := 'timing';
                problem := format('trigger %s on %s does not fire for every write (timing, events, WHEN or column list changed)', tg.tgname, m.member);
                RETURN NEXT;
            ELSIF g.tgenabled <> 'A' THEN
                kind := CASE WHEN g.tgenabled = 'D' THEN 'disabled' ELSE 'firing' END;
                problem := format('trigger %s on %s is not ENABLE ALWAYS (tgenabled = %s)', tg.tgname, m.member, g.tgenabled);
                RETURN NEXT;
            END IF;
        END LOOP;
        -- BEFORE ROW triggers that fire after the guard (name order)
        FOR g IN SELECT x.tgname FROM pg_trigger x
                  WHERE x.tgrelid = m.member AND (x.tgtype::int & 3) = 3
                    AND x.tgname::text COLLATE "C" > 'zz_fencing_guard' AND x.tgname <> 'zz_fencing_truncate'
                  ORDER BY 1 LOOP
            kind := 'after';
            problem := format('trigger %s on %s fires after the guard (BEFORE ROW triggers fire in name order)', g.tgname, m.member);
            RETURN NEXT;
        END LOOP;
        -- the fence column
        SELECT x.* INTO a FROM pg_attribute x
         WHERE x.attrelid = m.member AND x.attname = p.fence_column AND x.attnum > 0 AND NOT x.attisdropped;
        kind := 'fence';
        IF NOT FOUND THEN
            problem := format('fence column %I is missing on %s', p.fence_column, m.member);
            RETURN NEXT;
        ELSIF a.atttypid <> 'fencing.fence'::regtype THEN
            problem := format('fence column %I on %s is of type %s, not fencing.fence', p.fence_column, m.member, a.atttypid::regtype);
            RETURN NEXT;
        ELSIF a.attgenerated <> '' THEN
            problem := format('fence column %I on %s is a generated column', p.fence_column, m.member);
            RETURN NEXT;
        ELSIF a.atthasdef OR a.attidentity <> '' THEN
            problem := format('fence column %I on %s has a default', p.fence_column, m.member);
            RETURN NEXT;
        END IF;
        -- the key columns
        FOREACH k IN ARRAY coalesce(p.key_columns, '{}') LOOP
            SELECT x.* INTO a FROM pg_attribute x
             WHERE x.attrelid = m.member AND x.attname = k AND x.attnum > 0 AND NOT x.attisdropped;
            kind := 'key';
            IF NOT FOUND THEN
                problem := format('key column %I is missing on %s', k, m.member);
                RETURN NEXT;
            ELSIF a.attgenerated <> '' THEN
                problem := format('key column %I on %s is a generated column', k, m.member);
                RETURN NEXT;
            END IF;
        END LOOP;
    END LOOP;
    -- the scope's storage, as the guard will find it
    member := p.relid;
    IF p.key_columns IS NOT NULL THEN
        SELECT s.*, c.oid AS storage_oid INTO sc FROM fencing.scope_storage s
          LEFT JOIN pg_class c ON c.oid = s.storage
         WHERE s.scope_name = p.scope_name;
        kind := 'storage';
        IF NOT FOUND THEN
            problem := format('fencing scope %L is not registered in fencing.scope_storage', p.scope_name);
            RETURN NEXT;
        ELSIF sc.storage_oid IS NULL THEN
            problem := format('the storage table of fencing scope %L is missing', p.scope_name);
            RETURN NEXT;
        ELSIF NOT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = sc.storage_oid AND i.indisunique
                             AND i.indisvalid AND i.indnullsnotdistinct) THEN
            problem := format('the storage table %s of fencing scope %L has lost its unique index on the key columns', sc.storage, p.scope_name);
            RETURN NEXT;
        ELSIF EXISTS (SELECT FROM pg_trigger x WHERE x.tgrelid = sc.storage_oid)
              OR EXISTS (SELECT FROM pg_class c WHERE c.oid = sc.storage_oid AND c.relforcerowsecurity) THEN
            problem := format('the storage table %s of fencing scope %L has triggers or forced row security', sc.storage, p.scope_name);
            RETURN NEXT;
        END IF;
    END IF;
    -- the DDL guard, once installed, must stay
    IF (SELECT e.ddl_guard FROM fencing.edition_state e) AND NOT fencing.ddl_guard_present() THEN
        kind := 'ddl_guard';
        problem := 'the DDL guard''s event triggers are missing or disabled';
        RETURN NEXT;
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.guard_problems(regclass) IS
    'what is wrong with the guard of a protected table, one row per problem';

-- The source protect() would write for the guard of relid now.
CREATE FUNCTION fencing.guard_source_of(relid regclass) RETURNS text
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT fencing.guard_source(p.fence_column, p.key_columns, p.strict, p.scope_name, s.writer, p.lease,
                                (SELECT array_agg(a.attname ORDER BY k.ord)
                                   FROM pg_index x
                                  CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
                                   JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum
                                  WHERE x.indrelid = p.relid AND x.indisprimary),
                                c.relkind = 'p')
      FROM fencing.protected p
      JOIN pg_class c ON c.oid = p.relid
      LEFT JOIN fencing.scope_storage s ON s.scope_name = p.scope_name AND p.key_columns IS NOT NULL
     WHERE p.relid = guard_source_of.relid
$$;
COMMENT ON FUNCTION fencing.guard_source_of(regclass) IS
    'internal: the source of the guard function protect() would write for the table now';

-- Are the DDL guard's event triggers there and enabled ALWAYS?
CREATE FUNCTION fencing.ddl_guard_present() RETURNS boolean
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT count(*) = 3 FROM pg_event_trigger t
      JOIN pg_proc f ON f.oid = t.evtfoid AND f.pronamespace = 'fencing'::regnamespace
     WHERE (t.evtname, t.evtevent, f.proname) IN (('fencing_ddl_guard_start', 'ddl_command_start', 'ddl_guard_start'),
                                                  ('fencing_ddl_guard_end', 'ddl_command_end', 'ddl_guard_end'),
                                                  ('fencing_ddl_guard_drop', 'sql_drop', 'ddl_guard_drop'))
       AND t.evtenabled = 'A'
$$;
COMMENT ON FUNCTION fencing.ddl_guard_present() IS
    'internal: are the DDL guard''s event triggers there and enabled ALWAYS';

-- What the on-call engineer checks first.  guard_intact is false when a
-- guard trigger is missing, disabled, renamed or calls another function,
-- when a guard function is not the code protect() wrote, when a fence or
-- key column was dropped or changed, when the scope's storage is missing
-- or damaged, and, once installed, when the DDL guard is gone.
-- ddl_guarded says whether the DDL guard watches the table: false where
-- the installing role could not create event triggers (then DDL that
-- breaks a guard is not refused; this view shows what it broke).
CREATE VIEW fencing.protected_tables AS
SELECT p.relid,
       CASE WHEN p.key_columns IS NULL THEN 'row'
            WHEN cardinality(p.key_columns) = 0 THEN 'table'
            ELSE 'key' END AS scope_kind,
       p.key_columns,
       p.strict,
       p.scope_name,
       (SELECT count(*) FROM fencing.tree_of(p.relid) t WHERE t.depth > 0) AS partitions,
       pr.problem IS NULL AS guard_intact,
       pr.problem,
       fencing.ddl_guard_present() AS ddl_guarded
  FROM fencing.protected p
  LEFT JOIN LATERAL (
        SELECT string_agg(x.problem, '; ' ORDER BY x.problem) AS problem
          FROM fencing.guard_problems(p.relid) x) pr ON true;
COMMENT ON VIEW fencing.protected_tables IS
    'one row per protected table: scope, partitions and inheritance children (partitions), whether its guard is intact (problem says what is wrong), and whether the DDL guard watches it';
GRANT SELECT ON fencing.protected_tables TO PUBLIC;

------------------------------------------------------------------------------
-- Statistics: the guard's counters, read from their sequences
------------------------------------------------------------------------------

-- Each protected table's refusals and bypasses (see fencing.count()).
-- accepted is NULL: counting every accepted write would cost every write.
CREATE FUNCTION fencing.stats_internal(
        OUT relid regclass, OUT accepted bigint, OUT rejected_stale bigint,
        OUT rejected_missing bigint, OUT bypassed bigint,
        OUT rejected_already_used bigint, OUT rejected_lease_expired bigint)
    RETURNS SETOF record
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p record;
    g text;
BEGIN
    FOR p IN SELECT x.relid, f.proname FROM fencing.protected x
               JOIN pg_proc f ON f.oid = x.guard_function::oid ORDER BY x.relid LOOP
        g := p.proname;
        relid := p.relid;
        accepted := NULL;
        rejected_stale := fencing.stat_of(g, 'rejected_stale');
        rejected_missing := fencing.stat_of(g, 'rejected_missing');
        bypassed := fencing.stat_of(g, 'bypassed');
        rejected_already_used := fencing.stat_of(g, 'rejected_already_used');
        rejected_lease_expired := fencing.stat_of(g, 'rejected_lease_expired');
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.stats_internal() IS
    'the guard''s counters for the protected tables of this database (read it through the view fencing.stats)';

CREATE FUNCTION fencing.stat_of(guard text, counter text) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce(pg_sequence_last_value(to_regclass(format('fencing.%I', guard || '_' || counter))), 0) $$;
COMMENT ON FUNCTION fencing.stat_of(text, text) IS 'internal: one counter of a protected table';
REVOKE ALL ON FUNCTION fencing.stat_of(text, text) FROM PUBLIC;

CREATE VIEW fencing.stats AS
    SELECT s.relid, s.accepted, s.rejected_stale, s.rejected_missing, s.bypassed,
           s.rejected_already_used, s.rejected_lease_expired
      FROM fencing.stats_internal() AS s;
COMMENT ON VIEW fencing.stats IS
    'writes to protected tables of this database refused or bypassed by the guard since fencing.stats_reset(), counted in sequences (no rollback takes them back); accepted is NULL in this edition';
COMMENT ON COLUMN fencing.stats.accepted IS 'NULL: the edition does not count accepted writes (it would cost every write)';
COMMENT ON COLUMN fencing.stats.rejected_stale IS 'writes rejected with SF001 stale_token (a lost lock)';
COMMENT ON COLUMN fencing.stats.rejected_missing IS 'writes rejected with SF002 (no token, or two that differ), TRUNCATE included';
COMMENT ON COLUMN fencing.stats.bypassed IS 'writes let through without a check by fencing.bypass';
COMMENT ON COLUMN fencing.stats.rejected_already_used IS 'writes rejected with SF001 token_already_used (a programming error, never a lost lock)';
COMMENT ON COLUMN fencing.stats.rejected_lease_expired IS 'writes rejected because their built-in lease was not live';
GRANT SELECT ON fencing.stats TO PUBLIC;

-- Zero every counter of the edition in this database.
CREATE FUNCTION fencing.stats_reset() RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    s regclass;
BEGIN
    FOR s IN SELECT c.oid::regclass FROM pg_class c
              WHERE c.relnamespace = 'fencing'::regnamespace AND c.relkind = 'S'
                AND (c.relname LIKE 'guard\_%' OR c.relname LIKE 'lease\_stat\_%' OR c.relname LIKE 'idem\_stat\_%')
    LOOP
        PERFORM setval(s, 1, false);
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.stats_reset() IS
    'zero fencing.stats, fencing.lease_stats and fencing.idempotency_stats of this database';
REVOKE ALL ON FUNCTION fencing.stats_reset() FROM PUBLIC;

------------------------------------------------------------------------------
-- Leases: a lock service inside the database
------------------------------------------------------------------------------

-- Tokens.  Every grant of a name gets (current_epoch(), 1) when the epoch
-- has grown since the name's last grant, and the last token's next()
-- otherwise, so every grant beats all earlier grants of that name; a
-- released or expired lease keeps its row and its last token.
--
-- Epochs.  current_epoch() = (effective timeline << 32) + bumps, as in the
-- C edition.  The timeline is read from the name of the current WAL file
-- (pg_walfile_name(pg_current_wal_lsn())), the system identifier from
-- pg_control_system(), where the role may call them; where it may not
-- (a service that revokes them), the recorded timeline stays, and the
-- epoch moves only by fencing.bump_epoch(): run it after every failover
-- and restore.
CREATE TABLE fencing.epoch_state (
    singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    system_identifier bigint,
    timeline bigint NOT NULL CHECK (timeline >= 0),
    timeline_offset bigint NOT NULL DEFAULT 0,
    bumps bigint NOT NULL DEFAULT 0 CHECK (bumps >= 0 AND bumps < 4294967296)
);
COMMENT ON TABLE fencing.epoch_state IS
    'what fencing.current_epoch() is computed from: the system and effective timeline last seen, the timeline offset, and the bumps; no row means none yet';
REVOKE ALL ON fencing.epoch_state FROM PUBLIC;
GRANT SELECT ON fencing.epoch_state TO PUBLIC;

-- The server's timeline and system identifier, as far as this role may read
-- them (NULL where it may not, and the timeline on a standby).
CREATE FUNCTION fencing.server_timeline(OUT timeline bigint, OUT system_identifier bigint)
    RETURNS record
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT pg_is_in_recovery()
       AND has_function_privilege('pg_catalog.pg_current_wal_lsn()', 'EXECUTE')
       AND has_function_privilege('pg_catalog.pg_walfile_name(pg_lsn)', 'EXECUTE') THEN
        BEGIN
            timeline := ('x' || left(pg_walfile_name(pg_current_wal_lsn()), 8))::bit(32)::bigint;
        EXCEPTION WHEN feature_not_supported OR object_not_in_prerequisite_state OR insufficient_privilege THEN
            -- a service that keeps the WAL to itself (Aurora refuses
            -- pg_current_wal_lsn()): no timeline, as for a role that may
            -- not read it; the epoch moves by fencing.bump_epoch()
            timeline := NULL;
        END;
    END IF;
    IF has_function_privilege('pg_catalog.pg_control_system()', 'EXECUTE') THEN
        system_identifier := (SELECT s.system_identifier FROM pg_control_system() s);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.server_timeline() IS
    'internal: the WAL timeline of this server and its system identifier (NULL where the role may not read them)';

-- Compute the current epoch; with persist, record it in epoch_state; with
-- bump, bump it first.  The C edition's rules: another system identifier,
-- or a timeline lower than one recorded, counts as a new timeline above
-- every timeline recorded; a bump becomes the larger of bumps + 1 and the
-- Unix time in seconds.
CREATE FUNCTION fencing.epoch_internal(persist boolean, bump boolean)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    srv record;
    st fencing.epoch_state;
    have_row boolean;
    locked boolean := false;
    eff bigint;
    v_bumps bigint;
BEGIN
    SELECT * INTO STRICT srv FROM fencing.server_timeline();
    IF bump THEN
        persist := true;
    END IF;
    LOOP
        IF locked THEN
            SELECT * INTO st FROM fencing.epoch_state FOR UPDATE;
        ELSE
            SELECT * INTO st FROM fencing.epoch_state;
        END IF;
        have_row := FOUND;

        IF srv.timeline IS NULL THEN
            -- the timeline cannot be read: the one recorded (bumps move on)
            eff := coalesce(st.timeline, 1);
        ELSE
            eff := srv.timeline + coalesce(st.timeline_offset, 0);
            IF have_row AND ((st.system_identifier IS DISTINCT FROM srv.system_identifier
                              AND srv.system_identifier IS NOT NULL AND st.system_identifier IS NOT NULL)
                             OR eff < st.timeline) THEN
                eff := greatest(eff, st.timeline + 1);
            END IF;
        END IF;
        v_bumps := coalesce(st.bumps, 0);
        IF bump AND locked THEN
            v_bumps := greatest(v_bumps + 1, floor(extract(epoch FROM clock_timestamp()))::bigint);
            IF v_bumps >= 4294967296 THEN
                RAISE EXCEPTION 'cannot bump the epoch any further'
                    USING ERRCODE = '22003', DETAIL = 'The bump count would reach 2^32.';
            END IF;
        END IF;

        IF NOT persist OR (have_row AND NOT bump
                           AND st.system_identifier IS NOT DISTINCT FROM coalesce(srv.system_identifier, st.system_identifier)
                           AND st.timeline = eff) THEN
            EXIT;
        END IF;
        IF NOT locked THEN
            INSERT INTO fencing.epoch_state (system_identifier, timeline)
                 VALUES (srv.system_identifier, coalesce(srv.timeline, 1))
            ON CONFLICT (singleton) DO NOTHING;
            locked := true;
            CONTINUE;
        END IF;
        UPDATE fencing.epoch_state
           SET system_identifier = coalesce(srv.system_identifier, system_identifier),
               timeline = eff,
               timeline_offset = CASE WHEN srv.timeline IS NULL THEN timeline_offset ELSE eff - srv.timeline END,
               bumps = v_bumps;
        EXIT;
    END LOOP;
    RETURN eff * 4294967296 + v_bumps;
END
$$;
COMMENT ON FUNCTION fencing.epoch_internal(boolean, boolean) IS
    'internal: compute (and with persist, record; with bump, bump) the epoch of fencing.current_epoch()';

CREATE FUNCTION fencing.current_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT fencing.epoch_internal(false, false) $$;
COMMENT ON FUNCTION fencing.current_epoch() IS
    'the epoch of the tokens granted now: (timeline << 32) + bumps; grows on promotion, point-in-time recovery (where the timeline is readable) and fencing.bump_epoch()';

CREATE FUNCTION fencing.bump_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT fencing.epoch_internal(true, true) $$;
COMMENT ON FUNCTION fencing.bump_epoch() IS
    'raise the epoch (after restoring a snapshot, and after a failover where the timeline cannot be read) and return it';
REVOKE ALL ON FUNCTION fencing.bump_epoch() FROM PUBLIC;
REVOKE ALL ON FUNCTION fencing.epoch_internal(boolean, boolean) FROM PUBLIC;

-- The epoch of a grant, recorded (lease_acquire, as its caller).
CREATE FUNCTION fencing.grant_epoch() RETURNS bigint
    LANGUAGE sql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT fencing.epoch_internal(true, false) $$;
COMMENT ON FUNCTION fencing.grant_epoch() IS
    'internal: the current epoch, recorded in fencing.epoch_state (a grant''s epoch)';

-- The leases.  A lease name belongs to the role that first acquired it;
-- row security shows and lets write a lease's row to that role, its
-- members and the edition's owner only, so the lease functions run as
-- their caller and PostgreSQL itself keeps every other role from a
-- lease's token.  (A role may write its own leases' rows directly; that
-- harms only its own leases.)
CREATE TABLE fencing.leases (
    name text PRIMARY KEY CHECK (name <> ''),
    holder text,
    token fencing.fence,
    granted_at timestamptz,
    expires_at timestamptz,
    owner regrole NOT NULL
);
COMMENT ON TABLE fencing.leases IS
    'leases granted by fencing.lease_acquire(): a lease is live while expires_at is in the future; the row keeps the last token after expiry or release; each row visible to its owner role only (fencing.lease_status shows every lease, tokens masked)';
COMMENT ON COLUMN fencing.leases.owner IS
    'the role the lease belongs to: the first role that acquired it; the edition''s owner hands a lease over by changing it';
ALTER TABLE fencing.leases ENABLE ROW LEVEL SECURITY;
CREATE POLICY leases_of_their_owner ON fencing.leases
    USING (pg_catalog.pg_has_role(owner, 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role(owner, 'USAGE'));
REVOKE ALL ON fencing.leases FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON fencing.leases TO PUBLIC;

-- Counters (sequences: no rollback takes them back).
CREATE SEQUENCE fencing.lease_stat_acquired;
CREATE SEQUENCE fencing.lease_stat_acquire_refused;
CREATE SEQUENCE fencing.lease_stat_renewed;
CREATE SEQUENCE fencing.lease_stat_renew_failed;
CREATE SEQUENCE fencing.lease_stat_released;
CREATE SEQUENCE fencing.lease_stat_release_failed;
CREATE SEQUENCE fencing.lease_stat_rejected;
GRANT USAGE ON SEQUENCE fencing.lease_stat_acquired, fencing.lease_stat_acquire_refused,
    fencing.lease_stat_renewed, fencing.lease_stat_renew_failed, fencing.lease_stat_released,
    fencing.lease_stat_release_failed, fencing.lease_stat_rejected TO PUBLIC;

-- Who owns a lease name (NULL: nobody yet), whoever asks: the lease
-- functions name the owner in their 42501, as the C edition's do.
CREATE FUNCTION fencing.lease_owner(name text) RETURNS regrole
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT l.owner FROM fencing.leases l WHERE l.name = lease_owner.name $$;
COMMENT ON FUNCTION fencing.lease_owner(text) IS
    'internal: the role a lease name belongs to (NULL while no role acquired it)';

-- 42501 for a lease of another role (its row is there, hidden from us).
CREATE FUNCTION fencing.lease_refuse_foreign(name text) RETURNS void
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o regrole := fencing.lease_owner(name);
BEGIN
    IF o IS NOT NULL THEN
        RAISE EXCEPTION 'permission denied for lease "%"', name
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = CASE WHEN EXISTS (SELECT FROM pg_roles r WHERE r.oid = o::oid)
                                THEN format('Lease "%s" belongs to role "%s".', name, o)
                                ELSE format('Lease "%s" belongs to a role that was dropped (OID %s).', name, o::oid) END,
                  HINT = 'Only the lease''s owner role and its members may acquire, renew, release or check it; the extension''s owner can hand it to another role by setting its owner in fencing.leases.';
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.lease_refuse_foreign(text) IS
    'internal: raise 42501 when the lease name belongs to a role the caller does not act for';

-- Check the arguments shared by the lease functions: 22004 for a NULL
-- name (or ttl), 22023 for an empty name or a ttl that is not positive;
-- returns now + ttl (NULL without a ttl).
CREATE FUNCTION fencing.lease_args(name text, ttl interval, need_ttl boolean, now timestamptz)
    RETURNS timestamptz
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION 'lease name must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF name = '' THEN
        RAISE EXCEPTION 'lease name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF ttl IS NULL THEN
        IF need_ttl THEN
            RAISE EXCEPTION 'lease ttl must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
        RETURN NULL;
    END IF;
    IF now + ttl <= now THEN
        RAISE EXCEPTION 'lease ttl must be positive'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = format('The ttl is "%s".', ttl);
    END IF;
    RETURN now + ttl;
END
$$;
COMMENT ON FUNCTION fencing.lease_args(text, interval, boolean, timestamptz) IS
    'internal: check a lease''s name and ttl (22004, 22023); now + ttl';

CREATE FUNCTION fencing.lease_acquire(name text, holder text, ttl interval)
    RETURNS fencing.fence
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz;
    v_epoch bigint;
    r fencing.leases;
    v_token fencing.fence;
    attempt integer := 0;
BEGIN
    IF lease_acquire.name IS NULL THEN
        RAISE EXCEPTION 'lease name must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF lease_acquire.name = '' THEN
        RAISE EXCEPTION 'lease name must not be empty' USING ERRCODE = 'invalid_parameter_value';
    ELSIF lease_acquire.holder IS NULL THEN
        RAISE EXCEPTION 'lease holder must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF lease_acquire.holder = '' THEN
        RAISE EXCEPTION 'lease holder must not be empty' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_expires := fencing.lease_args(lease_acquire.name, lease_acquire.ttl, true, v_now);
    v_epoch := fencing.grant_epoch();
    LOOP
        attempt := attempt + 1;
        IF attempt > 10 THEN
            RAISE EXCEPTION 'lease "%" keeps disappearing', lease_acquire.name
                USING ERRCODE = 'internal_error';
        END IF;
        SELECT * INTO r FROM fencing.leases l WHERE l.name = lease_acquire.name FOR UPDATE;
        IF NOT FOUND THEN
            PERFORM fencing.lease_refuse_foreign(lease_acquire.name);
            INSERT INTO fencing.leases AS l (name, holder, token, granted_at, expires_at, owner)
            VALUES (lease_acquire.name, lease_acquire.holder,
                    ROW(v_epoch, 1)::fencing.fence_pair, v_now, v_expires, current_user::regrole)
            ON CONFLICT (name) DO NOTHING
            RETURNING (l.token).* INTO v_token;
            CONTINUE WHEN NOT FOUND;
            EXIT;
        END IF;
        IF r.token IS NOT NULL AND r.expires_at IS NOT NULL AND r.expires_at > v_now
           AND r.holder IS DISTINCT FROM lease_acquire.holder THEN
            PERFORM nextval('fencing.lease_stat_acquire_refused');
            RETURN NULL;
        END IF;
        UPDATE fencing.leases AS l
           SET holder = lease_acquire.holder,
               token = CASE WHEN l.token IS NULL OR (l.token).epoch < v_epoch
                            THEN ROW(v_epoch, 1)::fencing.fence_pair
                            ELSE fencing.next(l.token) END,
               granted_at = v_now,
               expires_at = v_expires
         WHERE l.name = lease_acquire.name
        RETURNING (l.token).* INTO v_token;
        EXIT;
    END LOOP;
    PERFORM nextval('fencing.lease_stat_acquired');
    RETURN v_token;
END
$$;
COMMENT ON FUNCTION fencing.lease_acquire(text, text, interval) IS
    'grant the lease for ttl and return its new token; NULL while another holder''s lease is live (the same holder gets a new token); a new name belongs to the calling role, other roles get 42501';

-- Set the expiry of a live lease held with token: the body of renew and
-- release (and of lease_next, which also moves the token on).
CREATE FUNCTION fencing.lease_renew(name text, token fencing.fence, ttl interval)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz := fencing.lease_args(lease_renew.name, lease_renew.ttl, true, v_now);
BEGIN
    IF lease_renew.token IS NOT NULL THEN
        UPDATE fencing.leases AS l SET expires_at = v_expires
         WHERE l.name = lease_renew.name AND l.token = lease_renew.token AND l.expires_at > v_now;
        IF FOUND THEN
            PERFORM nextval('fencing.lease_stat_renewed');
            RETURN true;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM fencing.leases l WHERE l.name = lease_renew.name) THEN
        PERFORM fencing.lease_refuse_foreign(lease_renew.name);
    END IF;
    PERFORM nextval('fencing.lease_stat_renew_failed');
    RETURN false;
END
$$;
COMMENT ON FUNCTION fencing.lease_renew(text, fencing.fence, interval) IS
    'extend a live lease held with token to now + ttl; false once it expired, was released or was taken over; 42501 for roles the lease does not belong to';

CREATE FUNCTION fencing.lease_release(name text, token fencing.fence)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM fencing.lease_args(lease_release.name, NULL, false, v_now);
    IF lease_release.token IS NOT NULL THEN
        -- the row and its token stay: the next grant must beat the token
        UPDATE fencing.leases AS l SET expires_at = v_now
         WHERE l.name = lease_release.name AND l.token = lease_release.token AND l.expires_at > v_now;
        IF FOUND THEN
            PERFORM nextval('fencing.lease_stat_released');
            RETURN true;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM fencing.leases l WHERE l.name = lease_release.name) THEN
        PERFORM fencing.lease_refuse_foreign(lease_release.name);
    END IF;
    PERFORM nextval('fencing.lease_stat_release_failed');
    RETURN false;
END
$$;
COMMENT ON FUNCTION fencing.lease_release(text, fencing.fence) IS
    'give up a live lease held with token, so that the next lease_acquire succeeds at once; false when token does not hold it; 42501 for roles the lease does not belong to';

CREATE FUNCTION fencing.lease_check(name text, token fencing.fence)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    r fencing.leases;
BEGIN
    PERFORM fencing.lease_args(lease_check.name, NULL, false, NULL);
    SELECT * INTO r FROM fencing.leases l WHERE l.name = lease_check.name;
    IF NOT FOUND THEN
        PERFORM fencing.lease_refuse_foreign(lease_check.name);
        RETURN false;
    END IF;
    RETURN lease_check.token IS NOT NULL AND r.token = lease_check.token
           AND r.expires_at > clock_timestamp();
END
$$;
COMMENT ON FUNCTION fencing.lease_check(text, fencing.fence) IS
    'true while token is the lease''s current token and the lease is live; 42501 for roles the lease does not belong to (the answer would tell them its token)';

-- A new token of the lease while token is its current token and the lease
-- is live (renewed to ttl when given): one token per transaction of a
-- holder that still holds its lease.  Greater than every token granted
-- for the name; NULL when the lease is not held with token.
CREATE FUNCTION fencing.lease_next(name text, token fencing.fence, ttl interval DEFAULT NULL)
    RETURNS fencing.fence
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := clock_timestamp();
    v_expires timestamptz := fencing.lease_args(lease_next.name, lease_next.ttl, false, v_now);
    v_epoch bigint;
    v_token fencing.fence;
BEGIN
    IF lease_next.token IS NOT NULL THEN
        v_epoch := fencing.grant_epoch();
        -- the next token of the same grant (its holder and start unchanged),
        -- beating every earlier one as a grant's does
        UPDATE fencing.leases AS l
           SET token = CASE WHEN (l.token).epoch < v_epoch THEN ROW(v_epoch, 1)::fencing.fence_pair
                            ELSE fencing.next(l.token) END,
               expires_at = coalesce(v_expires, l.expires_at)
         WHERE l.name = lease_next.name AND l.token = lease_next.token AND l.expires_at > v_now
        RETURNING (l.token).* INTO v_token;
        IF FOUND THEN
            PERFORM nextval('fencing.lease_stat_renewed');
            RETURN v_token;
        END IF;
    END IF;
    IF NOT EXISTS (SELECT FROM fencing.leases l WHERE l.name = lease_next.name) THEN
        PERFORM fencing.lease_refuse_foreign(lease_next.name);
    END IF;
    PERFORM nextval('fencing.lease_stat_renew_failed');
    RETURN NULL;
END
$$;
COMMENT ON FUNCTION fencing.lease_next(text, fencing.fence, interval) IS
    'a new token of the lease while token is its current token and the lease is live (renewed to ttl when given): greater than every token granted for the name; NULL when the lease is not held with token; 42501 for roles the lease does not belong to';

-- The same with tokens written as text (E:C or (E,C)).
CREATE FUNCTION fencing.lease_renew(name text, token text, ttl interval) RETURNS boolean
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_renew(name, fencing.fence_from_text(token), ttl) $$;
CREATE FUNCTION fencing.lease_release(name text, token text) RETURNS boolean
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_release(name, fencing.fence_from_text(token)) $$;
CREATE FUNCTION fencing.lease_check(name text, token text) RETURNS boolean
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_check(name, fencing.fence_from_text(token)) $$;
CREATE FUNCTION fencing.lease_next(name text, token text, ttl interval DEFAULT NULL) RETURNS fencing.fence
    LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.lease_next(name, fencing.fence_from_text(token), ttl) $$;
COMMENT ON FUNCTION fencing.lease_renew(text, text, interval) IS 'fencing.lease_renew() with the token written E:C';
COMMENT ON FUNCTION fencing.lease_release(text, text) IS 'fencing.lease_release() with the token written E:C';
COMMENT ON FUNCTION fencing.lease_check(text, text) IS 'fencing.lease_check() with the token written E:C';
COMMENT ON FUNCTION fencing.lease_next(text, text, interval) IS 'fencing.lease_next() with the token written E:C';

-- Every lease, for everyone (etcdctl lease timetolive): holder and token
-- only for the lease's owner role (its members), the edition's owner and
-- members of pg_read_all_stats.  The view reads the table as its owner.
CREATE VIEW fencing.lease_status AS
    SELECT l.name,
           CASE WHEN pg_catalog.pg_has_role(l.owner::pg_catalog.oid, 'MEMBER')
                  OR pg_catalog.pg_has_role(fencing.owner_oid(), 'MEMBER')
                  OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')
                THEN l.holder END AS holder,
           CASE WHEN pg_catalog.pg_has_role(l.owner::pg_catalog.oid, 'MEMBER')
                  OR pg_catalog.pg_has_role(fencing.owner_oid(), 'MEMBER')
                  OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')
                THEN l.token END AS token,
           l.granted_at,
           l.expires_at,
           (l.token IS NOT NULL AND l.expires_at IS NOT NULL AND l.expires_at > c.now) AS live,
           CASE WHEN l.token IS NOT NULL AND l.expires_at > c.now THEN l.expires_at - c.now END AS remaining
      FROM fencing.leases AS l
     CROSS JOIN (SELECT pg_catalog.clock_timestamp() AS now) AS c;
COMMENT ON VIEW fencing.lease_status IS
    'every lease with its holder, grant, expiry, whether it is live and the time it has left (etcdctl lease timetolive); holder and token only for roles the lease belongs to, the edition''s owner and pg_read_all_stats';
REVOKE ALL ON fencing.lease_status FROM PUBLIC;
GRANT SELECT ON fencing.lease_status TO PUBLIC;

-- The guard of a table protected with a lease: its write's token must be
-- the lease's current token, and the lease live.  lease_held() answers
-- as the edition's owner without showing the token; lease_guard() raises
-- the C edition's SF001, showing the lease's token to those who may see it.
CREATE FUNCTION fencing.lease_held(name text, token fencing.fence, relid oid,
                                   OUT state text, OUT expires_at text, OUT owner text)
    RETURNS record
    LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    SET datestyle = 'ISO, MDY'
AS $$
DECLARE
    r fencing.leases;
BEGIN
    SELECT * INTO r FROM fencing.leases l WHERE l.name = lease_held.name;
    expires_at := r.expires_at::text;
    owner := r.owner::text;
    IF FOUND AND NOT pg_has_role((SELECT c.relowner FROM pg_class c WHERE c.oid = relid), r.owner, 'USAGE') THEN
        state := 'foreign';
    ELSIF NOT FOUND OR r.token IS NULL OR r.expires_at IS NULL THEN
        state := 'never';
    ELSIF r.token < token THEN
        state := 'newer';
    ELSIF r.token = token THEN
        state := CASE WHEN r.expires_at > clock_timestamp() THEN 'held' ELSE 'expired' END;
    ELSE
        state := CASE WHEN r.expires_at > clock_timestamp() THEN 'moved_live' ELSE 'moved_expired' END;
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.lease_held(text, fencing.fence, oid) IS
    'internal: whether token holds the lease of table relid (held), or why not (times in ISO style)';

CREATE FUNCTION fencing.lease_guard(lease text, token fencing.fence, relid oid) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    h record;
    t text := fencing.fence_text(token);
    cur fencing.fence;
    relname text;
    nspname text;
BEGIN
    SELECT * INTO h FROM fencing.lease_held(lease, token, relid);
    IF h.state = 'held' THEN
        RETURN;
    END IF;
    IF h.state = 'foreign' THEN
        SELECT c.relname, n.nspname INTO relname, nspname
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = relid;
        RAISE EXCEPTION 'permission denied for lease "%" of table "%"', lease, relname
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The lease belongs to role "%s", which the owner of the table, role "%s", is not a member of.',
                                  h.owner, (SELECT c.relowner::regrole FROM pg_class c WHERE c.oid = relid)),
                  HINT = 'Protect the table with a lease of its owner''s, or grant the lease''s owner role to the table''s owner.',
                  TABLE = relname, SCHEMA = nspname;
    END IF;
    PERFORM nextval('fencing.lease_stat_rejected');
    PERFORM fencing.count(relid, 'rejected_lease_expired');
    SELECT c.relname, n.nspname INTO relname, nspname
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = relid;
    -- the lease's token, for the roles that may see it (row security)
    SELECT (l.token).* INTO cur FROM fencing.leases l WHERE l.name = lease;
    IF h.state = 'never' THEN
        RAISE EXCEPTION 'fence token % does not hold lease "%" of table "%"', t, lease, relname
            USING ERRCODE = 'SF001', CONSTRAINT = 'lease_expired',
                  DETAIL = format('Lease "%s" has never been granted.', lease),
                  HINT = 'Acquire the lease with fencing.lease_acquire() and write with the token it returns.',
                  TABLE = relname, SCHEMA = nspname;
    ELSIF h.state = 'newer' THEN
        RAISE EXCEPTION 'fence token % does not hold lease "%" of table "%"', t, lease, relname
            USING ERRCODE = 'SF001', CONSTRAINT = 'lease_expired',
                  DETAIL = CASE WHEN cur IS NOT NULL
                                THEN format('Token %s is newer than the current token of the lease, %s.', t, fencing.fence_text(cur))
                                ELSE format('Token %s is newer than the current token of the lease.', t) END,
                  HINT = 'Acquire the lease with fencing.lease_acquire() and write with the token it returns.',
                  TABLE = relname, SCHEMA = nspname;
    ELSIF h.state = 'expired' THEN
        RAISE EXCEPTION 'lease "%" of table "%" expired: fence token % is no longer valid', lease, relname, t
            USING ERRCODE = 'SF001', CONSTRAINT = 'lease_expired',
                  DETAIL = format('Lease "%s" with token %s ran out or was released at %s.', lease, t, h.expires_at),
                  HINT = 'The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token.',
                  TABLE = relname, SCHEMA = nspname;
    ELSIF cur IS NOT NULL THEN
        RAISE EXCEPTION 'lease "%" of table "%" has moved on: fence token % is no longer valid', lease, relname, t
            USING ERRCODE = 'SF001', CONSTRAINT = 'stale_token',
                  DETAIL = CASE WHEN h.state = 'moved_live'
                                THEN format('The current token of lease "%s" is %s, live until %s.', lease, fencing.fence_text(cur), h.expires_at)
                                ELSE format('The current token of lease "%s" is %s, expired at %s.', lease, fencing.fence_text(cur), h.expires_at) END,
                  HINT = 'The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token.',
                  TABLE = relname, SCHEMA = nspname;
    ELSE
        RAISE EXCEPTION 'lease "%" of table "%" has moved on: fence token % is no longer valid', lease, relname, t
            USING ERRCODE = 'SF001', CONSTRAINT = 'stale_token',
                  DETAIL = CASE WHEN h.state = 'moved_live'
                                THEN format('Lease "%s" is held with a newer token, live until %s.', lease, h.expires_at)
                                ELSE format('Lease "%s" was last granted with a newer token, which expired at %s.', lease, h.expires_at) END,
                  HINT = 'The lease was lost: stop writing, re-acquire it with fencing.lease_acquire() and retry with the new token.',
                  TABLE = relname, SCHEMA = nspname;
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.lease_guard(text, fencing.fence, oid) IS
    'internal: raise SF001 unless token is the lease''s current token and the lease is live (the guard of tables protected with a lease)';

-- What happened to the leases of this database, counted in sequences.
-- expired and the hold times need the C edition's shared memory (a grant's
-- end counted once, whichever session notices it): NULL here.
CREATE FUNCTION fencing.seq_value(seq regclass) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT coalesce(pg_sequence_last_value(seq), 0) $$;
COMMENT ON FUNCTION fencing.seq_value(regclass) IS
    'internal: the count a counter sequence of the edition holds';
GRANT EXECUTE ON FUNCTION fencing.seq_value(regclass) TO PUBLIC;

CREATE VIEW fencing.lease_stats AS
    SELECT fencing.seq_value('fencing.lease_stat_acquired') AS acquired,
           fencing.seq_value('fencing.lease_stat_acquire_refused') AS acquire_refused,
           fencing.seq_value('fencing.lease_stat_renewed') AS renewed,
           fencing.seq_value('fencing.lease_stat_renew_failed') AS renew_failed,
           fencing.seq_value('fencing.lease_stat_released') AS released,
           fencing.seq_value('fencing.lease_stat_release_failed') AS release_failed,
           NULL::bigint AS expired,
           fencing.seq_value('fencing.lease_stat_rejected') AS rejected,
           NULL::bigint AS hold_count,
           NULL::double precision AS hold_seconds_sum,
           NULL::double precision AS hold_seconds_max;
COMMENT ON VIEW fencing.lease_stats IS
    'what happened to the leases of this database since fencing.stats_reset(), counted in sequences; expired and the hold times are NULL (they need the C edition''s shared memory)';
GRANT SELECT ON fencing.lease_stats TO PUBLIC;

------------------------------------------------------------------------------
-- Idempotency keys
------------------------------------------------------------------------------

-- Each logical request names a key.  The first caller claims the key and
-- gets a claim token, a fence; a retry of the same request gets the
-- recorded result instead of running again; a caller whose predecessor
-- lost its lease takes the key over with a higher claim token, so that the
-- predecessor can no longer record a result (SF001).
--
-- Owners.  A key belongs to the role that began it.  Row security shows a
-- key's row, and lets it be written, to that role, its members and the
-- edition's owner only: the helpers run as their caller, and PostgreSQL
-- itself keeps every other role from a key's claim, result and recovery
-- point.  Another role's idem_begin() of the key finds the row's place in
-- the primary key taken and the row hidden, and gets 42501 (naming the
-- owner, nothing else); a key whose expires_at has passed counts as
-- absent for everyone, and fencing.idem_reclaim() removes it, as the
-- edition's owner, so that whoever begins it next owns the new incarnation.
-- (A role may write its own keys' rows directly; that harms only its own
-- keys.)
--
-- Claim tokens.  (E, n): E from fencing.idempotency_claim_seq whenever a
-- claim is issued (never issued twice, not after a rollback, an expiry or
-- a restore: the sequence is dumped with the table), n the claims of the
-- key's current incarnation, as in the C edition.
CREATE SEQUENCE fencing.idempotency_claim_seq;
COMMENT ON SEQUENCE fencing.idempotency_claim_seq IS
    'epochs of idempotency claim tokens: one per claim issued';
GRANT USAGE ON SEQUENCE fencing.idempotency_claim_seq TO PUBLIC;

CREATE TABLE fencing.idempotency_keys (
    key             text PRIMARY KEY,
    request_hash    bytea NOT NULL,
    state           text NOT NULL,
    result          jsonb,
    claim           fencing.fence NOT NULL,
    recovery_point  text,
    locked_until    timestamptz,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
    updated_at      timestamptz NOT NULL,
    owner           regrole NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX idempotency_keys_expires_at_idx ON fencing.idempotency_keys (expires_at);
COMMENT ON INDEX fencing.idempotency_keys_expires_at_idx IS 'finds expired keys for fencing.idem_purge';
COMMENT ON TABLE fencing.idempotency_keys IS
    'idempotency keys: one row per logical request, written by the fencing.idem_* functions; each row visible to its owner role only';
COMMENT ON COLUMN fencing.idempotency_keys.key IS
    'the client''s key for one logical request, 1 to 255 characters, global to the database';
COMMENT ON COLUMN fencing.idempotency_keys.request_hash IS 'SHA-256 of the request''s jsonb text in UTF-8';
COMMENT ON COLUMN fencing.idempotency_keys.state IS
    'running (a claim owns the key, or did until its lease ran out) or done';
COMMENT ON COLUMN fencing.idempotency_keys.claim IS
    'the current claim token (E, n): n-th claim of the key, E unique to the claim; higher on every resume';
COMMENT ON COLUMN fencing.idempotency_keys.owner IS
    'the role that began the key: only it and its members may use the key';
ALTER TABLE fencing.idempotency_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY keys_of_their_owner ON fencing.idempotency_keys
    USING (pg_catalog.pg_has_role(owner, 'USAGE'))
    WITH CHECK (pg_catalog.pg_has_role(owner, 'USAGE'));
REVOKE ALL ON fencing.idempotency_keys FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE ON fencing.idempotency_keys TO PUBLIC;

-- Outcomes of idem_begin() and lost claims, counted in sequences.
CREATE SEQUENCE fencing.idem_stat_started;
CREATE SEQUENCE fencing.idem_stat_replayed;
CREATE SEQUENCE fencing.idem_stat_resumed;
CREATE SEQUENCE fencing.idem_stat_reused_rejected;
CREATE SEQUENCE fencing.idem_stat_in_progress_rejected;
CREATE SEQUENCE fencing.idem_stat_claim_taken_over;
GRANT USAGE ON SEQUENCE fencing.idem_stat_started, fencing.idem_stat_replayed, fencing.idem_stat_resumed,
    fencing.idem_stat_reused_rejected, fencing.idem_stat_in_progress_rejected,
    fencing.idem_stat_claim_taken_over TO PUBLIC;

-- Check a key and the arguments every helper needs: 22004, 22023.
CREATE FUNCTION fencing.idem_check_key(key text) RETURNS void
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF key IS NULL THEN
        RAISE EXCEPTION 'idempotency key must not be null' USING ERRCODE = 'null_value_not_allowed';
    ELSIF key = '' THEN
        RAISE EXCEPTION 'idempotency key must not be empty' USING ERRCODE = 'invalid_parameter_value';
    ELSIF length(key) > 255 THEN
        RAISE EXCEPTION 'idempotency key is too long'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = format('The key has %s characters; the maximum is 255.', length(key));
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_check_key(text) IS 'internal: 22004 or 22023 for a key that is NULL, empty or too long';

-- A key whose row the caller cannot see: 'gone' (no row, or an expired
-- one, which is removed here: an expired key counts as absent), or 42501
-- naming its owner.  As the edition's owner; says nothing else of the key.
CREATE FUNCTION fencing.idem_reclaim(key text, now timestamptz, wait boolean) RETURNS text
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    o regrole;
    e timestamptz;
BEGIN
    IF wait THEN
        SELECT k.owner, k.expires_at INTO o, e FROM fencing.idempotency_keys k
         WHERE k.key = idem_reclaim.key FOR UPDATE;
    ELSE
        BEGIN
            SELECT k.owner, k.expires_at INTO o, e FROM fencing.idempotency_keys k
             WHERE k.key = idem_reclaim.key FOR UPDATE NOWAIT;
        EXCEPTION WHEN lock_not_available THEN
            PERFORM nextval('fencing.idem_stat_in_progress_rejected');
            RAISE EXCEPTION 'idempotency key "%" is in progress', key
                USING ERRCODE = 'SF004',
                      DETAIL = 'Another transaction is working on the key and has not finished yet.',
                      HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
        END;
    END IF;
    IF NOT FOUND THEN
        RETURN 'gone';
    END IF;
    IF e <= now THEN
        DELETE FROM fencing.idempotency_keys k WHERE k.key = idem_reclaim.key;
        RETURN 'gone';
    END IF;
    PERFORM fencing.idem_refuse_owner(key, o);
    RETURN 'gone';
END
$$;
COMMENT ON FUNCTION fencing.idem_reclaim(text, timestamptz, boolean) IS
    'internal: remove an expired key the caller cannot see, or raise 42501 naming the owner of a live one';

CREATE FUNCTION fencing.idem_refuse_owner(key text, owner regrole) RETURNS void
    LANGUAGE plpgsql STABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles r WHERE r.oid = owner::oid) THEN
        RAISE EXCEPTION 'permission denied for idempotency key "%"', key
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('The key belongs to a role that was dropped (OID %s); it can be used again once it expires.', owner::oid),
                  HINT = 'Keys are global to the database: each role must use keys of its own.';
    END IF;
    RAISE EXCEPTION 'permission denied for idempotency key "%"', key
        USING ERRCODE = 'insufficient_privilege',
              DETAIL = format('The key belongs to role "%s"; only that role and its members may use it.', owner),
              HINT = 'Keys are global to the database: each role must use keys of its own.';
END
$$;
COMMENT ON FUNCTION fencing.idem_refuse_owner(text, regrole) IS 'internal: raise 42501 for a key of another role';

-- The owner of a live key the caller cannot see (NULL: none), for the
-- claim helpers' 42501.
CREATE FUNCTION fencing.idem_owner(key text, now timestamptz) RETURNS regrole
    LANGUAGE sql STABLE PARALLEL SAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
    AS $$ SELECT k.owner FROM fencing.idempotency_keys k WHERE k.key = idem_owner.key AND k.expires_at > now $$;
COMMENT ON FUNCTION fencing.idem_owner(text, timestamptz) IS 'internal: the owner of a live key';

CREATE FUNCTION fencing.idem_begin(key text, request jsonb,
                                   lease interval DEFAULT '1 minute',
                                   retention interval DEFAULT '24 hours',
                                   wait boolean DEFAULT true)
    RETURNS TABLE(state text, token fencing.fence, result jsonb,
                  recovery_point text, expires_at timestamptz)
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE ROWS 1
AS $$
#variable_conflict use_column
DECLARE
    h bytea;
    v_now timestamptz;
    lu timestamptz;
    ex timestamptz;
    r record;
    c fencing.fence;
    locked boolean;
    attempt integer;
    n bigint;
    saved_timeout text;
BEGIN
    -- The usual call is valid, and one expression says so (PL/pgSQL
    -- prepares each expression anew in every transaction, and PERFORM runs
    -- a query); only a call that is not goes through the checks that name
    -- what is wrong, in their order.
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_begin.key) OPERATOR(pg_catalog.<=) 255 AND idem_begin.key OPERATOR(pg_catalog.<>) ''
        AND idem_begin.request IS NOT NULL AND idem_begin.wait IS NOT NULL
        AND idem_begin.lease OPERATOR(pg_catalog.>) '0'::interval
        AND idem_begin.retention OPERATOR(pg_catalog.>=) idem_begin.lease) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_begin() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_begin.key);
        IF idem_begin.request IS NULL THEN
            RAISE EXCEPTION 'request must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.lease IS NULL THEN
            RAISE EXCEPTION 'lease must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.retention IS NULL THEN
            RAISE EXCEPTION 'retention must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.wait IS NULL THEN
            RAISE EXCEPTION 'wait must not be null' USING ERRCODE = 'null_value_not_allowed';
        ELSIF idem_begin.lease OPERATOR(pg_catalog.<=) '0'::interval THEN
            RAISE EXCEPTION 'lease must be a positive interval'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('The lease was %s.', idem_begin.lease);
        ELSIF idem_begin.retention OPERATOR(pg_catalog.<=) '0'::interval THEN
            RAISE EXCEPTION 'retention must be a positive interval'
                USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('The retention was %s.', idem_begin.retention);
        ELSIF idem_begin.retention OPERATOR(pg_catalog.<) idem_begin.lease THEN
            RAISE EXCEPTION 'retention must not be shorter than the lease'
                USING ERRCODE = 'invalid_parameter_value',
                    DETAIL = pg_catalog.format('The retention was %s and the lease %s.', idem_begin.retention, idem_begin.lease),
                    HINT = 'A key that expired while its claim''s lease was still running could be begun again by another caller.';
        END IF;
    END IF;
    h := pg_catalog.sha256(pg_catalog.convert_to(idem_begin.request::pg_catalog.text, 'UTF8'));
    LOOP
        v_now := pg_catalog.clock_timestamp();
        lu := v_now OPERATOR(pg_catalog.+) idem_begin.lease;
        ex := v_now OPERATOR(pg_catalog.+) idem_begin.retention;

        -- a new key: claim (E, 1)
        IF idem_begin.wait THEN
            INSERT INTO fencing.idempotency_keys AS k
                   (key, request_hash, state, result, claim, recovery_point, locked_until,
                    expires_at, created_at, updated_at, owner)
            VALUES (idem_begin.key, h, 'running', NULL,
                    ROW(pg_catalog.nextval('fencing.idempotency_claim_seq'), 1)::fencing.fence_pair,
                    NULL, lu, ex, v_now, v_now, current_user::pg_catalog.regrole)
            ON CONFLICT (key) DO NOTHING
            RETURNING (k.claim).* INTO c;
        ELSE
            -- without wait, any wait for another transaction is SF004: a
            -- row another transaction locked or changes is found at once;
            -- one it is inserting, after a millisecond
            saved_timeout := pg_catalog.current_setting('lock_timeout');
            PERFORM pg_catalog.set_config('lock_timeout', '1ms', true);
            BEGIN
                PERFORM FROM fencing.idempotency_keys k
                  WHERE k.key OPERATOR(pg_catalog.=) idem_begin.key FOR SHARE NOWAIT;
                INSERT INTO fencing.idempotency_keys AS k
                       (key, request_hash, state, result, claim, recovery_point, locked_until,
                        expires_at, created_at, updated_at, owner)
                VALUES (idem_begin.key, h, 'running', NULL,
                        ROW(pg_catalog.nextval('fencing.idempotency_claim_seq'), 1)::fencing.fence_pair,
                        NULL, lu, ex, v_now, v_now, current_user::pg_catalog.regrole)
                ON CONFLICT (key) DO NOTHING
                RETURNING (k.claim).* INTO c;
            EXCEPTION WHEN lock_not_available THEN
                PERFORM pg_catalog.set_config('lock_timeout', saved_timeout, true);
                PERFORM pg_catalog.nextval('fencing.idem_stat_in_progress_rejected');
                RAISE EXCEPTION 'idempotency key "%" is in progress', idem_begin.key
                    USING ERRCODE = 'SF004',
                          DETAIL = 'Another transaction is working on the key and has not finished yet.',
                          HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
            END;
            PERFORM pg_catalog.set_config('lock_timeout', saved_timeout, true);
        END IF;
        IF c IS NOT NULL THEN
            -- (a counter and the result row without a query each)
            n := pg_catalog.nextval('fencing.idem_stat_started');
            state := 'started';
            token := c;
            expires_at := ex;
            RETURN NEXT;
            RETURN;
        END IF;

        -- the key exists: read it; lock it only to change it, then decide
        -- again on the locked version
        locked := false;
        LOOP
            IF NOT locked THEN
                SELECT k.request_hash, k.state, k.result, k.claim, k.recovery_point,
                       k.locked_until, k.expires_at INTO r
                  FROM fencing.idempotency_keys k WHERE k.key = idem_begin.key;
            ELSIF idem_begin.wait THEN
                SELECT k.request_hash, k.state, k.result, k.claim, k.recovery_point,
                       k.locked_until, k.expires_at INTO r
                  FROM fencing.idempotency_keys k WHERE k.key = idem_begin.key FOR UPDATE;
            ELSE
                BEGIN
                    SELECT k.request_hash, k.state, k.result, k.claim, k.recovery_point,
                           k.locked_until, k.expires_at INTO r
                      FROM fencing.idempotency_keys k WHERE k.key = idem_begin.key FOR UPDATE NOWAIT;
                EXCEPTION WHEN lock_not_available THEN
                    PERFORM pg_catalog.nextval('fencing.idem_stat_in_progress_rejected');
                    RAISE EXCEPTION 'idempotency key "%" is in progress', idem_begin.key
                        USING ERRCODE = 'SF004',
                              DETAIL = 'Another transaction is working on the key and has not finished yet.',
                              HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
                END;
            END IF;
            IF NOT FOUND THEN
                -- purged meanwhile, or another role's (expired: removed):
                -- begin again (the usual call never gets here, and counts
                -- nothing)
                PERFORM fencing.idem_reclaim(idem_begin.key, v_now, idem_begin.wait);
                attempt := coalesce(attempt, 1) OPERATOR(pg_catalog.+) 1;
                IF attempt OPERATOR(pg_catalog.>) 10 THEN
                    RAISE EXCEPTION 'idempotency key "%" keeps disappearing', idem_begin.key
                        USING ERRCODE = 'internal_error';
                END IF;
                EXIT;
            END IF;
            IF r.expires_at OPERATOR(pg_catalog.<=) v_now THEN
                -- expired: counts as absent; a new incarnation replaces it
                IF NOT locked THEN
                    locked := true;
                    CONTINUE;
                END IF;
                UPDATE fencing.idempotency_keys AS k
                   SET request_hash = h, state = 'running', result = NULL,
                       claim = ROW(GREATEST(pg_catalog.nextval('fencing.idempotency_claim_seq'),
                                            (k.claim).epoch OPERATOR(pg_catalog.+) 1), 1)::fencing.fence_pair,
                       recovery_point = NULL, locked_until = lu, expires_at = ex,
                       created_at = v_now, updated_at = v_now, owner = current_user::pg_catalog.regrole
                 WHERE k.key = idem_begin.key
                RETURNING (k.claim).* INTO c;
                n := pg_catalog.nextval('fencing.idem_stat_started');
                state := 'started';
                token := c;
                expires_at := ex;
                RETURN NEXT;
                RETURN;
            END IF;
            IF r.request_hash OPERATOR(pg_catalog.<>) h THEN
                PERFORM pg_catalog.nextval('fencing.idem_stat_reused_rejected');
                RAISE EXCEPTION 'idempotency key "%" was already used with a different request', idem_begin.key
                    USING ERRCODE = 'SF003',
                          DETAIL = 'The fingerprint of this request differs from the one recorded for the key.',
                          HINT = 'A retry must send exactly the same request; a new request needs a new key.';
            END IF;
            IF r.state OPERATOR(pg_catalog.=) 'done' THEN
                n := pg_catalog.nextval('fencing.idem_stat_replayed');
                state := 'done';
                result := r.result;
                recovery_point := r.recovery_point;
                expires_at := r.expires_at;
                RETURN NEXT;
                RETURN;
            END IF;
            -- running: a live lease keeps the key; a lapsed one frees it
            IF r.locked_until IS NOT NULL AND r.locked_until OPERATOR(pg_catalog.>) v_now THEN
                PERFORM pg_catalog.nextval('fencing.idem_stat_in_progress_rejected');
                RAISE EXCEPTION 'idempotency key "%" is in progress', idem_begin.key
                    USING ERRCODE = 'SF004',
                          DETAIL = pg_catalog.format('Claim %s holds the key and its lease has not run out.', fencing.fence_text(r.claim)),
                          HINT = 'Retry later: the key is free again when its owner completes or abandons it, or when its lease runs out.';
            END IF;
            IF NOT locked THEN
                locked := true;
                CONTINUE;
            END IF;
            UPDATE fencing.idempotency_keys AS k
               SET claim = ROW(GREATEST(pg_catalog.nextval('fencing.idempotency_claim_seq'),
                                        (k.claim).epoch OPERATOR(pg_catalog.+) 1),
                               (k.claim).counter OPERATOR(pg_catalog.+) 1)::fencing.fence_pair,
                   locked_until = lu, expires_at = GREATEST(k.expires_at, ex), updated_at = v_now
             WHERE k.key = idem_begin.key
            RETURNING (k.claim).* INTO c;
            PERFORM pg_catalog.nextval('fencing.idem_stat_resumed');
            RETURN QUERY SELECT 'resumed'::pg_catalog.text, c, NULL::jsonb, r.recovery_point,
                                (SELECT k.expires_at FROM fencing.idempotency_keys k WHERE k.key OPERATOR(pg_catalog.=) idem_begin.key);
            RETURN;
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.idem_begin(text, jsonb, interval, interval, boolean) IS
    'claim an idempotency key (started, resumed) or replay its result (done); SF003 for another request, SF004 while another owner holds it';

-- SF001 for a claim update whose token is not the key's running claim, or
-- 42501 for a key of another role.  As the caller: what it cannot see is
-- another role's (or gone).
CREATE FUNCTION fencing.idem_lost_claim(key text, token fencing.fence, now timestamptz) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
    o regrole;
    detail text;
    t text := fencing.fence_text(token);
BEGIN
    SELECT k.state, k.claim, k.expires_at INTO r FROM fencing.idempotency_keys k WHERE k.key = idem_lost_claim.key;
    IF NOT FOUND THEN
        o := fencing.idem_owner(key, now);
        IF o IS NOT NULL THEN
            PERFORM fencing.idem_refuse_owner(key, o);
        END IF;
    END IF;
    IF NOT FOUND OR r.expires_at <= now THEN
        detail := format('Idempotency key "%s" does not exist or has expired.', key);
    ELSIF r.state = 'done' THEN
        detail := CASE WHEN r.claim = token THEN 'The claim has already completed the key.'
                       ELSE format('The key was completed under claim %s.', fencing.fence_text(r.claim)) END;
    ELSIF r.claim IS DISTINCT FROM token THEN
        detail := CASE WHEN r.claim IS NULL THEN 'The key has no claim.'
                       ELSE format('The key''s current claim is %s.', fencing.fence_text(r.claim)) END;
    ELSE
        detail := 'The claim was abandoned.';
    END IF;
    PERFORM nextval('fencing.idem_stat_claim_taken_over');
    RAISE EXCEPTION 'stale fence token % for idempotency key "%"', t, key
        USING ERRCODE = 'SF001', CONSTRAINT = 'claim_taken_over', DETAIL = detail,
              HINT = format('The claim with token %s was lost: stop, record no result, and call fencing.idem_begin() again to learn the key''s state.', t),
              TABLE = 'idempotency_keys', SCHEMA = 'fencing';
END
$$;
COMMENT ON FUNCTION fencing.idem_lost_claim(text, fencing.fence, timestamptz) IS
    'internal: raise SF001 (or 42501) for a claim update that found no running claim of token';

CREATE FUNCTION fencing.idem_checkpoint(key text, token fencing.fence,
                                        recovery_point text, lease interval DEFAULT NULL)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- (one expression for the usual valid call: see fencing.idem_begin())
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_checkpoint.key) OPERATOR(pg_catalog.<=) 255 AND idem_checkpoint.key OPERATOR(pg_catalog.<>) ''
        AND idem_checkpoint.token IS NOT NULL) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_checkpoint() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_checkpoint.key);
        IF idem_checkpoint.token IS NULL THEN
            RAISE EXCEPTION 'token must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    IF idem_checkpoint.lease OPERATOR(pg_catalog.<=) '0'::interval THEN
        RAISE EXCEPTION 'lease must be a positive interval'
            USING ERRCODE = 'invalid_parameter_value', DETAIL = pg_catalog.format('The lease was %s.', idem_checkpoint.lease);
    END IF;
    -- without a lease, the lease keeps its length; the key never expires
    -- before its lease runs out
    UPDATE fencing.idempotency_keys AS k
       SET recovery_point = COALESCE(idem_checkpoint.recovery_point, k.recovery_point),
           locked_until = v_now OPERATOR(pg_catalog.+) COALESCE(idem_checkpoint.lease, k.locked_until OPERATOR(pg_catalog.-) k.updated_at),
           expires_at = GREATEST(k.expires_at, v_now OPERATOR(pg_catalog.+) COALESCE(idem_checkpoint.lease, k.locked_until OPERATOR(pg_catalog.-) k.updated_at)),
           updated_at = v_now
     WHERE k.key OPERATOR(pg_catalog.=) idem_checkpoint.key
       AND (k.claim).epoch OPERATOR(pg_catalog.=) (idem_checkpoint.token).epoch
       AND (k.claim).counter OPERATOR(pg_catalog.=) (idem_checkpoint.token).counter
       AND k.state OPERATOR(pg_catalog.=) 'running' AND k.locked_until IS NOT NULL
       AND k.expires_at OPERATOR(pg_catalog.>) v_now;
    IF NOT FOUND THEN
        PERFORM fencing.idem_lost_claim(idem_checkpoint.key, idem_checkpoint.token, v_now);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_checkpoint(text, fencing.fence, text, interval) IS
    'record how far the claim got and renew its lease; SF001 unless token is the key''s running claim';

CREATE FUNCTION fencing.idem_complete(key text, token fencing.fence, result jsonb)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- (one expression for the usual valid call: see fencing.idem_begin())
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_complete.key) OPERATOR(pg_catalog.<=) 255 AND idem_complete.key OPERATOR(pg_catalog.<>) ''
        AND idem_complete.token IS NOT NULL) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_complete() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_complete.key);
        IF idem_complete.token IS NULL THEN
            RAISE EXCEPTION 'token must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    UPDATE fencing.idempotency_keys AS k
       SET state = 'done', result = idem_complete.result, locked_until = NULL, updated_at = v_now
     WHERE k.key OPERATOR(pg_catalog.=) idem_complete.key
       AND (k.claim).epoch OPERATOR(pg_catalog.=) (idem_complete.token).epoch
       AND (k.claim).counter OPERATOR(pg_catalog.=) (idem_complete.token).counter
       AND k.state OPERATOR(pg_catalog.=) 'running' AND k.locked_until IS NOT NULL
       AND k.expires_at OPERATOR(pg_catalog.>) v_now;
    IF NOT FOUND THEN
        PERFORM fencing.idem_lost_claim(idem_complete.key, idem_complete.token, v_now);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_complete(text, fencing.fence, jsonb) IS
    'record the final result of the key''s request; SF001 unless token is the key''s running claim';

CREATE FUNCTION fencing.idem_abandon(key text, token fencing.fence)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := pg_catalog.clock_timestamp();
BEGIN
    -- (one expression for the usual valid call: see fencing.idem_begin())
    IF (pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'off'
        AND pg_catalog.length(idem_abandon.key) OPERATOR(pg_catalog.<=) 255 AND idem_abandon.key OPERATOR(pg_catalog.<>) ''
        AND idem_abandon.token IS NOT NULL) IS NOT TRUE THEN
        IF pg_catalog.current_setting('transaction_read_only') OPERATOR(pg_catalog.=) 'on' THEN
            RAISE EXCEPTION 'cannot execute fencing.idem_abandon() in a read-only transaction' USING ERRCODE = 'read_only_sql_transaction';
        END IF;
        PERFORM fencing.idem_check_key(idem_abandon.key);
        IF idem_abandon.token IS NULL THEN
            RAISE EXCEPTION 'token must not be null' USING ERRCODE = 'null_value_not_allowed';
        END IF;
    END IF;
    UPDATE fencing.idempotency_keys AS k
       SET locked_until = NULL, updated_at = v_now
     WHERE k.key OPERATOR(pg_catalog.=) idem_abandon.key
       AND (k.claim).epoch OPERATOR(pg_catalog.=) (idem_abandon.token).epoch
       AND (k.claim).counter OPERATOR(pg_catalog.=) (idem_abandon.token).counter
       AND k.state OPERATOR(pg_catalog.=) 'running' AND k.locked_until IS NOT NULL
       AND k.expires_at OPERATOR(pg_catalog.>) v_now;
    IF NOT FOUND THEN
        PERFORM fencing.idem_lost_claim(idem_abandon.key, idem_abandon.token, v_now);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.idem_abandon(text, fencing.fence) IS
    'give the claim up so that the next idem_begin resumes at once; SF001 unless token is the key''s running claim';

-- The claim helpers with tokens written as text (E:C or (E,C)).
CREATE FUNCTION fencing.idem_checkpoint(key text, token text, recovery_point text, lease interval DEFAULT NULL)
    RETURNS void LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.idem_checkpoint(key, fencing.fence_from_text(token), recovery_point, lease) $$;
CREATE FUNCTION fencing.idem_complete(key text, token text, result jsonb)
    RETURNS void LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.idem_complete(key, fencing.fence_from_text(token), result) $$;
CREATE FUNCTION fencing.idem_abandon(key text, token text)
    RETURNS void LANGUAGE sql VOLATILE PARALLEL UNSAFE
    AS $$ SELECT fencing.idem_abandon(key, fencing.fence_from_text(token)) $$;
COMMENT ON FUNCTION fencing.idem_checkpoint(text, text, text, interval) IS 'fencing.idem_checkpoint() with the token written E:C';
COMMENT ON FUNCTION fencing.idem_complete(text, text, jsonb) IS 'fencing.idem_complete() with the token written E:C';
COMMENT ON FUNCTION fencing.idem_abandon(text, text) IS 'fencing.idem_abandon() with the token written E:C';

CREATE FUNCTION fencing.idem_purge(batch integer DEFAULT 10000)
    RETURNS bigint
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    purged bigint;
BEGIN
    IF batch IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed', MESSAGE = 'batch must not be null';
    END IF;
    IF batch < 1 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value', MESSAGE = 'batch must be positive',
            DETAIL = format('The batch was %s.', batch);
    END IF;
    -- rows that a helper has locked are skipped: the next run gets them
    WITH doomed AS (
        SELECT k.key FROM fencing.idempotency_keys AS k
         WHERE k.expires_at <= clock_timestamp()
         ORDER BY k.expires_at
         LIMIT batch
           FOR UPDATE SKIP LOCKED)
    DELETE FROM fencing.idempotency_keys AS k USING doomed WHERE k.key = doomed.key;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END
$$;
COMMENT ON FUNCTION fencing.idem_purge(integer) IS
    'delete at most batch expired idempotency keys and return how many; schedule it (pg_cron)';
REVOKE ALL ON FUNCTION fencing.idem_purge(integer) FROM PUBLIC;

CREATE VIEW fencing.idempotency_summary AS
SELECT pg_catalog.count(*) FILTER (WHERE k.expires_at > c.now AND k.state = 'running') AS running,
       pg_catalog.count(*) FILTER (WHERE k.expires_at > c.now AND k.state = 'running'
                                     AND (k.locked_until IS NULL OR k.locked_until <= c.now)) AS running_unowned,
       pg_catalog.count(*) FILTER (WHERE k.expires_at > c.now AND k.state = 'done') AS done,
       pg_catalog.count(*) FILTER (WHERE k.expires_at <= c.now) AS expired_awaiting_purge,
       c.now - pg_catalog.min(k.created_at) FILTER (WHERE k.expires_at > c.now AND k.state = 'running') AS oldest_running_age
  FROM (SELECT pg_catalog.clock_timestamp() AS now) AS c
  LEFT JOIN fencing.idempotency_keys AS k ON true
 GROUP BY c.now;
COMMENT ON VIEW fencing.idempotency_summary IS
    'idempotency keys at a glance: running (and of those, without a live lease), done, expired awaiting purge, age of the oldest running request';
GRANT SELECT ON fencing.idempotency_summary TO PUBLIC;

CREATE VIEW fencing.idempotency_stats AS
    SELECT fencing.seq_value('fencing.idem_stat_started') AS started,
           fencing.seq_value('fencing.idem_stat_replayed') AS replayed,
           fencing.seq_value('fencing.idem_stat_resumed') AS resumed,
           fencing.seq_value('fencing.idem_stat_reused_rejected') AS reused_rejected,
           fencing.seq_value('fencing.idem_stat_in_progress_rejected') AS in_progress_rejected,
           fencing.seq_value('fencing.idem_stat_claim_taken_over') AS claim_taken_over;
COMMENT ON VIEW fencing.idempotency_stats IS
    'outcomes of fencing.idem_begin() in this database since fencing.stats_reset(), and claims taken over, counted in sequences (no rollback takes them back)';
GRANT SELECT ON fencing.idempotency_stats TO PUBLIC;

------------------------------------------------------------------------------
-- Guarding the guard: the DDL guard (event triggers), where it can be
------------------------------------------------------------------------------

-- Only a superuser (RDS and Aurora: rds_superuser; Cloud SQL, Azure, Neon
-- and Supabase have their own such roles) may create event triggers.  The
-- install creates them when the installing role may, and records whether
-- it did (fencing.edition_state); where it may not, DDL that breaks a
-- guard (dropping or disabling its triggers, dropping or retyping its fence
-- or key columns, a BEFORE ROW trigger that fires after it) is not refused,
-- and fencing.protected_tables shows what it broke.
--
-- With it, a DDL command is judged by what it leaves behind: at the end of
-- every command that touches a protected table (ddl_command_end), the
-- tables it touched get the guards their new partitions and inheritance
-- children need (and their rows' fences seed the scope's), and then any
-- problem fencing.guard_problems() finds undoes the command with SF005.
-- A dropped guard trigger or fence or key column is refused at sql_drop; a
-- dropped protected table leaves fencing.protected.  protect() and
-- unprotect() run their own DDL with fencing_sql.ddl_guard_pause set to the
-- table (the setting says nothing to any other table).

-- Forget a protected table that was dropped (as the edition's owner: the
-- table is gone, so there is nobody's privilege left to check).
CREATE FUNCTION fencing.forget_dropped(relid oid) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    guard regprocedure;
    counter text;
BEGIN
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = relid) THEN
        RETURN;
    END IF;
    DELETE FROM fencing.protected p WHERE p.relid::oid = forget_dropped.relid RETURNING p.guard_function INTO guard;
    IF guard IS NOT NULL THEN
        PERFORM fencing.drop_guard_function(guard);
    END IF;
END
$$;
COMMENT ON FUNCTION fencing.forget_dropped(oid) IS
    'internal: remove a dropped table from fencing.protected, with its guard function and counters';

-- SF005 for a problem left by a DDL command on protected table root.
CREATE FUNCTION fencing.refuse_ddl(root regclass, kind text, member regclass, problem text, object text)
    RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    tname text := (SELECT c.relname FROM pg_class c WHERE c.oid = coalesce(member, root));
    qualified text := (SELECT format('%I.%I', n.nspname, c.relname) FROM pg_class c
                         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = root);
    msg text;
    detail text := format('Table "%s" is protected by fencing: its fencing triggers check every write.', tname);
BEGIN
    msg := CASE kind
        WHEN 'disabled' THEN format('cannot disable trigger "%s" of protected table "%s"', object, tname)
        WHEN 'firing' THEN format('cannot change the firing mode of trigger "%s" of protected table "%s"', object, tname)
        WHEN 'missing' THEN format('cannot drop trigger "%s" of protected table "%s"', object, tname)
        WHEN 'renamed' THEN format('cannot rename trigger "%s" of protected table "%s"', object, tname)
        WHEN 'timing' THEN format('cannot replace trigger "%s" of protected table "%s"', object, tname)
        WHEN 'function' THEN format('cannot replace trigger "%s" of protected table "%s"', object, tname)
        WHEN 'after' THEN format('cannot create trigger "%s" on protected table "%s"', object, tname)
        WHEN 'fence' THEN format('cannot alter or drop column "%s" of protected table "%s"', object, tname)
        WHEN 'key' THEN format('cannot alter or drop column "%s" of protected table "%s"', object, tname)
        ELSE format('cannot alter protected table "%s"', tname) END;
    IF kind = 'after' THEN
        detail := format('Table "%s" is protected by fencing: BEFORE ROW triggers fire in name order, and trigger "%s" would fire after its guard.', tname, object);
    ELSIF kind = 'fence' THEN
        detail := format('Table "%s" is protected by fencing: column "%s" holds its fence tokens.', tname, object);
    ELSIF kind = 'key' THEN
        detail := format('Table "%s" is protected by fencing: column "%s" is a key column of its fence scope.', tname, object);
    ELSIF kind NOT IN ('disabled', 'firing', 'missing', 'renamed', 'timing', 'function') THEN
        detail := format('Table "%s" is protected by fencing, and the command would break its guard: %s.', tname, problem);
    END IF;
    RAISE EXCEPTION '%', msg
        USING ERRCODE = 'SF005', DETAIL = detail,
              HINT = format('Call fencing.unprotect(''%s'') first.', qualified);
END
$$;
COMMENT ON FUNCTION fencing.refuse_ddl(regclass, text, regclass, text, text) IS
    'internal: raise SF005 for a DDL command that would break a protected table''s guard';

-- Give the new members of a protected table's tree their guards, seeding
-- the scope's fences from their rows (as the DDL's user, who owns them).
-- New: not members when the command started (fencing.ddl_guard_start()
-- notes them), so that a restore, which attaches the partitions before it
-- creates their triggers, finds none made for it and makes its own.
CREATE FUNCTION fencing.guard_new_members(root regclass) RETURNS void
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    p fencing.protected;
    m record;
    before text := E'\n' || coalesce(current_setting('fencing_sql.ddl_members_before', true), '') || E'\n';
BEGIN
    SELECT * INTO p FROM fencing.protected x WHERE x.relid = root;
    -- a filled table joins: no earlier token may write its keys
    IF p.key_columns IS NOT NULL THEN
        PERFORM fencing.seed_scope(root, true);
    END IF;
    FOR m IN SELECT * FROM fencing.tree_of(root) t
              WHERE t.depth > 0
                AND NOT EXISTS (SELECT FROM pg_trigger g WHERE g.tgrelid = t.member::oid
                                   AND g.tgname = 'zz_fencing_truncate')
                -- joined by this command (not a member whose trigger
                -- pg_restore is about to create)
                AND strpos(before, E'\n' || t.member::oid::text || E'\n') = 0
              ORDER BY t.depth LOOP
        IF NOT m.is_partition THEN
            EXECUTE format('CREATE OR REPLACE TRIGGER zz_fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW EXECUTE FUNCTION %s',
                           m.member, p.guard_function);
            EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_guard', m.member);
        END IF;
        EXECUTE format('CREATE TRIGGER zz_fencing_truncate BEFORE TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard_truncate()',
                       m.member);
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER zz_fencing_truncate', m.member);
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.guard_new_members(regclass) IS
    'internal: guard the partitions and inheritance children a protected table gained, and seed its scope from their rows';

-- What a guard problem is about: the trigger or the fence or key column it
-- names, else the whole problem.  A command that changes what was broken
-- about one thing (creates a missing trigger, which pg_restore then
-- enables ALWAYS) leaves it no worse.
CREATE FUNCTION fencing.ddl_problem_subject(root regclass, member regclass, problem text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $$
    SELECT format('%s|%s|%s', root::oid, member::oid,
                  coalesce(substring(problem FROM '^trigger (\S+)'),
                           substring(problem FROM '^((?:fence|key) column \S+)'), problem))
$$;
COMMENT ON FUNCTION fencing.ddl_problem_subject(regclass, regclass, text) IS
    'internal: what a problem of fencing.guard_problems() is about (table, member, and the trigger or column it names)';

-- What was broken before a command: the DDL guard refuses only what the
-- command itself breaks, as the C edition refuses only changes that lower
-- protection.  pg_restore recreates a protected table one command at a
-- time (its fencing.protected row, restored with the edition, comes first;
-- the table's constraints, then its triggers, later): each of those
-- commands finds the table's guard incomplete and leaves it no worse.
CREATE FUNCTION fencing.ddl_guard_start() RETURNS event_trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM set_config('fencing_sql.ddl_members_before',
                       coalesce((SELECT string_agg(t.member::oid::text, E'\n')
                                   FROM fencing.protected p, fencing.tree_of(p.relid) t
                                  WHERE t.depth > 0), ''),
                       true);
    PERFORM set_config('fencing_sql.ddl_broken_before',
                       coalesce((SELECT string_agg(fencing.ddl_problem_subject(p.relid, x.member, x.problem), E'\n')
                                   FROM fencing.protected p, fencing.guard_problems(p.relid) x
                                  WHERE x.kind <> 'ddl_guard'), ''),
                       true);
END
$$;
COMMENT ON FUNCTION fencing.ddl_guard_start() IS
    'event trigger: notes what was broken in protected tables before a command, so that the DDL guard refuses only what the command breaks';

CREATE FUNCTION fencing.ddl_guard_end() RETURNS event_trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    paused text := coalesce(current_setting('fencing_sql.ddl_guard_pause', true), '');
    -- (read before the commands this function runs note theirs)
    before text := E'\n' || coalesce(current_setting('fencing_sql.ddl_broken_before', true), '') || E'\n';
    root regclass;
    pr record;
BEGIN
    FOR root IN
        SELECT DISTINCT fencing.protected_root(t.rel)
          FROM (SELECT CASE WHEN c.classid = 'pg_trigger'::regclass
                            THEN (SELECT g.tgrelid FROM pg_trigger g WHERE g.oid = c.objid)
                            ELSE c.objid END AS rel
                  FROM pg_event_trigger_ddl_commands() c
                 WHERE c.classid IN ('pg_class'::regclass, 'pg_trigger'::regclass)) t
         WHERE t.rel IS NOT NULL
    LOOP
        CONTINUE WHEN root IS NULL OR root::oid::text = paused;
        PERFORM set_config('fencing_sql.ddl_guard_pause', root::oid::text, true);
        PERFORM fencing.guard_new_members(root);
        PERFORM set_config('fencing_sql.ddl_guard_pause', paused, true);
        FOR pr IN SELECT * FROM fencing.guard_problems(root) x
                   WHERE x.kind <> 'ddl_guard'
                     AND strpos(before, E'\n' || fencing.ddl_problem_subject(root, x.member, x.problem) || E'\n') = 0 LOOP
            PERFORM fencing.refuse_ddl(root, pr.kind, pr.member, pr.problem,
                                       coalesce(substring(pr.problem FROM '^trigger (\S+)'),
                                                substring(pr.problem FROM '^(?:fence|key) column (\S+)'), ''));
        END LOOP;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.ddl_guard_end() IS
    'event trigger: guards partitions and children a protected table gains, and refuses (SF005) DDL that would break a protected table''s guard';

CREATE FUNCTION fencing.ddl_guard_drop() RETURNS event_trigger
    LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
    SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    paused text := coalesce(current_setting('fencing_sql.ddl_guard_pause', true), '');
    o record;
    rel oid;
    root regclass;
    p fencing.protected;
BEGIN
    FOR o IN SELECT * FROM pg_event_trigger_dropped_objects() LOOP
        IF o.object_type IN ('table', 'foreign table') AND EXISTS (SELECT FROM fencing.protected x WHERE x.relid::oid = o.objid) THEN
            PERFORM fencing.forget_dropped(o.objid);
        ELSIF o.object_type IN ('trigger', 'table column') AND cardinality(o.address_names) = 3 THEN
            SELECT c.oid INTO rel FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = o.address_names[1] AND c.relname = o.address_names[2];
            CONTINUE WHEN rel IS NULL;
            root := fencing.protected_root(rel);
            CONTINUE WHEN root IS NULL OR root::oid::text = paused;
            SELECT * INTO p FROM fencing.protected x WHERE x.relid = root;
            IF o.object_type = 'trigger' AND o.address_names[3] IN ('zz_fencing_guard', 'zz_fencing_truncate') THEN
                PERFORM fencing.refuse_ddl(root, 'missing', rel::regclass, NULL, o.address_names[3]);
            ELSIF o.object_type = 'table column' AND o.address_names[3] = p.fence_column THEN
                PERFORM fencing.refuse_ddl(root, 'fence', rel::regclass, NULL, o.address_names[3]);
            ELSIF o.object_type = 'table column' AND o.address_names[3] = ANY (p.key_columns) THEN
                PERFORM fencing.refuse_ddl(root, 'key', rel::regclass, NULL, o.address_names[3]);
            END IF;
        END IF;
    END LOOP;
END
$$;
COMMENT ON FUNCTION fencing.ddl_guard_drop() IS
    'event trigger: refuses (SF005) dropping the guard triggers or the fence and key columns of a protected table; a dropped protected table leaves fencing.protected';

-- The event triggers, where the installing role may create them.
DO $ddl$
BEGIN
    BEGIN
        CREATE EVENT TRIGGER fencing_ddl_guard_start ON ddl_command_start
            WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER', 'CREATE TABLE AS')
            EXECUTE FUNCTION fencing.ddl_guard_start();
        CREATE EVENT TRIGGER fencing_ddl_guard_end ON ddl_command_end
            WHEN TAG IN ('ALTER TABLE', 'CREATE TABLE', 'CREATE TRIGGER', 'ALTER TRIGGER', 'CREATE TABLE AS')
            EXECUTE FUNCTION fencing.ddl_guard_end();
        CREATE EVENT TRIGGER fencing_ddl_guard_drop ON sql_drop
            EXECUTE FUNCTION fencing.ddl_guard_drop();
        ALTER EVENT TRIGGER fencing_ddl_guard_start ENABLE ALWAYS;
        ALTER EVENT TRIGGER fencing_ddl_guard_end ENABLE ALWAYS;
        ALTER EVENT TRIGGER fencing_ddl_guard_drop ENABLE ALWAYS;
        COMMENT ON EVENT TRIGGER fencing_ddl_guard_start IS
            'the DDL guard: notes what was broken before a command (the guard refuses only what a command breaks)';
        COMMENT ON EVENT TRIGGER fencing_ddl_guard_end IS
            'the DDL guard: guards new partitions and children of protected tables, and refuses DDL that would break a guard';
        COMMENT ON EVENT TRIGGER fencing_ddl_guard_drop IS
            'the DDL guard: refuses dropping a protected table''s guard triggers, fence and key columns; forgets dropped protected tables';
        INSERT INTO fencing.edition_state (ddl_guard) VALUES (true);
    EXCEPTION WHEN insufficient_privilege THEN
        RAISE WARNING 'the DDL guard is not installed: role % may not create event triggers', current_user
            USING DETAIL = 'DDL that breaks a protected table''s guard (dropping or disabling its triggers, changing its fence or key columns) is not refused; fencing.protected_tables shows what it broke.',
                  HINT = 'Install the edition as a role that may create event triggers (a superuser; on RDS and Aurora, a member of rds_superuser) to have the DDL guard.';
        INSERT INTO fencing.edition_state (ddl_guard) VALUES (false);
    END;
END
$ddl$;

------------------------------------------------------------------------------
-- pg_dump keeps protections, fences, keys and leases
------------------------------------------------------------------------------

-- Installed as an extension, the edition's tables are its members, which
-- pg_dump leaves out unless marked: mark those whose rows a restore must
-- keep, so that a restored database never lets a stale writer or a
-- replayed request in.  (The scopes' storage tables, the guard functions
-- and the counters are created by protect(), not by this script: they are
-- no members, and pg_dump dumps them, rows and all, as any table.  The
-- plain script's objects are no members of anything: pg_dump dumps them
-- all.)  fencing.edition_state is not marked: CREATE EXTENSION fills it
-- when a restore installs the edition again, with what that install could
-- do (the DDL guard or not).
DO $dump$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'fencing_sql') THEN
        PERFORM pg_catalog.pg_extension_config_dump('fencing.protected', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.scope_storage', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.leases', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.epoch_state', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.idempotency_keys', '');
        PERFORM pg_catalog.pg_extension_config_dump('fencing.idempotency_claim_seq', '');
    END IF;
END
$dump$;
$_fencing_sql_$,
    '{plpgsql}',
    'fencing'
);
