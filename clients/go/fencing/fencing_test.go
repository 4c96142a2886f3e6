package fencing_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
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

// TokenFromZxid computes what fencing.fence_from_zxid does in the server.
func TestTokenFromZxid(t *testing.T) {
	pool := pgPool(t, 2)
	for _, c := range []struct {
		zxid int64
		gen  int32
	}{{0x100000005, 0}, {0x7fffffff00000001, 3}, {42, 1}} {
		var want string
		if err := pool.QueryRow(context.Background(), "SELECT fencing.fence_from_zxid($1, $2)::text", c.zxid, c.gen).Scan(&want); err != nil {
			t.Fatal(err)
		}
		if got := fencing.TokenFromZxid(c.zxid, c.gen).String(); got != want {
			t.Errorf("TokenFromZxid(%#x, %d) = %s, the server says %s", c.zxid, c.gen, got, want)
		}
	}
}

// Every SQLSTATE of the extension, and every SF001 reason (from the
// constraint name; none gives stale_token), classify as the vocabulary
// says, and stay catchable as pgx's *pgconn.PgError.
func TestClassify(t *testing.T) {
	reasons := map[string]error{
		"stale_token": fencing.ErrStaleToken, "token_already_used": fencing.ErrTokenAlreadyUsed,
		"lease_expired": fencing.ErrLeaseExpired, "claim_taken_over": fencing.ErrClaimTakenOver,
		"": fencing.ErrStaleToken,
	}
	for reason, want := range reasons {
		err := fencing.Classify(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "SF001", ConstraintName: reason}), fencing.Token{Counter: 1})
		var fo *fencing.FencedOutError
		var pgErr *pgconn.PgError
		if !errors.As(err, &fo) || !errors.Is(err, want) || !errors.Is(err, fencing.ErrFencedOut) ||
			!errors.Is(err, fencing.ErrFencing) || !errors.As(err, &pgErr) || pgErr.Code != "SF001" {
			t.Errorf("reason %q: %v", reason, err)
		}
	}
	codes := map[string]error{"SF002": fencing.ErrTokenRequired, "SF003": fencing.ErrKeyReused,
		"SF004": fencing.ErrKeyInProgress, "SF005": fencing.ErrGuardAltered}
	for code, want := range codes {
		err := fencing.Classify(&pgconn.PgError{Code: code}, fencing.Token{})
		var pgErr *pgconn.PgError
		if !errors.Is(err, want) || !errors.Is(err, fencing.ErrFencing) || errors.Is(err, fencing.ErrFencedOut) ||
			!errors.As(err, &pgErr) || pgErr.Code != code {
			t.Errorf("%s: %v", code, err)
		}
	}
	if err := fencing.Classify(&pgconn.PgError{Code: "40001"}, fencing.Token{}); errors.Is(err, fencing.ErrFencing) {
		t.Errorf("40001 classified as fencing's: %v", err)
	}
}

func update(tbl, id string) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		_, err := tx.Exec(context.Background(), "UPDATE "+tbl+" SET balance = balance + 1 WHERE id = $1", id)
		return err
	}
}

// ---- the sources ---------------------------------------------------------

type newSource func(t *testing.T, pool *pgxpool.Pool, lock string, ttl time.Duration, opts ...fencing.SourceOption) fencing.TokenSource

func etcdClient(t *testing.T) *clientv3.Client {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{need(t, "FENCING_ETCD")}, DialTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func redisClient(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: need(t, "FENCING_REDIS")})
	t.Cleanup(func() { c.Close() })
	return c
}

var sources = map[string]newSource{
	"lease": func(t *testing.T, pool *pgxpool.Pool, lock string, ttl time.Duration, opts ...fencing.SourceOption) fencing.TokenSource {
		return fencing.NewLeaseSource(pool, lock, ttl, opts...)
	},
	"etcd": func(t *testing.T, pool *pgxpool.Pool, lock string, ttl time.Duration, opts ...fencing.SourceOption) fencing.TokenSource {
		return fencing.NewEtcdSource(pool, etcdClient(t), "/"+lock, ttl, opts...)
	},
	"zookeeper": func(t *testing.T, pool *pgxpool.Pool, lock string, ttl time.Duration, opts ...fencing.SourceOption) fencing.TokenSource {
		return fencing.NewZooKeeperSource(pool, strings.Split(need(t, "FENCING_ZK"), ","), "/"+lock, ttl, opts...)
	},
	"redis": func(t *testing.T, pool *pgxpool.Pool, lock string, ttl time.Duration, opts ...fencing.SourceOption) fencing.TokenSource {
		return fencing.NewRedisSource(pool, redisClient(t), lock, ttl, opts...)
	},
}

