// bench: the cost of the library's fenced transaction against the same
// transaction by hand with pgx, interleaved on one pooled connection:
//
//   - a bare token: RunFenced with a StaticToken (BEGIN, the leftover
//     check and set_token in one round trip, the UPDATE, COMMIT) against
//     Begin; set_token; UPDATE; Commit;
//   - a lease: RunFenced with a LeaseSource (lease_next inside set_token,
//     in the same round trip as BEGIN) against Begin;
//     set_token(lease_next); UPDATE; Commit.
//
// Each is a one-row UPDATE of a protected table (strict => false, as the
// bare token writes every transaction with the same token).  Prints the
// medians and the ratio of each library kind to its hand-written twin.
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

	"github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
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
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	tbl := fmt.Sprintf("fencing_bench_%d", time.Now().UnixNano()%1000000)
	// one table per lock: tokens of different locks are not ordered
	for _, t := range []string{tbl, tbl + "_lease", tbl + "_hand"} {
		if _, err := pool.Exec(ctx, fmt.Sprintf(`
			CREATE EXTENSION IF NOT EXISTS fencing;
			CREATE TABLE %[1]s (id text PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence);
			INSERT INTO %[1]s VALUES ('a', 0, NULL);
			SELECT fencing.protect('%[1]s', strict => false);`, t)); err != nil {
			log.Fatal(err)
		}
		defer pool.Exec(ctx, "DROP TABLE "+t)
	}
	updateOf := func(t string) string { return "UPDATE " + t + " SET balance = balance + 1 WHERE id = 'a'" }
	static := fencing.StaticToken{Token: fencing.Token{Epoch: 0, Counter: 1}}
	lease := fencing.NewLeaseSource(pool, tbl, time.Minute)
	if _, err := lease.Acquire(ctx); err != nil {
		log.Fatal(err)
	}
	defer lease.Release(ctx)
	// the hand-written lease kind holds a lease of its own
	var handTok string
	if err := pool.QueryRow(ctx, "SELECT fencing.lease_acquire($1, 'bench', '1 minute')::text", tbl+"-hand").Scan(&handTok); err != nil {
		log.Fatal(err)
	}

	body := func(t string) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, updateOf(t))
			return err
		}
	}
	byHand := func(update, setSQL string, args ...any) (string, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return "", err
		}
		defer tx.Rollback(ctx)
		var t string
		if err := tx.QueryRow(ctx, setSQL, args...).Scan(&t); err != nil {
			return "", err
		}
		if _, err := tx.Exec(ctx, update); err != nil {
			return "", err
		}
		return t, tx.Commit(ctx)
	}
	kinds := []struct {
		name string
		run  func() error
	}{
		{"library, bare token (RunFenced, StaticToken)", func() error { return fencing.RunFenced(ctx, pool, static, body(tbl)) }},
		{"by hand, bare token (Begin; set_token; UPDATE; Commit)", func() error {
			_, err := byHand(updateOf(tbl), "SELECT fencing.set_token($1)::text", static.Token.String())
			return err
		}},
		{"library, lease (RunFenced, LeaseSource)", func() error { return fencing.RunFenced(ctx, pool, lease, body(tbl+"_lease")) }},
		{"by hand, lease (Begin; set_token(lease_next); UPDATE; Commit)", func() error {
			t, err := byHand(updateOf(tbl+"_hand"), "SELECT fencing.set_token(fencing.lease_next($1, $2::text::fencing.fence, '1 minute'))::text", tbl+"-hand", handTok)
			if err == nil {
				handTok = t
			}
			return err
		}},
	}
	lat := make([][]time.Duration, len(kinds))
	for i := 0; i < *n+50; i++ {
		for j := range kinds {
			k := (i + j) % len(kinds) // each kind goes first in turn
			t0 := time.Now()
			if err := kinds[k].run(); err != nil {
				log.Fatalf("%s: %v", kinds[k].name, err)
			}
			if i >= 50 { // the warm-up is left out
				lat[k] = append(lat[k], time.Since(t0))
			}
		}
	}
	for k, kind := range kinds {
		m := median(lat[k])
		ratio := ""
		if k%2 == 0 {
			ratio = fmt.Sprintf("  library/by hand %.2f", float64(m)/float64(median(lat[k+1])))
		}
		fmt.Printf("BENCH: %-62s median %7.1f us%s  (n=%d, interleaved)\n", kind.name, float64(m.Nanoseconds())/1000, ratio, *n)
	}
}
