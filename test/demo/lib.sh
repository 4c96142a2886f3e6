# shellcheck shell=bash
# test/demo/lib.sh: the plumbing of the demo, shared by the orchestrator
# (test/demo.sh) and the workers (test/demo/worker.sh).  Source it from bash
# after test/lib/common.sh (the orchestrator) or on its own (a worker).
#
#   demo_event WHO WHAT          add a line to the current run's timeline
#   demo_timeline_print          print the timeline, sorted, as elapsed time
#   demo_redis ARGS...           redis-cli against the demo's own Redis
#   demo_redis_start / _stop     a private redis-server on a free port
#   demo_psp METHOD PATH [KEY [BODY]]
#                                a request to the payment provider stand-in
#   demo_psp_start / _stop       the stand-in (test/demo/psp.py) on a free port
#   demo_spawn NAME SCENE [SCRIPT]
#                                start a worker (test/demo/SCRIPT, worker.sh
#                                unless given) as a background process
#   demo_signal NAME SIG         signal a worker (and its children)
#   demo_wait_file PATH MS       wait until a file exists, at most MS ms
#   demo_cleanup                 end every process started, stop PostgreSQL,
#                                remove the scratch directory
# and, for the workers (after setting name and scene):
#   demo_psql ARGS...            psql as the demo runs it
#   demo_write_step FILE COUNT   one write transaction, its outcome recorded
#   demo_finish RESULT           record the worker's result and exit
#
# Every worker runs in its own session (setsid), so its pid is also its
# process group: "kill -STOP -- -PID" freezes the worker together with the
# psql, redis-cli or sleep it is running at that moment, as a GC pause
# freezes a whole JVM.

DEMO_DIR=${DEMO_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
DEMO_WORKER_PIDS=()
declare -A DEMO_PID

# Microseconds since the Unix epoch (bash 5's clock, any locale).
demo_now_us() {
    echo "${EPOCHREALTIME//[.,]/}"
}

# Append one event to the timeline: microseconds, who, what (tab-separated).
# A line this short is written with one write(2) to an O_APPEND file, so
# the processes of a run can share the file.  DEMO_AT overrides the time.
demo_event() {
    local who=$1 what=$2 at=${DEMO_AT:-}
    [ -n "$at" ] || at=$(demo_now_us)
    printf '%s\t%s\t%s\n' "$at" "$who" "$what" >>"$DEMO_RUN/timeline"
}

# Print the run's timeline in time order, as seconds since the run began.
demo_timeline_print() {
    sort -n -t $'\t' -k1,1 "$DEMO_RUN/timeline" |
        awk -F '\t' -v t0="$(cat "$DEMO_RUN/t0")" \
            '{ printf "[%7.3fs] %-9s %s\n", ($1 - t0) / 1e6, $2, $3 }'
}

# redis-cli against the demo's Redis; replies in raw form ("" for nil).
demo_redis() {
    redis-cli -h 127.0.0.1 -p "$DEMO_REDIS_PORT" --raw "$@"
}

# Milliseconds as seconds with three decimals: 2400 -> 2.400
demo_ms_to_s() {
    printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000))
}

# Wait until a file exists; false after ms milliseconds.
demo_wait_file() {
    local path=$1 ms=$2 waited=0
    while [ ! -e "$path" ]; do
        [ "$waited" -ge "$ms" ] && return 1
        sleep 0.01
        waited=$((waited + 10))
    done
}

# Start a private redis-server on a free port of 127.0.0.1, in the scratch
# directory, persisting nothing; sets DEMO_REDIS_PORT.
demo_redis_start() {
    local dir=$FENCING_WORK/redis
    mkdir -p "$dir"
    DEMO_REDIS_PORT=$(fencing_free_port)
    export DEMO_REDIS_PORT
    redis-server --bind 127.0.0.1 --port "$DEMO_REDIS_PORT" --dir "$dir" \
        --save '' --appendonly no --daemonize no \
        --logfile "$dir/redis.log" </dev/null >/dev/null 2>&1 &
    DEMO_REDIS_PID=$!
    local _
    for _ in $(seq 100); do
        [ "$(demo_redis PING 2>/dev/null)" = PONG ] && return 0
        demo_gone "$DEMO_REDIS_PID" && break
        sleep 0.05
    done
    cat "$dir/redis.log" >&2 2>/dev/null
    fencing_die "redis-server failed to start"
}

# Has process PID exited (gone, or a zombie waiting to be reaped)?
demo_gone() {
    case $(ps -o stat= -p "$1" 2>/dev/null) in '' | Z*) return 0 ;; esac
    return 1
}

