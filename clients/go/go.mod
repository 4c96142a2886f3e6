// The module path of the Go client.  This repository builds and tests it
// offline with Debian's Go packages in GOPATH mode (go.sh), which ignores
// this file; in a module of your own, `go mod tidy` adds the requirements
// (github.com/jackc/pgx/v4, go.etcd.io/etcd 3.4's clientv3,
// github.com/gomodule/redigo, github.com/samuel/go-zookeeper) at the
// versions your proxy serves.
module github.com/fencing-pg/fencing/clients/go

go 1.19
