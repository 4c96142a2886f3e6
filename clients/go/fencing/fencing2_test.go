package fencing_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ---- every SF001 reason and the other SQLSTATEs, from a real server --------

func TestReasons(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	seven := fencing.StaticToken{Token: fencing.Token{Counter: 7}}
	if err := fencing.RunFenced(ctx, pool, seven, update(tbl, "a")); err != nil {
		t.Fatal(err)
	}
	err := fencing.RunFenced(ctx, pool, seven, update(tbl, "a"))
	var fo *fencing.FencedOutError
	if !errors.Is(err, fencing.ErrTokenAlreadyUsed) || !errors.As(err, &fo) || fo.Token != seven.Token || errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("token_already_used: %v", err)
	}
	var pgErr *pgconn.PgError
	err = fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Counter: 6}}, update(tbl, "a"))
	if !errors.Is(err, fencing.ErrStaleToken) || !errors.As(err, &pgErr) || pgErr.Code != "SF001" {
		t.Fatalf("stale_token: %v", err)
	}
	// SF002: a write without a token, and with two that differ
	_, err = pool.Exec(ctx, "UPDATE "+tbl+" SET balance = 0")
	if err = fencing.Classify(err, fencing.Token{}); !errors.Is(err, fencing.ErrTokenRequired) {
		t.Fatalf("a write without a token: %v", err)
	}
	err = fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Counter: 50}}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE "+tbl+" SET fence = '0:90'::text::fencing.fence WHERE id = 'a'")
		return err
	})
	if !errors.Is(err, fencing.ErrTokenRequired) {
		t.Fatalf("two different tokens: %v", err)
	}
	// SF005: DDL that would break the guard, where the DDL guard watches
	// the table (the edition for managed PostgreSQL installed by a role
	// that may not create event triggers has none, and says so in
	// fencing.protected_tables.ddl_guarded: managed/README.md, "the DDL
	// guard (SF005)"; the C edition has no such column: always guarded)
	var ddlGuarded bool
	if err := pool.QueryRow(ctx, `SELECT coalesce((to_jsonb(p) ->> 'ddl_guarded')::boolean, true)
		FROM fencing.protected_tables p WHERE p.relid = $1::text::regclass`, tbl).Scan(&ddlGuarded); err != nil {
		t.Fatal(err)
	}
	if ddlGuarded {
		_, err = pool.Exec(ctx, "ALTER TABLE "+tbl+" DISABLE TRIGGER ALL")
		if err = fencing.Classify(err, fencing.Token{}); !errors.Is(err, fencing.ErrGuardAltered) || !errors.Is(err, fencing.ErrFencing) {
			t.Fatalf("disabling the guard: %v", err)
		}
	} else {
		t.Log("SF005 not checked: no DDL guard here (the edition for managed PostgreSQL without event triggers: managed/README.md, the DDL guard (SF005))")
	}
	// lease_expired: a table protected with the lease, written after it ran out
	lease := name("leaseexp")
	ltbl := accounts(t, pool, fmt.Sprintf(", lease => '%s'", lease))
	src := fencing.NewLeaseSource(pool, lease, 2*time.Second)
	tok, err := src.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fencing.RunFenced(ctx, pool, src, update(ltbl, "a")); err != nil {
		t.Fatal(err)
	}
	last, _ := src.NextToken(ctx)
	src.Release(ctx) // the lease runs out now
	if err := fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: last}, update(ltbl, "a")); !errors.Is(err, fencing.ErrLeaseExpired) {
		t.Fatalf("a write after the lease was released (grant %s, last %s): %v", tok, last, err)
	}
}

// ---- retries: 40001 and 40P01 only, a new token and connection each ------

type countingSource struct {
	fencing.TokenSource
	n atomic.Int64
}

func (c *countingSource) NextToken(ctx context.Context) (fencing.Token, error) {
	c.n.Add(1)
	return c.TokenSource.NextToken(ctx)
}

