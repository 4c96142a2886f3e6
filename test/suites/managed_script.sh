#!/usr/bin/env bash
# test/suites/managed_script.sh: the edition for managed PostgreSQL
# (managed/, fencing_sql) installed by the plain script, as on Cloud SQL,
# Azure and Neon: a role that is not a superuser, with CREATE on the
# database, runs managed/fencing_sql.sql with psql.  Then the behaviour
# tests against it (managed/regress.list, test/lib/managed.sh).  A cluster
# of its own (pg_tle preloaded, unused by this route).
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
fencing_managed_suite script
