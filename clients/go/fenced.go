package fencing

import (
	"context"
	"fmt"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgconn/stmtcache"
	"github.com/jackc/pgproto3/v2"
	"github.com/jackc/pgx/v4"
	"github.com/jackc/pgx/v4/pgxpool"
)

// setTokenSQL binds the token as a parameter (never interpolated, never a
// session SET): the setting lasts until the transaction ends, so it works
// behind PgBouncer in transaction mode and no pooled connection keeps it.
const setTokenSQL = "SELECT fencing.set_token($1::text::fencing.fence)"

// setTokenStmt: set_token's prepared statement, on connections whose
// statement cache prepares statements.
const setTokenStmt = "fencing_set_token"

// Option changes RunFenced and RunOnce.
type Option func(*options)

type options struct {
	retries       int
	iso           pgx.TxIsoLevel
	separateBegin bool
	// RunOnce
	lease      float64 // seconds
	retention  float64 // seconds
	claimFirst bool
	claimFence bool
	noWait     bool
	outcome    *Outcome
}

func collect(opts []Option) options {
	o := options{lease: 60, retention: 86400}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithRetry retries the whole transaction up to n more times when it fails
// with a serialization failure (40001) or a deadlock (40P01), and never
// for anything else (a fenced-out write, SF001, is never retried).
func WithRetry(n int) Option { return func(o *options) { o.retries = n } }

// WithIsolation runs the transaction at this isolation level.
func WithIsolation(iso pgx.TxIsoLevel) Option { return func(o *options) { o.iso = iso } }

// WithSeparateBegin begins with pgx's own Begin and then binds the token
// in a statement of its own: one round trip more, but the Tx is pgx's
// (LargeObjects works).  By default BEGIN and set_token go to the server
// together, in one round trip.
func WithSeparateBegin() Option { return func(o *options) { o.separateBegin = true } }

// RunFenced runs fn in a transaction whose writes carry token: begin, bind
// the token (fencing.set_token($1)), fn, commit.  On a refusal it returns
// a *FencedOutError (SF001; errors.Is with ErrStaleToken,
// ErrTokenAlreadyUsed, ErrLeaseExpired, ErrClaimTakenOver, ErrFencedOut)
// or ErrTokenRequired (SF002).  Only 40001/40P01 are retried, and only
// with WithRetry.
func RunFenced(ctx context.Context, pool *pgxpool.Pool, token Token, fn func(tx pgx.Tx) error, opts ...Option) error {
	o := collect(opts)
	for attempt := 0; ; attempt++ {
		err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
			return runFenced(ctx, c.Conn(), token, fn, &o)
		})
		if err == nil {
			return nil
		}
		if attempt < o.retries && retryable(err) {
			continue
		}
		return Classify(err, token)
	}
}

// RunFencedConn is RunFenced on a connection of your own.
func RunFencedConn(ctx context.Context, conn *pgx.Conn, token Token, fn func(tx pgx.Tx) error, opts ...Option) error {
	o := collect(opts)
	for attempt := 0; ; attempt++ {
		err := runFenced(ctx, conn, token, fn, &o)
		if err == nil {
			return nil
		}
		if attempt < o.retries && retryable(err) {
			continue
		}
		return Classify(err, token)
	}
}

func runFenced(ctx context.Context, conn *pgx.Conn, token Token, fn func(tx pgx.Tx) error, o *options) error {
	tx, err := beginFenced(ctx, conn, &token, o)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // nothing once committed
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func beginSQL(iso pgx.TxIsoLevel) string {
	if iso == "" {
		return "begin"
	}
	return "begin isolation level " + string(iso)
}

// beginFenced opens a transaction and, when token is not nil, binds it.
func beginFenced(ctx context.Context, conn *pgx.Conn, token *Token, o *options) (pgx.Tx, error) {
	if o.separateBegin {
		tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: o.iso})
		if err != nil {
			return nil, err
		}
		if token != nil {
			if _, err := tx.Exec(ctx, setTokenSQL, token.String()); err != nil {
				tx.Rollback(ctx)
				return nil, err
			}
		}
		return tx, nil
	}
	// BEGIN and set_token in one write and one round trip (see pipeline).
	stmt := ""
	if token != nil {
		if sc := conn.StatementCache(); sc != nil && sc.Mode() == stmtcache.ModePrepare {
			// a connection that may keep prepared statements: set_token
			// is prepared once per connection (pgx remembers it), which
			// saves the server parsing and planning it every time
			if _, err := conn.Prepare(ctx, setTokenStmt, setTokenSQL); err != nil {
				return nil, err
			}
			stmt = setTokenStmt
		}
	}
	if err := pipelineBegin(ctx, conn.PgConn(), beginSQL(o.iso), token, stmt); err != nil {
		if !conn.IsClosed() && conn.PgConn().TxStatus() != 'I' {
			if _, rerr := conn.Exec(ctx, "rollback"); rerr != nil {
				conn.Close(ctx)
			}
		}
		return nil, err
	}
	return &fencedTx{conn: conn}, nil
}

