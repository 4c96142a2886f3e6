// Quickstart: protect a table, take a lease, write with its token.
// Connects with the usual libpq environment (PGHOST, PGPORT, PGUSER,
// PGDATABASE, ...); the role must be allowed to CREATE EXTENSION.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

func main() {
	ctx := context.Background()
	pool, err := pgxpool.Connect(ctx, os.Getenv("DATABASE_URL")) // "" = libpq environment
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	// A table with a fence column, protected by the guard trigger.
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

	// A token from the extension's own lease (any fencing.Source will do).
	lease := fencing.NewLeaseSource(pool, "quickstart", "worker-1", 10*time.Second)
	token, err := lease.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)

	// The write, fenced: refused if a newer token has written since.
	err = fencing.RunFenced(ctx, pool, token, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance - 10 WHERE id = $1", "alice")
		return err
	})
	var fenced *fencing.FencedOutError
	switch {
	case err == nil:
		fmt.Println("written with token", token)
	case fencing.IsFencedOut(err, &fenced):
		fmt.Println("refused:", fenced.Reason, "- stop and re-acquire")
	default:
		log.Fatal(err)
	}
}
