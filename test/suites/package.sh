#!/usr/bin/env bash
# test/suites/package.sh: the Debian package, built, installed, used and
# removed on this machine (the system's PostgreSQL 15).  Runs as root;
# prints TAP.
#
#   sudo FENCING_SUITES=package bash test/check.sh --pg 15  (as a suite)
#   sudo bash test/suites/package.sh                        (alone)
#   sudo bash test/suites/package.sh --cleanup              (undo interrupted runs)
#
# The checks are the Perl TAP script test/package/package.pl (its head says
# what it proves, what it changes and how it undoes it, and when it leaves
# the system alone: fencing there already, not installed by it).  It is
# not under test/t/: it needs root and installs into the system's
# PostgreSQL, so neither the tap suite nor `make prove_installcheck` may
# run it.  This script only says whether it can run here, installs the
# build's tools that are missing (debhelper, lintian,
# postgresql-server-dev-all at the version of the installed
# postgresql-common, so that nothing of the system's PostgreSQL is
# upgraded, pgxnclient: the test command's tools, kept like gcc) and runs
# it.

set -u
FENCING_ROOT=${FENCING_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
export FENCING_ROOT
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"

V=15
test_file=$FENCING_ROOT/test/package/package.pl
[ "$(id -u)" -eq 0 ] || { echo "1..0 # SKIP needs root (apt-get, pg_createcluster)"; exit 0; }
if [ "${1:-}" = --cleanup ]; then
    exec perl "$test_file" --cleanup
fi
[ $# -eq 0 ] || fencing_die "usage: package.sh [--cleanup]"
if [ "${FENCING_PGVER:-$V}" != "$V" ]; then
    echo "1..0 # SKIP the package is built for the system's PostgreSQL $V, not $FENCING_PGVER"
    exit 0
fi
if ! grep -q '^12\.' /etc/debian_version 2>/dev/null || [ ! -x "/usr/lib/postgresql/$V/bin/postgres" ]; then
    echo "1..0 # SKIP needs Debian 12 with its postgresql-$V"
    exit 0
fi

# the build's tools (fencing_suite_packages package, test/lib/deps.sh;
# test/check.sh installed them before any suite started)
fencing_need package 2>&1 | fencing_diag

# (package.pl checks that they are there: its second check)
exec perl "$test_file"
