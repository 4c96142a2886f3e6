#!/usr/bin/env bash
# test/suites/citus.sh: the guard on Citus distributed and reference tables:
# test/t/100_citus.pl (a coordinator and three workers).  This script builds
# Citus from FENCING_CITUS_SRC (tarballs or directories; .ci/run passes the
# vendor's) for the server under test, once, cached (test/lib/citus.sh),
# installs it beside fencing in the private copy of the server, and runs the
# test through `make prove_installcheck` as the postgres OS user with
# FENCING_CITUS_INSTALL naming that copy.  No tarball for this server: skipped.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/citus.sh
. "$FENCING_ROOT/test/lib/citus.sh"

if [ -z "${FENCING_CITUS_SRC:-}" ]; then
    echo "1..0 # SKIP FENCING_CITUS_SRC is not set (Citus source tarballs, e.g. citus-13.2.2.tar.gz for PostgreSQL 15)"
    exit 0
fi
# shellcheck disable=SC2086
if ! tarball=$(fencing_citus_pick $FENCING_CITUS_SRC); then
    echo "1..0 # SKIP no Citus tarball in FENCING_CITUS_SRC ($FENCING_CITUS_SRC) supports PostgreSQL $FENCING_PGVER"
    exit 0
fi
stage=$(fencing_citus_build "$tarball") || fencing_die "cannot build Citus from $tarball"
inst=${FENCING_BINDIR%/bin}
if [ "$FENCING_PGVER" = 18 ]; then
    cp -a "$stage$FENCING_PG18_PREFIX/." "$inst/"    # the cached 18 build's prefix
else
    cp -a "$stage/usr/." "${FENCING_BINDIR%/usr/lib/postgresql/*}/usr/"
fi
fencing_log "Citus from $stage, installed into $inst"

# a copy of the tree for make prove_installcheck (its own tmp_check/)
test_file=test/t/100_citus.pl
W=$FENCING_WORK/citus
mkdir -p "$W/src"
cp -a "$FENCING_SRC/Makefile" "$FENCING_SRC/fencing.control" "$FENCING_SRC/sql" "$FENCING_SRC/test" "$W/src/"
chown -R postgres: "$W"
fencing_as_postgres env -u PGHOST -u PGPORT -u PGDATA -u PGDATABASE FENCING_CITUS_INSTALL="$inst" \
    make -C "$W/src" --no-print-directory prove_installcheck \
    PG_CONFIG="$PG_CONFIG" PROVE_TESTS="$test_file" PROVE_FLAGS=-v 2>&1 | tee "$W/prove.log"
st=$?
# Citus is built here: a skip means something is wrong
if skip=$(grep -m1 -o "skipped: .*" "$W/prove.log"); then
    echo "not ok 1 - $test_file ran with the Citus installation built here ($skip)"
    exit 1
fi
exit $st
