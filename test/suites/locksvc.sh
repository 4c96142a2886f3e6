#!/usr/bin/env bash
# test/suites/locksvc.sh: real lock services fencing PostgreSQL.
#
# etcd (one member), a three-server ZooKeeper ensemble and Redis, from
# Debian's packages, each on free ports of 127.0.0.1 (test/lib/locksvc.sh),
# and worker processes that take their locks as applications do
# (test/locksvc/clients: `etcdctl lock`, Go's concurrency.Mutex, kazoo's
# Lock, redis-cli SET NX PX + INCR) and write with the tokens the grants
# map to (docs/lock-services.md).  A worker is frozen with SIGSTOP past its
# lock's TTL while another takes the lock and writes; thawed, its writes
# must get SF001.  Then what lowers a lock service's numbers: an etcd
# snapshot restore, a ZooKeeper leader change and data loss, a Redis
# restart without persistence, each with the mapping right and wrong.
# Then the same grant in two transactions, PgBouncer in transaction
# pooling mode, and the client snippets of docs/lock-services.md run for
# real (psycopg 3, JDBC, Go pgx, node-postgres).
#
# Every step waits for a state the servers report (a lock key gone, a
# session's node deleted, a key's PTTL -2, a new leader), never for a
# fixed time.  Each scenario prints its timeline as TAP comments.
#
# FENCING_LOCKSVC_BREAK=guard runs every scenario with the guard off (no
# protect(), advance() left out): every scenario must then fail.
#
# Run by test/check.sh (FENCING_SUITES=locksvc).  Prints TAP.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/locksvc.sh
. "$FENCING_ROOT/test/lib/locksvc.sh"

PY=/usr/bin/python3             # Debian's, with kazoo and psycopg
CLIENTS=$FENCING_ROOT/test/locksvc/clients
SNIPPETS=$FENCING_ROOT/test/locksvc/snippets
BREAK=${FENCING_LOCKSVC_BREAK:-}
export FENCING_LOCKSVC_BREAK=$BREAK

n=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $*"; }
check() {
    local what=$1; shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}
# that: a test of several conditions, given as one string for eval
that() { eval "$1"; }
finish() {
    locksvc_stop_all
    [ -n "${PGDATA:-}" ] && fencing_cluster_stop "$PGDATA"
    echo "1..$n"
}
trap finish EXIT
trap 'exit 143' INT TERM
# a worker that died must not take the suite with it (a write to its FIFO)
trap '' PIPE

if ! locksvc_install; then
    not_ok "install etcd, ZooKeeper, kazoo, psycopg, Redis, PgBouncer, Go with pgx and etcd's client, pgjdbc, node-postgres"
    exit 1
fi
ok "etcd $(etcd --version | sed -n 's/^etcd Version: //p'), ZooKeeper $(dpkg-query -W -f='${Version}' zookeeper), $(redis-server --version | cut -d' ' -f1-3), PgBouncer $(dpkg-query -W -f='${Version}' pgbouncer), kazoo, psycopg $($PY -c 'import psycopg; print(psycopg.__version__)'), $(go version | cut -d' ' -f3) with pgx v4 and etcd's clientv3, pgjdbc, node-postgres are installed"

locksvc_init
fencing_cluster_start locksvc-pg "shared_preload_libraries = 'fencing'"
DB=locksvc
DSN="host=127.0.0.1 port=$PGPORT user=postgres dbname=$DB"
psql_db() { "$FENCING_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres -d "$DB" "$@"; }
"$FENCING_BINDIR/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -c "CREATE DATABASE $DB"
psql_db <<'SQL'
CREATE EXTENSION fencing;
-- each lock service's generation: raised after it lost its data (or
-- restored a snapshot), read by a worker when it takes the lock
CREATE TABLE lock_generations (service text PRIMARY KEY, generation integer NOT NULL);
INSERT INTO lock_generations VALUES ('etcd', 0), ('zookeeper', 0), ('redis', 0);
CREATE TABLE refunds (id text PRIMARY KEY, paid_by text, payouts int NOT NULL DEFAULT 0,
                      fence fencing.fence);
CREATE TABLE ledger (id bigserial PRIMARY KEY, account text NOT NULL, amount int NOT NULL,
                     written_by text, fence fencing.fence);
