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
