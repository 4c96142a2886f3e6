#!/usr/bin/env bash
# managed/build.sh: the edition's three install files, from managed/src/
# (one file per concern, concatenated in the order below, as pg_partman
# builds its install script):
#
#   fencing_sql--VERSION.sql   the extension script: CREATE EXTENSION
#                              fencing_sql (with fencing_sql.control, or
#                              through pg_tle)
#   fencing_sql.sql            the plain script: psql -f, for services
#                              without pg_tle (Cloud SQL, Azure, Neon);
#                              one transaction, schema fencing created first
#   fencing_sql_pgtle.sql      the pg_tle installer: psql -f, registers the
#                              extension script with pgtle.install_extension()
#                              (RDS, Aurora); then CREATE EXTENSION fencing_sql
#
#   bash managed/build.sh           write the three files
#   bash managed/build.sh --check   exit 1 if they are not up to date
#
# The three are committed, so that a user downloads and runs one file; the
# managed suites check that they are built from the sources.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$here/fencing_sql.control")
parts=(edition fence errors catalog guard protect health stats lease idempotency ddl_guard dump)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

body() {
    local p
    for p in "${parts[@]}"; do
        echo
        sed "s/@VERSION@/$version/g" "$here/src/$p.sql"
    done
}

{
    echo "/* managed/fencing_sql--$version.sql: built by managed/build.sh from managed/src/ (do not edit) */"
    echo
    echo "-- complain if script is sourced in psql, rather than via CREATE EXTENSION"
    echo "\\echo Use \"CREATE EXTENSION fencing_sql\" to load this file (or run managed/fencing_sql.sql with psql). \\quit"
    body
} >"$out/fencing_sql--$version.sql"

{
    cat <<EOF
/* managed/fencing_sql.sql: fencing_sql $version, the edition of fencing for
 * managed PostgreSQL, as a plain script (built by managed/build.sh from
 * managed/src/; do not edit).
 *
 *   psql -v ON_ERROR_STOP=1 -d DATABASE -f fencing_sql.sql
 *
 * Run it as the role that is to own the edition (not a superuser is fine:
 * it needs CREATE on the database).  One transaction: all or nothing.
 * Where pg_tle is available, install the extension instead
 * (fencing_sql_pgtle.sql), which pg_dump and ALTER EXTENSION know.
 */
\\set ON_ERROR_STOP on
BEGIN;
DO \$\$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname OPERATOR(pg_catalog.=) 'fencing') THEN
        RAISE EXCEPTION 'schema fencing already exists'
            USING ERRCODE = 'duplicate_schema',
                  DETAIL = CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'fencing')
                                THEN 'The C edition of fencing is installed in this database; the two editions are never installed in one database.'
                                ELSE 'fencing is installed in this database already, or another schema of that name exists.' END,
                  HINT = 'SELECT * FROM fencing.edition(); tells which edition and version is installed.';
    END IF;
END
\$\$;
CREATE SCHEMA fencing;
COMMENT ON SCHEMA fencing IS 'fencing_sql $version: fencing tokens in SQL and PL/pgSQL (installed by the plain script)';
EOF
    body
    echo
    echo "COMMIT;"
} >"$out/fencing_sql.sql"

{
    cat <<EOF
/* managed/fencing_sql_pgtle.sql: registers fencing_sql $version with pg_tle
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
\\set ON_ERROR_STOP on
SELECT pgtle.install_extension(
    'fencing_sql',
    '$version',
    'fencing tokens in SQL and PL/pgSQL for managed PostgreSQL: stop stale lock holders at the database, plus idempotency keys',
    \$_fencing_sql_\$
EOF
    body
    cat <<EOF
\$_fencing_sql_\$,
    '{plpgsql}',
    'fencing'
);
EOF
} >"$out/fencing_sql_pgtle.sql"

if [ "${1:-}" = --check ]; then
    st=0
    for f in "$out"/*; do
        cmp -s "$f" "$here/$(basename "$f")" || { echo "managed/$(basename "$f") is not up to date: run bash managed/build.sh" >&2; st=1; }
    done
    exit $st
fi
cp "$out"/* "$here/"
echo "built managed/fencing_sql--$version.sql, managed/fencing_sql.sql, managed/fencing_sql_pgtle.sql"
