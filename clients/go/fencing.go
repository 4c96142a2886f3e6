// Package fencing is the Go client of the fencing PostgreSQL extension:
// fencing tokens from a lock service (etcd, ZooKeeper, Redis, the
// extension's own leases, or a static token), fenced transactions that
// bind the token with fencing.set_token and classify refusals, and
// idempotency keys (fencing.idem_begin ... idem_complete).
//
// See README.md beside this file; build offline with ./go.sh (GOPATH
// mode with Debian's Go packages).
package fencing

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgconn"
)

// Token is a fencing token, epoch:counter (fencing.fence in SQL).
// Tokens order by Epoch, then Counter.
type Token struct {
	Epoch   int64
	Counter int64
}

// String gives the token as the extension writes it: "epoch:counter".
func (t Token) String() string {
	return strconv.FormatInt(t.Epoch, 10) + ":" + strconv.FormatInt(t.Counter, 10)
}

// Less is true when t orders before u.
func (t Token) Less(u Token) bool {
	return t.Epoch < u.Epoch || (t.Epoch == u.Epoch && t.Counter < u.Counter)
}

// IsZero is true for the zero Token (no token).
func (t Token) IsZero() bool { return t == Token{} }

// ParseToken reads "epoch:counter" (a bare "counter" means epoch 0).
func ParseToken(s string) (Token, error) {
	s = strings.TrimSpace(s)
	e, c := "0", s
	if i := strings.IndexByte(s, ':'); i >= 0 {
		e, c = s[:i], s[i+1:]
	}
	epoch, err1 := strconv.ParseInt(e, 10, 64)
	counter, err2 := strconv.ParseInt(c, 10, 64)
	if err1 != nil || err2 != nil || epoch < 0 || counter < 0 {
		return Token{}, fmt.Errorf("fencing: bad token %q (want epoch:counter)", s)
	}
	return Token{Epoch: epoch, Counter: counter}, nil
}

// Source gives fencing tokens: Acquire takes the lock (or lease) and
// returns the token of this grant; Release gives it back.  A Source holds
// at most one grant at a time and is not safe for concurrent use: give
// each worker its own.
type Source interface {
	Acquire(ctx context.Context) (Token, error)
	Release(ctx context.Context) error
}

// ErrNotAcquired: the lock is held by someone else (sources that do not
// wait: Redis, leases).  No token was issued.
var ErrNotAcquired = errors.New("fencing: lock not acquired (held by another holder)")

// ErrNotHeld: Release without a grant.
var ErrNotHeld = errors.New("fencing: no lock held")

// Reason says why a write was fenced out (SQLSTATE SF001); the server puts
// it in the error's constraint_name field.
type Reason string

const (
	// StaleToken: a newer token was accepted; the lock is lost. Stop and
	// re-acquire.
	StaleToken Reason = "stale_token"
	// TokenAlreadyUsed: strict table, this token was used by another
	// transaction already. Not a lost lock: take a new token, or retry
	// through an idempotency key.
	TokenAlreadyUsed Reason = "token_already_used"
	// LeaseExpired: the built-in lease ran out or was released.
	LeaseExpired Reason = "lease_expired"
	// ClaimTakenOver: an idempotency claim was lost; record nothing and
	// call idem_begin again.
	ClaimTakenOver Reason = "claim_taken_over"
)

// Sentinels for errors.Is on a *FencedOutError.
var (
	ErrFencedOut        = errors.New("fencing: fenced out (SF001)")
	ErrStaleToken       = errors.New("fencing: stale token")
	ErrTokenAlreadyUsed = errors.New("fencing: token already used")
	ErrLeaseExpired     = errors.New("fencing: lease expired")
	ErrClaimTakenOver   = errors.New("fencing: idempotency claim taken over")
	// ErrTokenRequired: SF002, a write needs a token and had none (or two
	// that differ).
	ErrTokenRequired = errors.New("fencing: token required (SF002)")
	// ErrInProgress: SF004, another owner is running this idempotency key.
	ErrInProgress = errors.New("fencing: idempotency key in progress (SF004)")
	// ErrKeyReused: SF003, the idempotency key was used with another request.
	ErrKeyReused = errors.New("fencing: idempotency key reused with a different request (SF003)")
)

// FencedOutError is the error of a write the server refused with SF001.
// It is never retried by this package.
type FencedOutError struct {
	Reason Reason
	Token  Token // the token the transaction wrote with (zero if none)
	Err    *pgconn.PgError
}

func (e *FencedOutError) Error() string {
	return fmt.Sprintf("fencing: fenced out (%s) with token %s: %s", e.Reason, e.Token, e.Err.Message)
}

func (e *FencedOutError) Unwrap() error { return e.Err }

// Is matches ErrFencedOut and the sentinel of its reason.
func (e *FencedOutError) Is(target error) bool {
	switch target {
	case ErrFencedOut:
		return true
	case ErrStaleToken:
		return e.Reason == StaleToken
	case ErrTokenAlreadyUsed:
		return e.Reason == TokenAlreadyUsed
	case ErrLeaseExpired:
		return e.Reason == LeaseExpired
	case ErrClaimTakenOver:
		return e.Reason == ClaimTakenOver
	}
	return false
}

// pgCodeError wraps a server error of a known SQLSTATE with its sentinel.
type pgCodeError struct {
	sentinel error
	Err      *pgconn.PgError
}

func (e *pgCodeError) Error() string        { return e.sentinel.Error() + ": " + e.Err.Message }
func (e *pgCodeError) Unwrap() error        { return e.Err }
func (e *pgCodeError) Is(target error) bool { return target == e.sentinel }

// Classify turns a server error into this package's typed errors: SF001
// into *FencedOutError (reason from constraint_name; an older server that
// sends none gives StaleToken), SF002 into ErrTokenRequired, SF003 into
// ErrKeyReused, SF004 into ErrInProgress.  Other errors come back as they
// are.
func Classify(err error, tok Token) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "SF001":
		r := Reason(pgErr.ConstraintName)
		switch r {
		case StaleToken, TokenAlreadyUsed, LeaseExpired, ClaimTakenOver:
		default:
			r = StaleToken
		}
		return &FencedOutError{Reason: r, Token: tok, Err: pgErr}
	case "SF002":
		return &pgCodeError{ErrTokenRequired, pgErr}
	case "SF003":
		return &pgCodeError{ErrKeyReused, pgErr}
	case "SF004":
		return &pgCodeError{ErrInProgress, pgErr}
	}
	return err
}

// retryable: serialization failure or deadlock, and nothing else.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// IsFencedOut is errors.As for *FencedOutError.
func IsFencedOut(err error, target **FencedOutError) bool {
	return errors.As(err, target)
}
