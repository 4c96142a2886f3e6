#!/usr/bin/env bash
# test/suites/pgtap.sh: the pgTAP files (test/pgtap/*.sql: the catalog's
# shape, error codes, the guard's triggers) with pg_prove, in a database of
# the main cluster of test/check.sh that has the extensions pgtap and
# fencing.  Prints pg_prove's TAP.
#
# Alone, against a server of your own with pgTAP installed:
#   createdb fencing_pgtap
#   psql -d fencing_pgtap -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION fencing'
#   pg_prove -v -d fencing_pgtap test/pgtap/*.sql

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
fencing_as_postgres psql -q -X -v ON_ERROR_STOP=1 -d postgres \
    -c 'DROP DATABASE IF EXISTS fencing_pgtap' -c 'CREATE DATABASE fencing_pgtap' >/dev/null || exit 1
fencing_as_postgres psql -q -X -v ON_ERROR_STOP=1 -d fencing_pgtap \
    -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION fencing' >/dev/null || exit 1
fencing_as_postgres pg_prove -v -d fencing_pgtap -h "$PGHOST" -p "$PGPORT" -U postgres \
    "$FENCING_SRC"/test/pgtap/*.sql
