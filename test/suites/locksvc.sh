#!/usr/bin/env bash
# test/suites/locksvc.sh: real lock services fencing PostgreSQL.  The checks
# are the Perl TAP tests test/t/110-114_locksvc_*.pl (etcd, a ZooKeeper
# ensemble, Redis, PgBouncer, the client snippets of docs/lock-services.md;
# their heads say what each proves), which start the services as their own
# child processes (test/perl/FencingLockSvc.pm).  This script installs what
# they need (test/lib/locksvc.sh) and runs them through `make
# prove_installcheck` as the postgres OS user, in a copy of the tree of its
# own, printing prove's verbose TAP, with
#
#   FENCING_LOCKSVC_PYTHON        Debian's python3 (kazoo, psycopg)
#   FENCING_LOCKSVC_GO_BIN        the Go clients built (etcdmutex, snippet)
#   FENCING_LOCKSVC_NODE_MODULES  node-postgres
#   FENCING_LOCKSVC_BREAK         passed on: `guard` runs every scenario with
#                                 the guard off; every scenario must fail
#
# A test that skips fails here: this script installed what it needs.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/locksvc.sh
. "$FENCING_ROOT/test/lib/locksvc.sh"

if ! locksvc_install; then
    tap_ok 1 "install etcd, ZooKeeper, kazoo, psycopg, Redis, PgBouncer, Go with pgx and etcd's client, pgjdbc, node-postgres"
    tap_done
    exit 1
fi

# with docs/ for the snippets' check
W=$FENCING_WORK/locksvc
rm -rf "$W" && mkdir -p "$W/src" && cp -a "$FENCING_ROOT/docs" "$W/src/" || exit 1
fencing_prove "$W" 'test/t/11?_locksvc_*.pl' \
    FENCING_LOCKSVC_PYTHON=/usr/bin/python3 \
    FENCING_LOCKSVC_GO_BIN="$LOCKSVC_GO_BIN" \
    FENCING_LOCKSVC_NODE_MODULES="$LOCKSVC_NODE_MODULES" \
    FENCING_LOCKSVC_BREAK="${FENCING_LOCKSVC_BREAK:-}"
