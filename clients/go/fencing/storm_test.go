package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/jackc/pgx/v5"
)

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestStormLease: FENCING_GO_STORM_WORKERS (20) goroutines, each with a
// lease source of 300 ms on one lease, make FENCING_GO_STORM_WRITES (250)
// fenced writes each to one row of a strict table (each transaction a new
// token from its source, RunFenced's default).  A worker without the lock
// tries to take it (TryAcquire); one with it writes, sometimes releases
// it, and sometimes pauses past the TTL inside its transaction, after its
// token was bound and before its UPDATE, its source's renewal frozen as a
// paused process's is.  Each accepted write appends its
// token to a ledger, numbered under the row's lock (so in commit order).
// Then: no accepted token is below one accepted before it (zero stale
// writes accepted), the ledger holds exactly the writes the workers saw
// accepted, every refusal is an SF001 of a known reason or a lost lock,
// and no pooled connection carries a token.  Runs when FENCING_GO_STORM=1.
func TestStormLease(t *testing.T) { storm(t, "lease") }

// TestStormRedis: the same with a Redis lock of 300 ms.
func TestStormRedis(t *testing.T) {
	need(t, "FENCING_REDIS")
	storm(t, "redis")
}

func storm(t *testing.T, source string) {
	if os.Getenv("FENCING_GO_STORM") != "1" {
		t.Skip("FENCING_GO_STORM is not 1")
	}
	workers := envInt("FENCING_GO_STORM_WORKERS", 20)
	writes := envInt("FENCING_GO_STORM_WRITES", 250)
	const ttl = 300 * time.Millisecond
	pool := pgPool(t, int32(workers))
	ctx := context.Background()
	lock := name("storm")
	protect := ""
	if source == "lease" {
		protect += fmt.Sprintf(", lease => '%s'", lock)
	}
	tbl := accounts(t, pool, protect)
	ledger := tbl + "_ledger"
	if _, err := pool.Exec(ctx, "CREATE TABLE "+ledger+" (n bigint PRIMARY KEY, token fencing.fence NOT NULL, worker int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	rc := redisClientOpt(t, source == "redis")
	quiet := fencing.WithSourceLogger(slog.New(slog.NewTextHandler(io.Discard, nil))) // hundreds of lost locks
	newSource := func(i int) fencing.TokenSource {
		if source == "redis" {
			return fencing.NewRedisSource(pool, rc, lock, ttl, quiet)
		}
		return fencing.NewLeaseSource(pool, lock, ttl, fencing.WithHolder(fmt.Sprint("w", i)), quiet)
	}

	var accepted, noLock, pauses, acquired, lockLost int64
	var mu sync.Mutex
	refused := map[fencing.Reason]int64{}
	var unexpected []string
	// a guard against a hang, not a limit on speed: a loaded machine may
	// take minutes (FENCING_GO_STORM_DEADLINE, seconds)
	deadline := time.Now().Add(time.Duration(envInt("FENCING_GO_STORM_DEADLINE", 900)) * time.Second)
	start := time.Now()
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(i) + time.Now().UnixNano()))
			src := newSource(i)
			held := false
			for w := 0; w < writes && time.Now().Before(deadline); {
				if !held {
					_, err := src.TryAcquire(ctx)
					switch {
					case err == nil:
						held = true
						atomic.AddInt64(&acquired, 1)
					case errors.Is(err, fencing.ErrNotAcquired):
						atomic.AddInt64(&noLock, 1)
						time.Sleep(time.Duration(1+rnd.Intn(3)) * time.Millisecond)
						continue
					default:
						mu.Lock()
						unexpected = append(unexpected, "acquire: "+err.Error())
						mu.Unlock()
						return
					}
				}
				w++
				pause := rnd.Intn(100) < 2
				var tok fencing.Token
				err := fencing.RunFenced(ctx, pool, src, func(tx pgx.Tx) error {
					var s string
					if err := tx.QueryRow(ctx, "SELECT current_setting('fencing.token')").Scan(&s); err != nil {
						return err
					}
					tok, _ = fencing.ParseToken(s)
					if pause { // past the TTL, between the token and the write, renewal frozen too
						atomic.AddInt64(&pauses, 1)
						d := ttl + time.Duration(50+rnd.Intn(100))*time.Millisecond
						fencing.FreezeRenewal(src, d)
						time.Sleep(d)
					}
					var n int64
					if err := tx.QueryRow(ctx, "UPDATE "+tbl+" SET balance = balance + 1 WHERE id = 'a' RETURNING balance").Scan(&n); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, "INSERT INTO "+ledger+" VALUES ($1, $2::text::fencing.fence, $3)", n, tok.String(), i)
					return err
				})
				var fo *fencing.FencedOutError
				switch {
				case err == nil:
					atomic.AddInt64(&accepted, 1)
					if rnd.Intn(100) < 5 {
						src.Release(ctx)
						held = false
					}
				case errors.As(err, &fo):
					mu.Lock()
					refused[fo.Reason]++
					mu.Unlock()
					src.Release(ctx)
					held = false
				case errors.Is(err, fencing.ErrLockLost):
					atomic.AddInt64(&lockLost, 1)
					src.Release(ctx)
					held = false
				default:
					mu.Lock()
					unexpected = append(unexpected, err.Error())
					mu.Unlock()
				}
				if !held {
					time.Sleep(time.Duration(rnd.Intn(2)) * time.Millisecond)
				}
			}
			if held {
				src.Release(ctx)
			}
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)

	var inLedger, staleAccepted int64
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+ledger).Scan(&inLedger); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT token, lag(token) OVER (ORDER BY n) AS prev FROM `+ledger+`) s
		WHERE token OPERATOR(fencing.<) prev`).Scan(&staleAccepted); err != nil {
		t.Fatal(err)
	}
	withToken := 0
	conns := pool.AcquireAllIdle(ctx)
	for _, c := range conns {
		if tok, err := fencing.ConnToken(ctx, c); err != nil || tok != "" {
			withToken++
		}
		c.Release()
	}
	var nRefused int64
	for _, n := range refused {
		nRefused += n
	}
	fmt.Printf("STORM: source %s, strict, %d workers x %d writes in %.1fs: %d accepted, %d refused (stale_token %d, lease_expired %d, token_already_used %d, claim_taken_over %d), %d lock lost before writing, %d unexpected errors; %d grants, %d pauses past the TTL; %d stale writes accepted; %d of %d pooled connections with a token\n",
		source, workers, writes, elapsed.Seconds(), accepted, nRefused, refused[fencing.StaleToken], refused[fencing.LeaseExpired],
		refused[fencing.TokenAlreadyUsed], refused[fencing.ClaimTakenOver], lockLost, len(unexpected), acquired, pauses, staleAccepted, withToken, len(conns))
	if len(unexpected) > 0 {
		t.Errorf("unexpected errors (%d), first: %s", len(unexpected), unexpected[0])
	}
	if time.Now().After(deadline) {
		t.Errorf("the storm ran out of time (%.0fs)", elapsed.Seconds())
	}
	if accepted+nRefused+lockLost != int64(workers*writes) {
		t.Errorf("%d accepted + %d refused + %d lost != %d writes", accepted, nRefused, lockLost, workers*writes)
	}
	if refused[fencing.TokenAlreadyUsed] != 0 {
		t.Errorf("%d transactions refused as token_already_used: one grant, many transactions failed", refused[fencing.TokenAlreadyUsed])
	}
	if staleAccepted != 0 {
		t.Errorf("%d stale writes accepted", staleAccepted)
	}
	if inLedger != accepted {
		t.Errorf("the ledger holds %d writes, the workers saw %d accepted", inLedger, accepted)
	}
	if bal, _ := row(t, pool, tbl); bal != accepted {
		t.Errorf("balance %d, accepted %d", bal, accepted)
	}
	if withToken != 0 {
		t.Errorf("%d pooled connections carry a token", withToken)
	}
	if accepted == 0 || nRefused == 0 || pauses == 0 {
		t.Errorf("the storm tested nothing: %d accepted, %d refused, %d pauses", accepted, nRefused, pauses)
	}
}
