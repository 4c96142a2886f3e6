// A worker that posts ledger entries under a Redis lock: many
// transactions under one lock, each with a new token, the ledger's key
// fenced the moment the lock is taken.  REDIS_ADDR (default
// 127.0.0.1:6379); PostgreSQL from the libpq environment or DATABASE_URL.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, `
		CREATE EXTENSION IF NOT EXISTS fencing;
		CREATE TABLE IF NOT EXISTS fencing_lock_generations (
			service text PRIMARY KEY, generation bigint NOT NULL);
		CREATE TABLE IF NOT EXISTS ledger (
			id     bigserial PRIMARY KEY,
			acct   text NOT NULL,
			amount bigint NOT NULL,
			fence  fencing.fence);
		SELECT fencing.protect('ledger', key_columns => '{acct}');`)
	if err != nil {
		log.Fatal(err)
	}
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		addr = "127.0.0.1:6379"
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()

	// lock:{ledger-acct-1} in Redis, 5 s at a time, renewed while held;
	// taking it raises the fence of the ledger's key acct-1 (the first
	// meter): an older holder that wakes up now is refused
	lock := fencing.NewRedisSource(pool, rdb, "ledger-acct-1", 5*time.Second,
		fencing.WithFences(fencing.KeyScope("ledger", "acct-1")))
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := lock.Acquire(wait); err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)

	for i := 1; i <= 10; i++ {
		select {
		case <-lock.Lost(): // renewal failed: stop before writing
			log.Fatal("the lock is lost, stopping")
		default:
		}
		err := fencing.RunFenced(ctx, pool, lock, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO ledger (acct, amount) VALUES ($1, $2)", "acct-1", i)
			return err
		})
		switch {
		case errors.Is(err, fencing.ErrLockLost), errors.Is(err, fencing.ErrStaleToken):
			log.Fatal("the lock is lost, stopping: ", err)
		case err != nil:
			log.Fatal(err)
		}
	}
	var n int64
	var fence string
	if err := pool.QueryRow(ctx, `SELECT count(*), (SELECT fence::text FROM ledger WHERE acct = 'acct-1' ORDER BY id DESC LIMIT 1)
		FROM ledger WHERE acct = 'acct-1'`).Scan(&n, &fence); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("acct-1: %d entries, the last with token %s\n", n, fence)
}
