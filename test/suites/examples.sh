#!/usr/bin/env bash
# test/suites/examples.sh: every example of README.md and docs/*.md, run
# as written.
#
# test/examples/run.py extracts every fenced code block of the pages and
# runs it verbatim: the SQL of a page block by block with psql in a fresh
# database of its own, shell blocks with bash, Python with Debian's
# python3 (psycopg, redis, etcd3, kazoo), the Go, Java and node-postgres
# programs built and run; then the whole page again in the same database,
# where every block must do again what it did the first time.  A block
# that fails on purpose says so in the page (<!-- example: expect SF001
# -->), one that cannot run here says why (<!-- example: skip ... -->);
# each skip is printed as a TAP comment and counted.  The blocks that use
# Redis, etcd or ZooKeeper get them from test/lib/locksvc.sh, on free
# ports (REDIS_URL, ETCDCTL_ENDPOINTS, ETCD_HOST/ETCD_PORT, ZK_HOSTS).
#
# Uses the main cluster (PGHOST, PGPORT).  Run by test/check.sh
# (FENCING_SUITES=examples); prints TAP.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/locksvc.sh
. "$FENCING_ROOT/test/lib/locksvc.sh"

PY=/usr/bin/python3
n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $*"; }
finish() {
    locksvc_stop_all
    # the harness keeps the number of its last TAP line (it may have died)
    [ -s "${count_file:-}" ] && n=$(cat "$count_file")
    echo "1..$n"
}
trap finish EXIT
trap 'exit 143' INT TERM

# what the examples use beyond the locksvc suite's packages
EXAMPLES_PACKAGES=(python3-redis python3-etcd3)
missing=()
for p in "${EXAMPLES_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ! { locksvc_install && { [ ${#missing[@]} -eq 0 ] || fencing_apt_install "${missing[@]}"; }; }; then
    not_ok "install Redis, etcd, ZooKeeper, psycopg, redis-py, etcd3, kazoo, Go with pgx, pgjdbc, node-postgres"
    exit 1
fi

# the services, on free ports of 127.0.0.1 (a run directory of our own)
FENCING_WORK=$FENCING_WORK/examples locksvc_init
t0=$SECONDS
locksvc_zk_configure
for i in $(seq 1 "$LOCKSVC_ZK_N"); do locksvc_zk_server_start "$i"; done
if locksvc_redis_start && locksvc_etcd_start && locksvc_zk_wait_quorum; then
    ok "Redis, etcd and a three-server ZooKeeper ensemble serve ($((SECONDS - t0)) s)"
else
    not_ok "Redis, etcd and a three-server ZooKeeper ensemble serve"
    exit 1
fi
export REDIS_URL=redis://127.0.0.1:$LOCKSVC_REDIS_PORT/0
export ETCDCTL_API=3 ETCDCTL_ENDPOINTS=$LOCKSVC_ETCD
export ETCD_HOST=127.0.0.1 ETCD_PORT=${LOCKSVC_ETCD##*:}
export ZK_HOSTS=$LOCKSVC_ZK
export NODE_PATH=$LOCKSVC_NODE_MODULES
# Go builds share the compiled packages (pgx) of the locksvc suite's builds
# shellcheck disable=SC2031  # the export in locksvc_build_go's subshell is its own
export GOCACHE=$LOCKSVC_CACHE/gocache
# the server's psql first, then Debian's python3 (with the packages above)
export PATH=$FENCING_BINDIR:/usr/bin:/bin:$PATH

count_file=$LOCKSVC_DIR/tap-count
echo "$n" >"$count_file"
$PY "$FENCING_ROOT/test/examples/run.py" --root "$FENCING_ROOT" \
    --work "$LOCKSVC_DIR/pages" --cache "$LOCKSVC_CACHE/examples" \
    --psql "$FENCING_BINDIR/psql" --first $((n + 1)) --count-file "$count_file"
st=$?
if [ "$st" -ne 0 ]; then    # a failed block says so in its line: this is the harness dying
    n=$(cat "$count_file")
    not_ok "test/examples/run.py ran to its end (it exited with $st)"
    echo "$n" >"$count_file"
fi
