#!/usr/bin/env bash
# test/check.sh: every test suite, on throwaway clusters, on PostgreSQL 15
# and 18 (what `make test` and .ci/run run; test/README.md describes each
# suite).
#
#   sudo bash test/check.sh          every suite on 15 and on 18, side by side
#   sudo bash test/check.sh --pg 18  one server version only (15 or 18)
#   sudo FENCING_SUITES="regress isolation" bash test/check.sh --pg 15
#
# This script only orchestrates.  It installs what is missing (apt, as
# root), builds with -Wall -Wextra -Werror and assertions into a private
# copy of the server (test/lib/common.sh; PostgreSQL 18 is built from
# source once and cached, test/lib/pg18.sh), copies the tree where the
# postgres OS user can read it, starts the main cluster (fencing
# preloaded), runs each suite and adds up what they print.  Each version
# runs in a process of its own (both at once); every summary line names its version, and
# the last line is "N passed, M failed" over all of them; the exit status
# is non-zero when anything failed.
#
# A suite is test/suites/NAME.sh.  By default they start in this order:
# regress isolation pgtap (alone, one after the other), then tap memory,
# every other suite by name, bench, FENCING_JOBS (2) at a time.
# FENCING_SUITES="a b" runs those given, in that order; FENCING_KEEP=1
# keeps the scratch directory (logs, diffs, results) for a post-mortem.
#
# The contract of a suite script: it runs as root, from the scratch
# directory, with
#   FENCING_ROOT    the repository
#   FENCING_SRC     a copy of the tree (Makefile, sql, expected, test, ...)
#                   that the postgres OS user can read and write
#   FENCING_WORK    the scratch directory of this version's run
#   FENCING_BINDIR  bindir of the private installation with the build
#   PG_CONFIG       its pg_config
#   FENCING_PGVER   15 or 18
#   PGHOST PGPORT PGDATA
#                   the main cluster (fencing preloaded; user postgres),
#                   which a suite may use or ignore
# (test/lib/common.sh gives it the same helpers, fencing_regress runs
# pg_regress); it prints TAP ("ok N - ...", "not ok N - ...", "# ..."), and
# says "1..0 # SKIP <reason>" when it cannot run here; a skip is shown in
# the summary with its reason, never silently absent.  A suite that has
# something to test here and cannot do it fails rather than skips.  A
# "not ok ... # TODO reason" is a known failure of PostgreSQL itself: it is
# counted apart and listed, never hidden and never counted as passed.

set -u
. "$(dirname "$0")/lib/common.sh"

pg_versions=
while [ $# -gt 0 ]; do
    case $1 in
    --pg) [ $# -ge 2 ] || fencing_die "--pg needs a version"; pg_versions="$pg_versions $2"; shift 2 ;;
    --pg=*) pg_versions="$pg_versions ${1#--pg=}"; shift ;;
    *) fencing_die "unknown argument $1 (use --pg 15 or --pg 18)" ;;
    esac
done
pg_versions=${pg_versions:-$FENCING_PGVERSIONS}
read -r -a pg_list <<<"$pg_versions"

# The TAP tests of every pass reserve their ports in one directory
# (PostgreSQL::Test::Cluster), so that passes side by side never share one.
export PG_TEST_PORT_DIR=${PG_TEST_PORT_DIR:-/tmp/fencing-portlock}
mkdir -p "$PG_TEST_PORT_DIR" && chmod 1777 "$PG_TEST_PORT_DIR"

