# shellcheck shell=bash
# test/lib/pg18.sh: PostgreSQL 18 for the harness, built from source once
# into a private prefix and cached (sourced by test/lib/common.sh).
#
#   fencing_pg18_install   make sure the cached build exists; sets
#                          FENCING_PG18_PREFIX (with pgTAP beside it in
#                          FENCING_PG18_PGTAP) and FENCING_PG18_VERSION
#
#   fencing_pg18_cached    is a build of this recipe cached (of the version
#                          FENCING_PG18_SRC names, if it names one)?
#   fencing_pgtap_cached   and pgTAP for it?
#
# Debian 12 has only PostgreSQL 15.  The source is $FENCING_PG18_SRC (a
# postgresql-18_*.orig.tar.*; .ci/run passes shared/vendor's) or else
# Debian unstable's source package (fencing_source, test/lib/deps.sh:
# downloaded before any suite starts); only the upstream tarball is used.
# pgTAP comes the same way from Debian's pgtap source package.  The caches
# live in /var/cache/fencing/, keyed by version and a hash of the recipe; a
# build happens in a staging directory renamed into place as its last
# step, under a lock, so a half-built cache is never used and two runs
# build once.

FENCING_CACHE=${FENCING_CACHE:-/var/cache/fencing}
FENCING_PG18_RECIPE=1           # bump when the recipe changes unseen below
FENCING_PG18_CFLAGS="-O2 -fno-omit-frame-pointer"

# Assertions on, unless FENCING_PG18_CASSERT=no (a second cache, for the
# benchmark's timings).
fencing_pg18_configure() {
    FENCING_PG18_CONFIGURE=(--enable-debug --enable-tap-tests --with-openssl --with-icu --without-llvm)
    [ "${FENCING_PG18_CASSERT:-yes}" = no ] || FENCING_PG18_CONFIGURE=(--enable-cassert "${FENCING_PG18_CONFIGURE[@]}")
}

fencing_with_lock() {
    local lock=$1; shift
    ( exec 9>"$lock"; flock 9; "$@" )
}

# Build tarball $1 (version $2) into cache directory $3.
fencing_pg18_build() {
    local tarball=$1 version=$2 dest=$3 stage t0=$SECONDS
    [ -d "$dest" ] && return 0       # another run built it while we waited
    fencing_pg18_configure
    stage=$(mktemp -d "$FENCING_CACHE/.build-pg$version.XXXXXX")
    fencing_log "building PostgreSQL $version from $(basename "$tarball") into $dest (once; cached)"
    FENCING_PGVER=18 fencing_need base || fencing_die "PostgreSQL $version: its build's packages are missing"
    # world-bin, then what an extension's installcheck and TAP tests need
    # (isolationtester, the Perl test modules)
    ( set -e
      cd "$stage"
      tar -xf "$tarball"
      cd postgresql-"$version"
      ./configure --prefix="$dest" "${FENCING_PG18_CONFIGURE[@]}" CFLAGS="$FENCING_PG18_CFLAGS" \
          >"$stage/configure.log" 2>&1
      # twice as many jobs as cores: the build is on the 18 pass's way, and
      # on a busy machine (the 15 pass's suites beside it) more runnable
      # jobs get it a fairer share of the cores
      make -s -j"$(($(nproc) * 2))" world-bin >"$stage/make.log" 2>&1
      { make -s install-world-bin DESTDIR="$stage/root"
        make -s -C src/test/isolation install DESTDIR="$stage/root"
        make -s -C src/test/perl install DESTDIR="$stage/root"; } >>"$stage/make.log" 2>&1
    ) || { tail -40 "$stage"/make.log "$stage"/configure.log >&2 2>/dev/null
           rm -rf "$stage"; fencing_die "PostgreSQL $version build failed"; }
    echo "PostgreSQL $version, $(basename "$tarball"), configure ${FENCING_PG18_CONFIGURE[*]} CFLAGS=$FENCING_PG18_CFLAGS, built $(date -u +%FT%TZ) in $((SECONDS - t0)) s" \
        >"$stage/root$dest/BUILD-INFO"
    chmod -R a+rX "$stage/root$dest"
    mv "$stage/root$dest" "$dest"     # the atomic step
    rm -rf "$stage"
    fencing_log "PostgreSQL $version built in $((SECONDS - t0)) s"
}

# pgTAP from tarball $1 against prefix $2 into cache directory $3 (a tree to
# copy over a copy of the prefix; its build needs a writable copy).
fencing_pgtap_build() {
    local tarball=$1 prefix=$2 dest=$3 stage
    [ -d "$dest" ] && return 0
    stage=$(mktemp -d "$FENCING_CACHE/.build-pgtap.XXXXXX")
    fencing_log "building pgTAP from $(basename "$tarball") for $prefix (once; cached)"
    ( set -e
      cd "$stage" && tar -xf "$tarball"
      src=$(find "$stage" -mindepth 1 -maxdepth 1 -type d | head -1)
      cp -a "$prefix" "$stage/pg"
      make -C "$src" PG_CONFIG="$stage/pg/bin/pg_config" >"$stage/make.log" 2>&1
      make -C "$src" install PG_CONFIG="$stage/pg/bin/pg_config" DESTDIR="$stage/root" >>"$stage/make.log" 2>&1
    ) || { tail -40 "$stage/make.log" >&2; rm -rf "$stage"; fencing_die "pgTAP build failed"; }
    mkdir -p "$stage/tree"
    cp -a "$stage/root$stage/pg/." "$stage/tree/"
    chmod -R a+rX "$stage/tree"
    mv "$stage/tree" "$dest"
    rm -rf "$stage"
}

