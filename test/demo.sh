#!/usr/bin/env bash
# test/demo.sh: the incident, played with real processes, with and without
# fencing, and with the guard.
#
#   sudo bash test/demo.sh          (or: make demo)
#
# Installs what is missing, builds the extension into a private copy of
# PostgreSQL 15, starts a throwaway cluster (as the postgres OS user) and a
# private redis-server, each on a free port of 127.0.0.1 (of the range
# FENCING_PORTS=LO-HI when it is set, on a shared host), then plays the
# incident with real worker processes (test/demo/worker.sh):
#
#   worker A takes the Redis lock and a fencing token, and freezes in the
#   middle of the payout (kill -STOP: a GC pause longer than the lock's TTL);
#   the lock expires; worker B takes it with a newer token and pays;
#   A is thawed (kill -CONT), still sure the lock is its own, and pays too.
#
# Run 1 writes through fencing.advance(); run 2 is the same shop without it;
# run 3 is run 2's careless code, plus SET LOCAL fencing.token, against
# tables protected by the guard (fencing.protect: refunds in row scope, the
# ledger in key scope per account), writing in two steps so that both
# guards are seen.
#
# Run 4 is the refund with an idempotency key (test/demo/idem-worker.sh):
# worker A claims 'refund:r-2' (fencing.idem_begin), has a payment provider
# stand-in (test/demo/psp.py, a Python http.server on a free port of
# 127.0.0.1) send the money, checkpoints the PSP's refund id, and freezes
# before booking; its claim's lease runs out; worker B resumes the key,
# learns from the PSP (same key) that the money went out, books and
# completes; A is thawed, its booking and idem_complete are rejected
# together (SF001), and idem_begin replays B's result to it.
#
# Runs 5 and 6 are the incident of run 3 with PostgreSQL as the lock
# service (fencing.lease_acquire; DEMO_LOCK=postgres for the workers): in
# run 5 B takes the expired lease and writes, and the guard rejects A's
# older token; in run 6 nobody else comes, and A's write is refused all the
# same because the tables are protected with the lease (fencing.protect(...,
# lease => ...)) and A's lease ran out.
#
# The exit status is 0 when every run played as expected (fenced: exactly
# one payout, A rejected with SF001; unfenced: the refund paid twice;
# guarded: one payout, both of A's writes rejected with SF001 and counted in
# fencing.stats; idempotency: one refund sent by the PSP, one booking, A
# rejected and replayed B's result; leases: A rejected with SF001, once
# after B wrote and once with nobody else writing), so this doubles as a
# smoke test.  Everything started is stopped and the scratch directory
# removed on exit, including on Ctrl-C.
#
# Environment (milliseconds): DEMO_TTL_MS=2000 the lock's TTL (and the
# lease's, and the idempotency claim's), DEMO_PAUSE_MS=2400 how long A stays
# frozen (at least; it stays frozen until B has finished), DEMO_WORK_MS=300
# the payment call, DEMO_RETRY_MS=50 how often a waiting worker retries the
# lock, DEMO_BACKOFF_MS=250 how often a worker retries a key in progress
# (SF004); DEMO_EPOCH=0 the Redis tokens' epoch; FENCING_KEEP=1 keeps the
# scratch directory (logs, timelines); DEMO_SCRAPE=1 prints, after run 3,
# the fencing metrics that Prometheus would scrape from Debian's
# prometheus-postgres-exporter with monitoring/'s query file.
#
# Adding a scene: a schema in test/demo/schema.sql named after the scene,
# the write in test/demo/scenes/SCENE.sql (or in steps, each its own
# transaction: SCENE.1.NAME.sql, SCENE.2.NAME.sql, ...), and here a call to
# a scene function plus an expect_SCENE function, and a column in compare
# (or compare_more).  A worker of another kind is a program of its own in
# test/demo/, started with demo_spawn NAME SCENE SCRIPT (as idem-worker.sh).

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib/common.sh"
. "$here/demo/lib.sh"
trap demo_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