# More than one version: run this script once per version, side by side
# (FENCING_SERIAL=1: one after the other), and sum their results.  The
# first version's output is shown as it comes, each other's when the one
# before it has ended.  Packages common to all versions are installed
# first, so that two apt runs do not race.
if [ "${#pg_list[@]}" -gt 1 ]; then
    all_pass=0
    all_fail=0
    lines=()
    t_all=$SECONDS
    fencing_set_pgver "${pg_list[0]}"
    fencing_deps
    logs=() pids=()
    for v in "${pg_list[@]}"; do
        log=$(mktemp "/tmp/fencing-check-$v.XXXXXX")
        logs+=("$log")
        bash "$0" --pg "$v" >"$log" 2>&1 &
        pids+=($!)
        [ -n "${FENCING_SERIAL:-}" ] && wait $!
    done
    trap 'kill "${pids[@]}" 2>/dev/null; exit 130' INT TERM
    for i in "${!pg_list[@]}"; do
        v=${pg_list[$i]} log=${logs[$i]}
        fencing_log "=== PostgreSQL $v ==="
        tail -n +1 --pid="${pids[$i]}" -f "$log"
        wait "${pids[$i]}"
        last=$(tail -n 1 "$log")
        if [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
            all_pass=$((all_pass + BASH_REMATCH[1]))
            all_fail=$((all_fail + BASH_REMATCH[2]))
        else
            all_fail=$((all_fail + 1))
            lines+=("PostgreSQL $v: the run ended without its summary line")
        fi
        # the child's summary block: its suite lines, and its failures
        while IFS= read -r l; do lines+=("$l"); done < <(awk -v v="$v" '
            /^Summary$/ { s = 1; next }
            s && /^Failures:$/ { f = 1; k = 0; next }
            s && /^Known failures/ { k = 1; f = 0; next }
            s && /^$/ { s = 0; f = 0; k = 0 }
            s && !f && !k && /^  / { sub(/^  /, ""); print }
            s && k { sub(/^  /, ""); print "known failure of PostgreSQL (not counted), on " v ": " $0 }
            s && f { sub(/^  /, ""); print "failure on " v ": " $0 }' "$log")
        lines+=("PostgreSQL $v: $last")
        rm -f "$log"
    done
    echo
    joined=${pg_list[*]}
    echo "Summary over PostgreSQL ${joined// / and } ($((SECONDS - t_all)) s)"
    printf '  %s\n' "${lines[@]}"
    echo
    echo "$all_pass passed, $all_fail failed"
    [ "$all_fail" -eq 0 ]
    exit
fi
fencing_set_pgver "${pg_list[0]}"

trap fencing_cleanup EXIT
trap 'exit 130' INT TERM

# The suites, in order: the first ones, every other by name, the last ones.
first="regress isolation pgtap tap memory"
last="bench"
all=$(cd "$FENCING_ROOT/test/suites" && printf '%s\n' *.sh | sed 's/\.sh$//' | sort)
default=
for s in $first; do
    echo "$all" | grep -qx "$s" && default="$default $s"
done
for s in $all; do
    case " $first $last " in *" $s "*) ;; *) default="$default $s" ;; esac
done
for s in $last; do
    echo "$all" | grep -qx "$s" && default="$default $s"
done
suites=${FENCING_SUITES:-$default}
for s in $suites; do
    [ -f "$FENCING_ROOT/test/suites/$s.sh" ] || fencing_die "unknown suite $s (one of:$default)"
done

total_pass=0
total_fail=0
report=()

fencing_deps
fencing_build "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING"
[ -n "${FENCING_KEEP:-}" ] && fencing_log "scratch directory (kept): $FENCING_WORK"
# work from the scratch directory: the postgres OS user may not be able to
# enter the repository's directory (a clone under a private mktemp -d)
cd "$FENCING_WORK" || fencing_die "cannot enter $FENCING_WORK"

# The tree, where the postgres OS user can read it and make can write its
# results: what the suites run their make targets in.
FENCING_SRC=$FENCING_WORK/src
mkdir -p "$FENCING_SRC"
cp -a "$FENCING_ROOT/Makefile" "$FENCING_ROOT/fencing.control" "$FENCING_ROOT/META.json" \
    "$FENCING_ROOT/sql" "$FENCING_ROOT/expected" "$FENCING_ROOT/test" "$FENCING_SRC/"
chown -R postgres: "$FENCING_SRC"
export FENCING_ROOT FENCING_SRC

fencing_cluster_start main "shared_preload_libraries = 'fencing'"
fencing_log "cluster up on port $PGPORT"

