#!/usr/bin/env bash
# test/check.sh: the whole test suite on a throwaway cluster.
#
#   sudo bash test/check.sh          (or: make test)  every suite on 15, then on 18
#   sudo bash test/check.sh --pg 18  one server version only (15 or 18)
#
# Installs what is missing, builds with -Wall -Wextra -Werror and assertions,
# installs into a private copy of PostgreSQL, starts a cluster as the
# postgres OS user and runs every suite: pg_regress, isolation, pgTAP and the
# Perl TAP tests.  PostgreSQL 15 is Debian's; 18 is built from source the
# first time and cached (test/lib/pg18.sh; FENCING_PG18_SRC names its
# tarball).  Each version runs in a process of its own; every summary line
# names the version it ran on, and the last line is "N passed, M failed"
# over all of them; the exit status is non-zero when anything failed.
#
# Environment: FENCING_SUITES="regress isolation pgtap tap memory bench" picks suites
# (memory: the pg_regress suite again, for memory errors: AddressSanitizer
# where PostgreSQL runs with libasan preloaded, else valgrind memcheck);
# FENCING_KEEP=1 keeps the scratch directory (logs, diffs) for a post-mortem.
#
# Suites of their own: every test/suites/NAME.sh is a suite NAME, run after
# the built-in ones and before bench, in name order.  Such a script runs as
# root from the scratch directory with FENCING_ROOT, FENCING_WORK,
# FENCING_BINDIR, PG_CONFIG and FENCING_PGVER set (test/lib/common.sh gives
# it the same helpers), prints TAP ("ok N - ...", "not ok N - ..."), and
# says "1..0 # SKIP <reason>" when it cannot run here; a skip is shown in
# the summary with its reason, never silently absent.

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

# More than one version: run this script once per version, one after the
# other, and sum their results.
if [ "$(echo $pg_versions | wc -w)" -gt 1 ]; then
    all_pass=0
    all_fail=0
    lines=()
    t_all=$SECONDS
    for v in $pg_versions; do
        t_v=$SECONDS
        log=$(mktemp /tmp/fencing-check-$v.XXXXXX)
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
    echo "Summary over PostgreSQL $(echo $pg_versions | sed 's/ / and /g') ($((SECONDS - t_all)) s)"
    printf '  %s\n' "${lines[@]}"
    echo
    echo "$all_pass passed, $all_fail failed"
    [ "$all_fail" -eq 0 ]
    exit
fi
fencing_set_pgver $pg_versions

trap fencing_cleanup EXIT
trap 'exit 130' INT TERM

# the built-in suites, then test/suites/*.sh by name, then the benchmark
own_suites=$(cd "$FENCING_ROOT/test/suites" 2>/dev/null && ls -1 -- *.sh 2>/dev/null | sed 's/\.sh$//' | sort | tr '\n' ' ')
suites=${FENCING_SUITES:-regress isolation pgtap tap memory $own_suites bench}
total_pass=0
total_fail=0
report=()
failures=()

# Record a suite's result: name, passed, failed[, known failures].
record() {
    total_pass=$((total_pass + $2))
    total_fail=$((total_fail + $3))
    local known=${4:-0}
    report+=("$(printf '%-10s PostgreSQL %s %5d passed, %d failed%s' "$1" "$FENCING_PGVER" "$2" "$3" \
        "$([ "$known" -gt 0 ] && echo ", $known known failure(s) not ours (TODO, listed below)")")")
}

fencing_deps
fencing_build "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING"
[ -n "${FENCING_KEEP:-}" ] && fencing_log "scratch directory (kept): $FENCING_WORK"
# work from the scratch directory: the postgres OS user may not be able to
# enter the repository's directory (a clone under a private mktemp -d)
cd "$FENCING_WORK"

# The inputs, where the postgres OS user can read them.
src=$FENCING_WORK/src
mkdir -p "$src"
cp -a "$FENCING_ROOT/sql" "$FENCING_ROOT/expected" "$FENCING_ROOT/test" "$src/"
chown -R postgres: "$src"

