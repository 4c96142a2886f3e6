#!/usr/bin/env bash
# test/suites/regress.sh: the pg_regress files (the Makefile's REGRESS:
# sql/NAME.sql against expected/NAME.out, or expected/NAME_1.out where a
# server version prints otherwise) against the main cluster of
# test/check.sh, through `make installcheck`.  Prints TAP, one line per
# file.
#
# Alone, against a server of your own that preloads fencing:
#   make installcheck ISOLATION=          (PGHOST, PGPORT, PGUSER)

set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
fencing_regress regress "$FENCING_WORK/regress" >"$FENCING_WORK/regress.tap"
st=$?
cat "$FENCING_WORK/regress.tap"
echo "1..$(grep -cE '^(not )?ok [0-9]+' "$FENCING_WORK/regress.tap")"
exit $st
