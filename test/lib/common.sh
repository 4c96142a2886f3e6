# shellcheck shell=bash
# test/lib/common.sh: shared set-up for the demo, the test suite and the
# benchmarks.  Source it from bash; it defines functions and changes nothing
# until they are called.
#
#   fencing_set_pgver N          choose the server: 15 (Debian's packages)
#                                or 18 (built from source, test/lib/pg18.sh)
#   fencing_install_missing PKG...  install those of the packages that are
#                                missing (apt, as root); false on failure
#   fencing_deps                 install what is missing (apt, as root), and
#                                build PostgreSQL 18 once when it is chosen
#   fencing_build [CFLAGS] [DIR] build, and install into a private copy of the
#                                PostgreSQL installation ($FENCING_WORK/DIR,
#                                default install)
#   fencing_pg_copy DIR          a private copy of the chosen server's
#                                installation in DIR; prints its bindir
#   fencing_make_install SRC INST [CFLAGS]
#                                build the extension in directory SRC and
#                                install it into the copy INST
#   fencing_cluster_start NAME [conf lines...]
#                                initdb + start a throwaway cluster as the
#                                postgres OS user; sets PGHOST, PGPORT, PGDATA
#   fencing_cleanup              stop every cluster started, remove the work dir
#   fencing_diag                 print stdin as TAP diagnostics: "# line"
#   fencing_diag_prefix PREFIX   ... as "# PREFIXline"
#   fencing_regress KIND OUTDIR [make VAR=value...]
#                                the regression tests of KIND (regress or
#                                isolation) through `make installcheck`, as
#                                the postgres OS user, against the server at
#                                PGHOST/PGPORT; prints TAP
#
# The private installation is how "make check" works in PostgreSQL itself:
# the system's PostgreSQL is copied, the extension installed into the copy,
# so tests never touch (or depend on) what is installed system-wide.

set -o pipefail

FENCING_ROOT=${FENCING_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FENCING_PGVER=${FENCING_PGVER:-15}
# shellcheck disable=SC2034  # read by check.sh, which sources this file
FENCING_PGVERSIONS="15 18"      # the servers every suite runs on
FENCING_CLUSTERS=()
. "$(dirname "${BASH_SOURCE[0]}")/pg18.sh"

# The bindir of the chosen server's own installation (not the private
# copy): Debian's for 15, the cached build for 18 (known once
# fencing_pg18_install has run, in this process or the one that started it).
fencing_sys_bindir() {
    case $FENCING_PGVER in
    18) FENCING_SYS_BINDIR=${FENCING_PG18_PREFIX:+$FENCING_PG18_PREFIX/bin} ;;
    *) FENCING_SYS_BINDIR=/usr/lib/postgresql/$FENCING_PGVER/bin ;;
    esac
    export FENCING_SYS_BINDIR
}
fencing_sys_bindir

fencing_log() { printf '==> %s\n' "$*" >&2; }
fencing_diag_prefix() {
    local line
    while IFS= read -r line || [ -n "$line" ]; do printf '# %s%s\n' "$1" "$line"; done
}
fencing_diag() { fencing_diag_prefix ""; }
fencing_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Choose the server version the following calls use.
fencing_set_pgver() {
    case $1 in
    15|18) FENCING_PGVER=$1 ;;
    *) fencing_die "PostgreSQL $1 is not supported by the harness (15 or 18)" ;;
    esac
    export FENCING_PGVER
    fencing_sys_bindir
}

# Packages the project needs; installed only when missing.  PostgreSQL 15
# is Debian's; 18 is built from source once and cached (test/lib/pg18.sh).
fencing_deps() {
    local pkgs=(make gcc libc6-dev
                libtap-parser-sourcehandler-pgtap-perl libipc-run-perl
                redis-server redis-tools procps util-linux python3)
    case $FENCING_PGVER in
    15) pkgs+=(postgresql-15 postgresql-server-dev-15 postgresql-15-pgtap) ;;
    esac
    fencing_install_missing "${pkgs[@]}" || fencing_die "apt-get install failed"
    [ "$FENCING_PGVER" = 18 ] && fencing_pg18_install
    return 0
}

# Install those of the given packages that are missing (apt, as root);
# nodejs and npm count as there when node and npm are on the PATH (they
# may come from elsewhere than Debian).  False when the install fails.
fencing_install_missing() {
    local missing=() p
    for p in "$@"; do
        case $p in
        nodejs) command -v node >/dev/null && continue ;;
        npm) command -v npm >/dev/null && continue ;;
        esac
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
            || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    fencing_log "installing: ${missing[*]}"
    fencing_apt_install "${missing[@]}"
}

