package fencing

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

// Querier is what the token sources need of a database handle:
// *pgxpool.Pool, *pgx.Conn and pgx.Tx all are.
type Querier interface {
	Exec(ctx context.Context, sql string, arguments ...interface{}) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...interface{}) pgx.Row
}

// DefaultGenerationTable is where lock services' generations are kept:
// (service text primary key, generation int).  A lock service that can
// lose its history (etcd restored from a snapshot, ZooKeeper or Redis
// losing their data) counts again from lower numbers; bump the service's
// generation (BumpGeneration) once it is back, and every token issued
// since beats every token issued before.
const DefaultGenerationTable = "fencing_lock_generations"

func generationIdent(table string) string {
	if table == "" {
		table = DefaultGenerationTable
	}
	return pgx.Identifier(strings.Split(table, ".")).Sanitize()
}

// EnsureGenerationTable creates the generation table if it does not exist.
func EnsureGenerationTable(ctx context.Context, db Querier, table string) error {
	_, err := db.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+generationIdent(table)+
		" (service text PRIMARY KEY, generation int NOT NULL DEFAULT 0)")
	return err
}

// ReadGeneration gives service's generation (0 when it has no row).
func ReadGeneration(ctx context.Context, db Querier, table, service string) (int64, error) {
	var g int64
	err := db.QueryRow(ctx, "SELECT coalesce((SELECT generation FROM "+generationIdent(table)+
		" WHERE service = $1), 0)::bigint", service).Scan(&g)
	return g, err
}

// BumpGeneration adds one to service's generation and returns it.
func BumpGeneration(ctx context.Context, db Querier, table, service string) (int64, error) {
	t := generationIdent(table)
	var g int64
	err := db.QueryRow(ctx, "INSERT INTO "+t+" AS g (service, generation) VALUES ($1, 1)"+
		" ON CONFLICT (service) DO UPDATE SET generation = g.generation + 1 RETURNING generation::bigint",
		service).Scan(&g)
	return g, err
}

// StaticSource always gives the same token (tests, or a token handed over
// by another system).
type StaticSource struct{ Token Token }

func (s StaticSource) Acquire(context.Context) (Token, error) { return s.Token, nil }
func (s StaticSource) Release(context.Context) error          { return nil }

// LeaseSource takes the extension's own lease: fencing.lease_acquire
// gives a token while the lease is free or expired (server clock) and
// ErrNotAcquired while another holder's lease is live.  Protect tables
// with fencing.protect(..., lease => Name) so that a write is refused
// (LeaseExpired) once the lease ran out, even before anyone took it over.
type LeaseSource struct {
	DB     Querier
	Name   string
	Holder string
	TTL    time.Duration
	token  Token
	held   bool
}

// NewLeaseSource: the lease Name, taken as holder for ttl.
func NewLeaseSource(db Querier, name, holder string, ttl time.Duration) *LeaseSource {
	return &LeaseSource{DB: db, Name: name, Holder: holder, TTL: ttl}
}

func (s *LeaseSource) Acquire(ctx context.Context) (Token, error) {
	var t *string
	err := s.DB.QueryRow(ctx, "SELECT fencing.lease_acquire($1, $2, $3::float8 * interval '1 second')::text",
		s.Name, s.Holder, s.TTL.Seconds()).Scan(&t)
	if err != nil {
		return Token{}, err
	}
	if t == nil {
		return Token{}, ErrNotAcquired
	}
	tok, err := ParseToken(*t)
	if err != nil {
		return Token{}, err
	}
	s.token, s.held = tok, true
	return tok, nil
}

// Renew extends the lease by TTL; false once it expired, was released or
// was taken over.
func (s *LeaseSource) Renew(ctx context.Context) (bool, error) {
	if !s.held {
		return false, ErrNotHeld
	}
	var ok bool
	err := s.DB.QueryRow(ctx, "SELECT fencing.lease_renew($1, $2::text::fencing.fence, $3::float8 * interval '1 second')",
		s.Name, s.token.String(), s.TTL.Seconds()).Scan(&ok)
	return ok, err
}

// Release gives the lease up; ErrNotHeld when it was no longer ours.
func (s *LeaseSource) Release(ctx context.Context) error {
	if !s.held {
		return ErrNotHeld
	}
	s.held = false
	var ok bool
	err := s.DB.QueryRow(ctx, "SELECT fencing.lease_release($1, $2::text::fencing.fence)", s.Name, s.token.String()).Scan(&ok)
	if err == nil && !ok {
		err = ErrNotHeld
	}
	return err
}
