#!/usr/bin/env bash
# test/suites/bench.sh: the benchmark's smoke run (test/bench/run.sh
# --smoke): every variant runs a fixed number of transactions, and the
# database's own counts show the guard accepting and rejecting exactly as
# designed and the floors and helpers doing what they claim; no timing is
# judged.  Runs last in test/check.sh, as it builds without assertions in
# a scratch directory of its own.  Prints TAP: one line, and each problem
# found as a diagnostic.

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
echo "1..1"
exit $st
