#!/usr/bin/env bash
# test/bench/run.sh: what fencing costs, side by side with the plain write.
#
#   sudo bash test/bench/run.sh            full run (~25 min)
#   sudo bash test/bench/run.sh --quick    1 round x 2 s (FENCING_BENCH_QUICK=1)
#   sudo bash test/bench/run.sh --smoke    a fixed number of transactions per
#                                          variant (no timing); checks only that
#                                          every variant runs and that the
#                                          guard rejected exactly what it should
#   ... --pg 18                            on PostgreSQL 18 (default 15; 18 is
#                                          built from source without assertions
#                                          and cached, apart from the test
#                                          suites' build; smoke mode uses that one)
#
# Builds the extension without assertions (-O2, as PGXS does), starts one
# throwaway cluster (fencing preloaded, fsync on) and first runs every
# variant in one mixed pgbench run (-n -M prepared -c 4 -j 2, each script of
# weight 1, synchronous_commit = off): all variants share the same moments
# of the machine, and each one's mean latency is compared with its group's
# plain write and, for key scope and the idempotent request, with its floor
# (the least work the same guarantee needs, see setup.sql and
# setup_idem.sql).  Then each variant on its own, interleaved over the
# rounds and rotated (A B C, B C A, C A B, ...) so that noise from the
# machine hits every variant alike; first with synchronous_commit = off
# (CPU-bound), then on.  Then the bulk statements: a million-row UPDATE and
# COPY, guarded, with a C BEFORE ROW trigger that does nothing (the floor
# of any row guard, test/bench/floor) or unguarded, rotated over the
# rounds, each in a fresh backend whose peak memory (VmHWM) and WAL are
# read right after it.
#
# It reports ratios to the plain write of the same round (median and
# min-max over the rounds), never fails on a slow machine, and exits
# non-zero only when a variant did not run as designed: a pgbench error or
# aborted client, a guard that accepted or rejected other than expected,
# or a floor or helper that does not do what it claims (semantic
# self-checks before and after the runs: a stale token inserts nothing, a
# known key inserts nothing and replays its result).  The last lines are
# the ratio tables.
#
# Every check compares counts that are equal by construction, all read in
# the database once the run's backends have ended; none uses pgbench's
# report, whose per-script counts of a timed run are not the server's:
#   - each script's transaction leaves one mark in its variant's table
#     (one row more, or one more on the sum of balance), so the writes that
#     stayed are counted from the data; a guarded table's fencing.stats
#     counts as many accepted writes as that, and no missing token;
#   - the storm's stale writer counts every attempt in a sequence
#     (bench_stale_attempts), and fencing.stats counts exactly as many
#     stale rejections;
#   - in smoke mode each client runs a fixed number of transactions (-t),
#     so the marks of all scripts of a run add up to clients x transactions
#     (plus the stale attempts in the storm): a write that a floor or a
#     helper dropped shows.
#
# Tokens: each pgbench run has its own epoch (-D e=N, growing), each client
# a counter (\set n :n + 1), and client c writes only rows (and accounts)
# with id % clients = c, so every token beats the row's last one and all
# writes are accepted; the storm's stale writer uses 0:1, which always loses
# (the tables start at 1:0).
#
# Environment: FENCING_BENCH_ROUNDS (5), FENCING_BENCH_SECONDS (10),
# FENCING_BENCH_MIXED_SECONDS (60; quick 20), FENCING_BENCH_MIXED_ROUNDS
# (the rounds; 0 skips the mixed run), FENCING_BENCH_TRANSACTIONS (smoke
# mode: transactions per client of each pgbench run, 200),
# FENCING_BENCH_CLIENTS (4), FENCING_BENCH_JOBS (2), FENCING_BENCH_SYNC
# ("off on"), FENCING_BENCH_GROUPS ("update insert idem storm bulk"),
# FENCING_BENCH_BULK_ROWS (1000000), FENCING_BENCH_BULK_ROUNDS (3),
# FENCING_BENCH_ROWTOKEN_ROWS (100000: the COPY with a new token per row),
# FENCING_BENCH_OUT (a directory to keep the raw results in),
# FENCING_KEEP=1 (keep the scratch directory).

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
trap fencing_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mode=full
[ -n "${FENCING_BENCH_QUICK:-}" ] && mode=quick
while [ $# -gt 0 ]; do
    case $1 in
    --quick) mode=quick ;;
    --smoke) mode=smoke ;;
    --pg) [ $# -ge 2 ] || fencing_die "--pg needs a version"; fencing_set_pgver "$2"; shift ;;
    --pg=*) fencing_set_pgver "${1#--pg=}" ;;
    *) fencing_die "unknown argument $1 (use --quick or --smoke, and --pg 15 or --pg 18)" ;;
    esac
    shift
done

# On 18 the timings come from a build without assertions (cached apart
# from the test suites' build); the smoke run only checks behaviour.
[ "$mode" = smoke ] || export FENCING_PG18_CASSERT=no

