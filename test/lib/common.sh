# shellcheck shell=bash
# test/lib/common.sh: shared set-up for the test suites, the demo and the
# benchmarks.  Sourcing it defines functions and changes nothing.
#
#   fencing_set_pgver N          the server: 15 (Debian's) or 18 (built from
#                                source once and cached, test/lib/pg18.sh)
#   fencing_deps                 what every pass needs: the packages
#                                (test/lib/deps.sh), PostgreSQL 18 built
#   fencing_build [CFLAGS] [DIR] build into a private copy of the server
#                                ($FENCING_WORK/DIR, default install); sets
#                                FENCING_BINDIR and PG_CONFIG
#   fencing_pg_copy DIR          that copy alone; prints its bindir
#   fencing_make_install SRC INST [CFLAGS]  build SRC, install into INST
#   fencing_as_postgres CMD...   run as the postgres OS user
#   fencing_cluster_start NAME [conf lines...]  initdb + start a throwaway
#                                cluster; sets PGHOST, PGPORT, PGDATA
#   fencing_cleanup              stop those clusters, remove the work dir
#   fencing_regress KIND OUTDIR [VAR=value...]  pg_regress as TAP
#   fencing_prove DIR TESTS [VAR=value...]  TAP tests another suite equips
#   fencing_diag, fencing_diag_prefix P  stdin as TAP diagnostics
#   tap_ok COND TEXT, tap_diag TEXT..., tap_done   TAP from shell
#
# A private copy of the installation is how `make check` works in
# PostgreSQL: tests never touch, or depend on, what is installed
# system-wide.

set -o pipefail

FENCING_ROOT=${FENCING_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
FENCING_PGVER=${FENCING_PGVER:-15}
# shellcheck disable=SC2034  # read by check.sh
FENCING_PGVERSIONS="15 18"
FENCING_CLUSTERS=()
. "$(dirname "${BASH_SOURCE[0]}")/pg18.sh"
# (not followed by shellcheck: it would take the suite of that name)
# shellcheck source=/dev/null
. "$(dirname "${BASH_SOURCE[0]}")/citus.sh"
. "$(dirname "${BASH_SOURCE[0]}")/deps.sh"

fencing_log() { printf '==> %s\n' "$*" >&2; }
fencing_diag_prefix() {
    local line
    while IFS= read -r line || [ -n "$line" ]; do printf '# %s%s\n' "$1" "$line"; done
}
fencing_diag() { fencing_diag_prefix ""; }
fencing_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# The chosen server's own bindir (not the private copy): Debian's for 15,
# the cached build for 18 once fencing_pg18_install has run.
fencing_set_pgver() {
    case $1 in
    15) FENCING_SYS_BINDIR=/usr/lib/postgresql/15/bin ;;
    18) FENCING_SYS_BINDIR=${FENCING_PG18_PREFIX:+$FENCING_PG18_PREFIX/bin} ;;
    *) fencing_die "PostgreSQL $1 is not supported by the harness (15 or 18)" ;;
    esac
    FENCING_PGVER=$1
    export FENCING_PGVER FENCING_SYS_BINDIR
}
fencing_set_pgver "$FENCING_PGVER"

fencing_deps() {
    fencing_need base || fencing_die "apt-get install failed"
    [ "$FENCING_PGVER" = 18 ] && fencing_pg18_install
    return 0
}

# A world-readable scratch directory (the repository may live where the
# postgres OS user cannot read).
fencing_workdir() {
    [ -n "${FENCING_WORK:-}" ] && return 0
    FENCING_WORK=$(mktemp -d /tmp/fencing.XXXXXX)
    chmod 755 "$FENCING_WORK"
    export FENCING_WORK
}

