#!/usr/bin/env bash
# test/bench/managed.sh: the managed edition (managed/, fencing_sql) beside
# the C edition and the plain write, in one run.
#
#   sudo bash test/bench/managed.sh            5 rounds x 10 s per variant (~15 min)
#   sudo bash test/bench/managed.sh --quick    1 round x 3 s (FENCING_BENCH_QUICK=1)
#   sudo bash test/bench/managed.sh --smoke    a fixed number of transactions per
#                                              variant (no timing): every variant
#                                              runs and writes what it should
#   ... --pg 18                                on PostgreSQL 18 (default 15; timed
#                                              runs use 18 built without assertions)
#
# Builds the C edition without assertions (-O2, as PGXS does) and pg_tle
# (test/lib/pgtle.sh) into one private installation and starts two
# throwaway clusters of that installation, each as its edition is run
# (fsync on, synchronous_commit = off: CPU-bound; otherwise alike): one
# with the fencing library preloaded, holding bench_c, where a superuser
# created the C edition; one with pg_tle preloaded and no fencing library,
# as on a managed service, holding bench_m, where the role bench_app (not a
# superuser) installed the managed edition through pg_tle, as on RDS.  The
# same role makes both databases alike.  (Where the fencing library is
# loaded the setting fencing.bypass exists, and the managed edition's guard
# reads it on each write: a server moving from one edition to the other.)  bench_app loads
# test/bench/managed_setup.sql into both and runs the scripts of
# test/bench/scripts against both, unchanged (pgbench -n -M prepared -c 4
# -j 2):
#
#   update  plain UPDATE; the guard in row scope, token in the column
#           (guard) or in fencing.token (token)
#   insert  plain INSERT into a ledger; the guard in key scope (guard)
#   idem    the bare business INSERT; the same in idem_begin() and
#           idem_complete() (idem)
#
# Every variant of both editions runs once per round, the order rotated
# from round to round, so that the noise of a shared machine hits them
# alike.  Reported, per round and as the median (min-max) over the rounds:
# each guarded variant's throughput over the plain write of its own
# edition, and the managed edition's over the C edition's, beside the
# targets (managed row-scope UPDATE >= 0.80 of the plain write, key-scope
# INSERT and the idempotent request >= 0.60 of the C edition).  Timings
# are reported, never judged.  It exits non-zero only when a variant did
# not run as designed: a pgbench error or aborted client, a write that did
# not leave its mark (one more row, or one more on the sum of balance), a
# guard that rejected a write (every token is newer than the last), an
# idempotency key not done or not naming its order.
#
# Environment: FENCING_BENCH_ROUNDS (5), FENCING_BENCH_SECONDS (10),
# FENCING_BENCH_TRANSACTIONS (smoke mode: per client, 100),
# FENCING_BENCH_CLIENTS (4), FENCING_BENCH_JOBS (2), FENCING_BENCH_OUT (a
# directory to keep the results in), FENCING_PGTLE_SRC (see
# test/lib/pgtle.sh), FENCING_KEEP=1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/common.sh
. "$here/../lib/common.sh"
# shellcheck source=../lib/pgtle.sh
. "$here/../lib/pgtle.sh"
# shellcheck source=../lib/managed.sh
. "$here/../lib/managed.sh"
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
[ "$mode" = smoke ] || export FENCING_PG18_CASSERT=no
case $mode in
full) d_rounds=5 d_secs=10 ;;
quick) d_rounds=1 d_secs=3 ;;
smoke) d_rounds=1 d_secs=1 ;;
esac
TRANSACTIONS=
[ "$mode" = smoke ] && TRANSACTIONS=${FENCING_BENCH_TRANSACTIONS:-100}
ROUNDS=${FENCING_BENCH_ROUNDS:-$d_rounds}
SECS=${FENCING_BENCH_SECONDS:-$d_secs}
CLIENTS=${FENCING_BENCH_CLIENTS:-4}
JOBS=${FENCING_BENCH_JOBS:-2}
ROWS=100000
ACCOUNTS=1000
ROLE=bench_app

# The variants: group, name, script, the table where each transaction
# leaves its mark, the guarded table (its rejections must stay 0, "-":
# none).  Each runs against both databases.
VARIANTS="update|plain|update_plain|upd_plain|-
update|guard|update_guard|upd_guard|upd_guard
update|token|update_token|upd_token|upd_token
insert|plain|insert_plain|led_plain|-
insert|guard|insert_guard|led_guard|led_guard
idem|bare|idem_bare|orders_bare|-
idem|idem|idem_helpers|orders_idem|-"

