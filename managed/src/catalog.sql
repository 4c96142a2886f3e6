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
