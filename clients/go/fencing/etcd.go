package fencing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// EtcdSource is etcd's own mutex (concurrency.Mutex on a Session of the
// TTL, the protocol of `etcdctl lock NAME`: keys NAME/<lease id>, the
// lowest create revision holds).  Its tokens are (generation, revision):
// the revision of a transaction that puts the holder's own lock key while
// it still holds the lock (If the key's create revision is ours, Then put
// it, keeping its lease), made right after the lock is granted and again
// for each NextToken.  A holder that lost its lock fails the compare
// (ErrLockLost); every later holder's revisions are above every earlier
// holder's.  The generation is read from the generation table (service
// "etcd") right after the lock is taken: raise it after restoring etcd
// from a snapshot.  The session's lease is kept alive by etcd's client
// while the holder runs; Lost is closed when the session ends.
type EtcdSource struct {
	db     Querier
	client *clientv3.Client
	name   string
	ttl    time.Duration
	cfg    sourceConfig
	g      grant

	mu      sync.Mutex // guards session and mutex
	session *concurrency.Session
	mutex   *concurrency.Mutex
	gen     int64
}

// NewEtcdSource is the lock name (a key prefix) on sessions of ttl
// (etcd counts whole seconds: rounded up, at least 1 s; its servers may
// also impose a minimum).  db (a *pgxpool.Pool) is where the generation
// table is.
func NewEtcdSource(db Querier, client *clientv3.Client, name string, ttl time.Duration, opts ...SourceOption) *EtcdSource {
	return &EtcdSource{db: db, client: client, name: name, ttl: ttl, cfg: newSourceConfig(opts)}
}

func (s *EtcdSource) ttlSeconds() int {
	return max(1, int(math.Ceil(s.ttl.Seconds())))
}

// TryAcquire takes the lock if nobody holds or waits for it;
// ErrNotAcquired otherwise.
func (s *EtcdSource) TryAcquire(ctx context.Context) (Token, error) {
	return s.acquire(ctx, true)
}

// Acquire waits for the lock until ctx ends (in etcd's queue of waiters).
func (s *EtcdSource) Acquire(ctx context.Context) (Token, error) {
	return s.acquire(ctx, false)
}

func (s *EtcdSource) acquire(ctx context.Context, try bool) (Token, error) {
	if _, err := s.g.current(); err == nil {
		return Token{}, fmt.Errorf("fencing: etcd lock %s is already held by this source", s.name)
	}
	// the session outlives ctx: its keepalive is the lock's life
	session, err := concurrency.NewSession(s.client, concurrency.WithTTL(s.ttlSeconds()))
	if err != nil {
		return Token{}, err
	}
	m := concurrency.NewMutex(session, s.name)
	if try {
		err = m.TryLock(ctx)
	} else {
		err = m.Lock(ctx)
	}
	if err != nil {
		session.Close()
		switch {
		case errors.Is(err, concurrency.ErrLocked):
			return Token{}, &notAcquiredError{what: "etcd lock " + s.name + " is held by another holder"}
		case ctx.Err() != nil:
			return Token{}, &notAcquiredError{what: "etcd lock " + s.name, ctx: ctx.Err()}
		}
		return Token{}, err
	}
	fail := func(err error) (Token, error) {
		m.Unlock(context.Background())
		session.Close()
		return Token{}, err
	}
	gen, err := ReadGeneration(ctx, s.db, s.cfg.generationTable, "etcd")
	if err != nil {
		return fail(err)
	}
	rev, err := s.put(ctx, m)
	if err != nil {
		return fail(err)
	}
	tok := Token{Epoch: gen, Counter: rev}
	if err := raiseFences(ctx, s.db, tok, s.cfg.fences); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	s.session, s.mutex, s.gen = session, m, gen
	s.mu.Unlock()
	stop, done := s.g.begin(tok)
	go s.watch(session, stop, done)
	return tok, nil
}

// put writes the holder's own key while it holds the lock; the revision
// of that write is the token's counter.
func (s *EtcdSource) put(ctx context.Context, m *concurrency.Mutex) (int64, error) {
	resp, err := s.client.Txn(ctx).If(m.IsOwner()).
		Then(clientv3.OpPut(m.Key(), s.cfg.holder, clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, lost("etcd lock %s: the key %s is no longer ours (session expired)", s.name, m.Key())
	}
	return resp.Header.Revision, nil
}

// watch ends the grant as lost when the session ends before a release.
func (s *EtcdSource) watch(session *concurrency.Session, stop, done chan struct{}) {
	defer close(done)
	select {
	case <-session.Done():
		s.g.markLost(s.cfg.logger, "etcd lock", s.name, lost("etcd lock %s: the session's lease expired", s.name))
	case <-stop:
	}
}

// NextToken puts the lock key again while it is ours and gives that
// revision; ErrLockLost once it is not.
func (s *EtcdSource) NextToken(ctx context.Context) (Token, error) {
	if _, err := s.g.current(); err != nil {
		return Token{}, err
	}
	s.mu.Lock()
	m, gen := s.mutex, s.gen
	s.mu.Unlock()
	rev, err := s.put(ctx, m)
	if errors.Is(err, ErrLockLost) {
		s.g.markLost(s.cfg.logger, "etcd lock", s.name, err)
	}
	if err != nil {
		return Token{}, err
	}
	tok := Token{Epoch: gen, Counter: rev}
	s.g.setToken(tok, false)
	return tok, nil
}

// Lost is closed once the lock is no longer held.
func (s *EtcdSource) Lost() <-chan struct{} { return s.g.lostChan() }

// Release unlocks and ends the session; ErrLockLost when the lock had
// been lost before.
func (s *EtcdSource) Release(ctx context.Context) error {
	s.g.stopRenewal()
	held, lostErr := s.g.end()
	s.mu.Lock()
	session, m := s.session, s.mutex
	s.session, s.mutex = nil, nil
	s.mu.Unlock()
	if session == nil {
		return lost("etcd lock %s: not held", s.name)
	}
	var err error
	if held {
		err = m.Unlock(ctx)
	}
	session.Close()
	if !held {
		return lostErr
	}
	return err
}

var _ TokenSource = (*EtcdSource)(nil)
