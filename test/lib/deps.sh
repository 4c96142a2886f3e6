# shellcheck shell=bash
# test/lib/deps.sh: what the harness installs and downloads, and the one
# step of a run that does it (sourced by common.sh; changes nothing until
# called).
#
#   fencing_suite_packages SUITE  the Debian packages SUITE needs on
#                                 $FENCING_PGVER (SUITE "base": every pass;
#                                 "demo": the demo's exporter), one a line
#   fencing_need SUITE            they are installed: the missing ones are
#                                 installed (root) when the suite runs on
#                                 its own; inside test/check.sh, which
#                                 installed them before any suite started,
#                                 a missing one fails instead
#   fencing_prepare VERSIONS -- SUITES   that first step of test/check.sh:
#                                 every package the suites need on those
#                                 versions, in one apt run, and the Debian
#                                 source packages they build from
#                                 (fencing_source), downloaded; then it
#                                 exports FENCING_PREPARED: nothing of the
#                                 system changes after it
#   fencing_source PKG            the .orig tarball of Debian source
#                                 package PKG, downloaded (into
#                                 $FENCING_CACHE/sources) if need be
#   fencing_system_state          what a run must not change once prepared:
#                                 the harness's packages and apt's sources
#
# Suites that change the system never run while another suite changes it:
# after fencing_prepare the only change is the package suite's own
# package, installed and purged.  Every package a suite needs is named
# here, and nowhere else; a suite calls `fencing_need NAME`.  The source
# packages come through a deb-src entry of the harness's own, read by an
# apt told to use it and lists of its own, in $FENCING_CACHE/apt (Debian 12,
# and unstable for PostgreSQL 18 and pgTAP 1.3): the system's apt
# configuration is never changed.

fencing_suite_packages() {
    local v=$FENCING_PGVER
    local services=(etcd-server etcd-client zookeeper default-jre-headless redis-server redis-tools pgbouncer)
    case $1 in
    base)
        printf '%s\n' make gcc libc6-dev libtap-parser-sourcehandler-pgtap-perl libipc-run-perl \
            redis-server redis-tools procps util-linux python3 postgresql-15
        if [ "$v" = 15 ]; then
            printf '%s\n' postgresql-server-dev-15 postgresql-15-pgtap
        elif [ -n "${fencing_all_packages:-}" ] || ! fencing_pg18_cached; then
            # PostgreSQL 18's build (test/lib/pg18.sh)
            printf '%s\n' bison flex libreadline-dev zlib1g-dev libssl-dev libicu-dev pkg-config perl
        fi ;;
    memory) [ "$v" = 15 ] && echo valgrind ;;
    citus)
        # Citus' build, unless it is cached (test/lib/citus.sh)
        if [ -n "${fencing_all_packages:-}" ] || fencing_citus_needs_build; then
            printf '%s\n' libcurl4-openssl-dev liblz4-dev libzstd-dev libkrb5-dev libssl-dev \
                libselinux1-dev libxslt1-dev libicu-dev zlib1g-dev libreadline-dev flex bison
        fi ;;
    pg_upgrade) [ "$v" = 18 ] && FENCING_PGVER=15 fencing_suite_packages base ;;
    package)
        # the build's tools; postgresql-server-dev-all at the version of the
        # installed postgresql-common, so that nothing of it is upgraded
        if [ "$v" = 15 ]; then
            printf '%s\n' debhelper lintian pgxnclient
            local common
            common=$(dpkg-query -W -f='${Version}' postgresql-common 2>/dev/null)
            if [ -n "$common" ] && apt-cache madison postgresql-server-dev-all 2>/dev/null | grep -qF "| $common |"; then
                echo "postgresql-server-dev-all=$common"
            else
                echo postgresql-server-dev-all
            fi
        fi ;;
    release) echo shellcheck ;;
    monitoring) printf '%s\n' prometheus-postgres-exporter prometheus ;;
    demo) printf '%s\n' prometheus-postgres-exporter curl ;;
    locksvc)
        printf '%s\n' "${services[@]}" python3-kazoo python3-psycopg golang-go golang-etcd-server-dev \
            golang-github-jackc-pgx-v4-dev libpostgresql-jdbc-java default-jdk-headless nodejs npm ;;
    client_python) printf '%s\n' "${services[@]}" python3-venv ;;
    # python3-kazoo, python3-psycopg: the ZooKeeper interop tests' reference
    # holder (test/locksvc/clients/worker.py, the docs' kazoo recipe)
    client_go) printf '%s\n' "${services[@]}" python3-kazoo python3-psycopg ;;
    client_typescript) printf '%s\n' "${services[@]}" nodejs npm ;;
    client_java) printf '%s\n' "${services[@]}" openjdk-17-jdk-headless maven python3-kazoo python3-psycopg ;;
    managed)
        # pg_tle's build (test/lib/pgtle.sh): its client authentication hook
        # includes libpq-be.h, which includes gssapi.h on servers built
        # with GSSAPI (Debian's 15)
        printf '%s\n' libkrb5-dev libssl-dev make gcc ;;
    examples)
        # and pg_tle's build, as for managed: the managed edition's pages
        printf '%s\n' "${services[@]}" python3-psycopg python3-redis python3-etcd3 python3-kazoo golang-go \
            golang-github-jackc-pgx-v4-dev libpostgresql-jdbc-java default-jdk-headless nodejs npm \
            libkrb5-dev libssl-dev make gcc ;;
    esac
    return 0
}