var sourceNames = []string{"lease", "etcd", "zookeeper", "redis"}

func eachSource(t *testing.T, f func(t *testing.T, name string, mk newSource)) {
	for _, n := range sourceNames {
		t.Run(n, func(t *testing.T) { f(t, n, sources[n]) })
	}
}

// Tokens grow: each NextToken above the last, each grant above the last
// grant's tokens; Release then Lost closed.
func TestSourceTokens(t *testing.T) {
	eachSource(t, func(t *testing.T, n string, mk newSource) {
		pool := pgPool(t, 4)
		ctx := context.Background()
		src := mk(t, pool, name(n), 10*time.Second)
		var last fencing.Token
		for g := 0; g < 2; g++ {
			tok, err := src.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if g > 0 && !last.Less(tok) {
				t.Fatalf("grant %d: %s after %s", g+1, tok, last)
			}
			last = tok
			for i := 0; i < 3; i++ {
				next, err := src.NextToken(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !last.Less(next) {
					t.Fatalf("NextToken %s after %s", next, last)
				}
				last = next
			}
			lost := src.Lost()
			if err := src.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case <-lost:
			default:
				t.Fatal("Lost() not closed by Release")
			}
			if _, err := src.NextToken(ctx); !errors.Is(err, fencing.ErrLockLost) {
				t.Fatalf("NextToken after Release: %v", err)
			}
		}
	})
}

// TryAcquire gives up at once while another holder has the lock; Acquire
// gives up when the context ends (ErrNotAcquired, also the context's
// error), and takes the lock once the other releases it.
func TestTryAcquireAndTimeout(t *testing.T) {
	eachSource(t, func(t *testing.T, n string, mk newSource) {
		pool := pgPool(t, 4)
		ctx := context.Background()
		lock := name(n)
		a, b := mk(t, pool, lock, 10*time.Second), mk(t, pool, lock, 10*time.Second)
		ta, err := a.TryAcquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tok, err := b.TryAcquire(ctx); !errors.Is(err, fencing.ErrNotAcquired) || !tok.IsZero() {
			t.Fatalf("TryAcquire while held: %s %v", tok, err)
		}
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		t0 := time.Now()
		_, err = b.Acquire(tctx)
		cancel()
		if !errors.Is(err, fencing.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire past its deadline: %v", err)
		}
		t.Logf("Acquire gave up after %s: %v", time.Since(t0).Round(time.Millisecond), err)
		got := make(chan error, 1)
		var tb fencing.Token
		go func() {
			var err error
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			tb, err = b.Acquire(wctx)
			got <- err
		}()
		time.Sleep(100 * time.Millisecond)
		if err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil || !ta.Less(tb) {
			t.Fatalf("Acquire after the release: %s %v (first holder %s)", tb, err, ta)
		}
		b.Release(ctx)
	})
}

