#!/usr/bin/env bash
# test/demo/worker.sh: one refund worker, a real process with real clients.
#
#   worker.sh NAME SCENE        (started by test/demo.sh, not by hand)
#
# What the worker does, the way such workers are written:
#   1. take the lock in Redis           SET lock:refund-r1 NAME NX PX ttl
#                                       (retry while someone else holds it)
#   2. take a fencing token             INCR fence:refund-r1 -> token EPOCH:n
#   3. read the refund                  still pending?  how much?
#   4. call the payment provider        (here the orchestrator may freeze it)
#   5. write, carrying the token        test/demo/scenes/SCENE.sql: mark r-1
#                                       paid, book the ledger, debit balance
#                                       (or SCENE.*.sql: the same in steps)
#   6. release the lock, if still ours  compare-and-delete (Lua)
#
# Nothing here re-checks the lock between 3 and 5: the worker holds it, as
# far as it knows.  That is the point.
#
# Environment (from test/demo.sh): DEMO_RUN, DEMO_REDIS_PORT, DEMO_TTL_MS,
# DEMO_EPOCH, DEMO_WORK_MS, DEMO_RETRY_MS and libpq's PG* variables.
# Files it leaves in $DEMO_RUN:
#   NAME.locked_at  time (us) just before the SET that got the lock
#   NAME.paying     it is inside the payment call (the moment to freeze it)
#   NAME.result     committed | rejected SQLSTATE | skipped | failed
#                   (a scene in steps: "A / B" when its steps ended apart)
#   NAME.steps      one line per step of the write: STEP committed|rejected SQLSTATE
#   NAME.error      the server's error text (message, DETAIL, HINT)
#   NAME.done       the worker has finished
# and its events in $DEMO_RUN/timeline.

set -uE
name=$1
scene=$2
. "$(dirname "$0")/lib.sh"

lock=lock:refund-r1
counter=fence:refund-r1
who="worker $name"

# Record the outcome and finish.
finish() {
    echo "$1" >"$DEMO_RUN/$name.result"
    : >"$DEMO_RUN/$name.done"
    exit 0
}
trap 'finish failed' ERR

# psql as the demo uses it everywhere: no psqlrc, quiet, stop at the first
# error; SCENE's schema is the shop this worker works in.
run_psql() {
    psql -X -q -v ON_ERROR_STOP=1 -v schema="$scene" "$@"
}

# 1. The lock.  A holder that waits too long gives up.
take_lock() {
    local deadline=$(($(demo_now_us) + (DEMO_TTL_MS * 5 + 5000) * 1000))
    local said_waiting='' before reply
    while :; do
        before=$(demo_now_us)
        reply=$(demo_redis SET "$lock" "$name" NX PX "$DEMO_TTL_MS")
        if [ "$reply" = OK ]; then
            echo "$before" >"$DEMO_RUN/$name.locked_at"
            demo_event "$who" "SET $lock $name NX PX $DEMO_TTL_MS -> OK, the lock is mine"
            return 0
        fi
        if [ -z "$said_waiting" ]; then
            demo_event "$who" "SET $lock $name NX PX $DEMO_TTL_MS -> (nil): held by $(demo_redis GET "$lock"); retrying every $DEMO_RETRY_MS ms"
            said_waiting=1
        fi
        [ "$(demo_now_us)" -lt "$deadline" ] || return 1
        sleep "$(demo_ms_to_s "$DEMO_RETRY_MS")"
    done
}

# 2. The token: Redis counts grants; epoch DEMO_EPOCH makes it a fence.
take_token() {
    local n
    n=$(demo_redis INCR "$counter")
    token=$DEMO_EPOCH:$n
    demo_event "$who" "INCR $counter -> $n, fencing token $token"
}

# 3. What is there to do?
read_refund() {
    local row
    row=$(run_psql -At -F ' ' \
        -c "SELECT state, amount_cents FROM $scene.refunds WHERE id = 'r-1'")
    state=${row% *}
    amount=${row#* }
    demo_event "$who" "SELECT refund r-1 -> $state, $(demo_cents "$amount")"
}

# 4. The slow part, where a pause hurts most.
call_payment_provider() {
    demo_event "$who" "pays $(demo_cents "$amount") out through the payment provider (${DEMO_WORK_MS} ms)"
    : >"$DEMO_RUN/$name.paying"
    sleep "$(demo_ms_to_s "$DEMO_WORK_MS")"
}

# 5. The write: test/demo/scenes/SCENE.sql, or the scene's steps
#    SCENE.*.sql in name order, each in a psql (and a transaction) of its
#    own.  A step that fails is reported and the next one still runs, so a
#    scene in steps shows how each of them ended.  Sets outcome: committed
#    or "rejected SQLSTATE" when every step ended that way, otherwise the
#    steps' outcomes in order, joined by " / ".
write_payout() {
    local steps=() step
    if [ -e "$DEMO_DIR/scenes/$scene.sql" ]; then
        steps=("$DEMO_DIR/scenes/$scene.sql")
    else
        steps=("$DEMO_DIR/scenes/$scene".*.sql)
    fi
    : >"$DEMO_RUN/$name.steps"
    for step in "${steps[@]}"; do
        write_step "$step" "${#steps[@]}"
    done
    outcome=$(cut -d ' ' -f 2- "$DEMO_RUN/$name.steps" | awk '!seen[$0]++' |
        paste -s -d '/' - | sed 's|/| / |g')
}

# One step of the write: run FILE, of COUNT steps in all.  Appends
# "STEP committed" or "STEP rejected SQLSTATE" to NAME.steps, and the
# server's error text to NAME.error (indented under the step when COUNT > 1).
write_step() {
    local file=$1 count=$2 err=$DEMO_RUN/$name.stderr step what sqlstate
    step=$(basename "$file" .sql)
    step=${step#"$scene"}
    step=${step#.}
    step=${step:-payout}
    # what the step does, from its "-- timeline:" line
    what=$(sed -n 's/^-- timeline: //p' "$file" | head -1)
    what=${what:-$step}
    what=${what//'{amount}'/$(demo_cents "$amount")}
    if run_psql -v VERBOSITY=verbose -v worker="$name" -v token="$token" \
        -v amount="$amount" <"$file" 2>"$err"; then
        echo "$step committed" >>"$DEMO_RUN/$name.steps"
        demo_event "$who" "$what, token $token -> COMMIT"
        return 0
    fi
    # psql:<stdin>:12: ERROR:  SF001: stale fence token 0:1
    # DETAIL:  ...   HINT:  ...   LOCATION:  ... (dropped: for developers)
    sed -e 's/^psql:[^ ]*: //' -e '/^LOCATION:/d' "$err" >"$err.text"
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
}

# 6. Release, but only a lock that is still ours.
release_lock() {
    local n
    n=$(demo_redis EVAL "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end" 1 "$lock" "$name")
    if [ "$n" = 1 ]; then
        demo_event "$who" "release $lock -> released"
    else
        demo_event "$who" "release $lock -> not mine any more: it expired, someone else may hold it now"
    fi
}

take_lock || { demo_event "$who" "gave up waiting for $lock"; finish failed; }
take_token
read_refund
if [ "$state" != pending ]; then
    demo_event "$who" "refund r-1 is $state already: nothing to do"
    release_lock
    finish skipped
fi
call_payment_provider
write_payout
release_lock
finish "$outcome"
