#!/usr/bin/env bash
# test/suites/update.sh: ALTER EXTENSION fencing UPDATE from every release
# of test/releases to the tree's version.  The checks are test/t/092_update.pl
# (each release's own build updated while writers write) and
# test/t/093_update_paths.pl (every path of update scripts); this script
# only builds each release from its commit into a private copy of the server
# (one that does not build is left out on 18, which it may predate, and
# fails on 15) and runs them with this tree's build through fencing_prove.

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/upgrade.sh
. "$FENCING_ROOT/test/lib/upgrade.sh"

W=$FENCING_WORK/update
mkdir -p "$W"
insts='' srcs='' errors=''
while read -r v commit; do
    [ "$v" = "$(fencing_newest_version)" ] && continue
    bin=$(fencing_pg_copy "$W/inst-$v")
    FENCING_WORK=$W fencing_build_release "$v" "$W/inst-$v" 2>"$W/source.err"
    case $? in
    0) insts="$insts $v=${bin%/bin}" ;;
    2) errors+="$v release $v: commit ${commit:0:12} is in this clone and its fencing.control says $v"$'\n'
       tap_diag "$(cat "$W/source.err")" ;;
    *) [ "$FENCING_PGVER" = 15 ] && errors+="$v release $v builds on PostgreSQL 15"$'\n'
       tap_diag "release $v does not build on PostgreSQL $FENCING_PGVER:" "$(grep -m3 error "$W/build.log")" ;;
    esac
    [ -d "$W/release-$v" ] && srcs="$srcs $v=$W/release-$v"
done < <(fencing_releases)

# the two files side by side (servers of their own each)
fencing_prove_jobs=2 fencing_prove "$W" "test/t/092_update.pl test/t/093_update_paths.pl" \
    FENCING_UPGRADE_TREE_INSTALL="${FENCING_BINDIR%/bin}" FENCING_UPGRADE_RELEASE_INSTALLS="$insts" \
    FENCING_UPGRADE_RELEASE_SOURCES="$srcs" FENCING_UPGRADE_RELEASE_ERRORS="$errors"