case $mode in
full) d_rounds=5 d_secs=10 d_mixed=60 d_bulk_rows=1000000 d_bulk_rounds=3 d_sync="off on" ;;
quick) d_rounds=1 d_secs=2 d_mixed=20 d_bulk_rows=1000000 d_bulk_rounds=1 d_sync="off on" ;;
smoke) d_rounds=1 d_secs=1 d_mixed=3 d_bulk_rows=20000 d_bulk_rounds=1 d_sync="off" ;;
esac
# How long each pgbench run lasts: a duration (-T) to measure, or in smoke
# mode a number of transactions per client (-t), known before it runs.
TRANSACTIONS=
[ "$mode" = smoke ] && TRANSACTIONS=${FENCING_BENCH_TRANSACTIONS:-200}
ROUNDS=${FENCING_BENCH_ROUNDS:-$d_rounds}
SECS=${FENCING_BENCH_SECONDS:-$d_secs}
MIXED_SECS=${FENCING_BENCH_MIXED_SECONDS:-$d_mixed}
MIXED_ROUNDS=${FENCING_BENCH_MIXED_ROUNDS:-$ROUNDS}
CLIENTS=${FENCING_BENCH_CLIENTS:-4}
JOBS=${FENCING_BENCH_JOBS:-2}
SYNC_MODES=${FENCING_BENCH_SYNC:-$d_sync}
BENCH_GROUPS=${FENCING_BENCH_GROUPS:-update insert idem storm bulk}
BULK_ROWS=${FENCING_BENCH_BULK_ROWS:-$d_bulk_rows}
BULK_ROUNDS=${FENCING_BENCH_BULK_ROUNDS:-$d_bulk_rounds}
# A new token on every row of one COPY makes each key's scope row be updated
# again and again in one transaction, whose versions cannot be pruned
# before it ends: the cost per row grows with the rows per key, so this
# COPY is kept smaller (100 rows per key).
ROWTOKEN_ROWS=${FENCING_BENCH_ROWTOKEN_ROWS:-$((BULK_ROWS < 100000 ? BULK_ROWS : 100000))}
ROWS=100000
ACCOUNTS=1000

# The variants: group, name, label, pgbench scripts (name[@weight],...),
# the guarded table whose fencing.stats are checked ("-": none), and the
# table where each transaction of the (first) script leaves its mark: one
# row more, or (upd_*) one more on the sum of balance.  The first variant of a group is its baseline; a variant named
# floor is the least work its group's guarantee needs (FLOORS says which
# variants are compared with it).  The storm group is left out of the
# mixed run.
VARIANTS="
update|plain|plain UPDATE|update_plain|-|upd_plain
update|advance|UPDATE via fencing.advance()|update_advance|-|upd_advance
update|guard|guard, row scope, token in column|update_guard|upd_guard|upd_guard
update|token|guard, row scope, token in fencing.token|update_token|upd_token|upd_token
update|plpgsql|PL/pgSQL trigger, row scope|update_plpgsql|-|upd_plpgsql
insert|plain|plain INSERT (ledger)|insert_plain|-|led_plain
insert|floor|key-scope floor: one statement, no trigger|insert_floor|-|led_floor
insert|guard|guard, key scope|insert_guard|led_guard|led_guard
insert|plpgsql|PL/pgSQL trigger, key scope (upsert)|insert_plpgsql|-|led_plpgsql
storm|guard|guard alone (4 clients)|update_guard|upd_guard|upd_guard
storm|storm|stale storm: half the writes stale|update_guard@1,storm_stale@1|upd_guard|upd_guard
"
# variant=floor it is compared with
FLOORS="insert/guard=insert/floor insert/plpgsql=insert/floor"
# targets of the mixed run: variant=ratio, against the plain write or (vs
# floor) against the floor
MIXED_TARGETS="update/advance=0.97 update/guard=0.97"
MIXED_FLOOR_TARGETS="insert/guard=0.97"
# variant=strict floor it is also compared with, and the targets against it
STRICT_FLOORS=""
MIXED_STRICT_TARGETS="idem/idem=0.90"

# The idempotency helpers join when main has them.
HAVE_IDEM=0
if grep -q 'FUNCTION @extschema@.idem_begin' "$FENCING_ROOT"/sql/fencing--*.sql 2>/dev/null; then
    HAVE_IDEM=1
    VARIANTS+="idem|bare|bare business INSERT|idem_bare|-|orders_bare
idem|floor|idempotent-request floor: one statement|idem_floor|-|orders_floor
idem|strict|strict floor: key, hash and result only|idem_strict|-|orders_strict
idem|idem|idem_begin + INSERT + idem_complete|idem_helpers|-|orders_idem
idem|plpgsql|the same hand-written in PL/pgSQL|idem_plpgsql|-|orders_hand
"
    FLOORS+=" idem/idem=idem/floor idem/plpgsql=idem/floor"
    STRICT_FLOORS="idem/idem=idem/strict idem/plpgsql=idem/strict idem/floor=idem/strict"
fi

bench_fail=0
problem() {
    printf 'PROBLEM: %s\n' "$*" >&2
    echo "$*" >>"$WORK/problems"
    bench_fail=1
}

# psql on the bench database, quiet, unaligned, stop on error.
bpsql() {
    fencing_as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -d bench "$@"
}

# accepted, rejected_stale, rejected_missing of a table in fencing.stats.
table_stats() {
    bpsql -F ' ' -c "SELECT coalesce(sum(accepted), 0), coalesce(sum(rejected_stale), 0),
                            coalesce(sum(rejected_missing), 0)
                       FROM fencing.stats WHERE relid = '$1'::regclass"
}

# count(*) of a table.
row_count() {
    bpsql -c "SELECT count(*) FROM $1"
}

# The marks the scripts left in a table: its rows, or for the upd_* tables
# (one row per account, updated) the sum of balance, which every write
# raises by one.
marks() {
    case $1 in
    upd_*) bpsql -c "SELECT coalesce(sum(balance), 0) FROM $1" ;;
    *) row_count "$1" ;;
    esac
}

