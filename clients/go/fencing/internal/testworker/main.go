// testworker: a process that holds a lock through the fencing Go client and
// writes with its tokens on command, for the tests that freeze it
// (SIGSTOP) past its lock's TTL.
//
//	testworker -source etcd|zookeeper|redis|lease -lock NAME -table T \
//	    [-etcd URL] [-zk HOST:PORT,...] [-redis HOST:PORT] [-ttl 2s] \
//	    [-fence TABLE:KEY]
//
// PostgreSQL from the libpq environment.  One answer line per command:
//
//	acquire    -> "token E:C" (waits up to 60 s) or "error TEXT"
//	write KEY  -> a fenced transaction with the lock (a new token):
//	              UPDATE T SET balance = balance + 1 WHERE id = KEY;
//	              "ok E:C", "refused REASON", "lost" or "error TEXT"
//	hold KEY   -> the same, but stops inside the transaction, after its
//	              token was bound and before the UPDATE: "in E:C"; the next
//	              line ("go") runs the UPDATE and answers as write
//	writeold KEY -> the UPDATE in a fenced transaction with the last token
//	              this worker had (a StaticToken), as a holder that took it
//	              before it froze
//	status     -> "held" or "lost" (the source's Lost channel)
//	release    -> "released" or "error TEXT"
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

	fencing "github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	source := flag.String("source", "lease", "etcd, zookeeper, redis or lease")
	lock := flag.String("lock", "worker-lock", "the lock's name")
	table := flag.String("table", "accounts", "the table to write")
	etcdURL := flag.String("etcd", "", "etcd client URL")
	zkServers := flag.String("zk", "", "ZooKeeper servers, comma separated")
	redisAddr := flag.String("redis", "", "Redis host:port")
	ttl := flag.Duration("ttl", 2*time.Second, "the lock's TTL")
	fence := flag.String("fence", "", "TABLE:KEY, a key scope raised at each grant")
	who := flag.String("who", "worker", "holder name")
	flag.Parse()
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, "")
	if err != nil {
		die(err)
	}
	opts := []fencing.SourceOption{fencing.WithHolder(*who)}
	if *fence != "" {
		t, k, _ := strings.Cut(*fence, ":")
		opts = append(opts, fencing.WithFences(fencing.KeyScope(t, k)))
	}
	var src fencing.TokenSource
	switch *source {
	case "etcd":
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*etcdURL}, DialTimeout: 30 * time.Second})
		if err != nil {
			die(err)
		}
		src = fencing.NewEtcdSource(pool, cli, *lock, *ttl, opts...)
	case "zookeeper":
		src = fencing.NewZooKeeperSource(pool, strings.Split(*zkServers, ","), *lock, *ttl, opts...)
	case "redis":
		src = fencing.NewRedisSource(pool, redis.NewClient(&redis.Options{Addr: *redisAddr}), *lock, *ttl, opts...)
	case "lease":
		src = fencing.NewLeaseSource(pool, *lock, *ttl, opts...)
	default:
		die(fmt.Errorf("unknown source %q", *source))
	}
	fmt.Println("ready")

	in := bufio.NewScanner(os.Stdin)
	var last fencing.Token
	update := func(tx pgx.Tx, key string) error {
		tag, err := tx.Exec(ctx, "UPDATE "+pgx.Identifier{*table}.Sanitize()+" SET balance = balance + 1 WHERE id = $1", key)
		if err == nil && tag.RowsAffected() != 1 {
			err = fmt.Errorf("wrote %d rows", tag.RowsAffected())
		}
		return err
	}
	answer := func(err error) {
		var fo *fencing.FencedOutError
		switch {
		case err == nil:
			fmt.Println("ok", last)
		case errors.As(err, &fo):
			fmt.Println("refused", fo.Reason)
		case errors.Is(err, fencing.ErrLockLost):
			fmt.Println("lost")
		default:
			fmt.Println("error", oneLine(err))
		}
	}
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 0 {
			continue
		}
		key := ""
		if len(words) > 1 {
			key = words[1]
		}
		switch words[0] {
		case "acquire":
			actx, cancel := context.WithTimeout(ctx, 60*time.Second)
			tok, err := src.Acquire(actx)
			cancel()
			if err != nil {
				fmt.Println("error", oneLine(err))
				continue
			}
			last = tok
			fmt.Println("token", tok)
		case "write", "hold":
			err := fencing.RunFenced(ctx, pool, src, func(tx pgx.Tx) error {
				var t string
				if err := tx.QueryRow(ctx, "SELECT pg_catalog.current_setting('fencing.token')").Scan(&t); err != nil {
					return err
				}
				last, _ = fencing.ParseToken(t)
				if words[0] == "hold" {
					fmt.Println("in", last)
					in.Scan() // "go"
				}
				return update(tx, key)
			})
			answer(err)
		case "writeold":
			answer(fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: last}, func(tx pgx.Tx) error { return update(tx, key) }))
		case "status":
			select {
			case <-src.Lost():
				fmt.Println("lost")
			default:
				fmt.Println("held")
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

func die(err error) {
	fmt.Fprintln(os.Stderr, "testworker:", err)
	os.Exit(1)
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }
