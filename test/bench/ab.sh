#!/usr/bin/env bash
# test/bench/ab.sh: the guard's hot path, two revisions side by side.
#
#   sudo bash test/bench/ab.sh [REV_A [REV_B]]     (default: main, the work tree)
#
# Measures what a change costs the guard: both revisions are built (-O2,
# as PGXS does) into private installations, each serves a throwaway
# cluster with the preload and test/bench/setup.sql, and pgbench runs the
# single-row variants of test/bench/run.sh (plain and guarded UPDATE in row
# scope, plain and guarded INSERT in key scope) on both, interleaved and
# rotated within every round, so that the noise of a shared machine hits
# both revisions alike.  It reports, per revision, the ratio of each
# guarded variant to the plain write of the same revision and round
# (median and min-max), and B's median over A's.
#
# REV is a git revision, or "." for the work tree as it is.  Environment:
# FENCING_BENCH_ROUNDS (5), FENCING_BENCH_SECONDS (3), FENCING_BENCH_CLIENTS
# (4), FENCING_BENCH_JOBS (2), FENCING_KEEP=1.
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/common.sh"
trap fencing_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

REV_A=${1:-main}
REV_B=${2:-.}
ROUNDS=${FENCING_BENCH_ROUNDS:-5}
SECS=${FENCING_BENCH_SECONDS:-3}
CLIENTS=${FENCING_BENCH_CLIENTS:-4}
JOBS=${FENCING_BENCH_JOBS:-2}
ROWS=100000
ACCOUNTS=1000
# name|script|table checked: group baseline first
VARIANTS="update_plain|update_plain
update_guard|update_guard
update_token|update_token
insert_plain|insert_plain
insert_guard|insert_guard"

fencing_deps
fencing_workdir
root=$FENCING_ROOT
declare -A BIN HOST PORT
# the set-up and scripts, where the postgres OS user can read them
mkdir -p "$FENCING_WORK/bench"
cp "$here/setup.sql" "$here"/scripts/*.sql "$FENCING_WORK/bench/"
chmod -R a+rX "$FENCING_WORK/bench"

# A revision's source, built and installed, with a cluster of its own.
prepare() {
    local side=$1 rev=$2 src=$FENCING_WORK/src-$1
    mkdir -p "$src"
    if [ "$rev" = . ]; then
        (cd "$root" && git ls-files -z --cached --others --exclude-standard |
            tar --null -T - -cf -) | tar -xf - -C "$src"
    else
        git -C "$root" archive "$rev" | tar -xf - -C "$src" ||
            fencing_die "no such revision: $rev"
    fi
    FENCING_ROOT=$src fencing_build "" "install-$side"
    fencing_build_bench_floor "install-$side"
    BIN[$side]=$FENCING_BINDIR
    fencing_cluster_start "cluster-$side" \
        "shared_preload_libraries = 'fencing'" "fsync = on" "shared_buffers = 512MB" \
        "max_wal_size = 20GB" "checkpoint_timeout = 1h" "autovacuum = off" "jit = off" \
        "synchronous_commit = off"
    HOST[$side]=$PGHOST
    PORT[$side]=$PGPORT
    fencing_as_postgres createdb bench
    fencing_as_postgres psql -X -q -v ON_ERROR_STOP=1 -d bench -v rows=$ROWS \
        -v accounts=$ACCOUNTS -v bulk_rows=1000 -f "$FENCING_WORK/bench/setup.sql" >/dev/null ||
        fencing_die "set-up of $side failed"
    fencing_as_postgres psql -X -q -d bench -c CHECKPOINT
}

# One pgbench run of a variant on a side; prints its tps.
run() {
    local side=$1 script=$2 epoch=$3 out
    FENCING_BINDIR=${BIN[$side]} PGHOST=${HOST[$side]} PGPORT=${PORT[$side]} \
        fencing_as_postgres pgbench -n -M prepared -c "$CLIENTS" -j "$JOBS" -T "$SECS" \
        -D e="$epoch" -D n=0 -D nc="$CLIENTS" -D rows="$ROWS" -D accounts="$ACCOUNTS" \
        -f "$FENCING_WORK/bench/$script.sql" bench >"$FENCING_WORK/last.log" 2>&1 ||
        { cat "$FENCING_WORK/last.log" >&2; fencing_die "pgbench failed ($side $script)"; }
    sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$FENCING_WORK/last.log"
}

describe() {
    if [ "$1" = . ]; then echo "the work tree"; else echo "$1 ($(git -C "$root" rev-parse --short "$1"))"; fi
}
fencing_log "A: $(describe "$REV_A"), B: $(describe "$REV_B")"
prepare a "$REV_A"
prepare b "$REV_B"

mapfile -t runs < <(for s in a b; do while IFS='|' read -r name script; do
    echo "$s|$name|$script"; done <<<"$VARIANTS"; done)
: >"$FENCING_WORK/results.tsv"
epoch=1
for round in $(seq 1 "$ROUNDS"); do
    for i in $(seq 0 $((${#runs[@]} - 1))); do
        IFS='|' read -r side name script <<<"${runs[$(((i + round - 1) % ${#runs[@]}))]}"
        epoch=$((epoch + 1))
        tps=$(run "$side" "$script" "$epoch")
        printf '  round %d %s %-13s %s tps\n' "$round" "$side" "$name" "$tps" >&2
        printf '%s\t%s\t%s\t%s\n' "$side" "$name" "$round" "$tps" >>"$FENCING_WORK/results.tsv"
    done
done

echo
echo "the guard's hot path, A = $(describe "$REV_A"), B = $(describe "$REV_B"): $CLIENTS clients, $ROUNDS rounds x $SECS s, synchronous_commit = off, interleaved; $(nproc) CPU(s)"
awk -F'\t' '
function median(arr, n,    i, j, t, b) {
    for (i = 1; i <= n; i++) b[i] = arr[i]
    for (i = 2; i <= n; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
    return (n % 2) ? b[(n + 1) / 2] : (b[n / 2] + b[n / 2 + 1]) / 2
}
{ tps[$1, $2, $3] = $4; if ($3 > rounds) rounds = $3 }
function ratios(side, v, base,    r, n, x, lo, hi) {
    n = 0; lo = 1e9; hi = 0
    for (r = 1; r <= rounds; r++) if (tps[side, base, r] > 0) {
        x = tps[side, v, r] / tps[side, base, r]; rt[++n] = x
        if (x < lo) lo = x; if (x > hi) hi = x
    }
    med[side, v] = median(rt, n)
    return sprintf("%5.2f (%4.2f-%4.2f)", med[side, v], lo, hi)
}
END {
    printf "%-40s %-18s %-18s %s\n", "guarded / plain write (median, min-max)", "A", "B", "B/A"
    n = split("update_guard update_token insert_guard", vs, " ")
    split("update_plain update_plain insert_plain", bs, " ")
    label["update_guard"] = "UPDATE, row scope, token in column"
    label["update_token"] = "UPDATE, row scope, fencing.token"
    label["insert_guard"] = "INSERT, key scope"
    for (i = 1; i <= n; i++) {
        a = ratios("a", vs[i], bs[i]); b = ratios("b", vs[i], bs[i])
        printf "%-40s %-18s %-18s %5.2f\n", label[vs[i]], a, b, med["b", vs[i]] / med["a", vs[i]]
    }
}' "$FENCING_WORK/results.tsv"
