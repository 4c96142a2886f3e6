#!/usr/bin/env bash
# test/suites/client_typescript.sh: the TypeScript client library
# (clients/typescript).  The checks are test/t/122_client_typescript.pl
# (its head says what it runs); this installs what is missing (Debian's
# packages; npm ci from the lock file, the tree cached by its hash under
# FENCING_CLIENT_TS_CACHE) and runs that file with `make prove_installcheck`
# as the postgres OS user, in copies of the tree and of clients/typescript
# (FENCING_CLIENT_TS, node_modules the cached tree), with
# FENCING_CLIENT_STORM 1 on PostgreSQL 15, and FENCING_CLIENT_TS_NPM_CACHE
# an npm cache of the postgres OS user under FENCING_CLIENT_TS_CACHE (the
# fresh project that installs the packed tarball fills it once); then
# fails if it skipped.
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

t=test/t/122_client_typescript.pl W=$FENCING_WORK/client_typescript SRC=$FENCING_ROOT/clients/typescript
CACHE=${FENCING_CLIENT_TS_CACHE:-$FENCING_CACHE/client-ts}
fencing_need client_typescript ||
    { echo "not ok 1 - the packages it needs: $(fencing_suite_packages client_typescript | tr '\n' ' ')"; exit 1; }
# npm ci once per lock file (and node), under a lock: $CACHE/<hash>/node_modules
sum=$( (node -v; cat "$SRC/package-lock.json") | sha256sum | cut -c1-16) M=$CACHE/$sum/node_modules
mkdir -p "$CACHE" && (
    flock 9
    [ -f "$M/.complete" ] && exit 0
    fencing_log "npm ci for clients/typescript into $M"
    rm -rf "${CACHE:?}/$sum.tmp" "${CACHE:?}/$sum" && mkdir -p "$CACHE/$sum.tmp" &&
        cp "$SRC/package.json" "$SRC/package-lock.json" "$CACHE/$sum.tmp/" &&
        (cd "$CACHE/$sum.tmp" && npm ci --no-audit --no-fund --loglevel=error --cache "$CACHE/npm") >&2 &&
        touch "$CACHE/$sum.tmp/node_modules/.complete" && chmod -R a+rX "$CACHE/$sum.tmp" &&
        mv "$CACHE/$sum.tmp" "$CACHE/$sum"
) 9>"$CACHE/npm.lock"
[ -f "$M/.complete" ] || { echo "not ok 1 - npm ci (clients/typescript/package-lock.json)"; exit 1; }
rm -rf "$W" && mkdir -p "$W/ts" &&
    cp -a "$SRC"/{package.json,package-lock.json,tsconfig.json,tsconfig.test.json,README.md,src,esm,test,examples,bench} "$W/ts/" &&
    ln -s "$M" "$W/ts/node_modules" || exit 1
NC=$CACHE/npm-user
mkdir -p "$NC" && chown -R postgres: "$NC" || exit 1
storm=${FENCING_CLIENT_STORM:-$([ "$FENCING_PGVER" = 15 ] && echo 1 || echo 0)}
fencing_client_prove "$W" "$t" FENCING_CLIENT_TS="$W/ts" FENCING_CLIENT_TS_NPM_CACHE="$NC" FENCING_CLIENT_STORM="$storm"
