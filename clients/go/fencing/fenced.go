package fencing

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Beginner is what RunFenced takes as its database, as pgx.BeginFunc
// does: a *pgxpool.Pool, a *pgxpool.Conn, a *pgx.Conn, or a pgx.Tx (the
// fenced transaction is then a savepoint of it).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Option changes RunFenced, RunLocked, RunFencedMany and RunOnce.
type Option func(*options)

type options struct {
	attempts      int
	iso           pgx.TxIsoLevel
	separateBegin bool
	logger        *slog.Logger
	// RunOnce
	lease      time.Duration
	retention  time.Duration
	claimFirst bool
	claimFence bool
	noWait     bool
	outcome    *Outcome
}

func collect(opts []Option) options {
	o := options{attempts: 1, lease: time.Minute, retention: 24 * time.Hour}
	for _, f := range opts {
		f(&o)
	}
	if o.attempts < 1 {
		o.attempts = 1
	}
	if o.logger == nil {
		o.logger = slog.Default()
	}
	return o
}

// WithAttempts tries the whole transaction up to n times (default 1: no
// retry) when it fails with a serialization failure (40001) or a deadlock
// (40P01), and never for anything else: a refusal of the extension
// (SF001 to SF005) is never retried.  Each try runs on a connection
// acquired anew from the pool and with a new token from the source.
// A try whose COMMIT was sent when the connection broke may have
// committed: make such transactions idempotent (RunOnce).
func WithAttempts(n int) Option { return func(o *options) { o.attempts = n } }

// WithIsolation runs the transaction at this isolation level.
func WithIsolation(iso pgx.TxIsoLevel) Option { return func(o *options) { o.iso = iso } }

// WithSeparateBegin begins with pgx's own Begin, then binds the token in
// a statement of its own: one round trip more, and the pgx.Tx given to
// the function is pgx's own (LargeObjects works).  By default BEGIN and
// the token go to the server together, in one round trip.
func WithSeparateBegin() Option { return func(o *options) { o.separateBegin = true } }

// WithLogger logs the warnings of fenced transactions (a pooled
// connection that carried a session-level token) there instead of
// slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// RunFenced runs fn in a fenced transaction: BEGIN, a new token from
// source bound with fencing.set_token($1) (both in one round trip), fn,
// COMMIT.  With a lock (LeaseSource, EtcdSource, ZooKeeperSource,
// RedisSource) every transaction takes source.NextToken(), so a holder
// writes as many transactions as it likes under one lock on strict tables
// and each proves the lock is still held (ErrLockLost when it is not);
// with a StaticToken it uses that token.
//
// A refusal comes back typed: a *FencedOutError for SF001 (errors.Is with
// ErrStaleToken, ErrTokenAlreadyUsed, ErrLeaseExpired, ErrClaimTakenOver,
// ErrFencedOut, ErrFencing), an *Error for SF002 to SF005; each unwraps to
// the *pgconn.PgError.  Only 40001 and 40P01 are retried, and only with
// WithAttempts.
//
// The connection goes back to its pool as it came: no token (the token is
// transaction-local), no open transaction.  A pooled connection that
// carries a session-level fencing.token (a SET left by other code) is
// reset inside the transaction and logged as a warning.
func RunFenced(ctx context.Context, db Beginner, source TokenSource, fn func(pgx.Tx) error, opts ...Option) error {
	o := collect(opts)
	return retry(ctx, &o, func() (Token, error) {
		var tok Token
		err := withConn(ctx, db, &o, func(conn *pgx.Conn) error {
			var err error
			tok, err = fencedOnConn(ctx, conn, source, fn, &o)
			return err
		}, func(b Beginner) error {
			var err error
			tok, err = fencedOnBeginner(ctx, b, source, fn, &o)
			return err
		})
		return tok, err
	})
}

// RunLocked takes the lock (source.Acquire: waiting until ctx ends),
// runs fn in a fenced transaction (RunFenced) and releases the lock.
func RunLocked(ctx context.Context, db Beginner, source TokenSource, fn func(pgx.Tx) error, opts ...Option) error {
	if _, err := source.Acquire(ctx); err != nil {
		return err
	}
	err := RunFenced(ctx, db, source, fn, opts...)
	if rerr := source.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil && !errors.Is(rerr, ErrLockLost) {
		return rerr
	}
	return err
}

// RunFencedMany runs fn in one transaction under several locks: a new
// token from each source (NextToken), given to fn by the same names, and
// no session token: write each key's token into its rows' fence column
// (INSERT INTO ledger (acct, amount, fence) VALUES ($1, $2, $3)), and the
// guard judges each row by its own token.  A stale token on any row aborts
// the whole transaction.  Errors, retries and pools as RunFenced.
func RunFencedMany(ctx context.Context, db Beginner, sources map[string]TokenSource, fn func(tx pgx.Tx, tokens map[string]Token) error, opts ...Option) error {
	o := collect(opts)
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	return retry(ctx, &o, func() (Token, error) {
		tokens := make(map[string]Token, len(sources))
		for _, n := range names {
			tok, err := sources[n].NextToken(ctx)
			if err != nil {
				return Token{}, fmt.Errorf("fencing: the token of %s: %w", n, err)
			}
			tokens[n] = tok
		}
		run := func(tx pgx.Tx) error { return fn(tx, tokens) }
		err := withConn(ctx, db, &o, func(conn *pgx.Conn) error {
			_, err := fencedOnConn(ctx, conn, nil, run, &o)
			return err
		}, func(b Beginner) error {
			return pgx.BeginFunc(ctx, b, run)
		})
		return Token{}, err
	})
}

// retry runs one try after another while they fail with 40001 or 40P01,
// up to o.attempts; the error is classified with the token of the try.
func retry(ctx context.Context, o *options, try func() (Token, error)) error {
	for n := 1; ; n++ {
		tok, err := try()
		if err == nil {
			return nil
		}
		if n < o.attempts && retryable(err) && ctx.Err() == nil {
			continue
		}
		return Classify(err, tok)
	}
}

// withConn runs onConn on a connection of db (one acquired from a pool
// for this try), or onBeginner where db is something else.
func withConn(ctx context.Context, db Beginner, o *options, onConn func(*pgx.Conn) error, onBeginner func(Beginner) error) error {
	if o.separateBegin {
		return onBeginner(db)
	}
	switch d := db.(type) {
	case *pgxpool.Pool:
		c, err := d.Acquire(ctx)
		if err != nil {
			return err
		}
		defer c.Release() // a connection left in a transaction is destroyed
		return onConn(c.Conn())
	case *pgxpool.Conn:
		return onConn(d.Conn())
	case *pgx.Conn:
		return onConn(d)
	}
	return onBeginner(db)
}

const (
	setTokenSQL     = "SELECT fencing.set_token($1)"
	leftoverSQL     = "SELECT pg_catalog.current_setting('fencing.token', true)"
	resetLeftover   = "RESET fencing.token"
	leaseNextFailed = "SF002" // set_token(NULL): lease_next found the lease not held
)

func beginSQL(iso pgx.TxIsoLevel) string {
	if iso == "" {
		return "BEGIN"
	}
	return "BEGIN ISOLATION LEVEL " + string(iso)
}

// tokenStatement is the statement that binds the transaction's token:
// lease_next inside set_token for a lease, set_token of NextToken's
// token for the other sources.  done (lease only) is called with the
// outcome.
func tokenStatement(ctx context.Context, source TokenSource) (sql string, params [][]byte, tok Token, done func(Token, bool, bool), err error) {
	if ls, ok := source.(*LeaseSource); ok {
		sql, params, done, err = ls.inTx()
		return sql, params, Token{}, done, err
	}
	tok, err = source.NextToken(ctx)
	if err != nil {
		return "", nil, Token{}, nil, err
	}
	return setTokenSQL, [][]byte{[]byte(tok.String())}, tok, nil, nil
}

