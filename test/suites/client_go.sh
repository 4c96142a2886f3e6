#!/usr/bin/env bash
# test/suites/client_go.sh: the Go client library (clients/go) against the
# main cluster and real lock services.
#
# Starts etcd, a three-server ZooKeeper ensemble, Redis and PgBouncer (in
# transaction mode) with test/lib/locksvc.sh, builds the library offline
# with Debian's Go packages (clients/go/go.sh: GOPATH mode), and runs:
#   - `go vet` and `go test -v` in clients/go, every test strict (a
#     service not given fails the test instead of skipping it); each
#     top-level test is one TAP line.  The tests start fencing-worker
#     processes and freeze them with SIGSTOP past their lock's TTL.
#   - the storms (TestStormLease, TestStormRedis: 20 workers x 500 fenced
#     writes each, with pauses past a 300 ms lease or Redis lock) on
#     PostgreSQL 15 only, to keep the run short; their summary lines are
#     printed as TAP comments.
#   - the README's first example, which must be examples/quickstart/main.go
#     as it is, run twice as written in a database of its own.
#   - the benchmark (cmd/bench), its numbers as TAP comments.
# Then no process of the run may be left.
#
# Run by test/check.sh (FENCING_SUITES=client_go).  Prints TAP.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/locksvc.sh
. "$FENCING_ROOT/test/lib/locksvc.sh"

GODIR=$FENCING_ROOT/clients/go
GO_PACKAGES=(golang-go golang-github-jackc-pgx-v4-dev golang-etcd-server-dev
             golang-github-gomodule-redigo-dev golang-github-samuel-go-zookeeper-dev
             etcd-server etcd-client zookeeper default-jre-headless
             redis-server redis-tools pgbouncer)

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $*"; }
psql_main() { "$FENCING_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres "$@"; }
finish() {
    locksvc_stop_all
    psql_main -d postgres -c "DROP DATABASE IF EXISTS client_go WITH (FORCE)" \
        -c "DROP DATABASE IF EXISTS client_go_quickstart WITH (FORCE)" >/dev/null 2>&1
    echo "1..$n"
}
trap finish EXIT
trap 'exit 143' INT TERM

if ! fencing_install_missing "${GO_PACKAGES[@]}"; then
    not_ok "install the packages it needs: ${GO_PACKAGES[*]}"
    exit 1
fi
ok "$(go version | cut -d' ' -f3) with pgx $(dpkg-query -W -f='${Version}' golang-github-jackc-pgx-v4-dev), etcd $(dpkg-query -W -f='${Version}' golang-etcd-server-dev), redigo, go-zookeeper, from Debian"

# The run's directory (as locksvc_init, under a name of its own).
LOCKSVC_DIR=$FENCING_WORK/client_go
rm -rf "$LOCKSVC_DIR"
mkdir -p "$LOCKSVC_DIR"
chmod 755 "$LOCKSVC_DIR"
: >"$LOCKSVC_DIR/pgids"
LOCKSVC_T0=$EPOCHREALTIME

# The build: offline, GOPATH mode; the build cache is kept between runs.
export FENCING_GO_GOPATH=$LOCKSVC_DIR/gopath
export FENCING_GO_CACHE=${FENCING_GO_CACHE:-/var/cache/fencing/client-go/gocache}
mkdir -p "$FENCING_GO_CACHE"
BIN=$LOCKSVC_DIR/bin
t=$SECONDS
if "$GODIR/go.sh" build -o "$BIN/" ./cmd/... ./examples/... >"$LOCKSVC_DIR/build.log" 2>&1 &&
    "$GODIR/go.sh" vet ./... >>"$LOCKSVC_DIR/build.log" 2>&1 &&
    "$GODIR/go.sh" test -c -o "$BIN/fencing.test" . >>"$LOCKSVC_DIR/build.log" 2>&1; then
    ok "clients/go builds offline (clients/go/go.sh: GOPATH mode, Debian's packages) and go vet is clean ($((SECONDS - t)) s)"
else
    sed 's/^/# /' "$LOCKSVC_DIR/build.log"
    not_ok "clients/go builds offline and go vet is clean"
    exit 1
fi

# The databases, on the main cluster (dropped at the end).
psql_main -d postgres -c "DROP DATABASE IF EXISTS client_go" -c "CREATE DATABASE client_go" \
    -c "DROP DATABASE IF EXISTS client_go_quickstart" -c "CREATE DATABASE client_go_quickstart" 2>/dev/null ||
    { not_ok "create the databases"; exit 1; }

if locksvc_etcd_start && locksvc_zk_start && locksvc_redis_start && locksvc_pgbouncer_start client_go; then
    ok "etcd at $LOCKSVC_ETCD, ZooKeeper at $LOCKSVC_ZK, Redis on $LOCKSVC_REDIS_PORT, PgBouncer on $LOCKSVC_PGBOUNCER_PORT"
else
    not_ok "start etcd, ZooKeeper, Redis and PgBouncer"
    exit 1
fi

export PGHOST=127.0.0.1 PGUSER=postgres PGDATABASE=client_go
export FENCING_ETCD=$LOCKSVC_ETCD FENCING_ZK=$LOCKSVC_ZK FENCING_REDIS=127.0.0.1:$LOCKSVC_REDIS_PORT
export FENCING_PGBOUNCER="host=127.0.0.1 port=$LOCKSVC_PGBOUNCER_PORT dbname=client_go user=postgres"
export FENCING_WORKER_BIN=$BIN/fencing-worker FENCING_GO_STRICT=1
storm=0
if [ "${FENCING_PGVER:-15}" = 15 ]; then
    export FENCING_GO_STORM=1
    storm=1
else
    echo "# the storms (TestStormLease, TestStormRedis) run on PostgreSQL 15 only; here they show as skipped"
fi

# go test -v, one TAP line per top-level test.
t=$SECONDS
(cd "$LOCKSVC_DIR" && "$BIN/fencing.test" -test.v -test.count=1 -test.timeout=170s) >"$LOCKSVC_DIR/test.log" 2>&1
rc=$?
tests=0
# shellcheck disable=SC2094  # test.log is only read, by the loop and inside it
while IFS= read -r line; do
    if [[ $line =~ ^---\ (PASS|FAIL|SKIP):\ (Test[A-Za-z0-9_]+)\ \(([0-9.]+)s\) ]]; then
        tests=$((tests + 1))
        name=${BASH_REMATCH[2]} secs=${BASH_REMATCH[3]}
        case ${BASH_REMATCH[1]} in
        PASS) ok "$name (${secs}s)" ;;
        FAIL)
            # its output, as comments
            awk -v t="$name" '$0 == "=== RUN   " t { p = 1; next } /^=== RUN/ && p { exit } p' \
                "$LOCKSVC_DIR/test.log" | tail -n 40 | sed 's/^/# /'
            not_ok "$name (${secs}s)" ;;
        SKIP)
            if [[ $name == TestStorm* ]] && [ "$storm" = 0 ]; then
                ok "$name # SKIP the storm runs on PostgreSQL 15 only"
            else
                # nothing may skip here: every service is given
                grep -A2 "^=== RUN   $name\$" "$LOCKSVC_DIR/test.log" | sed 's/^/# /'
                not_ok "$name was skipped"
            fi ;;
        esac
    fi