// One grant, many transactions: 100 fenced transactions under one lock on
// a strict table, none refused, each with a new token; the fence is the
// last one.  Then a bare token (StaticToken) in a second transaction is
// token_already_used.
func TestManyTransactionsOneLock(t *testing.T) {
	eachSource(t, func(t *testing.T, n string, mk newSource) {
		pool := pgPool(t, 4)
		ctx := context.Background()
		tbl := accounts(t, pool, "")
		src := mk(t, pool, name(n), 10*time.Second)
		if _, err := src.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		defer src.Release(ctx)
		refused := 0
		var last fencing.Token
		for i := 0; i < 100; i++ {
			err := fencing.RunFenced(ctx, pool, src, func(tx pgx.Tx) error {
				var s string
				if err := tx.QueryRow(ctx, "SELECT current_setting('fencing.token')").Scan(&s); err != nil {
					return err
				}
				tok, _ := fencing.ParseToken(s)
				if !last.Less(tok) {
					return fmt.Errorf("transaction %d: token %s after %s", i, tok, last)
				}
				last = tok
				return update(tbl, "a")(tx)
			})
			if err != nil {
				refused++
				t.Errorf("transaction %d: %v", i, err)
			}
		}
		bal, fence := row(t, pool, tbl)
		t.Logf("%s: 100 transactions under one lock, %d refused; balance %d, fence %s", n, refused, bal, fence)
		if refused != 0 || bal != 100 || fence != last.String() {
			t.Fatalf("balance %d fence %s, want 100 and %s", bal, fence, last)
		}
		static := fencing.StaticToken{Token: last}
		if err := fencing.RunFenced(ctx, pool, static, update(tbl, "a")); !errors.Is(err, fencing.ErrTokenAlreadyUsed) {
			t.Fatalf("the last token again, bare: %v", err)
		}
	})
}

// A lock lost while held closes Lost and makes NextToken fail: Redis (its
// key deleted), etcd (its session's lease revoked), ZooKeeper (its node
// deleted), the lease (taken over after it ran out).
func TestLostSignal(t *testing.T) {
	eachSource(t, func(t *testing.T, n string, mk newSource) {
		pool := pgPool(t, 4)
		ctx := context.Background()
		lock := name(n)
		ttl := 3 * time.Second
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf}, nil))
		src := mk(t, pool, lock, ttl, fencing.WithSourceLogger(logger))
		if _, err := src.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
		switch n {
		case "redis":
			redisClient(t).Del(ctx, "lock:{"+lock+"}")
		case "etcd":
			cli := etcdClient(t)
			resp, err := cli.Get(ctx, "/"+lock, clientv3.WithPrefix())
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("etcd keys: %v %v", resp, err)
			}
			if _, err := cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
				t.Fatal(err)
			}
		case "zookeeper":
			if _, err := pool.Exec(ctx, "SELECT 1"); err != nil {
				t.Fatal(err)
			}
			zkDeleteChildren(t, "/"+lock)
		case "lease":
			if _, err := pool.Exec(ctx, "UPDATE fencing.leases SET expires_at = clock_timestamp() WHERE name = $1", lock); err != nil {
				t.Fatal(err)
			}
			other := fencing.NewLeaseSource(pool, lock, ttl, fencing.WithHolder("other"))
			if _, err := other.TryAcquire(ctx); err != nil {
				t.Fatal(err)
			}
			defer other.Release(ctx)
		}
		select {
		case <-src.Lost():
		case <-time.After(2 * ttl):
			t.Fatalf("Lost() not closed %s after the loss", 2*ttl)
		}
		if _, err := src.NextToken(ctx); !errors.Is(err, fencing.ErrLockLost) {
			t.Fatalf("NextToken after the loss: %v", err)
		}
		if err := src.Release(ctx); !errors.Is(err, fencing.ErrLockLost) {
			t.Fatalf("Release after the loss: %v", err)
		}
		if !strings.Contains(buf.String(), "lock lost") {
			t.Fatalf("the loss was not logged: %q", buf.String())
		}
	})
}

// ---- a holder frozen past its TTL ----------------------------------------

func workerArgs(t *testing.T, n, lock, ttl string) []string {
	switch n {
	case "etcd":
		return []string{"-source", n, "-etcd", need(t, "FENCING_ETCD"), "-lock", "/" + lock, "-ttl", ttl}
	case "zookeeper":
		return []string{"-source", n, "-zk", need(t, "FENCING_ZK"), "-lock", "/" + lock, "-ttl", ttl}
	case "redis":
		return []string{"-source", n, "-redis", need(t, "FENCING_REDIS"), "-lock", lock, "-ttl", ttl}
	}
	return []string{"-source", n, "-lock", lock, "-ttl", ttl}
}

var pauseTTL = map[string]string{"lease": "500ms", "etcd": "2s", "zookeeper": "2s", "redis": "500ms"}

