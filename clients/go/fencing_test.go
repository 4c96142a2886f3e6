package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go"
	"github.com/gomodule/redigo/redis"
	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
	"github.com/samuel/go-zookeeper/zk"
	"go.etcd.io/etcd/clientv3"
)

func TestToken(t *testing.T) {
	tok, err := fencing.ParseToken("3:42")
	if err != nil || tok != (fencing.Token{Epoch: 3, Counter: 42}) || tok.String() != "3:42" {
		t.Fatalf("ParseToken(3:42) = %v, %v", tok, err)
	}
	if tok, _ := fencing.ParseToken("7"); tok != (fencing.Token{Counter: 7}) {
		t.Fatalf("ParseToken(7) = %v", tok)
	}
	if _, err := fencing.ParseToken("x:1"); err == nil {
		t.Fatal("ParseToken(x:1) accepted")
	}
	if !(fencing.Token{Epoch: 1, Counter: 9}).Less(fencing.Token{Epoch: 2, Counter: 0}) {
		t.Fatal("1:9 must order before 2:0")
	}
}

// The SF001 reasons from constraint_name, and an older server's SF001
// without one, classify as documented.
func TestClassify(t *testing.T) {
	cases := map[string]error{
		"stale_token": fencing.ErrStaleToken, "token_already_used": fencing.ErrTokenAlreadyUsed,
		"lease_expired": fencing.ErrLeaseExpired, "claim_taken_over": fencing.ErrClaimTakenOver,
		"": fencing.ErrStaleToken,
	}
	for reason, want := range cases {
		err := fencing.Classify(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "SF001", ConstraintName: reason}), fencing.Token{Counter: 1})
		var fo *fencing.FencedOutError
		if !errors.As(err, &fo) || !errors.Is(err, want) || !errors.Is(err, fencing.ErrFencedOut) {
			t.Errorf("reason %q: %v", reason, err)
		}
	}
	if err := fencing.Classify(&pgconn.PgError{Code: "SF002"}, fencing.Token{}); !errors.Is(err, fencing.ErrTokenRequired) {
		t.Errorf("SF002: %v", err)
	}
	if err := fencing.Classify(&pgconn.PgError{Code: "SF004"}, fencing.Token{}); !errors.Is(err, fencing.ErrInProgress) {
		t.Errorf("SF004: %v", err)
	}
}

func update(tbl string) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "UPDATE "+tbl+" SET balance = balance + 1 WHERE id = 'a'")
		return err
	}
}

// ---- tokens grow, per source ---------------------------------------------

