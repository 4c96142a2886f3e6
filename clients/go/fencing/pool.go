package fencing

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ForPgBouncer makes a pool configuration safe behind PgBouncer in
// transaction mode: statements are described once and then sent unnamed
// (no server-side prepared statement outlives its transaction).  The
// token needs nothing more: it is bound per transaction.
func ForPgBouncer(cfg *pgxpool.Config) *pgxpool.Config {
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	return cfg
}

// ConnToken is the fencing.token of q's session (or current
// transaction): "" when none, as it must be for every connection a pool
// hands out.
func ConnToken(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (string, error) {
	var s *string
	err := q.QueryRow(ctx, "SELECT pg_catalog.current_setting('fencing.token', true)").Scan(&s)
	if s == nil {
		return "", err
	}
	return *s, err
}