# The cache key of the recipe: version-independent.
fencing_pg18_hash() {
    fencing_pg18_configure
    printf '%s\n' "$FENCING_PG18_RECIPE" "${FENCING_PG18_CONFIGURE[@]}" "$FENCING_PG18_CFLAGS" \
        | sha256sum | cut -c1-10
}

# The version of a postgresql-18_VERSION.orig.tar.* file's name.
fencing_pg18_tarball_version() {
    basename "$1" | sed -n 's/^postgresql-18_\([0-9][0-9.]*\)\.orig\.tar\..*$/\1/p'
}

# The cached build to use: of FENCING_PG18_SRC's version if set, else the
# newest; nothing when there is none.
fencing_pg18_cached_dir() {
    local hash v=''
    hash=$(fencing_pg18_hash)
    [ -n "${FENCING_PG18_SRC:-}" ] && v=$(fencing_pg18_tarball_version "$FENCING_PG18_SRC")
    compgen -G "$FENCING_CACHE/postgresql-${v:-18.*}-$hash" | sort -V | tail -1
}
fencing_pg18_cached() {
    local d
    d=$(fencing_pg18_cached_dir)
    [ -n "$d" ] && [ -x "$d/bin/postgres" ]
}
fencing_pgtap_cached() {
    local d
    d=$(fencing_pg18_cached_dir)
    [ -n "$d" ] && [ -n "$(compgen -G "$FENCING_CACHE/pgtap-*-for-$(basename "$d")")" ]
}

fencing_pg18_install() {
    local hash version tarball dest tapdir tapver
    hash=$(fencing_pg18_hash)
    mkdir -p "$FENCING_CACHE"
    if [ -n "${FENCING_PG18_SRC:-}" ]; then
        [ -f "$FENCING_PG18_SRC" ] || fencing_die "FENCING_PG18_SRC=$FENCING_PG18_SRC: no such file"
        tarball=$(readlink -f "$FENCING_PG18_SRC")
        version=$(fencing_pg18_tarball_version "$tarball")
        [ -n "$version" ] || fencing_die "FENCING_PG18_SRC: not a postgresql-18_*.orig.tar.* file"
        dest=$FENCING_CACHE/postgresql-$version-$hash
    else
        # the newest build cached, else Debian's source package
        dest=$(fencing_pg18_cached_dir)
        if [ -z "$dest" ]; then
            tarball=$(fencing_source postgresql-18)
            [ -n "$tarball" ] || fencing_die "PostgreSQL 18: no source (set FENCING_PG18_SRC, or allow apt-get source postgresql-18)"
            version=$(fencing_pg18_tarball_version "$tarball")
            dest=$FENCING_CACHE/postgresql-$version-$hash
        fi
        version=$(basename "$dest" | sed "s/^postgresql-//; s/-$hash\$//")
    fi
    if [ ! -d "$dest" ]; then
        fencing_with_lock "$FENCING_CACHE/postgresql-18.lock" fencing_pg18_build "$tarball" "$version" "$dest" \
            || fencing_die "PostgreSQL $version: no build"
    fi
    [ -x "$dest/bin/postgres" ] || fencing_die "PostgreSQL 18 cache $dest is broken"
    FENCING_PG18_PREFIX=$dest FENCING_PG18_VERSION=$version
    [ "${FENCING_PGVER:-}" = 18 ] && FENCING_SYS_BINDIR=$dest/bin && export FENCING_SYS_BINDIR

    # pgTAP for it: any cached build against this prefix will do
    tapdir=$(compgen -G "$FENCING_CACHE/pgtap-*-for-$(basename "$dest")" | sort -V | tail -1)
    if [ -z "$tapdir" ]; then
        tarball=$(fencing_source pgtap)
        [ -n "$tarball" ] || fencing_die "pgTAP for PostgreSQL 18 needs Debian's pgtap source package (apt-get source pgtap)"
        tapver=$(basename "$tarball" | sed -n 's/^pgtap_\([0-9][0-9.]*\)\.orig\.tar\..*$/\1/p')
        tapdir=$FENCING_CACHE/pgtap-$tapver-for-$(basename "$dest")
        fencing_with_lock "$FENCING_CACHE/pgtap.lock" fencing_pgtap_build "$tarball" "$dest" "$tapdir" \
            || fencing_die "pgTAP: no build"
    fi
    FENCING_PG18_PGTAP=$tapdir
    export FENCING_PG18_PREFIX FENCING_PG18_VERSION FENCING_PG18_PGTAP
}
