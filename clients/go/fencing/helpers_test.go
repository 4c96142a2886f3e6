package fencing_test

// Integration tests: PostgreSQL from the libpq environment (PGHOST,
// PGPORT, PGUSER, PGDATABASE; the role must be a superuser), the lock
// services from FENCING_ETCD (client URL), FENCING_ZK (host:port,...),
// FENCING_REDIS (host:port), FENCING_PGBOUNCER (a connection string
// through PgBouncer in transaction mode), FENCING_ZK_REFERENCE (the
// command of the ZooKeeper interop test's reference holder: python3 and
// the locksvc suite's worker.py, kazoo with the docs' node names).  A
// test whose service is not given is skipped, unless FENCING_GO_STRICT=1
// (as the suite sets it): then it fails.  FENCING_WORKER_BIN is the worker binary
// (internal/testworker; built into a temporary directory when not given).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	fencing "github.com/fencing-pg/fencing/clients/go/fencing"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	"github.com/jackc/pgx/v5/pgxpool"
)

var workerBin string

func TestMain(m *testing.M) {
	workerBin = os.Getenv("FENCING_WORKER_BIN")
	var tmp string
	if workerBin == "" {
		tmp, _ = os.MkdirTemp("", "fencing-worker")
		workerBin = filepath.Join(tmp, "testworker")
		out, err := exec.Command("go", "build", "-o", workerBin, "./internal/testworker").CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building the worker: %v\n%s", err, out)
			os.Exit(2)
		}
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// need returns the environment variable, or skips (fails when strict).
func need(t *testing.T, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		if os.Getenv("FENCING_GO_STRICT") == "1" {
			t.Fatalf("%s is not set (FENCING_GO_STRICT=1)", name)
		}
		t.Skipf("%s is not set", name)
	}
	return v
}

func needPG(t *testing.T) {
	t.Helper()
	need(t, "PGPORT")
}

var uniq int64 = time.Now().UnixNano() % 1000000

// name gives a name unique to this run.
func name(prefix string) string {
	return fmt.Sprintf("%s_%d_%d", prefix, uniq, atomic.AddInt64(&uniq, 1)%1000000)
}

func newPool(t *testing.T, connString string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		t.Fatal(err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

var setupDone int32

func pgPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	needPG(t)
	pool := newPool(t, "", maxConns)
	if atomic.CompareAndSwapInt32(&setupDone, 0, 1) {
		ctx := context.Background()
		// the C edition, unless the database has an edition already (the
		// edition for managed PostgreSQL is installed by the DBA, never
		// beside the C edition)
		if _, err := pool.Exec(ctx, `DO $$ BEGIN IF pg_catalog.to_regnamespace('fencing') IS NULL THEN CREATE EXTENSION fencing; END IF; END $$`); err != nil {
			t.Fatal(err)
		}
		if err := fencing.EnsureGenerationTable(ctx, pool, ""); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// accounts makes a table (id, balance, fence) with the rows 'a' and 'b',
// protected with protectArgs after the table's name.
func accounts(t *testing.T, pool *pgxpool.Pool, protectArgs string) string {
	t.Helper()
	tbl := name("acc")
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`
		CREATE TABLE %[1]s (id text PRIMARY KEY, balance bigint NOT NULL, fence fencing.fence);
		INSERT INTO %[1]s VALUES ('a', 0, NULL), ('b', 0, NULL);
		SELECT fencing.protect('%[1]s'%[2]s);`, tbl, protectArgs))
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func row(t *testing.T, pool *pgxpool.Pool, tbl string) (int64, string) {
	t.Helper()
	var bal int64
	var fence *string
	if err := pool.QueryRow(context.Background(), "SELECT balance, fence::text FROM "+tbl+" WHERE id = 'a'").Scan(&bal, &fence); err != nil {
		t.Fatal(err)
	}
	if fence == nil {
		return bal, ""
	}
	return bal, *fence
}

// waitFor polls cond until it is true; fails after secs.
func waitFor(t *testing.T, what string, secs int, cond func() bool) {
	t.Helper()
	end := time.Now().Add(time.Duration(secs) * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %ds waiting for %s", secs, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- worker processes ----------------------------------------------------

type worker struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startWorker(t *testing.T, who string, args ...string) *worker {
	t.Helper()
	cmd := exec.Command(workerBin, append([]string{"-who", who}, args...)...)
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
	w := &worker{t: t, name: who, cmd: cmd, in: in, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
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
	if got := w.read(); got != "ready" {
		t.Fatalf("worker %s: %q instead of ready", who, got)
	}
	return w
}

func (w *worker) read() string {
	w.t.Helper()
	select {
	case l, ok := <-w.lines:
		if !ok {
			w.t.Fatalf("worker %s ended", w.name)
		}
		return l
	case <-time.After(90 * time.Second):
		w.t.Fatalf("worker %s said nothing for 90s", w.name)
	}
	return ""
}

// do sends a command and returns the answer.
func (w *worker) do(line string) string {
	w.t.Helper()
	if _, err := fmt.Fprintln(w.in, line); err != nil {
		w.t.Fatal(err)
	}
	ans := w.read()
	w.t.Logf("%s: %s -> %s", w.name, line, ans)
	return ans
}

// token: acquire and parse "token E:C".
func (w *worker) token(cmd string) fencing.Token {
	w.t.Helper()
	ans := w.do(cmd)
	if !strings.HasPrefix(ans, "token ") {
		w.t.Fatalf("worker %s: %s -> %q", w.name, cmd, ans)
	}
	tok, err := fencing.ParseToken(strings.TrimPrefix(ans, "token "))
	if err != nil {
		w.t.Fatal(err)
	}
	return tok
}

func (w *worker) freeze() { syscall.Kill(-w.cmd.Process.Pid, syscall.SIGSTOP) }
func (w *worker) thaw()   { syscall.Kill(-w.cmd.Process.Pid, syscall.SIGCONT) }

// lockedWriter makes a writer safe for the goroutines of a logger.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// zkDeleteChildren deletes the lock nodes under path (another client
// breaking the lock).
func zkDeleteChildren(t *testing.T, path string) {
	t.Helper()
	conn, _, err := zk.Connect(strings.Split(need(t, "FENCING_ZK"), ","), 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	children, _, err := conn.Children(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range children {
		if err := conn.Delete(path+"/"+c, -1); err != nil {
			t.Fatal(err)
		}
	}
}

func rowOf(t *testing.T, pool *pgxpool.Pool, tbl, id string) (int64, string) {
	t.Helper()
	var bal int64
	var fence *string
	if err := pool.QueryRow(context.Background(), "SELECT balance, fence::text FROM "+tbl+" WHERE id = $1", id).Scan(&bal, &fence); err != nil {
		t.Fatal(err)
	}
	if fence == nil {
		return bal, ""
	}
	return bal, *fence
}

// redisClientOpt is redisClient when want, else nil.
func redisClientOpt(t *testing.T, want bool) *redis.Client {
	if !want {
		return nil
	}
	return redisClient(t)
}
