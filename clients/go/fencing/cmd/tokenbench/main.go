// tokenbench: what one grant, many transactions costs per transaction,
// measured against real lock services on loopback, every kind interleaved
// in one run (each goes first in turn), for two transactions: a one-row
// UPDATE of a protected row-scope table, and a ledger INSERT into a
// key-scope table.  For each token source (the built-in lease, etcd,
// ZooKeeper, Redis):
//
//	(a) a new token per transaction from the source while the lock is
//	    held (RunFenced with the source: lease_next inside set_token, in
//	    the round trip of BEGIN; etcd: a put of the holder's key under a
//	    compare; ZooKeeper: a setData of the holder's node; Redis: one
//	    script), strict tables;
//	(b) the grant's token reused by every transaction (RunFenced with a
//	    StaticToken) on tables protected with strict => false: what a
//	    per-grant write sequence inside the token would cost (no round trip
//	    to the lock service);
//	(c) the same transaction without fencing (pgx's BeginFunc on an
//	    unprotected table).
//
// Prints a table: median microseconds per transaction and the ratio to (c).
//
//	tokenbench [-n 500] [-etcd URL] [-zk HOST:PORT,...] [-redis HOST:PORT]
//
// PostgreSQL from the libpq environment; a source whose service is not
// given is left out.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

type kind struct {
	source, variant, work string
	run                   func() error
	lat                   []time.Duration
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func main() {
	n := flag.Int("n", 500, "transactions of each kind")
	etcdURL := flag.String("etcd", os.Getenv("FENCING_ETCD"), "etcd client URL")
	zkServers := flag.String("zk", os.Getenv("FENCING_ZK"), "ZooKeeper servers")
	redisAddr := flag.String("redis", os.Getenv("FENCING_REDIS"), "Redis host:port")
	flag.Parse()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	pre := fmt.Sprintf("tokenbench_%d", time.Now().UnixNano()%1000000)
	exec := func(sql string) {
		if _, err := pool.Exec(ctx, sql); err != nil {
			log.Fatalf("%s: %v", sql, err)
		}
	}
	exec("CREATE EXTENSION IF NOT EXISTS fencing")
	if err := fencing.EnsureGenerationTable(ctx, pool, ""); err != nil {
		log.Fatal(err)
	}
	var drop []string
	defer func() {
		for _, t := range drop {
			pool.Exec(ctx, "DROP TABLE "+t)
		}
	}()
	// tables: a row-scope one and a key-scope ledger, protected as asked
	tables := func(tag, protect string) (string, string) {
		acc, led := pre+"_acc_"+tag, pre+"_led_"+tag
		drop = append(drop, acc, led)
		exec(fmt.Sprintf("CREATE TABLE %s (id text PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence)", acc))
		exec(fmt.Sprintf("INSERT INTO %s VALUES ('a', 0, NULL)", acc))
		exec(fmt.Sprintf("CREATE TABLE %s (id bigserial PRIMARY KEY, acct text NOT NULL, amount bigint NOT NULL, fence fencing.fence)", led))
		if protect != "" {
			exec(fmt.Sprintf("SELECT fencing.protect('%s'%s)", acc, protect))
			exec(fmt.Sprintf("SELECT fencing.protect('%s', key_columns => '{acct}'%s)", led, protect))
		}
		return acc, led
	}
	works := map[string]func(acc, led string) func(pgx.Tx) error{
		"UPDATE (row scope)": func(acc, _ string) func(pgx.Tx) error {
			return func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "UPDATE "+acc+" SET balance = balance + 1 WHERE id = 'a'")
				return err
			}
		},
		"INSERT (key scope)": func(_, led string) func(pgx.Tx) error {
			return func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO "+led+" (acct, amount) VALUES ('acct-1', 1)")
				return err
			}
		},
	}
	workNames := []string{"UPDATE (row scope)", "INSERT (key scope)"}
	var kinds []*kind

	srcs := map[string]fencing.TokenSource{"lease": fencing.NewLeaseSource(pool, pre, time.Minute)}
	names := []string{"lease"}
	if *etcdURL != "" {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*etcdURL}, DialTimeout: 10 * time.Second})
		if err != nil {
			log.Fatal(err)
		}
		defer cli.Close()
		srcs["etcd"] = fencing.NewEtcdSource(pool, cli, "/"+pre, time.Minute)
		names = append(names, "etcd")
	}
	if *zkServers != "" {
		srcs["zookeeper"] = fencing.NewZooKeeperSource(pool, strings.Split(*zkServers, ","), "/"+pre, 20*time.Second)
		names = append(names, "zookeeper")
	}
	if *redisAddr != "" {
		rc := redis.NewClient(&redis.Options{Addr: *redisAddr})
		defer rc.Close()
		srcs["redis"] = fencing.NewRedisSource(pool, rc, pre, time.Minute)
		names = append(names, "redis")
	}
	for _, sn := range names {
		src := srcs[sn]
		grant, err := src.Acquire(ctx)
		if err != nil {
			log.Fatalf("%s: %v", sn, err)
		}
		defer src.Release(ctx)
		accA, ledA := tables(sn+"_a", "")
		accB, ledB := tables(sn+"_b", ", strict => false")
		static := fencing.StaticToken{Token: grant}
		for _, w := range workNames {
			fa, fb := works[w](accA, ledA), works[w](accB, ledB)
			kinds = append(kinds,
				&kind{source: sn, variant: "(a) a token per transaction", work: w,
					run: func() error { return fencing.RunFenced(ctx, pool, src, fa) }},
				&kind{source: sn, variant: "(b) the grant's token, strict => false", work: w,
					run: func() error { return fencing.RunFenced(ctx, pool, static, fb) }})
		}
	}
	accC, ledC := tables("plain", "")
	for _, w := range workNames {
		f := works[w](accC, ledC)
		kinds = append(kinds, &kind{source: "-", variant: "(c) no fencing", work: w,
			run: func() error { return pgx.BeginFunc(ctx, pool, f) }})
	}

	for i := 0; i < *n+50; i++ {
		for j := range kinds {
			k := kinds[(i+j)%len(kinds)]
			t0 := time.Now()
			if err := k.run(); err != nil {
				log.Fatalf("%s %s %s: %v", k.source, k.variant, k.work, err)
			}
			if i >= 50 {
				k.lat = append(k.lat, time.Since(t0))
			}
		}
	}
	base := map[string]time.Duration{}
	for _, k := range kinds {
		if k.source == "-" {
			base[k.work] = median(k.lat)
		}
	}
	fmt.Printf("TOKENBENCH: median per transaction, n=%d each, %d kinds interleaved, loopback\n", *n, len(kinds))
	fmt.Printf("TOKENBENCH: %-10s %-42s %-20s %10s %8s\n", "source", "variant", "transaction", "median us", "vs (c)")
	for _, w := range workNames {
		for _, k := range kinds {
			if k.work != w {
				continue
			}
			m := median(k.lat)
			fmt.Printf("TOKENBENCH: %-10s %-42s %-20s %10.1f %8.2f\n", k.source, k.variant, k.work,
				float64(m.Nanoseconds())/1000, float64(m)/float64(base[w]))
		}
	}
}