func TestAttempts(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	src := &countingSource{TokenSource: fencing.NewLeaseSource(pool, name("retry"), 10*time.Second)}
	if _, err := src.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	defer src.Release(ctx)
	var calls int32
	var pids []uint32
	flaky := func(code string, failures int32) func(pgx.Tx) error {
		atomic.StoreInt32(&calls, 0)
		pids = nil
		return func(tx pgx.Tx) error {
			pids = append(pids, tx.Conn().PgConn().PID())
			if atomic.AddInt32(&calls, 1) <= failures {
				return &pgconn.PgError{Code: code}
			}
			return update(tbl, "a")(tx)
		}
	}
	src.n.Store(0)
	if err := fencing.RunFenced(ctx, pool, src, flaky("40001", 2), fencing.WithAttempts(3)); err != nil || calls != 3 || src.n.Load() != 3 {
		t.Fatalf("40001 twice, 3 attempts: %v after %d calls, %d tokens", err, calls, src.n.Load())
	}
	t.Logf("the three tries ran on backends %v", pids)
	if err := fencing.RunFenced(ctx, pool, src, flaky("40P01", 1)); err == nil || calls != 1 {
		t.Fatalf("40P01, 1 attempt: %v after %d calls", err, calls)
	}
	if err := fencing.RunFenced(ctx, pool, src, flaky("40P01", 5), fencing.WithAttempts(2)); err == nil || calls != 2 {
		t.Fatalf("40P01 five times, 2 attempts: %v after %d calls", err, calls)
	}
	for _, code := range []string{"SF001", "SF002", "SF004", "23505"} {
		if err := fencing.RunFenced(ctx, pool, src, flaky(code, 5), fencing.WithAttempts(5)); err == nil || calls != 1 {
			t.Fatalf("%s with 5 attempts: %v after %d calls", code, err, calls)
		}
	}
	// a real serialization failure, retried with a new token
	a, b := pgPool(t, 2), pgPool(t, 2)
	_ = a
	var once atomic.Bool
	src.n.Store(0)
	err := fencing.RunFenced(ctx, pool, src, func(tx pgx.Tx) error {
		var bal int64
		if err := tx.QueryRow(ctx, "SELECT balance FROM "+tbl+" WHERE id = 'b'").Scan(&bal); err != nil {
			return err
		}
		if once.CompareAndSwap(false, true) { // another writer commits in between
			if err := fencing.RunFenced(ctx, b, fencing.StaticToken{Token: fencing.Token{Epoch: 0, Counter: 1}}, update(tbl, "b")); err != nil {
				return fmt.Errorf("the other writer: %w", err)
			}
		}
		_, err := tx.Exec(ctx, "UPDATE "+tbl+" SET balance = $1 WHERE id = 'b'", bal+10)
		return err
	}, fencing.WithIsolation(pgx.RepeatableRead), fencing.WithAttempts(3))
	if bal, _ := rowOf(t, pool, tbl, "b"); err != nil || bal != 11 || src.n.Load() != 2 {
		t.Fatalf("a real 40001, retried: %v, balance %d, %d tokens", err, bal, src.n.Load())
	}
}

// ---- no pooled connection carries a token ---------------------------------

