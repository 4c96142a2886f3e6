#!/usr/bin/env bash
# test/suites/client_python.sh: the Python client library (clients/python).
# The checks are test/t/120_client_python.pl (its head says what it runs);
# this installs what is missing (Debian's packages) and runs that file with
# `make prove_installcheck` as the postgres OS user, in copies of the tree
# and of clients/python (FENCING_CLIENT_PYTHON), with FENCING_CLIENT_STORM
# 1 on PostgreSQL 15; then fails if it skipped (it has all it needs).
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"

t=test/t/120_client_python.pl W=$FENCING_WORK/client_python
fencing_need client_python ||
    { echo "not ok 1 - the packages it needs: $(fencing_suite_packages client_python | tr '\n' ' ')"; exit 1; }
rm -rf "$W" && mkdir -p "$W" && cp -a "$FENCING_ROOT/clients/python" "$W/" || exit 1
storm=${FENCING_CLIENT_STORM:-$([ "$FENCING_PGVER" = 15 ] && echo 1 || echo 0)}
fencing_prove "$W" "$t" FENCING_CLIENT_PYTHON="$W/python" FENCING_CLIENT_STORM="$storm"
