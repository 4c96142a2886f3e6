#!/usr/bin/env bash
# test/check.sh: every test suite, on throwaway clusters, on PostgreSQL 15
# and 18 (what `make test` and .ci/run run; test/README.md describes each
# suite).
#
#   sudo bash test/check.sh          every suite on 15, then on 18
#   sudo bash test/check.sh --pg 18  one server version only (15 or 18)
#   sudo FENCING_SUITES="regress isolation" bash test/check.sh --pg 15
#
# This script only orchestrates.  It installs what is missing (apt, as
# root), builds with -Wall -Wextra -Werror and assertions into a private
# copy of the server (test/lib/common.sh; PostgreSQL 18 is built from
# source once and cached, test/lib/pg18.sh), copies the tree where the
# postgres OS user can read it, starts the main cluster (fencing
# preloaded), runs each suite and adds up what they print.  Each version
# runs in a process of its own; every summary line names its version, and
# the last line is "N passed, M failed" over all of them; the exit status
# is non-zero when anything failed.
#
# A suite is test/suites/NAME.sh.  By default they run in this order:
# regress isolation pgtap tap memory, then every other suite by name, then
# bench (last: it rebuilds without assertions).  FENCING_SUITES="a b" runs
# those given, in that order; FENCING_KEEP=1 keeps the scratch directory
# (logs, diffs, results) for a post-mortem.
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

# More than one version: run this script once per version, one after the
# other, and sum their results.
if [ "${#pg_list[@]}" -gt 1 ]; then
    all_pass=0
    all_fail=0
    lines=()
    t_all=$SECONDS
    for v in "${pg_list[@]}"; do
        t_v=$SECONDS
        log=$(mktemp "/tmp/fencing-check-$v.XXXXXX")
        fencing_log "=== PostgreSQL $v ==="
        bash "$0" --pg "$v" 2>&1 | tee "$log"
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
        lines+=("$(printf 'PostgreSQL %s: %s (%d s)' "$v" "$last" $((SECONDS - t_v)))")
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
# fails once.
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
    total_pass=$((total_pass + ok))
    total_fail=$((total_fail + bad))
    report+=("$(printf '%-10s PostgreSQL %s %5d passed, %d failed%s (%d s)' "$name" "$FENCING_PGVER" "$ok" "$bad" \
        "$([ "$known" -gt 0 ] && echo ", $known known failure(s) not ours (TODO, listed below)")" "$4")")
}

: >"$FENCING_WORK/failures"
: >"$FENCING_WORK/known"
for suite in $suites; do
    fencing_log "suite $suite (test/suites/$suite.sh)"
    t0=$SECONDS
    log=$FENCING_WORK/suite-$suite.log
    (cd "$FENCING_WORK" && bash "$FENCING_ROOT/test/suites/$suite.sh") >"$log" 2>&1
    st=$?
    skip=$(sed -n 's/^1\.\.0 *# *[Ss][Kk][Ii][Pp] *//p' "$log" | head -1)
    # the log without its passing lines
    grep -vE '^\s*ok [0-9]+' "$log"
    if [ -n "$skip" ] && [ "$st" -eq 0 ]; then
        report+=("$(printf '%-10s PostgreSQL %s skipped: %s' "$suite" "$FENCING_PGVER" "$skip")")
    else
        count_tap "$log" "$suite" $st $((SECONDS - t0))
    fi
done

echo
echo "Summary"
echo "  PostgreSQL $FENCING_PGVER: $("$FENCING_BINDIR/postgres" -V)"
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