// A session-level fencing.token left on a pooled connection (a SET by
// other code) is seen in the same round trip as BEGIN, reset inside the
// transaction, logged with the backend's pid; the connection goes back
// without it.  And no run leaves one.
func TestPoolCheck(t *testing.T) {
	pool := pgPool(t, 1) // one connection: every run reuses it
	ctx := context.Background()
	tbl := accounts(t, pool, ", strict => false")
	var pid uint32
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid = c.Conn().PgConn().PID()
	if _, err := c.Exec(ctx, "SET fencing.token = '0:999'"); err != nil {
		t.Fatal(err)
	}
	c.Release()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf}, nil))
	err = fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Counter: 5}}, func(tx pgx.Tx) error {
		var s string
		if err := tx.QueryRow(ctx, "SELECT current_setting('fencing.token')").Scan(&s); err != nil {
			return err
		}
		if s != "0:5" {
			return fmt.Errorf("the transaction's token is %s", s)
		}
		return update(tbl, "a")(tx)
	}, fencing.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), fmt.Sprintf("pid=%d", pid)) || !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("no warning naming pid %d: %q", pid, buf.String())
	}
	t.Logf("logged: %s", strings.TrimSpace(buf.String()))
	if p := noToken(t, pool, "after the leftover was reset"); p != pid {
		t.Fatalf("another connection (%d, not %d)", p, pid)
	}
	// runs that succeed, are refused or fail leave nothing behind
	strictTbl := accounts(t, pool, "")
	for i, f := range []func() error{
		func() error { return fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Counter: 5}}, update(strictTbl, "a")) },
		func() error { return fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Counter: 4}}, update(strictTbl, "a")) },
		func() error {
			return fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Counter: 6}}, func(pgx.Tx) error { return errors.New("boom") })
		},
		func() error {
			return fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Counter: 9}}, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "SELECT 1/0")
				return err
			})
		},
		func() error {
			_, err := fencing.RunOnce(ctx, pool, name("leak"), 1, func(tx pgx.Tx) (int, error) { return 1, nil }, fencing.WithClaimFence())
			return err
		},
	} {
		err := f()
		t.Logf("run %d: %v", i, err)
		if p := noToken(t, pool, fmt.Sprintf("after run %d", i)); p != pid {
			t.Fatalf("the pool did not reuse its one connection")
		}
	}
	if _, err := pool.Exec(ctx, "UPDATE "+strictTbl+" SET balance = 0"); !errors.Is(fencing.Classify(err, fencing.Token{}), fencing.ErrTokenRequired) {
		t.Fatalf("a tokenless write after the runs: %v", err)
	}
}

func noToken(t *testing.T, pool *pgxpool.Pool, when string) uint32 {
	t.Helper()
	ctx := context.Background()
	c, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	tok, err := fencing.ConnToken(ctx, c)
	if err != nil || tok != "" {
		t.Fatalf("%s: a pooled connection carries token %q (%v)", when, tok, err)
	}
	return c.Conn().PgConn().PID()
}

// ---- several locks in one transaction ----------------------------------------