# apt-get install the given packages (as root), waiting for the dpkg lock
# rather than failing when another apt run holds it.
fencing_apt_install() {
    [ $# -eq 0 ] && return 0
    [ "$(id -u)" -eq 0 ] || fencing_die "missing packages ($*); run as root to install them"
    export DEBIAN_FRONTEND=noninteractive
    local apt=(apt-get -o DPkg::Lock::Timeout=900 -o APT::Lock::Timeout=900)
    fencing_apt_update >/dev/null
    # the server package must not start a system cluster we do not use
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        local _rc_made=1
    fi
    "${apt[@]}" install -y -qq --no-install-recommends "$@" >/dev/null
    local st=$?
    [ -n "${_rc_made:-}" ] && rm -f /usr/sbin/policy-rc.d
    return $st
}

# apt-get update (with the given apt options), waiting up to 15 minutes
# while another apt run holds the lists lock, which apt's lock timeouts do
# not cover: on a shared machine a concurrent apt-get update is no failure.
fencing_apt_update() {
    local out
    for _ in $(seq 1 180); do
        out=$(apt-get -o DPkg::Lock::Timeout=900 -o APT::Lock::Timeout=900 "$@" update -qq 2>&1) && return 0
        case $out in
        *"Could not get lock"*|*"Unable to lock"*) sleep 5 ;;
        *) break ;;
        esac
    done
    printf '%s\n' "$out" >&2
    return 1
}

# A world-readable scratch directory for this run (the repository may live
# where the postgres OS user cannot read).
fencing_workdir() {
    if [ -z "${FENCING_WORK:-}" ]; then
        FENCING_WORK=$(mktemp -d /tmp/fencing.XXXXXX)
        chmod 755 "$FENCING_WORK"
        export FENCING_WORK
    fi
}

# A private copy of the installation of PostgreSQL $FENCING_PGVER in
# directory $1 (replaced); prints its bindir.  15: Debian's files, laid out
# as on the system under $1 (the extension is installed with DESTDIR=$1);
# 18: the cached prefix with pgTAP, copied to $1 (its pg_config is
# relocatable, so PGXS installs into the copy).
fencing_pg_copy() {
    local inst=$1
    rm -rf "$inst"
    case $FENCING_PGVER in
    15)
        mkdir -p "$inst/usr/lib/postgresql" "$inst/usr/share/postgresql"
        cp -a "/usr/lib/postgresql/15" "$inst/usr/lib/postgresql/"
        cp -a "/usr/share/postgresql/15" "$inst/usr/share/postgresql/"
        echo "$inst/usr/lib/postgresql/15/bin"
        ;;
    18)
        [ -n "${FENCING_PG18_PREFIX:-}" ] || fencing_pg18_install
        cp -a "$FENCING_PG18_PREFIX" "$inst"
        cp -a "$FENCING_PG18_PGTAP/." "$inst/"
        echo "$inst/bin"
        ;;
    esac
}

# Build the extension from source directory $1 (a checkout of any version)
# with extra CFLAGS $3 and install it into the copy $2 made by
# fencing_pg_copy; the build log goes to $FENCING_WORK/build.log.  The
# build happens in a copy of $1 of its own, so that builds for two servers
# can run at once and no object is left in $1.
fencing_make_install() {
    local srcdir=$1 inst=$2 cflags=${3:-} log b
    fencing_workdir
    log=$FENCING_WORK/build.log
    b=$(mktemp -d "$FENCING_WORK/build.XXXXXX")
    tar -C "$srcdir" --exclude=.git --exclude=node_modules --exclude=tmp_check -cf - . | tar -C "$b" -xf -
    local mk=(make -C "$b" -s)
    case $FENCING_PGVER in
    15) mk+=(PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config) ;;
    18) mk+=(PG_CONFIG="$inst/bin/pg_config") ;;
    esac
    { "${mk[@]}" clean >/dev/null 2>&1 && "${mk[@]}" PG_CFLAGS="$cflags" >"$log" 2>&1; } \
        || { cat "$log" >&2; fencing_die "build failed (PostgreSQL $FENCING_PGVER)"; }
    case $FENCING_PGVER in
    15) "${mk[@]}" install DESTDIR="$inst" >>"$log" 2>&1 ;;
    18) "${mk[@]}" install >>"$log" 2>&1 ;;
    esac || { cat "$log" >&2; fencing_die "install failed (PostgreSQL $FENCING_PGVER)"; }
    rm -rf "$b"
    chmod -R a+rX "$inst"
}

