package fencing

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// fencedTx is the pgx.Tx of a transaction that RunFenced began in one
// round trip with its token.  pgx makes its own Tx only by sending BEGIN
// alone (Conn.BeginTx), so this one stands for it: every statement goes
// to the *pgx.Conn as pgx's own Tx sends it, Begin makes a savepoint, and
// Commit and Rollback end the transaction (or savepoint).  LargeObjects is
// not available: RunFenced(..., WithSeparateBegin()) gives pgx's own Tx.
type fencedTx struct {
	conn      *pgx.Conn
	savepoint string // "" for the transaction itself
	n         *int   // savepoints made in this transaction
	closed    bool
}

var _ pgx.Tx = (*fencedTx)(nil)

// Begin makes a savepoint, a pgx.Tx whose Commit releases it and whose
// Rollback rolls back to it.
func (t *fencedTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	if t.n == nil {
		t.n = new(int)
	}
	*t.n++
	name := "fencing_sp_" + strconv.Itoa(*t.n)
	if _, err := t.conn.Exec(ctx, "SAVEPOINT "+name); err != nil {
		return nil, err
	}
	return &fencedTx{conn: t.conn, savepoint: name, n: t.n}, nil
}

func (t *fencedTx) Commit(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	t.closed = true
	if t.savepoint != "" {
		_, err := t.conn.Exec(ctx, "RELEASE SAVEPOINT "+t.savepoint)
		return err
	}
	tag, err := t.conn.Exec(ctx, "COMMIT")
	if err != nil {
		abort(ctx, t.conn)
		return err
	}
	if tag.String() == "ROLLBACK" {
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
		_, err := t.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT "+t.savepoint)
		return err
	}
	if t.conn.IsClosed() {
		return nil
	}
	if _, err := t.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		// a connection in an unknown state never goes back to a pool
		t.conn.Close(context.WithoutCancel(ctx))
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

// LargeObjects is not available here (pgx builds it only for its own
// Tx): use RunFenced(..., WithSeparateBegin()).
func (t *fencedTx) LargeObjects() pgx.LargeObjects {
	panic("fencing: LargeObjects needs pgx's own Tx: RunFenced(..., fencing.WithSeparateBegin())")
}

func (t *fencedTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Prepare(ctx, name, sql)
}

func (t *fencedTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.closed {
		return pgconn.CommandTag{}, pgx.ErrTxClosed
	}
	return t.conn.Exec(ctx, sql, args...)
}

func (t *fencedTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.closed {
		return nil, pgx.ErrTxClosed
	}
	return t.conn.Query(ctx, sql, args...)
}

func (t *fencedTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *fencedTx) Conn() *pgx.Conn { return t.conn }
