#!/usr/bin/env bash
# test/suites/pg_upgrade.sh: pg_upgrade from a filled PostgreSQL 15 cluster
# with the extension into PostgreSQL 18 (the 18 pass of test/check.sh; the
# 15 pass skips it).  The checks are test/t/091_pg_upgrade.pl (its head says
# what it proves, and the known failure of PostgreSQL it reports as TODO);
# this script only builds into private copies what it needs: 15 with this
# tree's build (FENCING_UPGRADE_OLD_INSTALL), 15 with the last release of
# test/releases from its commit (FENCING_UPGRADE_RELEASE_INSTALL, or
# FENCING_UPGRADE_RELEASE_ERROR naming the failing check), and takes 18 with
# this tree's build (FENCING_UPGRADE_NEW_INSTALL), then runs it through
# fencing_prove (test/lib/common.sh).

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/upgrade.sh
. "$FENCING_ROOT/test/lib/upgrade.sh"

if [ "$FENCING_PGVER" != 18 ]; then
    echo "1..0 # SKIP pg_upgrade goes from 15 into 18: it runs in the PostgreSQL 18 pass"
    exit 0
fi
W=$FENCING_WORK/pg_upgrade       # (made by the first copy)
fencing_set_pgver 15
fencing_deps >/dev/null
bin15=$(fencing_pg_copy "$W/inst15")
FENCING_WORK=$W fencing_make_install "$FENCING_ROOT" "$W/inst15" "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING"
rel=$(fencing_releases | awk -v n="$(fencing_newest_version)" '$1 != n { v = $1 } END { print v }')
rel_inst='' rel_error="a released version to upgrade from (test/releases lists none older than $(fencing_newest_version))"
if [ -n "$rel" ]; then
    rel_bin=$(fencing_pg_copy "$W/inst15-$rel")
    if FENCING_WORK=$W fencing_build_release "$rel" "$W/inst15-$rel" 2>"$W/source.err"; then
        rel_inst=${rel_bin%/bin} rel_error=''
    else
        rel_error="release $rel (test/releases) builds on PostgreSQL $("$bin15/postgres" -V | awk '{print $3}')"
        tap_diag "$(cat "$W/source.err")" "$(tail -20 "$W/build.log" 2>/dev/null)"
    fi
fi
fencing_set_pgver 18
fencing_prove "$W" test/t/091_pg_upgrade.pl FENCING_UPGRADE_OLD_INSTALL="${bin15%/bin}" \
    FENCING_UPGRADE_NEW_INSTALL="${FENCING_BINDIR%/bin}" FENCING_UPGRADE_RELEASE_INSTALL="$rel_inst" \
    FENCING_UPGRADE_RELEASE_ERROR="$rel_error"
