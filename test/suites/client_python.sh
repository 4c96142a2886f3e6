#!/usr/bin/env bash
# test/suites/client_python.sh: the Python client library (clients/python).
# The checks are test/t/120_client_python.pl (its head says what it runs);
# this makes sure of Debian's packages (fencing_need), builds the wheel and
# installs it with the pinned requirements into a fresh virtual environment
# (test/lib/client_python.sh: the requirements' wheels from PyPI once,
# cached by requirements.txt's hash under FENCING_CLIENT_PYTHON_CACHE), and
# runs that file with `make prove_installcheck` as the postgres OS user, in
# copies of the tree and of clients/python without its package (so the
# tests import the installed wheel: FENCING_CLIENT_PYTHON, with
# FENCING_CLIENT_PYTHON_VENV the environment), with FENCING_CLIENT_STORM 1
# on PostgreSQL 15; then fails if it skipped (it has all it needs).
# Once per edition (fencing_client_prove, test/lib/managed.sh): the C
# edition, and on PostgreSQL 18 the edition for managed PostgreSQL too
# (FENCING_CLIENT_EDITIONS).
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/pgtle.sh
. "$FENCING_ROOT/test/lib/pgtle.sh"
# shellcheck source=../lib/managed.sh
. "$FENCING_ROOT/test/lib/managed.sh"
# shellcheck source=../lib/client_python.sh
. "$FENCING_ROOT/test/lib/client_python.sh"

t=test/t/120_client_python.pl W=$FENCING_WORK/client_python
fencing_need client_python ||
    { echo "not ok 1 - the packages it needs: $(fencing_suite_packages client_python | tr '
' ' ')"; exit 1; }
rm -rf "$W" && mkdir -p "$W" || exit 1
fencing_python_client_venv "$W/venv" ||
    { echo "not ok 1 - build clients/python's wheel and install it with requirements.txt"; exit 1; }
cp -a "$FENCING_ROOT/clients/python" "$W/" && rm -rf "$W/python/fencing_client" || exit 1
storm=${FENCING_CLIENT_STORM:-$([ "$FENCING_PGVER" = 15 ] && echo 1 || echo 0)}
fencing_client_prove "$W" "$t" FENCING_CLIENT_PYTHON="$W/python" FENCING_CLIENT_PYTHON_VENV="$W/venv" \
    FENCING_CLIENT_STORM="$storm"
