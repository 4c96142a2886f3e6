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

# Citus is built here: a skip means something is wrong
fencing_prove "$FENCING_WORK/citus" test/t/100_citus.pl FENCING_CITUS_INSTALL="$inst"
