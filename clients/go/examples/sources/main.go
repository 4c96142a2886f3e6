// Sources: the same fenced write with a token from etcd, ZooKeeper, Redis
// or a lease, chosen on the command line.  Uses the quickstart's table.
// Every writer of a table must take its tokens from one and the same lock:
// tokens of different locks (or sources) are not ordered with each other,
// so run it against a table of its own per source.
//
//	sources -source etcd      -etcd http://127.0.0.1:2379
//	sources -source zookeeper -zk 127.0.0.1:2181
//	sources -source redis     -redis 127.0.0.1:6379
//	sources -source lease
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strings"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/gomodule/redigo/redis"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
	"github.com/samuel/go-zookeeper/zk"
	"go.etcd.io/etcd/clientv3"
)

func main() {
	source := flag.String("source", "lease", "etcd, zookeeper, redis or lease")
	etcdURL := flag.String("etcd", "http://127.0.0.1:2379", "etcd client URL")
	zkServers := flag.String("zk", "127.0.0.1:2181", "ZooKeeper servers")
	redisAddr := flag.String("redis", "127.0.0.1:6379", "Redis address")
	flag.Parse()
	ctx := context.Background()
	pool, err := pgxpool.Connect(ctx, "")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	// the generations of the lock services (bump one after it lost its data)
	if err := fencing.EnsureGenerationTable(ctx, pool, ""); err != nil {
		log.Fatal(err)
	}

	var src fencing.Source
	switch *source {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*etcdURL}, DialTimeout: 5 * time.Second})
		if err != nil {
			log.Fatal(err)
		}
		defer cli.Close()
		// the lock lives while the session's lease (10 s) is kept alive
		src = fencing.NewEtcdSource(cli, pool, "/locks/accounts", 10)
	case "zookeeper":
		// the lock lives while this session does: 10 s without heartbeats ends it
		conn, _, err := zk.Connect(strings.Split(*zkServers, ","), 10*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		defer conn.Close()
		src = fencing.NewZooKeeperSource(conn, pool, "/locks/accounts")
	case "redis":
		rp := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", *redisAddr) }}
		defer rp.Close()
		src = fencing.NewRedisSource(rp, "locks:accounts", 10*time.Second, pool)
	default:
		src = fencing.NewLeaseSource(pool, "accounts", "sources-example", 10*time.Second)
	}

	token, err := src.Acquire(ctx) // Redis and leases: ErrNotAcquired while held
	if err != nil {
		log.Fatal(err)
	}
	defer src.Release(ctx)
	err = fencing.RunFenced(ctx, pool, token, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = $1", "alice")
		return err
	})
	fmt.Println("token", token, "error", err)
}
