#!/usr/bin/env bash
# test/suites/tap.sh: the Perl TAP tests (test/t/*.pl: restarts, crashes,
# replicas, pg_dump and restore, fuzzing, stress; PostgreSQL::Test::Cluster,
# each test starting servers of its own) through `make prove_installcheck`,
# as the postgres OS user, in the copy of the tree, with the build of
# test/check.sh.  Prints prove's verbose TAP.
#
# A test that needs what another suite builds (pg_upgrade's installations,
# Citus, the lock services) is told where it is by that suite, in variables
# FENCING_UPGRADE_*, FENCING_CITUS_*, FENCING_LOCKSVC_*, FENCING_CLIENT_*
# (test/README.md), and skips without them: they are unset here, so those
# tests skip in this suite and run in theirs.
#
# Alone, after make install (IPC::Run needed):
#   make prove_installcheck [PROVE_TESTS=test/t/001_smoke.pl] [PROVE_FLAGS=-v]

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
unset_args=(-u PGHOST -u PGPORT -u PGDATA -u PGDATABASE)
for v in $(compgen -e | grep -E '^FENCING_(UPGRADE|CITUS|LOCKSVC|CLIENT)_'); do
    unset_args+=(-u "$v")
done
# the tests start their own servers: no connection of the main cluster.
# FENCING_TAP_JOBS (3) at a time: most of a test's time is spent waiting
# (servers starting, stopping, replicas catching up, stress runs of a
# fixed length), and each has its own servers, data directories and ports
# (PG_TEST_PORT_DIR); prove keeps each test's output together.
fencing_as_postgres env "${unset_args[@]}" \
    make -C "$FENCING_SRC" --no-print-directory prove_installcheck \
    PG_CONFIG="$PG_CONFIG" PROVE_FLAGS="-v --timer -j${FENCING_TAP_JOBS:-3}"
