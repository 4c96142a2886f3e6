#!/usr/bin/env bash
# test/suites/monitoring.sh: monitoring/ with the real tools: installs
# Debian's prometheus-postgres-exporter and promtool and runs the checks,
# test/t/130_monitoring.pl, with FENCING_CLIENT_EXPORTER and _PROMTOOL
# naming them, through `make prove_installcheck` in a copy of the tree.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"

test_file=test/t/130_monitoring.pl
if ! fencing_need monitoring; then
    echo "not ok 1 - install prometheus-postgres-exporter and prometheus (promtool)"
    exit 1
fi
W=$FENCING_WORK/monitoring
mkdir -p "$W/src" && cp -a "$FENCING_ROOT/monitoring" "$W/src/" || exit 1
fencing_prove "$W" "$test_file" \
    FENCING_CLIENT_EXPORTER="$(command -v prometheus-postgres-exporter)" \
    FENCING_CLIENT_PROMTOOL="$(command -v promtool)"
