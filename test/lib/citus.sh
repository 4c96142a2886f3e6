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
# The server to build against: Debian's (PostgreSQL 15, laid out under
# /usr), or a PostgreSQL built from source into a prefix of its own (18, see
# test/lib/pg18.sh where the harness has it), whose pg_config is
# relocatable.  The build is installed into a staging directory and copied
# from there into the private copy, in either layout.
#
# Citus is not in Debian: its source comes as a `git archive` of a release
# tag (the vendor directory, see .ci/run).  A build takes minutes on this
# machine, so it is kept under /var/cache/fencing/citus/, keyed by the Citus
# version, the exact PostgreSQL version and the tarball's checksum, and made
# atomically: built in a temporary directory beside the cache entry, then
# renamed into place, under a lock so that two runs never build it twice.
# Only the installed files are kept, never the build tree.

FENCING_CITUS_CACHE=${FENCING_CITUS_CACHE:-/var/cache/fencing/citus}

# The pg_config of the server $FENCING_PGVER to build Citus against:
# Debian's, else the cached prefix of a server built from source, else the
# private copy's ($PG_CONFIG).
fencing_citus_pg_config() {
    local debian=/usr/lib/postgresql/$FENCING_PGVER/bin/pg_config
    if [ -x "$debian" ]; then
        echo "$debian"
    elif [ -n "${FENCING_PG18_PREFIX:-}" ] && [ "$FENCING_PGVER" = 18 ] && [ -x "$FENCING_PG18_PREFIX/bin/pg_config" ]; then
        echo "$FENCING_PG18_PREFIX/bin/pg_config"
    elif [ -n "${PG_CONFIG:-}" ] && [ -x "$PG_CONFIG" ]; then
        echo "$PG_CONFIG"
    else
        fencing_die "no pg_config for PostgreSQL $FENCING_PGVER to build Citus against"
    fi
}

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
    local src f v best= bestv= files=()
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
    local tree=$1 pgc=$2 compat=$1/src/include/pg_version_compat.h
    local server_inc
    server_inc=$("$pgc" --includedir-server)
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
    local version pgfull sum key dir tmp start secs pgc prefix stage_root
    version=$(basename "$tarball" | sed -n 's/^citus-\(.*\)\.tar\.gz$/\1/p')
    [ -n "$version" ] || fencing_die "not a Citus tarball: $tarball"
    pgc=$(fencing_citus_pg_config) || exit 1
    pgfull=$("$pgc" --version | awk '{print $2}')
    sum=$(sha256sum "$tarball" | cut -c1-12)
    prefix=$(cd "$("$pgc" --bindir)/.." && pwd)
    if [ "$prefix" = "/usr/lib/postgresql/$FENCING_PGVER" ]; then
        # Debian's layout: the staged files are under usr/
        stage_root=
        key=citus-$version-pg$pgfull-$sum
    else
        # a prefix of its own: the staged files are under it; the key says
        # which build of the server (its configure options)
        stage_root=$prefix
        key=citus-$version-pg$pgfull-$("$pgc" --configure | sha256sum | cut -c1-8)-$sum
    fi
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
        fencing_citus_compat_fix "$tmp/src" "$pgc"
        (
            cd "$tmp/src" &&
                ./configure PG_CONFIG="$pgc" >"$tmp/configure.log" 2>&1 &&
                make -j"$(nproc)" >"$tmp/make.log" 2>&1 &&
                make install DESTDIR="$tmp/stage" >"$tmp/install.log" 2>&1
        ) || {
            tail -n 40 "$tmp"/*.log >&2
            fencing_die "building Citus $version failed"
        }
        secs=$(($(date +%s) - start))
        rm -rf "$tmp/src"
        printf 'citus %s\npostgresql %s\ntarball %s\nsha256 %s\nbuild_seconds %s\nstage_root %s\n' \
            "$version" "$pgfull" "$(basename "$tarball")" "$(sha256sum "$tarball" | cut -d' ' -f1)" \
            "$secs" "$stage_root" >"$tmp/BUILT"
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
    local dir=$1 inst root
    root=$(sed -n 's/^stage_root //p' "$dir/BUILT")
    if [ -z "$root" ]; then
        # Debian's layout: the private copy has usr/ under its root
        inst=${FENCING_BINDIR%/usr/lib/postgresql/*}
        [ -d "$inst/usr" ] || fencing_die "no private PostgreSQL copy at $inst"
        cp -a "$dir/stage/usr/." "$inst/usr/"
        chmod -R a+rX "$inst/usr"
    else
        # a prefix of its own, copied: its bin/, lib/, share/
        inst=$(dirname "$FENCING_BINDIR")
        [ -d "$inst/lib" ] && [ -d "$dir/stage$root/lib" ] \
            || fencing_die "no private PostgreSQL copy at $inst, or no Citus build in $dir/stage$root"
        cp -a "$dir/stage$root/." "$inst/"
        chmod -R a+rX "$inst"
    fi
}