fencing_cluster_start main "shared_preload_libraries = 'fencing'"
fencing_log "cluster up on port $PGPORT"

regress_list=$(make -s -C "$FENCING_ROOT" print-regress PG_CONFIG="$PG_CONFIG")
isolation_list=$(make -s -C "$FENCING_ROOT" print-isolation PG_CONFIG="$PG_CONFIG")
pgxs_dir=$(dirname "$(dirname "$(dirname "$("$PG_CONFIG" --pgxs)")")")

# pg_regress output lines end in "ok" or "FAILED" (15), or are TAP lines
# "ok N - name" / "not ok N - name" (16 and later); count them.
count_regress() {
    local log=$1 name=$2 status=$3
    local ok bad
    ok=$(grep -cE '^(test| ) .* \.\.\. ok|^ok [0-9]+ ' "$log")
    bad=$(grep -cE '\.\.\. FAILED|\.\.\. failed|^not ok [0-9]+ ' "$log")
    grep -E '\.\.\. (FAILED|failed)|^not ok [0-9]+ ' "$log" | sed "s/^/$name: /" >>"$FENCING_WORK/failures"
    if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
        bad=1
        echo "$name: runner exited $status without a failing test (see $log)" >>"$FENCING_WORK/failures"
    fi
    record "$name" "$ok" "$bad"
}

# TAP output (verbose): count "ok N" and "not ok N" lines.  A "not ok ...
# # TODO reason" is TAP's known failure: a suite marks so what fails in
# PostgreSQL itself, not in the extension (pg_upgrade's baseline); it is
# counted apart and listed, never hidden and never counted as passed.
count_tap() {
    local log=$1 name=$2 status=$3
    local ok bad known
    ok=$(grep -cE '^\s*ok [0-9]+' "$log")
    bad=$(grep -E '^\s*not ok [0-9]+' "$log" | grep -cvE '# *TODO')
    known=$(grep -E '^\s*not ok [0-9]+' "$log" | grep -cE '# *TODO')
    grep -E '^\s*not ok [0-9]+' "$log" | grep -vE '# *TODO' | sed "s/^/$name: /" >>"$FENCING_WORK/failures"
    grep -E '^\s*not ok [0-9]+' "$log" | grep -E '# *TODO' | sed "s/^/$name: /" >>"$FENCING_WORK/known"
    # a script that died without a failing assertion still fails
    if [ "$status" -ne 0 ] && [ "$bad" -eq 0 ]; then
        bad=1
        echo "$name: exited $status without a failing assertion (see $log)" >>"$FENCING_WORK/failures"
    fi
    record "$name" "$ok" "$bad" "$known"
}