// A transfer between two accounts of a key-scope ledger, each under its
// lock: each row carries its own key's token; the newer token wins on each
// key, and a stale token on either key aborts the whole transfer.
func TestTransferTwoLocks(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := context.Background()
	ledger := name("ledger")
	if _, err := pool.Exec(ctx, fmt.Sprintf(`
		CREATE TABLE %[1]s (id bigserial PRIMARY KEY, acct text NOT NULL, amount bigint NOT NULL, fence fencing.fence);
		SELECT fencing.protect('%[1]s', key_columns => '{acct}');`, ledger)); err != nil {
		t.Fatal(err)
	}
	lock := map[string]*fencing.LeaseSource{}
	for _, acct := range []string{"acct-1", "acct-2"} {
		lock[acct] = fencing.NewLeaseSource(pool, name(acct), 10*time.Second)
		if _, err := lock[acct].Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		defer lock[acct].Release(ctx)
	}
	transfer := func(srcs map[string]fencing.TokenSource, amount int64) (map[string]fencing.Token, error) {
		var used map[string]fencing.Token
		err := fencing.RunFencedMany(ctx, pool, srcs, func(tx pgx.Tx, tokens map[string]fencing.Token) error {
			used = tokens
			if _, err := tx.Exec(ctx, "INSERT INTO "+ledger+" (acct, amount, fence) VALUES ($1, $2, $3::text::fencing.fence)", "acct-1", -amount, tokens["acct-1"].String()); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+ledger+" (acct, amount, fence) VALUES ($1, $2, $3::text::fencing.fence)", "acct-2", amount, tokens["acct-2"].String())
			return err
		})
		return used, err
	}
	live := map[string]fencing.TokenSource{"acct-1": lock["acct-1"], "acct-2": lock["acct-2"]}
	first, err := transfer(live, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := transfer(live, 20); err != nil {
		t.Fatal(err)
	}
	sum := func() (n int, total int64) {
		if err := pool.QueryRow(ctx, "SELECT count(*), coalesce(sum(amount), 0) FROM "+ledger).Scan(&n, &total); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, stale := range []string{"acct-1", "acct-2"} {
		srcs := map[string]fencing.TokenSource{"acct-1": lock["acct-1"], "acct-2": lock["acct-2"]}
		srcs[stale] = fencing.StaticToken{Token: first[stale]} // an older grant of this key
		_, err := transfer(srcs, 99)
		if !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("a stale token on %s: %v", stale, err)
		}
		if n, total := sum(); n != 4 || total != 0 {
			t.Fatalf("after the stale transfer on %s: %d rows, total %d (want 4 and 0: nothing written)", stale, n, total)
		}
	}
	// the session carries no token: a row without its own token is refused
	err = fencing.RunFencedMany(ctx, pool, live, func(tx pgx.Tx, _ map[string]fencing.Token) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+ledger+" (acct, amount) VALUES ('acct-1', 1)")
		return err
	})
	if !errors.Is(err, fencing.ErrTokenRequired) {
		t.Fatalf("a row without its token: %v", err)
	}
}

// RunLocked: take the lock, one fenced transaction, release.
func TestRunLocked(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	lock := name("locked")
	src := fencing.NewLeaseSource(pool, lock, 10*time.Second)
	for i := 0; i < 3; i++ {
		if err := fencing.RunLocked(ctx, pool, src, update(tbl, "a")); err != nil {
			t.Fatal(err)
		}
	}
	other := fencing.NewLeaseSource(pool, lock, 10*time.Second)
	if _, err := other.TryAcquire(ctx); err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
	other.Release(ctx)
	if bal, _ := row(t, pool, tbl); bal != 3 {
		t.Fatalf("balance %d", bal)
	}
}

// ---- PgBouncer in transaction mode -----------------------------------------

func TestPgBouncer(t *testing.T) {
	dsn := need(t, "FENCING_PGBOUNCER")
	direct := pgPool(t, 2)
	ctx := context.Background()
	tbl := accounts(t, direct, "")
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, fencing.ForPgBouncer(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	src := fencing.NewLeaseSource(pool, name("bouncer"), 10*time.Second)
	if _, err := src.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	defer src.Release(ctx)
	var last fencing.Token
	for i := 0; i < 20; i++ {
		if err := fencing.RunFenced(ctx, pool, src, update(tbl, "a")); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if tok, err := fencing.ConnToken(ctx, pool); err != nil || tok != "" {
			t.Fatalf("after write %d a statement through PgBouncer sees token %q (%v)", i, tok, err)
		}
	}
	bal, fence := row(t, direct, tbl)
	last, _ = fencing.ParseToken(fence)
	if bal != 20 {
		t.Fatalf("balance %d", bal)
	}
	if err := fencing.RunFenced(ctx, pool, fencing.StaticToken{Token: fencing.Token{Epoch: last.Epoch, Counter: last.Counter - 1}}, update(tbl, "a")); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale write through PgBouncer: %v", err)
	}
	// a session-level token left on the server connection behind PgBouncer
	// (pool_size 1: every client shares it) is reset by the next fenced
	// transaction, and a new client sees none
	if _, err := pool.Exec(ctx, "SET fencing.token = '0:1'"); err != nil {
		t.Fatal(err)
	}
	if tok, _ := fencing.ConnToken(ctx, pool); tok != "0:1" {
		t.Logf("(the leftover token is not visible through PgBouncer: %q)", tok)
	}
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf}, nil))
	if err := fencing.RunFenced(ctx, pool, src, update(tbl, "a"), fencing.WithLogger(logger)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "session-level fencing.token") {
		t.Fatalf("the leftover behind PgBouncer was not seen: %q", buf.String())
	}
	conn, err := pgx.Connect(ctx, dsn+" default_query_exec_mode=exec")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if tok, err := fencing.ConnToken(ctx, conn); err != nil || tok != "" {
		t.Fatalf("a new client of PgBouncer sees token %q (%v)", tok, err)
	}
	if _, err := conn.Exec(ctx, "UPDATE "+tbl+" SET balance = 0"); !errors.Is(fencing.Classify(err, fencing.Token{}), fencing.ErrTokenRequired) {
		t.Fatalf("a tokenless write through PgBouncer: %v", err)
	}
	var out fencing.Outcome
	key := name("bouncer")
	for i := 0; i < 2; i++ {
		if _, err := fencing.RunOnce(ctx, pool, key, 1, func(tx pgx.Tx) (int, error) { return 7, nil }, fencing.WithOutcome(&out)); err != nil {
			t.Fatal(err)
		}
	}
	if out.State != "done" {
		t.Fatalf("RunOnce through PgBouncer: %+v", out)
	}
}

