package fencing

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

// EtcdSource takes an etcd lock (clientv3/concurrency.Mutex on a session
// of TTL seconds).  Its token is generation:revision, where revision is
// the lock key's CreateRevision: etcd orders the waiters of a Mutex by it,
// so each holder's is greater than every earlier holder's.  (The Lock's
// Header().Revision is the store's revision when the lock was seen free,
// which can be later than the key's creation; it is not used.)  The
// generation is read from the generation table right after the lock is
// taken (ReadGeneration; 0 until a row exists): bump it after restoring
// etcd from a snapshot.
//
// The lock lasts while the session's lease is kept alive: a holder paused
// for longer than TTL loses it, and its later writes are refused with
// ErrStaleToken once the next holder has written.
type EtcdSource struct {
	Client          *clientv3.Client
	DB              Querier
	Prefix          string
	TTL             int    // session TTL, seconds (etcd's minimum is about 2)
	Service         string // row of the generation table (default: Prefix)
	GenerationTable string // default DefaultGenerationTable

	session *concurrency.Session
	mutex   *concurrency.Mutex
}

// NewEtcdSource: a lock on prefix, held on sessions of ttl seconds.
func NewEtcdSource(cli *clientv3.Client, db Querier, prefix string, ttl int) *EtcdSource {
	return &EtcdSource{Client: cli, DB: db, Prefix: prefix, TTL: ttl}
}

// Acquire waits for the lock (until ctx ends).
func (s *EtcdSource) Acquire(ctx context.Context) (Token, error) {
	if s.mutex != nil {
		return Token{}, fmt.Errorf("fencing: etcd lock %s already held", s.Prefix)
	}
	ttl := s.TTL
	if ttl <= 0 {
		ttl = 60
	}
	session, err := concurrency.NewSession(s.Client, concurrency.WithTTL(ttl))
	if err != nil {
		return Token{}, err
	}
	m := concurrency.NewMutex(session, s.Prefix)
	if err := m.Lock(ctx); err != nil {
		session.Close()
		return Token{}, err
	}
	resp, err := s.Client.Get(ctx, m.Key())
	if err == nil && len(resp.Kvs) != 1 {
		err = fmt.Errorf("fencing: etcd lock key %s vanished (session expired)", m.Key())
	}
	var gen int64
	if err == nil {
		service := s.Service
		if service == "" {
			service = s.Prefix
		}
		gen, err = ReadGeneration(ctx, s.DB, s.GenerationTable, service)
	}
	if err != nil {
		m.Unlock(context.Background())
		session.Close()
		return Token{}, err
	}
	s.session, s.mutex = session, m
	return Token{Epoch: gen, Counter: resp.Kvs[0].CreateRevision}, nil
}

// Done is closed when the session (and so the lock) is lost; nil when
// no lock is held.
func (s *EtcdSource) Done() <-chan struct{} {
	if s.session == nil {
		return nil
	}
	return s.session.Done()
}

// Release unlocks and ends the session.
func (s *EtcdSource) Release(ctx context.Context) error {
	if s.mutex == nil {
		return ErrNotHeld
	}
	err := s.mutex.Unlock(ctx)
	s.session.Close()
	s.session, s.mutex = nil, nil
	return err
}