CREATE TABLE accounts (id text PRIMARY KEY, balance int NOT NULL, fence fencing.fence);
CREATE TABLE jobs (id text PRIMARY KEY, runs int NOT NULL DEFAULT 0, fence fencing.fence);
SQL
if [ "$BREAK" != guard ]; then
    psql_db -c "SELECT fencing.protect('refunds')" \
        -c "SELECT fencing.protect('ledger', key_columns => '{account}')" \
        -c "SELECT fencing.protect('jobs', strict => false)" >/dev/null
else
    echo "# FENCING_LOCKSVC_BREAK=guard: no table is protected, advance() is left out"
fi

# rows for a scenario's key
new_rows() {
    local k
    for k in "$@"; do
        psql_db -c "INSERT INTO refunds (id) VALUES ('$k')" -c "INSERT INTO accounts VALUES ('$k', 100, NULL)" \
            -c "INSERT INTO jobs (id) VALUES ('$k')"
    done
}

# The JSON of $REPLY ("word {json}") as shell variables J_<field>, and
# J_FACTS: the grant's facts for the timeline (one python for all).
jparse() {
    unset "${!J_@}"
    eval "$($PY -c 'import json, shlex, sys
d = json.loads(sys.argv[1].split(" ", 1)[1])
for k, v in d.items():
    print(f"J_{k}={shlex.quote(str(v))}")
facts = ", ".join(f"{k} {v}" for k, v in d.items() if k not in ("lock", "token", "session"))
print(f"J_FACTS={shlex.quote(facts)}")' "$REPLY")"
}
# a field of the JSON of $REPLY, as parsed by jparse
jf() { local v="J_$1"; echo "${!v:-}"; }

# Workers.  NAME is the worker's name in the timeline.
start_etcdctl() {   # NAME LOCK: etcdctl lock, token from ETCD_LOCK_REV
    locksvc_worker_start "$1" env ETCDCTL_API=3 etcdctl --endpoints="$LOCKSVC_ETCD" lock --ttl=2 "$2" -- \
        $PY "$CLIENTS/worker.py" etcdctl --who "$1" --dsn "$DSN" --run-dir "$LOCKSVC_DIR" \
        --commands "$LOCKSVC_DIR/worker-$1/in"
}
start_etcdmutex() { # NAME LOCK: Go concurrency.Mutex, token from the key's CreateRevision
    locksvc_worker_start "$1" "$LOCKSVC_GO_BIN/etcdmutex" -who "$1" -dsn "$DSN" -etcd "$LOCKSVC_ETCD" \
        -lock "$2" -ttl 2 -run-dir "$LOCKSVC_DIR"
}
start_zk() {        # NAME PATH: kazoo Lock, token from the node's czxid
    locksvc_worker_start "$1" $PY "$CLIENTS/worker.py" zookeeper --who "$1" --dsn "$DSN" \
        --zk "$LOCKSVC_ZK" --lock "$2" --session-timeout 2 --run-dir "$LOCKSVC_DIR"
}
start_redis() {     # NAME LOCKKEY COUNTERKEY: SET NX PX 2000, INCR
    locksvc_worker_start "$1" $PY "$CLIENTS/worker.py" redis --who "$1" --dsn "$DSN" \
        --redis-port "$LOCKSVC_REDIS_PORT" --lock "$2" --counter "$3" --ttl-ms 2000 --run-dir "$LOCKSVC_DIR"
}

# locked NAME HOW: wait for the worker's grant; prints it on the timeline
locked() {
    local name=$1 how=$2
    if ! locksvc_worker_read "$name" 120 || [[ $REPLY != locked* ]]; then
        locksvc_event "worker $name" "$how -> no lock: ${REPLY:-nothing}"
        return 1
    fi
    jparse
    locksvc_event "worker $name" "$how -> locked $(jf lock): $J_FACTS; token $(jf token)"
}

