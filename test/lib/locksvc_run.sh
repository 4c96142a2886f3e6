# shellcheck shell=bash
# test/lib/locksvc_run.sh: the lock services started from the shell, for
# the suites not yet on test/perl/FencingLockSvc.pm (client_go,
# client_python, client_typescript, examples): sourced by
# test/lib/locksvc.sh.  The locksvc suite itself no longer uses it; it goes
# when those suites are Perl TAP tests.
#
#   locksvc_init                 the run's directory ($LOCKSVC_DIR)
#   locksvc_stop_all             stop every server and worker started
#                                (SIGCONT first: a frozen one too)
#   locksvc_leftovers            print the processes of this run still alive
#
#   locksvc_etcd_start / _stop / _restore SNAPSHOT
#                                etcd; LOCKSVC_ETCD the client URL;
#                                locksvc_etcdctl ARGS...
#   locksvc_zk_start / locksvc_zk_server_stop I / _server_start I /
#   locksvc_zk_leader / locksvc_zk_wait_quorum / locksvc_zk_wipe
#                                ZooKeeper; LOCKSVC_ZK the connect string
#   locksvc_redis_start / _restart_empty / locksvc_redis_cli ARGS...
#   locksvc_pgbouncer_start DB   transaction pooling, one server connection;
#                                LOCKSVC_PGBOUNCER_PORT
#
#   locksvc_worker_start NAME CMD...   CMD in a session of its own, its stdin
#                                and stdout through FIFOs
#   locksvc_worker_send NAME LINE, locksvc_worker_read NAME (into $REPLY)
#   locksvc_worker_freeze NAME / _thaw NAME   SIGSTOP / SIGCONT its group
#   locksvc_worker_stop NAME
#   locksvc_wait DESC SECONDS CMD...   wait until CMD succeeds (a state,
#                                polled), false after SECONDS
#   locksvc_event WHO TEXT       one line of the timeline

LOCKSVC_DIR=
LOCKSVC_ETCD=
LOCKSVC_ZK=
LOCKSVC_REDIS_PORT=
LOCKSVC_PGBOUNCER_PORT=
LOCKSVC_T0=
declare -A LOCKSVC_W_IN LOCKSVC_W_OUT LOCKSVC_W_PID

locksvc_init() {
    LOCKSVC_DIR=$FENCING_WORK/locksvc
    rm -rf "$LOCKSVC_DIR"
    mkdir -p "$LOCKSVC_DIR"
    chmod 755 "$LOCKSVC_DIR"
    : >"$LOCKSVC_DIR/pgids"
    LOCKSVC_T0=$EPOCHREALTIME
}

# A line of the timeline: seconds since the run began, who, what.
locksvc_event() {
    local who=$1; shift
    printf '# [%7.3fs] %-10s %s\n' "$(awk -v a="$EPOCHREALTIME" -v b="$LOCKSVC_T0" 'BEGIN { print a - b }')" "$who" "$*"
}

# Remember a process group (its leader's pid) to stop at exit.
locksvc_track() { echo "$1 $2" >>"$LOCKSVC_DIR/pgids"; }

# Run CMD... in a session (and process group) of its own, in the
# background; its pid, which is the group's id, in $LOCKSVC_PID.
locksvc_spawn() {
    local name=$1 log=$2; shift 2
    (exec setsid "$@" >>"$log" 2>&1 </dev/null) &
    LOCKSVC_PID=$!
    locksvc_track "$name" "$LOCKSVC_PID"
}

# Stop a process group: SIGCONT (it may be frozen), SIGTERM, and SIGKILL
# when it is still there after 10 s.
locksvc_stop_group() {
    local pgid=$1 i
    kill -0 -- "-$pgid" 2>/dev/null || return 0
    kill -CONT -- "-$pgid" 2>/dev/null
    kill -TERM -- "-$pgid" 2>/dev/null
    for i in $(seq 1 100); do
        kill -0 -- "-$pgid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL -- "-$pgid" 2>/dev/null
    for i in $(seq 1 50); do
        kill -0 -- "-$pgid" 2>/dev/null || return 0
        sleep 0.1
    done
}

locksvc_stop_all() {
    [ -n "$LOCKSVC_DIR" ] && [ -f "$LOCKSVC_DIR/pgids" ] || return 0
    local name pgid
    while read -r name pgid; do
        locksvc_stop_group "$pgid"
    done < <(tac "$LOCKSVC_DIR/pgids")
    : >"$LOCKSVC_DIR/pgids.stopped"
}