func increasing(t *testing.T, src fencing.Source) {
	t.Helper()
	ctx := context.Background()
	var last fencing.Token
	for i := 0; i < 3; i++ {
		tok, err := src.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("grant %d: %s", i+1, tok)
		if i > 0 && !last.Less(tok) {
			t.Fatalf("token %s after %s", tok, last)
		}
		last = tok
		if err := src.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func etcdClient(t *testing.T) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{need(t, "FENCING_ETCD")}, DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func zkConn(t *testing.T) *zk.Conn {
	conn, _, err := zk.Connect(strings.Split(need(t, "FENCING_ZK"), ","), 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func redisPool(t *testing.T) *redis.Pool {
	addr := need(t, "FENCING_REDIS")
	p := &redis.Pool{Dial: func() (redis.Conn, error) { return redis.Dial("tcp", addr) }, MaxIdle: 4}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestLeaseTokensIncrease(t *testing.T) {
	pool := pgPool(t, 2)
	increasing(t, fencing.NewLeaseSource(pool, name("lease"), "me", 10*time.Second))
}

func TestStaticToken(t *testing.T) {
	increasing(t, &steps{})
}

type steps struct{ n int64 }

func (s *steps) Acquire(ctx context.Context) (fencing.Token, error) {
	s.n++
	return fencing.StaticSource{Token: fencing.Token{Counter: s.n}}.Acquire(ctx)
}
func (s *steps) Release(context.Context) error { return nil }

func TestEtcdTokensIncrease(t *testing.T) {
	pool := pgPool(t, 2)
	increasing(t, fencing.NewEtcdSource(etcdClient(t), pool, "/"+name("etcd"), 2))
}

func TestZooKeeperTokensIncrease(t *testing.T) {
	pool := pgPool(t, 2)
	increasing(t, fencing.NewZooKeeperSource(zkConn(t), pool, "/"+name("zk")))
}

func TestRedisTokensIncrease(t *testing.T) {
	pool := pgPool(t, 2)
	increasing(t, fencing.NewRedisSource(redisPool(t), name("redis"), 10*time.Second, pool))
}

// The generation table's generation is the token's epoch: a bump makes
// every later token beat every earlier one.
func TestGenerationBump(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	src := fencing.NewRedisSource(redisPool(t), name("redisgen"), 10*time.Second, pool)
	t1, err := src.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src.Release(ctx)
	if _, err := fencing.BumpGeneration(ctx, pool, "", src.Key); err != nil {
		t.Fatal(err)
	}
	// Redis forgets its counter (as after a restart without persistence)
	c := src.Pool.Get()
	c.Do("DEL", src.Key+":fence")
	c.Close()
	t2, err := src.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src.Release(ctx)
	if !t1.Less(t2) || t2.Epoch != 1 || t2.Counter != 1 {
		t.Fatalf("after the bump: %s, before: %s", t2, t1)
	}
}

// A Redis worker that did not get the lock gets no token, and the counter
// did not move.
func TestRedisNoTokenWhenHeld(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	rp := redisPool(t)
	key := name("redisheld")
	a := fencing.NewRedisSource(rp, key, 30*time.Second, pool)
	b := fencing.NewRedisSource(rp, key, 30*time.Second, pool)
	ta, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Acquire(ctx)
	if !errors.Is(err, fencing.ErrNotAcquired) || !tb.IsZero() {
		t.Fatalf("second holder got %s, %v", tb, err)
	}
	c := rp.Get()
	defer c.Close()
	n, err := redis.Int64(c.Do("GET", key+":fence"))
	if err != nil || n != ta.Counter {
		t.Fatalf("counter %d (%v), token %s", n, err, ta)
	}
	if err := b.Release(ctx); !errors.Is(err, fencing.ErrNotHeld) {
		t.Fatalf("release by a non-holder: %v", err)
	}
	// only the holder's value deletes the key
	c.Do("SET", key, "someone-else")
	if err := a.Release(ctx); !errors.Is(err, fencing.ErrNotHeld) {
		t.Fatalf("release of a key taken over: %v", err)
	}
	if v, _ := redis.String(c.Do("GET", key)); v != "someone-else" {
		t.Fatalf("the release deleted another holder's key (%q)", v)
	}
}

// ---- a holder paused past its TTL ----------------------------------------

// pause: worker A takes the lock and writes; frozen (SIGSTOP) it loses
// the lock; B takes it (waiting for A's lock to lapse) and writes; thawed,
// A writes with its old token and gets ErrStaleToken.
func pause(t *testing.T, args ...string) {
	pool := pgPool(t, 2)
	tbl := accounts(t, pool, "")
	args = append(args, "-table", tbl)
	a := startWorker(t, "A", args...)
	b := startWorker(t, "B", args...)
	ta := a.token("acquire")
	if ans := a.do("write a"); ans != "ok "+ta.String() {
		t.Fatalf("A's first write: %s", ans)
	}
	a.freeze()
	t0 := time.Now()
	tb := b.token("acquire")
	t.Logf("B got the lock %.2fs after A was frozen", time.Since(t0).Seconds())
	if !ta.Less(tb) {
		t.Fatalf("B's token %s is not above A's %s", tb, ta)
	}
	if ans := b.do("write a"); ans != "ok "+tb.String() {
		t.Fatalf("B's write: %s", ans)
	}
	a.thaw()
	if ans := a.do("write a"); ans != "refused stale_token" {
		t.Fatalf("A's write after the pause: %s", ans)
	}
	if bal, fence := row(t, pool, tbl); bal != 2 || fence != tb.String() {
		t.Fatalf("row: balance %d fence %s, want 2 and %s", bal, fence, tb)
	}
}

func TestPauseEtcd(t *testing.T) {
	pause(t, "-source", "etcd", "-etcd", need(t, "FENCING_ETCD"), "-lock", "/"+name("etcdpause"), "-ttl", "2s")
}

func TestPauseZooKeeper(t *testing.T) {
	pause(t, "-source", "zookeeper", "-zk", need(t, "FENCING_ZK"), "-lock", "/"+name("zkpause"), "-ttl", "1s")
}

func TestPauseRedis(t *testing.T) {
	pause(t, "-source", "redis", "-redis", need(t, "FENCING_REDIS"), "-lock", name("redispause"), "-ttl", "300ms")
}

func TestPauseLease(t *testing.T) {
	needPG(t)
	pause(t, "-source", "lease", "-lock", name("leasepause"), "-ttl", "300ms")
}

// ---- the other reasons -----------------------------------------------------

func TestTokenAlreadyUsed(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	tok := fencing.Token{Epoch: 0, Counter: 7}
	if err := fencing.RunFenced(ctx, pool, tok, update(tbl)); err != nil {
		t.Fatal(err)
	}
	err := fencing.RunFenced(ctx, pool, tok, update(tbl))
	var fo *fencing.FencedOutError
	if !errors.Is(err, fencing.ErrTokenAlreadyUsed) || !errors.As(err, &fo) || fo.Token != tok {
		t.Fatalf("the same token in a second transaction: %v", err)
	}
	// an older one is stale
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 6}, update(tbl)); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("an older token: %v", err)
	}
}

func TestLeaseExpired(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	lease := name("leaseexp")
	tbl := accounts(t, pool, fmt.Sprintf(", lease => '%s'", lease))
	src := fencing.NewLeaseSource(pool, lease, "me", 2*time.Second) // long enough for the first write on a loaded machine
	tok, err := src.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fencing.RunFenced(ctx, pool, tok, update(tbl)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lease to run out", 10, func() bool {
		var live bool
		pool.QueryRow(ctx, "SELECT fencing.lease_check($1, $2::text::fencing.fence)", lease, tok.String()).Scan(&live)
		return !live
	})
	if ok, err := src.Renew(ctx); ok || err != nil {
		t.Fatalf("renew after expiry: %v %v", ok, err)
	}
	err = fencing.RunFenced(ctx, pool, tok, update(tbl))
	if !errors.Is(err, fencing.ErrLeaseExpired) {
		t.Fatalf("write after the lease ran out: %v", err)
	}
}

func TestTokenRequired(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	_, err := pool.Exec(ctx, "UPDATE "+tbl+" SET balance = 0")
	if err = fencing.Classify(err, fencing.Token{}); !errors.Is(err, fencing.ErrTokenRequired) {
		t.Fatalf("a write without a token: %v", err)
	}
	err = fencing.RunFenced(ctx, pool, fencing.Token{Counter: 5}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "UPDATE "+tbl+" SET fence = '0:9' WHERE id = 'a'")
		return err
	})
	if !errors.Is(err, fencing.ErrTokenRequired) {
		t.Fatalf("two different tokens: %v", err)
	}
}