# write NAME KIND KEY [MAPPING]: one transaction; RESULT is ok or the
# SQLSTATE; the line goes on the timeline
write() {
    local name=$1 kind=$2 key=$3 mapping=${4:-}
    local what
    case $kind in
    refund) what="UPDATE refunds $key (row scope)" ;;
    ledger) what="INSERT ledger $key (key scope)" ;;
    advance) what="UPDATE accounts $key SET fence = advance(fence, token)" ;;
    job) what="UPDATE jobs $key (row scope, strict => false)" ;;
    esac
    locksvc_worker_send "$name" "write $kind $key $mapping"
    if ! locksvc_worker_read "$name" 60; then
        RESULT=none
        locksvc_event "worker $name" "$what -> no answer"
        return
    fi
    local token
    MESSAGE=
    HINT=
    jparse
    token=$(jf token)
    if [[ $REPLY == ok* ]]; then
        RESULT=ok
        locksvc_event "worker $name" "$what, token $token${mapping:+ ($mapping)} -> COMMIT"
    else
        RESULT=$(jf sqlstate)
        MESSAGE=$(jf message)
        HINT=$(jf hint)
        locksvc_event "worker $name" "$what, token $token${mapping:+ ($mapping)} -> ERROR $RESULT: $MESSAGE"
    fi
}

freeze() { locksvc_worker_freeze "$1"; locksvc_event "suite" "kill -STOP worker $1 (its process group): frozen, holding the lock as far as it knows"; }
thaw() { locksvc_worker_thaw "$1"; locksvc_event "suite" "kill -CONT worker $1: it carries on where it stopped"; }
stop_worker() { locksvc_worker_stop "$1"; }
# unlock NAME: give the lock back and end (etcdctl unlocks when its command ends)
unlock() {
    locksvc_worker_send "$1" unlock
    locksvc_worker_read "$1" 30 >/dev/null
    locksvc_event "worker $1" "unlock"
    stop_worker "$1"
}

# What a stale holder must never achieve: the rows show only the rightful
# holder's writes.
rows_of() {
    psql_db -c "SELECT coalesce(paid_by, '-') || ' ' || payouts || ' ' || coalesce(fence::text, '-') FROM refunds WHERE id = '$1'"
}
ledger_of() {
    psql_db -c "SELECT coalesce(string_agg(written_by, ',' ORDER BY id), '-') FROM ledger WHERE account = '$1'"
}
balance_of() { psql_db -c "SELECT balance FROM accounts WHERE id = '$1'"; }

# The pause past the TTL: A takes the lock and is frozen; once the lock
# service reports A's lock gone, B takes it and writes in row scope, key
# scope and through advance(); A thawed writes the same: SF001 three times.
#   pause_scenario SERVICE KEY START_A_CMD START_B_CMD GONE_CMD
pause_scenario() {
    local svc=$1 key=$2 start_a=$3 start_b=$4 gone=$5 how=$6
    echo "# --- $svc: the pause past the TTL ($key) ---"
    new_rows "$key"
    $start_a A
    locked A "$how" || { not_ok "$svc pause: A takes the lock"; stop_worker A; return; }
    freeze A
    local a_lock
    a_lock=$(jf lock)
    if locksvc_wait "$svc: A's lock gone" 60 "$gone" "$a_lock"; then
        locksvc_event "$svc" "A's lock $a_lock is gone: its TTL ran out while A is frozen"
    else
        not_ok "$svc pause: the lock service lets A's lock go while A is frozen"
    fi
    $start_b B
    if locked B "$how"; then
        local k r1 r2 r3
        write B refund "$key"; r1=$RESULT
        write B ledger "$key"; r2=$RESULT
        write B advance "$key"; r3=$RESULT
        check "$svc pause: the new holder B writes in row scope, key scope and through advance()" \
            [ "$r1/$r2/$r3" = ok/ok/ok ]
        unlock B
    else
        not_ok "$svc pause: B takes the lock once A's is gone"
    fi
    thaw A
    write A refund "$key"; r1=$RESULT
    write A ledger "$key"; r2=$RESULT
    write A advance "$key"; r3=$RESULT
    check "$svc pause: A, thawed, gets SF001 in row scope, key scope and from advance() ($r1/$r2/$r3)" \
        [ "$r1/$r2/$r3" = SF001/SF001/SF001 ]
    check "$svc pause: only B paid, booked and debited ($(rows_of "$key"); ledger $(ledger_of "$key"); balance $(balance_of "$key"))" \
        [ "$(rows_of "$key" | cut -d' ' -f1-2)/$(ledger_of "$key")/$(balance_of "$key")" = "B 1/B/75" ]
    stop_worker A
}

