#!/usr/bin/env bash
# test/check.sh: every test suite, on throwaway clusters, on PostgreSQL 15
# and 18 (what `make test` and .ci/run run; test/README.md describes each
# suite and every variable).
#
#   sudo bash test/check.sh          every suite on 15 and on 18, side by side
#   sudo bash test/check.sh --pg 18  one version (15 or 18)
#   sudo FENCING_SUITES="regress isolation" bash test/check.sh --pg 15
#
# It only orchestrates: first installs and downloads what the chosen
# suites need on the chosen versions, in one step (test/lib/deps.sh, as
# root; nothing of the system changes after it, and a check says so at
# the end), then for each version, in a process of its own (both at once;
# FENCING_SERIAL=1: one after the other), builds with -Wall -Wextra -Werror and assertions
# into a private copy of the server (test/lib/common.sh, test/lib/pg18.sh),
# copies the tree where the postgres OS user can read it, starts the main
# cluster (fencing preloaded) and runs the suites: regress isolation pgtap
# alone, one after the other (they read counters of the main cluster that
# any write on it moves), then the others, the longest first, and bench,
# FENCING_JOBS (2) at a time.  The last line is "N passed, M
# failed" over every version; the exit status is non-zero when anything
# failed.  FENCING_KEEP=1 keeps the scratch directories.
#
# A suite, test/suites/NAME.sh, runs as root from the scratch directory
# with FENCING_ROOT (the repository), FENCING_SRC (a copy of the tree the
# postgres OS user can write), FENCING_WORK, FENCING_BINDIR and PG_CONFIG
# (the private installation), FENCING_PGVER, and PGHOST PGPORT PGDATA (the
# main cluster, user postgres).  It prints TAP; "1..0 # SKIP reason" when
# it cannot run here (listed with the reason); a suite that has something
# to test here and cannot do it fails.  "not ok ... # TODO reason" is a
# known failure of PostgreSQL itself: counted apart and listed.

set -u
. "$(dirname "$0")/lib/common.sh"

versions=()
while [ $# -gt 0 ]; do
    case $1 in
    --pg) [ $# -ge 2 ] || fencing_die "--pg needs a version"; versions+=("$2"); shift 2 ;;
    --pg=*) versions+=("${1#--pg=}"); shift ;;
    *) fencing_die "unknown argument $1 (use --pg 15 or --pg 18)" ;;
    esac
