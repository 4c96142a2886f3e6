package fencing

import (
	"context"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgconn/stmtcache"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// ForPgBouncer makes a pool configuration safe behind PgBouncer in
// transaction mode: statements are described once and then sent unnamed
// (no server-side prepared statement outlives its transaction).  The
// token needs nothing more: it is bound per transaction.
func ForPgBouncer(cfg *pgxpool.Config) *pgxpool.Config {
	cfg.ConnConfig.BuildStatementCache = func(conn *pgconn.PgConn) stmtcache.Cache {
		return stmtcache.New(conn, stmtcache.ModeDescribe, 512)
	}
	return cfg
}

// ConnToken is the token the connection's current transaction (or, wrongly,
// session) carries: "" when none, as it must be for every connection a
// pool hands out.
func ConnToken(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...interface{}) pgx.Row
}) (string, error) {
	var s *string
	err := q.QueryRow(ctx, "SELECT current_setting('fencing.token', true)").Scan(&s)
	if s == nil {
		return "", err
	}
	return *s, err
}
