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
