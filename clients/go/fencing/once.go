package fencing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Outcome tells what RunOnce did with a key: State is "started" or
// "resumed" (fn ran with claim Claim; RecoveryPoint is how far a previous
// owner got) or "done" (a recorded result was replayed, fn did not run).
// It is filled before fn runs, so fn may read it.
type Outcome struct {
	State         string
	Claim         Token
	RecoveryPoint string
}

// WithOutcome fills *out with what RunOnce did.
func WithOutcome(out *Outcome) Option { return func(o *options) { o.outcome = out } }

// WithLease sets the claim's lease (default 1 minute).
func WithLease(d time.Duration) Option { return func(o *options) { o.lease = d } }

// WithRetention sets how long a key is kept (default 24 hours).
func WithRetention(d time.Duration) Option { return func(o *options) { o.retention = d } }

// WithClaimFirst commits the claim (idem_begin) in a transaction of its
// own before fn's transaction: for requests whose fn calls out and may be
// slow.  Another caller resumes the key once the lease runs out, and then
// this fn's transaction fails with ClaimTakenOver and records nothing.
// When fn fails, the claim is abandoned so that a retry resumes at once.
func WithClaimFirst() Option { return func(o *options) { o.claimFirst = true } }

// WithClaimFence also binds the claim token to fn's transaction
// (set_token), for tables protected in key scope by the request's key.
func WithClaimFence() Option { return func(o *options) { o.claimFence = true } }

// WithNoWait: a concurrent transaction on the same key gives ErrKeyInProgress
// at once instead of waiting for it.
func WithNoWait() Option { return func(o *options) { o.noWait = true } }

const idemBeginSQL = `SELECT state, token::text, result::text, recovery_point
  FROM fencing.idem_begin($1, $2::text::jsonb, $3::text::interval, $4::text::interval, $5)`

// RunOnce runs fn at most once for key: idem_begin claims the key; a new
// (or resumed) claim runs fn and records its result with idem_complete in
// the same transaction as fn's writes; a key already done returns the
// recorded result (JSON, decoded into T) without running fn; a key another
// owner is running gives ErrKeyInProgress (SF004), a key used with another
// request ErrKeyReused (SF003).  request is encoded as JSON.  db is as for
// RunFenced; WithAttempts retries 40001 and 40P01 only.
func RunOnce[T any](ctx context.Context, db Beginner, key string, request any, fn func(tx pgx.Tx) (T, error), opts ...Option) (T, error) {
	o := collect(opts)
	var zero T
	req, err := json.Marshal(request)
	if err != nil {
		return zero, fmt.Errorf("fencing: request: %w", err)
	}
	var v T
	err = retry(ctx, &o, func() (Token, error) {
		var claim Token
		err := withConn(ctx, db, &o, func(conn *pgx.Conn) error {
			var err error
			if o.claimFirst {
				v, claim, err = runOnceClaimFirst(ctx, conn, key, req, fn, &o)
			} else {
				v, claim, err = runOnceOneTx(ctx, conn, key, req, fn, &o)
			}
			return err
		}, func(b Beginner) error {
			if o.claimFirst {
				return errors.New("fencing: RunOnce with WithClaimFirst needs a pool or a connection")
			}
			return pgx.BeginFunc(ctx, b, func(tx pgx.Tx) error {
				var err error
				v, claim, err = onceInTx(ctx, tx, key, req, fn, &o)
				return err
			})
		})
		return claim, err
	})
	if err != nil {
		return zero, err
	}
	return v, nil
}

type beginRow struct {
	state    string
	token    *string
	result   *string
	recovery *string
}

