#!/usr/bin/env bash
# test/demo/idem-worker.sh: one refund worker that pays refund r-2 out
# under the idempotency key 'refund:r-2', a real process with real clients.
#
#   idem-worker.sh NAME SCENE      (started by test/demo.sh, not by hand)
#
# The refund of docs/idempotency.md, "Several steps and an external call:
# the refund": it calls the payment provider (PSP) between database steps,
# so it cannot be one transaction.  What the worker does:
#   1. claim the key           fencing.idem_begin('refund:r-2', request,
#                              lease => DEMO_TTL_MS): started (a claim
#                              token), resumed (a higher token and how far
#                              the last owner got), or done (its result);
#                              SF004 while another owner's lease is live:
#                              retry every DEMO_BACKOFF_MS
#   2. call the PSP            POST /refunds with the same idempotency key:
#                              the PSP sends money for a new key only, and
#                              answers a key it has seen with the refund it
#                              made then (test/demo/psp.py)
#   3. checkpoint              idem_checkpoint(key, token, 'psp:re_N'), right
#                              after the PSP answered (a resumed claim that
#                              already has that recovery point skips this)
#                              (here the orchestrator may freeze it)
#   4. book and complete       test/demo/scenes/SCENE.sql: ledger, debit,
#                              r-2 paid and idem_complete(key, token, result)
#                              in one transaction
#   5. rejected (SF001)?       stop, record nothing, and ask idem_begin what
#                              became of the key: done, with the result to
#                              hand back to the client
#
# Environment (from test/demo.sh): DEMO_RUN, DEMO_PSP_PORT, DEMO_TTL_MS (the
# claim's lease), DEMO_WORK_MS, DEMO_BACKOFF_MS and libpq's PG* variables.
# Files it leaves in $DEMO_RUN:
#   NAME.token      its claim token
#   NAME.claims     what each idem_begin returned, one line each:
#                   started | resumed | done (the in-progress errors are not
#                   written)
#   NAME.booking    it has checkpointed and is about to book (the moment to
#                   freeze it)
#   NAME.replayed   the result idem_begin replayed to it (state done)
#   NAME.result     committed | rejected SQLSTATE | replayed | failed
#   NAME.steps, NAME.error, NAME.done   as for test/demo/worker.sh
# and its events in $DEMO_RUN/timeline.

set -uE
name=$1
scene=$2
. "$(dirname "$0")/lib.sh"

key=refund:r-2
lease="$DEMO_TTL_MS ms"
who="worker $name"
trap 'demo_finish failed' ERR

# 1. Claim the key, or learn that it is done.  Sets state, token,
#    recovery_point and result.  Waits while another owner holds the key.
claim() {
    local err=$DEMO_RUN/$name.claim.err said_waiting='' row sqlstate
    local deadline=$(($(demo_now_us) + (DEMO_TTL_MS * 5 + 5000) * 1000))
    while :; do
        if row=$(demo_psql -v VERBOSITY=verbose -At -F $'\x1f' -c "
                SELECT state, token, coalesce(recovery_point, ''), coalesce(result::text, '')
                  FROM fencing.idem_begin('$key', '$request', lease => '$lease')" 2>"$err"); then
            # (a separator that is not white space: empty fields stay fields)
            IFS=$'\x1f' read -r state token recovery_point result <<<"$row"
            echo "$state" >>"$DEMO_RUN/$name.claims"
            return 0
        fi
        sqlstate=$(sed -n 's/^\(psql:[^ ]* \)\{0,1\}ERROR:  \([0-9A-Z]\{5\}\): .*/\2/p' "$err" | head -1)
        [ "$sqlstate" = SF004 ] || { cat "$err" >&2; return 1; }
        if [ -z "$said_waiting" ]; then
            demo_event "$who" "idem_begin('$key') -> ERROR SF004: $(sed -n 's/^DETAIL:  //p' "$err" | head -1) Retrying every $DEMO_BACKOFF_MS ms"
            said_waiting=1
        fi
        [ "$(demo_now_us)" -lt "$deadline" ] || return 1
        sleep "$(demo_ms_to_s "$DEMO_BACKOFF_MS")"
    done
}

# 2. The PSP, asked with the key.  Sets psp_ref (re_N) and psp_said (new or
#    replayed).
call_psp() {
    local reply
    reply=$(demo_psp POST /refunds "$key" "$amount")
    psp_ref=${reply% *}
    psp_said=${reply#* }
}

amount=$(demo_psql -At -c "SELECT amount_cents FROM $scene.refunds WHERE id = 'r-2'")
request="{\"refund\": \"r-2\", \"amount_cents\": $amount}"

claim || { demo_event "$who" "gave up waiting for $key"; demo_finish failed; }
case $state in
done)
    echo "$result" >"$DEMO_RUN/$name.replayed"
    demo_event "$who" "idem_begin('$key') -> done: $result, replayed; nothing to do"
    demo_finish replayed
    ;;
started)
    echo "$token" >"$DEMO_RUN/$name.token"
    demo_event "$who" "idem_begin('$key', lease '$lease') -> started, claim token $token"
    demo_event "$who" "POST /refunds to the PSP, Idempotency-Key $key, $(demo_cents "$amount")"
    call_psp
    ;;
resumed)
    echo "$token" >"$DEMO_RUN/$name.token"
    demo_event "$who" "idem_begin('$key') -> resumed, claim token $token, recovery point ${recovery_point:-none}"
    demo_event "$who" "${recovery_point:+the PSP was called: }POST /refunds again with the same key, to learn the outcome"
    call_psp
    demo_event "$who" "the PSP says $psp_ref ($psp_said)${recovery_point:+, the refund the recovery point names: nothing more to send}"
    ;;
esac
if [ -n "$recovery_point" ] && [ "$recovery_point" != "psp:$psp_ref" ]; then
    demo_event "$who" "the PSP's $psp_ref is not the recovery point's $recovery_point: stop"
    demo_finish failed
fi

# 3. Checkpoint right after the PSP answered, so that whoever resumes knows.
if [ "$recovery_point" != "psp:$psp_ref" ]; then
    demo_psql -c "SELECT fencing.idem_checkpoint('$key', '$token', 'psp:$psp_ref')" >/dev/null
    demo_event "$who" "idem_checkpoint('$key', $token, 'psp:$psp_ref') -> recovery point recorded"
fi
: >"$DEMO_RUN/$name.booking"
sleep "$(demo_ms_to_s "$DEMO_WORK_MS")"   # preparing the booking

# 4. Book and complete, in one transaction.
DEMO_STEP_VARS=(-v key="$key" -v psp_ref="$psp_ref"
                -v result="{\"refund\": \"r-2\", \"psp_ref\": \"$psp_ref\", \"booked_by\": \"$name\"}")
: >"$DEMO_RUN/$name.steps"
if demo_write_step "$DEMO_DIR/scenes/$scene.sql" 1; then
    demo_finish committed
fi

# 5. Rejected: whatever the booking did was rolled back with it.  Ask the
#    key what became of the request, as a client's retry would.
outcome=$(cut -d ' ' -f 2- "$DEMO_RUN/$name.steps")
claim || demo_finish "$outcome"
if [ "$state" = "done" ]; then
    echo "$result" >"$DEMO_RUN/$name.replayed"
    demo_event "$who" "idem_begin('$key') again -> done: $result, replayed to the client"
fi
demo_finish "$outcome"
