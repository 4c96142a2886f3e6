#!/usr/bin/env bash
# test/bench/ddl.sh: what the DDL guard costs DDL on tables nobody
# protected (target <= 1.05x).
#
#   sudo bash test/bench/ddl.sh              5 rounds x 200 iterations per script
#   sudo bash test/bench/ddl.sh --quick      1 round x 50 iterations
#   sudo bash test/bench/ddl.sh --callgrind  also count instructions (valgrind)
#
# Builds without assertions, starts one throwaway cluster (fencing
# preloaded) with two databases made alike: "plain" without the extension,
# "fenced" with it and a few protected tables (row, key and table scope, a
# partitioned one, an inheritance parent), so that the DDL guard has a
# non-empty fencing.protected to consult.  Runs the same scripts
# (scripts/ddl_mix.sql: CREATE/ALTER/DROP of temporary and partitioned
# tables, ATTACH/DETACH, CREATE TRIGGER, DISABLE TRIGGER ALL, DROP COLUMN;
# scripts/ddl_temp.sql: CREATE TEMP TABLE + DROP, the common case)
# on both, alternating which goes first in each round, and reports the
# ratio fenced/plain of the backend's CPU time and of the wall time per
# iteration, per round and their medians.  Reports; never fails on timing.
#
# On a shared, busy machine both clocks are noisy; --callgrind adds a
# measure that is not: the server runs under valgrind --tool=callgrind, and
# the instructions each backend executes for 5 and for 25 iterations give
# the instructions of one iteration (the difference over 20, which leaves
# out connection start-up), fenced against plain.
#
# Environment: FENCING_BENCH_ROUNDS (5), FENCING_BENCH_ITERATIONS (200).

set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
trap fencing_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

rounds=${FENCING_BENCH_ROUNDS:-5}
callgrind=
for arg in "$@"; do
    case $arg in
    --quick) rounds=1 FENCING_BENCH_ITERATIONS=50 ;;
    --callgrind) callgrind=1 ;;
    *) fencing_die "unknown argument $arg (use --quick or --callgrind)" ;;
    esac
done

fencing_deps
fencing_build ""
cd "$FENCING_WORK" || exit 1
fencing_cluster_start bench "shared_preload_libraries = 'fencing'"
scripts=$FENCING_WORK/ddl-scripts
cp -a "$here/scripts" "$scripts"
chown -R postgres: "$scripts"

psql_as() { fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 "$@"; }
# make_db NAME [fenced]: a database for the scripts, with the extension
# and a few protected tables when fenced
make_db() {
    psql_as -d postgres -c "CREATE DATABASE $1" >/dev/null
    psql_as -d "$1" -c "CREATE FUNCTION bench_noop() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN RETURN NEW; END \$\$" >/dev/null
    [ "${2:-}" = fenced ] || return 0
    psql_as -d "$1" >/dev/null <<'SQL'
CREATE EXTENSION fencing;
DO $$
BEGIN
    FOR i IN 1..10 LOOP
        EXECUTE format('CREATE TABLE guarded_%s (id int PRIMARY KEY, account text, fence fencing.fence)', i);
        EXECUTE format('SELECT fencing.protect(%L, key_columns => %L)', 'guarded_' || i,
                       CASE i % 3 WHEN 0 THEN NULL WHEN 1 THEN '{account}' ELSE '{}' END);
    END LOOP;
END $$;
CREATE TABLE guarded_parted (id int, d int, fence fencing.fence) PARTITION BY RANGE (d);
CREATE TABLE guarded_parted_1 PARTITION OF guarded_parted FOR VALUES FROM (0) TO (10);
CREATE TABLE guarded_parted_2 PARTITION OF guarded_parted FOR VALUES FROM (10) TO (20);
SELECT fencing.protect('guarded_parted');
CREATE TABLE guarded_inh (id int, fence fencing.fence);
CREATE TABLE guarded_inh_1 () INHERITS (guarded_inh);
SELECT fencing.protect('guarded_inh');
SQL
}
make_db plain
make_db fenced fenced
# untouched copies for the instruction counts (catalog bloat from the
# timed rounds would weigh on the later runs)
[ -n "$callgrind" ] && { make_db plain_tpl; make_db fenced_tpl fenced; }
fencing_log "fenced: $(psql_as -At -d fenced -c 'SELECT count(*) FROM fencing.protected') protected tables"

