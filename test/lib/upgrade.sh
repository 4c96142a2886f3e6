# shellcheck shell=bash
# test/lib/upgrade.sh: for the upgrade suites (update.sh, pg_upgrade.sh),
# whose checks are Perl TAP tests.  Source after test/lib/common.sh.
#   fencing_newest_version [DIR]  default_version of DIR's (the tree's) fencing.control
#   fencing_releases              "VERSION COMMIT" lines of test/releases, oldest first
#   fencing_build_release V INST  release V's tree (git archive of its commit) in
#                                 $FENCING_WORK/release-V, built into the copy INST;
#                                 2 (why on stderr) without the commit or when its
#                                 fencing.control is not at V, 1 when it does not
#                                 build ($FENCING_WORK/build.log)
#   fencing_prove DIR TESTS VAR=VALUE...  make prove_installcheck of TESTS in a
#                                 copy DIR/src of the tree, as postgres, with the
#                                 variables; fails when one skipped (a fault here)

fencing_newest_version() {
    sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "${1:-$FENCING_ROOT}/fencing.control"
}

fencing_releases() {
    sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$FENCING_ROOT/test/releases" | awk '{ print $1, $2 }'
}

fencing_build_release() {
    local v=$1 inst=$2 src=$FENCING_WORK/release-$1 commit
    commit=$(fencing_releases | awk -v v="$v" '$1 == v { print $2 }')
    rm -rf "$src" && mkdir -p "$src"
    if ! git -C "$FENCING_ROOT" archive "$commit" 2>/dev/null | tar -x -C "$src" 2>/dev/null; then
        echo "commit '$commit' of release $v is not in $FENCING_ROOT (a shallow clone? git fetch --unshallow)" >&2
        return 2
    elif [ "$(fencing_newest_version "$src")" != "$v" ]; then
        echo "commit $commit of release $v has default_version '$(fencing_newest_version "$src")'" >&2
        return 2
    fi
    (fencing_make_install "$src" "$inst" "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING") 2>/dev/null || return 1
}

fencing_prove() {
    local dir=$1 tests=$2 st skip
    shift 2
    mkdir -p "$dir/src" && chmod 755 "$dir"
    cp -a "$FENCING_SRC/Makefile" "$FENCING_SRC/fencing.control" "$FENCING_SRC/sql" \
        "$FENCING_SRC/expected" "$FENCING_SRC/test" "$dir/src/"
    chown -R postgres: "$dir/src" && chown postgres: "$dir"
    fencing_as_postgres env -u PGHOST -u PGPORT -u PGDATA -u PGDATABASE "$@" \
        make -C "$dir/src" --no-print-directory prove_installcheck \
        PG_CONFIG="$PG_CONFIG" PROVE_TESTS="$tests" PROVE_FLAGS=-v 2>&1 | tee "$dir/prove.log"
    st=$?
    if skip=$(grep -m1 -o "skipped: .*" "$dir/prove.log"); then
        echo "not ok 1 - $tests ran with the installations built here ($skip)"
        return 1
    fi
    return $st
}
