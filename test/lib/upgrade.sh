# shellcheck shell=bash
# test/lib/upgrade.sh: for the upgrade suites (update.sh, pg_upgrade.sh),
# whose checks are Perl TAP tests.  Source after test/lib/common.sh.
#   fencing_newest_version [DIR]  default_version of DIR's (the tree's) fencing.control
#   fencing_releases              "VERSION COMMIT" lines of test/releases, oldest first
#   fencing_build_release V INST  release V's tree (git archive of its commit) in
#                                 $FENCING_WORK/release-V, built into the copy INST
#                                 (the build cached in $FENCING_CACHE/releases);
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
    # each release's build for this server is cached ($FENCING_CACHE/releases):
    # its commit and the server's version and build options key it
    local cflags="-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING" server key cache
    if [ "$FENCING_PGVER" = 18 ]; then
        server=$(basename "$FENCING_PG18_PREFIX")
    else
        server=postgresql-15-$(dpkg-query -W -f='${Version}' postgresql-15)
    fi
    key=$(printf '%s\n' "$cflags" with_llvm=no 1 | sha256sum | cut -c1-8)
    cache=$FENCING_CACHE/releases/$v-${commit:0:12}-$server-$key
    mkdir -p "$FENCING_CACHE/releases"
    fencing_with_lock "$cache.lock" fencing_release_build "$src" "$inst" "$cache" "$cflags" || return 1
    cp -a "$cache/." "$inst/"
}

# (under the lock) build release tree $1 for the copy $2 into cache
# directory $3 with CFLAGS $4, unless it is there: installed into a stage,
# moved into place whole
fencing_release_build() {
    local src=$1 inst=$2 cache=$3 cflags=$4 stage root
    [ -d "$cache" ] && return 0
    stage=$(mktemp -d "$cache.XXXXXX")
    if ! (fencing_destdir=$stage fencing_make_install "$src" "$inst" "$cflags") 2>/dev/null; then
        rm -rf "$stage"
        return 1
    fi
    # 15 installs below the copy's root, 18 below its prefix
    root=$stage
    [ "$FENCING_PGVER" = 18 ] && root=$stage$inst
    mv -T "$root" "$cache" && rm -rf "$stage"
}