# Build with the given extra CFLAGS and install into a private copy of the
# PostgreSQL installation ($FENCING_WORK/${2:-install}; a second directory
# keeps a differently built copy, for example with AddressSanitizer).  Sets
# FENCING_BINDIR and PG_CONFIG.
fencing_build() {
    local cflags=${1:-}
    fencing_workdir
    local inst=$FENCING_WORK/${2:-install}
    fencing_log "building fencing for PostgreSQL $FENCING_PGVER${cflags:+ with $cflags}"
    FENCING_BINDIR=$(fencing_pg_copy "$inst") || fencing_die "no PostgreSQL $FENCING_PGVER installation"
    fencing_make_install "$FENCING_ROOT" "$inst" "$cflags"
    PG_CONFIG=$FENCING_BINDIR/pg_config
    export FENCING_BINDIR PG_CONFIG
}

# The benchmark's no-op C trigger (test/bench/floor, the floor of a row
# guard), built and installed into the copy $FENCING_WORK/${1:-install}
# that fencing_build made.
fencing_build_bench_floor() {
    fencing_make_install "$(cd "$(dirname "${BASH_SOURCE[0]}")/../bench/floor" && pwd)" \
        "$FENCING_WORK/${1:-install}" ""
}

# Run a command as the postgres OS user (initdb refuses root), keeping the
# environment that the tests need.
fencing_as_postgres() {
    if [ "$(id -un)" = postgres ]; then
        "$@"
    else
        runuser -u postgres -- env PATH="$FENCING_BINDIR:$PATH" \
            PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER="${PGUSER:-postgres}" \
            PGDATABASE="${PGDATABASE:-postgres}" FENCING_WORK="$FENCING_WORK" \
            FENCING_BINDIR="$FENCING_BINDIR" "$@"
    fi
}

# A TCP port on 127.0.0.1 that nothing listens on, below the kernel's
# ephemeral range (where client sockets could already hold it).
fencing_free_port() {
    local p lo=32768 range
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    range=10000-$((lo - 1))
    # FENCING_PORTS=LO-HI: only ports of that range (a shared host)
    if [ -n "${FENCING_PORTS:-}" ]; then
        { [[ $FENCING_PORTS =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]; } ||
            fencing_die "FENCING_PORTS must be LO-HI, for example 25000-25099 (it is \"$FENCING_PORTS\")"
        range=$FENCING_PORTS
    fi
    for p in $(shuf -i "$range" -n 50); do
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return 0
        fi
    done
    fencing_die "no free port found"
}

# initdb and start a cluster; extra arguments are postgresql.conf lines.
# FENCING_START_ENV (VAR=value words) is the environment of the postmaster.
fencing_cluster_start() {
    local name=$1; shift
    fencing_workdir
    local dir=$FENCING_WORK/$name
    mkdir -p "$dir"
    chown postgres: "$dir"
    PGPORT=$(fencing_free_port)
    PGHOST=$dir
    PGDATA=$dir/data
    export PGHOST PGPORT PGDATA
    fencing_as_postgres "$FENCING_BINDIR/initdb" -D "$PGDATA" -A trust -U postgres \
        --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; fencing_die "initdb failed"; }
    {
        echo "listen_addresses = '127.0.0.1'"
        echo "port = $PGPORT"
        echo "unix_socket_directories = '$dir'"
        echo "fsync = off"
        echo "max_connections = 60"
        echo "max_prepared_transactions = 10"
        echo "log_line_prefix = '%m [%p] %a '"
        local line
        for line in "$@"; do echo "$line"; done
    } >>"$PGDATA/postgresql.conf"
    # FENCING_START_ENV: VAR=value words for the postmaster (LD_PRELOAD, ...)
    local start_env
    read -r -a start_env <<<"${FENCING_START_ENV:-}"
    fencing_as_postgres env "${start_env[@]}" "$FENCING_BINDIR/pg_ctl" -D "$PGDATA" -l "$dir/server.log" -w start \
        >/dev/null || { cat "$dir/server.log" >&2; fencing_die "server failed to start"; }
    FENCING_CLUSTERS+=("$PGDATA")
}

