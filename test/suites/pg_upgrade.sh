#!/usr/bin/env bash
# test/suites/pg_upgrade.sh: pg_upgrade from a filled PostgreSQL 15 cluster
# with the extension into PostgreSQL 18 (runs in the PostgreSQL 18 pass of
# test/check.sh; the 15 pass skips it).  The checks are the Perl TAP test
# test/t/091_pg_upgrade.pl (its head says what it proves, and the known
# failure of PostgreSQL it reports as TODO); this script only builds what
# that test needs, into private copies of the servers:
#
#   FENCING_UPGRADE_OLD_INSTALL      PostgreSQL 15 with this tree's build
#   FENCING_UPGRADE_NEW_INSTALL      PostgreSQL 18 with it (test/check.sh's
#                                    build)
#   FENCING_UPGRADE_RELEASE_INSTALL  PostgreSQL 15 with the last release of
#                                    test/releases, built from its commit
#                                    (FENCING_UPGRADE_RELEASE_ERROR instead,
#                                    naming the failing check, when there is
#                                    none or it does not build)
#
# and runs it through `make prove_installcheck` as the postgres OS user, in
# a copy of the tree of its own, printing prove's verbose TAP.

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/upgrade.sh
. "$FENCING_ROOT/test/lib/upgrade.sh"

if [ "$FENCING_PGVER" != 18 ]; then
    echo "1..0 # SKIP pg_upgrade goes from 15 into 18: it runs in the PostgreSQL 18 pass"
    exit 0
fi

test_file=test/t/091_pg_upgrade.pl
W=$FENCING_WORK/pg_upgrade
mkdir -p "$W" && chmod 755 "$W" && chown postgres: "$W"
cflags="-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING"

# PostgreSQL 15 with this tree's build
fencing_set_pgver 15
fencing_deps >/dev/null
inst15=$W/inst15
bin15=$(fencing_pg_copy "$inst15")
FENCING_WORK=$W fencing_make_install "$FENCING_ROOT" "$inst15" "$cflags"
v15=$("$bin15/postgres" -V | awk '{print $3}')

# PostgreSQL 15 with the last release's own build
rel=$(fencing_releases | awk -v n="$(fencing_newest_version)" '$1 != n { v = $1 } END { print v }')
rel_inst=
rel_error=
if [ -z "$rel" ]; then
    rel_error="a released version to upgrade from (test/releases lists none older than $(fencing_newest_version))"
else
    fencing_pg_copy "$W/inst15-$rel" >/dev/null
    if FENCING_WORK=$W fencing_build_release "$rel" "$W/inst15-$rel" 2>"$W/source.err"; then
        rel_inst=$W/inst15-$rel/usr/lib/postgresql/15
    else
        rel_error="release $rel (test/releases) builds on PostgreSQL $v15"
        tap_diag "$(cat "$W/source.err")" "$(tail -20 "$W/build.log" 2>/dev/null)"
    fi
fi
fencing_set_pgver 18

# a copy of the tree for make prove_installcheck (its tmp_check/ apart
# from the tap suite's)
mkdir -p "$W/src"
cp -a "$FENCING_SRC/Makefile" "$FENCING_SRC/fencing.control" "$FENCING_SRC/sql" \
    "$FENCING_SRC/test" "$W/src/"
chown -R postgres: "$W/src"

fencing_as_postgres env -u PGHOST -u PGPORT -u PGDATA -u PGDATABASE \
    FENCING_UPGRADE_OLD_INSTALL="$(dirname "$bin15")" \
    FENCING_UPGRADE_NEW_INSTALL="$(dirname "$FENCING_BINDIR")" \
    FENCING_UPGRADE_RELEASE_INSTALL="$rel_inst" \
    FENCING_UPGRADE_RELEASE_ERROR="$rel_error" \
    make -C "$W/src" --no-print-directory prove_installcheck \
    PG_CONFIG="$PG_CONFIG" PROVE_TESTS="$test_file" PROVE_FLAGS=-v 2>&1 | tee "$W/prove.log"
st=$?
# the installations are built here: a skip means something is wrong
if skip=$(grep -m1 -o "skipped: .*" "$W/prove.log"); then
    echo "not ok 1 - $test_file ran with the installations built here ($skip)"
    exit 1
fi
exit $st
