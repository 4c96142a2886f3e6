#!/usr/bin/env bash
# test/bench/run.sh: what fencing costs, side by side with the plain write.
#
#   sudo bash test/bench/run.sh            full run (~25 min)
#   sudo bash test/bench/run.sh --quick    1 round x 2 s (FENCING_BENCH_QUICK=1)
#   sudo bash test/bench/run.sh --smoke    ~1 s per variant; checks only that
#                                          every variant runs and that the
#                                          guard rejected exactly what it should
#   ... --pg 18                            on PostgreSQL 18 (default 15; 18 is
#                                          the harness's cached build, with
#                                          assertions: compare ratios, not times)
#
# Builds the extension without assertions (-O2, as PGXS does), starts one
# throwaway cluster (fencing preloaded, fsync on) and runs pgbench -n
# -M prepared -c 4 -j 2 on each variant, interleaved over the rounds and
# rotated (A B C, B C A, C A B, ...) so that noise from the machine hits
# every variant alike; first
# with synchronous_commit = off (CPU-bound), then on.  Then the bulk
# statements: a million-row UPDATE and COPY, guarded or not, each in a
# fresh backend whose peak memory (VmHWM) is read right after it.
#
# It reports ratios to the plain write of the same round (median and
# min-max over the rounds), never fails on a slow machine, and exits
# non-zero only when a variant did not run as designed: a pgbench error or
# aborted client, or a guard that accepted or rejected other than expected
# (checked against fencing.stats).  The last lines are the ratio table.
#
# Tokens: each pgbench run has its own epoch (-D e=N, growing), each client
# a counter (\set n :n + 1), and client c writes only rows (and accounts)
# with id % clients = c, so every token beats the row's last one and all
# writes are accepted; the storm's stale writer uses 0:1, which always loses
# (the tables start at 1:0).
#
# Environment: FENCING_BENCH_ROUNDS (5), FENCING_BENCH_SECONDS (10),
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
full) d_rounds=5 d_secs=10 d_bulk_rows=1000000 d_bulk_rounds=3 d_sync="off on" ;;
quick) d_rounds=1 d_secs=2 d_bulk_rows=1000000 d_bulk_rounds=1 d_sync="off on" ;;
smoke) d_rounds=1 d_secs=1 d_bulk_rows=20000 d_bulk_rounds=1 d_sync="off" ;;
esac
ROUNDS=${FENCING_BENCH_ROUNDS:-$d_rounds}
SECS=${FENCING_BENCH_SECONDS:-$d_secs}
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
# the guarded table whose fencing.stats are checked ("-": none), and
# whether a run may be rejected (storm) or must all be accepted.  The first
# variant of a group is its baseline.
VARIANTS="
update|plain|plain UPDATE|update_plain|-
update|advance|UPDATE via fencing.advance()|update_advance|-
update|guard|guard, row scope, token in column|update_guard|upd_guard
update|token|guard, row scope, token in fencing.token|update_token|upd_token
update|plpgsql|PL/pgSQL trigger, row scope|update_plpgsql|-
insert|plain|plain INSERT (ledger)|insert_plain|-
insert|guard|guard, key scope|insert_guard|led_guard
insert|plpgsql|PL/pgSQL trigger, key scope (upsert)|insert_plpgsql|-
storm|guard|guard alone (4 clients)|update_guard|upd_guard
storm|storm|stale storm: half the writes stale|update_guard@1,storm_stale@1|upd_guard
"

# The idempotency helpers join when main has them.
HAVE_IDEM=0
if grep -q 'FUNCTION @extschema@.idem_begin' "$FENCING_ROOT"/sql/fencing--*.sql 2>/dev/null; then
    HAVE_IDEM=1
    VARIANTS+="idem|bare|bare business INSERT|idem_bare|-
idem|idem|idem_begin + INSERT + idem_complete|idem_helpers|-
idem|plpgsql|the same hand-written in PL/pgSQL|idem_plpgsql|-
"
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

