#!/usr/bin/env bash
# test/suites/managed.sh: the edition for managed PostgreSQL (managed/,
# fencing_sql) installed through pg_tle, as RDS and Aurora install it: a
# role that is not a superuser, member of pgtle_admin, with CREATE on the
# database, runs managed/fencing_sql_pgtle.sql and CREATE EXTENSION
# fencing_sql.  Then the behaviour tests against it (managed/regress.list,
# test/lib/managed.sh).  A cluster of its own with pg_tle, built from
# FENCING_PGTLE_SRC or ../shared/vendor (test/lib/pgtle.sh), once, cached.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/pgtle.sh
. "$FENCING_ROOT/test/lib/pgtle.sh"
# shellcheck source=../lib/managed.sh
. "$FENCING_ROOT/test/lib/managed.sh"
trap fencing_cleanup EXIT
FENCING_KEEP=1      # the scratch directory is test/check.sh's
FENCING_CLUSTERS=()
fencing_managed_suite pgtle