// fencedTx is a pgx.Tx on a transaction begun by beginFenced.  Begin gives
// a savepoint; LargeObjects is not available (use WithSeparateBegin).
type fencedTx struct {
	conn      *pgx.Conn
	savepoint string // "" for the transaction itself
	parent    *fencedTx
	n         int // savepoints made under this one
	closed    bool
}

func (t *fencedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	t.n++
	name := fmt.Sprintf("fencing_sp_%d", t.n)
	if t.savepoint != "" {
		name = t.savepoint + "_" + fmt.Sprint(t.n)
	}
	if _, err := t.conn.Exec(ctx, "savepoint "+name); err != nil {
		return nil, err
	}
	return &fencedTx{conn: t.conn, savepoint: name, parent: t}, nil
}

func (t *fencedTx) BeginFunc(ctx context.Context, f func(pgx.Tx) error) error {
	sp, err := t.Begin(ctx)
	if err != nil {
		return err
	}
	defer sp.Rollback(ctx)
	if err := f(sp); err != nil {
		return err
	}
	return sp.Commit(ctx)
}

func (t *fencedTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.savepoint != "" {
		_, err := t.conn.Exec(ctx, "release savepoint "+t.savepoint)
		return err
	}
	tag, err := t.conn.Exec(ctx, "commit")
	if err != nil {
		if t.conn.PgConn().TxStatus() != 'I' {
			t.conn.Close(ctx)
		}
		return err
	}
	if string(tag) == "ROLLBACK" {
		return pgx.ErrTxCommitRollback
	}
	return nil
}

func (t *fencedTx) Rollback(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.savepoint != "" {
		_, err := t.conn.Exec(ctx, "rollback to savepoint "+t.savepoint)
		return err
	}
	if t.conn.IsClosed() {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "rollback"); err != nil {
		// a connection in an unknown state never goes back to a pool
		t.conn.Close(ctx)
		return err
	}
	return nil
}

func (t *fencedTx) CopyFrom(ctx context.Context, tableName pgx.Identifier, columnNames []string, rowSrc pgx.CopyFromSource) (int64, error) {
	if t.closed {
		return 0, pgx.ErrTxClosed
	}
	return t.conn.CopyFrom(ctx, tableName, columnNames, rowSrc)
}

func (t *fencedTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects is not available on the one-round-trip transaction (pgx
// builds it only for its own Tx): use WithSeparateBegin.
func (t *fencedTx) LargeObjects() pgx.LargeObjects {
	panic("fencing: LargeObjects needs RunFenced(..., WithSeparateBegin())")
}

func (t *fencedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Prepare(ctx, name, sql)
}

func (t *fencedTx) Exec(ctx context.Context, sql string, arguments ...interface{}) (pgconn.CommandTag, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Exec(ctx, sql, arguments...)
}

func (t *fencedTx) Query(ctx context.Context, sql string, args ...interface{}) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *fencedTx) QueryRow(ctx context.Context, sql string, args ...interface{}) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *fencedTx) QueryFunc(ctx context.Context, sql string, args []interface{}, scans []interface{}, f func(pgx.QueryFuncRow) error) (pgconn.CommandTag, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.QueryFunc(ctx, sql, args, scans, f)
}

func (t *fencedTx) Conn() *pgx.Conn { return t.conn }

// pipelineBegin sends, in one write, BEGIN (a simple query) and then
// set_token($1) with its parameter bound (type text) and a Sync, and reads
// both answers: one round trip.  set_token is the prepared statement stmt,
// or when stmt is "" an unnamed statement parsed there and then: unnamed
// statements outlive nothing, so that works through PgBouncer in
// transaction mode (pools made with ForPgBouncer, or without a statement
// cache, get it).  (pgconn's own batches write from a
// goroutine of their own, which costs, on a busy machine, about what the
// round trip saves; this does not.)  It returns the first error the
// server sent; the connection is then idle, or in a failed transaction.
func pipelineBegin(ctx context.Context, pc *pgconn.PgConn, begin string, token *Token, stmt string) error {
	buf := (&pgproto3.Query{String: begin}).Encode(nil)
	syncs := 1
	if token != nil {
		if stmt == "" {
			buf = (&pgproto3.Parse{Query: setTokenSQL, ParameterOIDs: []uint32{25}}).Encode(buf)
		}
		buf = (&pgproto3.Bind{PreparedStatement: stmt, Parameters: [][]byte{[]byte(token.String())}}).Encode(buf)
		buf = (&pgproto3.Execute{}).Encode(buf)
		buf = (&pgproto3.Sync{}).Encode(buf)
		syncs = 2
	}
	if err := pc.SendBytes(ctx, buf); err != nil {
		return err
	}
	var first error
	for ready := 0; ready < syncs; {
		msg, err := pc.ReceiveMessage(ctx)
		if err != nil {
			return err // the connection is broken (pgconn closed it)
		}
		switch m := msg.(type) {
		case *pgproto3.ReadyForQuery:
			ready++
		case *pgproto3.ErrorResponse:
			if first == nil {
				first = pgconn.ErrorResponseToPgError(m)
			}
		}
	}
	return first
}