# 15: Debian's files laid out under DIR as on the system (the extension is
# installed with DESTDIR); 18: the cached prefix with pgTAP (its pg_config
# is relocatable).
fencing_pg_copy() {
    local inst=$1
    rm -rf "$inst"
    case $FENCING_PGVER in
    15) mkdir -p "$inst/usr/lib/postgresql" "$inst/usr/share/postgresql"
        cp -a /usr/lib/postgresql/15 "$inst/usr/lib/postgresql/"
        cp -a /usr/share/postgresql/15 "$inst/usr/share/postgresql/"
        # without fencing's files, which the package suite may have put
        # there meanwhile (its package, installed while it runs)
        rm -rf "$inst"/usr/lib/postgresql/15/lib/fencing.so "$inst"/usr/lib/postgresql/15/lib/bitcode/fencing* \
            "$inst"/usr/share/postgresql/15/extension/fencing[.-]*
        echo "$inst/usr/lib/postgresql/15/bin" ;;
    18) [ -n "${FENCING_PG18_PREFIX:-}" ] || fencing_pg18_install
        cp -a "$FENCING_PG18_PREFIX" "$inst"
        cp -a "$FENCING_PG18_PGTAP/." "$inst/"
        echo "$inst/bin" ;;
    esac
}

# The build happens in a copy of SRC of its own (builds for two servers
# can run at once; no object is left in SRC); log in $FENCING_WORK/build.log.
fencing_make_install() {
    local srcdir=$1 inst=$2 cflags=${3:-} log b
    fencing_workdir
    log=$FENCING_WORK/build.log
    b=$(mktemp -d "$FENCING_WORK/build.XXXXXX")
    tar -C "$srcdir" --exclude=.git --exclude=node_modules --exclude=tmp_check -cf - . | tar -C "$b" -xf -
    # 15: Debian's server has LLVM, and PGXS would compile every file again
    # into bitcode for the JIT's inlining: the package suite's build does
    # that (dpkg-buildpackage, then installed and used); these builds,
    # which only run tests, leave it out (with_llvm=no: half the compile)
    # (fencing_destdir: install under that directory instead, a stage)
    local mk=(make -C "$b" -s PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config with_llvm=no)
    local dest=(DESTDIR="${fencing_destdir:-$inst}")
    if [ "$FENCING_PGVER" = 18 ]; then
        mk=(make -C "$b" -s PG_CONFIG="$inst/bin/pg_config") dest=()
        [ -n "${fencing_destdir:-}" ] && dest=(DESTDIR="$fencing_destdir")
    fi
    { "${mk[@]}" clean >/dev/null 2>&1 && "${mk[@]}" PG_CFLAGS="$cflags" >"$log" 2>&1 &&
      "${mk[@]}" install "${dest[@]}" >>"$log" 2>&1; } \
        || { cat "$log" >&2; fencing_die "build failed (PostgreSQL $FENCING_PGVER)"; }
    rm -rf "$b"
    chmod -R a+rX "${fencing_destdir:-$inst}"
}

fencing_build() {
    local cflags=${1:-} inst
    fencing_workdir
    inst=$FENCING_WORK/${2:-install}
    fencing_log "building fencing for PostgreSQL $FENCING_PGVER${cflags:+ with $cflags}"
    FENCING_BINDIR=$(fencing_pg_copy "$inst") || fencing_die "no PostgreSQL $FENCING_PGVER installation"
    fencing_make_install "$FENCING_ROOT" "$inst" "$cflags"
    PG_CONFIG=$FENCING_BINDIR/pg_config
    export FENCING_BINDIR PG_CONFIG
}

# The benchmark's no-op C trigger (test/bench/floor), into the copy
# $FENCING_WORK/${1:-install} that fencing_build made.
fencing_build_bench_floor() {
    fencing_make_install "$FENCING_ROOT/test/bench/floor" "$FENCING_WORK/${1:-install}" ""
}

# The postgres OS user's HOME for the harness's programs, where the tools
# they run keep what they keep (Go's telemetry, npm's and Maven's caches):
# not the system's /var/lib/postgresql.
fencing_postgres_home() {
    [ -d "$FENCING_CACHE/home" ] && return 0
    mkdir -p "$FENCING_CACHE/home" && chown postgres: "$FENCING_CACHE/home" && chmod 755 "$FENCING_CACHE/home"
}

# initdb refuses root; keep the environment the tests need.
fencing_as_postgres() {
    if [ "$(id -un)" = postgres ]; then
        "$@"
    else
        fencing_postgres_home
        runuser -u postgres -- env -u XDG_CONFIG_HOME -u XDG_CACHE_HOME -u npm_config_cache \
            HOME="$FENCING_CACHE/home" PATH="$FENCING_BINDIR:$PATH" \
            PGHOST="${PGHOST:-}" PGPORT="${PGPORT:-}" PGUSER="${PGUSER:-postgres}" \
            PGDATABASE="${PGDATABASE:-postgres}" FENCING_WORK="$FENCING_WORK" \
            FENCING_BINDIR="$FENCING_BINDIR" "$@"
    fi
}

