# shellcheck shell=bash
# test/lib/pgtle.sh: pg_tle (Trusted Language Extensions, how RDS, Aurora
# and Supabase install extensions that ship no library) for the managed
# edition's suites, built from a source tarball (not in Debian).  Source
# after common.sh.
#   fencing_pgtle_tarball        the pg_tle-*.tar.gz to build: FENCING_PGTLE_SRC,
#                                else the newest in ../shared/vendor beside the
#                                repository; prints nothing when there is none
#   fencing_pgtle_build TARBALL  its build's installed files (a DESTDIR stage),
#                                cached in $FENCING_PGTLE_CACHE by pg_tle
#                                version, server version and checksum; built
#                                once, under a lock, moved into place whole
#   fencing_pgtle_install TARBALL INST  that build copied into the private
#                                installation INST (FENCING_BINDIR's)
FENCING_PGTLE_CACHE=${FENCING_PGTLE_CACHE:-${FENCING_CACHE:-/var/cache/fencing}/pg_tle}

fencing_pgtle_tarball() {
    local vendor
    if [ -n "${FENCING_PGTLE_SRC:-}" ]; then
        [ -f "$FENCING_PGTLE_SRC" ] || fencing_die "FENCING_PGTLE_SRC=$FENCING_PGTLE_SRC: no such file"
        readlink -f "$FENCING_PGTLE_SRC"
        return 0
    fi
    vendor=$(cd "$FENCING_ROOT/.." && pwd)/shared/vendor
    compgen -G "$vendor/pg_tle-*.tar.gz" | sort -V | tail -1
}

# one build, in $1 (a temporary directory), of tarball $2
fencing_pgtle_make() {
    local tmp=$1 tarball=$2
    # pg_tle's client authentication hook includes libpq-be.h, which
    # includes gssapi.h on servers built with GSSAPI (Debian's 15)
    # (its packages: fencing_suite_packages managed, test/lib/deps.sh)
    fencing_need managed || fencing_die "cannot install the build dependencies of pg_tle"
    mkdir -p "$tmp/src" && tar -xzf "$tarball" -C "$tmp/src" --strip-components=1 || return 1
    (cd "$tmp/src" && make PG_CONFIG="$FENCING_SYS_BINDIR/pg_config" &&
        make install PG_CONFIG="$FENCING_SYS_BINDIR/pg_config" DESTDIR="$tmp/stage") \
        >"$tmp/build.log" 2>&1 || { tail -n 40 "$tmp/build.log" >&2; return 1; }
    rm -rf "$tmp/src"
}

# build tarball $1 into cache directory $2 (unless built while we waited)
fencing_pgtle_locked_build() {
    local tmp
    [ -d "$2/stage" ] && return 0
    tmp=$(mktemp -d "$2.build.XXXXXX") && fencing_log "building pg_tle from $1 into $2" || return 1
    fencing_pgtle_make "$tmp" "$1" && chmod -R a+rX "$tmp" && mv -T "$tmp" "$2" && return 0
    rm -rf "$tmp"
    return 1
}

fencing_pgtle_build() {
    local tarball=$1 key
    key=$(basename "$tarball" .tar.gz)-pg$("$FENCING_SYS_BINDIR/pg_config" --version | awk '{print $2}')-$(sha256sum "$tarball" | cut -c1-12)
    mkdir -p "$FENCING_PGTLE_CACHE"
    [ -d "$FENCING_PGTLE_CACHE/$key/stage" ] || fencing_with_lock "$FENCING_PGTLE_CACHE/.lock-$key" \
        fencing_pgtle_locked_build "$tarball" "$FENCING_PGTLE_CACHE/$key" >&2 || return 1
    echo "$FENCING_PGTLE_CACHE/$key/stage"
}

# Copy the build for tarball $1 into the private installation $2 (the
# directory fencing_build made: Debian's layout under it for 15, the
# prefix for 18).
fencing_pgtle_install() {
    local stage
    stage=$(fencing_pgtle_build "$1") || return 1
    if [ "$FENCING_PGVER" = 18 ]; then
        cp -a "$stage$FENCING_PG18_PREFIX/." "$2/"
    else
        cp -a "$stage/usr/." "$2/usr/"
    fi
}