# The stale writer's attempts so far (bench_stale_attempts).
stale_attempts() {
    bpsql -c "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM bench_stale_attempts"
}

# pgbench with the run's length (-t in smoke mode, else -T $1 seconds) and
# the variables every script reads; then wait until its backends have
# ended, so that what they wrote is all committed and counted before
# anything is read.  Further arguments: the script files.
run_pgbench() {
    local secs=$1 len i n
    shift
    if [ -n "$TRANSACTIONS" ]; then len=(-t "$TRANSACTIONS"); else len=(-T "$secs"); fi
    fencing_as_postgres pgbench -n -M prepared -c "$CLIENTS" -j "$JOBS" "${len[@]}" \
        -D e="$EPOCH" -D n=0 -D nc="$CLIENTS" -D rows="$ROWS" -D accounts="$ACCOUNTS" \
        "$@" bench 2>&1
    local st=$?
    for i in $(seq 1 600); do
        n=$(bpsql -c "SELECT count(*) FROM pg_stat_activity
                       WHERE datname = 'bench' AND application_name = 'pgbench'") || break
        [ "$n" = 0 ] && break
        sleep 0.1
    done
    [ "${n:-0}" = 0 ] || problem "pgbench's backends were still there 60 s after it ended"
    return $st
}

# A guarded table's fencing.stats moved by exactly what the data shows:
# (what, table, stats before, stats after, marks gained, stale attempts).
check_guard() {
    local what=$1 table=$2 a0 s0 m0 a1 s1 m1
    read -r a0 s0 m0 <<<"$3"
    read -r a1 s1 m1 <<<"$4"
    if [ $((a1 - a0)) -ne "$5" ] || [ $((s1 - s0)) -ne "$6" ] || [ $((m1 - m0)) -ne 0 ]; then
        problem "$what: fencing.stats of $table counted $((a1 - a0)) accepted, $((s1 - s0)) stale, $((m1 - m0)) missing; the data shows $5 writes kept and $6 stale attempts (and 0 missing)"
    fi
}

# In smoke mode, the marks of a run add up to clients x transactions:
# (what, marks and stale attempts of all its scripts).
check_total() {
    [ -n "$TRANSACTIONS" ] || return 0
    local what=$1 got=$2 want=$((CLIENTS * TRANSACTIONS))
    [ "$got" -eq "$want" ] ||
        problem "$what: the scripts left $got writes and stale attempts in the database for $want transactions ($CLIENTS clients x $TRANSACTIONS)"
}

# The floors and the helpers do what they claim.  Before the runs: the
# key-scope floor's own statement (taken from its script) inserts nothing
# for a stale token, one row for a newer one, and nothing for the same one
# again; the idempotent-request floor inserts one order for a new key,
# nothing for a known one (whose result it replays), and refuses another
# request under the key with SF003.  After the runs: every account's fence
# is its ledger's newest token, and every key is done, holding the result
# that names its order, one order per key (the floor's and the helpers').
floor_statement() {
    # shellcheck disable=SC1003  # '^\\' is the regex of a leading backslash
    grep -v -e '^\\' -e '^--' "$WORK/scripts/insert_floor.sql"
}

self_check_before() {
    local out
    out=$({
        echo 'BEGIN;'
        echo 'SELECT count(*) AS c0 FROM led_floor \gset'
        echo '\set acct 1'
        echo '\set e 0'
        echo '\set n 1'
        floor_statement
        echo 'SELECT count(*) - :c0 AS stale_rows FROM led_floor;'
        echo '\set e 1'
        echo '\set n 5'
        floor_statement
        echo 'SELECT count(*) - :c0, (SELECT fence FROM led_floor_fences WHERE account_id = 1) FROM led_floor;'
        floor_statement
        echo 'SELECT count(*) - :c0 AS again_rows FROM led_floor;'
        echo 'ROLLBACK;'
    } | bpsql -F ' ' 2>&1) || { problem "key-scope floor self-check failed: $out"; return; }
    [ "$(tr '\n' ' ' <<<"$out")" = "0 1 1:5 1 " ] ||
        problem "key-scope floor self-check: a stale token, a newer one and the same again gave (rows added, fence) $(tr '\n' ' ' <<<"$out"); expected 0, then 1 and 1:5, then still 1"

    [ "$HAVE_IDEM" = 1 ] || return
    local f
    for f in floor strict; do
    # the same checks of each: names ending in _floor become _strict
    out=$(sed -e "s/_floor/_$f/g" -e "s/floor_keys/${f}_keys/g" <<'SQL' | bpsql 2>&1
BEGIN;
DO $$
DECLARE
    n0 bigint := (SELECT count(*) FROM orders_floor);
    a jsonb;
    b jsonb;
BEGIN
    a := bench_order_floor(-1);
    IF (SELECT count(*) FROM orders_floor) <> n0 + 1 OR a IS NULL
       OR (SELECT ref FROM orders_floor WHERE id = (a ->> 'order')::bigint) <> -1
       OR (SELECT result FROM floor_keys WHERE key = 'order:-1') <> a THEN
        RAISE EXCEPTION 'a new key did not insert one order and a key row holding its result';
    END IF;
    b := bench_order_floor(-1);
    IF b IS DISTINCT FROM a OR (SELECT count(*) FROM orders_floor) <> n0 + 1 THEN
        RAISE EXCEPTION 'a known key inserted an order, or did not replay its result';
    END IF;
    BEGIN
        PERFORM bench_order_floor(-1, 999);
        RAISE EXCEPTION 'another request under a known key was accepted';
    EXCEPTION WHEN SQLSTATE 'SF003' THEN
        NULL;
    END;
    IF (SELECT count(*) FROM orders_floor) <> n0 + 1 THEN
        RAISE EXCEPTION 'another request under a known key inserted an order';
    END IF;
END
$$;
ROLLBACK;
SQL
    ) || problem "idempotent-request $f floor self-check: $out"
    done
}

self_check_after() {
    local out keys orders state nk no nbad t
    out=$(bpsql -c "SELECT count(*) FROM led_floor_fences AS f
                     WHERE f.fence OPERATOR(fencing.<>)
                           (SELECT fencing.max(l.fence) FROM led_floor AS l
                             WHERE l.account_id = f.account_id)" 2>&1) ||
        { problem "key-scope floor check failed: $out"; return; }
    [ "$out" = 0 ] || problem "key-scope floor: $out accounts whose fence is not their ledger's newest token"
    [ "$HAVE_IDEM" = 1 ] || return
    for t in "floor_keys orders_floor k.state" "strict_keys orders_strict 'done'" \
        "fencing.idempotency_keys orders_idem k.state"; do
        read -r keys orders state <<<"$t"
        out=$(bpsql -F ' ' -c "SELECT (SELECT count(*) FROM $keys), (SELECT count(*) FROM $orders),
                                      (SELECT count(*) FROM $keys AS k
                                        WHERE $state <> 'done'
                                           OR NOT EXISTS (SELECT FROM $orders AS o
                                                           WHERE o.id = (k.result ->> 'order')::bigint
                                                             AND k.key = 'order:' || o.ref))" 2>&1) ||
            { problem "$keys check failed: $out"; continue; }
        read -r nk no nbad <<<"$out"
        { [ "$nk" = "$no" ] && [ "$nbad" = 0 ]; } ||
            problem "$keys: $nk keys and $no orders in $orders; $nbad keys not done or not naming their order"
    done
}

# epoch 1 is the tables' initial fence (1:0); the storm's stale token 0:1
# loses to every row and never equals one
EPOCH=1

# Run one variant once: pgbench, then check its outcome; appends a line
# "sync group name round tps tps_script1 tps_script2" to the results.
run_variant() {
    local sync=$1 group=$2 name=$3 scripts=$4 table=$5 round=$6 marked=$7
    local files=() s before out st tps marks0 stale0 dm dstale
    local -a per=()
    EPOCH=$((EPOCH + 1))
    IFS=, read -ra s <<<"$scripts"
    for scr in "${s[@]}"; do
        files+=(-f "$WORK/scripts/${scr%@*}.sql${scr#"${scr%@*}"}")
    done
    [ "$table" != - ] && before=$(table_stats "$table")
    marks0=$(marks "$marked")
    stale0=$(stale_attempts)
    out=$(run_pgbench "$SECS" "${files[@]}")
    st=$?
    echo "$out" >"$WORK/log/$sync.$group.$name.$round.log"
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
    if [ "$st" -ne 0 ] || [ -z "$tps" ] || grep -qiE 'aborted|error' <<<"$out"; then
        problem "$group/$name (sync $sync, round $round): pgbench failed (status $st):
$(grep -iE 'aborted|error|fatal' <<<"$out" | head -5)"
        tps=${tps:-0}
    fi
    # per-script tps, in script order (only with two scripts), for the
    # report; pgbench 15 prints " - N transactions (... tps = T)", later
    # ones " - number of transactions actually processed: N (tps = T)"
    mapfile -t per < <(sed -n -e 's/^ - \([0-9]*\) transactions (.*tps = \([0-9.]*\))/\1 \2/p' \
        -e 's/^ - number of transactions actually processed: \([0-9]*\) (tps = \([0-9.]*\))/\1 \2/p' <<<"$out")
    dm=$(($(marks "$marked") - marks0))
    dstale=$(($(stale_attempts) - stale0))
    [ "$table" != - ] && check_guard "$group/$name (sync $sync, round $round)" "$table" \
        "$before" "$(table_stats "$table")" "$dm" "$dstale"
    check_total "$group/$name (sync $sync, round $round)" $((dm + dstale))
    local tps_a=- tps_b=-
    if [ ${#per[@]} -ge 2 ]; then
        tps_a=${per[0]#* }
        tps_b=${per[1]#* }
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$sync" "$group" "$name" "$round" "$tps" \
        "$tps_a" "$tps_b" >>"$WORK/results.tsv"
    if [ "$tps_b" != - ]; then
        printf '  %-8s %-8s round %d: %s tps (accepted %s, rejected %s)\n' "$group" "$name" \
            "$round" "$tps" "$tps_a" "$tps_b" >&2
    else
        printf '  %-8s %-8s round %d: %s tps\n' "$group" "$name" "$round" "$tps" >&2
    fi
}

# One bulk statement in a fresh backend: time, peak memory and the WAL it
# wrote (the server's, nothing else runs meanwhile).  Appends "bulk name
# round seconds vmhwm_kb context_bytes wal_bytes".
run_bulk_one() {
    local name=$1 round=$2 sql=$3 out
    out=$(bpsql -F ' ' <<EOF 2>&1
SELECT extract(epoch FROM clock_timestamp()) AS t0, pg_current_wal_insert_lsn() AS w0 \gset
$sql
SELECT round((extract(epoch FROM clock_timestamp()) - :t0)::numeric, 3),
       (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s*(\d+)'))[1],
       (SELECT sum(used_bytes) FROM pg_backend_memory_contexts),
       pg_current_wal_insert_lsn() - :'w0'::pg_lsn;
EOF
    ) || { problem "bulk/$name (round $round): $out"; return; }
    local secs hwm ctx wal
    read -r secs hwm ctx wal <<<"$(tail -1 <<<"$out")"
    printf 'bulk\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "${secs:-0}" "${hwm:-0}" "${ctx:-0}" "${wal:-0}" \
        >>"$WORK/bulk.tsv"
    printf '  bulk     %-15s round %d: %s s, VmHWM %s kB, contexts %s bytes, WAL %s bytes\n' \
        "$name" "$round" "$secs" "$hwm" "$ctx" "$wal" >&2
}

# The words after $1, rotated left by $1 - 1.
rotate() {
    local k=$(($1 - 1)); shift
    local a=("$@") i
    for i in $(seq 0 $((${#a[@]} - 1))); do
        printf '%s ' "${a[$(((i + k) % ${#a[@]}))]}"
    done
}

run_bulk() {
    local r e guard_stats0 guard_stats1
    for r in $(seq 1 "$BULK_ROUNDS"); do
        EPOCH=$((EPOCH + 1))
        e=$EPOCH
        bpsql -c "VACUUM bulk_plain" -c "VACUUM bulk_floor" -c "VACUUM bulk_guard" -c "CHECKPOINT"
        # the files to load: one token for all rows (a holder loading its
        # batch), and a newer token on every row (each row pays the check)
        bpsql -c "COPY (SELECT 1 + g % $ACCOUNTS, 1, '$e:1' FROM generate_series(1, $BULK_ROWS) g)
                    TO '$WORK/data/one_token.csv' (FORMAT csv)" \
              -c "COPY (SELECT 1 + g % $ACCOUNTS, 1, '$e:' || g FROM generate_series(1, $ROWTOKEN_ROWS) g)
                    TO '$WORK/data/row_tokens.csv' (FORMAT csv)"
        guard_stats0=$(table_stats bulk_guard)
        # unguarded, floor and guarded, rotated by the round (as the
        # variants are), so that none always runs first
        for v in $(rotate "$r" plain floor guard); do
            run_bulk_one "update_$v" "$r" "UPDATE bulk_$v SET balance = balance + 1, fence = '$e:1';"
        done
        guard_stats1=$(table_stats bulk_guard)
        if [ $(( ${guard_stats1%% *} - ${guard_stats0%% *} )) -ne "$BULK_ROWS" ]; then
            problem "bulk UPDATE: fencing.stats counted $guard_stats0 -> $guard_stats1, expected $BULK_ROWS more accepted"
        fi
        bpsql -c "CHECKPOINT"
        for v in $(rotate "$r" plain floor guard); do
            run_bulk_one "copy_$v" "$r" \
                "COPY ledbulk_$v (account_id, amount, fence) FROM '$WORK/data/one_token.csv' (FORMAT csv);"
        done
        run_bulk_one copy_plain_rows "$r" \
            "COPY ledbulk_plain (account_id, amount, fence) FROM '$WORK/data/row_tokens.csv' (FORMAT csv);"
        run_bulk_one copy_guard_rows "$r" \
            "COPY ledbulk_guard_rows (account_id, amount, fence) FROM '$WORK/data/row_tokens.csv' (FORMAT csv);"
    done
}

# The mixed run: every variant but the storm in one pgbench run, each
# script of weight 1, so that all of them meet the same moments of the
# machine; the per-script mean latencies are compared.  Appends lines
# "round group/name latency_ms transactions" to mixed.tsv, and checks
# fencing.stats against the data as run_variant does.
run_mixed() {
    local round=$1 out st i n lat cnt v total=0 dm
    local -a files=() keys=() stats_tables=() marked=() before=() marks0=()
    local -a counts=() lats=()
    EPOCH=$((EPOCH + 1))
    while IFS='|' read -r group name _ scripts table mtable; do
        [ -z "$group" ] || [ "$group" = storm ] && continue
        files+=(-f "$WORK/scripts/$scripts.sql")
        keys+=("$group/$name")
        stats_tables+=("$table")
        marked+=("$mtable")
        if [ "$table" != - ]; then before+=("$(table_stats "$table")"); else before+=(-); fi
        marks0+=("$(marks "$mtable")")
    done <<<"$VARIANTS"
    out=$(run_pgbench "$MIXED_SECS" "${files[@]}")
    st=$?
    echo "$out" >"$WORK/log/mixed.$round.log"
    if [ "$st" -ne 0 ] || grep -qiE 'aborted|error' <<<"$out"; then
        problem "mixed run (round $round): pgbench failed (status $st):
$(grep -iE 'aborted|error|fatal' <<<"$out" | head -5)"
        return
    fi
    n=${#keys[@]}
    for ((i = 0; i < n; i++)); do
        dm=$(($(marks "${marked[$i]}") - ${marks0[$i]}))
        total=$((total + dm))
        [ "${stats_tables[$i]}" != - ] && check_guard "mixed run (round $round), ${keys[$i]}" \
            "${stats_tables[$i]}" "${before[$i]}" "$(table_stats "${stats_tables[$i]}")" "$dm" 0
    done
    check_total "mixed run (round $round)" "$total"
    # per script, in order: " - N transactions (...)" and " - latency
    # average = X ms", for the report (a timed run only: smoke mode has none)
    [ -n "$TRANSACTIONS" ] && return
    mapfile -t counts < <(sed -n 's/^ - \([0-9]*\) transactions (.*/\1/p' <<<"$out")
    mapfile -t lats < <(sed -n 's/^ - latency average = \([0-9.]*\) ms$/\1/p' <<<"$out")
    if [ ${#counts[@]} -ne "$n" ] || [ ${#lats[@]} -ne "$n" ]; then
        problem "mixed run (round $round): pgbench reported ${#counts[@]} script counts and ${#lats[@]} latencies for $n scripts"
        return
    fi
    for ((i = 0; i < n; i++)); do
        v=${keys[$i]} cnt=${counts[$i]} lat=${lats[$i]}
        printf '%s\t%s\t%s\t%s\n' "$round" "$v" "$lat" "$cnt" >>"$WORK/mixed.tsv"
        printf '  mixed    %-16s round %d: %s ms, %s transactions\n' "$v" "$round" "$lat" "$cnt" >&2
    done
}

# The statistics the summaries share (awk functions): the median, minimum
# and maximum of arr[1..n].
AWK_STATS='
function median(arr, n,    i, j, t, b) {
    for (i = 1; i <= n; i++) b[i] = arr[i]
    for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
    return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
}
function minof(arr, n,    i, m) { m = arr[1]; for (i = 2; i <= n; i++) if (arr[i] < m) m = arr[i]; return m }
function maxof(arr, n,    i, m) { m = arr[1]; for (i = 2; i <= n; i++) if (arr[i] > m) m = arr[i]; return m }
'

# The mixed run's table: each variant's mean latency against its group's
# plain write and, where it has one, its floor (median and min-max of the
# per-round ratios; >1 means faster).
summarise_mixed() {
    awk -F'\t' -v floors="$FLOORS" -v targets="$MIXED_TARGETS" -v ftargets="$MIXED_FLOOR_TARGETS" \
        -v sfloors="$STRICT_FLOORS" -v stargets="$MIXED_STRICT_TARGETS" \
        -v clients="$CLIENTS" -v secs="$MIXED_SECS" "$AWK_STATS"'
    # the ratio column of v against base: "median (min-max)", or ""
    function ratio(v, base,    r, n, rt) {
        n = 0
        for (r = 1; r <= rounds; r++)
            if (((r, v) in lat) && ((r, base) in lat) && lat[r, v] > 0) rt[++n] = lat[r, base] / lat[r, v]
        if (n == 0) return ""
        last = median(rt, n)
        return (n == 1) ? sprintf("%.2f", last) : sprintf("%.2f (%.2f-%.2f)", last, minof(rt, n), maxof(rt, n))
    }
    function verdict(v, t, m) { return sprintf(">= %.2f %s", t, sprintf("%.2f", m) + 0 >= t ? "met" : "MISSED") }
    BEGIN {
        n = split(floors, fl, " "); for (i = 1; i <= n; i++) { split(fl[i], kv, "="); floor_of[kv[1]] = kv[2] }
        n = split(targets, tl, " "); for (i = 1; i <= n; i++) { split(tl[i], kv, "="); target[kv[1]] = kv[2] }
        n = split(ftargets, tl, " "); for (i = 1; i <= n; i++) { split(tl[i], kv, "="); ftarget[kv[1]] = kv[2] }
        n = split(sfloors, fl, " "); for (i = 1; i <= n; i++) { split(fl[i], kv, "="); strict_of[kv[1]] = kv[2] }
        n = split(stargets, tl, " "); for (i = 1; i <= n; i++) { split(tl[i], kv, "="); starget[kv[1]] = kv[2] }
    }
    FNR == NR { order[++nv] = $1; label[$1] = $2; split($1, gv, "/"); base[$1] = gv[1] "/" $3; next }
    { lat[$1, $2] = $3; if ($1 > rounds) rounds = $1 }
    END {
        printf "\nmixed run, synchronous_commit = off: every variant in one pgbench run (%d clients, %d s, %d round(s));\n", clients, secs, rounds
        printf "mean latency of the plain write (or the floor) / this one (median, min-max over the rounds)\n"
        printf "%-8s %-44s %-18s %-18s %-18s %s\n", "group", "variant", "vs plain write", "vs floor", "vs strict floor", "target"
        for (vi = 1; vi <= nv; vi++) {
            v = order[vi]; split(v, gv, "/")
            if (gv[1] == "storm" || !((1, v) in lat)) continue
            rp = (v == base[v]) ? "1.00" : ratio(v, base[v]); mp = last
            rf = ""; mf = 0
            if (v in floor_of) { rf = ratio(v, floor_of[v]); mf = last }
            rs = ""; ms = 0
            if (v in strict_of) { rs = ratio(v, strict_of[v]); ms = last }
            t = ""
            if (v in starget && rs != "") t = verdict(v, starget[v], ms) " of strict floor"
            else if (v in ftarget && rf != "") t = verdict(v, ftarget[v], mf) " of floor"
            else if (v in target && rp != "") t = verdict(v, target[v], mp)
            printf "%-8s %-44s %-18s %-18s %-18s %s\n", gv[1], label[v], rp, rf, rs, t
        }
    }' "$WORK/variants" "$WORK/mixed.tsv"
}

# The median and range of per-round ratios, as the table's lines.
summarise() {
    awk -F'\t' -v targets="" "$AWK_STATS"'
    BEGIN {
        nt = split(targets, tl, " ")
        for (i = 1; i <= nt; i++) { split(tl[i], kv, "="); target[kv[1]] = kv[2] }
    }
    FNR == NR { order[++nv] = $1; label[$1] = $2; base[$1] = $3; next }
    {
        key = $2 "/" $3
        tps[$1, key, $4] = $5; a[$1, key, $4] = $6; b[$1, key, $4] = $7
        if (!(($1) in seen_sync)) { seen_sync[$1] = 1; syncs[++ns] = $1 }
        if ($4 > rounds) rounds = $4
    }
    END {
        for (si = 1; si <= ns; si++) {
            s = syncs[si]
            printf "\neach variant on its own, synchronous_commit = %s: throughput / the plain write of the same round (median, min-max over %d rounds)\n", s, rounds
            printf "%-8s %-44s %7s %13s\n", "group", "variant", "ratio", "min-max"
            for (vi = 1; vi <= nv; vi++) {
                v = order[vi]; split(v, gv, "/"); g = gv[1]; bk = g "/" base[v]
                if (!((s, bk, 1) in tps)) continue
                if (v == bk) { printf "%-8s %-44s %7s %13s\n", g, label[v], "1.00", "-"; continue }
                nrows = (v == "storm/storm") ? 2 : 1
                for (row = 1; row <= nrows; row++) {
                    n = 0
                    for (r = 1; r <= rounds; r++) {
                        if (!((s, v, r) in tps) || tps[s, bk, r] <= 0) continue
                        val = (nrows == 1) ? tps[s, v, r] : (row == 1 ? a[s, v, r] : b[s, v, r])
                        ratio[++n] = val / tps[s, bk, r]
                    }
                    if (n == 0) continue
                    m = median(ratio, n)
                    l = label[v]
                    if (nrows == 2) l = (row == 1) ? "storm: accepted writes of fresh holders" : "storm: stale writes rejected"
                    t = ""
                    if (v in target && row == 1) t = sprintf(">= %.2f %s", target[v], (s == "off") ? (m >= target[v] ? "met" : "MISSED") : "")
                    printf "%-8s %-44s %7.2f %6.2f-%-6.2f  %s\n", g, l, m, minof(ratio, n), maxof(ratio, n), t
                }
            }
        }
    }' "$WORK/variants" "$WORK/results.tsv"
}

summarise_bulk() {
    awk -F'\t' "$AWK_STATS"'
    { secs[$2, $3] = $4; hwm[$2, $3] = $5; wal[$2, $3] = $7; if ($3 > rounds) rounds = $3 }
    # time / the unguarded statement and / the floor (a C no-op BEFORE ROW
    # trigger), both of the same round; memory; WAL per row
    function line(name, basename, floorname, label, nrows,    r, n, m, rt, rf, hw, hb, wr, vf) {
        n = 0; m = 0
        for (r = 1; r <= rounds; r++) if (secs[basename, r] > 0) {
            rt[++n] = secs[name, r] / secs[basename, r]; hw[n] = hwm[name, r] / 1024; hb[n] = hwm[basename, r] / 1024
            wr[n] = wal[name, r] / nrows
            if (floorname != "" && secs[floorname, r] > 0) rf[++m] = secs[name, r] / secs[floorname, r]
        }
        if (n == 0) return
        vf = m > 0 ? sprintf("%.2f (%.2f-%.2f)", median(rf, m), minof(rf, m), maxof(rf, m)) : ""
        printf "%-8s %-52s %17s %17s %12.0f %12.0f %8.0f  %s\n", "bulk", label, sprintf("%.2f (%.2f-%.2f)", median(rt, n), minof(rt, n), maxof(rt, n)), vf, median(hb, n), median(hw, n), median(wr, n), target_of[name]
    }
    END {
        target_of["update_guard"] = "<= 1.15"; target_of["copy_guard"] = "<= 1.15"
        printf "\nbulk, %d rows: time / the unguarded statement and / the floor (a C no-op BEFORE ROW trigger), median (min-max) over %d rounds; peak backend memory (VmHWM, MB); WAL bytes per row\n", ROWS, rounds
        printf "%-8s %-52s %17s %17s %12s %12s %8s  %s\n", "group", "variant", "time", "vs floor", "VmHWM plain", "VmHWM this", "WAL/row", "target"
        line("update_plain", "update_plain", "", "UPDATE of every row, unguarded", ROWS)
        line("update_floor", "update_plain", "", "UPDATE of every row, no-op C trigger (floor)", ROWS)
        line("update_guard", "update_plain", "update_floor", "UPDATE of every row, guard row scope", ROWS)
        line("copy_plain", "copy_plain", "", "COPY ledger, unguarded", ROWS)
        line("copy_floor", "copy_plain", "", "COPY ledger, no-op C trigger (floor)", ROWS)
        line("copy_guard", "copy_plain", "copy_floor", "COPY ledger, key scope, one token", ROWS)
        line("copy_guard_rows", "copy_plain_rows", "", "COPY ledger, key scope, a new token per row (" RT " rows)", RT)
    }' ROWS="$BULK_ROWS" RT="$ROWTOKEN_ROWS" "$WORK/bulk.tsv"
}

# --- set-up -----------------------------------------------------------------

fencing_deps
fencing_build ""
fencing_build_bench_floor install
WORK=$FENCING_WORK/bench
mkdir -p "$WORK/scripts" "$WORK/log" "$WORK/data"
cp "$here"/scripts/*.sql "$here"/setup*.sql "$WORK/scripts/"
: >"$WORK/results.tsv"
: >"$WORK/mixed.tsv"
: >"$WORK/bulk.tsv"
: >"$WORK/problems"
chown -R postgres: "$WORK"
# variants, for the summary: group/name, label, baseline name
awk -F'|' 'NF >= 6 { if (!($1 in b)) b[$1] = $2; printf "%s/%s\t%s\t%s\n", $1, $2, $3, b[$1] }' \
    <<<"$VARIANTS" >"$WORK/variants"

fencing_cluster_start bench \
    "shared_preload_libraries = 'fencing'" \
    "fsync = on" \
    "shared_buffers = 1GB" \
    "max_wal_size = 20GB" \
    "checkpoint_timeout = 1h" \
    "autovacuum = off" \
    "jit = off" \
    "max_connections = 60"
fencing_as_postgres createdb bench
fencing_log "setting up (mode $mode: $ROUNDS round(s) x $SECS s, $CLIENTS clients, sync ${SYNC_MODES// /, })"
bpsql -v rows="$ROWS" -v accounts="$ACCOUNTS" -v bulk_rows="$BULK_ROWS" \
    -f "$WORK/scripts/setup.sql" >/dev/null || fencing_die "set-up failed"
if [ "$HAVE_IDEM" = 1 ] && [ -f "$WORK/scripts/setup_idem.sql" ]; then
    bpsql -v rows="$ROWS" -v accounts="$ACCOUNTS" -f "$WORK/scripts/setup_idem.sql" >/dev/null ||
        fencing_die "idempotency set-up failed"
fi

self_check_before

# --- the runs ---------------------------------------------------------------

if [ "$MIXED_ROUNDS" -gt 0 ]; then
    bpsql -c "ALTER DATABASE bench SET synchronous_commit = off"
    bpsql -c "CHECKPOINT"
    fencing_log "mixed run: every variant in one pgbench run, $MIXED_ROUNDS round(s) x $MIXED_SECS s"
    # A warm-up first, then ANALYZE: plans made while the tables were empty
    # (a generic plan of the hand-written variants' key look-up that scans
    # the table, kept by every backend) would make the first round measure
    # the planner's luck rather than the variants.
    warm=()
    while IFS='|' read -r group _ _ scripts _ _; do
        [ -z "$group" ] || [ "$group" = storm ] && continue
        warm+=(-f "$WORK/scripts/$scripts.sql")
    done <<<"$VARIANTS"
    EPOCH=$((EPOCH + 1))
    run_pgbench 3 "${warm[@]}" >"$WORK/log/mixed.warmup.log" 2>&1 ||
        problem "mixed run: the warm-up failed: $(grep -iE 'aborted|error' "$WORK/log/mixed.warmup.log" | head -3)"
    bpsql -c "ANALYZE"
    for round in $(seq 1 "$MIXED_ROUNDS"); do
        run_mixed "$round"
    done
fi

for sync in $SYNC_MODES; do
    bpsql -c "ALTER DATABASE bench SET synchronous_commit = $sync"
    bpsql -c "CHECKPOINT"
    fencing_log "synchronous_commit = $sync"
    for round in $(seq 1 "$ROUNDS"); do
        for group in $BENCH_GROUPS; do
            # this group's variants, rotated by the round (A B C, B C A, ...)
            # so that none always runs first or right after another
            mapfile -t vs < <(awk -F'|' -v g="$group" '$1 == g' <<<"$VARIANTS")
            [ ${#vs[@]} -eq 0 ] && continue
            for i in $(seq 0 $((${#vs[@]} - 1))); do
                IFS='|' read -r _ name _ scripts table marked \
                    <<<"${vs[$(((i + round - 1) % ${#vs[@]}))]}"
                run_variant "$sync" "$group" "$name" "$scripts" "$table" "$round" "$marked"
            done
        done
    done
done
self_check_after

if [[ " $BENCH_GROUPS " == *" bulk "* ]]; then
    bpsql -c "ALTER DATABASE bench SET synchronous_commit = off"
    fencing_log "bulk: $BULK_ROWS rows, $BULK_ROUNDS round(s)"
    run_bulk
fi

if [ -n "${FENCING_BENCH_OUT:-}" ]; then
    mkdir -p "$FENCING_BENCH_OUT"
    cp -r "$WORK/results.tsv" "$WORK/mixed.tsv" "$WORK/bulk.tsv" "$WORK/log" "$FENCING_BENCH_OUT/"
fi

# --- the report ---------------------------------------------------------------

# (a problem found in a subshell is only in the file)
[ -s "$WORK/problems" ] && bench_fail=1
if [ "$mode" = smoke ]; then
    if [ "$bench_fail" -ne 0 ]; then
        echo "bench smoke: FAILED"
        sed 's/^/  /' "$WORK/problems"
        exit 1
    fi
    echo "bench smoke: every variant ran; the guard accepted and rejected as designed; the floors and the helpers did what they claim"
    exit 0
fi

echo
echo "fencing benchmark ($mode): $CLIENTS clients (-j $JOBS), $ROUNDS round(s) x $SECS s per variant, interleaved; $(nproc) CPU(s)"
echo "Ratios >1 mean faster than the plain write; the machine is shared, so read them as +-0.03."
[ -s "$WORK/mixed.tsv" ] && summarise_mixed
[ -s "$WORK/results.tsv" ] && summarise
[ -s "$WORK/bulk.tsv" ] && summarise_bulk
if [ "$bench_fail" -ne 0 ]; then
    echo
    echo "Problems (the variants did not run as designed):"
    sed 's/^/  /' "$WORK/problems"
    exit 1
fi
exit 0
