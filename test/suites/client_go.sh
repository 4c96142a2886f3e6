#!/usr/bin/env bash
# test/suites/client_go.sh: the Go client library (clients/go).  The checks
# are test/t/121_client_go.pl (its head says what it runs); this installs
# what is missing (Debian's packages) and runs that file with `make
# prove_installcheck` as the postgres OS user, in copies of the tree and of
# clients/go (FENCING_CLIENT_GO), with the Go build cache kept between runs
# (FENCING_CLIENT_GO_CACHE) and FENCING_CLIENT_STORM 1 on PostgreSQL 15;
# then fails if it skipped (it has all it needs).
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"

t=test/t/121_client_go.pl W=$FENCING_WORK/client_go
CACHE=$FENCING_CACHE/gocache     # the harness's one Go build cache
fencing_need client_go ||
    { echo "not ok 1 - the packages it needs: $(fencing_suite_packages client_go | tr '\n' ' ')"; exit 1; }
# the build cache is the postgres OS user's (go itself locks its entries)
mkdir -p "$CACHE" && fencing_with_lock "$CACHE.lock" chown -R postgres: "$CACHE" || exit 1
rm -rf "$W" && mkdir -p "$W" && cp -a "$FENCING_ROOT/clients/go" "$W/" || exit 1
storm=${FENCING_CLIENT_STORM:-$([ "$FENCING_PGVER" = 15 ] && echo 1 || echo 0)}
fencing_prove "$W" "$t" FENCING_CLIENT_GO="$W/go" FENCING_CLIENT_GO_CACHE="$CACHE" FENCING_CLIENT_STORM="$storm"