fencing_deps
fencing_workdir
WORK=$FENCING_WORK
mkdir -p "$WORK/log" "$WORK/scripts" "$WORK/src/managed"
cp "$here"/scripts/*.sql "$here/managed_setup.sql" "$WORK/scripts/"
# the edition's install files, where the postgres OS user may read them
# (the checkout may be private to its owner)
cp "$FENCING_ROOT"/managed/fencing_sql*.sql "$WORK/src/managed/"
chmod -R a+rX "$WORK/scripts" "$WORK/src"
: >"$WORK/results.tsv"
: >"$WORK/problems"

# the C edition, then pg_tle into the same installation
fencing_build ""
tarball=$(fencing_pgtle_tarball)
[ -n "$tarball" ] || fencing_die "no pg_tle source: set FENCING_PGTLE_SRC (pg_tle-*.tar.gz)"
if [ "$FENCING_PGVER" = 15 ]; then root=${FENCING_BINDIR%/usr/lib/postgresql/*}; else root=${FENCING_BINDIR%/bin}; fi
fencing_pgtle_install "$tarball" "$root" || fencing_die "cannot install pg_tle from $tarball"
cd "$WORK" || exit 1
# the C edition's server, its PGHOST, PGPORT and PGDATA kept, then the
# managed edition's, which the environment keeps naming: srv DB COMMAND
# runs COMMAND with those of DB's server
fencing_cluster_start bench_c "shared_preload_libraries = 'fencing'" "fsync = on" \
    "synchronous_commit = off" "max_connections = 40"
C_HOST=$PGHOST C_PORT=$PGPORT C_DATA=$PGDATA
fencing_cluster_start bench_m "shared_preload_libraries = 'pg_tle'" "fsync = on" \
    "synchronous_commit = off" "max_connections = 40"
srv() {
    local db=$1; shift
    case $db in
    bench_c) PGHOST=$C_HOST PGPORT=$C_PORT PGDATA=$C_DATA "$@" ;;
    *) "$@" ;;
    esac
}
FENCING_SRC=$WORK/src

bench_fail=0
problem() {
    printf 'PROBLEM: %s\n' "$*" >&2
    echo "$*" >>"$WORK/problems"
    bench_fail=1
}
# psql on database $1 as the role, quiet, unaligned, stop on error
bpsql() {
    local db=$1; shift
    srv "$db" fencing_as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -U "$ROLE" -d "$db" "$@"
}

fencing_log "bench_c: the C edition (CREATE EXTENSION by a superuser); bench_m: the managed edition, installed through pg_tle by $ROLE"
if ! srv bench_c fencing_managed_psql -d postgres -c "CREATE ROLE $ROLE LOGIN NOSUPERUSER" \
        -c "CREATE DATABASE bench_c" -c "GRANT CREATE ON DATABASE bench_c TO $ROLE" >/dev/null ||
   ! srv bench_c fencing_managed_psql -d bench_c -c "CREATE EXTENSION fencing" >/dev/null; then
    fencing_die "cannot make bench_c"
fi
fencing_managed_db bench_m pgtle "$ROLE" >"$WORK/log/install.log" 2>&1 ||
    { cat "$WORK/log/install.log" >&2; fencing_die "cannot install the managed edition in bench_m"; }
# the role's tables in a schema of its own (public is not writable from 15 on)
for db in bench_c bench_m; do
    srv "$db" fencing_managed_psql -d postgres -c "ALTER ROLE $ROLE SET search_path = bench, public" >/dev/null ||
        fencing_die "cannot set the search path of $ROLE"
done
for db in bench_c bench_m; do
    srv "$db" fencing_managed_psql -d "$db" -c "CREATE SCHEMA bench AUTHORIZATION $ROLE" >/dev/null ||
        fencing_die "cannot make schema bench in $db"
    bpsql "$db" -v rows=$ROWS -v accounts=$ACCOUNTS -f "$WORK/scripts/managed_setup.sql" \
        >"$WORK/log/setup.$db.log" 2>&1 ||
        { cat "$WORK/log/setup.$db.log" >&2; fencing_die "cannot set up $db"; }
done

# The marks the scripts left in a table: its rows, or for the upd_* tables
# the sum of balance, which every write raises by one.
marks() {
    case $2 in
    upd_*) bpsql "$1" -c "SELECT coalesce(sum(balance), 0) FROM $2" ;;
    *) bpsql "$1" -c "SELECT count(*) FROM $2" ;;
    esac
}
# the writes fencing.stats counts as rejected on a table
rejected() {
    bpsql "$1" -c "SELECT coalesce(sum(rejected_stale + rejected_missing), 0) FROM fencing.stats
                    WHERE relid = '$2'::regclass"
}

# Epoch 1 is the tables' fence (1:0); each pgbench run has one of its own,
# higher, and each client a counter: every token beats the last.
EPOCH=1
run_variant() {
    local ed=$1 db=bench_$1 group=$2 name=$3 script=$4 mtable=$5 gtable=$6 round=$7
    local len out st tps m0 m1 r0 r1 done_n i n
    EPOCH=$((EPOCH + 1))
    if [ -n "$TRANSACTIONS" ]; then len=(-t "$TRANSACTIONS"); else len=(-T "$SECS"); fi
    m0=$(marks "$db" "$mtable")
    [ "$gtable" != - ] && r0=$(rejected "$db" "$gtable")
    out=$(srv "$db" fencing_as_postgres pgbench -n -M prepared -U "$ROLE" -c "$CLIENTS" -j "$JOBS" "${len[@]}" \
        -D e="$EPOCH" -D n=0 -D nc="$CLIENTS" -D rows="$ROWS" -D accounts="$ACCOUNTS" \
        -f "$WORK/scripts/$script.sql" "$db" 2>&1)
    st=$?
    echo "$out" >"$WORK/log/$ed.$group.$name.$round.log"
    # its backends gone, everything it wrote is committed
    for i in $(seq 1 600); do
        n=$(bpsql "$db" -c "SELECT count(*) FROM pg_stat_activity
                             WHERE datname = '$db' AND application_name = 'pgbench'") || break
        [ "$n" = 0 ] && break
        sleep 0.1
    done
    tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' <<<"$out")
    done_n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
    if [ "$st" -ne 0 ] || [ -z "$tps" ] || grep -qiE 'aborted|error' <<<"$out"; then
        problem "$ed $group/$name (round $round): pgbench failed (status $st):
$(grep -iE 'aborted|error|fatal' <<<"$out" | head -5)"
        tps=${tps:-0}
    fi
    m1=$(marks "$db" "$mtable")
    if [ -n "$TRANSACTIONS" ]; then
        [ $((m1 - m0)) -eq $((CLIENTS * TRANSACTIONS)) ] ||
            problem "$ed $group/$name: $((m1 - m0)) writes left for $((CLIENTS * TRANSACTIONS)) transactions"
    elif [ $((m1 - m0)) -lt "${done_n:-0}" ]; then
        problem "$ed $group/$name (round $round): $((m1 - m0)) writes left for the $done_n transactions pgbench counted"
    fi
    if [ "$gtable" != - ]; then
        r1=$(rejected "$db" "$gtable")
        [ "$r1" = "$r0" ] || problem "$ed $group/$name (round $round): the guard rejected $((r1 - r0)) writes of newer tokens"
    fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$ed" "$group" "$name" "$round" "$tps" >>"$WORK/results.tsv"
    printf '  %-3s %-7s %-6s round %d: %s tps\n' "$ed" "$group" "$name" "$round" "$tps" >&2
}

# every variant of both editions, as "edition|group|name|script|marks|guarded"
all=()
while IFS='|' read -r group name script mtable gtable; do
    for ed in c m; do all+=("$ed|$group|$name|$script|$mtable|$gtable"); done
done <<<"$VARIANTS"

if [ -n "$TRANSACTIONS" ]; then per="$TRANSACTIONS transactions per client"; else per="$SECS s"; fi
fencing_log "PostgreSQL $FENCING_PGVER, $mode: $ROUNDS round(s), $per per variant, $CLIENTS clients"
for r in $(seq 1 "$ROUNDS"); do
    k=$(( (r - 1) * 3 % ${#all[@]} ))
    for ((i = 0; i < ${#all[@]}; i++)); do
        IFS='|' read -r ed group name script mtable gtable <<<"${all[$(((i + k) % ${#all[@]}))]}"
        run_variant "$ed" "$group" "$name" "$script" "$mtable" "$gtable" "$r"
    done
    for db in bench_c bench_m; do
        bpsql "$db" -c "VACUUM upd_plain, upd_guard, upd_token" 2>/dev/null
    done
done

# every idempotency key done, naming its order, one order per key
for db in bench_c bench_m; do
    # (as the superuser: the C edition's key table is not the role's to read)
    out=$(srv "$db" fencing_as_postgres psql -X -q -At -v ON_ERROR_STOP=1 -d "$db" -F ' ' \
          -c "SELECT (SELECT count(*) FROM fencing.idempotency_keys),
                     (SELECT count(*) FROM bench.orders_idem),
                     (SELECT count(*) FROM fencing.idempotency_keys AS k
                       WHERE k.state <> 'done'
                          OR NOT EXISTS (SELECT FROM bench.orders_idem AS o
                                          WHERE o.id = (k.result ->> 'order')::bigint
                                            AND k.key = 'order:' || o.ref))" 2>&1) ||
        { problem "$db: the idempotency check failed: $out"; continue; }
    read -r nk no nbad <<<"$out"
    { [ "$nk" = "$no" ] && [ "$nbad" = 0 ]; } ||
        problem "$db: $nk idempotency keys and $no orders; $nbad keys not done or not naming their order"
done

[ -n "${FENCING_BENCH_OUT:-}" ] && mkdir -p "$FENCING_BENCH_OUT" &&
    cp -a "$WORK/results.tsv" "$WORK/log" "$FENCING_BENCH_OUT/"

if [ -z "$TRANSACTIONS" ]; then
    # the ratios of each round, then their median and range
    awk -F'\t' -v rounds="$ROUNDS" '
    function median(a, n,    i, j, t, b) {
        for (i = 1; i <= n; i++) b[i] = a[i]
        for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
        return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
    }
    { tps[$1 "/" $2 "/" $3, $4] = $5 }
    function row(label, num, den, target,    r, n, v, lo, hi, a, m) {
        n = 0
        for (r = 1; r <= rounds; r++) {
            if (tps[den, r] + 0 == 0) continue
            v = tps[num, r] / tps[den, r]
            a[++n] = v
            if (n == 1 || v < lo) lo = v
            if (n == 1 || v > hi) hi = v
        }
        if (n == 0) return
        m = median(a, n)
        printf "  %-58s %5.2f (%4.2f-%4.2f)", label, m, lo, hi
        if (target != "") printf "   target >= %s: %s", target, (m >= target ? "met" : "NOT met")
        printf "\n"
    }
    END {
        printf "\nthroughput ratios, PostgreSQL '"$FENCING_PGVER"' (median, min-max over %d rounds)\n", rounds
        printf "  against the plain write of the same edition:\n"
        row("managed: row-scope UPDATE, token in the column", "m/update/guard", "m/update/plain", "0.80")
        row("managed: row-scope UPDATE, token in fencing.token", "m/update/token", "m/update/plain", "0.80")
        row("C:       row-scope UPDATE, token in the column", "c/update/guard", "c/update/plain", "")
        row("C:       row-scope UPDATE, token in fencing.token", "c/update/token", "c/update/plain", "")
        row("managed: key-scope INSERT", "m/insert/guard", "m/insert/plain", "")
        row("C:       key-scope INSERT", "c/insert/guard", "c/insert/plain", "")
        row("managed: idempotent request / bare INSERT", "m/idem/idem", "m/idem/bare", "")
        row("C:       idempotent request / bare INSERT", "c/idem/idem", "c/idem/bare", "")
        printf "  managed against C:\n"
        row("key-scope INSERT", "m/insert/guard", "c/insert/guard", "0.60")
        row("idempotent request", "m/idem/idem", "c/idem/idem", "0.60")
        row("row-scope UPDATE, token in the column", "m/update/guard", "c/update/guard", "")
        row("row-scope UPDATE, token in fencing.token", "m/update/token", "c/update/token", "")
        row("plain UPDATE (no guard: the same)", "m/update/plain", "c/update/plain", "")
    }' "$WORK/results.tsv"
fi

if [ "$bench_fail" != 0 ]; then
    echo "managed benchmark: problems (above; $WORK/problems)" >&2
    exit 1
fi
echo "managed benchmark ($mode, PostgreSQL $FENCING_PGVER): every variant ran as designed"