# Count a suite's TAP: "ok N", "not ok N" (a "# TODO" one is a known
# failure of PostgreSQL); a script that failed without a failing line
# fails once.  Prints the suite's summary line; LOG.report.counts gets
# "passed failed".
count_tap() {
    local log=$1 name=$2 status=$3
    local ok bad known
    ok=$(grep -cE '^\s*ok [0-9]+' "$log")
    bad=$(grep -E '^\s*not ok [0-9]+' "$log" | grep -cvE '# *TODO')
    known=$(grep -E '^\s*not ok [0-9]+' "$log" | grep -cE '# *TODO')
    grep -E '^\s*not ok [0-9]+' "$log" | grep -vE '# *TODO' | sed "s/^/$name: /" >>"$FENCING_WORK/failures"
    grep -E '^\s*not ok [0-9]+' "$log" | grep -E '# *TODO' | sed "s/^/$name: /" >>"$FENCING_WORK/known"
    if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
        bad=1
        echo "$name: exited $status without a failing assertion (see $log)" >>"$FENCING_WORK/failures"
    fi
    echo "$ok $bad" >"$log.report.counts"
    printf '%-10s PostgreSQL %s %5d passed, %d failed%s (%d s)\n' "$name" "$FENCING_PGVER" "$ok" "$bad" \
        "$([ "$known" -gt 0 ] && echo ", $known known failure(s) not ours (TODO, listed below)")" "$4"
}

: >"$FENCING_WORK/failures"
: >"$FENCING_WORK/known"
# regress, isolation and pgtap run first, one at a time, with nothing
# beside them: they read counters of the main cluster that any write on
# it moves.  Every other suite runs on servers of its own (or databases
# of its own) and they run FENCING_JOBS at a time (default 2); what each
# prints is shown when it ends, the summary keeps the order of the suites.
alone=" regress isolation pgtap "
jobs=${FENCING_JOBS:-2}
declare -A t_start=()
run_suite() {
    local suite=$1
    fencing_log "suite $suite (test/suites/$suite.sh)"
    t_start[$suite]=$SECONDS
    { (cd "$FENCING_WORK" && bash "$FENCING_ROOT/test/suites/$suite.sh") >"$FENCING_WORK/suite-$suite.log" 2>&1
      echo "$? $SECONDS" >"$FENCING_WORK/suite-$suite.status"; } &
}
finish_suite() {
    local suite=$1 log=$FENCING_WORK/suite-$1.log st t1 skip
    read -r st t1 <"$FENCING_WORK/suite-$suite.status"
    skip=$(sed -n 's/^1\.\.0 *# *[Ss][Kk][Ii][Pp] *//p' "$log" | head -1)
    fencing_log "suite $suite ended ($((t1 - t_start[$suite])) s)"
    # the log without its passing lines
    grep -vE '^\s*ok [0-9]+' "$log"
    if [ -n "$skip" ] && [ "$st" -eq 0 ]; then
        printf '%-10s PostgreSQL %s skipped: %s\n' "$suite" "$FENCING_PGVER" "$skip" >"$log.report"
    else
        count_tap "$log" "$suite" "$st" $((t1 - t_start[$suite])) >"$log.report"
    fi
}
running=()
for suite in $suites; do
    if [[ $alone == *" $suite "* ]]; then
        wait; for r in "${running[@]}"; do finish_suite "$r"; done; running=()
        run_suite "$suite"; wait; finish_suite "$suite"
        continue
    fi
    while [ "${#running[@]}" -ge "$jobs" ]; do
        wait -n
        still=()
        for r in "${running[@]}"; do
            if [ -f "$FENCING_WORK/suite-$r.status" ]; then finish_suite "$r"; else still+=("$r"); fi
        done
        running=("${still[@]}")
    done
    run_suite "$suite"
    running+=("$suite")
done
wait
for r in "${running[@]}"; do finish_suite "$r"; done
for suite in $suites; do
    r=$FENCING_WORK/suite-$suite.log.report
    IFS=' ' read -r ok bad <"$r.counts" 2>/dev/null || { ok=0 bad=0; }
    total_pass=$((total_pass + ok))
    total_fail=$((total_fail + bad))
    report+=("$(cat "$r")")
done

echo
echo "Summary"
echo "  PostgreSQL $FENCING_PGVER: $("$FENCING_BINDIR/postgres" -V), $SECONDS s in all"
printf '  %s\n' "${report[@]}"
if [ -s "$FENCING_WORK/known" ]; then
    echo "Known failures of PostgreSQL itself (not counted):"
    sed 's/^/  /' "$FENCING_WORK/known"
fi
if [ -s "$FENCING_WORK/failures" ]; then
    echo "Failures:"
    sed 's/^/  /' "$FENCING_WORK/failures"
fi
echo
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
