#!/usr/bin/env bash
# test/suites/bench.sh: the benchmarks' smoke runs (test/bench/run.sh
# --smoke, then test/bench/managed.sh --smoke): every variant runs a fixed
# number of transactions, and the database's own counts show the guard
# accepting and rejecting exactly as designed and the floors and helpers
# doing what they claim; no timing is judged.  Runs last in test/check.sh, as it builds without assertions in
# a scratch directory of its own.  Prints TAP: one line per benchmark, and each
# problem found as a diagnostic.

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
log=$FENCING_WORK/bench.log
env -u FENCING_WORK -u PGHOST -u PGPORT -u PGDATA \
    bash "$FENCING_ROOT/test/bench/run.sh" --smoke --pg "$FENCING_PGVER" >"$log" 2>&1
st=$?
if [ $st -eq 0 ]; then
    echo "ok 1 - $(tail -n 1 "$log")"
else
    echo "not ok 1 - test/bench/run.sh --smoke failed (status $st)"
    tail -n 60 "$log" | sed 's/^/# /'
fi
# the managed edition's benchmark beside the C edition's (needs pg_tle's
# source, as the managed suites do)
# shellcheck source=../lib/pgtle.sh
. "$FENCING_ROOT/test/lib/pgtle.sh"
mlog=$FENCING_WORK/bench-managed.log
if [ -z "$(fencing_pgtle_tarball)" ]; then
    echo "ok 2 # skip no pg_tle source (FENCING_PGTLE_SRC, or pg_tle-*.tar.gz in ../shared/vendor)"
else
    env -u FENCING_WORK -u PGHOST -u PGPORT -u PGDATA \
        bash "$FENCING_ROOT/test/bench/managed.sh" --smoke --pg "$FENCING_PGVER" >"$mlog" 2>&1
    mst=$?
    if [ $mst -eq 0 ]; then
        echo "ok 2 - $(tail -n 1 "$mlog")"
    else
        echo "not ok 2 - test/bench/managed.sh --smoke failed (status $mst)"
        tail -n 60 "$mlog" | sed 's/^/# /'
        st=$mst
    fi
fi
echo "1..2"
exit $st