// Only 40001 and 40P01 are retried, and only with WithRetry; SF001 never.
func TestRetry(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	var calls int32
	flaky := func(code string, failures int32) func(pgx.Tx) error {
		atomic.StoreInt32(&calls, 0)
		return func(tx pgx.Tx) error {
			if atomic.AddInt32(&calls, 1) <= failures {
				return &pgconn.PgError{Code: code}
			}
			return update(tbl)(tx)
		}
	}
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 1}, flaky("40001", 2), fencing.WithRetry(3)); err != nil || calls != 3 {
		t.Fatalf("40001 twice, WithRetry(3): %v after %d calls", err, calls)
	}
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 2}, flaky("40P01", 1)); err == nil || calls != 1 {
		t.Fatalf("40P01 without WithRetry: %v after %d calls", err, calls)
	}
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 3}, flaky("40001", 5), fencing.WithRetry(2)); err == nil || calls != 3 {
		t.Fatalf("40001 five times, WithRetry(2): %v after %d calls", err, calls)
	}
	atomic.StoreInt32(&calls, 0)
	err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 0}, func(tx pgx.Tx) error {
		atomic.AddInt32(&calls, 1)
		return update(tbl)(tx)
	}, fencing.WithRetry(5))
	if !errors.Is(err, fencing.ErrStaleToken) || calls != 1 {
		t.Fatalf("SF001 with WithRetry(5): %v after %d calls", err, calls)
	}
}

// Savepoints inside a fenced transaction, and the separate-begin path.
func TestNestedAndSeparateBegin(t *testing.T) {
	pool := pgPool(t, 2)
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 1}, func(tx pgx.Tx) error {
		if err := update(tbl)(tx); err != nil {
			return err
		}
		sp, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		if err := update(tbl)(sp); err != nil {
			return err
		}
		return sp.Rollback(ctx)
	})
	if bal, fence := row(t, pool, tbl); err != nil || bal != 1 || fence != "0:1" {
		t.Fatalf("savepoint rolled back: %v, balance %d fence %s", err, bal, fence)
	}
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 2}, update(tbl), fencing.WithSeparateBegin()); err != nil {
		t.Fatal(err)
	}
	err = fencing.RunFenced(ctx, pool, fencing.Token{Counter: 1}, update(tbl), fencing.WithSeparateBegin())
	if !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("separate begin, stale: %v", err)
	}
}

