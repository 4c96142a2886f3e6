package fencing

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// TokenSource is a lock that hands out fencing tokens.  Every source has
// the same methods:
//
//   - TryAcquire takes the lock, or gives up at once with ErrNotAcquired.
//   - Acquire takes the lock, waiting until the context ends (its deadline
//     is the timeout); then ErrNotAcquired, which also matches the
//     context's error.
//   - NextToken gives a new token of the lock still held, greater than
//     every token granted before; ErrLockLost when the lock is no longer
//     held.  RunFenced takes one per transaction.
//   - Lost is a channel closed once the lock is no longer held: lost
//     (renewal failed, the lock service says another holder has it, the
//     session expired) or released.  While the lock is held the source
//     renews it in the background.
//   - Release gives the lock up; ErrLockLost when it was lost before.
//
// A source holds at most one grant at a time.  Its methods are safe for
// concurrent use, but a source is one holder: give each worker its own.
type TokenSource interface {
	TryAcquire(ctx context.Context) (Token, error)
	Acquire(ctx context.Context) (Token, error)
	NextToken(ctx context.Context) (Token, error)
	Release(ctx context.Context) error
	Lost() <-chan struct{}
}

// Querier is what the sources and RunOnce need of the database: a
// *pgxpool.Pool (or anything safe for concurrent use with these methods:
// a source renews its lock from a goroutine of its own).
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// SourceOption configures a token source.
type SourceOption func(*sourceConfig)

type sourceConfig struct {
	fences          []Scope
	holder          string
	generationTable string
	logger          *slog.Logger
}

// WithFences names the scopes the holder will write (the first meter):
// right after each grant the source raises their fences to the grant's
// token (fencing.raise_fence, in one transaction), so that an older
// holder that wakes before this holder's first write is refused.  Row
// scope has no such call: raise a row's fence with UPDATE t SET fence =
// token.  If raising fails, the lock is released and Acquire returns the
// error.
func WithFences(scopes ...Scope) SourceOption {
	return func(c *sourceConfig) { c.fences = append(c.fences, scopes...) }
}

// WithHolder names the holder (leases: fencing.leases.holder, the value
// of an etcd or ZooKeeper lock key); default host:pid:random, one per
// source.  A lease is granted again to the holder of the same name: give
// every holder its own.
func WithHolder(name string) SourceOption { return func(c *sourceConfig) { c.holder = name } }

// WithGenerationTable reads the lock services' generations from this
// table instead of DefaultGenerationTable.
func WithGenerationTable(name string) SourceOption {
	return func(c *sourceConfig) { c.generationTable = name }
}

// WithSourceLogger logs the source's renewals that fail and its lost
// locks there instead of slog.Default().
func WithSourceLogger(l *slog.Logger) SourceOption { return func(c *sourceConfig) { c.logger = l } }

func newSourceConfig(opts []SourceOption) sourceConfig {
	c := sourceConfig{generationTable: DefaultGenerationTable}
	for _, o := range opts {
		o(&c)
	}
	if c.holder == "" {
		// unique per source: a lease taken again by the same holder name
		// is granted to it
		h, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		c.holder = fmt.Sprintf("%s:pid=%d:%x", h, os.Getpid(), b)
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	return c
}

// DefaultGenerationTable keeps the generation of each lock service
// (rows etcd, zookeeper, redis).  A lock service that lost its data counts
// again from lower numbers: raise its generation (RaiseGeneration) before
// it serves again, and every later token beats every earlier one.
const DefaultGenerationTable = "fencing_lock_generations"

func generationIdent(table string) string {
	if table == "" {
		table = DefaultGenerationTable
	}
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}

// EnsureGenerationTable creates the generation table if it does not
// exist ("" for DefaultGenerationTable).
func EnsureGenerationTable(ctx context.Context, db Querier, table string) error {
	_, err := db.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+generationIdent(table)+
		" (service text PRIMARY KEY, generation bigint NOT NULL)")
	return err
}

// ReadGeneration gives service's generation: 0 while it has no row.
func ReadGeneration(ctx context.Context, db Querier, table, service string) (int64, error) {
	var g int64
	err := db.QueryRow(ctx, "SELECT generation FROM "+generationIdent(table)+" WHERE service = $1", service).Scan(&g)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" {
		return 0, fmt.Errorf("fencing: the generation table %s does not exist: create it (EnsureGenerationTable): %w", generationIdent(table), err)
	}
	return g, err
}

// RaiseGeneration adds one to service's generation and returns it: do it
// after the lock service lost its data, before it serves again.
func RaiseGeneration(ctx context.Context, db Querier, table, service string) (int64, error) {
	var g int64
	err := db.QueryRow(ctx, "INSERT INTO "+generationIdent(table)+" AS g (service, generation) VALUES ($1, 1)"+
		" ON CONFLICT (service) DO UPDATE SET generation = g.generation + 1 RETURNING generation", service).Scan(&g)
	return g, err
}

// raiseFences raises the fences of scopes to token in one transaction.
func raiseFences(ctx context.Context, db Querier, token Token, scopes []Scope) error {
	if len(scopes) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, s := range scopes {
			key := s.Key
			if key == nil {
				key = []string{}
			}
			if _, err := tx.Exec(ctx, "SELECT fencing.raise_fence($1::text::regclass, $2::text::fencing.fence, VARIADIC $3::text[])",
				s.Table, token.String(), key); err != nil {
				return fmt.Errorf("fencing: raising the fence of %s %v: %w", s.Table, s.Key, err)
			}
		}
		return nil
	})
	return Classify(err, token)
}