export DEMO_TTL_MS=${DEMO_TTL_MS:-2000}
export DEMO_PAUSE_MS=${DEMO_PAUSE_MS:-2400}
export DEMO_WORK_MS=${DEMO_WORK_MS:-300}
export DEMO_RETRY_MS=${DEMO_RETRY_MS:-50}
export DEMO_BACKOFF_MS=${DEMO_BACKOFF_MS:-250}
export DEMO_EPOCH=${DEMO_EPOCH:-0}
[ "$DEMO_PAUSE_MS" -gt "$DEMO_TTL_MS" ] ||
    fencing_die "DEMO_PAUSE_MS ($DEMO_PAUSE_MS) must exceed DEMO_TTL_MS ($DEMO_TTL_MS): no expiry, no incident"

LOCK=lock:refund-r1
COUNTER=fence:refund-r1
KEY=refund:r-2
FAILED=0
declare -A RESULT BOOKED BALANCE

# ---------------------------------------------------------------------------
# The stage: PostgreSQL with the shop, and a Redis for the locks.
# ---------------------------------------------------------------------------
set_the_stage() {
    fencing_deps
    fencing_build ""
    # the preload gives the guard its counters (fencing.stats)
    fencing_cluster_start demo "shared_preload_libraries = 'fencing'"
    export PATH="$FENCING_BINDIR:$PATH" PGUSER=postgres PGDATABASE=shop
    fencing_log "PostgreSQL on port $PGPORT, scratch directory $FENCING_WORK"
    sql -d postgres -c 'CREATE DATABASE shop'
    sql -f "$here/demo/schema.sql" >/dev/null   # (errors go to stderr)
    demo_redis_start
    fencing_log "redis-server on port $DEMO_REDIS_PORT"
}

# psql as everywhere in the demo: no psqlrc, quiet, stop at the first error.
sql() {
    psql -X -q -v ON_ERROR_STOP=1 "$@"
}

# One value from the shop.
sql_value() {
    sql -At -c "$1"
}

tell_the_story() {
    cat <<EOF

The incident
  Worker A takes the Redis lock for refund r-1 (SET NX PX $DEMO_TTL_MS) and a
  fencing token (INCR), reads the refund and starts paying it out.  Then it
  freezes: kill -STOP for $(demo_ms_to_s "$DEMO_PAUSE_MS") s, longer than the lock's TTL of
  $(demo_ms_to_s "$DEMO_TTL_MS") s (think of a 12 s GC pause against a 10 s TTL, scaled down).
  The lock expires; worker B takes it with a newer token and pays.  Then A
  is thawed (kill -CONT), still sure it holds the lock, and writes too.
  Merchant balance before: 100.00; the refund: 25.00.
  Three runs: with fencing.advance() in the UPDATE; without fencing; and
  the code of run 2, unchanged but for SET LOCAL fencing.token, against
  tables that fencing.protect() guards.

  Then three more.  Run 4: refund r-2 (40.00) under the idempotency key
  '$KEY', paid out through a payment provider: A is frozen after the
  money went out and before it booked it; B resumes the key.  Runs 5 and 6:
  the incident of run 3 with PostgreSQL itself as the lock service
  (fencing.lease_acquire), stopped by the fence when B has written, and by
  the lease when nobody has.
EOF
}

# ---------------------------------------------------------------------------
# Running a scene
# ---------------------------------------------------------------------------

# Start a run of SCENE: its own directory, clock and lock keys.  LOCK:
# the workers' lock service, redis (the default) or postgres (a lease named
# SCENE:refund-r1, fresh in each scene).
begin_run() {
    local scene=$1 title=$2
    DEMO_LOCK=${3:-redis}
    printf '\n=== %s ===\n' "$title"
    DEMO_RUN=$FENCING_WORK/runs/$scene
    LEASE=$scene:refund-r1
    export DEMO_RUN DEMO_LOCK
    mkdir -p "$DEMO_RUN"
    : >"$DEMO_RUN/timeline"
    demo_now_us >"$DEMO_RUN/t0"
    # each run is its own world: no lock held, the token counter from zero
    demo_redis DEL "$LOCK" "$COUNTER" >/dev/null
}

# Freeze worker NAME: SIGSTOP to its whole process group.  WHY: what the
# timeline says about the moment.
freeze() {
    local name=$1 why=${2:-frozen mid-payout, holding the lock as far as it knows} at
    at=$(demo_now_us)
    demo_signal "$name" STOP
    DEMO_AT=$at demo_event demo "kill -STOP worker $name: $why"
    FROZEN_AT=$at
}

