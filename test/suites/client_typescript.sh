#!/usr/bin/env bash
# test/suites/client_typescript.sh: the TypeScript client library
# (clients/typescript, @fencing/client) against real servers.
#
# The package's dependencies come from its lock file (npm ci; the tree is
# cached by the lock file's hash under /var/cache/fencing), it is built
# with tsc (declarations included), and its tests run with node's test
# runner against the main cluster and against real etcd, a three-server
# ZooKeeper ensemble, Redis and PgBouncer in transaction pooling mode,
# started with test/lib/locksvc.sh.  Then the README's first example
# (examples/quickstart.ts, which the README must show verbatim) runs on an
# empty database, a small run of the benchmark, and the storm: 20 workers
# x 500 fenced writes with Redis locks of 300 ms and pauses past the TTL
# (on PostgreSQL 15 only, unless FENCING_TS_STORM_ALL=1).
#
# node --test prints TAP; its lines are numbered on after the suite's own.
#
# Run by test/check.sh (FENCING_SUITES=client_typescript).  Prints TAP.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/locksvc.sh
. "$FENCING_ROOT/test/lib/locksvc.sh"

SRC=$FENCING_ROOT/clients/typescript
CACHE=${FENCING_CLIENT_TS_CACHE:-/var/cache/fencing/client-ts}
PACKAGES=(etcd-server etcd-client zookeeper default-jre-headless redis-server redis-tools pgbouncer nodejs npm)

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $*"; }
check() {
    local what=$1; shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}
finish() {
    locksvc_stop_all
    echo "1..$n"
}
trap finish EXIT
trap 'exit 143' INT TERM
trap '' PIPE

# ---- packages -----------------------------------------------------------
if ! fencing_install_missing "${PACKAGES[@]}"; then
    not_ok "install the packages it needs: ${PACKAGES[*]}"
    exit 1
fi
ok "node $(node -v), npm $(npm -v), etcd, ZooKeeper, Redis, PgBouncer are installed"

# ---- the package: npm ci from the lock file, cached; tsc -----------------
locksvc_init
WORK=$LOCKSVC_DIR/client-ts
mkdir -p "$WORK"
cp -a "$SRC/package.json" "$SRC/package-lock.json" "$SRC"/tsconfig*.json "$SRC/README.md" \
    "$SRC/src" "$SRC/test" "$SRC/examples" "$SRC/bench" "$WORK/"
lock_sum=$( (node -v; cat "$SRC/package-lock.json") | sha256sum | cut -c1-16)
# $CACHE/<hash>/node_modules: a directory named node_modules, where the
# packages find each other once node has resolved the symbolic link
MODULES=$CACHE/$lock_sum/node_modules
mkdir -p "$CACHE"
(
    flock 9
    [ -f "$MODULES/.complete" ] && exit 0
    fencing_log "npm ci for clients/typescript into $MODULES"
    tmp=$CACHE/$lock_sum.tmp
    rm -rf "$tmp" "${CACHE:?}/${lock_sum:?}" && mkdir -p "$tmp" &&
        cp "$SRC/package.json" "$SRC/package-lock.json" "$tmp/" &&
        (cd "$tmp" && npm ci --no-audit --no-fund --loglevel=error --cache "$CACHE/npm") >&2 &&
        touch "$tmp/node_modules/.complete" && mv "$tmp" "$CACHE/$lock_sum"
) 9>"$CACHE/npm.lock"
if [ ! -f "$MODULES/.complete" ]; then
    not_ok "npm ci (clients/typescript/package-lock.json)"
    exit 1
fi
ln -s "$MODULES" "$WORK/node_modules"
ok "npm ci from clients/typescript/package-lock.json (node_modules $MODULES)"

if (cd "$WORK" && ./node_modules/.bin/tsc -p tsconfig.json && ./node_modules/.bin/tsc -p tsconfig.test.json) >"$WORK/tsc.log" 2>&1; then
    ok "tsc builds the library (with its .d.ts) and the tests, examples and benchmark"
else
    not_ok "tsc builds the library and the tests"
    sed 's/^/# /' "$WORK/tsc.log"
    exit 1
fi
check "the package's entry points and declarations are where package.json says" \
    node -e '
        const p = require(process.argv[1] + "/package.json"), fs = require("fs");
        for (const [k, v] of Object.entries(p.exports)) {
            if (typeof v === "string") continue;
            for (const f of [v.types, v.default])
                if (!fs.existsSync(process.argv[1] + "/" + f)) throw new Error(k + ": " + f + " missing");
        }
        if (p.name !== "@fencing/client" || p.version !== "1.3.0") throw new Error("name or version");
        require(process.argv[1] + "/dist/index.js").runFenced || process.exit(1);' "$WORK"

# ---- the servers ----------------------------------------------------------
DB=client_ts
PSQL=(env PGOPTIONS='-c client_min_messages=warning' "$FENCING_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1
      -h 127.0.0.1 -p "$PGPORT" -U postgres)
"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" \
    -c "DROP DATABASE IF EXISTS ${DB}_quickstart" -c "CREATE DATABASE ${DB}_quickstart"
"${PSQL[@]}" -d "$DB" <<'SQL'
CREATE EXTENSION fencing;
CREATE TABLE fencing_lock_generations (service text PRIMARY KEY, generation int NOT NULL);
INSERT INTO fencing_lock_generations VALUES ('etcd', 0), ('zookeeper', 0), ('redis', 0);
SQL