# Stop our redis-server: TERM, up to 2.5 s to exit, then KILL.
demo_redis_stop() {
    [ -n "${DEMO_REDIS_PID:-}" ] || return 0
    kill -TERM "$DEMO_REDIS_PID" 2>/dev/null
    local _
    for _ in $(seq 50); do
        demo_gone "$DEMO_REDIS_PID" && break
        sleep 0.05
    done
    kill -KILL "$DEMO_REDIS_PID" 2>/dev/null
    wait "$DEMO_REDIS_PID" 2>/dev/null
    DEMO_REDIS_PID=
}

# Start the payment provider stand-in (test/demo/psp.py) for the current
# run: it listens on a free port of 127.0.0.1 and puts what it does on the
# run's timeline; sets DEMO_PSP_PORT.  The system's Python (Debian's package
# python3), not whatever a version manager put first in PATH; started as a
# plain command, so that $! is the interpreter itself.
demo_psp_start() {
    local portfile=$DEMO_RUN/psp.port python=/usr/bin/python3 _
    [ -x "$python" ] || python=$(command -v python3) ||
        fencing_die "python3 is missing (Debian package python3)"
    # a port of FENCING_PORTS when it is set, else any free one
    DEMO_PSP_PORT_WANTED=$([ -n "${FENCING_PORTS:-}" ] && fencing_free_port || echo 0) \
        "$python" "$DEMO_DIR/psp.py" "$portfile" "$DEMO_RUN/timeline" \
        </dev/null >>"$DEMO_RUN/psp.log" 2>&1 &
    DEMO_PSP_PID=$!
    for _ in $(seq 100); do
        if [ -s "$portfile" ]; then
            DEMO_PSP_PORT=$(cat "$portfile")
            export DEMO_PSP_PORT
            return 0
        fi
        demo_gone "$DEMO_PSP_PID" && break
        sleep 0.05
    done
    cat "$DEMO_RUN/psp.log" >&2 2>/dev/null
    fencing_die "the payment provider stand-in failed to start"
}

# Stop the stand-in: TERM, up to 2.5 s to exit, then KILL.
demo_psp_stop() {
    [ -n "${DEMO_PSP_PID:-}" ] || return 0
    kill -TERM "$DEMO_PSP_PID" 2>/dev/null
    local _
    for _ in $(seq 50); do
        demo_gone "$DEMO_PSP_PID" && break
        sleep 0.05
    done
    kill -KILL "$DEMO_PSP_PID" 2>/dev/null
    wait "$DEMO_PSP_PID" 2>/dev/null
    DEMO_PSP_PID=
}

# One HTTP/1.0 request to the stand-in, with bash's /dev/tcp (no client
# to install): prints the reply's body; false unless the status is 2xx.
demo_psp() {
    local method=$1 path=$2 key=${3:-} body=${4:-} reply status
    exec 3<>"/dev/tcp/127.0.0.1/$DEMO_PSP_PORT" || return 1
    {
        printf '%s %s HTTP/1.0\r\nHost: psp\r\n' "$method" "$path"
        [ -n "$key" ] && printf 'Idempotency-Key: %s\r\n' "$key"
        printf 'Content-Length: %d\r\n\r\n%s' "${#body}" "$body"
    } >&3
    reply=$(tr -d '\r' <&3)
    exec 3<&-
    status=$(printf '%s\n' "$reply" | sed -n '1s/^HTTP\/[0-9.]* \([0-9]*\).*/\1/p')
    printf '%s\n' "$reply" | sed '1,/^$/d'
    [ "${status:-0}" -ge 200 ] && [ "$status" -lt 300 ]
}

# Start worker NAME playing SCENE, in a session of its own; its stderr
# goes to the run directory.  SCRIPT: the worker's program in test/demo/.
demo_spawn() {
    local name=$1 scene=$2 script=${3:-worker.sh}
    setsid bash "$DEMO_DIR/$script" "$name" "$scene" \
        </dev/null >>"$DEMO_RUN/$name.log" 2>&1 &
    DEMO_PID[$name]=$!
    DEMO_WORKER_PIDS+=($!)
}

# Send a signal to worker NAME and whatever it is running.
demo_signal() {
    local pid=${DEMO_PID[$1]} sig=$2
    kill "-$sig" -- "-$pid" 2>/dev/null || kill "-$sig" "$pid" 2>/dev/null
}

# Is worker NAME stopped (state T)?
demo_is_stopped() {
    case $(ps -o stat= -p "${DEMO_PID[$1]}" 2>/dev/null) in T*) return 0 ;; esac
    return 1
}

# Forget a worker's pid once it has been reaped (so that cleanup never
# signals a pid the system may have handed to someone else since).
demo_forget() {
    local pid=$1 p keep=()
    for p in "${DEMO_WORKER_PIDS[@]}"; do
        [ "$p" = "$pid" ] || keep+=("$p")
    done
    DEMO_WORKER_PIDS=("${keep[@]}")
}

