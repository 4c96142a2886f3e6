#!/usr/bin/env bash
# test/suites/monitoring.sh: monitoring/ with the real tools: installs
# Debian's prometheus-postgres-exporter and promtool and runs the checks,
# test/t/130_monitoring.pl, with FENCING_CLIENT_EXPORTER and _PROMTOOL
# naming them, through `make prove_installcheck` in a copy of the tree.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"

test_file=test/t/130_monitoring.pl
if ! fencing_install_missing prometheus-postgres-exporter prometheus; then
    echo "not ok 1 - install prometheus-postgres-exporter and prometheus (promtool)"
    exit 1
fi
W=$FENCING_WORK/monitoring
mkdir -p "$W/src"
cp -a "$FENCING_SRC/Makefile" "$FENCING_SRC/fencing.control" "$FENCING_SRC/sql" \
    "$FENCING_SRC/test" "$FENCING_ROOT/monitoring" "$W/src/"
chown -R postgres: "$W"
fencing_as_postgres env -u PGHOST -u PGPORT -u PGDATA -u PGDATABASE \
    FENCING_CLIENT_EXPORTER="$(command -v prometheus-postgres-exporter)" \
    FENCING_CLIENT_PROMTOOL="$(command -v promtool)" \
    make -C "$W/src" --no-print-directory prove_installcheck \
    PG_CONFIG="$PG_CONFIG" PROVE_TESTS="$test_file" PROVE_FLAGS=-v 2>&1 | tee "$W/prove.log"
st=$?
# the tools are installed here: a skip means something is wrong
if skip=$(grep -m1 -o "skipped: .*" "$W/prove.log"); then
    echo "not ok 1 - $test_file ran with the exporter and promtool installed here ($skip)"
    exit 1
fi
exit "$st"