t_svc=$SECONDS
if locksvc_etcd_start && locksvc_redis_start && locksvc_pgbouncer_start "$DB" && locksvc_zk_start; then
    ok "etcd, Redis, PgBouncer (transaction pooling, one server connection) and a three-server ZooKeeper ensemble are up ($((SECONDS - t_svc)) s)"
else
    not_ok "start etcd, Redis, PgBouncer and ZooKeeper"
    exit 1
fi

export PGHOST=127.0.0.1 PGPORT PGUSER=postgres PGDATABASE=$DB
export FENCING_TS_ETCD=$LOCKSVC_ETCD FENCING_TS_ZK=$LOCKSVC_ZK
export FENCING_TS_REDIS_PORT=$LOCKSVC_REDIS_PORT FENCING_TS_PGBOUNCER_PORT=$LOCKSVC_PGBOUNCER_PORT

# node --test in a process group of its own (stopped at exit with the
# workers it started, frozen or not); its TAP renumbered after ours, the
# YAML blocks of passing tests left out, failing ones kept.
node_tests() {
    local log=$WORK/node-test-$1.log st; shift
    local conc=()
    [ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] && conc=(--test-concurrency="${NODE_TEST_CONCURRENCY:-4}")
    (cd "$WORK" && exec setsid node --test --test-reporter=tap "${conc[@]}" "$@" >"$log" 2>&1) &
    local pid=$!
    locksvc_track node-test "$pid"
    wait "$pid"
    st=$?
    awk -v off="$n" '
        /^TAP version/ || /^1\.\.[0-9]+$/ || /^# Subtest:/ { next }
        yaml == 1 && /^  ---$/ { yaml = 2; next }
        yaml == 2 { if ($0 ~ /^  \.\.\.$/) yaml = 0; next }
        { yaml = 0 }
        /^ok [0-9]+ / { sub(/^ok [0-9]+/, "ok " ($2 + off)); print; yaml = 1; next }
        /^not ok [0-9]+ / { sub(/^not ok [0-9]+/, "not ok " ($3 + off)); print; next }
        /^# (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) / { print "# node --test: " substr($0, 3); next }
        { print }' "$log"
    n=$((n + $(grep -cE '^(not )?ok [0-9]+ ' "$log")))
    if [ "$st" -ne 0 ] && ! grep -qE '^not ok [0-9]+ ' "$log"; then
        not_ok "node --test $* exited $st without a failing test"
        tail -20 "$log" | sed 's/^/# /'
    fi
}

tests=()
for f in "$WORK"/build/test/*.test.js; do
    case $f in */storm.test.js) ;; *) tests+=("build/test/${f##*/}") ;; esac
done
node_tests main "${tests[@]}"

# ---- the README's first example, verbatim, on an empty database ------------
readme_example=$(awk '/^```(ts|typescript)$/ { if (!done) { on = 1; next } } on && /^```$/ { on = 0; done = 1 } on { print }' "$SRC/README.md")
check "the README's first example is examples/quickstart.ts, verbatim" \
    test "$readme_example" = "$(cat "$SRC/examples/quickstart.ts")"
qs1=$(cd "$WORK" && PGDATABASE=${DB}_quickstart node build/examples/quickstart.js 2>&1)
qs2=$(cd "$WORK" && PGDATABASE=${DB}_quickstart node build/examples/quickstart.js 2>&1)
fencing_diag_prefix "quickstart, first run:  " <<<"$qs1"
fencing_diag_prefix "quickstart, second run: " <<<"$qs2"
t1=$(sed -n 's/^invoice inv-1 paid with token \([0-9]*:[0-9]*\)$/\1/p' <<<"$qs1")
t2=$(sed -n 's/^invoice inv-1 paid with token \([0-9]*:[0-9]*\)$/\1/p' <<<"$qs2")
row=$("${PSQL[@]}" -d "${DB}_quickstart" -c "SELECT status || ' ' || fence::text FROM invoices WHERE id = 'inv-1'" 2>&1)
check "the quickstart runs as written on an empty database, twice: a new lease token each time ($t1, then $t2), the row paid with the second" \
    test -n "$t1" -a -n "$t2" -a "$t1" != "$t2" -a "$row" = "paid $t2"

# ---- the benchmark, a short run (numbers only: see bench/bench.ts) -----------
if out=$(cd "$WORK" && FENCING_TS_BENCH_N=300 node build/bench/bench.js 2>&1); then
    fencing_diag <<<"$out"
    ok "the benchmark runs (runFenced against the same transaction by hand, interleaved)"
else
    not_ok "the benchmark runs"
    fencing_diag <<<"$out" | tail -20
fi

# ---- the storm ----------------------------------------------------------------
# On PostgreSQL 15 only (about 25 s; the fenced path is the same C code on
# 18, where the rest of the suite runs), unless FENCING_TS_STORM_ALL=1.
if [ "$FENCING_PGVER" = 15 ] || [ -n "${FENCING_TS_STORM_ALL:-}" ]; then
    node_tests storm build/test/storm.test.js
else
    echo "# the storm runs on PostgreSQL 15 only, to keep the suite short (FENCING_TS_STORM_ALL=1 runs it here too)"
fi

# ---- nothing left behind ------------------------------------------------------
locksvc_stop_all
"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" \
    -c "DROP DATABASE IF EXISTS ${DB}_quickstart WITH (FORCE)"
left=$(locksvc_leftovers)
check "every server and worker of the run has stopped${left:+: $left}" test -z "$left"
