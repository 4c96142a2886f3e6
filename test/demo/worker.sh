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
# With DEMO_LOCK=postgres the lock service is PostgreSQL itself: steps 1
# and 2 are one call, fencing.lease_acquire('SCENE:refund-r1', NAME, ttl),
# whose result is the token (NULL while another holder's lease is live:
# retry), and step 6 is fencing.lease_release(name, token).
#
# Nothing here re-checks the lock between 3 and 5: the worker holds it, as
# far as it knows.  That is the point.
#
# Environment (from test/demo.sh): DEMO_RUN, DEMO_REDIS_PORT, DEMO_TTL_MS,
# DEMO_EPOCH, DEMO_WORK_MS, DEMO_RETRY_MS, DEMO_LOCK (redis | postgres) and
# libpq's PG* variables.
# Files it leaves in $DEMO_RUN:
#   NAME.locked_at  time (us) just before the SET that got the lock
#   NAME.token      the fencing token it got
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
lease=$scene:refund-r1
ttl_interval="$DEMO_TTL_MS ms"
DEMO_LOCK=${DEMO_LOCK:-redis}
who="worker $name"
trap 'demo_finish failed' ERR

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
            take_token
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
    echo "$token" >"$DEMO_RUN/$name.token"
    demo_event "$who" "INCR $counter -> $n, fencing token $token"
}

# 1 and 2 with PostgreSQL as the lock service: the lease's grant is the
# token (its epoch is fencing.current_epoch(), 2^32 on timeline 1).
take_lease() {
    local deadline=$(($(demo_now_us) + (DEMO_TTL_MS * 5 + 5000) * 1000))
    local said_waiting='' call
    call="lease_acquire('$lease', '$name', '$ttl_interval')"
    while :; do
        token=$(demo_psql -At -c "SELECT fencing.lease_acquire('$lease', '$name', '$ttl_interval')")
        if [ -n "$token" ]; then
            echo "$token" >"$DEMO_RUN/$name.token"
            demo_event "$who" "$call -> $token: the lease is mine, and that is my token"
            return 0
        fi
        if [ -z "$said_waiting" ]; then
            demo_event "$who" "$call -> NULL: held by $(demo_psql -At -c "SELECT holder FROM fencing.leases WHERE name = '$lease'"); retrying every $DEMO_RETRY_MS ms"
            said_waiting=1
        fi
        [ "$(demo_now_us)" -lt "$deadline" ] || return 1
        sleep "$(demo_ms_to_s "$DEMO_RETRY_MS")"
    done
}

# 3. What is there to do?
read_refund() {
    local row
    row=$(demo_psql -At -F ' ' \
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
#    own (demo_write_step, test/demo/lib.sh).  A step that fails is
#    reported and the next one still runs, so a scene in steps shows how
#    each of them ended.  Sets outcome: committed or "rejected SQLSTATE"
#    when every step ended that way, otherwise the steps' outcomes in
#    order, joined by " / ".
write_payout() {
    local steps=() step
    if [ -e "$DEMO_DIR/scenes/$scene.sql" ]; then
        steps=("$DEMO_DIR/scenes/$scene.sql")
    else
        steps=("$DEMO_DIR/scenes/$scene".*.sql)
    fi
    : >"$DEMO_RUN/$name.steps"
    for step in "${steps[@]}"; do
        demo_write_step "$step" "${#steps[@]}" || true
    done
    outcome=$(cut -d ' ' -f 2- "$DEMO_RUN/$name.steps" | awk '!seen[$0]++' |
        paste -s -d '/' - | sed 's|/| / |g')
}

# 6. Release, but only a lock that is still ours.
release_lock() {
    local n
    if [ "$DEMO_LOCK" = postgres ]; then
        if [ "$(demo_psql -At -c "SELECT fencing.lease_release('$lease', '$token')")" = t ]; then
            demo_event "$who" "lease_release('$lease', $token) -> true: released"
        else
            demo_event "$who" "lease_release('$lease', $token) -> false: not mine any more, it expired"
        fi
        return 0
    fi
    n=$(demo_redis EVAL "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end" 1 "$lock" "$name")
    if [ "$n" = 1 ]; then
        demo_event "$who" "release $lock -> released"
    else
        demo_event "$who" "release $lock -> not mine any more: it expired, someone else may hold it now"
    fi
}

if [ "$DEMO_LOCK" = postgres ]; then
    take_lease || { demo_event "$who" "gave up waiting for the lease $lease"; demo_finish failed; }
else
    take_lock || { demo_event "$who" "gave up waiting for $lock"; demo_finish failed; }
fi
read_refund
if [ "$state" != pending ]; then
    demo_event "$who" "refund r-1 is $state already: nothing to do"
    release_lock
    demo_finish skipped
fi
call_payment_provider
write_payout
release_lock
demo_finish "$outcome"