# One run: a psql session runs the script ITER times (autocommit, one
# statement at a time, as pgbench would) and prints the CPU time its
# backend used per iteration (utime + stime from /proc, in ms) and the wall
# time per iteration.  CPU time is what the DDL guard adds; on a shared,
# busy machine it is far steadier than the wall clock.
iters=${FENCING_BENCH_ITERATIONS:-200}
# utime + stime of the backend itself, in clock ticks (fields 14 and 15)
cpu="(SELECT f[12]::bigint + f[13]::bigint FROM pg_catalog.string_to_array(pg_catalog.split_part(pg_catalog.pg_read_file('/proc/self/stat'), ') ', 2), ' ') f)"
run() {
    local db=$1 script=$2 sqlfile=$FENCING_WORK/ddl-$2 out
    if [ ! -f "$sqlfile" ]; then
        {
            echo 'SELECT clock_timestamp() AS t0 \gset'
            echo "SELECT 'cpu_before', $cpu;"
            for _ in $(seq 1 "$iters"); do
                grep -v '^\\set\|^--' "$scripts/$script" | sed 's/:c\b/1/g'
            done
            echo "SELECT 'cpu_after', $cpu;"
            echo "SELECT 'wall_ms', extract(epoch FROM clock_timestamp() - :'t0'::timestamptz) * 1000;"
        } >"$sqlfile"
        chown postgres: "$sqlfile"
    fi
    out=$(fencing_as_postgres psql -X -q -At -F ' ' -v ON_ERROR_STOP=1 -d "$db" -f "$sqlfile" 2>&1) \
        || { echo "$out" >&2; fencing_die "the DDL failed on $db"; }
    echo "$out" | awk -v n="$iters" -v hz="$(getconf CLK_TCK)" '
        /^cpu_before/ { b = $2 } /^cpu_after/ { a = $2 } /^wall_ms/ { w = $2 }
        END { printf "%.3f %.3f\n", (a - b) * 1000 / hz / n, w / n }'
}

results=()
for script in ddl_mix.sql ddl_temp.sql; do
    ratios=()
    wratios=()
    for r in $(seq 1 "$rounds"); do
        if [ $((r % 2)) -eq 1 ]; then
            p=$(run plain "$script"); f=$(run fenced "$script")
        else
            f=$(run fenced "$script"); p=$(run plain "$script")
        fi
        # shellcheck disable=SC2086  # two numbers each: split on purpose
        set -- $p $f
        ratio=$(awk -v f="$3" -v p="$1" 'BEGIN { printf "%.3f", (p > 0) ? f / p : 0 }')
        wratio=$(awk -v f="$4" -v p="$2" 'BEGIN { printf "%.3f", (p > 0) ? f / p : 0 }')
        ratios+=("$ratio")
        wratios+=("$wratio")
        printf '%-13s round %d: backend CPU per iteration plain %7.3f ms, fenced %7.3f ms, ratio %s; wall %7.3f / %7.3f ms, ratio %s\n' \
            "$script" "$r" "$1" "$3" "$ratio" "$2" "$4" "$wratio"
    done
    median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
    results+=("$(printf '%-13s fenced/plain, median of %d rounds of %d iterations: backend CPU %s, wall %s (target <= 1.05)' \
        "$script" "$rounds" "$iters" "$(median "${ratios[@]}")" "$(median "${wratios[@]}")")")
done
echo
printf '%s\n' "${results[@]}"

[ -n "$callgrind" ] || exit 0
command -v valgrind >/dev/null || fencing_die "--callgrind needs valgrind (apt-get install valgrind)"
fencing_log "instruction counts under callgrind (slow)"
cg_out=$FENCING_WORK/callgrind
mkdir -p "$cg_out" && chown postgres: "$cg_out"
fencing_cluster_stop "$PGDATA"
printf '#!/bin/sh\nexec valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=%s/cg.%%p %s/postgres "$@"\n' \
    "$cg_out" "$FENCING_BINDIR" >"$FENCING_WORK/postgres-callgrind"
chmod 755 "$FENCING_WORK/postgres-callgrind"
fencing_as_postgres "$FENCING_BINDIR/pg_ctl" -D "$PGDATA" -p "$FENCING_WORK/postgres-callgrind" \
    -l "$PGHOST/server-callgrind.log" -t 600 -w start >/dev/null || fencing_die "the server did not start under callgrind"
# the instructions of the backend that ran the script n times
instructions() {
    local db=$1 script=$2 n=$3 file=$FENCING_WORK/cg-$2-$3.sql pid
    if [ ! -f "$file" ]; then
        {
            echo 'SELECT pg_backend_pid();'
            for _ in $(seq 1 "$n"); do
                grep -v '^\\set\|^--' "$scripts/$script" | sed 's/:c\b/1/g'
            done
        } >"$file"
        chown postgres: "$file"
    fi
    # a fresh copy of the database for each count
    psql_as -d postgres -c "DROP DATABASE IF EXISTS cg_run" -c "CREATE DATABASE cg_run TEMPLATE ${db}_tpl" >/dev/null
    pid=$(fencing_as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -d cg_run -f "$file" | head -1)
    for _ in $(seq 1 30); do
        grep -q '^totals:\|^summary:' "$cg_out/cg.$pid" 2>/dev/null && break
        sleep 1
    done
    sed -n 's/^\(totals\|summary\): *\([0-9]*\).*/\2/p' "$cg_out/cg.$pid" | head -1
}
declare -A ir
for script in ddl_mix.sql ddl_temp.sql; do
    for db in plain fenced; do
        a=$(instructions "$db" "$script" 5)
        b=$(instructions "$db" "$script" 25)
        ir[$db]=$(( (b - a) / 20 ))
    done
    printf '%-13s instructions per iteration: plain %d, fenced %d, ratio %s (target <= 1.05)\n' \
        "$script" "${ir[plain]}" "${ir[fenced]}" "$(awk -v f="${ir[fenced]}" -v p="${ir[plain]}" 'BEGIN { printf "%.3f", f / p }')"
done