# ============================================================ etcd
locksvc_etcd_start || { not_ok "etcd starts"; exit 1; }
ok "etcd serves $LOCKSVC_ETCD (one member)"
ETCD_SNAPSHOT=$LOCKSVC_DIR/etcd/early.db
locksvc_etcdctl snapshot save "$ETCD_SNAPSHOT" >/dev/null 2>&1
ETCD_SNAPSHOT_REV=$(locksvc_etcd_revision)
check "an early snapshot of etcd is saved (revision $ETCD_SNAPSHOT_REV)" test -s "$ETCD_SNAPSHOT"

etcd_gone() { locksvc_etcd_key_gone "$1"; }
etcdctl_pause() { start_etcdctl "$1" refunds/etcd-pause; }
mutex_pause() { start_etcdmutex "$1" refunds/etcd-mutex-pause; }
pause_scenario "etcd (etcdctl lock, Header.Revision)" etcd-pause etcdctl_pause etcdctl_pause etcd_gone \
    "etcdctl lock --ttl=2 refunds/etcd-pause"
pause_scenario "etcd (Go concurrency.Mutex, CreateRevision)" etcd-mutex mutex_pause mutex_pause etcd_gone \
    "concurrency.Mutex(session TTL 2 s).Lock refunds/etcd-mutex-pause"

