package fencing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ZooKeeperSource is ZooKeeper's lock recipe (as kazoo's Lock and
// Curator's InterProcessMutex: an ephemeral sequential node under the
// lock's path, the lowest sequence holds, each other waits for the one
// before it).  Each grant has a ZooKeeper session of its own, whose
// timeout is the lock's TTL: the node lives while the session does.  Its
// tokens are fencing.fence_from_zxid(mzxid, generation) (TokenFromZxid)
// of a setData on the holder's own node, made right after the lock is
// granted and again for each NextToken; once the session expired the node
// is gone and NextToken fails with ErrLockLost.  The generation is read
// from the generation table (service "zookeeper") right after the lock is
// taken: raise it if the ensemble ever loses its data.
type ZooKeeperSource struct {
	db      Querier
	servers []string
	path    string
	ttl     time.Duration
	cfg     sourceConfig
	g       grant

	mu   sync.Mutex // guards conn, node, gen
	conn *zk.Conn
	node string
	gen  int32
}

// NewZooKeeperSource is the lock under path (created if missing) on the
// ensemble servers (host:port), each grant on a session of timeout ttl
// (the servers bound it: by default between 2 and 20 of their ticks).
// db (a *pgxpool.Pool) is where the generation table is.
func NewZooKeeperSource(db Querier, servers []string, path string, ttl time.Duration, opts ...SourceOption) *ZooKeeperSource {
	return &ZooKeeperSource{db: db, servers: servers, path: "/" + strings.Trim(path, "/"), ttl: ttl, cfg: newSourceConfig(opts)}
}

// zkSeq is the sequence number a lock node's name ends with.
func zkSeq(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-10:], 10, 64)
	return n, err == nil
}

// TryAcquire takes the lock if nobody holds or waits for it;
// ErrNotAcquired otherwise.
func (s *ZooKeeperSource) TryAcquire(ctx context.Context) (Token, error) {
	return s.acquire(ctx, true)
}

// Acquire waits for the lock until ctx ends.
func (s *ZooKeeperSource) Acquire(ctx context.Context) (Token, error) {
	return s.acquire(ctx, false)
}

func (s *ZooKeeperSource) acquire(ctx context.Context, try bool) (Token, error) {
	if _, err := s.g.current(); err == nil {
		return Token{}, fmt.Errorf("fencing: ZooKeeper lock %s is already held by this source", s.path)
	}
	expired := make(chan struct{})
	var once sync.Once
	conn, _, err := zk.Connect(s.servers, s.ttl, zk.WithLogInfo(false), zk.WithEventCallback(func(ev zk.Event) {
		if ev.State == zk.StateExpired {
			once.Do(func() { close(expired) })
		}
	}))
	if err != nil {
		return Token{}, err
	}
	node, err := s.lock(ctx, conn, try, expired)
	if err != nil {
		conn.Close()
		return Token{}, err
	}
	fail := func(err error) (Token, error) {
		conn.Delete(node, -1)
		conn.Close()
		return Token{}, err
	}
	gen64, err := ReadGeneration(ctx, s.db, s.cfg.generationTable, "zookeeper")
	if err != nil {
		return fail(err)
	}
	if gen64 < 0 || gen64 > math.MaxInt32 {
		return fail(fmt.Errorf("fencing: the generation of zookeeper (%d) is out of range (0 to %d)", gen64, math.MaxInt32))
	}
	gen := int32(gen64)
	tok, err := s.set(conn, node, gen)
	if err != nil {
		return fail(err)
	}
	if err := raiseFences(ctx, s.db, tok, s.cfg.fences); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	s.conn, s.node, s.gen = conn, node, gen
	s.mu.Unlock()
	stop, done := s.g.begin(tok)
	go s.watch(conn, node, expired, stop, done)
	return tok, nil
}

