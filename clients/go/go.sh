#!/usr/bin/env bash
# clients/go/go.sh: run the go command on this library offline, with
# Debian's Go packages only (GOPATH mode, no module proxy):
#
#   apt-get install golang-go golang-github-jackc-pgx-v4-dev \
#       golang-etcd-server-dev golang-github-gomodule-redigo-dev \
#       golang-github-samuel-go-zookeeper-dev
#   clients/go/go.sh build ./...
#   clients/go/go.sh test -v ./...
#   clients/go/go.sh run ./examples/quickstart
#
# It lays a GOPATH (FENCING_GO_GOPATH, default /tmp/fencing-go-gopath-$UID)
# whose src/github.com/fencing-pg/fencing/clients/go is a link to this
# directory, puts /usr/share/gocode after it, and runs go there with
# GO111MODULE=off.  GOCACHE is kept (FENCING_GO_CACHE, default the user's).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gopath=${FENCING_GO_GOPATH:-/tmp/fencing-go-gopath-$(id -u)}
pkgdir=$gopath/src/github.com/fencing-pg/fencing/clients
mkdir -p "$pkgdir"
if [ "$(readlink "$pkgdir/go" 2>/dev/null)" != "$here" ]; then
    rm -rf "$pkgdir/go"
    ln -s "$here" "$pkgdir/go"
fi
export GO111MODULE=off GOPATH=$gopath:/usr/share/gocode GOFLAGS= GOPROXY=off
[ -n "${FENCING_GO_CACHE:-}" ] && export GOCACHE=$FENCING_GO_CACHE
cd "$pkgdir/go"
exec go "$@"
