# shellcheck shell=bash
# test/lib/citus.sh: Citus for the citus suite, from a source tarball (not
# in Debian: a `git archive` of a release tag).  Source after common.sh.
#   fencing_citus_pick SRC...    the newest citus-X.Y.Z.tar.gz in SRC (files or
#                                directories) supporting PostgreSQL $FENCING_PGVER
#   fencing_citus_build TARBALL  its build's installed files (a DESTDIR stage),
#                                cached in $FENCING_CITUS_CACHE by Citus version,
#                                server version and checksum; built once, locked
FENCING_CITUS_CACHE=${FENCING_CITUS_CACHE:-$FENCING_CACHE/citus}

fencing_citus_pick() {
    local f v best=
    # shellcheck disable=SC2044
    for f in $(find "$@" -maxdepth 1 -name 'citus-*.tar.gz' 2>/dev/null | sort -V); do
        v=$(basename "$f" .tar.gz)
        case ${v#citus-} in
        12.*) v=" 14 15 16 " ;; 13.*) v=" 15 16 17 " ;; 14.*) v=" 16 17 18 " ;; *) v= ;;
        esac
        [[ $v == *" $FENCING_PGVER "* ]] && best=$f
    done
    [ -n "$best" ] && echo "$best"
}

# one build, in $1 (a temporary directory), of tarball $2
fencing_citus_make() {
    local tmp=$1 tarball=$2 compat inc
    fencing_need citus || fencing_die "cannot install the build dependencies of Citus"
    mkdir -p "$tmp/src" && tar -xzf "$tarball" -C "$tmp/src" --strip-components=1 || return 1
    # Citus 13.2.2 declares a static have_createdb_privilege(), which
    # PostgreSQL 15.20 exports from commands/dbcommands.h: rename Citus' copy
    compat=$tmp/src/src/include/pg_version_compat.h
    inc=$("$FENCING_SYS_BINDIR/pg_config" --includedir-server)
    if grep -q have_createdb_privilege "$inc/commands/dbcommands.h" && grep -q '^have_createdb_privilege(void)' "$compat"; then
        perl -0pi -e 's/(static inline bool\s*\nhave_createdb_privilege\(void\))/#define have_createdb_privilege citus_compat_have_createdb_privilege\n$1/' "$compat"
    fi
    # with_llvm=no: no bitcode for the JIT's inlining (Debian's 15 has LLVM,
    # and PGXS would compile every file a second time with clang); twice as
    # many jobs as cores, as for PostgreSQL 18 (test/lib/pg18.sh)
    (cd "$tmp/src" && ./configure PG_CONFIG="$FENCING_SYS_BINDIR/pg_config" && make -j"$(($(nproc) * 2))" with_llvm=no &&
        make install with_llvm=no DESTDIR="$tmp/stage") >"$tmp/build.log" 2>&1 || { tail -n 40 "$tmp/build.log" >&2; return 1; }
    rm -rf "$tmp/src"
}

# build tarball $1 into cache directory $2 (unless built while we waited)
fencing_citus_locked_build() {
    local tmp
    [ -d "$2/stage" ] && return 0
    tmp=$(mktemp -d "$2.build.XXXXXX") && fencing_log "building Citus from $1 into $2" || return 1
    fencing_citus_make "$tmp" "$1" && chmod -R a+rX "$tmp" && mv -T "$tmp" "$2" && return 0
    rm -rf "$tmp"
    return 1
}

fencing_citus_build() {
    local tarball=$1 key
    key=$(basename "$tarball" .tar.gz)-pg$("$FENCING_SYS_BINDIR/pg_config" --version | awk '{print $2}')-$(sha256sum "$tarball" | cut -c1-12)
    mkdir -p "$FENCING_CITUS_CACHE"
    [ -d "$FENCING_CITUS_CACHE/$key/stage" ] || fencing_with_lock "$FENCING_CITUS_CACHE/.lock-$key" \
        fencing_citus_locked_build "$tarball" "$FENCING_CITUS_CACHE/$key" >&2 || return 1
    echo "$FENCING_CITUS_CACHE/$key/stage"
}
