#!/usr/bin/env bash
# test/suites/memory.sh: the pg_regress files again, watched for memory
# errors in the extension.
#
# First choice: the extension built with -fsanitize=address, loaded into
# the (uninstrumented) server run with libasan preloaded.  Here (gcc 12,
# glibc 2.36, Debian's PostgreSQL 15) every PostgreSQL program started with
# libasan preloaded hangs in bindtextdomain() before main() does anything
# (a deadlock on glibc's _nl_state_lock; `LD_PRELOAD=$(gcc
# -print-file-name=libasan.so) postgres -V` never returns), so a probe
# decides, and the fallback is valgrind memcheck on the server (every
# backend) running the same files: any error whose stack passes through
# fencing.so, or a crash, fails it.  PostgreSQL's own known valgrind
# reports (WAL padding written with pwrite, the relcache init file) are not
# ours and are only counted.  Prints TAP: the pg_regress files, then one
# line for "no memory error in fencing, no crash".

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
trap fencing_cleanup EXIT
FENCING_KEEP=1      # the scratch directory is test/check.sh's

libasan=$(gcc -print-file-name=libasan.so)
mode=none
if [ -f "$libasan" ] && timeout 20 env LD_PRELOAD="$libasan" \
    ASAN_OPTIONS=detect_leaks=0 "$FENCING_BINDIR/postgres" -V >/dev/null 2>&1; then
    mode=asan
elif command -v valgrind >/dev/null; then
    mode=valgrind
    echo "# AddressSanitizer cannot run PostgreSQL here (postgres -V hangs with libasan preloaded); valgrind memcheck instead"
fi
mem_dir=$FENCING_WORK/memcheck-reports
mkdir -p "$mem_dir" && chown postgres: "$mem_dir"
case $mode in
asan)
    echo "# AddressSanitizer: pg_regress against an ASan build"
    fencing_build "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING -fsanitize=address -fno-omit-frame-pointer" install-asan
    FENCING_START_ENV="LD_PRELOAD=$libasan ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$mem_dir/asan"
    fencing_cluster_start memory "shared_preload_libraries = 'fencing'"
    FENCING_START_ENV=
    in_backend=$(fencing_as_postgres psql -X -At -d postgres \
        -c "SELECT pg_read_file('/proc/self/maps') LIKE '%libasan%'")
    tap_ok "$([ "$in_backend" = t ]; echo $?)" "libasan is loaded in the backends"
    ;;
valgrind)
    echo "# valgrind memcheck: pg_regress against a server under valgrind"
    fencing_cluster_start memory "shared_preload_libraries = 'fencing'" "max_connections = 20"
    fencing_cluster_stop "$PGDATA"
    printf '#!/bin/sh\nexec valgrind --quiet --trace-children=yes --error-limit=no --num-callers=40 --log-file=%s/vg.%%p.log %s/postgres "$@"\n' \
        "$mem_dir" "$FENCING_BINDIR" >"$FENCING_WORK/postgres-valgrind"
    chmod 755 "$FENCING_WORK/postgres-valgrind"
    fencing_as_postgres "$FENCING_BINDIR/pg_ctl" -D "$PGDATA" -p "$FENCING_WORK/postgres-valgrind" \
        -l "$PGHOST/server.log" -t 600 -w start >/dev/null
    st=$?
    tap_ok $st "the server starts under valgrind"
    [ $st -eq 0 ] || { tap_diag "$(tail -20 "$PGHOST/server.log")"; tap_done; exit 1; }
    ;;
*)
    tap_ok 1 "AddressSanitizer or valgrind can run here (neither can)"
    tap_done
    exit 1
    ;;
esac

fencing_regress regress "$FENCING_WORK/memory-regress" >"$FENCING_WORK/memory.tap"
st=$?
while IFS= read -r line; do
    case $line in
    "ok "*) tap_ok 0 "${line#ok * - }" ;;
    "not ok "*) tap_ok 1 "${line#not ok * - }" ;;
    *) echo "$line" ;;
    esac
done <"$FENCING_WORK/memory.tap"
mem_log=$PGHOST/server.log
fencing_cluster_stop "$PGDATA"

bad=0
if [ "$mode" = asan ] && ls "$mem_dir"/asan* >/dev/null 2>&1; then
    tap_diag "AddressSanitizer reports in $mem_dir:" "$(head -60 "$mem_dir"/asan*)"
    bad=1
fi
if [ "$mode" = valgrind ]; then
    ours=$(cat "$mem_dir"/vg.*.log 2>/dev/null | awk 'BEGIN { RS = "" } /fencing\.so/ { n++ } END { print n + 0 }')
    theirs=$(cat "$mem_dir"/vg.*.log 2>/dev/null | grep -c 'points to uninitialised\|Invalid \|uninitialised value\|definitely lost')
    echo "# valgrind: $ours error(s) in fencing.so; $theirs report line(s) of PostgreSQL itself"
    if [ "$ours" -ne 0 ]; then
        tap_diag "valgrind reports errors in fencing.so (see $mem_dir):" \
            "$(cat "$mem_dir"/vg.*.log | awk 'BEGIN { RS = ""; ORS = "\n\n" } /fencing\.so/' | head -80)"
        bad=1
    fi
fi
if grep -qE 'terminated by signal|was terminated|PANIC' "$mem_log"; then
    tap_diag "a server process crashed (see $mem_log):" "$(grep -E 'terminated by signal|was terminated|PANIC' "$mem_log" | head -5)"
    bad=1
fi
tap_ok $bad "$mode: no memory error in fencing, no crash"
# leave no ASan objects in the tree
[ "$mode" = asan ] && make -C "$FENCING_ROOT" -s clean >/dev/null
tap_done
[ "$st" -eq 0 ] && [ "$tap_failed" -eq 0 ]