: >"$FENCING_WORK/failures"
: >"$FENCING_WORK/known"
for suite in $suites; do
    case $suite in
    regress)
        fencing_log "pg_regress: $regress_list"
        mkdir -p "$FENCING_WORK/regress" && chown postgres: "$FENCING_WORK/regress"
        fencing_as_postgres "$pgxs_dir/src/test/regress/pg_regress" \
            --bindir="$FENCING_BINDIR" --inputdir="$src" --outputdir="$FENCING_WORK/regress" \
            --host="$PGHOST" --port="$PGPORT" --user=postgres \
            --dbname=fencing_regress --load-extension=fencing \
            $regress_list >"$FENCING_WORK/regress.log" 2>&1
        st=$?
        cat "$FENCING_WORK/regress.log"
        [ -f "$FENCING_WORK/regress/regression.diffs" ] && head -200 "$FENCING_WORK/regress/regression.diffs"
        count_regress "$FENCING_WORK/regress.log" regress $st
        ;;
    isolation)
        fencing_log "isolation: $isolation_list"
        mkdir -p "$FENCING_WORK/isolation" && chown postgres: "$FENCING_WORK/isolation"
        fencing_as_postgres "$pgxs_dir/src/test/isolation/pg_isolation_regress" \
            --bindir="$FENCING_BINDIR" --inputdir="$src/test/isolation" \
            --outputdir="$FENCING_WORK/isolation" \
            --host="$PGHOST" --port="$PGPORT" --user=postgres \
            --dbname=fencing_isolation --load-extension=fencing \
            $isolation_list >"$FENCING_WORK/isolation.log" 2>&1
        st=$?
        cat "$FENCING_WORK/isolation.log"
        [ -f "$FENCING_WORK/isolation/regression.diffs" ] && head -200 "$FENCING_WORK/isolation/regression.diffs"
        count_regress "$FENCING_WORK/isolation.log" isolation $st
        ;;
    pgtap)
        fencing_log "pgTAP"
        fencing_as_postgres psql -q -X -v ON_ERROR_STOP=1 -d postgres \
            -c 'CREATE DATABASE fencing_pgtap' >/dev/null
        fencing_as_postgres psql -q -X -v ON_ERROR_STOP=1 -d fencing_pgtap \
            -c 'CREATE EXTENSION pgtap' -c 'CREATE EXTENSION fencing' >/dev/null
        fencing_as_postgres pg_prove -v -d fencing_pgtap -h "$PGHOST" -p "$PGPORT" -U postgres \
            "$src"/test/pgtap/*.sql >"$FENCING_WORK/pgtap.log" 2>&1
        st=$?
        grep -vE '^\s*ok [0-9]+' "$FENCING_WORK/pgtap.log"
        count_tap "$FENCING_WORK/pgtap.log" pgtap $st
        ;;
    tap)
        fencing_log "Perl TAP"
        mkdir -p "$FENCING_WORK/tap" && chown postgres: "$FENCING_WORK/tap"
        (cd "$src" && fencing_as_postgres env \
            PERL5LIB="$pgxs_dir/src/test/perl:$src/test/perl" \
            PG_REGRESS="$pgxs_dir/src/test/regress/pg_regress" \
            TESTDIR="$FENCING_WORK/tap" TESTDATADIR="$FENCING_WORK/tap/tmp_check" \
            TESTLOGDIR="$FENCING_WORK/tap/log" PGHOST= PGPORT= \
            prove -v test/t/*.pl) >"$FENCING_WORK/tap.log" 2>&1
        st=$?
        grep -vE '^\s*ok [0-9]+' "$FENCING_WORK/tap.log"
        count_tap "$FENCING_WORK/tap.log" tap $st
        ;;
    memory)
        # Memory errors in the extension, under the pg_regress suite.
        # First choice: the extension built with -fsanitize=address, loaded
        # into the (uninstrumented) Debian server run with libasan
        # preloaded.  Here (gcc 12, glibc 2.36, Debian's PostgreSQL 15)
        # every PostgreSQL program started with libasan preloaded hangs in
        # bindtextdomain() before main() does anything (a deadlock on
        # glibc's _nl_state_lock; `LD_PRELOAD=$(gcc -print-file-name=libasan.so)
        # postgres -V` never returns), so a probe decides, and the fallback
        # is valgrind memcheck on the server (every backend) running the
        # same suite: any error whose stack passes through fencing.so, or a
        # crash, fails it.  PostgreSQL's own known valgrind reports (WAL
        # padding written with pwrite, the relcache init file) are not ours
        # and are only counted.
        asan_bad=0
        saved=("$FENCING_BINDIR" "$PG_CONFIG" "$PGHOST" "$PGPORT" "$PGDATA")
        libasan=$(gcc -print-file-name=libasan.so)
        mode=none
        if [ -f "$libasan" ] && timeout 20 env LD_PRELOAD="$libasan" \
            ASAN_OPTIONS=detect_leaks=0 "$FENCING_BINDIR/postgres" -V >/dev/null 2>&1; then
            mode=asan
        elif command -v valgrind >/dev/null; then
            mode=valgrind
            fencing_log "AddressSanitizer cannot run PostgreSQL here (postgres -V hangs with libasan preloaded); valgrind memcheck instead"
        fi
        mem_dir=$FENCING_WORK/memcheck-reports
        mkdir -p "$mem_dir" "$FENCING_WORK/asan" && chown postgres: "$mem_dir" "$FENCING_WORK/asan"
        case $mode in
        asan)
            fencing_log "AddressSanitizer: pg_regress against an ASan build"
            fencing_build "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING -fsanitize=address -fno-omit-frame-pointer" install-asan
            FENCING_START_ENV="LD_PRELOAD=$libasan ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$mem_dir/asan"
            fencing_cluster_start asan "shared_preload_libraries = 'fencing'"
            FENCING_START_ENV=
            in_backend=$(fencing_as_postgres psql -X -At -d postgres \
                -c "SELECT pg_read_file('/proc/self/maps') LIKE '%libasan%'")
            if [ "$in_backend" != t ]; then
                echo "asan: libasan is not loaded in the backends" >>"$FENCING_WORK/failures"
                asan_bad=$((asan_bad + 1))
            fi
            ;;
        valgrind)
            fencing_log "valgrind memcheck: pg_regress against a server under valgrind"
            fencing_cluster_start asan "shared_preload_libraries = 'fencing'" "max_connections = 20"
            fencing_cluster_stop "$PGDATA"
            printf '#!/bin/sh\nexec valgrind --quiet --trace-children=yes --error-limit=no --num-callers=40 --log-file=%s/vg.%%p.log %s/postgres "$@"\n' \
                "$mem_dir" "$FENCING_BINDIR" >"$FENCING_WORK/postgres-valgrind"
            chmod 755 "$FENCING_WORK/postgres-valgrind"
            fencing_as_postgres "$FENCING_BINDIR/pg_ctl" -D "$PGDATA" -p "$FENCING_WORK/postgres-valgrind" \
                -l "$PGHOST/server.log" -t 600 -w start >/dev/null \
                || { cat "$PGHOST/server.log"; echo "asan: the server did not start under valgrind" >>"$FENCING_WORK/failures"; asan_bad=$((asan_bad + 1)); }
            ;;
        *)
            echo "asan: neither AddressSanitizer nor valgrind can run here" >>"$FENCING_WORK/failures"
            record memory 0 1
            continue
            ;;
        esac
        fencing_as_postgres "$pgxs_dir/src/test/regress/pg_regress" \
            --bindir="$FENCING_BINDIR" --inputdir="$src" --outputdir="$FENCING_WORK/asan" \
            --host="$PGHOST" --port="$PGPORT" --user=postgres \
            --dbname=fencing_asan --load-extension=fencing \
            $regress_list >"$FENCING_WORK/asan.log" 2>&1
        st=$?
        cat "$FENCING_WORK/asan.log"
        [ -f "$FENCING_WORK/asan/regression.diffs" ] && head -100 "$FENCING_WORK/asan/regression.diffs"
        mem_log=$PGHOST/server.log
        fencing_cluster_stop "$PGDATA"
        if [ "$mode" = asan ] && ls "$mem_dir"/asan* >/dev/null 2>&1; then
            echo "asan: AddressSanitizer reports in $mem_dir:" >>"$FENCING_WORK/failures"
            head -60 "$mem_dir"/asan* | tee -a "$FENCING_WORK/failures"
            asan_bad=$((asan_bad + 1))
        fi
        if [ "$mode" = valgrind ]; then
            ours=$(cat "$mem_dir"/vg.*.log 2>/dev/null | awk 'BEGIN { RS = "" } /fencing\.so/ { n++ } END { print n + 0 }')
            theirs=$(cat "$mem_dir"/vg.*.log 2>/dev/null | grep -c 'points to uninitialised\|Invalid \|uninitialised value\|definitely lost')
            fencing_log "valgrind: $ours error(s) in fencing.so; $theirs report line(s) of PostgreSQL itself"
            if [ "$ours" -ne 0 ]; then
                echo "asan: valgrind reports errors in fencing.so (see $mem_dir):" >>"$FENCING_WORK/failures"
                cat "$mem_dir"/vg.*.log | awk 'BEGIN { RS = ""; ORS = "\n\n" } /fencing\.so/' | head -80 | tee -a "$FENCING_WORK/failures"
                asan_bad=$((asan_bad + 1))
            fi
        fi
        if grep -qE 'terminated by signal|was terminated|PANIC' "$mem_log"; then
            echo "asan: a server process crashed (see $mem_log)" >>"$FENCING_WORK/failures"
            grep -E 'terminated by signal|was terminated|PANIC' "$mem_log" | head -5
            asan_bad=$((asan_bad + 1))
        fi
        asan_ok=$(grep -cE '^(test| ) .* \.\.\. ok|^ok [0-9]+ ' "$FENCING_WORK/asan.log")
        asan_failed=$(grep -cE '\.\.\. FAILED|\.\.\. failed|^not ok [0-9]+ ' "$FENCING_WORK/asan.log")
        grep -E '\.\.\. (FAILED|failed)|^not ok [0-9]+ ' "$FENCING_WORK/asan.log" | sed "s/^/asan: /" >>"$FENCING_WORK/failures"
        if [ "$st" -ne 0 ] && [ "$asan_failed" -eq 0 ]; then
            asan_failed=1
            echo "asan: pg_regress exited $st without a failing test (see $FENCING_WORK/asan.log)" >>"$FENCING_WORK/failures"
        fi
        # one more line for "no memory error, no crash"
        if [ "$asan_bad" -eq 0 ]; then
            fencing_log "$mode: no memory error in fencing, no crash"
            record "memory" $((asan_ok + 1)) "$asan_failed"
        else
            record "memory" "$asan_ok" $((asan_failed + asan_bad))
        fi
        FENCING_BINDIR=${saved[0]} PG_CONFIG=${saved[1]} PGHOST=${saved[2]} PGPORT=${saved[3]} PGDATA=${saved[4]}
        export FENCING_BINDIR PG_CONFIG PGHOST PGPORT PGDATA
        # leave no ASan objects in the tree
        [ "$mode" = asan ] && make -C "$FENCING_ROOT" -s clean >/dev/null
        ;;
    bench)
        # the benchmark's smoke mode: every variant runs for about a second
        # and fencing.stats shows the acceptances and rejections designed;
        # no timing is judged.  Last, as it rebuilds without assertions; its
        # own scratch directory, as its cleanup removes it.
        fencing_log "benchmark smoke run"
        if env -u FENCING_WORK -u PGHOST -u PGPORT -u PGDATA \
            bash "$FENCING_ROOT/test/bench/run.sh" --smoke >"$FENCING_WORK/bench.log" 2>&1; then
            tail -n 25 "$FENCING_WORK/bench.log"
            record bench 1 0
        else
            tail -n 60 "$FENCING_WORK/bench.log"
            echo "bench: test/bench/run.sh --smoke failed (see above)" >>"$FENCING_WORK/failures"
            record bench 0 1
        fi
        ;;
    *)
        script=$FENCING_ROOT/test/suites/$suite.sh
        [ -f "$script" ] || fencing_die "unknown suite $suite"
        fencing_log "suite $suite (test/suites/$suite.sh)"
        (cd "$FENCING_WORK" && FENCING_ROOT=$FENCING_ROOT FENCING_WORK=$FENCING_WORK \
            FENCING_BINDIR=$FENCING_BINDIR PG_CONFIG=$PG_CONFIG FENCING_PGVER=$FENCING_PGVER \
            bash "$script") >"$FENCING_WORK/suite-$suite.log" 2>&1
        st=$?
        skip=$(sed -n 's/^1\.\.0 *# *[Ss][Kk][Ii][Pp] *//p' "$FENCING_WORK/suite-$suite.log" | head -1)
        grep -vE '^\s*ok [0-9]+' "$FENCING_WORK/suite-$suite.log"
        if [ -n "$skip" ] && [ "$st" -eq 0 ]; then
            report+=("$(printf '%-10s PostgreSQL %s skipped: %s' "$suite" "$FENCING_PGVER" "$skip")")
        else
            count_tap "$FENCING_WORK/suite-$suite.log" "$suite" $st
        fi
        ;;
    esac
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
