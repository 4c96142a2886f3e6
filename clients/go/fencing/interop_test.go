package fencing_test

// The sources take the same locks as every other client of the lock
// services, and their tokens share one fence with them.  For each
// service, a reference holder written from docs/lock-services.md, not
// from this library:
//
//   - etcd: `etcdctl lock NAME` (etcd's own mutex); its numbers are the
//     header revisions of a transaction that puts its own key while the
//     key's create revision is still its own;
//   - ZooKeeper: the docs' recipe with kazoo (its Lock with the common node
//     names, <id>-lock-NNNNNNNNNN), the locksvc suite's worker
//     (FENCING_ZK_REFERENCE, the command that runs it); its numbers the
//     mzxid of a setData on its node, its tokens fencing.fence_from_zxid;
//   - Redis: the docs' three scripts on lock:{NAME} and fence:{NAME}.
//
// The source and the reference holder exclude each other both ways, and
// one row's fence takes the tokens of both in lock order: the reference
// holder's token after the source's grant beats the source's older token,
// and the source's token after the reference holder's grant beats the
// reference holder's older one.

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// reference is a holder of the docs' protocol, not of this library.
type reference interface {
	// start begins taking the lock (it waits while another holds it)
	start(t *testing.T)
	// locked waits up to d for the lock: whether it holds it
	locked(t *testing.T, d time.Duration) bool
	// next is a new token (E:C) of the lock held
	next(t *testing.T) string
	release(t *testing.T)
}

// generationOf reads a service's generation as a holder does, right after
// it took the lock.
func generationOf(t *testing.T, pool *pgxpool.Pool, service string) int64 {
	t.Helper()
	var g int64
	if err := pool.QueryRow(context.Background(),
		"SELECT generation FROM fencing_lock_generations WHERE service = $1", service).Scan(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

// byHand is a fenced transaction as the docs write one: BEGIN, set_token
// with the token bound, the UPDATE, COMMIT; "" or the SF001 reason.
func byHand(t *testing.T, pool *pgxpool.Pool, tbl, token string) string {
	t.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT fencing.set_token($1)", token); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE "+tbl+" SET balance = balance + 1 WHERE id = 'a'")
		return err
	})
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &pgErr) && pgErr.Code == "SF001":
		return pgErr.ConstraintName
	}
	t.Fatalf("the reference holder's write with %s: %v", token, err)
	return ""
}

