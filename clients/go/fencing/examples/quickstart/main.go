// Quickstart: protect a table, take a lock, write under it.
// Connects with the usual libpq environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE, ...) or DATABASE_URL; the role must be allowed to
// CREATE EXTENSION.
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
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // "" = libpq environment
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// A table with a fence column, protected by the guard.
	_, err = pool.Exec(ctx, `
		CREATE EXTENSION IF NOT EXISTS fencing;
		CREATE TABLE IF NOT EXISTS accounts (
			id      text PRIMARY KEY,
			balance bigint NOT NULL,
			fence   fencing.fence);
		SELECT fencing.protect('accounts');
		INSERT INTO accounts VALUES ('alice', 100, NULL) ON CONFLICT (id) DO NOTHING;`)
	if err != nil {
		log.Fatal(err)
	}

	// The lock: the extension's own lease (etcd, ZooKeeper and Redis
	// locks work the same way), renewed in the background while held.
	lock := fencing.NewLeaseSource(pool, "quickstart", 10*time.Second)
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := lock.Acquire(wait); err != nil {
		log.Fatal(err)
	}
	defer lock.Release(ctx)

	// Many transactions under one lock: each takes a new token from it,
	// and is refused once another holder has taken the lock.
	for i := 0; i < 3; i++ {
		err := fencing.RunFenced(ctx, pool, lock, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = $1", "alice")
			return err
		})
		if errors.Is(err, fencing.ErrLockLost) || errors.Is(err, fencing.ErrFencedOut) {
			log.Fatal("the lock is lost, stopping: ", err)
		} else if err != nil {
			log.Fatal(err)
		}
	}

	var balance int64
	var fence string
	err = pool.QueryRow(ctx, "SELECT balance, fence::text FROM accounts WHERE id = 'alice'").Scan(&balance, &fence)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("alice: balance %d, last written with token %s\n", balance, fence)
}