# Wait for worker NAME to exit, at most ms milliseconds; then reap it.
demo_reap() {
    local pid=${DEMO_PID[$1]} ms=${2:-10000} waited=0
    while ! demo_gone "$pid"; do
        [ "$waited" -ge "$ms" ] && return 1
        sleep 0.01
        waited=$((waited + 10))
    done
    wait "$pid" 2>/dev/null
    demo_forget "$pid"
    return 0
}

# End a worker for good: a stopped process cannot act on SIGTERM, so wake
# it first; KILL whatever is left of its process group.
demo_kill_worker() {
    local pid=$1
    kill -CONT -- "-$pid" 2>/dev/null || kill -CONT "$pid" 2>/dev/null
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    sleep 0.1
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    demo_forget "$pid"
}

# The EXIT trap: everything this run started goes away, whatever happened.
demo_cleanup() {
    local status=$? pid
    trap - EXIT INT TERM
    for pid in "${DEMO_WORKER_PIDS[@]}"; do
        demo_kill_worker "$pid"
    done
    demo_psp_stop
    demo_redis_stop
    fencing_cleanup
    exit "$status"
}

# Cents as money: 2500 -> 25.00, -2500 -> -25.00
demo_cents() {
    local c=$1 sign=
    [ "${c#-}" != "$c" ] && { sign=-; c=${c#-}; }
    printf '%s%d.%02d' "$sign" $((c / 100)) $((c % 100))
}

# ---------------------------------------------------------------------------
# The workers' side: shared by test/demo/worker.sh and test/demo/idem-worker.sh,
# which set name (A, B), scene, who ("worker A") and, before a write,
# amount (cents) and token.
# ---------------------------------------------------------------------------

# Record the worker's outcome and finish.
demo_finish() {
    echo "$1" >"$DEMO_RUN/$name.result"
    : >"$DEMO_RUN/$name.done"
    exit 0
}

# psql as the demo uses it everywhere: no psqlrc, quiet, stop at the first
# error; SCENE's schema is the shop this worker works in.
demo_psql() {
    psql -X -q -v ON_ERROR_STOP=1 -v schema="$scene" "$@"
}

# One step of the write: run FILE (a transaction), of COUNT steps in all,
# with the psql variables worker, token and amount, and any more "-v
# NAME=VALUE" arguments in the array DEMO_STEP_VARS.  Appends "STEP
# committed" or "STEP rejected SQLSTATE" to NAME.steps, and the server's
# error text to NAME.error (indented under the step when COUNT > 1).
# The timeline says what the step does from its "-- timeline:" line.
DEMO_STEP_VARS=()
demo_write_step() {
    local file=$1 count=$2 err=$DEMO_RUN/$name.stderr step what sqlstate
    step=$(basename "$file" .sql)
    step=${step#"$scene"}
    step=${step#.}
    step=${step:-payout}
    what=$(sed -n 's/^-- timeline: //p' "$file" | head -1)
    what=${what:-$step}
    what=${what//'{amount}'/$(demo_cents "$amount")}
    # shellcheck disable=SC2154  # token: the worker's (worker.sh), set before each step
    if demo_psql -v VERBOSITY=verbose -v worker="$name" -v token="$token" \
        -v amount="$amount" "${DEMO_STEP_VARS[@]}" <"$file" 2>"$err"; then
        echo "$step committed" >>"$DEMO_RUN/$name.steps"
        demo_event "$who" "$what, token $token -> COMMIT"
        return 0
    fi
    # psql:<stdin>:12: ERROR:  SF001: stale fence token 0:1
    # DETAIL:  ...   HINT:  ...   LOCATION:  ... (dropped: for developers)
    # (and SCHEMA NAME, TABLE NAME, ...: the same, as the fields of the error)
    sed -e 's/^psql:[^ ]*: //' -e '/^LOCATION:/d' -e '/^CONTEXT:/d' \
        -e '/^[A-Z]* NAME:/d' "$err" >"$err.text"
    sqlstate=$(sed -n 's/^ERROR:  \([0-9A-Z]\{5\}\): .*/\1/p' "$err.text" | head -1)
    {
        if [ "$count" -gt 1 ]; then
            echo "$what, token $token:"
            sed 's/^/    /' "$err.text"
        else
            cat "$err.text"
        fi
    } >>"$DEMO_RUN/$name.error"
    echo "$step rejected ${sqlstate:-?????}" >>"$DEMO_RUN/$name.steps"
    demo_event "$who" "$what, token $token -> ERROR ${sqlstate:-?}: $(sed -n 's/^ERROR:  [0-9A-Z]\{5\}: //p' "$err.text" | head -1); rolled back"
    return 1
}