done <"$LOCKSVC_DIR/test.log"
grep '^STORM: ' "$LOCKSVC_DIR/test.log" | sed 's/^/# /'
if [ "$rc" -eq 0 ] && [ "$tests" -gt 0 ]; then
    ok "go test: $tests tests, exit 0 ($((SECONDS - t)) s)"
else
    tail -n 30 "$LOCKSVC_DIR/test.log" | sed 's/^/# /'
    not_ok "go test: $tests tests, exit $rc ($((SECONDS - t)) s)"
fi

# The README's first example is the quickstart, and runs as written.
awk '/^```go$/ { p = 1; next } /^```$/ && p { exit } p' "$GODIR/README.md" >"$LOCKSVC_DIR/readme-first.go"
if diff -u "$GODIR/examples/quickstart/main.go" "$LOCKSVC_DIR/readme-first.go" >"$LOCKSVC_DIR/readme.diff"; then
    ok "the README's first example is examples/quickstart/main.go"
else
    sed 's/^/# /' "$LOCKSVC_DIR/readme.diff"
    not_ok "the README's first example is examples/quickstart/main.go"
fi
q1=$(cd "$LOCKSVC_DIR" && PGDATABASE=client_go_quickstart "$BIN/quickstart" 2>&1)
q2=$(cd "$LOCKSVC_DIR" && PGDATABASE=client_go_quickstart "$BIN/quickstart" 2>&1)
bal=$(psql_main -d client_go_quickstart -c "SELECT balance || ' ' || fence FROM accounts WHERE id = 'alice'" 2>&1)
echo "# quickstart, first run: $q1"
echo "# quickstart, second run: $q2"
echo "# alice: $bal"
t1=${q1#written with token } t2=${q2#written with token }
if [[ $q1 == "written with token "* && $q2 == "written with token "* && $bal == "80 $t2" && $t1 != "$t2" ]]; then
    ok "the quickstart runs as written, twice (tables created if missing, a new lease token each time)"
else
    not_ok "the quickstart runs as written, twice"
fi

# The benchmark: the library against the same by hand.
if out=$(cd "$LOCKSVC_DIR" && "$BIN/bench" -n 1500 2>&1); then
    fencing_diag <<<"$out"
    ok "bench: a fenced transaction through the library and by hand, interleaved"
else
    fencing_diag <<<"$out"
    not_ok "bench"
fi

locksvc_stop_all
left=$(locksvc_leftovers)
if [ -z "$left" ]; then
    ok "no process of the run is left"
else
    fencing_diag <<<"$left"
    not_ok "no process of the run is left"
fi
