# shellcheck shell=bash
# test/lib/citus.sh: Citus for the test suite, built from a source tarball
# and cached.  Source it after test/lib/common.sh.
#
#   fencing_citus_pick SRC...     the tarball among SRC (tarballs or
#                                 directories holding citus-X.Y.Z.tar.gz) that
#                                 supports PostgreSQL $FENCING_PGVER; prints
#                                 its path, or nothing
#   fencing_citus_build TARBALL   build Citus for the system's PostgreSQL
#                                 $FENCING_PGVER, or reuse the cached build;
#                                 prints the cache directory
#   fencing_citus_install DIR     copy a cached build into the private copy of
#                                 PostgreSQL that $FENCING_BINDIR belongs to
#
# Citus is not in Debian: its source comes as a `git archive` of a release
# tag (the vendor directory, see .ci/run).  A build takes minutes on this
# machine, so it is kept under /var/cache/fencing/citus/, keyed by the Citus
# version, the exact PostgreSQL version and the tarball's checksum, and made
# atomically: built in a temporary directory beside the cache entry, then
# renamed into place, under a lock so that two runs never build it twice.
# Only the installed files are kept, never the build tree.

FENCING_CITUS_CACHE=${FENCING_CITUS_CACHE:-/var/cache/fencing/citus}

# The PostgreSQL majors a Citus major supports (Citus' configure checks
# the same).
fencing_citus_supports() {
    local citus_major=$1 pg=$2
    case $citus_major in
    12) [[ " 14 15 16 " == *" $pg "* ]] ;;
    13) [[ " 15 16 17 " == *" $pg "* ]] ;;
    14) [[ " 16 17 18 " == *" $pg "* ]] ;;
    *) return 1 ;;
    esac
}

fencing_citus_pick() {
    local src f v best='' bestv='' files=()
    for src in "$@"; do
        if [ -d "$src" ]; then
            files+=("$src"/citus-*.tar.gz)
        else
            files+=("$src")
        fi
    done
    for f in "${files[@]}"; do
        [ -f "$f" ] || continue
        v=$(basename "$f" | sed -n 's/^citus-\([0-9][0-9.]*[0-9]\)\.tar\.gz$/\1/p')
        [ -n "$v" ] || continue
        fencing_citus_supports "${v%%.*}" "$FENCING_PGVER" || continue
        if [ -z "$best" ] || [ "$(printf '%s\n%s\n' "$bestv" "$v" | sort -V | tail -1)" = "$v" ]; then
            best=$f
            bestv=$v
        fi
    done
    [ -n "$best" ] && echo "$best"
}

# The build dependencies, from Debian.
fencing_citus_deps() {
    local pkgs=(libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev
                libselinux1-dev libxslt1-dev libicu-dev zlib1g-dev libreadline-dev
                flex bison util-linux)
    local missing=() p
    for p in "${pkgs[@]}"; do
        [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] \
            || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    fencing_log "installing the build dependencies of Citus: ${missing[*]}"
    fencing_apt_install "${missing[@]}"
}

# Citus 13.2.2 declares in pg_version_compat.h, for PostgreSQL 15, a static
# have_createdb_privilege(), which PostgreSQL 15.20 now exports from
# commands/dbcommands.h: "static declaration follows non-static
# declaration".  Rename Citus' copy with a #define placed just before it
# (the calls after it follow the rename); no other change to the source.
fencing_citus_compat_fix() {
    local compat=$1/src/include/pg_version_compat.h
    local server_inc
    server_inc=$("$FENCING_SYS_BINDIR/pg_config" --includedir-server)
    [ -f "$compat" ] || return 0
    grep -q 'have_createdb_privilege' "$server_inc/commands/dbcommands.h" 2>/dev/null || return 0
    grep -q '^have_createdb_privilege(void)' "$compat" || return 0
    perl -0pi -e 's/(static inline bool\s*\nhave_createdb_privilege\(void\))/#define have_createdb_privilege citus_compat_have_createdb_privilege \/* fencing harness: PostgreSQL 15.20 exports its own *\/\n$1/' "$compat"
    grep -q 'citus_compat_have_createdb_privilege' "$compat" \
        || fencing_die "could not apply the have_createdb_privilege fix to $compat"
    fencing_log "Citus: renamed its static have_createdb_privilege() (the server exports one)"
}

