#!/usr/bin/env bash
# test/suites/release.sh: the release's description and archive (META.json,
# `make dist`, the Markdown's links, shellcheck, test/README.md against the
# tree): the checks are test/release/check_release.py (its head lists
# them), which prints TAP; this script installs shellcheck when it is
# missing (as root) and runs it.  No server needed.
#
# Run by test/check.sh (FENCING_SUITES=release), or alone:
#   bash test/suites/release.sh
set -u
FENCING_ROOT=${FENCING_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
command -v python3 >/dev/null || { echo "1..0 # SKIP python3 is not installed"; exit 0; }
if ! command -v shellcheck >/dev/null && [ "$(id -u)" -eq 0 ]; then
    fencing_need release >/dev/null 2>&1
fi
exec python3 "$FENCING_ROOT/test/release/check_release.py" "$FENCING_ROOT"