# The processes of this run still alive: every process group it started,
# and any process whose command line names the run's directory.
locksvc_leftovers() {
    local name pgid
    [ -f "$LOCKSVC_DIR/pgids" ] || return 0
    while read -r name pgid; do
        if kill -0 -- "-$pgid" 2>/dev/null; then
            echo "$name (process group $pgid): $(ps -o pid=,args= -g "$pgid" | head -3 | tr '\n' ';')"
        fi
    done <"$LOCKSVC_DIR/pgids"
    pgrep -af -- "$LOCKSVC_DIR/" | grep -v -e "^$$ " -e pgrep || true
}

# Wait until CMD... succeeds, polling; false after SECONDS.
locksvc_wait() {
    local what=$1 secs=$2 end; shift 2
    end=$(($(date +%s) + secs))
    until "$@" >/dev/null 2>&1; do
        if [ "$(date +%s)" -ge "$end" ]; then
            fencing_log "timed out after ${secs}s waiting for: $what"
            return 1
        fi
        sleep 0.1
    done
}

# ---- etcd ------------------------------------------------------------------
# One member, on two free ports.  Election and heartbeat at their defaults,
# so the shortest lease etcd grants is 2 s.

locksvc_etcdctl() { ETCDCTL_API=3 etcdctl --endpoints="$LOCKSVC_ETCD" --command-timeout=10s "$@"; }

locksvc_etcd_start() {
    local data=${1:-$LOCKSVC_DIR/etcd/data}
    local cport pport
    mkdir -p "$LOCKSVC_DIR/etcd"
    if [ -z "$LOCKSVC_ETCD" ]; then
        cport=$(fencing_free_port)
        pport=$(fencing_free_port)
        LOCKSVC_ETCD=http://127.0.0.1:$cport
        LOCKSVC_ETCD_PEER=http://127.0.0.1:$pport
    fi
    locksvc_spawn etcd "$LOCKSVC_DIR/etcd/etcd.log" \
        etcd --name s1 --data-dir "$data" \
        --listen-client-urls "$LOCKSVC_ETCD" --advertise-client-urls "$LOCKSVC_ETCD" \
        --listen-peer-urls "$LOCKSVC_ETCD_PEER" --initial-advertise-peer-urls "$LOCKSVC_ETCD_PEER" \
        --initial-cluster "s1=$LOCKSVC_ETCD_PEER" --initial-cluster-state new \
        --log-level warn
    LOCKSVC_ETCD_PID=$LOCKSVC_PID
    locksvc_wait "etcd at $LOCKSVC_ETCD" 60 locksvc_etcdctl endpoint health ||
        { tail -20 "$LOCKSVC_DIR/etcd/etcd.log" >&2; return 1; }
}

locksvc_etcd_stop() {
    [ -n "${LOCKSVC_ETCD_PID:-}" ] && locksvc_stop_group "$LOCKSVC_ETCD_PID"
    LOCKSVC_ETCD_PID=
}

# Replace the member's data by a snapshot (etcdctl snapshot restore, as
# after losing the cluster) and start it again on the same ports.
locksvc_etcd_restore() {
    local snap=$1 data
    locksvc_etcd_stop
    data=$LOCKSVC_DIR/etcd/restored.$(date +%s%N)
    ETCDCTL_API=3 etcdctl snapshot restore "$snap" --data-dir "$data" --name s1 \
        --initial-cluster "s1=$LOCKSVC_ETCD_PEER" --initial-advertise-peer-urls "$LOCKSVC_ETCD_PEER" \
        >>"$LOCKSVC_DIR/etcd/etcd.log" 2>&1 || return 1
    locksvc_etcd_start "$data"
}

# The current revision of the store.
locksvc_etcd_revision() {
    locksvc_etcdctl endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])'
}

# Is there no key under the lock's prefix with this lease?  (A lock key is
# PREFIX/<lease id in hex>.)
locksvc_etcd_key_gone() { [ -z "$(locksvc_etcdctl get --keys-only "$1")" ]; }

# ---- ZooKeeper --------------------------------------------------------------
# Three servers, each a JVM with its own configuration, data directory and
# ports; tickTime 500 ms, so sessions may be as short as 1 s.

LOCKSVC_ZK_N=3

