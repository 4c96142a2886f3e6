# shellcheck shell=bash
# test/lib/locksvc.sh: what the lock-service tests need installed: etcd,
# ZooKeeper, Redis, PgBouncer, kazoo, psycopg, Go, Java, node (Debian's
# packages), the Go clients of test/locksvc built once and node-postgres
# (npm), both cached in $LOCKSVC_CACHE under a lock.  The services are
# started by the tests themselves (test/perl/FencingLockSvc.pm).  Source it
# after test/lib/common.sh; it changes nothing until called.
#
#   locksvc_install      all of it; sets LOCKSVC_GO_BIN (etcdmutex, snippet)
#                        and LOCKSVC_NODE_MODULES; false when anything fails

LOCKSVC_CACHE=${FENCING_LOCKSVC_CACHE:-$FENCING_CACHE/locksvc}

# (the packages: fencing_suite_packages locksvc, test/lib/deps.sh)
locksvc_install() {
    fencing_need locksvc || return 1
    mkdir -p "$LOCKSVC_CACHE" || return 1
    locksvc_build_go && locksvc_install_node_pg
}

# The Go programs of test/locksvc (the etcd mutex worker, the pgx
# snippet), built with Debian's Go packages (GOPATH mode) once per
# version of their sources, under a lock: another run may build them.
# They are built as the postgres OS user, in the harness's one Go build
# cache ($FENCING_CACHE/gocache, the client suites' too): the packages
# they share (etcd's client, gRPC, pgx) compile once.
locksvc_build_go() {
    local src=$FENCING_ROOT/test/locksvc sum
    sum=$( (go version; cat "$src"/clients/etcdmutex/*.go "$src"/snippets/go/*.go) | sha256sum | cut -c1-16)
    LOCKSVC_GO_BIN=$LOCKSVC_CACHE/go-$sum
    (
        flock 9
        [ -x "$LOCKSVC_GO_BIN/etcdmutex" ] && [ -x "$LOCKSVC_GO_BIN/snippet" ] && exit 0
        fencing_log "building the Go clients (etcd concurrency.Mutex, pgx) into $LOCKSVC_GO_BIN"
        local gopath=$LOCKSVC_CACHE/gopath gocache=$FENCING_CACHE/gocache
        rm -rf "$gopath" "$LOCKSVC_GO_BIN.tmp" && mkdir -p "$gopath/src/locksvc" "$LOCKSVC_GO_BIN.tmp" "$gocache" || exit 1
        cp -r "$src/clients/etcdmutex" "$gopath/src/locksvc/etcdmutex"
        cp -r "$src/snippets/go" "$gopath/src/locksvc/snippet"
        chown -R postgres: "$gopath" "$LOCKSVC_GO_BIN.tmp" && fencing_with_lock "$gocache.lock" chown -R postgres: "$gocache" || exit 1
        # shellcheck disable=SC2016  # expanded by that sh
        fencing_as_postgres env GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOCACHE="$gocache" GOFLAGS= \
            sh -c 'go build -o "$1/etcdmutex" locksvc/etcdmutex && go build -o "$1/snippet" locksvc/snippet' \
            sh "$LOCKSVC_GO_BIN.tmp" &&
            chown -R root: "$LOCKSVC_GO_BIN.tmp" && rm -rf "$LOCKSVC_GO_BIN" && mv "$LOCKSVC_GO_BIN.tmp" "$LOCKSVC_GO_BIN"
    ) 9>"$LOCKSVC_CACHE/go.lock"
}

# node-postgres from the npm registry, once, into the cache.
locksvc_install_node_pg() {
    LOCKSVC_NODE_MODULES=$LOCKSVC_CACHE/node/node_modules
    (
        flock 9
        [ -f "$LOCKSVC_NODE_MODULES/pg/package.json" ] && exit 0
        fencing_log "npm install pg (node-postgres) into $LOCKSVC_CACHE/node"
        mkdir -p "$LOCKSVC_CACHE/node" &&
            npm install --silent --no-audit --no-fund --prefix "$LOCKSVC_CACHE/node" pg@8 >&2
    ) 9>"$LOCKSVC_CACHE/node.lock"
}
