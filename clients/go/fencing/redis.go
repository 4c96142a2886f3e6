package fencing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Redis recipe, one script per step, each run atomically by Redis.
// KEYS[1] is lock:{NAME} (the holder's random id), KEYS[2] fence:{NAME}
// (the counter); the braces keep both in one Redis Cluster slot.
var (
	// the grant: take the lock and, only when it was taken, count it
	redisGrant = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`)
	// a transaction's token: only while the lock is ours, renewed
	redisNext = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('INCR', KEYS[2])
end
return false`)
	// renewal: only while the lock is ours
	redisRenew = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`)
	// release: only the holder's id deletes the lock
	redisRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)
)

// RedisSource is a lock on one Redis node: lock:{NAME} set with NX and a
// TTL to the holder's random id, fence:{NAME} counting the tokens (INCR,
// in the same script as the check that the lock is ours).  The token is
// (generation, counter), the generation read from the generation table
// (service "redis") right after the lock is taken and kept for the whole
// grant.  Redis without persistence forgets the counter when it restarts:
// raise the generation then (RaiseGeneration).  While held, the lock is
// renewed (PEXPIRE) every third of its TTL.
type RedisSource struct {
	db     Querier
	client redis.Scripter
	name   string
	ttl    time.Duration
	cfg    sourceConfig
	g      grant
	id     string
	gen    int64
}

// NewRedisSource is the lock NAME on the Redis node client talks to
// (a *redis.Client), held for ttl at a time.  db (a *pgxpool.Pool) is
// where the generation table is.
func NewRedisSource(db Querier, client redis.Scripter, name string, ttl time.Duration, opts ...SourceOption) *RedisSource {
	return &RedisSource{db: db, client: client, name: name, ttl: ttl, cfg: newSourceConfig(opts)}
}

func (s *RedisSource) keys() []string { return []string{"lock:{" + s.name + "}", "fence:{" + s.name + "}"} }

// TryAcquire takes the lock if it is free; ErrNotAcquired while another
// holder's lives (the counter then does not move).
func (s *RedisSource) TryAcquire(ctx context.Context) (Token, error) {
	if _, err := s.g.current(); err == nil {
		return Token{}, fmt.Errorf("fencing: Redis lock %s is already held by this source", s.name)
	}
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Token{}, err
	}
	id := hex.EncodeToString(b[:])
	n, err := redisGrant.Run(ctx, s.client, s.keys(), id, s.ttl.Milliseconds()).Int64()
	if errors.Is(err, redis.Nil) {
		return Token{}, &notAcquiredError{what: "Redis lock " + s.name + " is held by another holder"}
	}
	if err != nil {
		return Token{}, err
	}
	fail := func(err error) (Token, error) {
		redisRelease.Run(context.Background(), s.client, s.keys()[:1], id)
		return Token{}, err
	}
	gen, err := ReadGeneration(ctx, s.db, s.cfg.generationTable, "redis")
	if err != nil {
		return fail(err)
	}
	tok := Token{Epoch: gen, Counter: n}
	if err := raiseFences(ctx, s.db, tok, s.cfg.fences); err != nil {
		return fail(err)
	}
	s.id, s.gen = id, gen
	stop, done := s.g.begin(tok)
	go s.g.renewLoop(stop, done, s.ttl, s.cfg.logger, "Redis lock", s.name, s.renew)
	return tok, nil
}

// Acquire waits for the lock until ctx ends (polling).
func (s *RedisSource) Acquire(ctx context.Context) (Token, error) {
	return poll(ctx, "Redis lock "+s.name, s.TryAcquire)
}

func (s *RedisSource) renew(ctx context.Context) (bool, error) {
	n, err := redisRenew.Run(ctx, s.client, s.keys()[:1], s.id, s.ttl.Milliseconds()).Int64()
	return n == 1, err
}

// NextToken counts a new token while the lock is ours (and renews it);
// ErrLockLost once it expired or another holder has it.
func (s *RedisSource) NextToken(ctx context.Context) (Token, error) {
	if _, err := s.g.current(); err != nil {
		return Token{}, err
	}
	start := time.Now()
	n, err := redisNext.Run(ctx, s.client, s.keys(), s.id, s.ttl.Milliseconds()).Int64()
	if errors.Is(err, redis.Nil) {
		err := lost("Redis lock %s: expired or held by another holder", s.name)
		s.g.markLost(s.cfg.logger, "Redis lock", s.name, err)
		return Token{}, err
	}
	if err != nil {
		return Token{}, err
	}
	tok := Token{Epoch: s.gen, Counter: n}
	s.g.setToken(tok, false)
	s.g.mu.Lock()
	if s.g.held && start.After(s.g.renewed) {
		s.g.renewed = start
	}
	s.g.mu.Unlock()
	return tok, nil
}

// Lost is closed once the lock is no longer held.
func (s *RedisSource) Lost() <-chan struct{} { return s.g.lostChan() }

// Release deletes the lock if it is still ours; ErrLockLost otherwise.
func (s *RedisSource) Release(ctx context.Context) error {
	s.g.stopRenewal()
	held, lostErr := s.g.end()
	if !held {
		if lostErr == nil {
			lostErr = lost("Redis lock %s: not held", s.name)
		}
		return lostErr
	}
	n, err := redisRelease.Run(ctx, s.client, s.keys()[:1], s.id).Int64()
	if err != nil {
		return err
	}
	if n == 0 {
		return lost("Redis lock %s: expired or taken over before the release", s.name)
	}
	return nil
}

var _ TokenSource = (*RedisSource)(nil)
