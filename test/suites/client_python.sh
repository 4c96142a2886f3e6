#!/usr/bin/env bash
# test/suites/client_python.sh: the Python client library (clients/python,
# package fencing_client) against the main cluster and real lock services.
#
# Starts etcd, a three-server ZooKeeper ensemble, Redis and PgBouncer
# (transaction pooling, one server connection) with test/lib/locksvc.sh,
# creates the database client_python in the main cluster, and runs the
# library's unittest suite (clients/python/tests, `python3 -m tests.tap`):
# one TAP line per test case.  The storm (20 worker processes x 500
# fenced writes with pauses past a 300 ms lease) prints its summary as a
# TAP comment.  Every wait is for a state (a lock taken, a lease no
# longer live), never a fixed sleep.
#
# Run by test/check.sh (FENCING_SUITES=client_python).  Prints TAP.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/locksvc.sh
. "$FENCING_ROOT/test/lib/locksvc.sh"

PY=/usr/bin/python3             # Debian's, with the packages below
CLIENT=$FENCING_ROOT/clients/python
DB=client_python
PACKAGES=(python3-psycopg python3-psycopg-pool python3-etcd3 python3-redis python3-kazoo
          etcd-server etcd-client zookeeper default-jre-headless redis-server redis-tools
          pgbouncer)

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $*"; }
finish() {
    locksvc_stop_all
    echo "1..$n"
}
trap finish EXIT
trap 'exit 143' INT TERM

if ! fencing_install_missing "${PACKAGES[@]}"; then
    not_ok "install the packages it needs: ${PACKAGES[*]}"
    exit 1
fi
if ! versions=$($PY -c 'import psycopg, psycopg_pool, etcd3, redis, kazoo
print(f"psycopg {psycopg.__version__}, psycopg_pool {psycopg_pool.__version__}, etcd3 {etcd3.__version__}, redis-py {redis.__version__}, kazoo")' 2>&1); then
    not_ok "the Python packages import: $versions"
    exit 1
fi
ok "Python $($PY -c 'import sys; print(sys.version.split()[0])'), $versions"

# the services, under a directory of this suite's own
mkdir -p "$FENCING_WORK/client-python"
FENCING_WORK=$FENCING_WORK/client-python locksvc_init
t0=$SECONDS
started=1
locksvc_etcd_start || started=0
locksvc_zk_start || started=0
locksvc_redis_start || started=0
psql_main() { PGOPTIONS="-c client_min_messages=warning" "$FENCING_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres "$@"; }
psql_main -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" &&
    psql_main -d "$DB" -c "CREATE EXTENSION fencing" || started=0
locksvc_pgbouncer_start "$DB" || started=0
if [ "$started" = 1 ]; then
    ok "etcd, ZooKeeper (3 servers), Redis and PgBouncer started ($((SECONDS - t0)) s)"
else
    not_ok "start etcd, ZooKeeper, Redis and PgBouncer"
    exit 1
fi

export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=$DB
export FENCING_TEST_REQUIRE=1
export FENCING_TEST_ETCD=${LOCKSVC_ETCD#http://}
export FENCING_TEST_ZK=$LOCKSVC_ZK
export FENCING_TEST_REDIS=127.0.0.1:$LOCKSVC_REDIS_PORT
export FENCING_TEST_PGBOUNCER=$LOCKSVC_PGBOUNCER_PORT
export PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=$CLIENT
# The storm (20 processes x 500 writes, about a minute on two cores) tests
# the client library, not the server: it runs on PostgreSQL 15 only, to
# keep CI's time.  FENCING_TEST_STORM=1 runs it on 18 too.
if [ "${FENCING_PGVER:-15}" != 15 ] && [ "${FENCING_TEST_STORM:-}" != 1 ]; then
    export FENCING_TEST_STORM=0
    echo "# the storm runs on PostgreSQL 15 only (it tests the client; FENCING_TEST_STORM=1 runs it here too)"
fi

# unittest's results, numbered here; a runner that dies is a failure too
t0=$SECONDS
out=$FENCING_WORK/client-python/tap.txt
(cd "$CLIENT" && timeout 600 $PY -m tests.tap) >"$out" 2>"$out.stderr"
st=$?
tests=0
while IFS= read -r line; do
    case $line in
    "ok - "*) tests=$((tests + 1)); ok "${line#ok - }" ;;
    "not ok - "*) tests=$((tests + 1)); not_ok "${line#not ok - }" ;;
    *) echo "$line" ;;
    esac
done <"$out"
echo "# the unittest suite: $tests test cases in $((SECONDS - t0)) s (exit $st)"
if [ "$st" -ne 0 ] && ! grep -q '^not ok' "$out"; then
    not_ok "python -m tests.tap exited $st without a failing test"
    sed 's/^/# /' "$out.stderr" | tail -20
fi
[ "$tests" -gt 0 ] || not_ok "the unittest suite ran no test"
left=$(pgrep -af -- "$CLIENT/tests/" | grep -v -e "^$$ " -e pgrep || true)
if [ -z "$left" ]; then
    ok "no worker process of the tests is left"
else
    not_ok "worker processes left: $left"
fi