fencing_citus_build() {
    local tarball=$1
    local version pgfull sum key dir tmp start secs
    version=$(basename "$tarball" | sed -n 's/^citus-\(.*\)\.tar\.gz$/\1/p')
    [ -n "$version" ] || fencing_die "not a Citus tarball: $tarball"
    pgfull=$("$FENCING_SYS_BINDIR/pg_config" --version | awk '{print $2}')
    sum=$(sha256sum "$tarball" | cut -c1-12)
    key=citus-$version-pg$pgfull-$sum
    dir=$FENCING_CITUS_CACHE/$key
    mkdir -p "$FENCING_CITUS_CACHE"
    if [ -f "$dir/BUILT" ]; then
        echo "$dir"
        return 0
    fi
    fencing_citus_deps
    (
        # one build per key at a time; the loser of a race finds it built
        flock 9
        if [ -f "$dir/BUILT" ]; then
            exit 0
        fi
        tmp=$(mktemp -d "$FENCING_CITUS_CACHE/.build-$key.XXXXXX")
        trap 'rm -rf "$tmp"' EXIT
        start=$(date +%s)
        fencing_log "building Citus $version for PostgreSQL $pgfull (cached in $dir)"
        mkdir "$tmp/src"
        tar -xzf "$tarball" -C "$tmp/src" --strip-components=1 \
            || fencing_die "cannot unpack $tarball"
        fencing_citus_compat_fix "$tmp/src"
        (
            cd "$tmp/src" &&
                ./configure PG_CONFIG="$FENCING_SYS_BINDIR/pg_config" >"$tmp/configure.log" 2>&1 &&
                make -j"$(nproc)" >"$tmp/make.log" 2>&1 &&
                make install DESTDIR="$tmp/stage" >"$tmp/install.log" 2>&1
        ) || {
            tail -n 40 "$tmp"/*.log >&2
            fencing_die "building Citus $version failed"
        }
        secs=$(($(date +%s) - start))
        rm -rf "$tmp/src"
        printf 'citus %s\npostgresql %s\ntarball %s\nsha256 %s\nbuild_seconds %s\n' \
            "$version" "$pgfull" "$(basename "$tarball")" "$(sha256sum "$tarball" | cut -d' ' -f1)" \
            "$secs" >"$tmp/BUILT"
        chmod -R a+rX "$tmp"
        rm -rf "$dir"
        mv -T "$tmp" "$dir" || fencing_die "cannot move the Citus build into $dir"
        trap - EXIT
        fencing_log "built Citus $version in ${secs}s"
    ) 9>"$FENCING_CITUS_CACHE/.lock-$key" >&2 || return 1
    [ -f "$dir/BUILT" ] || fencing_die "Citus build missing in $dir"
    echo "$dir"
}

fencing_citus_install() {
    local dir=$1 inst
    if [ "$FENCING_PGVER" = 18 ]; then
        # the cached PostgreSQL 18 build: installed under its prefix, which
        # the private copy mirrors (test/lib/pg18.sh)
        inst=${FENCING_BINDIR%/bin}
        [ -d "$dir/stage$FENCING_PG18_PREFIX" ] || fencing_die "no Citus files for $FENCING_PG18_PREFIX in $dir"
        cp -a "$dir/stage$FENCING_PG18_PREFIX/." "$inst/"
        chmod -R a+rX "$inst"
        return
    fi
    inst=${FENCING_BINDIR%/usr/lib/postgresql/*}
    [ -d "$inst/usr" ] || fencing_die "no private PostgreSQL copy at $inst"
    cp -a "$dir/stage/usr/." "$inst/usr/"
    chmod -R a+rX "$inst/usr"
}