# epoch 1 is the tables' initial fence (1:0); the storm's stale token 0:1
# loses to every row and never equals one
EPOCH=1

# Run one variant once: pgbench, then check its outcome; appends a line
# "sync group name round tps tps_script1 tps_script2" to the results.
run_variant() {
    local sync=$1 group=$2 name=$3 scripts=$4 table=$5 round=$6
    local files=() s before after out st tps ntx
    local -a per=()
    EPOCH=$((EPOCH + 1))
    IFS=, read -ra s <<<"$scripts"
    for scr in "${s[@]}"; do
        files+=(-f "$WORK/scripts/${scr%@*}.sql${scr#"${scr%@*}"}")
    done
    [ "$table" != - ] && before=$(table_stats "$table")
    out=$(fencing_as_postgres pgbench -n -M prepared -c "$CLIENTS" -j "$JOBS" -T "$SECS" \
        -D e="$EPOCH" -D n=0 -D nc="$CLIENTS" -D rows="$ROWS" -D accounts="$ACCOUNTS" \
        "${files[@]}" bench 2>&1)
    st=$?
    echo "$out" >"$WORK/log/$sync.$group.$name.$round.log"
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
    ntx=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    if [ "$st" -ne 0 ] || [ -z "$tps" ] || grep -qiE 'aborted|error' <<<"$out"; then
        problem "$group/$name (sync $sync, round $round): pgbench failed (status $st):
$(grep -iE 'aborted|error|fatal' <<<"$out" | head -5)"
        tps=${tps:-0}
    fi
    # per-script counts and tps, in script order (only with two scripts);
    # pgbench 15 prints " - N transactions (... tps = T)", later ones
    # " - number of transactions actually processed: N (tps = T)"
    mapfile -t per < <(sed -n -e 's/^ - \([0-9]*\) transactions (.*tps = \([0-9.]*\))/\1 \2/p' \
        -e 's/^ - number of transactions actually processed: \([0-9]*\) (tps = \([0-9.]*\))/\1 \2/p' <<<"$out")
    if [ "$table" != - ]; then
        local a0 s0 m0 a1 s1 m1 want_acc want_stale
        after=$(table_stats "$table")
        read -r a0 s0 m0 <<<"$before"
        read -r a1 s1 m1 <<<"$after"
        if [ ${#per[@]} -ge 2 ]; then
            want_acc=${per[0]%% *}
            want_stale=${per[1]%% *}
        else
            want_acc=$ntx
            want_stale=0
        fi
        # pgbench's per-script counts of a two-script run are a few short
        # of what the server did (up to 0.02 % in the runs measured)
        local slack=0
        [ ${#per[@]} -ge 2 ] && slack=$((2 * CLIENTS + (want_acc + want_stale) / 1000))
        if [ $((m1 - m0)) -ne 0 ] ||
            [ $((s1 - s0 - want_stale)) -lt 0 ] || [ $((s1 - s0 - want_stale)) -gt "$slack" ] ||
            [ $((a1 - a0 - want_acc)) -lt 0 ] || [ $((a1 - a0 - want_acc)) -gt "$slack" ]; then
            problem "$group/$name (sync $sync, round $round): fencing.stats of $table counted $((a1 - a0)) accepted, $((s1 - s0)) stale, $((m1 - m0)) missing; expected $want_acc accepted, $want_stale stale, 0 missing"
        fi
    fi
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

# One bulk statement in a fresh backend: time and peak memory afterwards.
# Appends "bulk name round seconds vmhwm_kb context_bytes".
run_bulk_one() {
    local name=$1 round=$2 sql=$3 out
    out=$(bpsql -F ' ' <<EOF 2>&1
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
$sql
SELECT round((extract(epoch FROM clock_timestamp()) - :t0)::numeric, 3),
       (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\s*(\d+)'))[1],
       (SELECT sum(used_bytes) FROM pg_backend_memory_contexts);
EOF
    ) || { problem "bulk/$name (round $round): $out"; return; }
    local secs hwm ctx
    read -r secs hwm ctx <<<"$(tail -1 <<<"$out")"
    printf 'bulk\t%s\t%s\t%s\t%s\t%s\n' "$name" "$round" "${secs:-0}" "${hwm:-0}" "${ctx:-0}" \
        >>"$WORK/bulk.tsv"
    printf '  bulk     %-10s round %d: %s s, VmHWM %s kB, contexts %s bytes\n' \
        "$name" "$round" "$secs" "$hwm" "$ctx" >&2
}

run_bulk() {
    local r e guard_stats0 guard_stats1
    for r in $(seq 1 "$BULK_ROUNDS"); do
        EPOCH=$((EPOCH + 1))
        e=$EPOCH
        bpsql -c "VACUUM bulk_plain" -c "VACUUM bulk_guard" -c "CHECKPOINT"
        # the files to load: one token for all rows (a holder loading its
        # batch), and a newer token on every row (each row pays the check)
        bpsql -c "COPY (SELECT 1 + g % $ACCOUNTS, 1, '$e:1' FROM generate_series(1, $BULK_ROWS) g)
                    TO '$WORK/data/one_token.csv' (FORMAT csv)" \
              -c "COPY (SELECT 1 + g % $ACCOUNTS, 1, '$e:' || g FROM generate_series(1, $ROWTOKEN_ROWS) g)
                    TO '$WORK/data/row_tokens.csv' (FORMAT csv)"
        guard_stats0=$(table_stats bulk_guard)
        run_bulk_one update_plain "$r" "UPDATE bulk_plain SET balance = balance + 1, fence = '$e:1';"
        run_bulk_one update_guard "$r" "UPDATE bulk_guard SET balance = balance + 1, fence = '$e:1';"
        guard_stats1=$(table_stats bulk_guard)
        if [ $(( ${guard_stats1%% *} - ${guard_stats0%% *} )) -ne "$BULK_ROWS" ]; then
            problem "bulk UPDATE: fencing.stats counted $guard_stats0 -> $guard_stats1, expected $BULK_ROWS more accepted"
        fi
        bpsql -c "CHECKPOINT"
        run_bulk_one copy_plain "$r" \
            "COPY ledbulk_plain (account_id, amount, fence) FROM '$WORK/data/one_token.csv' (FORMAT csv);"
        run_bulk_one copy_guard "$r" \
            "COPY ledbulk_guard (account_id, amount, fence) FROM '$WORK/data/one_token.csv' (FORMAT csv);"
        run_bulk_one copy_plain_rows "$r" \
            "COPY ledbulk_plain (account_id, amount, fence) FROM '$WORK/data/row_tokens.csv' (FORMAT csv);"
        run_bulk_one copy_guard_rows "$r" \
            "COPY ledbulk_guard_rows (account_id, amount, fence) FROM '$WORK/data/row_tokens.csv' (FORMAT csv);"
    done
}

# The median and range of per-round ratios, as the table's lines.
summarise() {
    awk -F'\t' -v targets="update/advance=0.97 update/guard=0.93 insert/guard=0.80 idem/idem=0.70" '
    function median(arr, n,    i, j, t, b) {
        for (i = 1; i <= n; i++) b[i] = arr[i]
        for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
        return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
    }
    function minof(arr, n,    i, m) { m = arr[1]; for (i = 2; i <= n; i++) if (arr[i] < m) m = arr[i]; return m }
    function maxof(arr, n,    i, m) { m = arr[1]; for (i = 2; i <= n; i++) if (arr[i] > m) m = arr[i]; return m }
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
            printf "\nsynchronous_commit = %s: throughput / the plain write of the same round (median, min-max over %d rounds)\n", s, rounds
            printf "%-8s %-44s %7s %13s  %s\n", "group", "variant", "ratio", "min-max", "target (sync off)"
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
    awk -F'\t' '
    function median(arr, n,    i, j, t, b) {
        for (i = 1; i <= n; i++) b[i] = arr[i]
        for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
        return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
    }
    { secs[$2, $3] = $4; hwm[$2, $3] = $5; if ($3 > rounds) rounds = $3 }
    function line(name, basename, label,    r, n, rt, hw, hb) {
        n = 0
        for (r = 1; r <= rounds; r++) if (secs[basename, r] > 0) { rt[++n] = secs[name, r] / secs[basename, r]; hw[n] = hwm[name, r] / 1024; hb[n] = hwm[basename, r] / 1024 }
        if (n == 0) return
        printf "%-8s %-44s %7.2f %12.0f %12.0f  %s\n", "bulk", label, median(rt, n), median(hb, n), median(hw, n), target_of[name]
    }
    END {
        target_of["update_guard"] = "<= 1.30"; target_of["copy_guard"] = "<= 1.30"
        printf "\nbulk, %d rows: time / the unguarded statement (median over %d rounds), peak backend memory (VmHWM, MB)\n", ROWS, rounds
        printf "%-8s %-44s %7s %12s %12s  %s\n", "group", "variant", "time", "VmHWM plain", "VmHWM this", "target"
        line("update_guard", "update_plain", "UPDATE of every row, guard row scope")
        line("copy_guard", "copy_plain", "COPY ledger, key scope, one token")
        line("copy_guard_rows", "copy_plain_rows", "COPY ledger, key scope, a new token per row (" RT " rows)")
    }' ROWS="$BULK_ROWS" RT="$ROWTOKEN_ROWS" "$WORK/bulk.tsv"
}

# --- set-up -----------------------------------------------------------------

fencing_deps
fencing_build ""
WORK=$FENCING_WORK/bench
mkdir -p "$WORK/scripts" "$WORK/log" "$WORK/data"
cp "$here"/scripts/*.sql "$here"/setup*.sql "$WORK/scripts/"
: >"$WORK/results.tsv"
: >"$WORK/bulk.tsv"
: >"$WORK/problems"
chown -R postgres: "$WORK"
# variants, for the summary: group/name, label, baseline name
awk -F'|' 'NF >= 5 { if (!($1 in b)) b[$1] = $2; printf "%s/%s\t%s\t%s\n", $1, $2, $3, b[$1] }' \
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

# --- the runs ---------------------------------------------------------------

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
                IFS='|' read -r _ name label scripts table \
                    <<<"${vs[$(((i + round - 1) % ${#vs[@]}))]}"
                run_variant "$sync" "$group" "$name" "$scripts" "$table" "$round"
            done
        done
    done
done
if [[ " $BENCH_GROUPS " == *" bulk "* ]]; then
    bpsql -c "ALTER DATABASE bench SET synchronous_commit = off"
    fencing_log "bulk: $BULK_ROWS rows, $BULK_ROUNDS round(s)"
    run_bulk
fi

if [ -n "${FENCING_BENCH_OUT:-}" ]; then
    mkdir -p "$FENCING_BENCH_OUT"
    cp -r "$WORK/results.tsv" "$WORK/bulk.tsv" "$WORK/log" "$FENCING_BENCH_OUT/"
fi

# --- the report ---------------------------------------------------------------

if [ "$mode" = smoke ]; then
    if [ "$bench_fail" -ne 0 ]; then
        echo "bench smoke: FAILED"
        sed 's/^/  /' "$WORK/problems"
        exit 1
    fi
    echo "bench smoke: every variant ran; the guard accepted and rejected as designed"
    exit 0
fi

echo
echo "fencing benchmark ($mode): $CLIENTS clients (-j $JOBS), $ROUNDS round(s) x $SECS s per variant, interleaved; $(nproc) CPU(s)"
echo "Ratios >1 mean faster than the plain write; the machine is shared, so read them as +-0.03."
[ -s "$WORK/results.tsv" ] && summarise
[ -s "$WORK/bulk.tsv" ] && summarise_bulk
if [ "$bench_fail" -ne 0 ]; then
    echo
    echo "Problems (the variants did not run as designed):"
    sed 's/^/  /' "$WORK/problems"
    exit 1
fi
exit 0
