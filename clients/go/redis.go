package fencing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/gomodule/redigo/redis"
)

// One script, run atomically by Redis: take the lock (SET NX PX) and, only
// when it was taken, count the grant; nil when the lock is held.
var redisAcquire = redis.NewScript(2, `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false`)

// Compare and delete: only the holder's value releases the lock.
var redisRelease = redis.NewScript(1, `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// RedisSource takes a lock on one Redis node: a key set with NX and a TTL,
// whose grants are counted by the key CounterKey (INCR in the same
// script).  The token is generation:counter, the generation read from the
// generation table when DB is set (0 otherwise).  Redis without
// persistence forgets the counter when it restarts: bump the generation
// then.  The lock is not waited for: Acquire gives ErrNotAcquired, and no
// token, while another holder's key lives.
type RedisSource struct {
	Pool            *redis.Pool
	Key             string
	CounterKey      string // default Key + ":fence"
	TTL             time.Duration
	DB              Querier // optional: for the generation
	Service         string  // default Key
	GenerationTable string

	value string
}

// NewRedisSource: the lock key, held for ttl.
func NewRedisSource(pool *redis.Pool, key string, ttl time.Duration, db Querier) *RedisSource {
	return &RedisSource{Pool: pool, Key: key, TTL: ttl, DB: db}
}

func (s *RedisSource) Acquire(ctx context.Context) (Token, error) {
	conn, err := s.Pool.GetContext(ctx)
	if err != nil {
		return Token{}, err
	}
	defer conn.Close()
	var b [16]byte
	rand.Read(b[:])
	value := hex.EncodeToString(b[:])
	counterKey := s.CounterKey
	if counterKey == "" {
		counterKey = s.Key + ":fence"
	}
	reply, err := redisAcquire.Do(conn, s.Key, counterKey, value, s.TTL.Milliseconds())
	if err != nil {
		return Token{}, err
	}
	if reply == nil {
		return Token{}, ErrNotAcquired
	}
	n, err := redis.Int64(reply, nil)
	if err != nil {
		return Token{}, err
	}
	var gen int64
	if s.DB != nil {
		service := s.Service
		if service == "" {
			service = s.Key
		}
		if gen, err = ReadGeneration(ctx, s.DB, s.GenerationTable, service); err != nil {
			redisRelease.Do(conn, s.Key, value)
			return Token{}, err
		}
	}
	s.value = value
	return Token{Epoch: gen, Counter: n}, nil
}

// Release deletes the key if it is still ours; ErrNotHeld otherwise.
func (s *RedisSource) Release(ctx context.Context) error {
	if s.value == "" {
		return ErrNotHeld
	}
	conn, err := s.Pool.GetContext(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	n, err := redis.Int(redisRelease.Do(conn, s.Key, s.value))
	s.value = ""
	if err == nil && n == 0 {
		err = ErrNotHeld
	}
	return err
}