# One revision kind per fence.  C holds the lock; A (etcdctl lock: the
# grant's Header.Revision) and then B (concurrency.Mutex: its key's
# CreateRevision) queue behind it.  A's grant comes when C's key goes, so
# its header revision is above B's create revision: mixed on one fence,
# the rightful next holder B is refused.
echo "# --- etcd: two revision kinds on one fence (etcd-mixed) ---"
new_rows etcd-mixed
etcd_keys() { locksvc_etcdctl get --prefix --keys-only refunds/etcd-mixed | grep -c .; }
keys_are() { [ "$(etcd_keys)" = "$1" ]; }
start_etcdctl C refunds/etcd-mixed
locked C "etcdctl lock refunds/etcd-mixed"
start_etcdctl A refunds/etcd-mixed
locksvc_wait "A queued" 30 keys_are 2 && locksvc_event "etcd" "A's key is queued behind C's"
start_etcdmutex B refunds/etcd-mixed
locksvc_wait "B queued" 30 keys_are 3 && locksvc_event "etcd" "B's key is queued behind A's"
# B's key's create revision, read now: the revision its Lock() waits with
b_create=$(locksvc_etcdctl get --prefix refunds/etcd-mixed -w json | $PY -c 'import json, sys
kvs = json.load(sys.stdin)["kvs"]
print(max(kv["create_revision"] for kv in kvs))')
unlock C
locked A "etcdctl lock refunds/etcd-mixed (after C)"
a_header=$(jf revision)
a_create=$(locksvc_etcdctl get "$(jf lock)" -w json | $PY -c 'import json, sys; print(json.load(sys.stdin)["kvs"][0]["create_revision"])')
write A refund etcd-mixed
unlock A
locked B "concurrency.Mutex.Lock refunds/etcd-mixed (after A)"
b_header=$(jf header_revision)
write B refund etcd-mixed
check "etcd mixed: A's Header.Revision $a_header > B's CreateRevision $b_create although B's grant came after A's" \
    [ "$a_header" -gt "$b_create" ]
check "etcd mixed: the rightful next holder B, fenced with the other revision kind, is refused (SF001)" \
    [ "$RESULT" = SF001 ]
# shellcheck disable=SC2016  # that evaluates its quoted condition when called
check "etcd mixed: with one kind per fence B would win: create $b_create > $a_create, header $b_header > $a_header" \
    that '[ "$b_create" -gt "$a_create" ] && [ "$b_header" -gt "$a_header" ]'
stop_worker B

# A snapshot restore lowers revisions.  A writes and is frozen; etcd is
# restored from the early snapshot; B's revisions are below A's: with the
# same generation B is refused, after the generation is raised (and read
# at lock time) the new holder C writes and A, thawed, is refused.
echo "# --- etcd: a snapshot restore lowers revisions (etcd-restore) ---"
new_rows etcd-restore
for i in $(seq 1 20); do locksvc_etcdctl put locksvc/bump "$i" >/dev/null; done
start_etcdctl A refunds/etcd-restore
locked A "etcdctl lock refunds/etcd-restore"
a_rev=$(jf revision)
write A refund etcd-restore
freeze A
locksvc_etcd_restore "$ETCD_SNAPSHOT" && locksvc_event "etcd" "stopped, restored from the early snapshot (revision $ETCD_SNAPSHOT_REV), started: revision now $(locksvc_etcd_revision)"
start_etcdctl B refunds/etcd-restore
locked B "etcdctl lock refunds/etcd-restore"
b_rev=$(jf revision)
check "etcd restore: B's revision $b_rev is below A's $a_rev" [ "$b_rev" -lt "$a_rev" ]
write B refund etcd-restore
check "etcd restore, generation not raised: the rightful holder B is refused (SF001)" [ "$RESULT" = SF001 ]
unlock B
psql_db -c "UPDATE lock_generations SET generation = generation + 1 WHERE service = 'etcd'"
locksvc_event "operator" "UPDATE lock_generations SET generation = generation + 1 WHERE service = 'etcd' (now $(psql_db -c "SELECT generation FROM lock_generations WHERE service = 'etcd'"))"
start_etcdctl C refunds/etcd-restore
locked C "etcdctl lock refunds/etcd-restore"
write C refund etcd-restore
check "etcd restore, generation raised: the new holder C writes" [ "$RESULT" = ok ]
unlock C
thaw A
write A refund etcd-restore
check "etcd restore: A, thawed with the generation it read at lock time, gets SF001" [ "$RESULT" = SF001 ]
check "etcd restore: the row was written by A before the restore, then by C only ($(rows_of etcd-restore))" \
    [ "$(rows_of etcd-restore | cut -d' ' -f1-2)" = "C 2" ]
stop_worker A
locksvc_etcd_stop

# ============================================================ ZooKeeper
echo "# --- ZooKeeper: a three-server ensemble ---"
if locksvc_zk_start; then
    ok "ZooKeeper ensemble serves $LOCKSVC_ZK (leader: server $(locksvc_zk_leader))"
    zk_gone() { $PY "$CLIENTS/zk_tool.py" wait-gone "$LOCKSVC_ZK" "$1" 5; }
    zk_pause() { start_zk "$1" /locks/zk-pause; }
    pause_scenario ZooKeeper zk-pause zk_pause zk_pause zk_gone "kazoo Lock(/locks/zk-pause), session timeout 2 s"

    # A leader change: the zxid epoch goes up, its counter down.  A's
    # grant is late in an epoch (the counter raised first); the leader is
    # stopped; B's grant in the next epoch has a lower counter.  Mapped
    # with fence_from_zxid() B wins; mapped by the counter alone, the
    # rightful holder B is refused.
    echo "# --- ZooKeeper: leader change (zk-leader) ---"
    new_rows zk-leader zk-leader-counter
    $PY "$CLIENTS/zk_tool.py" bump "$LOCKSVC_ZK" 30
    start_zk A /locks/zk-leader
    locked A "kazoo Lock(/locks/zk-leader)"
    a_zxid=$(jf czxid)
    write A refund zk-leader
    write A refund zk-leader-counter counter
    freeze A
    leader=$(locksvc_zk_leader)
    locksvc_zk_server_stop "$leader"
    locksvc_event "zookeeper" "leader (server $leader) stopped"
    locksvc_zk_wait_quorum && locksvc_event "zookeeper" "server $(locksvc_zk_leader) leads now"
    start_zk B /locks/zk-leader
    locked B "kazoo Lock(/locks/zk-leader)"
    b_zxid=$(jf czxid)
    # shellcheck disable=SC2016  # that evaluates its quoted condition when called
    check "zk leader change: the epoch went up ($((a_zxid >> 32)) -> $((b_zxid >> 32))) and the counter down ($((a_zxid & 0xffffffff)) -> $((b_zxid & 0xffffffff)))" \
        that '[ $((b_zxid >> 32)) -gt $((a_zxid >> 32)) ] && [ $((b_zxid & 0xffffffff)) -lt $((a_zxid & 0xffffffff)) ]'
    write B refund zk-leader
    check "zk leader change: B, fenced with fence_from_zxid(czxid), writes" [ "$RESULT" = ok ]
    write B refund zk-leader-counter counter
    check "zk leader change: fenced by the zxid's counter alone, the rightful holder B is refused (SF001)" [ "$RESULT" = SF001 ]
    unlock B
    thaw A
    write A refund zk-leader
    check "zk leader change: A, thawed, gets SF001" [ "$RESULT" = SF001 ]
    stop_worker A
    locksvc_zk_server_start "$leader"   # back to three, while the next steps run

    # Data loss: every server's data gone, zxids start again in epoch 1.
    echo "# --- ZooKeeper: data loss (zk-loss) ---"
    new_rows zk-loss
    locksvc_zk_wait_quorum
    start_zk A /locks/zk-loss
    locked A "kazoo Lock(/locks/zk-loss)"
    a_zxid=$(jf czxid)
    write A refund zk-loss
    freeze A
    locksvc_zk_stop
    locksvc_zk_wipe
    locksvc_event "zookeeper" "all three servers stopped, their data removed (myid kept)"
    locksvc_zk_start && locksvc_event "zookeeper" "started empty: server $(locksvc_zk_leader) leads"
    start_zk B /locks/zk-loss
    locked B "kazoo Lock(/locks/zk-loss)"
    b_zxid=$(jf czxid)
    check "zk data loss: B's zxid $b_zxid is below A's $a_zxid" [ "$b_zxid" -lt "$a_zxid" ]
    write B refund zk-loss
    check "zk data loss, generation not raised: the rightful holder B is refused (SF001)" [ "$RESULT" = SF001 ]
    unlock B
    psql_db -c "UPDATE lock_generations SET generation = generation + 1 WHERE service = 'zookeeper'"
    locksvc_event "operator" "UPDATE lock_generations SET generation = generation + 1 WHERE service = 'zookeeper'"
    start_zk C /locks/zk-loss
    locked C "kazoo Lock(/locks/zk-loss)"
    write C refund zk-loss
    check "zk data loss, generation raised: the new holder C writes (fence_from_zxid(czxid, 1))" [ "$RESULT" = ok ]
    unlock C
    thaw A
    write A refund zk-loss
    check "zk data loss: A, thawed, gets SF001" [ "$RESULT" = SF001 ]
    stop_worker A
else
    not_ok "ZooKeeper ensemble of three starts"
fi
locksvc_zk_stop

# ============================================================ Redis
echo "# --- Redis ---"
if locksvc_redis_start; then
    ok "Redis serves port $LOCKSVC_REDIS_PORT (no persistence)"
    redis_gone() { [ "$(locksvc_redis_cli PTTL "$1")" = -2 ]; }
    redis_pause() { start_redis "$1" lock:redis-pause fence:redis-pause; }
    pause_scenario Redis redis-pause redis_pause redis_pause redis_gone "SET lock:redis-pause NX PX 2000; INCR fence:redis-pause"

    # A restart without persistence: the counter starts again.  The
    # generation is raised; B's token wins.  A, thawed, must use the
    # generation it read when it took the lock: read at write time it
    # would get the new one and its stale write would be accepted.
    echo "# --- Redis: restart without persistence (redis-restart) ---"
    new_rows redis-restart redis-restart-atwrite redis-restart-nogen
    for i in 1 2 3 4; do locksvc_redis_cli INCR fence:redis-restart >/dev/null; done
    start_redis A lock:redis-restart fence:redis-restart
    locked A "SET lock:redis-restart NX PX 2000; INCR fence:redis-restart"
    write A refund redis-restart
    write A refund redis-restart-atwrite
    write A refund redis-restart-nogen nogen
    freeze A
    locksvc_redis_restart_empty && locksvc_event "redis" "restarted without persistence: every key is gone"
    start_redis B lock:redis-restart fence:redis-restart
    locked B "SET lock:redis-restart NX PX 2000; INCR fence:redis-restart"
    write B refund redis-restart-nogen nogen
    check "redis restart, generation not raised: the rightful holder B is refused (SF001)" [ "$RESULT" = SF001 ]
    unlock B
    psql_db -c "UPDATE lock_generations SET generation = generation + 1 WHERE service = 'redis'"
    locksvc_event "operator" "UPDATE lock_generations SET generation = generation + 1 WHERE service = 'redis'"
    start_redis C lock:redis-restart fence:redis-restart
    locked C "SET lock:redis-restart NX PX 2000; INCR fence:redis-restart"
    write C refund redis-restart
    r1=$RESULT
    write C refund redis-restart-atwrite
    check "redis restart, generation raised: the new holder C writes ($r1/$RESULT)" [ "$r1/$RESULT" = ok/ok ]
    unlock C
    thaw A
    write A refund redis-restart
    check "redis restart: A, thawed, with the generation read at lock time, gets SF001" [ "$RESULT" = SF001 ]
    write A refund redis-restart-atwrite gen-at-write
    check "redis restart: the same A reading the generation at write time is accepted: the mistake the docs warn of" \
        [ "$RESULT" = ok ]
    stop_worker A

    # The same grant in two transactions: strict tables refuse the second
    # with a message that says so; strict => false accepts it.
    echo "# --- the same grant in two transactions (redis-twice) ---"
    new_rows redis-twice
    start_redis A lock:redis-twice fence:redis-twice
    locked A "SET lock:redis-twice NX PX 2000; INCR fence:redis-twice"
    write A refund redis-twice
    write A refund redis-twice
    check "same grant twice, strict: the second transaction gets SF001" [ "$RESULT" = SF001 ]
    check "... whose message says the token was already used ($MESSAGE)" \
        grep -q 'was already used$' <<<"$MESSAGE"
    check "... and whose hint names an idempotency key, a new grant and strict => false" \
        grep -q 'idempotency key.*take the lock again.*strict => false' <<<"$HINT"
    write A job redis-twice
    r1=$RESULT
    write A job redis-twice
    check "same grant twice, strict => false: both transactions write ($r1/$RESULT)" [ "$r1/$RESULT" = ok/ok ]
    unlock A
else
    not_ok "Redis starts"
fi

# ============================================================ PgBouncer
# Transaction pooling with one server connection: every client below is
# served by the same backend, one after the other.  SET LOCAL and
# set_token() end with the transaction; a session-level SET stays on the
# backend and the next client writes with it.
echo "# --- PgBouncer, transaction pooling ---"
psql_db <<'SQL'
CREATE TABLE pooled (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO pooled VALUES ('p-1', 'new', '0:1'), ('p-2', 'new', '0:1'), ('p-3', 'new', '0:1');
SQL
[ "$BREAK" != guard ] && psql_db -c "SELECT fencing.protect('pooled')" >/dev/null
if locksvc_pgbouncer_start "$DB"; then
    ok "PgBouncer $(pgbouncer --version | head -1 | cut -d' ' -f2) serves port $LOCKSVC_PGBOUNCER_PORT (pool_mode = transaction, default_pool_size = 1)"
    PDSN="host=127.0.0.1 port=$LOCKSVC_PGBOUNCER_PORT user=postgres dbname=$DB"
    pooled() { $PY "$CLIENTS/pooled.py" "$PDSN" "$@"; }
    field() { sed -n "s/.*$1=\([^ ]*\).*/\1/p" <<<"$2"; }
    for mode in set-local set-token; do
        row='p-1'; [ "$mode" = set-token ] && row='p-2'
        first=$(pooled $mode 0:5 $row)
        next=$(pooled none - $row)
        echo "# $mode: client 1: $first; client 2 (no token): $next"
        check "pgbouncer, $mode: client 1 writes with its token 0:5" \
            [ "$(field result "$first")/$(field fence "$first")" = ok/0:5 ]
        # shellcheck disable=SC2016  # that evaluates its quoted condition when called
        check "pgbouncer, $mode: client 2 on the same server connection (pid $(field pid "$first")) has no token: SF002" \
            that '[ "$(field pid "$next")" = "$(field pid "$first")" ] && [ "$(field result "$next")" = SF002 ]'
    done
    first=$(pooled session-set 0:7 p-3)
    next=$(pooled none - p-3)
    echo "# session-set: client 1 (SET fencing.token = '0:7', no write): $first; client 2 (no token): $next"
    # shellcheck disable=SC2016  # that evaluates its quoted condition when called
    check "pgbouncer, session-level SET: client 2 (same server connection) writes with client 1's token 0:7: it leaked" \
        that '[ "$(field pid "$next")" = "$(field pid "$first")" ] && [ "$(field result "$next")/$(field fence "$next")" = ok/0:7 ]'
else
    not_ok "PgBouncer starts"
fi

# ============================================================ client snippets
# The snippets of docs/lock-services.md, run for real: a fresh token
# commits; an old one gets SF001 and stops; a 40001 (raised once by a
# trigger of the test) is retried and commits.
echo "# --- the client snippets of docs/lock-services.md ---"
"$FENCING_BINDIR/psql" -X -q -h 127.0.0.1 -p "$PGPORT" -U postgres -d postgres -c "CREATE DATABASE shop"
psql_shop() { "$FENCING_BINDIR/psql" -X -q -At -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$PGPORT" -U postgres -d shop "$@"; }
psql_shop >/dev/null <<'SQL'
CREATE EXTENSION fencing;
CREATE TABLE refunds (id text PRIMARY KEY, state text, fence fencing.fence);
INSERT INTO refunds VALUES ('r-python', 'new', '0:1'), ('r-java', 'new', '0:1'),
                           ('r-go', 'new', '0:1'), ('r-node', 'new', '0:1');
-- a serialization failure, once, when armed: setval('inject_40001', 1, false)
CREATE SEQUENCE inject_40001;
SELECT setval('inject_40001', 100);
CREATE FUNCTION inject_40001() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF nextval('inject_40001') = 1 THEN
        RAISE EXCEPTION 'could not serialize access (raised by the test)'
            USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER a_inject_40001 BEFORE UPDATE ON refunds FOR EACH ROW EXECUTE FUNCTION inject_40001();
SQL
[ "$BREAK" != guard ] && psql_shop -c "SELECT fencing.protect('refunds')" >/dev/null
javac -d "$LOCKSVC_DIR/java" -cp /usr/share/java/postgresql.jar "$SNIPPETS/java/PayRefund.java" 2>&1 | sed 's/^/# javac: /'
snippet() {
    case $1 in
    python) $PY "$SNIPPETS/python/pay_refund.py" "host=127.0.0.1 port=$PGPORT user=postgres dbname=shop" "$2" r-python ;;
    java) java -cp "/usr/share/java/postgresql.jar:$LOCKSVC_DIR/java" PayRefund \
        "jdbc:postgresql://127.0.0.1:$PGPORT/shop?user=postgres" "$2" r-java ;;
    go) "$LOCKSVC_GO_BIN/snippet" "postgres://postgres@127.0.0.1:$PGPORT/shop?sslmode=disable" "$2" r-go ;;
    node) NODE_PATH=$LOCKSVC_NODE_MODULES node "$SNIPPETS/node/pay_refund.js" \
        "postgres://postgres@127.0.0.1:$PGPORT/shop" "$2" r-node ;;
    esac
}
for lang in python java go node; do
    out=$(snippet $lang 0:2 2>&1); st=$?
    fencing_diag_prefix "$lang, token 0:2: " <<<"$out"
    # shellcheck disable=SC2016  # that evaluates its quoted condition when called
    check "snippet $lang: a fresh token commits" that '[ $st -eq 0 ] && grep -qx "committed with token 0:2" <<<"$out"'
    out=$(snippet $lang 0:1 2>&1); st=$?
    fencing_diag_prefix "$lang, token 0:1: " <<<"$out"
    # shellcheck disable=SC2016  # that evaluates its quoted condition when called
    check "snippet $lang: an old token gets SF001, and the program stops (exit 3)" \
        that '[ $st -eq 3 ] && grep -q "^SF001: .*stale fence token 0:1" <<<"$out"'
    psql_shop -c "SELECT setval('inject_40001', 1, false)" >/dev/null
    out=$(snippet $lang 0:3 2>&1); st=$?
    fencing_diag_prefix "$lang, token 0:3, one 40001: " <<<"$out"
    # shellcheck disable=SC2016  # that evaluates its quoted condition when called
    check "snippet $lang: a 40001 is retried, then it commits" \
        that '[ $st -eq 0 ] && grep -qx "40001: serialization failure, retrying" <<<"$out" &&
              grep -qx "committed with token 0:3" <<<"$out"'
done
for f in python/pay_refund.py java/PayRefund.java go/main.go node/pay_refund.js; do
    check "docs/lock-services.md shows test/locksvc/snippets/$f as it is tested" \
        $PY -c 'import sys; sys.exit(open(sys.argv[2]).read().strip() not in open(sys.argv[1]).read())' \
        "$FENCING_ROOT/docs/lock-services.md" "$SNIPPETS/$f"
done

# ============================================================ the end
locksvc_stop_all
left=$(locksvc_leftovers)
[ -n "$left" ] && fencing_diag_prefix "left: " <<<"$left"
check "no server or worker of this run is left" [ -z "$left" ]