func idemBegin(ctx context.Context, q Querier, key string, req []byte, o *options) (beginRow, Token, error) {
	var r beginRow
	var tok Token
	err := q.QueryRow(ctx, idemBeginSQL, key, string(req), interval(o.lease), interval(o.retention), !o.noWait).
		Scan(&r.state, &r.token, &r.result, &r.recovery)
	if err != nil {
		return r, tok, err
	}
	if r.token != nil {
		if tok, err = ParseToken(*r.token); err != nil {
			return r, tok, err
		}
	}
	if o.outcome != nil {
		*o.outcome = Outcome{State: r.state, Claim: tok}
		if r.recovery != nil {
			o.outcome.RecoveryPoint = *r.recovery
		}
	}
	return r, tok, nil
}

func replay[T any](r beginRow) (T, error) {
	var v T
	if r.result == nil {
		return v, nil
	}
	if err := json.Unmarshal([]byte(*r.result), &v); err != nil {
		return v, fmt.Errorf("fencing: the recorded result does not decode: %w", err)
	}
	return v, nil
}

func complete[T any](ctx context.Context, tx pgx.Tx, key string, claim Token, v T) error {
	res, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("fencing: result: %w", err)
	}
	_, err = tx.Exec(ctx, "SELECT fencing.idem_complete($1, $2::text::fencing.fence, $3::text::jsonb)",
		key, claim.String(), string(res))
	return err
}

// One transaction: idem_begin, fn, idem_complete, commit (BEGIN and the
// check for a leftover session token in one round trip, as RunFenced).  A
// concurrent caller of the same key waits for it and then replays.
func runOnceOneTx[T any](ctx context.Context, conn *pgx.Conn, key string, req []byte, fn func(pgx.Tx) (T, error), o *options) (T, Token, error) {
	var v T
	var claim Token
	_, err := fencedOnConn(ctx, conn, nil, func(tx pgx.Tx) error {
		var err error
		v, claim, err = onceInTx(ctx, tx, key, req, fn, o)
		return err
	}, o)
	return v, claim, err
}

// onceInTx is the body of the one-transaction RunOnce.
func onceInTx[T any](ctx context.Context, tx pgx.Tx, key string, req []byte, fn func(pgx.Tx) (T, error), o *options) (T, Token, error) {
	var zero T
	r, claim, err := idemBegin(ctx, tx, key, req, o)
	if err != nil {
		return zero, claim, err
	}
	if r.state == "done" {
		v, err := replay[T](r)
		return v, claim, err
	}
	if o.claimFence {
		if _, err := tx.Exec(ctx, "SELECT fencing.set_token($1)", claim.String()); err != nil {
			return zero, claim, err
		}
	}
	v, err := fn(tx)
	if err != nil {
		return zero, claim, err
	}
	if err := complete(ctx, tx, key, claim, v); err != nil {
		return zero, claim, err
	}
	return v, claim, nil
}

// Claim first (committed), then fn's transaction with idem_complete.
func runOnceClaimFirst[T any](ctx context.Context, conn *pgx.Conn, key string, req []byte, fn func(pgx.Tx) (T, error), o *options) (T, Token, error) {
	var zero T
	r, claim, err := idemBegin(ctx, conn, key, req, o)
	if err != nil {
		return zero, claim, err
	}
	if r.state == "done" {
		v, err := replay[T](r)
		return v, claim, err
	}
	var v T
	var src TokenSource
	if o.claimFence {
		src = StaticToken{claim}
	}
	_, err = fencedOnConn(ctx, conn, src, func(tx pgx.Tx) error {
		var err error
		if v, err = fn(tx); err != nil {
			return err
		}
		return complete(ctx, tx, key, claim, v)
	}, o)
	if err != nil {
		var fo *FencedOutError
		if !errors.As(Classify(err, claim), &fo) {
			abandon(ctx, conn, key, claim)
		}
		return zero, claim, err
	}
	return v, claim, nil
}

// abandon gives a claim up (so that a retry resumes at once); a claim
// already lost is left alone.
func abandon(ctx context.Context, conn *pgx.Conn, key string, claim Token) {
	if conn.IsClosed() {
		return
	}
	conn.Exec(context.WithoutCancel(ctx), "SELECT fencing.idem_abandon($1, $2::text::fencing.fence)", key, claim.String())
}
