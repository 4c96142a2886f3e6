package fencing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// LeaseSource is the extension's built-in lease: fencing.lease_acquire
// grants it (NULL while another holder's lease is live), every
// transaction takes a new token with fencing.lease_next (which also
// renews the lease), and a goroutine renews it with fencing.lease_renew
// while it is held.  Protect tables with fencing.protect(...,
// lease => name) so that a write is refused (ErrLeaseExpired) as soon as
// the lease ran out, even before another holder wrote.
//
// RunFenced binds lease_next's token in the same round trip as BEGIN:
// SELECT fencing.set_token(fencing.lease_next(name, token, ttl)).
type LeaseSource struct {
	db   Querier
	name string
	ttl  time.Duration
	cfg  sourceConfig
	g    grant
	// txMu orders the lease's calls that move its token: a renewal, a
	// NextToken and a transaction's lease_next (held until it ends, as the
	// lease's row is locked by it until then).
	txMu sync.Mutex
}

// NewLeaseSource is the lease name, held for ttl at a time (renewed in
// the background while held).  db must be safe for concurrent use (a
// *pgxpool.Pool).
func NewLeaseSource(db Querier, name string, ttl time.Duration, opts ...SourceOption) *LeaseSource {
	return &LeaseSource{db: db, name: name, ttl: ttl, cfg: newSourceConfig(opts)}
}

func interval(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

// TryAcquire takes the lease if it is free or expired; ErrNotAcquired
// while another holder's lease is live.
func (s *LeaseSource) TryAcquire(ctx context.Context) (Token, error) {
	if _, err := s.g.current(); err == nil {
		return Token{}, fmt.Errorf("fencing: lease %s is already held by this source", s.name)
	}
	var t *string
	err := s.db.QueryRow(ctx, "SELECT fencing.lease_acquire($1, $2, $3::text::interval)::text",
		s.name, s.cfg.holder, interval(s.ttl)).Scan(&t)
	if err != nil {
		return Token{}, Classify(err, Token{})
	}
	if t == nil {
		return Token{}, &notAcquiredError{what: "lease " + s.name + " is held by another holder"}
	}
	tok, err := ParseToken(*t)
	if err != nil {
		return Token{}, err
	}
	if err := raiseFences(ctx, s.db, tok, s.cfg.fences); err != nil {
		s.db.Exec(ctx, "SELECT fencing.lease_release($1, $2::text::fencing.fence)", s.name, tok.String())
		return Token{}, err
	}
	stop, done := s.g.begin(tok)
	go s.g.renewLoop(stop, done, s.ttl, s.cfg.logger, "lease", s.name, s.renew)
	return tok, nil
}

// Acquire waits for the lease until ctx ends (polling).
func (s *LeaseSource) Acquire(ctx context.Context) (Token, error) {
	return poll(ctx, "lease "+s.name, s.TryAcquire)
}

func (s *LeaseSource) renew(ctx context.Context) (bool, error) {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	tok, err := s.g.current()
	if err != nil {
		return false, nil
	}
	var ok bool
	err = s.db.QueryRow(ctx, "SELECT fencing.lease_renew($1, $2::text::fencing.fence, $3::text::interval)",
		s.name, tok.String(), interval(s.ttl)).Scan(&ok)
	return ok, err
}

// NextToken takes a new token of the lease (fencing.lease_next, which
// renews it); ErrLockLost once the lease expired, was released or taken
// over.
func (s *LeaseSource) NextToken(ctx context.Context) (Token, error) {
	s.txMu.Lock()
	defer s.txMu.Unlock()
	cur, err := s.g.current()
	if err != nil {
		return Token{}, err
	}
	var t *string
	if err := s.db.QueryRow(ctx, "SELECT fencing.lease_next($1, $2::text::fencing.fence, $3::text::interval)::text",
		s.name, cur.String(), interval(s.ttl)).Scan(&t); err != nil {
		return Token{}, Classify(err, cur)
	}
	if t == nil {
		err := lost("lease %s: expired, released or taken over", s.name)
		s.g.markLost(s.cfg.logger, "lease", s.name, err)
		return Token{}, err
	}
	tok, err := ParseToken(*t)
	if err != nil {
		return Token{}, err
	}
	s.g.setToken(tok, true)
	return tok, nil
}

// inTx: the lease's part of a fenced transaction (RunFenced): the
// statement that takes the next token and binds it, its parameters, and
// the function to call with its outcome; the lease's calls wait until
// then.
func (s *LeaseSource) inTx() (string, [][]byte, func(tok Token, committed, lostLease bool), error) {
	s.txMu.Lock()
	cur, err := s.g.current()
	if err != nil {
		s.txMu.Unlock()
		return "", nil, nil, err
	}
	done := func(tok Token, committed, lostLease bool) {
		defer s.txMu.Unlock()
		switch {
		case committed:
			s.g.setToken(tok, true)
		case lostLease:
			s.g.markLost(s.cfg.logger, "lease", s.name, lost("lease %s: expired, released or taken over", s.name))
		}
	}
	return "SELECT fencing.set_token(fencing.lease_next($1, $2, $3))",
		[][]byte{[]byte(s.name), []byte(cur.String()), []byte(interval(s.ttl))}, done, nil
}

// Lost is closed once the lease is no longer held.
func (s *LeaseSource) Lost() <-chan struct{} { return s.g.lostChan() }

// Release gives the lease up (fencing.lease_release); ErrLockLost when it
// had been lost before.
func (s *LeaseSource) Release(ctx context.Context) error {
	s.g.stopRenewal()
	s.txMu.Lock()
	defer s.txMu.Unlock()
	tok, _ := s.g.current()
	held, lostErr := s.g.end()
	if !held {
		if lostErr == nil {
			lostErr = lost("lease %s: not held", s.name)
		}
		return lostErr
	}
	var ok bool
	if err := s.db.QueryRow(ctx, "SELECT fencing.lease_release($1, $2::text::fencing.fence)", s.name, tok.String()).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return lost("lease %s: expired or taken over before the release", s.name)
	}
	return nil
}

var _ TokenSource = (*LeaseSource)(nil)
var _ = errors.New