# Is package $1 (NAME or NAME=VERSION) installed (node and npm: on the PATH)?
fencing_installed() {
    case $1 in
    nodejs) command -v node >/dev/null && return 0 ;;
    npm) command -v npm >/dev/null && return 0 ;;
    esac
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "${1%%=*}" 2>/dev/null | tr -d ' ')" = ii ]
}

fencing_need() {
    local pkgs
    mapfile -t pkgs < <(fencing_suite_packages "$1")
    fencing_install_missing "${pkgs[@]}"
}

# Install the missing ones; false when that fails.  Inside test/check.sh
# (FENCING_PREPARED), nothing is installed: a missing package fails.
fencing_install_missing() {
    local missing=() p
    for p in "$@"; do
        fencing_installed "$p" || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ -n "${FENCING_PREPARED:-}" ]; then
        printf 'error: %s\n' "not installed: ${missing[*]}: test/check.sh installs every package before the first suite starts, and only those that fencing_suite_packages (test/lib/deps.sh) names" >&2
        return 1
    fi
    fencing_log "installing: ${missing[*]}"
    fencing_apt_install "${missing[@]}"
}

# apt-get install, as root: one apt run of the harness at a time (a lock on
# $FENCING_CACHE/apt.lock, which test/check.sh holds shared while its suites
# run), each waiting for another's dpkg lock rather than failing.
fencing_apt_install() {
    [ $# -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || fencing_die "missing packages ($*); run as root to install them"
    mkdir -p "$FENCING_CACHE"
    fencing_with_lock "$FENCING_CACHE/apt.lock" fencing_apt_install_locked "$@"
}
fencing_apt_install_locked() {
    local made='' st
    export DEBIAN_FRONTEND=noninteractive
    fencing_apt_update >/dev/null || return 1
    # the server package must not start a system cluster we do not use
    [ -e /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d; made=1; }
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "$@" >/dev/null
    st=$?
    [ -n "$made" ] && rm -f /usr/sbin/policy-rc.d
    [ $st -eq 0 ] && printf '%s %s\n' "$(date -u +%FT%TZ)" "$*" >>"$FENCING_CACHE/apt-installed"
    return $st
}

# apt-get update [apt options]: waits up to 15 minutes for another apt
# run's lists lock, which apt's lock timeouts do not cover.
fencing_apt_update() {
    local out
    for _ in $(seq 1 180); do
        out=$(apt-get -o DPkg::Lock::Timeout=900 -o APT::Lock::Timeout=900 "$@" update -qq 2>&1) && return 0
        case $out in *"Could not get lock"*|*"Unable to lock"*) sleep 5 ;; *) break ;; esac
    done
    printf '%s\n' "$out" >&2
    return 1
}

# The newest downloaded .orig tarball of source package $1, or nothing.
fencing_source_cached() {
    compgen -G "$FENCING_CACHE/sources/$1_*.orig.tar.*" | sort -V | tail -1
}

fencing_source() {
    [ -n "$(fencing_source_cached "$1")" ] || [ -n "${FENCING_PREPARED:-}" ] ||
        fencing_with_lock "$FENCING_CACHE/apt.lock" fencing_download_sources "$1" >&2
    fencing_source_cached "$1"
}