// lock creates this holder's node and waits until it is the lowest.
func (s *ZooKeeperSource) lock(ctx context.Context, conn *zk.Conn, try bool, expired chan struct{}) (string, error) {
	p := ""
	for _, part := range strings.Split(strings.Trim(s.path, "/"), "/") {
		p += "/" + part
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return "", err
		}
	}
	node, err := conn.CreateProtectedEphemeralSequential(s.path+"/lock-", []byte(s.cfg.holder), zk.WorldACL(zk.PermAll))
	if err != nil {
		return "", err
	}
	giveUp := func(err error) (string, error) {
		conn.Delete(node, -1)
		return "", err
	}
	mySeq, ok := zkSeq(node)
	if !ok {
		return giveUp(fmt.Errorf("fencing: not a lock node: %s", node))
	}
	for {
		children, _, err := conn.Children(s.path)
		if err != nil {
			return giveUp(err)
		}
		sort.Slice(children, func(i, j int) bool {
			a, _ := zkSeq(children[i])
			b, _ := zkSeq(children[j])
			return a < b
		})
		prev, found := "", false
		for _, c := range children {
			seq, ok := zkSeq(c)
			if !ok {
				continue
			}
			if seq == mySeq {
				found = true
				break
			}
			prev = c
		}
		if !found {
			return giveUp(lost("ZooKeeper lock %s: the node %s vanished (session expired)", s.path, node))
		}
		if prev == "" {
			return node, nil
		}
		if try {
			return giveUp(&notAcquiredError{what: "ZooKeeper lock " + s.path + " is held by another holder"})
		}
		exists, _, ch, err := conn.ExistsW(s.path + "/" + prev)
		if err != nil {
			return giveUp(err)
		}
		if !exists {
			continue
		}
		select {
		case <-ch:
		case <-expired:
			return giveUp(lost("ZooKeeper lock %s: the session expired while waiting", s.path))
		case <-ctx.Done():
			return giveUp(&notAcquiredError{what: "ZooKeeper lock " + s.path, ctx: ctx.Err()})
		}
	}
}

// set writes the holder's own node; its mzxid is the token.
func (s *ZooKeeperSource) set(conn *zk.Conn, node string, gen int32) (Token, error) {
	st, err := conn.Set(node, []byte(s.cfg.holder), -1)
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrSessionExpired) {
		return Token{}, lost("ZooKeeper lock %s: the node %s is gone (session expired)", s.path, node)
	}
	if err != nil {
		return Token{}, err
	}
	return TokenFromZxid(st.Mzxid, gen), nil
}

// watch ends the grant as lost when the node is deleted or the session
// expires before a release.
func (s *ZooKeeperSource) watch(conn *zk.Conn, node string, expired, stop, done chan struct{}) {
	defer close(done)
	for {
		exists, _, ch, err := conn.ExistsW(node)
		if err == nil && !exists {
			s.g.markLost(s.cfg.logger, "ZooKeeper lock", s.path, lost("ZooKeeper lock %s: the node %s was deleted", s.path, node))
			return
		}
		if err != nil {
			ch = nil // retried below
		}
		select {
		case <-stop:
			return
		case <-expired:
			s.g.markLost(s.cfg.logger, "ZooKeeper lock", s.path, lost("ZooKeeper lock %s: the session expired", s.path))
			return
		case <-ch:
		case <-time.After(s.ttl / 3):
		}
	}
}

// NextToken writes the holder's node again while the session lives and
// gives its zxid as a token; ErrLockLost once the node is gone.
func (s *ZooKeeperSource) NextToken(ctx context.Context) (Token, error) {
	if _, err := s.g.current(); err != nil {
		return Token{}, err
	}
	s.mu.Lock()
	conn, node, gen := s.conn, s.node, s.gen
	s.mu.Unlock()
	tok, err := s.set(conn, node, gen)
	if errors.Is(err, ErrLockLost) {
		s.g.markLost(s.cfg.logger, "ZooKeeper lock", s.path, err)
	}
	if err != nil {
		return Token{}, err
	}
	s.g.setToken(tok, false)
	return tok, nil
}

// Lost is closed once the lock is no longer held.
func (s *ZooKeeperSource) Lost() <-chan struct{} { return s.g.lostChan() }

// Release deletes the node and closes the session; ErrLockLost when the
// lock had been lost before.
func (s *ZooKeeperSource) Release(ctx context.Context) error {
	s.g.stopRenewal()
	held, lostErr := s.g.end()
	s.mu.Lock()
	conn, node := s.conn, s.node
	s.conn, s.node = nil, ""
	s.mu.Unlock()
	if conn == nil {
		return lost("ZooKeeper lock %s: not held", s.path)
	}
	defer conn.Close()
	if !held {
		return lostErr
	}
	if err := conn.Delete(node, -1); err != nil {
		if errors.Is(err, zk.ErrNoNode) {
			return lost("ZooKeeper lock %s: the node was gone before the release", s.path)
		}
		return err
	}
	return nil
}

var _ TokenSource = (*ZooKeeperSource)(nil)