// fencedOnConn is one try on conn: in one round trip (pgconn's pipeline)
// BEGIN, the check for a session-level token left on the connection, and
// the statement that binds the token (none when source is nil); then fn
// and COMMIT.  It returns the token the transaction wrote with.
func fencedOnConn(ctx context.Context, conn *pgx.Conn, source TokenSource, fn func(pgx.Tx) error, o *options) (tok Token, err error) {
	var stmt string
	var params [][]byte
	var done func(Token, bool, bool)
	if source != nil {
		if stmt, params, tok, done, err = tokenStatement(ctx, source); err != nil {
			return tok, err
		}
	}
	committed, lostLease := false, false
	if done != nil {
		defer func() { done(tok, committed, lostLease) }()
	}

	// On a connection that keeps prepared statements (pgx's default
	// mode) the three are prepared once per connection and then only
	// bound; otherwise (PgBouncer in transaction mode: ForPgBouncer) they
	// go unnamed, parsed each time, and nothing outlives the transaction.
	names := [3]string{}
	if conn.Config().DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		for i, q := range [3]string{beginSQL(o.iso), leftoverSQL, stmt} {
			if q == "" {
				continue
			}
			sd, err := conn.Prepare(ctx, "fencing_"+strconv.Itoa(len(q))+"_"+strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(q))), 16), q)
			if err != nil {
				abort(ctx, conn)
				return tok, err
			}
			names[i] = sd.Name
		}
	}
	pc := conn.PgConn()
	p := pc.StartPipeline(ctx)
	for i, q := range [3]string{beginSQL(o.iso), leftoverSQL, stmt} {
		var ps [][]byte
		if i == 2 {
			ps = params
		}
		switch {
		case q == "":
		case names[i] != "":
			p.SendQueryPrepared(names[i], ps, nil, nil)
		default:
			p.SendQueryParams(q, ps, nil, nil, nil)
		}
	}
	var values []*string // the one value of each SELECT
	var first error
	if err := p.Sync(); err != nil {
		first = err
	}
	for first == nil {
		res, err := p.GetResults()
		if err != nil {
			first = err
			break
		}
		rr, ok := res.(*pgconn.ResultReader)
		if !ok {
			break // the Sync: every result read
		}
		r := rr.Read()
		if r.Err != nil {
			first = r.Err
			break
		}
		if len(r.Rows) == 1 && len(r.Rows[0]) == 1 {
			var v *string
			if r.Rows[0][0] != nil {
				s := string(r.Rows[0][0])
				v = &s
			}
			values = append(values, v)
		}
	}
	if cerr := p.Close(); first == nil && cerr != nil {
		first = cerr
	}
	if first != nil {
		abort(ctx, conn)
		var pgErr *pgconn.PgError
		if done != nil && errors.As(first, &pgErr) && pgErr.Code == leaseNextFailed {
			lostLease = true
			return tok, lost("lease: expired, released or taken over (lease_next gave no token)")
		}
		return tok, first
	}
	if stmt != "" {
		if len(values) != 2 || values[1] == nil {
			abort(ctx, conn)
			return tok, errors.New("fencing: set_token returned no token")
		}
		if tok, err = ParseToken(*values[1]); err != nil {
			abort(ctx, conn)
			return tok, err
		}
	}
	if len(values) > 0 && values[0] != nil && *values[0] != "" {
		// a session-level token left on this connection by other code:
		// reset it in this transaction (behind PgBouncer a statement
		// outside it may run on another server connection), bind ours again
		o.logger.Warn("fencing: a pooled connection carried a session-level fencing.token; reset it",
			"pid", pc.PID(), "token", *values[0])
		if err := execParams(ctx, pc, resetLeftover); err != nil {
			abort(ctx, conn)
			return tok, err
		}
		if stmt != "" {
			if err := execParams(ctx, pc, setTokenSQL, []byte(tok.String())); err != nil {
				abort(ctx, conn)
				return tok, err
			}
		}
	}

	tx := &fencedTx{conn: conn}
	if err := fn(tx); err != nil {
		tx.Rollback(ctx)
		return tok, err
	}
	if err := tx.Commit(ctx); err != nil {
		return tok, err
	}
	committed = true
	return tok, nil
}

// fencedOnBeginner is one try with pgx's own transaction (WithSeparateBegin,
// or a db that is not a pool or a connection): Begin, the token's
// statement, fn, Commit.
func fencedOnBeginner(ctx context.Context, db Beginner, source TokenSource, fn func(pgx.Tx) error, o *options) (tok Token, err error) {
	stmt, params, tok, done, err := tokenStatement(ctx, source)
	if err != nil {
		return tok, err
	}
	committed, lostLease := false, false
	if done != nil {
		defer func() { done(tok, committed, lostLease) }()
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return tok, err
	}
	defer tx.Rollback(ctx) // nothing once committed
	args := make([]any, len(params))
	for i, p := range params {
		args[i] = string(p)
	}
	var t *string
	if err := tx.QueryRow(ctx, stmt, args...).Scan(&t); err != nil {
		var pgErr *pgconn.PgError
		if done != nil && errors.As(err, &pgErr) && pgErr.Code == leaseNextFailed {
			lostLease = true
			return tok, lost("lease: expired, released or taken over (lease_next gave no token)")
		}
		return tok, err
	}
	if t == nil {
		return tok, errors.New("fencing: set_token returned no token")
	}
	if tok, err = ParseToken(*t); err != nil {
		return tok, err
	}
	if err := fn(tx); err != nil {
		return tok, err
	}
	if err := tx.Commit(ctx); err != nil {
		return tok, err
	}
	committed = true
	return tok, nil
}

// execParams runs one statement with text parameters, unnamed (nothing
// outlives it: fine behind PgBouncer).
func execParams(ctx context.Context, pc *pgconn.PgConn, sql string, params ...[]byte) error {
	_, err := pc.ExecParams(ctx, sql, params, nil, nil, nil).Close()
	return err
}

// abort rolls back whatever the connection has open; a connection whose
// state is unknown is closed (a pool then destroys it).
func abort(ctx context.Context, conn *pgx.Conn) {
	if conn.IsClosed() || conn.PgConn().TxStatus() == 'I' {
		return
	}
	if _, err := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		conn.Close(context.WithoutCancel(ctx))
	}
}