// grant is the state of one holder's current grant, shared by the
// sources: the token, the lost signal, the renewal goroutine.
type grant struct {
	mu      sync.Mutex
	held    bool
	token   Token
	lostCh  chan struct{}
	lostErr error
	renewed time.Time // the last time the lock service confirmed the lock
	frozen  time.Time // tests: the renewal does nothing until then, as in a process paused
	stop    chan struct{}
	done    chan struct{}
}

// begin records a new grant; its goroutine (renewal, watch) must stop
// when stop is closed and close done when it ends.
func (g *grant) begin(tok Token) (stop, done chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held, g.token, g.lostErr, g.renewed = true, tok, nil, time.Now()
	g.lostCh = make(chan struct{})
	g.stop, g.done = make(chan struct{}), make(chan struct{})
	return g.stop, g.done
}

// lostChan is the channel of the current (or last) grant; nil before any.
func (g *grant) lostChan() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lostCh
}

// current gives the token while held, else the error to return.
func (g *grant) current() (Token, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		if g.lostErr != nil {
			return Token{}, g.lostErr
		}
		return Token{}, lost("no lock held")
	}
	return g.token, nil
}

// setToken replaces the token of the grant held (a NextToken); renewed
// says the lock service also renewed the lock.
func (g *grant) setToken(tok Token, renewed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.token = tok
		if renewed {
			g.renewed = time.Now()
		}
	}
}

func (g *grant) lastRenewed() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.renewed
}

// markLost ends the grant as lost (once) and logs it.
func (g *grant) markLost(logger *slog.Logger, what, name string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		return
	}
	g.held = false
	g.lostErr = err
	close(g.lostCh)
	logger.Warn("fencing: lock lost", "source", what, "lock", name, "token", g.token.String(), "err", err)
}

// end ends the grant on release: false when it was lost before.
func (g *grant) end() (wasHeld bool, lostErr error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		return false, g.lostErr
	}
	g.held = false
	close(g.lostCh)
	return true, nil
}

// renewLoop calls renew every ttl/3 until stop is closed; a renewal that
// answers false (the lock service says the lock is not ours), or no
// successful renewal for a whole ttl, ends the grant as lost.  Measured
// on the monotonic clock, so a process frozen past its TTL counts itself
// lost the moment it runs again.
func (g *grant) renewLoop(stop, done chan struct{}, ttl time.Duration, logger *slog.Logger, what, name string,
	renew func(ctx context.Context) (bool, error)) {
	defer close(done)
	lostCh := g.lostChan()
	every := ttl / 3
	if every < 10*time.Millisecond {
		every = 10 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-lostCh:
			return
		case <-tick.C:
		}
		g.mu.Lock()
		frozen := time.Now().Before(g.frozen)
		g.mu.Unlock()
		if frozen {
			continue
		}
		since := time.Since(g.lastRenewed())
		if since > ttl {
			g.markLost(logger, what, name, lost("%s %s: not renewed for %s (more than its TTL %s)", what, name, since.Round(time.Millisecond), ttl))
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), ttl-since)
		start := time.Now() // the lock lives ttl from before the call, not after
		ok, err := renew(ctx)
		cancel()
		select {
		case <-stop: // released meanwhile: its answer means nothing
			return
		default:
		}
		switch {
		case err != nil:
			logger.Debug("fencing: renewal failed", "source", what, "lock", name, "err", err)
		case !ok:
			g.markLost(logger, what, name, lost("%s %s: held by another holder or expired", what, name))
			return
		default:
			g.mu.Lock()
			g.renewed = start
			g.mu.Unlock()
		}
	}
}

// stopRenewal stops the renewal goroutine and waits for it.
func (g *grant) stopRenewal() {
	g.mu.Lock()
	stop, done := g.stop, g.done
	g.stop = nil
	g.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// poll calls try until it takes the lock, fails otherwise, or ctx ends:
// the waiting of sources that have no queue (leases, Redis).
func poll(ctx context.Context, what string, try func(ctx context.Context) (Token, error)) (Token, error) {
	wait := 5 * time.Millisecond
	for {
		tok, err := try(ctx)
		if !errors.Is(err, ErrNotAcquired) {
			return tok, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Token{}, &notAcquiredError{what: what, ctx: ctx.Err()}
		case <-t.C:
		}
		if wait < 100*time.Millisecond {
			wait *= 2
		}
	}
}

// StaticToken is a token you already have, as a TokenSource: every
// NextToken gives the same token, it is never lost.  On a strict table a
// second transaction with it is refused (ErrTokenAlreadyUsed): use it for
// one transaction, or on tables protected with strict => false.
type StaticToken struct{ Token Token }

// TryAcquire gives the token.
func (s StaticToken) TryAcquire(context.Context) (Token, error) { return s.Token, nil }

// Acquire gives the token.
func (s StaticToken) Acquire(context.Context) (Token, error) { return s.Token, nil }

// NextToken gives the same token.
func (s StaticToken) NextToken(context.Context) (Token, error) { return s.Token, nil }

// Release does nothing.
func (s StaticToken) Release(context.Context) error { return nil }

// Lost is nil: a static token is never lost.
func (s StaticToken) Lost() <-chan struct{} { return nil }