func mustParse(t *testing.T, s string) fencing.Token {
	t.Helper()
	tok, err := fencing.ParseToken(s)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// interop: the source and ref on one lock, one row's fence.  holds, when
// not nil, checks what the source has in the lock service (its key or
// node): right after its grant, and while it waits behind ref.
func interop(t *testing.T, pool *pgxpool.Pool, src fencing.TokenSource, ref reference, holds func(waiting bool, grant fencing.Token)) {
	ctx := context.Background()
	tbl := accounts(t, pool, "")
	write := func(s fencing.TokenSource) error { return fencing.RunFenced(ctx, pool, s, update(tbl, "a")) }

	// the source holds; the reference holder waits
	grant, err := src.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if holds != nil {
		holds(false, grant)
	}
	if err := write(src); err != nil {
		t.Fatalf("the source's write: %v", err)
	}
	ref.start(t)
	if ref.locked(t, 1500*time.Millisecond) {
		t.Fatal("the reference holder took the lock the source holds")
	}
	inHand, err := src.NextToken(ctx) // taken, never written: as a holder that froze
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Release(ctx); err != nil {
		t.Fatal(err)
	}

	// the reference holder holds; the source waits
	if !ref.locked(t, 30*time.Second) {
		t.Fatal("the reference holder did not get the lock the source released")
	}
	r1 := ref.next(t)
	if reason := byHand(t, pool, tbl, r1); reason != "" {
		t.Fatalf("the reference holder's write with %s: refused, %s", r1, reason)
	}
	if !inHand.Less(mustParse(t, r1)) {
		t.Fatalf("the reference holder's token %s is not above the source's %s (grant %s)", r1, inHand, grant)
	}
	if err := write(fencing.StaticToken{Token: inHand}); !errors.Is(err, fencing.ErrStaleToken) {
		t.Fatalf("the source's older token %s after the reference holder's %s: %v", inHand, r1, err)
	}
	if _, err := src.TryAcquire(ctx); !errors.Is(err, fencing.ErrNotAcquired) {
		t.Fatalf("TryAcquire while the reference holder holds the lock: %v", err)
	}
	type result struct {
		tok fencing.Token
		err error
	}
	got := make(chan result, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		tok, err := src.Acquire(actx)
		got <- result{tok, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("Acquire while the reference holder holds the lock: %s %v", r.tok, r.err)
	case <-time.After(time.Second):
	}
	if holds != nil {
		holds(true, grant)
	}
	rInHand := ref.next(t)
	ref.release(t)

	// the source holds again, after the reference holder
	r := <-got
	if r.err != nil {
		t.Fatalf("Acquire after the reference holder released: %v", r.err)
	}
	defer src.Release(ctx)
	var last fencing.Token
	if err := fencing.RunFenced(ctx, pool, src, func(tx pgx.Tx) error {
		var s string
		if err := tx.QueryRow(ctx, "SELECT current_setting('fencing.token')").Scan(&s); err != nil {
			return err
		}
		last = mustParse(t, s)
		return update(tbl, "a")(tx)
	}); err != nil {
		t.Fatalf("the source's write after the reference holder: %v", err)
	}
	if !mustParse(t, rInHand).Less(r.tok) {
		t.Fatalf("the source's grant %s is not above the reference holder's token %s", r.tok, rInHand)
	}
	if reason := byHand(t, pool, tbl, rInHand); reason != "stale_token" {
		t.Fatalf("the reference holder's older token %s after the source's %s: %q, want stale_token", rInHand, last, reason)
	}
	bal, fence := row(t, pool, tbl)
	t.Logf("tokens on one fence: source %s (in hand %s), reference %s (in hand %s), source %s; fence %s, balance %d",
		grant, inHand, r1, rInHand, last, fence, bal)
	if bal != 3 || fence != last.String() {
		t.Fatalf("balance %d, fence %s: want 3 and %s", bal, fence, last)
	}
}

// ---- etcd: `etcdctl lock NAME` --------------------------------------------

type etcdctlHolder struct {
	pool *pgxpool.Pool
	cli  *clientv3.Client
	url  string
	name string

	cmd   *exec.Cmd
	lines chan string
	key   string
	rev   int64 // the key's create revision
	gen   int64
}

func (h *etcdctlHolder) start(t *testing.T) {
	h.cmd = exec.Command("etcdctl", "--endpoints="+h.url, "lock", h.name)
	h.cmd.Env = append(os.Environ(), "ETCDCTL_API=3")
	h.cmd.Stderr = os.Stderr
	out, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("etcdctl lock: %v", err)
	}
	h.lines = make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
	}()
	t.Cleanup(func() {
		h.cmd.Process.Signal(syscall.SIGTERM)
		h.cmd.Wait()
	})
}

// locked: etcdctl prints its key (NAME/<lease id in hex>) once it holds
func (h *etcdctlHolder) locked(t *testing.T, d time.Duration) bool {
	if h.key != "" {
		return true
	}
	select {
	case l, ok := <-h.lines:
		if !ok {
			t.Fatal("etcdctl lock ended")
		}
		h.key = strings.TrimSpace(l)
	case <-time.After(d):
		return false
	}
	ctx := context.Background()
	resp, err := h.cli.Get(ctx, h.key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("etcdctl's key %q: %v %v", h.key, resp, err)
	}
	if want := fmt.Sprintf("%s/%x", h.name, resp.Kvs[0].Lease); h.key != want {
		t.Fatalf("etcdctl's key %s, want %s (NAME/<lease id in hex>)", h.key, want)
	}
	h.rev = resp.Kvs[0].CreateRevision
	h.gen = generationOf(t, h.pool, "etcd")
	return true
}

