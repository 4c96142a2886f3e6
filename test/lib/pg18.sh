# shellcheck shell=bash
# test/lib/pg18.sh: PostgreSQL 18 for the test harness, built from source
# into a private prefix once and cached.  Sourced by test/lib/common.sh.
#
#   fencing_pg18_install   make sure the cached build exists (building it the
#                          first time); sets FENCING_PG18_PREFIX, the prefix
#                          of PostgreSQL 18 with pgTAP installed
#
# Debian 12 packages only PostgreSQL 15.  The source is
#   - $FENCING_PG18_SRC, a postgresql-18_*.orig.tar.bz2 (.ci/run passes the
#     one in shared/vendor when it is there), or else
#   - Debian's postgresql-18 source package from the unstable suite, through
#     a deb-src entry of its own (/etc/apt/sources.list.d/fencing-pg18-src.sources;
#     source entries only, so no binary package of another release can be
#     installed by accident).  Only the upstream tarball (the .orig) is used:
#     Debian's patches are for Debian's layout, not for a private prefix.
# pgTAP (Debian packages it only for the system's 15) is built the same way
# from Debian's pgtap source package and cached beside it.
#
# The caches live under /var/cache/fencing/, keyed by the upstream version
# and a hash of the build recipe (configure options and this file's
# revision).  A build happens in a staging directory and is renamed into
# place as its last step, under a lock, so a half-built cache is never used
# and two concurrent runs build it once.

FENCING_CACHE=${FENCING_CACHE:-/var/cache/fencing}
# Bump when the recipe changes in a way the options do not show.
FENCING_PG18_RECIPE=1
FENCING_PG18_CFLAGS="-O2 -fno-omit-frame-pointer"
FENCING_PG18_SOURCES=/etc/apt/sources.list.d/fencing-pg18-src.sources

# The configure options, into FENCING_PG18_CONFIGURE: assertions on (the
# test suites), unless FENCING_PG18_CASSERT=no, which gives a second,
# separately cached build for timing (the benchmark outside smoke mode).
fencing_pg18_configure() {
    FENCING_PG18_CONFIGURE=(--enable-debug --enable-tap-tests
                            --with-openssl --with-icu --without-llvm)
    [ "${FENCING_PG18_CASSERT:-yes}" = no ] || FENCING_PG18_CONFIGURE=(--enable-cassert "${FENCING_PG18_CONFIGURE[@]}")
}

# The short hash of everything that decides what the build is.
fencing_pg18_recipe_hash() {
    fencing_pg18_configure
    printf '%s\n' "$FENCING_PG18_RECIPE" "${FENCING_PG18_CONFIGURE[@]}" "$FENCING_PG18_CFLAGS" \
        | sha256sum | cut -c1-10
}

# Add the deb-src entry for Debian unstable (source entries only) and
# refresh only that list.
fencing_pg18_apt_source() {
    if [ ! -f "$FENCING_PG18_SOURCES" ]; then
        [ "$(id -u)" -eq 0 ] || fencing_die "need root to add $FENCING_PG18_SOURCES"
        cat >"$FENCING_PG18_SOURCES" <<'EOF'
# Added by the fencing test harness (test/lib/pg18.sh): the source packages
# of PostgreSQL 18 and pgTAP, which Debian 12 does not have.  Source entries
# only: nothing from unstable can be installed from here.
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: unstable
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    fi
    fencing_apt_update -o Dir::Etc::sourcelist="$FENCING_PG18_SOURCES" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 >/dev/null
}

# The upstream version of a Debian source package in the lists ("18.1").
fencing_apt_src_version() {
    apt-cache showsrc "$1" 2>/dev/null | sed -n 's/^Version: //p' \
        | sort -V | tail -1 | sed 's/^[0-9]*://; s/-[^-]*$//'
}

# Download the .orig tarball of a source package into the current
# directory (no unpacking, no Debian patches); print its path.
fencing_apt_src_orig() {
    # --tar-only: the tarballs, not the .dsc (apt's _apt user writes them,
    # so the directory must be writable for it)
    chmod 777 "$PWD"
    apt-get source --download-only --tar-only -qq "$1" >"$PWD/apt.log" 2>&1
    compgen -G "$PWD/$1_*.orig.tar.*" | sort | head -1
}