// A takes the lock and writes; frozen (SIGSTOP) inside its next
// transaction, after its token was bound, past the TTL; B takes the lock
// and writes; thawed, A's UPDATE is refused (stale_token), its Lost
// channel closes, its next transaction gets no token (ErrLockLost) and a
// write with its last token is refused.  (The lease: A is frozen between
// transactions, because a transaction of a lease holder keeps the lease's
// row locked until it ends.)
func TestPause(t *testing.T) {
	eachSource(t, func(t *testing.T, n string, _ newSource) {
		pool := pgPool(t, 2)
		tbl := accounts(t, pool, "")
		args := append(workerArgs(t, n, name(n+"pause"), pauseTTL[n]), "-table", tbl)
		a := startWorker(t, "A", args...)
		b := startWorker(t, "B", args...)
		a.token("acquire")
		if ans := a.do("write a"); !strings.HasPrefix(ans, "ok ") {
			t.Fatalf("A's first write: %s", ans)
		}
		inTx := n != "lease"
		if inTx {
			if ans := a.do("hold a"); !strings.HasPrefix(ans, "in ") {
				t.Fatalf("A's hold: %s", ans)
			}
		}
		a.freeze()
		t0 := time.Now()
		tb := b.token("acquire")
		t.Logf("B got the lock %.2fs after A was frozen (token %s)", time.Since(t0).Seconds(), tb)
		if ans := b.do("write a"); !strings.HasPrefix(ans, "ok ") {
			t.Fatalf("B's write: %s", ans)
		}
		a.thaw()
		if inTx {
			if ans := a.do("go"); ans != "refused stale_token" {
				t.Fatalf("A's UPDATE after the pause: %s", ans)
			}
		}
		waitFor(t, "A's Lost channel", 10, func() bool { return a.do("status") == "lost" })
		if ans := a.do("write a"); ans != "lost" {
			t.Fatalf("A's next transaction: %s", ans)
		}
		if ans := a.do("writeold a"); ans != "refused stale_token" {
			t.Fatalf("A's write with its last token: %s", ans)
		}
		if bal, _ := row(t, pool, tbl); bal != 2 {
			t.Fatalf("balance %d, want 2 (A's first write and B's)", bal)
		}
	})
}

// The first meter: B raises the fence of the key it will write when it
// takes the lock (WithFences), so A, frozen with a token bound before B
// took the lock, is refused although B has not written yet.
func TestFirstMeter(t *testing.T) {
	eachSource(t, func(t *testing.T, n string, _ newSource) {
		pool := pgPool(t, 2)
		ctx := context.Background()
		tbl := accounts(t, pool, ", key_columns => '{id}'")
		args := append(workerArgs(t, n, name(n+"meter"), pauseTTL[n]), "-table", tbl, "-fence", tbl+":a")
		a := startWorker(t, "A", args...)
		b := startWorker(t, "B", args...)
		a.token("acquire")
		inTx := n != "lease"
		if inTx {
			if ans := a.do("hold a"); !strings.HasPrefix(ans, "in ") {
				t.Fatalf("A's hold: %s", ans)
			}
		} else if ans := a.do("write b"); !strings.HasPrefix(ans, "ok ") {
			t.Fatalf("A's write: %s", ans)
		}
		a.freeze()
		tb := b.token("acquire") // raises the fence of key a, writes nothing
		var fence string
		if err := pool.QueryRow(ctx, `SELECT fence::text FROM fencing.scopes WHERE scope_name = 'public.' || $1 AND key = '["a"]'`, tbl).Scan(&fence); err != nil {
			t.Fatalf("reading the key's fence: %v", err)
		}
		if fence != tb.String() {
			t.Fatalf("the fence of key a is %s, B's grant %s", fence, tb)
		}
		t.Logf("B took the lock with %s, the fence of key a: %s", tb, fence)
		a.thaw()
		ans := ""
		if inTx {
			ans = a.do("go")
		} else {
			ans = a.do("writeold a")
		}
		if ans != "refused stale_token" {
			t.Fatalf("A's write to key a before B's first write: %s", ans)
		}
	})
}
