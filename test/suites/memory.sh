#!/usr/bin/env bash
# test/suites/memory.sh: the pg_regress files again, watched for memory
# errors in the extension: built with -fsanitize=address where PostgreSQL
# runs with libasan preloaded (a probe decides: here every program hangs in
# bindtextdomain() with it), else the server under valgrind memcheck; a
# report through fencing.so or a crash fails (test/memory/check_reports.pl).
#
# The files run in two groups side by side, each in a database of its own
# (under valgrind a backend runs some 30 times slower, and one pg_regress
# keeps one core busy): the second group is the files named in
# $independent, which touch nothing but their own database; the first,
# every other file in its usual order, among them those that read or
# change what the whole cluster shares (idempotency and lease counters,
# which count every database together, roles of the same name, databases
# they create).  A new file runs in the first group until it is named
# there.  The server runs without autovacuum: its workers would run under
# valgrind too, and no file depends on them.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
trap fencing_cleanup EXIT
FENCING_KEEP=1      # the scratch directory is test/check.sh's
fencing_need memory 2>&1 | fencing_diag
mem=$FENCING_WORK/memcheck-reports && mkdir -p "$mem" && chown postgres: "$mem"
libasan=$(gcc -print-file-name=libasan.so)
if [ -f "$libasan" ] && timeout 20 env LD_PRELOAD="$libasan" \
    ASAN_OPTIONS=detect_leaks=0 "$FENCING_BINDIR/postgres" -V >/dev/null 2>&1; then
    mode=asan
    echo "# AddressSanitizer: pg_regress against an ASan build"
    fencing_build "-Wall -Wextra -Werror -DUSE_ASSERT_CHECKING -fsanitize=address -fno-omit-frame-pointer" install-asan
    FENCING_START_ENV="LD_PRELOAD=$libasan ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$mem/asan" \
        fencing_cluster_start memory "shared_preload_libraries = 'fencing'" "autovacuum = off"
    [ "$(fencing_as_postgres psql -X -At -c "SELECT pg_read_file('/proc/self/maps') LIKE '%libasan%'")" = t ]
    tap_ok $? "libasan is loaded in the backends"
elif command -v valgrind >/dev/null; then
    mode=valgrind
    echo "# AddressSanitizer cannot run PostgreSQL here (postgres -V hangs with libasan preloaded); valgrind memcheck instead"
    fencing_cluster_start memory "shared_preload_libraries = 'fencing'" "max_connections = 20" "autovacuum = off"
    fencing_cluster_stop "$PGDATA"
    printf '#!/bin/sh\nexec valgrind --quiet --trace-children=yes --error-limit=no --num-callers=40 --log-file=%s/vg.%%p.log %s/postgres "$@"\n' \
        "$mem" "$FENCING_BINDIR" >"$FENCING_WORK/postgres-valgrind"
    chmod 755 "$FENCING_WORK/postgres-valgrind"
    fencing_as_postgres "$FENCING_BINDIR/pg_ctl" -D "$PGDATA" -p "$FENCING_WORK/postgres-valgrind" \
        -l "$PGHOST/server.log" -t 600 -w start >/dev/null
    tap_ok $? "the server starts under valgrind"
else
    tap_ok 1 "AddressSanitizer or valgrind can run here (neither can)"
fi
[ "$tap_failed" -eq 0 ] || { tap_diag "$(tail -20 "${PGHOST:-.}/server.log" 2>&1)"; tap_done; exit 1; }

independent="fence_type fence_input advance guard_row guard_key guard_key_identity guard_scope_owner
    guard_one_token guard_bulk guard_paths guard_privileges guard_bypass guard_ddl guard_ddl_triggers
    guard_seed guard_trigger_owner guard_ddl_types token_source guard_write_code
    guard_trigger_code_later scope_visibility scope_health scope_row_security"
all=$(make -s --no-print-directory -C "$FENCING_SRC" print-regress PG_CONFIG="$PG_CONFIG" | tr ' ' '\n' | grep -v '^$')
g1=$(grep -vxF -f <(tr -s ' \n' '\n' <<<"$independent") <<<"$all" | tr '\n' ' ')
g2=$(grep -xF -f <(tr -s ' \n' '\n' <<<"$independent") <<<"$all" | tr '\n' ' ')
if [ -z "$g1" ] || [ -z "$g2" ]; then
    tap_ok 1 "the regression files in two groups (the Makefile's REGRESS: $all)"
    tap_done
    exit 1
fi
fencing_regress regress "$FENCING_WORK/memory-regress" REGRESS="$g1" >"$FENCING_WORK/memory-1.tap" &
p1=$!
fencing_regress regress "$FENCING_WORK/memory-regress-2" REGRESS="$g2" CONTRIB_TESTDB=contrib_regression_2 \
    >"$FENCING_WORK/memory-2.tap" &
p2=$!
wait $p1; st=$?
wait $p2 || st=1
cat "$FENCING_WORK/memory-1.tap" "$FENCING_WORK/memory-2.tap" >"$FENCING_WORK/memory.tap"
# its lines, numbered after the first
awk -v n="$tap_n" '/^(not )?ok [0-9]+ / { sub(/ok [0-9]+ /, "ok " ++n " ") } 1' "$FENCING_WORK/memory.tap"
tap_n=$((tap_n + $(grep -cE '^(not )?ok [0-9]+ ' "$FENCING_WORK/memory.tap")))
fencing_cluster_stop "$PGDATA"
perl "$FENCING_ROOT/test/memory/check_reports.pl" "$mode" "$mem" "$PGHOST/server.log"
tap_ok $? "$mode: no memory error in fencing, no crash"
tap_done
[ "$st" -eq 0 ] && [ "$tap_failed" -eq 0 ]