// ---- idempotency -------------------------------------------------------------

type receipt struct {
	Order string `json:"order"`
	Total int    `json:"total"`
}

func orders(t *testing.T, pool *pgxpool.Pool) string {
	tbl := name("orders")
	if _, err := pool.Exec(context.Background(), "CREATE TABLE "+tbl+" (id text PRIMARY KEY, total int)"); err != nil {
		t.Fatal(err)
	}
	return tbl
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...interface{}) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRunOnce(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := context.Background()
	tbl := orders(t, pool)
	key := name("order")
	req := map[string]int{"total": 1250}
	var runs int32
	fn := func(tx pgx.Tx) (receipt, error) {
		atomic.AddInt32(&runs, 1)
		_, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES ($1, 1250)", key)
		return receipt{Order: key, Total: 1250}, err
	}
	var out fencing.Outcome
	r1, err := fencing.RunOnce(ctx, pool, key, req, fn, fencing.WithOutcome(&out))
	if err != nil || out.State != "started" || r1.Order != key {
		t.Fatalf("first: %+v %+v %v", r1, out, err)
	}
	r2, err := fencing.RunOnce(ctx, pool, key, req, fn, fencing.WithOutcome(&out))
	if err != nil || out.State != "done" || r2 != r1 || runs != 1 {
		t.Fatalf("replay: %+v %+v %v (runs %d)", r2, out, err, runs)
	}
	if _, err := fencing.RunOnce(ctx, pool, key, map[string]int{"total": 9}, fn); !errors.Is(err, fencing.ErrKeyReused) {
		t.Fatalf("another request: %v", err)
	}
	// fn fails: nothing recorded, the next call runs it
	key2 := name("order")
	if _, err := fencing.RunOnce(ctx, pool, key2, req, func(tx pgx.Tx) (receipt, error) {
		return receipt{}, errors.New("card declined")
	}); err == nil || err.Error() != "card declined" {
		t.Fatalf("fn's error: %v", err)
	}
	if _, err := fencing.RunOnce(ctx, pool, key2, req, func(tx pgx.Tx) (receipt, error) {
		return receipt{Order: key2}, nil
	}, fencing.WithOutcome(&out)); err != nil || out.State != "started" {
		t.Fatalf("after a failed fn: %+v %v", out, err)
	}
	if n := count(t, pool, "SELECT count(*) FROM "+tbl); n != 1 {
		t.Fatalf("%d orders", n)
	}
}

