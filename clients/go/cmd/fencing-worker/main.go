// fencing-worker: a process that takes a lock through the fencing Go
// client and writes with its token on command, for tests that pause it
// (SIGSTOP) past its lock's TTL.
//
//	fencing-worker -source etcd|zookeeper|redis|lease -lock NAME -table T \
//	    [-etcd URL] [-zk HOST:PORT,...] [-redis HOST:PORT] [-ttl 2s] [-who NAME]
//
// PostgreSQL from the libpq environment (PGHOST, PGPORT, PGDATABASE, ...).
// Lines on stdin, one answer line each on stdout:
//
//	acquire      -> "token E:C" (waits; Redis and leases are polled)
//	try          -> "token E:C" or "none" (one attempt)
//	write KEY    -> "ok E:C", "refused REASON" or "error TEXT"
//	               (UPDATE T SET balance = balance + 1 WHERE id = KEY, fenced)
//	release      -> "released" or "error TEXT"
//	quit
//
// It says "ready" once connected.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/gomodule/redigo/redis"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
	"github.com/samuel/go-zookeeper/zk"
	"go.etcd.io/etcd/clientv3"
)

func die(err error) {
	fmt.Fprintln(os.Stderr, "fencing-worker:", err)
	os.Exit(1)
}

func main() {
	source := flag.String("source", "lease", "etcd, zookeeper, redis or lease")
	lock := flag.String("lock", "worker-lock", "the lock's name (etcd prefix, ZooKeeper path, Redis key, lease name)")
	table := flag.String("table", "accounts", "the table to write")
	etcdURL := flag.String("etcd", "", "etcd client URL")
	zkServers := flag.String("zk", "", "ZooKeeper servers, comma separated")
	redisAddr := flag.String("redis", "", "Redis host:port")
	ttl := flag.Duration("ttl", 2*time.Second, "the lock's TTL (etcd session, ZooKeeper session timeout, Redis PX, lease)")
	who := flag.String("who", "worker", "holder name")
	flag.Parse()
	ctx := context.Background()

	pool, err := pgxpool.Connect(ctx, "")
	if err != nil {
		die(err)
	}
	var src fencing.Source
	switch *source {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*etcdURL}, DialTimeout: 30 * time.Second})
		if err != nil {
			die(err)
		}
		src = fencing.NewEtcdSource(cli, pool, *lock, int(ttl.Seconds()))
	case "zookeeper":
		conn, _, err := zk.Connect(strings.Split(*zkServers, ","), *ttl, zk.WithLogInfo(false))
		if err != nil {
			die(err)
		}
		src = fencing.NewZooKeeperSource(conn, pool, *lock)
	case "redis":
		rp := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", *redisAddr) }, MaxIdle: 2}
		src = fencing.NewRedisSource(rp, *lock, *ttl, pool)
	case "lease":
		src = fencing.NewLeaseSource(pool, *lock, *who, *ttl)
	default:
		die(fmt.Errorf("unknown source %q", *source))
	}
	fmt.Println("ready")

	var token fencing.Token
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "acquire", "try":
			deadline := time.Now().Add(60 * time.Second)
			for {
				actx, cancel := context.WithDeadline(ctx, deadline)
				token, err = src.Acquire(actx)
				cancel()
				if errors.Is(err, fencing.ErrNotAcquired) && words[0] == "acquire" && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				break
			}
			switch {
			case err == nil:
				fmt.Println("token", token)
			case errors.Is(err, fencing.ErrNotAcquired):
				fmt.Println("none")
			default:
				fmt.Println("error", oneLine(err))
			}
		case "write":
			if len(words) < 2 {
				fmt.Println("error write needs a key")
				continue
			}
			err := fencing.RunFenced(ctx, pool, token, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, "UPDATE "+pgx.Identifier{*table}.Sanitize()+" SET balance = balance + 1 WHERE id = $1", words[1])
				if err == nil && tag.RowsAffected() != 1 {
					err = fmt.Errorf("wrote %d rows", tag.RowsAffected())
				}
				return err
			})
			var fo *fencing.FencedOutError
			switch {
			case err == nil:
				fmt.Println("ok", token)
			case errors.As(err, &fo):
				fmt.Println("refused", fo.Reason)
			default:
				fmt.Println("error", oneLine(err))
			}
		case "release":
			if err := src.Release(ctx); err != nil {
				fmt.Println("error", oneLine(err))
			} else {
				fmt.Println("released")
			}
		case "quit":
			return
		default:
			fmt.Println("error unknown command", words[0])
		}
	}
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
