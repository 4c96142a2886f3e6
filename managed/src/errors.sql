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