// next: put the holder's own key while its create revision is still ours
func (h *etcdctlHolder) next(t *testing.T) string {
	resp, err := h.cli.Txn(context.Background()).
		If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev)).
		Then(clientv3.OpPut(h.key, "", clientv3.WithIgnoreLease())).Commit()
	if err != nil || !resp.Succeeded {
		t.Fatalf("etcdctl's lock %s: the put failed: %v", h.key, err)
	}
	return fmt.Sprintf("%d:%d", h.gen, resp.Header.Revision)
}

// release: etcdctl unlocks on SIGTERM
func (h *etcdctlHolder) release(t *testing.T) {
	h.cmd.Process.Signal(syscall.SIGTERM)
	h.cmd.Wait()
}

func TestInteropEtcd(t *testing.T) {
	pool := pgPool(t, 4)
	ensureGenerationRows(t, pool)
	cli := etcdClient(t)
	lock := "/" + name("interop")
	src := fencing.NewEtcdSource(pool, cli, lock, 10*time.Second)
	ref := &etcdctlHolder{pool: pool, cli: cli, url: need(t, "FENCING_ETCD"), name: lock}
	keyRe := regexp.MustCompile("^" + regexp.QuoteMeta(lock) + "/[0-9a-f]+$")
	interop(t, pool, src, ref, func(waiting bool, _ fencing.Token) {
		// the source's key: NAME/<its lease id in hex>, as etcdctl's
		want := 1
		if waiting {
			want = 2 // etcdctl's key, then the source's
		}
		var resp *clientv3.GetResponse
		waitFor(t, fmt.Sprintf("%d keys under %s/", want, lock), 10, func() bool {
			var err error
			resp, err = cli.Get(context.Background(), lock+"/", clientv3.WithPrefix(),
				clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
			if err != nil {
				t.Fatal(err)
			}
			return len(resp.Kvs) == want
		})
		kv := resp.Kvs[want-1]
		if k := string(kv.Key); !keyRe.MatchString(k) || k != fmt.Sprintf("%s/%x", lock, kv.Lease) {
			t.Fatalf("the source's key %s (lease %x): not NAME/<lease id in hex>", k, kv.Lease)
		}
	})
}

// ---- ZooKeeper: the docs' kazoo recipe --------------------------------------

// zkHolder runs the locksvc suite's worker (kazoo's Lock with the common
// node names): it takes the lock when it starts, says "locked {json}",
// then "next" gives "ok {json}" with a token, "unlock" gives it up.
type zkHolder struct {
	servers, path string

	w    *worker
	node string
}

func (h *zkHolder) start(t *testing.T) {
	words := strings.Fields(need(t, "FENCING_ZK_REFERENCE"))
	cmd := exec.Command(words[0], append(words[1:], "zookeeper", "--who", "R", "--dsn", "",
		"--zk", h.servers, "--lock", h.path, "--session-timeout", "10")...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.w = &worker{t: t, name: "R (kazoo)", cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.w.lines <- sc.Text()
		}
		close(h.w.lines)
	}()
	t.Cleanup(func() {
		in.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
}

// answer splits "word {json}".
func answer(t *testing.T, line string) (string, map[string]any) {
	t.Helper()
	word, js, _ := strings.Cut(line, " ")
	m := map[string]any{}
	if js != "" {
		if err := json.Unmarshal([]byte(js), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
	return word, m
}

func (h *zkHolder) locked(t *testing.T, d time.Duration) bool {
	if h.node != "" {
		return true
	}
	select {
	case l, ok := <-h.w.lines:
		if !ok {
			t.Fatal("the kazoo holder ended")
		}
		word, m := answer(t, l)
		if word != "locked" {
			t.Fatalf("the kazoo holder: %s", l)
		}
		h.node, _ = m["lock"].(string)
		t.Logf("the kazoo holder: %s", l)
		return true
	case <-time.After(d):
		return false
	}
}

func (h *zkHolder) next(t *testing.T) string {
	word, m := answer(t, h.w.do("next"))
	tok, _ := m["token"].(string)
	if word != "ok" || tok == "" {
		t.Fatalf("the kazoo holder's next token: %s %v", word, m)
	}
	return tok
}

func (h *zkHolder) release(t *testing.T) {
	if word, _ := answer(t, h.w.do("unlock")); word != "unlocked" {
		t.Fatalf("the kazoo holder's unlock: %s", word)
	}
}

func TestInteropZooKeeper(t *testing.T) {
	pool := pgPool(t, 4)
	ensureGenerationRows(t, pool)
	servers := need(t, "FENCING_ZK")
	path := "/" + name("interop")
	src := fencing.NewZooKeeperSource(pool, strings.Split(servers, ","), path, 10*time.Second)
	ref := &zkHolder{servers: servers, path: path}
	conn, _, err := zk.Connect(strings.Split(servers, ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	children := func() []string {
		c, _, err := conn.Children(path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ours := regexp.MustCompile(`^_c_[0-9a-f]{32}-lock-\d{10}$`) // Go's zk (Curator's protected names)
	kazoos := regexp.MustCompile(`^[0-9a-f]{32}-lock-\d{10}$`)  // kazoo's Lock with the common names
	interop(t, pool, src, ref, func(waiting bool, _ fencing.Token) {
		c := children()
		if waiting {
			waitFor(t, "the source's node behind the kazoo holder's", 10, func() bool { c = children(); return len(c) == 2 })
		}
		if !waiting {
			if len(c) != 1 || !ours.MatchString(c[0]) {
				t.Fatalf("the source holds with the nodes %v: want one _c_<id>-lock-NNNNNNNNNN", c)
			}
			return
		}
		// the kazoo holder's node first, the source's behind it
		if len(c) != 2 {
			t.Fatalf("nodes %v: want the kazoo holder's and the source's", c)
		}
		seq := func(n string) string { return n[len(n)-10:] }
		k, o := c[0], c[1]
		if ours.MatchString(k) {
			k, o = o, k
		}
		if !kazoos.MatchString(k) || !ours.MatchString(o) || seq(k) >= seq(o) || path+"/"+k != ref.node {
			t.Fatalf("nodes %v (the kazoo holder's %s): want <id>-lock-N of the kazoo holder before _c_<id>-lock-M of the source", c, ref.node)
		}
	})
}

// A node named as Curator names its own (_c_<uuid>-lock-NNNNNNNNNN, the
// uuid with its dashes) is a contender like any other: the source waits
// behind a lower one and holds while a higher one waits.  A node that is
// no contender (kazoo's own names, <id>__lock__NNNNNNNNNN: no "lock-"
// before the sequence) holds nothing up, lowest as it is.
func TestZooKeeperCuratorNames(t *testing.T) {
	pool := pgPool(t, 4)
	ensureGenerationRows(t, pool)
	servers := need(t, "FENCING_ZK")
	path := "/" + name("curatornames")
	ctx := context.Background()
	conn, _, err := zk.Connect(strings.Split(servers, ","), 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	acl := zk.WorldACL(zk.PermAll)
	if _, err := conn.Create(path, nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	// kazoo's own names: no contender of the common recipe, though the
	// lowest sequence here
	other, err := conn.Create(path+"/"+randomHex(16)+"__lock__", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
	if err != nil {
		t.Fatal(err)
	}
	curator := func() string {
		b := randomHex(16)
		uuid := b[:8] + "-" + b[8:12] + "-" + b[12:16] + "-" + b[16:20] + "-" + b[20:]
		n, err := conn.Create(path+"/_c_"+uuid+"-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, acl)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := curator()
	src := fencing.NewZooKeeperSource(pool, strings.Split(servers, ","), path, 10*time.Second)
	if _, err := src.TryAcquire(ctx); !errors.Is(err, fencing.ErrNotAcquired) {
		t.Fatalf("TryAcquire behind Curator's node %s: %v", first, err)
	}
	var wg sync.WaitGroup
	var tok fencing.Token
	wg.Add(1)
	go func() {
		defer wg.Done()
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		tok, err = src.Acquire(actx)
	}()
	time.Sleep(500 * time.Millisecond)
	if err := conn.Delete(first, -1); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err != nil {
		t.Fatalf("Acquire once Curator's node %s was gone: %v", first, err)
	}
	second := curator()
	if seq, _ := strconv.Atoi(second[len(second)-10:]); seq < 2 {
		t.Fatalf("Curator's second node %s", second)
	}
	next, err := src.NextToken(ctx)
	if err != nil || !tok.Less(next) {
		t.Fatalf("the source's NextToken with Curator's %s behind it: %s %v", second, next, err)
	}
	if err := src.Release(ctx); err != nil {
		t.Fatal(err)
	}
	conn.Delete(second, -1)
	conn.Delete(other, -1)
}

// ---- Redis: the docs' scripts ---------------------------------------------

// The scripts of docs/lock-services.md, as written there.
var (
	docsAcquire = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
end
return nil
`)
	docsNext = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return redis.call('INCR', KEYS[2])
end
return nil
`)
	docsRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
`)
)

type redisHolder struct {
	pool *pgxpool.Pool
	rc   *redis.Client
	name string

	me      string
	got     chan struct{}
	stop    chan struct{}
	gen     int64
	holding bool
}

func (h *redisHolder) keys() []string {
	return []string{"lock:{" + h.name + "}", "fence:{" + h.name + "}"}
}

func (h *redisHolder) start(t *testing.T) {
	h.me = fmt.Sprintf("reference-%d", time.Now().UnixNano())
	h.got, h.stop = make(chan struct{}), make(chan struct{})
	go func() {
		for {
			_, err := docsAcquire.Run(context.Background(), h.rc, h.keys(), h.me, 10000).Int64()
			if err == nil {
				close(h.got)
				return
			}
			select {
			case <-h.stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-h.stop:
		default:
			close(h.stop)
		}
	})
}

func (h *redisHolder) locked(t *testing.T, d time.Duration) bool {
	select {
	case <-h.got:
		if !h.holding {
			h.holding, h.gen = true, generationOf(t, h.pool, "redis")
		}
		return true
	case <-time.After(d):
		return false
	}
}

func (h *redisHolder) next(t *testing.T) string {
	n, err := docsNext.Run(context.Background(), h.rc, h.keys(), h.me, 10000).Int64()
	if err != nil {
		t.Fatalf("the docs' NEXT script: %v", err)
	}
	return fmt.Sprintf("%d:%d", h.gen, n)
}

func (h *redisHolder) release(t *testing.T) {
	if n, err := docsRelease.Run(context.Background(), h.rc, h.keys()[:1], h.me).Int64(); err != nil || n != 1 {
		t.Fatalf("the docs' RELEASE script: %d %v", n, err)
	}
}

func TestInteropRedis(t *testing.T) {
	pool := pgPool(t, 4)
	ensureGenerationRows(t, pool)
	rc := redisClient(t)
	lock := name("interop")
	src := fencing.NewRedisSource(pool, rc, lock, 10*time.Second)
	ref := &redisHolder{pool: pool, rc: rc, name: lock}
	interop(t, pool, src, ref, func(waiting bool, grant fencing.Token) {
		if waiting {
			return
		}
		// the source's lock: lock:{NAME} holds its id, fence:{NAME} counts
		// the grants and tokens (the grant's counter is the counter's value)
		ctx := context.Background()
		if n, err := rc.Exists(ctx, "lock:{"+lock+"}").Result(); err != nil || n != 1 {
			t.Fatalf("lock:{%s} while the source holds it: %d %v", lock, n, err)
		}
		if n, err := rc.Get(ctx, "fence:{"+lock+"}").Int64(); err != nil || n != grant.Counter {
			t.Fatalf("fence:{%s}: %d %v, the grant %s", lock, n, err, grant)
		}
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// ensureGenerationRows: the rows a reference holder reads (the library
// reads 0 when one is missing; the docs' holders expect them).
func ensureGenerationRows(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), "INSERT INTO fencing_lock_generations VALUES ('etcd', 0), ('zookeeper', 0), ('redis', 0) ON CONFLICT (service) DO NOTHING"); err != nil {
		t.Fatal(err)
	}
}