# Run "$@" with an exclusive lock on $1 (a lock file), waiting for it.
fencing_with_lock() {
    local lock=$1; shift
    (
        exec 9>"$lock"
        flock 9
        "$@"
    )
}

# Build PostgreSQL 18 from tarball $1 (version $2) into cache directory $3.
fencing_pg18_build() {
    local tarball=$1 version=$2 dest=$3
    [ -d "$dest" ] && return 0       # another run built it while we waited
    # the options the cache key was computed from (a $(...) of the hash
    # cannot have set them in this shell)
    fencing_pg18_configure
    local stage
    stage=$(mktemp -d "$FENCING_CACHE/.build-pg$version.XXXXXX")
    local t0=$SECONDS jobs
    jobs=$(nproc)
    fencing_log "building PostgreSQL $version from $(basename "$tarball") into $dest (once; cached)"
    fencing_apt_install_missing bison flex libreadline-dev zlib1g-dev libssl-dev \
        libicu-dev pkg-config libipc-run-perl perl make gcc
    (
        set -e
        cd "$stage"
        tar -xf "$tarball"
        cd postgresql-"$version"
        ./configure --prefix="$dest" "${FENCING_PG18_CONFIGURE[@]}" \
            CFLAGS="$FENCING_PG18_CFLAGS" >"$stage/configure.log" 2>&1
        make -s -j"$jobs" world-bin >"$stage/make.log" 2>&1
        # then what PGXS's installcheck and the TAP tests of an extension
        # need: pg_isolation_regress and isolationtester (not part of
        # world-bin's install) and the Perl test modules (installed by
        # install-world-bin only with --enable-tap-tests, which is set)
        {
            make -s install-world-bin DESTDIR="$stage/root"
            make -s -C src/test/isolation install DESTDIR="$stage/root"
            make -s -C src/test/perl install DESTDIR="$stage/root"
        } >>"$stage/make.log" 2>&1
    ) || { tail -40 "$stage"/make.log "$stage"/configure.log >&2 2>/dev/null
           rm -rf "$stage"; fencing_die "PostgreSQL $version build failed"; }
    echo "PostgreSQL $version, $(basename "$tarball"), configure ${FENCING_PG18_CONFIGURE[*]} CFLAGS=$FENCING_PG18_CFLAGS, built $(date -u +%FT%TZ) in $((SECONDS - t0)) s" \
        >"$stage/root$dest/BUILD-INFO"
    chmod -R a+rX "$stage/root$dest"
    mv "$stage/root$dest" "$dest"     # the atomic step
    rm -rf "$stage"
    fencing_log "PostgreSQL $version built in $((SECONDS - t0)) s"
}

# Build pgTAP from tarball $1 against prefix $2 into cache directory $3, a
# tree to copy over a copy of the prefix.
fencing_pgtap_build() {
    local tarball=$1 prefix=$2 dest=$3
    [ -d "$dest" ] && return 0
    local stage src
    stage=$(mktemp -d "$FENCING_CACHE/.build-pgtap.XXXXXX")
    fencing_log "building pgTAP from $(basename "$tarball") for $prefix (once; cached)"
    (
        set -e
        cd "$stage"
        tar -xf "$tarball"
        src=$(find "$stage" -mindepth 1 -maxdepth 1 -type d | head -1)
        # pgTAP's build needs a writable copy of the server it targets
        cp -a "$prefix" "$stage/pg"
        make -C "$src" PG_CONFIG="$stage/pg/bin/pg_config" >"$stage/make.log" 2>&1
        mkdir -p "$stage/root"
        make -C "$src" install PG_CONFIG="$stage/pg/bin/pg_config" DESTDIR="$stage/root" >>"$stage/make.log" 2>&1
    ) || { tail -40 "$stage/make.log" >&2; rm -rf "$stage"; fencing_die "pgTAP build failed"; }
    # installed paths are under $stage/pg (relocatable pg_config): keep them
    # relative to the prefix
    mkdir -p "$stage/tree"
    cp -a "$stage/root$stage/pg/." "$stage/tree/"
    chmod -R a+rX "$stage/tree"
    mv "$stage/tree" "$dest"
    rm -rf "$stage"
}

