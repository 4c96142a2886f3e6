#!/usr/bin/env bash
# test/suites/client_go.sh: the Go client library (clients/go/fencing, a Go
# module).  The checks are test/t/121_client_go.pl (its head says what it
# runs); this makes sure of the lock services from Debian (fencing_need),
# fills a Go module cache from the Go module proxy with exactly the
# modules of clients/go/fencing/go.sum (once: cached under
# $FENCING_CACHE/client-go keyed by go.sum's hash, so a second run is
# offline), and runs that file with `make prove_installcheck` as the
# postgres OS user, in copies of the tree and of the module
# (FENCING_CLIENT_GO), with the Go build cache kept between runs
# (FENCING_CLIENT_GO_CACHE) and FENCING_CLIENT_STORM 1 on PostgreSQL 15;
# then fails if it skipped (it has all it needs).
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

t=test/t/121_client_go.pl W=$FENCING_WORK/client_go
MOD=$FENCING_ROOT/clients/go/fencing
CACHE=$FENCING_CACHE/client-go
GOBUILD=$FENCING_CACHE/gocache   # the harness's one Go build cache
fencing_need client_go ||
    { echo "not ok 1 - the packages it needs: $(fencing_suite_packages client_go | tr '\n' ' ')"; exit 1; }
command -v go >/dev/null ||
    { echo "not ok 1 - the go command (Go $(sed -n 's/^go //p' "$MOD/go.mod") or later) is not in PATH"; exit 1; }

# the modules of go.sum, from the module proxy, once per go.sum
sum=$(sha256sum "$MOD/go.mod" "$MOD/go.sum" | sha256sum | cut -c1-16)
MODCACHE=$CACHE/gomod-$sum
mkdir -p "$CACHE" || exit 1
(
    flock 9
    [ -f "$MODCACHE/.complete" ] && exit 0
    fencing_log "go mod download (clients/go/fencing's go.sum) into $MODCACHE"
    rm -rf "$MODCACHE.tmp"
    # the go command's default module proxy and checksum database
    (cd "$MOD" && export GOMODCACHE=$MODCACHE.tmp GOFLAGS=-mod=readonly GOTOOLCHAIN=local &&
        unset GOPROXY GOSUMDB GONOSUMDB GOPRIVATE GONOPROXY &&
        go mod download -x >"$CACHE/download.log" 2>&1 && go mod verify >>"$CACHE/download.log" 2>&1) ||
        { tail -20 "$CACHE/download.log" >&2; exit 1; }
    # go keeps its module cache read-only; make it removable, then ours
    chmod -R u+w "$MODCACHE.tmp" && rm -rf "$MODCACHE" && mv "$MODCACHE.tmp" "$MODCACHE" &&
        touch "$MODCACHE/.complete"
) 9>"$CACHE/gomod.lock" ||
    { echo "not ok 1 - go mod download of clients/go/fencing's modules from the module proxy"; exit 1; }
# the build cache is the postgres OS user's (go itself locks its entries)
mkdir -p "$GOBUILD" && fencing_with_lock "$GOBUILD.lock" chown -R postgres: "$GOBUILD" || exit 1
chmod -R a+rX "$MODCACHE" || exit 1
rm -rf "$W" && mkdir -p "$W" && cp -a "$MOD" "$W/" || exit 1
storm=${FENCING_CLIENT_STORM:-$([ "$FENCING_PGVER" = 15 ] && echo 1 || echo 0)}
fencing_client_prove "$W" "$t" FENCING_CLIENT_GO="$W/fencing" FENCING_CLIENT_GO_MODCACHE="$MODCACHE" \
    FENCING_CLIENT_GO_CACHE="$GOBUILD" FENCING_CLIENT_STORM="$storm"