// ---- no connection goes back to a pool with a token ------------------------

func noToken(t *testing.T, pool *pgxpool.Pool, when string) int32 {
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
	var pid int32
	c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid)
	return pid
}

func TestNoTokenLeaks(t *testing.T) {
	pool := pgPool(t, 1) // one connection: every run reuses it
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	pid := noToken(t, pool, "at first")
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 5}, update(tbl)); err != nil {
		t.Fatal(err)
	}
	same := noToken(t, pool, "after a run") == pid
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 4}, update(tbl)); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale run: %v", err)
	}
	same = noToken(t, pool, "after a refused run") == pid && same
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 6}, func(pgx.Tx) error { return errors.New("boom") }); err == nil {
		t.Fatal("fn's error lost")
	}
	same = noToken(t, pool, "after fn failed") == pid && same
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 9}, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "SELECT 1/0")
		return err
	}); err == nil {
		t.Fatal("division by zero lost")
	}
	same = noToken(t, pool, "after a failed statement") == pid && same
	// a token the server refuses at set_token (the pipeline's second half)
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Epoch: -1, Counter: 1}, update(tbl)); err == nil {
		t.Fatal("token -1:1 accepted")
	} else {
		t.Logf("token -1:1: %v", err)
	}
	same = noToken(t, pool, "after set_token failed") == pid && same
	if _, err := fencing.RunOnce(ctx, pool, name("leak"), 1, func(tx pgx.Tx) (int, error) { return 1, nil }, fencing.WithClaimFence()); err != nil {
		t.Fatal(err)
	}
	same = noToken(t, pool, "after RunOnce with its claim fence") == pid && same
	if !same {
		t.Fatal("the pool did not reuse its one connection")
	}
	// a tokenless write on that connection is refused: nothing lingers
	if _, err := pool.Exec(ctx, "UPDATE "+tbl+" SET balance = 0"); !errors.Is(fencing.Classify(err, fencing.Token{}), fencing.ErrTokenRequired) {
		t.Fatalf("a tokenless write after the runs: %v", err)
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
	if !errors.Is(err, fencing.ErrInProgress) {
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
	if !errors.Is(err, fencing.ErrInProgress) {
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
	pool, err := pgxpool.ConnectConfig(ctx, fencing.ForPgBouncer(cfg))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := int64(1); i <= 20; i++ {
		if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 10 * i}, update(tbl)); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 10*i - 1}, update(tbl)); !errors.Is(err, fencing.ErrStaleToken) {
			t.Fatalf("stale write %d: %v", i, err)
		}
		if tok, err := fencing.ConnToken(ctx, pool); err != nil || tok != "" {
			t.Fatalf("after write %d a statement through PgBouncer sees token %q (%v)", i, tok, err)
		}
	}
	if bal, fence := row(t, direct, tbl); bal != 20 || fence != "0:200" {
		t.Fatalf("balance %d fence %s", bal, fence)
	}
	// a new client of PgBouncer (the same server connection): no token
	ccfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ccfg.BuildStatementCache = nil // no named prepared statements through PgBouncer
	conn, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if tok, err := fencing.ConnToken(ctx, conn); err != nil || tok != "" {
		t.Fatalf("a new client sees token %q (%v)", tok, err)
	}
	if _, err := conn.Exec(ctx, "UPDATE "+tbl+" SET balance = 0", pgx.QuerySimpleProtocol(true)); !errors.Is(fencing.Classify(err, fencing.Token{}), fencing.ErrTokenRequired) {
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

// Without a statement cache (as behind PgBouncer) set_token goes unnamed.
func TestNoStatementCache(t *testing.T) {
	needPG(t)
	ctx := context.Background()
	direct := pgPool(t, 1)
	tbl := accounts(t, direct, "")
	cfg, err := pgxpool.ParseConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 1
	cfg.ConnConfig.BuildStatementCache = nil
	pool, err := pgxpool.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	for i := int64(1); i <= 3; i++ {
		if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: i}, update(tbl)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fencing.RunFenced(ctx, pool, fencing.Token{Counter: 2}, update(tbl)); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("stale: %v", err)
	}
	var prepared int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&prepared); err != nil || prepared != 0 {
		t.Fatalf("%d prepared statements (%v)", prepared, err)
	}
	noToken(t, pool, "without a statement cache")
}
