#!/usr/bin/env bash
# test/suites/isolation.sh: the isolation specs (the Makefile's ISOLATION:
# test/isolation/specs/NAME.spec against test/isolation/expected/NAME.out)
# against the main cluster of test/check.sh, through `make installcheck`.
# Prints TAP, one line per spec.
#
# Alone, against a server of your own that preloads fencing:
#   make installcheck REGRESS=            (PGHOST, PGPORT, PGUSER)

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
fencing_regress isolation "$FENCING_WORK/isolation" >"$FENCING_WORK/isolation.tap"
st=$?
cat "$FENCING_WORK/isolation.tap"
echo "1..$(grep -cE '^(not )?ok [0-9]+' "$FENCING_WORK/isolation.tap")"
exit $st
