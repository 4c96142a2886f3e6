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
    SELECT 'fencing_sql'::text, '@VERSION@'::text,
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
