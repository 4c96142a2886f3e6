#!/usr/bin/env bash
# test/suites/examples.sh: every example of README.md and docs/ (its folders too), run as
# written.  The checks are test/t/123_examples.pl (its head says how); this
# installs what the blocks use (Debian's packages; node-postgres from npm,
# cached: FENCING_CLIENT_NODE_PATH) and runs that file with `make
# prove_installcheck` as the postgres OS user, in a copy of the tree, with
# a copy of the pages (FENCING_CLIENT_EXAMPLES) and client_go's Go build
# cache (FENCING_CLIENT_GO_CACHE); then fails if it skipped.  The pages
# of the edition for managed PostgreSQL run on a server of their own with
# pg_tle preloaded: pg_tle is built and installed (test/lib/pgtle.sh,
# FENCING_CLIENT_PGTLE=1) where its source is found, else those of the
# pg_tle route skip; the managed files (managed/*.sql) go with the pages.
set -u
# shellcheck source=../lib/common.sh
. "$FENCING_ROOT/test/lib/common.sh"
# shellcheck source=../lib/pgtle.sh
. "$FENCING_ROOT/test/lib/pgtle.sh"
# shellcheck source=../lib/managed.sh
. "$FENCING_ROOT/test/lib/managed.sh"

t=test/t/123_examples.pl W=$FENCING_WORK/examples
CACHE=$FENCING_CACHE/examples GOCACHE=$FENCING_CACHE/gocache
fencing_need examples ||
    { echo "not ok 1 - the packages it needs: $(fencing_suite_packages examples | tr '\n' ' ')"; exit 1; }
mkdir -p "$CACHE" "$GOCACHE" && fencing_with_lock "$GOCACHE.lock" chown -R postgres: "$GOCACHE" || exit 1
(
    flock 9
    [ -f "$CACHE/node/node_modules/pg/package.json" ] && exit 0
    fencing_log "npm install pg (node-postgres) into $CACHE/node"
    npm install --silent --no-audit --no-fund --prefix "$CACHE/node" pg@8 >&2 && chmod -R a+rX "$CACHE/node"
) 9>"$CACHE/node.lock" || { echo "not ok 1 - npm install pg (node-postgres)"; exit 1; }
PGTLE=0
if [ -n "$(fencing_pgtle_tarball)" ]; then
    fencing_managed_pgtle >&2 || { echo "not ok 1 - pg_tle installed for the managed edition's pages"; exit 1; }
    PGTLE=1
fi
rm -rf "$W" && mkdir -p "$W/pages/test" "$W/pages/managed" && cp -a "$FENCING_ROOT"/{README.md,docs} "$W/pages/" &&
    cp -a "$FENCING_ROOT/test/examples" "$W/pages/test/" &&
    cp -a "$FENCING_ROOT"/managed/fencing_sql.sql "$FENCING_ROOT"/managed/fencing_sql_pgtle.sql "$W/pages/managed/" || exit 1
fencing_prove "$W" "$t" FENCING_CLIENT_EXAMPLES="$W/pages" FENCING_CLIENT_NODE_PATH="$CACHE/node/node_modules" \
    FENCING_CLIENT_GO_CACHE="$GOCACHE" FENCING_CLIENT_PGTLE="$PGTLE"
