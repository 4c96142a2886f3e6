// bench: the latency of a fenced transaction through the library
// (RunFenced: BEGIN and set_token in one round trip, then the UPDATE and
// COMMIT) against the same by hand with pgx (Begin; set_token; UPDATE;
// Commit: four round trips), and RunFenced with WithSeparateBegin,
// interleaved on one pooled connection; prints the medians and ratios.
//
//	bench [-n 2000]      (PostgreSQL from the libpq environment)
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"sort"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func main() {
	n := flag.Int("n", 2000, "transactions of each kind")
	flag.Parse()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		log.Fatal(err)
	}
	cfg.MaxConns = 1 // the same connection for every kind
	pool, err := pgxpool.ConnectConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	tbl := fmt.Sprintf("fencing_bench_%d", time.Now().UnixNano()%1000000)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
		CREATE EXTENSION IF NOT EXISTS fencing;
		CREATE TABLE %[1]s (id text PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence);
		INSERT INTO %[1]s VALUES ('a', 0, NULL);
		SELECT fencing.protect('%[1]s', strict => false);`, tbl)); err != nil {
		log.Fatal(err)
	}
	defer pool.Exec(ctx, "DROP TABLE "+tbl)
	update := "UPDATE " + tbl + " SET balance = balance + 1 WHERE id = 'a'"
	tok := fencing.Token{Epoch: 0, Counter: 1}

	kinds := []struct {
		name string
		run  func() error
	}{
		{"library (RunFenced)", func() error {
			return fencing.RunFenced(ctx, pool, tok, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, update)
				return err
			})
		}},
		{"by hand (pgx: begin; set_token; update; commit)", func() error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SELECT fencing.set_token($1::text::fencing.fence)", tok.String()); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, update); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}},
		{"library, WithSeparateBegin", func() error {
			return fencing.RunFenced(ctx, pool, tok, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, update)
				return err
			}, fencing.WithSeparateBegin())
		}},
	}
	lat := make([][]time.Duration, len(kinds))
	for i := 0; i < *n+50; i++ {
		for j := range kinds {
			k := (i + j) % len(kinds) // each kind goes first in turn
			kind := kinds[k]
			t0 := time.Now()
			if err := kind.run(); err != nil {
				log.Fatalf("%s: %v", kind.name, err)
			}
			if i >= 50 { // warm-up left out
				lat[k] = append(lat[k], time.Since(t0))
			}
		}
	}
	base := median(lat[1])
	for k, kind := range kinds {
		m := median(lat[k])
		fmt.Printf("BENCH: %-48s median %7.1f us  ratio to by hand %.2f  (n=%d, interleaved)\n",
			kind.name, float64(m.Nanoseconds())/1000, float64(m)/float64(base), *n)
	}
}