func TestRunOnceInProgress(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := context.Background()
	key := name("busy")
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		_, err := fencing.RunOnce(ctx, pool, key, 1, func(tx pgx.Tx) (int, error) {
			close(started)
			<-release
			return 1, nil
		}, fencing.WithClaimFirst(), fencing.WithLease(time.Minute))
		done <- err
	}()
	<-started
	_, err := fencing.RunOnce(ctx, pool, key, 1, func(tx pgx.Tx) (int, error) { return 2, nil })
	if !errors.Is(err, fencing.ErrKeyInProgress) {
		t.Fatalf("while another owner runs: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// one transaction and no wait: SF004 at once while it is open
	started2, release2 := make(chan struct{}), make(chan struct{})
	key2 := name("busy")
	go func() {
		_, err := fencing.RunOnce(ctx, pool, key2, 1, func(tx pgx.Tx) (int, error) {
			close(started2)
			<-release2
			return 1, nil
		})
		done <- err
	}()
	<-started2
	_, err = fencing.RunOnce(ctx, pool, key2, 1, func(tx pgx.Tx) (int, error) { return 2, nil }, fencing.WithNoWait())
	close(release2)
	if !errors.Is(err, fencing.ErrKeyInProgress) {
		t.Fatalf("no wait, while another transaction runs: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var out fencing.Outcome
	if v, err := fencing.RunOnce(ctx, pool, key2, 1, func(tx pgx.Tx) (int, error) { return 2, nil }, fencing.WithOutcome(&out)); err != nil || v != 1 || out.State != "done" {
		t.Fatalf("after it finished: %d %+v %v", v, out, err)
	}
}

// A claim paused past its lease is taken over: the new owner completes,
// the old one's transaction fails with ClaimTakenOver and its write is
// rolled back.
func TestRunOnceTakeover(t *testing.T) {
	pool := pgPool(t, 4)
	ctx := context.Background()
	tbl := orders(t, pool)
	key := name("takeover")
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	var first fencing.Outcome
	go func() {
		_, err := fencing.RunOnce(ctx, pool, key, 1, func(tx pgx.Tx) (receipt, error) {
			if _, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES ('first', 1)"); err != nil {
				return receipt{}, err
			}
			close(started)
			<-release // paused past the lease
			return receipt{Order: "first"}, nil
		}, fencing.WithClaimFirst(), fencing.WithLease(300*time.Millisecond), fencing.WithOutcome(&first))
		done <- err
	}()
	<-started
	waitFor(t, "the claim's lease to run out", 10, func() bool {
		return count(t, pool, "SELECT count(*) FROM fencing.idempotency_keys WHERE key = $1 AND locked_until < clock_timestamp()", key) == 1
	})
	var second fencing.Outcome
	r, err := fencing.RunOnce(ctx, pool, key, 1, func(tx pgx.Tx) (receipt, error) {
		_, err := tx.Exec(ctx, "INSERT INTO "+tbl+" VALUES ('second', 1)")
		return receipt{Order: "second"}, err
	}, fencing.WithClaimFirst(), fencing.WithOutcome(&second))
	if err != nil || second.State != "resumed" || !first.Claim.Less(second.Claim) {
		t.Fatalf("takeover: %+v %v (first claim %s)", second, err, first.Claim)
	}
	close(release)
	err = <-done
	var fo *fencing.FencedOutError
	if !errors.Is(err, fencing.ErrClaimTakenOver) || !errors.As(err, &fo) || fo.Token != first.Claim {
		t.Fatalf("the old owner: %v", err)
	}
	if n := count(t, pool, "SELECT count(*) FROM "+tbl+" WHERE id = 'first'"); n != 0 {
		t.Fatal("the old owner's write was kept")
	}
	r3, err := fencing.RunOnce(ctx, pool, key, 1, func(tx pgx.Tx) (receipt, error) { return receipt{}, errors.New("ran again") })
	if err != nil || r3 != r {
		t.Fatalf("replay after the takeover: %+v %v", r3, err)
	}
}