fencing_cluster_stop() {
    fencing_as_postgres "$FENCING_BINDIR/pg_ctl" -D "${1:-$PGDATA}" -m fast -w stop >/dev/null 2>&1 || true
}

fencing_cleanup() {
    local d
    for d in "${FENCING_CLUSTERS[@]}"; do
        [ -f "$d/postmaster.pid" ] && fencing_cluster_stop "$d"
    done
    FENCING_CLUSTERS=()
    if [ -n "${FENCING_WORK:-}" ] && [ -z "${FENCING_KEEP:-}" ]; then
        rm -rf "$FENCING_WORK"
    fi
}

# The one way the harness runs pg_regress: the tree's own PGXS target,
# `make installcheck`, in the copy $FENCING_SRC (readable by the postgres OS
# user), as the postgres OS user, against the server at PGHOST/PGPORT
# (which must preload fencing: the target checks).  KIND is regress (the
# Makefile's REGRESS) or isolation (its ISOLATION); OUTDIR receives
# pg_regress's results and diffs, and OUTDIR.log what make printed.
# Further arguments are make variables (CONTRIB_TESTDB=db,
# EXTRA_REGRESS_OPTS=--use-existing, REGRESS="a b" for a subset).
# Prints TAP: one line per test, in order, whatever the server version's
# pg_regress prints (15: "test NAME ... ok", 16 and later: TAP of its own),
# then the diffs as diagnostics; a pg_regress that fails without a failing
# test is a failing line of its own.  No plan line: the caller counts, or
# prints it.  Returns non-zero when anything failed or nothing ran.
fencing_regress() {
    local kind=$1 out=$2 st n bad a extra vars=()
    extra="--outputdir=$out"
    shift 2
    for a in "$@"; do
        case $a in
        EXTRA_REGRESS_OPTS=*) extra="$extra ${a#*=}" ;;
        *) vars+=("$a") ;;
        esac
    done
    case $kind in
    regress) vars=(ISOLATION= "${vars[@]}") ;;
    isolation) vars=(REGRESS= "${vars[@]}") ;;
    *) fencing_die "fencing_regress: unknown kind $kind (regress or isolation)" ;;
    esac
    rm -rf "$out" && mkdir -p "$out" && chown postgres: "$out"
    fencing_as_postgres make -C "$FENCING_SRC" --no-print-directory installcheck \
        PG_CONFIG="$PG_CONFIG" EXTRA_REGRESS_OPTS="$extra" "${vars[@]}" >"$out.log" 2>&1
    st=$?
    sed -nE -e 's/^(test)? +([^ ]+) +\.\.\. +ok( .*)?$/ok - \2/p' \
        -e 's/^(test)? +([^ ]+) +\.\.\. +(FAILED|failed|ignored).*$/not ok - \2/p' \
        -e 's/^ok [0-9]+ +- +([^ ]+).*$/ok - \1/p' \
        -e 's/^not ok [0-9]+ +- +([^ ]+).*$/not ok - \1/p' "$out.log" \
        | awk '{ sub(/ - /, " " NR " - '"$kind"'/"); print }' >"$out/tests.tap"
    n=$(wc -l <"$out/tests.tap")
    bad=$(grep -c '^not ok' "$out/tests.tap")
    cat "$out/tests.tap"
    if [ "$st" -ne 0 ] && [ "$bad" -eq 0 ]; then
        n=$((n + 1))
        echo "not ok $n - $kind: make installcheck exited $st without a failing test (see $out.log)"
        sed 's/^/# /' "$out.log" | tail -20
    fi
    [ -f "$out/regression.diffs" ] && head -200 "$out/regression.diffs" | sed 's/^/# /'
    [ "$st" -eq 0 ] && [ "$bad" -eq 0 ] && [ "$n" -gt 0 ]
}

# TAP for suites written in shell: tap_ok COND DESCRIPTION prints "ok N -
# ..." (COND 0, true or t) or "not ok N - ...", tap_diag TEXT... prints
# diagnostics ("# ..."), tap_done the plan "1..N".
tap_n=0
tap_failed=0
tap_ok() {
    tap_n=$((tap_n + 1))
    if [ "$1" = 0 ] || [ "$1" = true ] || [ "$1" = t ]; then
        echo "ok $tap_n - $2"
    else
        echo "not ok $tap_n - $2"
        tap_failed=$((tap_failed + 1))
    fi
}
tap_diag() { printf '%s\n' "$@" | sed 's/^/# /'; }
tap_done() { echo "1..$tap_n"; }