# Thaw worker NAME, frozen since FROZEN_AT.
thaw() {
    local name=$1 at
    at=$(demo_now_us)
    DEMO_AT=$at demo_event demo "kill -CONT worker $name after $(demo_ms_to_s $(((at - FROZEN_AT) / 1000))) s: it carries on where it stopped"
    demo_signal "$name" CONT
}

# Wait until the lock that worker NAME took is gone, and put its expiry on
# the timeline at the moment Redis expired it (set time + TTL), or the
# lease's (its expires_at, the server's clock: the same machine's).
await_lock_expiry() {
    local name=$1 expires waited=0
    if [ "$DEMO_LOCK" = postgres ]; then
        expires=$(sql_value "SELECT (extract(epoch FROM expires_at) * 1e6)::bigint
                               FROM fencing.leases WHERE name = '$LEASE' AND holder = '$name'")
        [ -n "$expires" ] || return 1
        sleep_until $((expires + 10000))
        [ "$(sql_value "SELECT fencing.lease_check('$LEASE', '$(cat "$DEMO_RUN/$name.token")')")" = f ] ||
            return 1
        DEMO_AT=$expires demo_event postgres "lease $LEASE expires: $name's ttl of $DEMO_TTL_MS ms ran out while $name is frozen"
        return 0
    fi
    expires=$(($(cat "$DEMO_RUN/$name.locked_at") + DEMO_TTL_MS * 1000))
    while [ "$(demo_redis GET "$LOCK")" = "$name" ]; do
        [ "$waited" -ge $((DEMO_TTL_MS + 5000)) ] && return 1
        sleep 0.01
        waited=$((waited + 10))
    done
    DEMO_AT=$expires demo_event redis "$LOCK expires: $name's PX $DEMO_TTL_MS ran out while $name is frozen"
}

# Sleep until the given time (microseconds since the epoch).
sleep_until() {
    local left=$(($1 - $(demo_now_us)))
    [ "$left" -gt 0 ] && sleep "$(demo_ms_to_s $((left / 1000)))"
    return 0
}

# A run cannot go on: say why, show what the workers said, count a failure.
run_broken() {
    printf 'demo: %s\n' "$1" >&2
    demo_timeline_print >&2
    tail -n 20 "$DEMO_RUN"/*.log >&2 2>/dev/null
    FAILED=$((FAILED + 1))
    return 1
}

# Scene "incident", in the shop of SCENE: A takes the lock and is frozen
# mid-payout; its lock expires; B takes the lock and pays; A is thawed and,
# still believing it holds the lock, writes with its old token.  LOCK: as
# for begin_run; ALONE=alone: there is no worker B (nobody else writes).
scene_incident() {
    local scene=$1 title=$2 lock=${3:-redis} alone=${4:-}
    begin_run "$scene" "$title" "$lock"

    demo_spawn A "$scene"
    demo_wait_file "$DEMO_RUN/A.paying" 10000 ||
        { run_broken "worker A never reached the payout"; return; }
    if [ "$lock" = postgres ]; then
        freeze A "frozen mid-payout, holding the lease as far as it knows"
    else
        freeze A
    fi
    sleep 0.05
    if ! demo_is_stopped A || [ -e "$DEMO_RUN/A.done" ]; then
        run_broken "worker A could not be frozen before it wrote"
        return
    fi

    [ -n "$alone" ] || demo_spawn B "$scene"
    await_lock_expiry A ||
        { run_broken "worker A's lock never expired"; return; }
    sleep_until $((FROZEN_AT + DEMO_PAUSE_MS * 1000))
    # the story needs B's write first: if B is slow, A stays frozen longer
    if [ -z "$alone" ]; then
        demo_reap B 20000 || { run_broken "worker B did not finish"; return; }
    fi
    thaw A
    demo_reap A 20000 || { run_broken "worker A did not finish after the thaw"; return; }

    demo_timeline_print
    show_rejection A
    read_the_books "$scene"
}

# Wait until the claim that worker NAME holds on KEY has run out (its lease,
# renewed by its checkpoint), and put that on the timeline at locked_until
# (the server's clock: the same machine's).  The demo reads the table as
# its superuser; applications cannot (fencing.idempotency_summary is theirs).
await_claim_expiry() {
    local name=$1 row until claim
    row=$(sql_value "SELECT (extract(epoch FROM locked_until) * 1e6)::bigint || ' ' || claim
                       FROM fencing.idempotency_keys WHERE key = '$KEY'")
    until=${row% *}
    claim=${row#* }
    [ -n "$row" ] && [ "$claim" = "$(cat "$DEMO_RUN/$name.token")" ] || return 1
    sleep_until $((until + 10000))
    DEMO_AT=$until demo_event postgres "claim $claim on $KEY: its lease ran out while $name is frozen"
}

# Scene "idem": refund r-2 under the key 'refund:r-2'.  A claims the key,
# the PSP sends the money, A checkpoints the PSP's refund id and is frozen
# before it books; its claim runs out; B (a retry) resumes the key, asks the
# PSP with the same key, books and completes; A is thawed and books too,
# with its old claim token.
scene_idem() {
    local title=$1
    begin_run idem "$title"
    demo_psp_start
    demo_now_us >"$DEMO_RUN/t0"    # the clock starts once the PSP is up
    demo_spawn A idem idem-worker.sh
    demo_wait_file "$DEMO_RUN/A.booking" 10000 ||
        { run_broken "worker A never got to its booking"; return; }
    freeze A "frozen after the PSP sent the money and A checkpointed, before A booked it"
    sleep 0.05
    if ! demo_is_stopped A || [ -e "$DEMO_RUN/A.done" ]; then
        run_broken "worker A could not be frozen before it booked"
        return
    fi

    demo_spawn B idem idem-worker.sh
    await_claim_expiry A ||
        { run_broken "worker A's claim never ran out"; return; }
    sleep_until $((FROZEN_AT + DEMO_PAUSE_MS * 1000))
    demo_reap B 20000 || { run_broken "worker B did not finish"; return; }
    thaw A
    demo_reap A 20000 || { run_broken "worker A did not finish after the thaw"; return; }
    PSP_SENT=$(demo_psp GET /count) || PSP_SENT='?'
    demo_psp_stop

    demo_timeline_print
    show_rejection A
    read_the_idem_books
    printf '\nReplayed to worker A by idem_begin (state done): %s\n' \
        "$(cat "$DEMO_RUN/A.replayed" 2>/dev/null || echo nothing)"
    printf '\nfencing.idempotency_stats (idem_begin outcomes, cluster-wide):\n'
    sql -P footer=off -c 'SELECT * FROM fencing.idempotency_stats' |
        sed -e '/^$/d' -e 's/^/    /'
    printf '\nfencing.idempotency_summary:\n'
    sql -P footer=off -c 'SELECT * FROM fencing.idempotency_summary' |
        sed -e '/^$/d' -e 's/^/    /'
}

# The idem shop's books, for the checks and the comparison.
read_the_idem_books() {
    local ledger
    RESULT[idem.A]=$(cat "$DEMO_RUN/A.result" 2>/dev/null || echo none)
    RESULT[idem.B]=$(cat "$DEMO_RUN/B.result" 2>/dev/null || echo none)
    BOOKED[idem]=$(sql_value "SELECT count(*) FROM idem.ledger WHERE refund = 'r-2'")
    BALANCE[idem]=$(sql_value "SELECT balance_cents FROM idem.accounts WHERE id = 'merchant-1'")
    ledger=$(sql_value "SELECT string_agg(format('%s %s %s (claim %s)', booked_by,
                                        to_char(amount_cents / 100.0, 'FM999990.00'), psp_ref, token),
                                 ', ' ORDER BY id)
                          FROM idem.ledger WHERE refund = 'r-2'")
    printf '\nThe books: refund r-2 %s; ledger: %s; merchant balance %s\n' \
        "$(sql_value "SELECT state || coalesce(' by ' || paid_by, '') || coalesce(' (' || psp_ref || ')', '')
                        FROM idem.refunds WHERE id = 'r-2'")" \
        "${ledger:-empty}" "$(demo_cents "${BALANCE[idem]}")"
    printf 'The payment provider: %s refund(s) sent\n' "$PSP_SENT"
}

# What the guard counted, per protected table of the shop of SCENE.
show_stats() {
    printf '\nThe guard'"'"'s counters (fencing.stats):\n'
    sql -P footer=off -c "SELECT relid, accepted, rejected_stale, rejected_missing
                            FROM fencing.stats
                           WHERE relid::text LIKE '$1.%'
                           ORDER BY relid::text" |
        sed -e '/^$/d' -e 's/^/    /'
}

# One counter of fencing.stats for TABLE (0 when the table has no row).
guard_stat() {
    sql_value "SELECT coalesce((SELECT $2 FROM fencing.stats WHERE relid = '$1'::regclass), 0)"
}

# step_result SCENE NAME STEP: how step STEP of worker NAME's write ended
# in SCENE (from NAME.steps: "committed" or "rejected SQLSTATE").
step_result() {
    sed -n "s/^$3 //p" "$FENCING_WORK/runs/$1/$2.steps" 2>/dev/null
}

# Print the error a worker got, as the server sent it.
show_rejection() {
    local name=$1
    [ -s "$DEMO_RUN/$name.error" ] || return 0
    if [ "$(grep -c ' rejected ' "$DEMO_RUN/$name.steps")" -gt 1 ]; then
        printf '\nWorker %s'"'"'s writes, as PostgreSQL answered them:\n' "$name"
    else
        printf '\nWorker %s'"'"'s write, as PostgreSQL answered it:\n' "$name"
    fi
    sed 's/^/    /' "$DEMO_RUN/$name.error"
}

# Read what the scene's shop now says, for the checks and the comparison.
read_the_books() {
    local scene=$1 ledger
    RESULT[$scene.A]=$(cat "$DEMO_RUN/A.result" 2>/dev/null || echo none)
    RESULT[$scene.B]=$(cat "$DEMO_RUN/B.result" 2>/dev/null || echo none)
    BOOKED[$scene]=$(sql_value "SELECT count(*) FROM $scene.ledger WHERE refund = 'r-1'")
    BALANCE[$scene]=$(sql_value "SELECT balance_cents FROM $scene.accounts WHERE id = 'merchant-1'")
    ledger=$(sql_value "SELECT string_agg(format('%s %s (token %s)', booked_by,
                                        to_char(amount_cents / 100.0, 'FM999990.00'), token),
                                 ', ' ORDER BY id)
                          FROM $scene.ledger WHERE refund = 'r-1'")
    printf '\nThe books: refund r-1 %s; ledger: %s; merchant balance %s\n' \
        "$(sql_value "SELECT state || coalesce(' by ' || paid_by, '') FROM $scene.refunds WHERE id = 'r-1'")" \
        "${ledger:-empty}" "$(demo_cents "${BALANCE[$scene]}")"
}

# ---------------------------------------------------------------------------
# What each scene must show
# ---------------------------------------------------------------------------

# check DESCRIPTION COMMAND...: one expectation, printed and counted.
check() {
    local what=$1
    shift
    if "$@"; then
        printf '  ok      %s\n' "$what"
    else
        printf '  FAILED  %s\n' "$what"
        FAILED=$((FAILED + 1))
    fi
}

expect_fenced() {
    echo
    check "worker B's write (token $DEMO_EPOCH:2) committed" \
        [ "${RESULT[fenced.B]}" = committed ]
    check "worker A's write (token $DEMO_EPOCH:1) rejected with SF001" \
        [ "${RESULT[fenced.A]}" = "rejected SF001" ]
    check "exactly one payout booked" [ "${BOOKED[fenced]}" = 1 ]
    check "balance debited once: 75.00" [ "${BALANCE[fenced]}" = 7500 ]
    check "refund r-1 fenced at B's token" \
        [ "$(sql_value "SELECT fence FROM fenced.refunds WHERE id = 'r-1'")" = "$DEMO_EPOCH:2" ]
}

expect_unfenced() {
    echo
    check "worker B's write committed" [ "${RESULT[unfenced.B]}" = committed ]
    check "worker A's late write committed too" [ "${RESULT[unfenced.A]}" = committed ]
    check "the refund booked twice" [ "${BOOKED[unfenced]}" = 2 ]
    check "balance debited twice: 50.00" [ "${BALANCE[unfenced]}" = 5000 ]
}

expect_guarded() {
    local t=$DEMO_EPOCH
    echo
    check "worker B's ledger INSERT (token $t:2) committed" \
        [ "$(step_result guarded B 1.ledger)" = committed ]
    check "worker B's refund UPDATE (token $t:2) committed" \
        [ "$(step_result guarded B 2.refund)" = committed ]
    check "worker A's ledger INSERT (token $t:1) rejected with SF001 (key scope)" \
        [ "$(step_result guarded A 1.ledger)" = "rejected SF001" ]
    check "worker A's refund UPDATE (token $t:1) rejected with SF001 (row scope)" \
        [ "$(step_result guarded A 2.refund)" = "rejected SF001" ]
    check "both rejections name the fence they lost to, $t:2" \
        [ "$(grep -c "DETAIL: .* $t:2\.\$" "$DEMO_RUN/A.error" 2>/dev/null)" = 2 ]
    check "exactly one payout booked" [ "${BOOKED[guarded]}" = 1 ]
    check "balance debited once: 75.00" [ "${BALANCE[guarded]}" = 7500 ]
    check "refund r-1 paid by B and fenced at B's token" \
        [ "$(sql_value "SELECT paid_by || ' ' || fence FROM guarded.refunds WHERE id = 'r-1'")" = "B $t:2" ]
    check "merchant-1's ledger fence (fencing.scopes) at B's token" \
        [ "$(sql_value "SELECT fence FROM fencing.scopes
                         WHERE scope_name = 'guarded.ledger'
                           AND key = fencing.scope_key('merchant-1')")" = "$t:2" ]
    check "fencing.stats, ledger: 1 accepted, 1 rejected stale, 0 missing" \
        [ "$(guard_stat guarded.ledger accepted)/$(guard_stat guarded.ledger rejected_stale)/$(guard_stat guarded.ledger rejected_missing)" = 1/1/0 ]
    check "fencing.stats, refunds: 1 accepted, 1 rejected stale, 0 missing" \
        [ "$(guard_stat guarded.refunds accepted)/$(guard_stat guarded.refunds rejected_stale)/$(guard_stat guarded.refunds rejected_missing)" = 1/1/0 ]
}

# One counter of fencing.idempotency_stats.
idem_stat() {
    sql_value "SELECT $1 FROM fencing.idempotency_stats"
}

expect_idem() {
    local run=$FENCING_WORK/runs/idem ta tb
    ta=$(cat "$run/A.token" 2>/dev/null)
    tb=$(cat "$run/B.token" 2>/dev/null)
    echo
    check "worker A's idem_begin: started, claim token $ta" \
        [ "$(head -1 "$run/A.claims" 2>/dev/null)" = started ]
    check "worker B's idem_begin: resumed, with a higher claim token ($tb)" \
        [ "$(head -1 "$run/B.claims" 2>/dev/null)/$(sql_value "SELECT fencing.fence_gt('$tb', '$ta')")" = resumed/t ]
    check "worker B's booking + idem_complete (claim $tb) committed" \
        [ "${RESULT[idem.B]}" = committed ]
    check "worker A's booking + idem_complete (claim $ta) rejected with SF001, rolled back" \
        [ "${RESULT[idem.A]}" = "rejected SF001" ]
    check "worker A's next idem_begin: done, replaying B's result" \
        [ "$(tail -1 "$run/A.claims" 2>/dev/null)/$(sql_value "SELECT '$(cat "$run/A.replayed" 2>/dev/null)'::jsonb ->> 'booked_by'")" = done/B ]
    check "the payment provider sent exactly one refund" [ "$PSP_SENT" = 1 ]
    check "exactly one ledger entry for r-2" [ "${BOOKED[idem]}" = 1 ]
    check "balance debited once: 60.00" [ "${BALANCE[idem]}" = 6000 ]
    check "the key is done, its result B's" \
        [ "$(sql_value "SELECT state || ' ' || (result ->> 'booked_by') FROM fencing.idempotency_keys WHERE key = '$KEY'")" = "done B" ]
    check "fencing.idempotency_stats: 1 started, 1 resumed, 1 replayed, 0 reused" \
        [ "$(idem_stat started)/$(idem_stat resumed)/$(idem_stat replayed)/$(idem_stat reused_rejected)" = 1/1/1/0 ]
    check "fencing.idempotency_stats: B's retries while A's claim was live counted ($(idem_stat in_progress_rejected))" \
        [ "$(idem_stat in_progress_rejected)" -ge 1 ]
    check "fencing.idempotency_summary: 0 running, 1 done" \
        [ "$(sql_value "SELECT running || '/' || done FROM fencing.idempotency_summary")" = 0/1 ]
}

expect_leased() {
    local run=$FENCING_WORK/runs/leased ta tb
    ta=$(cat "$run/A.token" 2>/dev/null)
    tb=$(cat "$run/B.token" 2>/dev/null)
    echo
    check "worker B's token from the expired lease ($tb) is newer than A's ($ta)" \
        [ "$(sql_value "SELECT fencing.fence_gt('$tb', '$ta')")" = t ]
    check "worker B's write committed" [ "${RESULT[leased.B]}" = committed ]
    check "worker A's write rejected with SF001" [ "${RESULT[leased.A]}" = "rejected SF001" ]
    check "the rejection names the fence it lost to, B's $tb" \
        grep -q "^DETAIL: .* $tb\.\$" "$run/A.error"
    check "exactly one payout booked" [ "${BOOKED[leased]}" = 1 ]
    check "balance debited once: 75.00" [ "${BALANCE[leased]}" = 7500 ]
    check "fencing.stats, refunds: 1 accepted, 1 rejected stale" \
        [ "$(guard_stat leased.refunds accepted)/$(guard_stat leased.refunds rejected_stale)" = 1/1 ]
}

expect_lease_guarded() {
    local run=$FENCING_WORK/runs/lease_guarded ta lease=lease_guarded:refund-r1
    ta=$(cat "$run/A.token" 2>/dev/null)
    echo
    check "nobody else took the lease: its token is still A's, $ta" \
        [ "$(sql_value "SELECT token FROM fencing.leases WHERE name = '$lease'")" = "$ta" ]
    check "fencing.lease_check('$lease', '$ta') is false: the lease ran out" \
        [ "$(sql_value "SELECT fencing.lease_check('$lease', '$ta')")" = f ]
    check "worker A's write rejected with SF001" \
        [ "${RESULT[lease_guarded.A]}" = "rejected SF001" ]
    check "the rejection says A's lease expired" \
        grep -q "^ERROR:  SF001: lease \"$lease\" of table \"refunds\" expired" "$run/A.error"
    check "no newer token had written r-1: a plain fence would have let A through" \
        [ "$(sql_value "SELECT fencing.advance(fence, '$ta') FROM lease_guarded.refunds WHERE id = 'r-1'")" = "$ta" ]
    check "nothing booked, r-1 still pending, balance 100.00" \
        [ "${BOOKED[lease_guarded]}/$(sql_value "SELECT state FROM lease_guarded.refunds WHERE id = 'r-1'")/${BALANCE[lease_guarded]}" = 0/pending/10000 ]
    check "fencing.stats, refunds: 0 accepted, 1 rejected stale" \
        [ "$(guard_stat lease_guarded.refunds accepted)/$(guard_stat lease_guarded.refunds rejected_stale)" = 0/1 ]
}

# How a worker's write ended, in words.
outcome() {
    case $1 in
    committed) echo "committed" ;;
    "rejected "*) echo "rejected (${1#rejected })" ;;
    *) echo "$1" ;;
    esac
}

# "R of N": how many of worker NAME's N write steps in SCENE were rejected.
rejected_count() {
    local f=$FENCING_WORK/runs/$1/$2.steps
    [ -e "$f" ] || { echo "?"; return; }
    printf '%d of %d' "$(grep -c ' rejected ' "$f")" "$(wc -l <"$f")"
}

# one row of the tables below: a label and three columns
table_row() { printf '  %-36s %-18s %-18s %s\n' "$@"; }

compare() {
    printf '\n=== With and without fencing (runs 1 to 3) ===\n'
    table_row "" "with advance()" "without fencing" "with the guard"
    table_row "worker B's writes (the lock holder)" \
        "$(outcome "${RESULT[fenced.B]:-none}")" "$(outcome "${RESULT[unfenced.B]:-none}")" \
        "$(outcome "${RESULT[guarded.B]:-none}")"
    table_row "worker A's writes (lock expired)" \
        "$(outcome "${RESULT[fenced.A]:-none}")" "$(outcome "${RESULT[unfenced.A]:-none}")" \
        "$(outcome "${RESULT[guarded.A]:-none}")"
    table_row "  of them rejected by PostgreSQL" \
        "$(rejected_count fenced A)" "$(rejected_count unfenced A)" "$(rejected_count guarded A)"
    table_row "payouts booked for r-1 (25.00)" \
        "${BOOKED[fenced]:-?}" "${BOOKED[unfenced]:-?}" "${BOOKED[guarded]:-?}"
    table_row "merchant balance (was 100.00)" \
        "$(demo_cents "${BALANCE[fenced]:-0}")" "$(demo_cents "${BALANCE[unfenced]:-0}")" \
        "$(demo_cents "${BALANCE[guarded]:-0}")"
}

compare_more() {
    printf '\n=== The idempotency key and the lease (runs 4 to 6) ===\n'
    table_row "" "key (run 4)" "lease (run 5)" "lease check (run 6)"
    table_row "worker B's writes" \
        "$(outcome "${RESULT[idem.B]:-none}")" "$(outcome "${RESULT[leased.B]:-none}")" "(no worker B)"
    table_row "worker A's writes (after its pause)" \
        "$(outcome "${RESULT[idem.A]:-none}")" "$(outcome "${RESULT[leased.A]:-none}")" \
        "$(outcome "${RESULT[lease_guarded.A]:-none}")"
    table_row "  refused by" "idem_complete" "the guard's fence" "the guard's lease"
    table_row "bookings (refund r-2 / r-1)" \
        "${BOOKED[idem]:-?}" "${BOOKED[leased]:-?}" "${BOOKED[lease_guarded]:-?} (A must retry)"
    table_row "merchant balance (was 100.00)" \
        "$(demo_cents "${BALANCE[idem]:-0}")" "$(demo_cents "${BALANCE[leased]:-0}")" \
        "$(demo_cents "${BALANCE[lease_guarded]:-0}")"
    table_row "refunds the payment provider sent" "${PSP_SENT:-?} (40.00)" "-" "-"
}

# DEMO_SCRAPE=1: the fencing metrics of one scrape of the exporter
# (test/demo/exporter.sh), as Prometheus would see them after WHEN.
scrape_after() {
    [ -n "${DEMO_SCRAPE:-}" ] || return 0
    . "$here/demo/exporter.sh"
    if ! fencing_exporter_install || ! fencing_exporter_start shop; then
        fencing_log "DEMO_SCRAPE: the exporter did not start"
        return 0
    fi
    printf '\n--- prometheus-postgres-exporter, one scrape after %s (fencing_ metrics) ---\n' "$1"
    fencing_exporter_fencing | grep -v '^#'
    fencing_exporter_stop
}

# ---------------------------------------------------------------------------
# The play
# ---------------------------------------------------------------------------
set_the_stage
tell_the_story

scene_incident fenced "Run 1: with fencing: SET fence = fencing.advance(fence, token)" &&
    expect_fenced
scene_incident unfenced "Run 2: without fencing: the same workers, no fence column" &&
    expect_unfenced
scene_incident guarded "Run 3: with the guard: run 2's code + SET LOCAL fencing.token, tables protected" &&
    show_stats guarded && scrape_after "run 3" && expect_guarded

scene_idem "Run 4: an idempotency key: refund r-2 through a payment provider, A frozen before it books" &&
    expect_idem
scene_incident leased "Run 5: the lock is a PostgreSQL lease (fencing.lease_acquire); B writes first: the fence stops A" \
    postgres && show_stats leased && expect_leased
scene_incident lease_guarded "Run 6: the same, the tables protected with the lease; nobody else writes: the lease stops A" \
    postgres alone && show_stats lease_guarded && expect_lease_guarded

compare
compare_more
echo
if [ "$FAILED" -eq 0 ]; then
    echo "demo: as expected: with advance() or the guard, one payout and the stale writes rejected (SF001); without fencing, the refund paid twice;"
    echo "      with the idempotency key, one refund sent and booked once, the stale claim rejected (SF001) and B's result replayed;"
    echo "      with the lease, A rejected (SF001) after B wrote, and with nobody else writing"
else
    echo "demo: $FAILED expectation(s) not met (FENCING_KEEP=1 keeps the logs)"
fi
[ "$FAILED" -eq 0 ]