locksvc_zk_configure() {
    local i j
    declare -g -a LOCKSVC_ZK_PORT LOCKSVC_ZK_QUORUM LOCKSVC_ZK_ELECTION LOCKSVC_ZK_PID
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        LOCKSVC_ZK_PORT[i]=$(fencing_free_port)
        LOCKSVC_ZK_QUORUM[i]=$(fencing_free_port)
        LOCKSVC_ZK_ELECTION[i]=$(fencing_free_port)
    done
    LOCKSVC_ZK=
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        local d=$LOCKSVC_DIR/zk/$i
        mkdir -p "$d/data" "$d/conf"
        echo "$i" >"$d/data/myid"
        cp /etc/zookeeper/conf/log4j.properties "$d/conf/"
        {
            echo "tickTime=500"
            echo "initLimit=20"
            echo "syncLimit=10"
            echo "minSessionTimeout=1000"
            echo "maxSessionTimeout=10000"
            echo "dataDir=$d/data"
            echo "clientPort=${LOCKSVC_ZK_PORT[$i]}"
            echo "clientPortAddress=127.0.0.1"
            echo "admin.enableServer=false"
            echo "4lw.commands.whitelist=srvr,ruok"
            for j in $(seq 1 $LOCKSVC_ZK_N); do
                echo "server.$j=127.0.0.1:${LOCKSVC_ZK_QUORUM[$j]}:${LOCKSVC_ZK_ELECTION[$j]}"
            done
        } >"$d/conf/zoo.cfg"
        LOCKSVC_ZK=${LOCKSVC_ZK:+$LOCKSVC_ZK,}127.0.0.1:${LOCKSVC_ZK_PORT[$i]}
    done
}

locksvc_zk_server_start() {
    local i=$1 d=$LOCKSVC_DIR/zk/$1
    locksvc_spawn "zookeeper-$i" "$d/server.log" \
        java -Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Dzookeeper.root.logger=WARN,CONSOLE -Dzookeeper.log.dir="$d" \
        -cp "$d/conf:/usr/share/java/zookeeper.jar" \
        org.apache.zookeeper.server.quorum.QuorumPeerMain "$d/conf/zoo.cfg"
    LOCKSVC_ZK_PID[i]=$LOCKSVC_PID
}

locksvc_zk_server_stop() {
    local i=$1
    [ -n "${LOCKSVC_ZK_PID[$i]:-}" ] && locksvc_stop_group "${LOCKSVC_ZK_PID[$i]}"
    LOCKSVC_ZK_PID[i]=
}

# A four-letter word to server I ("srvr", "ruok").
locksvc_zk_4lw() {
    local i=$1 word=$2
    # shellcheck disable=SC2016  # expanded by that bash, from its arguments
    timeout 5 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf %s "$2" >&3 && cat <&3' \
        sh "${LOCKSVC_ZK_PORT[$i]}" "$word" 2>/dev/null
}

# The mode of server I: leader, follower, or nothing while it has no quorum.
locksvc_zk_mode() { locksvc_zk_4lw "$1" srvr | sed -n 's/^Mode: //p'; }

# The number of the leader, when there is one.
locksvc_zk_leader() {
    local i
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        [ -n "${LOCKSVC_ZK_PID[$i]:-}" ] && [ "$(locksvc_zk_mode "$i")" = leader ] && { echo "$i"; return 0; }
    done
    return 1
}

# Every running server serves (leader or follower), one of them leads.
locksvc_zk_serving() {
    local i m leaders=0
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        [ -n "${LOCKSVC_ZK_PID[$i]:-}" ] || continue
        m=$(locksvc_zk_mode "$i")
        case $m in
        leader) leaders=$((leaders + 1)) ;;
        follower) ;;
        *) return 1 ;;
        esac
    done
    [ "$leaders" -eq 1 ]
}