done
[ ${#versions[@]} -gt 0 ] || read -r -a versions <<<"$FENCING_PGVERSIONS"

# The TAP tests of every pass reserve their ports in one directory
# (PostgreSQL::Test::Cluster), so that passes side by side never share one.
export PG_TEST_PORT_DIR=${PG_TEST_PORT_DIR:-/tmp/fencing-portlock}
mkdir -p "$PG_TEST_PORT_DIR" && chmod 1777 "$PG_TEST_PORT_DIR"

alone=" regress isolation pgtap "
all=$(cd "$FENCING_ROOT/test/suites" && printf '%s\n' *.sh | sed 's/\.sh$//' | sort)
# the default order: the three that run alone, then the longest first (as
# measured in a cold run: the run ends when its longest suites do), the
# others by name, bench last
longest="tap client_python client_go citus memory update package pg_upgrade locksvc pg_isolation release"
# shellcheck disable=SC2086
default=$({ printf '%s\n' regress isolation pgtap $longest; grep -vx bench <<<"$all"; echo bench; } \
    | grep -Fxf <(echo "$all") | awk '!seen[$0]++ { printf " %s", $0 }')
suites=${FENCING_SUITES:-$default}
for s in $suites; do
    [ -f "$FENCING_ROOT/test/suites/$s.sh" ] || fencing_die "unknown suite $s (one of:$default)"
done

# The run: everything the suites need installed and downloaded first, in
# one step (test/lib/deps.sh); then a child per version, whose output is
# shown as it comes for the first, once the one before ended for the
# others.  While they run, the harness's apt lock is held shared (an apt
# run of the harness's, of this run or another, waits: none changes the
# system under the suites), and the harness's packages and apt's sources
# must stay as they were when the suites started: a check of its own.
if [ -z "${FENCING_PREPARED:-}" ]; then
    t0=$SECONDS pass=0 fail=0 logs=() pids=()
    # what the tools root runs keep (npm's cache, Go's telemetry), in the
    # harness's cache, not in root's home
    export npm_config_cache=$FENCING_CACHE/root/npm XDG_CACHE_HOME=$FENCING_CACHE/root/cache \
        XDG_CONFIG_HOME=$FENCING_CACHE/root/config
    # shellcheck disable=SC2086
    fencing_prepare "${versions[@]}" -- $suites
    fencing_log "installed and downloaded what the suites need ($((SECONDS - t0)) s)"
    exec 8>"$FENCING_CACHE/apt.lock"
    flock -s 8
    state0=$(mktemp /tmp/fencing-state.XXXXXX)
    fencing_system_state >"$state0"
    for v in "${versions[@]}"; do
        logs+=("$(mktemp "/tmp/fencing-check-$v.XXXXXX")")
        bash "$0" --pg "$v" >"${logs[-1]}" 2>&1 8>&- &
        pids+=($!)
        [ -n "${FENCING_SERIAL:-}" ] && wait $!
    done
    trap 'kill "${pids[@]}" 2>/dev/null; rm -f "$state0"; exit 130' INT TERM
    for i in "${!versions[@]}"; do
        [ ${#versions[@]} -gt 1 ] && fencing_log "=== PostgreSQL ${versions[$i]} ==="
        tail -n +1 --pid="${pids[$i]}" -f "${logs[$i]}"
        wait "${pids[$i]}"
    done
    state_diff=$(fencing_system_state | diff "$state0" - | grep '^[<>]')
    rm -f "$state0"
    exec 8>&-
    echo
    echo "Summary over PostgreSQL ${versions[*]} ($((SECONDS - t0)) s)"
    for i in "${!versions[@]}"; do
        sed -n '/^Summary$/,/^$/{/^Summary$/d;/^$/d;p}' "${logs[$i]}"
        if [[ $(tail -n 1 "${logs[$i]}") =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
            pass=$((pass + BASH_REMATCH[1])) fail=$((fail + BASH_REMATCH[2]))
        else
            fail=$((fail + 1))
            echo "  PostgreSQL ${versions[$i]}: the run ended without its summary line"
        fi
        rm -f "${logs[$i]}"
    done
    if [ -z "$state_diff" ]; then
        pass=$((pass + 1))
        echo "  system     the harness's packages and apt's sources as they were when the suites started"
    else
        fail=$((fail + 1))
        echo "  system     changed while the suites ran (only test/lib/deps.sh installs, before they start):"
        printf '    %s\n' "${state_diff//$'\n'/$'\n'    }"
    fi
    echo
    echo "$pass passed, $fail failed"
    [ "$fail" -eq 0 ]
    exit
fi
fencing_set_pgver "${versions[0]}"
trap fencing_cleanup EXIT
trap 'exit 130' INT TERM

fencing_deps
fencing_build "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING"
[ -n "${FENCING_KEEP:-}" ] && fencing_log "scratch directory (kept): $FENCING_WORK"
# the postgres OS user may not enter the repository (a clone in a private
# mktemp -d): the suites work from the scratch directory, in a copy
cd "$FENCING_WORK" || fencing_die "cannot enter $FENCING_WORK"
FENCING_SRC=$FENCING_WORK/src
mkdir -p "$FENCING_SRC"
cp -a "$FENCING_ROOT/Makefile" "$FENCING_ROOT/fencing.control" "$FENCING_ROOT/META.json" \
    "$FENCING_ROOT/sql" "$FENCING_ROOT/expected" "$FENCING_ROOT/test" "$FENCING_ROOT/managed" "$FENCING_SRC/"
chown -R postgres: "$FENCING_SRC"
export FENCING_ROOT FENCING_SRC
fencing_cluster_start main "shared_preload_libraries = 'fencing'"
fencing_log "cluster up on port $PGPORT"

declare -A t_start=()
run_suite() {
    fencing_log "suite $1 (test/suites/$1.sh)"
    t_start[$1]=$SECONDS
    { bash "$FENCING_ROOT/test/suites/$1.sh" >"suite-$1.log" 2>&1; echo "$? $SECONDS" >"suite-$1.status"; } &
}
# A suite's log without its passing lines, and its summary line in
# suite-NAME.report: "ok N" and "not ok N" counted ("# TODO": known
# failures of PostgreSQL, apart); a script that failed without a failing
# line fails once.
finish_suite() {
    local s=$1 log=suite-$1.log st t1 skip ok bad known
    read -r st t1 <"suite-$s.status"
    fencing_log "suite $s ended ($((t1 - t_start[$s])) s)"
    grep -vE '^\s*ok [0-9]+' "$log"
    skip=$(sed -n 's/^1\.\.0 *# *[Ss][Kk][Ii][Pp] *//p' "$log" | head -1)
    if [ -n "$skip" ] && [ "$st" -eq 0 ]; then
        printf '%-10s PostgreSQL %s skipped: %s\n0 0\n' "$s" "$FENCING_PGVER" "$skip" >"suite-$s.report"
        return
    fi
    ok=$(grep -cE '^\s*ok [0-9]+' "$log")
    grep -E '^\s*not ok [0-9]+' "$log" | grep -vE '# *TODO' | sed "s/^/$s: /" >>failures
    grep -E '^\s*not ok [0-9]+' "$log" | grep -E '# *TODO' | sed "s/^/$s: /" >>known
    bad=$(grep -E '^\s*not ok [0-9]+' "$log" | grep -cvE '# *TODO')
    known=$(grep -E '^\s*not ok [0-9]+' "$log" | grep -cE '# *TODO')
    if [ "$st" -ne 0 ] && [ "$bad" -eq 0 ]; then
        bad=1
        echo "$s: exited $st without a failing assertion (see $FENCING_WORK/$log)" >>failures
    fi
    printf '%-10s PostgreSQL %s %5d passed, %d failed%s (%d s)\n%d %d\n' "$s" "$FENCING_PGVER" "$ok" "$bad" \
        "$([ "$known" -gt 0 ] && echo ", $known known failure(s) not ours (TODO, listed below)")" \
        $((t1 - t_start[$s])) "$ok" "$bad" >"suite-$s.report"
}

: >failures
: >known
running=()
for s in $suites; do
    if [[ $alone == *" $s "* ]]; then
        wait
        for r in "${running[@]}"; do finish_suite "$r"; done
        running=()
        run_suite "$s"; wait; finish_suite "$s"
        continue
    fi
    while [ ${#running[@]} -ge "${FENCING_JOBS:-2}" ]; do
        wait -n
        still=()
        for r in "${running[@]}"; do
            if [ -f "suite-$r.status" ]; then finish_suite "$r"; else still+=("$r"); fi
        done
        running=("${still[@]}")
    done
    run_suite "$s"
    running+=("$s")
done
wait
for r in "${running[@]}"; do finish_suite "$r"; done

pass=0 fail=0
echo
echo "Summary"
echo "  PostgreSQL $FENCING_PGVER: $("$FENCING_BINDIR/postgres" -V), $SECONDS s in all"
for s in $suites; do
    { IFS= read -r line; read -r ok bad; } <"suite-$s.report"
    echo "  $line"
    pass=$((pass + ok)) fail=$((fail + bad))
done
if [ -s known ]; then
    echo "Known failures of PostgreSQL itself (not counted):"
    sed 's/^/  /' known
fi
if [ -s failures ]; then
    echo "Failures:"
    sed 's/^/  /' failures
fi
echo
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