# A port of 127.0.0.1 nothing listens on, below the kernel's ephemeral
# range; FENCING_PORTS=LO-HI keeps to that range (a shared host).
fencing_free_port() {
    local p lo=32768 range
    read -r lo _ </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
    range=${FENCING_PORTS:-10000-$((lo - 1))}
    { [[ $range =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ]; } ||
        fencing_die "FENCING_PORTS must be LO-HI, for example 25000-25099 (it is \"$range\")"
    for p in $(shuf -i "$range" -n 50); do
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
    fencing_die "no free port found"
}

# Extra arguments are postgresql.conf lines; FENCING_START_ENV (VAR=value
# words) is the postmaster's environment (LD_PRELOAD, ...).
fencing_cluster_start() {
    local name=$1 dir line start_env; shift
    fencing_workdir
    dir=$FENCING_WORK/$name
    mkdir -p "$dir" && chown postgres: "$dir"
    PGPORT=$(fencing_free_port) PGHOST=$dir PGDATA=$dir/data
    export PGHOST PGPORT PGDATA
    fencing_as_postgres "$FENCING_BINDIR/initdb" -D "$PGDATA" -A trust -U postgres --no-sync \
        >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; fencing_die "initdb failed"; }
    { printf '%s\n' "listen_addresses = '127.0.0.1'" "port = $PGPORT" "unix_socket_directories = '$dir'" \
        "fsync = off" "max_connections = 60" "max_prepared_transactions = 10" "log_line_prefix = '%m [%p] %a '"
      for line in "$@"; do echo "$line"; done; } >>"$PGDATA/postgresql.conf"
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
    [ -n "${FENCING_WORK:-}" ] && [ -z "${FENCING_KEEP:-}" ] && rm -rf "$FENCING_WORK"
    return 0
}

# The one way the harness runs pg_regress: the tree's `make installcheck`,
# in the copy $FENCING_SRC, as the postgres OS user, against PGHOST/PGPORT
# (fencing preloaded).  KIND is regress (REGRESS) or isolation (ISOLATION);
# OUTDIR gets the results and diffs, OUTDIR.log what make printed; more
# arguments are make variables (REGRESS="a b", EXTRA_REGRESS_OPTS=...).
# Prints a TAP line per test, whatever the version's pg_regress prints (15:
# "test NAME ... ok", 16 on: TAP), then the diffs; a failure without a
# failing test fails once.  No plan.  False when anything failed or nothing ran.
fencing_regress() {
    local kind=$1 out=$2 st n bad a extra vars=()
    extra="--outputdir=$out"
    shift 2
    for a in "$@"; do
        case $a in EXTRA_REGRESS_OPTS=*) extra="$extra ${a#*=}" ;; *) vars+=("$a") ;; esac
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

# The TAP tests TESTS (a glob) that a suite equips, told where things are
# by the variables: `make prove_installcheck` as the postgres OS user in a
# copy DIR/src of the tree (its own tmp_check/; put what else the tests
# read into DIR/src first), without the main cluster's connection.  The
# suite built what they need, so a skip fails.  fencing_prove_jobs=N: N
# test files at a time (each has servers of its own).
fencing_prove() {
    local dir=$1 tests=$2 st skip
    shift 2
    mkdir -p "$dir/src" && chmod 755 "$dir"
    cp -a "$FENCING_SRC"/{Makefile,fencing.control,sql,expected,test,managed} "$dir/src/"
    chown -R postgres: "$dir"
    fencing_as_postgres env -u PGHOST -u PGPORT -u PGDATA -u PGDATABASE "$@" \
        make -C "$dir/src" --no-print-directory prove_installcheck \
        PG_CONFIG="$PG_CONFIG" PROVE_TESTS="$tests" PROVE_FLAGS="-v --timer -j${fencing_prove_jobs:-1}" 2>&1 \
        | tee "$dir/prove.log"
    st=${PIPESTATUS[0]}
    if skip=$(grep -m1 -o "skipped: .*" "$dir/prove.log"); then
        echo "not ok 1 - $tests ran with what this suite built or installed ($skip)"
        return 1
    fi
    return "$st"
}

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
