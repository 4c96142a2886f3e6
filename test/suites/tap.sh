#!/usr/bin/env bash
# test/suites/tap.sh: the Perl TAP tests (test/t/*.pl: restarts, crashes,
# replicas, pg_dump and restore, fuzzing, stress; PostgreSQL::Test::Cluster,
# each test starting servers of its own) through `make prove_installcheck`,
# as the postgres OS user, in the copy of the tree, with the build of
# test/check.sh.  Prints prove's verbose TAP.  test/t/091_pg_upgrade.pl
# skips here (no FENCING_UPGRADE_* variables): the pg_upgrade suite builds
# its installations and runs it.
#
# Alone, after make install (IPC::Run needed):
#   make prove_installcheck [PROVE_TESTS=test/t/001_smoke.pl] [PROVE_FLAGS=-v]

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# the tests start their own servers: no connection of the main cluster
fencing_as_postgres env -u PGHOST -u PGPORT -u PGDATA -u PGDATABASE \
    -u FENCING_UPGRADE_OLD_INSTALL -u FENCING_UPGRADE_NEW_INSTALL \
    -u FENCING_UPGRADE_RELEASE_INSTALL -u FENCING_UPGRADE_RELEASE_ERROR \
    make -C "$FENCING_SRC" --no-print-directory prove_installcheck \
    PG_CONFIG="$PG_CONFIG" PROVE_FLAGS=-v