# Download the .orig tarballs of source packages $@ into
# $FENCING_CACHE/sources (under the apt lock), with an apt of the harness's
# own: its deb-src entry and the lists it fetches live in $FENCING_CACHE/apt,
# nothing of the system's apt configuration or lists changes.  Debian 12's
# suites for postgresql-15, unstable for the others (PostgreSQL 18, pgTAP 1.3).
fencing_download_sources() {
    local dir=$FENCING_CACHE/apt dl st=0 p f suites='' apt
    [ "$(id -u)" -eq 0 ] || fencing_die "need root to download the source packages $*"
    for p in "$@"; do
        case $p in
        postgresql-15) suites="$suites bookworm bookworm-updates" ;;
        *) suites="$suites unstable" ;;
        esac
    done
    suites=$(tr ' ' '\n' <<<"$suites" | awk 'NF && !seen[$0]++' | tr '\n' ' ')
    mkdir -p "$FENCING_CACHE/sources" "$dir/lists/partial"
    printf '%s\n' "# The fencing test harness's deb-src entry (test/lib/deps.sh): the source" \
        "# packages of PostgreSQL and pgTAP; apt reads it only when told to." \
        "Types: deb-src" "URIs: http://deb.debian.org/debian" "Suites: ${suites% }" \
        "Components: main" "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg" >"$dir/fencing.sources"
    apt=(-o Dir::Etc::sourcelist="$dir/fencing.sources" -o Dir::Etc::sourceparts=- -o Dir::State::lists="$dir/lists")
    fencing_log "downloading the source packages $* (apt-get source; Debian's ${suites% } source indexes)"
    dl=$(mktemp -d "$FENCING_CACHE/.src.XXXXXX") && chmod 777 "$dl"
    if fencing_apt_update "${apt[@]}" >/dev/null; then
        for p in "$@"; do
            (cd "$dl" && apt-get "${apt[@]}" source --download-only --tar-only -qq "$p") >"$dl/apt.log" 2>&1
            f=$(compgen -G "$dl/${p}_*.orig.tar.*" | sort -V | tail -1)
            if [ -n "$f" ]; then
                mv "$f" "$FENCING_CACHE/sources/"
            else
                cat "$dl/apt.log" >&2
                fencing_log "apt-get source $p gave no .orig tarball"
                st=1
            fi
        done
    else
        st=1
    fi
    rm -rf "$dl"
    return $st
}

# What the Citus suite builds on $FENCING_PGVER: is a build missing?
fencing_citus_needs_build() {
    local t
    [ -n "${FENCING_CITUS_SRC:-}" ] || return 1
    # shellcheck disable=SC2086
    t=$(fencing_citus_pick $FENCING_CITUS_SRC) || return 1
    [ -z "$(compgen -G "$FENCING_CITUS_CACHE/$(basename "$t" .tar.gz)-pg$FENCING_PGVER.*-$(sha256sum "$t" | cut -c1-12)/stage")" ]
}

# The first step of test/check.sh: see the head of this file.
fencing_prepare() {
    local versions=() suites=() pkgs=() srcs=() v s
    while [ $# -gt 0 ] && [ "$1" != -- ]; do versions+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    suites=("$@")
    [ -n "${FENCING_PREPARED:-}" ] && return 0
    for v in "${versions[@]}"; do
        for s in base "${suites[@]}"; do
            mapfile -t -O "${#pkgs[@]}" pkgs < <(FENCING_PGVER=$v fencing_suite_packages "$s")
        done
        [[ " ${suites[*]} " == *" pg_isolation "* ]] && [ -z "$(compgen -G "$FENCING_CACHE/postgresql-$v-isolation-*")" ] &&
            { [ "$v" = 15 ] || [ -z "${FENCING_PG18_SRC:-}" ]; } && srcs+=("postgresql-$v")
        if [ "$v" = 18 ]; then
            fencing_pg18_cached || [ -n "${FENCING_PG18_SRC:-}" ] || srcs+=(postgresql-18)
            fencing_pgtap_cached || srcs+=(pgtap)
        fi
    done
    mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]}" | awk 'NF && !seen[$0]++')
    mapfile -t srcs < <(for s in "${srcs[@]}"; do [ -n "$(fencing_source_cached "$s")" ] || echo "$s"; done | awk '!seen[$0]++')
    fencing_install_missing "${pkgs[@]}" || fencing_die "apt-get install failed"
    if [ ${#srcs[@]} -gt 0 ]; then
        fencing_with_lock "$FENCING_CACHE/apt.lock" fencing_download_sources "${srcs[@]}" ||
            fencing_die "could not download the source packages ${srcs[*]}"
    fi
    FENCING_PREPARED=1
    export FENCING_PREPARED
}

# The harness's packages and apt's sources, one a line: what no suite may
# change while the suites run (test/check.sh compares it before and after).
fencing_system_state() {
    local v s pkgs=() fencing_all_packages=1
    for v in $FENCING_PGVERSIONS; do
        for s in base $(cd "$FENCING_ROOT/test/suites" && printf '%s\n' *.sh | sed 's/\.sh$//'); do
            mapfile -t -O "${#pkgs[@]}" pkgs < <(FENCING_PGVER=$v fencing_suite_packages "$s")
        done
    done
    mapfile -t pkgs < <(printf '%s\n' "${pkgs[@]%%=*}" | grep -vxE 'nodejs|npm' | awk 'NF && !seen[$0]++')
    dpkg-query -W -f='${binary:Package} ${Version} ${db:Status-Abbrev}\n' "${pkgs[@]}" 2>/dev/null | sort
    find /etc/apt -type f \( -path '*/sources.list*' -o -path '*/preferences*' -o -path '*/trusted.gpg*' \) \
        -exec sha256sum {} + 2>/dev/null | sort -k2
}