# Install pkgs that are missing (root).
fencing_apt_install_missing() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] || fencing_apt_install "${missing[@]}"
}

fencing_pg18_install() {
    local hash version tarball dl dest
    hash=$(fencing_pg18_recipe_hash)
    mkdir -p "$FENCING_CACHE"
    if [ -n "${FENCING_PG18_SRC:-}" ]; then
        [ -f "$FENCING_PG18_SRC" ] || fencing_die "FENCING_PG18_SRC=$FENCING_PG18_SRC: no such file"
        tarball=$(readlink -f "$FENCING_PG18_SRC")
        version=$(basename "$tarball" | sed -n 's/^postgresql-18_\([0-9][0-9.]*\)\.orig\.tar\..*$/\1/p')
        [ -n "$version" ] || fencing_die "FENCING_PG18_SRC: not a postgresql-18_*.orig.tar.* file"
    else
        if fencing_pg18_apt_source; then
            version=$(fencing_apt_src_version postgresql-18)
        fi
        if [ -z "${version:-}" ]; then
            # no network: the newest build in the cache, if any
            version=$(compgen -G "$FENCING_CACHE/postgresql-18.*-$hash" \
                | sed "s|.*/postgresql-||; s|-$hash\$||" | sort -V | tail -1)
            [ -n "$version" ] || fencing_die "PostgreSQL 18: no source (set FENCING_PG18_SRC, or allow apt-get source postgresql-18)"
        fi
    fi
    dest=$FENCING_CACHE/postgresql-$version-$hash
    if [ ! -d "$dest" ]; then
        if [ -z "${tarball:-}" ]; then
            dl=$(mktemp -d "$FENCING_CACHE/.src.XXXXXX")
            tarball=$(cd "$dl" && fencing_apt_src_orig postgresql-18)
            [ -n "$tarball" ] || { cat "$dl/apt.log" >&2; fencing_die "apt-get source postgresql-18 gave no .orig tarball"; }
            version=$(basename "$tarball" | sed -n 's/^postgresql-18_\([0-9][0-9.]*\)\.orig\.tar\..*$/\1/p')
            dest=$FENCING_CACHE/postgresql-$version-$hash
        fi
        fencing_with_lock "$FENCING_CACHE/postgresql-18.lock" fencing_pg18_build "$tarball" "$version" "$dest" \
            || fencing_die "PostgreSQL $version: no build"
        [ -n "${dl:-}" ] && rm -rf "$dl"
    fi
    [ -x "$dest/bin/postgres" ] || fencing_die "PostgreSQL 18 cache $dest is broken"
    FENCING_PG18_PREFIX=$dest
    FENCING_PG18_VERSION=$version
    [ "${FENCING_PGVER:-}" = 18 ] && FENCING_SYS_BINDIR=$dest/bin && export FENCING_SYS_BINDIR

    # pgTAP for it: any cached build against this prefix will do
    local tapdir
    tapdir=$(compgen -G "$FENCING_CACHE/pgtap-*-for-$(basename "$dest")" | sort -V | tail -1)
    if [ -z "$tapdir" ]; then
        fencing_pg18_apt_source || fencing_die "pgTAP for PostgreSQL 18 needs apt-get source pgtap"
        local tapver
        tapver=$(fencing_apt_src_version pgtap)
        [ -n "$tapver" ] || fencing_die "no pgtap source package found"
        tapdir=$FENCING_CACHE/pgtap-$tapver-for-$(basename "$dest")
        dl=$(mktemp -d "$FENCING_CACHE/.src.XXXXXX")
        tarball=$(cd "$dl" && fencing_apt_src_orig pgtap)
        [ -n "$tarball" ] || { cat "$dl/apt.log" >&2; fencing_die "apt-get source pgtap gave no .orig tarball"; }
        fencing_with_lock "$FENCING_CACHE/pgtap.lock" fencing_pgtap_build "$tarball" "$dest" "$tapdir" \
            || fencing_die "pgTAP: no build"
        rm -rf "$dl"
    fi
    FENCING_PG18_PGTAP=$tapdir
    export FENCING_PG18_PREFIX FENCING_PG18_VERSION FENCING_PG18_PGTAP
}