locksvc_zk_wait_quorum() {
    locksvc_wait "a ZooKeeper leader with every running server serving" 120 locksvc_zk_serving ||
        { tail -n 20 "$LOCKSVC_DIR"/zk/*/server.log >&2; return 1; }
}

locksvc_zk_start() {
    local i
    [ -n "${LOCKSVC_ZK:-}" ] || locksvc_zk_configure
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        locksvc_zk_server_start "$i"
    done
    locksvc_zk_wait_quorum
}

locksvc_zk_stop() {
    local i stoppers=()
    # all at once: a JVM takes a while to shut down (and wait for these
    # only: the servers and workers are background jobs too)
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        locksvc_zk_server_stop "$i" &
        stoppers+=($!)
    done
    wait "${stoppers[@]}"
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        LOCKSVC_ZK_PID[i]=
    done
}

# ZooKeeper loses its data: every server's snapshots and logs (myid stays).
locksvc_zk_wipe() {
    local i
    for i in $(seq 1 $LOCKSVC_ZK_N); do
        rm -rf "$LOCKSVC_DIR/zk/$i/data/version-2"
    done
}

# ---- Redis -----------------------------------------------------------------
# No persistence at all: a restart loses every key.

locksvc_redis_cli() { redis-cli -h 127.0.0.1 -p "$LOCKSVC_REDIS_PORT" "$@"; }

locksvc_redis_start() {
    mkdir -p "$LOCKSVC_DIR/redis"
    [ -n "$LOCKSVC_REDIS_PORT" ] || LOCKSVC_REDIS_PORT=$(fencing_free_port)
    locksvc_spawn redis "$LOCKSVC_DIR/redis/redis.log" \
        redis-server --port "$LOCKSVC_REDIS_PORT" --bind 127.0.0.1 --save '' \
        --appendonly no --dir "$LOCKSVC_DIR/redis" --daemonize no
    LOCKSVC_REDIS_PID=$LOCKSVC_PID
    locksvc_wait "redis on port $LOCKSVC_REDIS_PORT" 30 locksvc_redis_cli ping
}

locksvc_redis_restart_empty() {
    locksvc_stop_group "$LOCKSVC_REDIS_PID"
    locksvc_redis_start
}

# ---- PgBouncer -------------------------------------------------------------
# Transaction pooling with one server connection, so that consecutive
# clients are served by the same backend, as a busy pool does at random.

locksvc_pgbouncer_start() {
    local db=$1 d=$LOCKSVC_DIR/pgbouncer
    mkdir -p "$d"
    LOCKSVC_PGBOUNCER_PORT=$(fencing_free_port)
    echo '"postgres" ""' >"$d/userlist.txt"
    cat >"$d/pgbouncer.ini" <<EOF
[databases]
$db = host=127.0.0.1 port=$PGPORT dbname=$db user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $LOCKSVC_PGBOUNCER_PORT
unix_socket_dir =
auth_type = trust
auth_file = $d/userlist.txt
pool_mode = transaction
default_pool_size = 1
max_client_conn = 20
ignore_startup_parameters = extra_float_digits,options
logfile = $d/pgbouncer.log
EOF
    chown -R postgres: "$d"
    # PgBouncer refuses to run as root
    locksvc_spawn pgbouncer "$d/stdout.log" runuser -u postgres -- pgbouncer "$d/pgbouncer.ini"
    locksvc_wait "pgbouncer on port $LOCKSVC_PGBOUNCER_PORT" 30 \
        psql -X -At -h 127.0.0.1 -p "$LOCKSVC_PGBOUNCER_PORT" -U postgres -d "$db" -c 'SELECT 1' ||
        { cat "$d/pgbouncer.log" "$d/stdout.log" >&2; return 1; }
}

# ---- workers ---------------------------------------------------------------
# A worker is a process (group) that takes a lock and writes with its
# token on command: lines in on its stdin, lines out on its stdout.

locksvc_worker_start() {
    local name=$1; shift
    local d=$LOCKSVC_DIR/worker-$name fdin fdout
    rm -rf "$d" && mkdir -p "$d"
    mkfifo "$d/in" "$d/out"
    (exec setsid "$@" <"$d/in" >"$d/out" 2>>"$d/stderr") &
    LOCKSVC_W_PID[$name]=$!
    locksvc_track "worker-$name" "$!"
    exec {fdin}>"$d/in"
    exec {fdout}<"$d/out"
    LOCKSVC_W_IN[$name]=$fdin
    LOCKSVC_W_OUT[$name]=$fdout
}

locksvc_worker_send() { printf '%s\n' "$2" >&"${LOCKSVC_W_IN[$1]}"; }

# The worker's next line, in $REPLY; false (and REPLY empty) when none
# came within ${3:-60} seconds or the worker ended.
locksvc_worker_read() {
    REPLY=
    if ! IFS= read -r -t "${2:-60}" -u "${LOCKSVC_W_OUT[$1]}" REPLY; then
        fencing_log "worker $1 said nothing (stderr: $(tail -c 600 "$LOCKSVC_DIR/worker-$1/stderr" | tr '\n' ' '))"
        REPLY=
        return 1
    fi
}

locksvc_worker_freeze() { kill -STOP -- "-${LOCKSVC_W_PID[$1]}"; }
locksvc_worker_thaw() { kill -CONT -- "-${LOCKSVC_W_PID[$1]}"; }

locksvc_worker_stop() {
    local name=$1
    [ -n "${LOCKSVC_W_IN[$name]:-}" ] || return 0
    local fd_in=${LOCKSVC_W_IN[$name]} fd_out=${LOCKSVC_W_OUT[$name]}
    printf 'quit\n' 1>&"$fd_in" 2>/dev/null
    exec {fd_in}>&-
    exec {fd_out}<&-
    locksvc_stop_group "${LOCKSVC_W_PID[$name]}"
    unset "LOCKSVC_W_IN[$name]" "LOCKSVC_W_OUT[$name]"
}
