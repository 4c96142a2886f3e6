package fencing

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// Sentinels, for errors.Is.  Every error of the extension's SQLSTATEs
// (SF001 to SF005) matches ErrFencing; a fenced-out write (SF001) matches
// ErrFencedOut and the sentinel of its reason.  The errors carrying a
// server error also unwrap to it: errors.As(err, &pgErr) with a
// *pgconn.PgError still works, so existing handlers keep working.
var (
	// ErrFencing: any error of the extension (SF001 to SF005).
	ErrFencing = errors.New("fencing: refused by the fencing extension")
	// ErrFencedOut: SF001, a newer token won.
	ErrFencedOut = errors.New("fencing: fenced out (SF001)")
	// ErrStaleToken: SF001 stale_token, the lock was lost.  Stop and
	// take the lock again.
	ErrStaleToken = errors.New("fencing: stale token: the lock was lost")
	// ErrTokenAlreadyUsed: SF001 token_already_used, a strict table took
	// this token in another transaction already.  A programming error, not
	// a lost lock: take a new token per transaction (RunFenced with a
	// TokenSource does).
	ErrTokenAlreadyUsed = errors.New("fencing: token already used by another transaction")
	// ErrLeaseExpired: SF001 lease_expired, the built-in lease ran out or
	// was released.
	ErrLeaseExpired = errors.New("fencing: lease expired")
	// ErrClaimTakenOver: SF001 claim_taken_over, an idempotency claim was
	// lost to another owner.
	ErrClaimTakenOver = errors.New("fencing: idempotency claim taken over")
	// ErrTokenRequired: SF002, a write without a token, or with two.
	ErrTokenRequired = errors.New("fencing: token required (SF002)")
	// ErrKeyReused: SF003, an idempotency key reused for another request.
	ErrKeyReused = errors.New("fencing: idempotency key reused for another request (SF003)")
	// ErrKeyInProgress: SF004, another owner runs the idempotency key.
	ErrKeyInProgress = errors.New("fencing: idempotency key in progress (SF004)")
	// ErrGuardAltered: SF005, DDL that would break a protected table's
	// guard.
	ErrGuardAltered = errors.New("fencing: DDL would break a protected table's guard (SF005)")
	// ErrNotAcquired: the lock was not taken (TryAcquire: held by another
	// holder; Acquire: not before the context ended).  No token was issued.
	ErrNotAcquired = errors.New("fencing: lock not acquired")
	// ErrLockLost: the lock was lost while held (NextToken, RunFenced,
	// Release after the loss).
	ErrLockLost = errors.New("fencing: lock lost")
)

// Reason says why a write was fenced out (SQLSTATE SF001); the server
// sends it in the error's constraint name field.
type Reason string

// The reasons of SF001.
const (
	StaleToken       Reason = "stale_token"
	TokenAlreadyUsed Reason = "token_already_used"
	LeaseExpired     Reason = "lease_expired"
	ClaimTakenOver   Reason = "claim_taken_over"
)

var reasonSentinel = map[Reason]error{
	StaleToken:       ErrStaleToken,
	TokenAlreadyUsed: ErrTokenAlreadyUsed,
	LeaseExpired:     ErrLeaseExpired,
	ClaimTakenOver:   ErrClaimTakenOver,
}

// FencedOutError is a write the server refused with SF001.  It is never
// retried.  errors.Is matches ErrFencing, ErrFencedOut and its reason's
// sentinel; it unwraps to the *pgconn.PgError.
type FencedOutError struct {
	Reason Reason
	Token  Token // the token the transaction wrote with (zero if unknown)
	Err    *pgconn.PgError
}

func (e *FencedOutError) Error() string {
	return fmt.Sprintf("fencing: fenced out (%s) with token %s: %s", e.Reason, e.Token, e.Err.Message)
}

// Unwrap gives the server's error.
func (e *FencedOutError) Unwrap() error { return e.Err }

// Is matches ErrFencing, ErrFencedOut and the sentinel of the reason.
func (e *FencedOutError) Is(target error) bool {
	return target == ErrFencing || target == ErrFencedOut || target == reasonSentinel[e.Reason]
}

// Error is a refusal of the extension other than SF001 (SF002 to SF005):
// errors.Is matches ErrFencing and the sentinel of its SQLSTATE; it
// unwraps to the *pgconn.PgError.
type Error struct {
	Sentinel error
	Err      *pgconn.PgError
}

func (e *Error) Error() string { return e.Sentinel.Error() + ": " + e.Err.Message }

// Unwrap gives the server's error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches ErrFencing and the sentinel.
func (e *Error) Is(target error) bool { return target == ErrFencing || target == e.Sentinel }

var codeSentinel = map[string]error{
	"SF002": ErrTokenRequired,
	"SF003": ErrKeyReused,
	"SF004": ErrKeyInProgress,
	"SF005": ErrGuardAltered,
}

// Classify turns a server error (anywhere in err's chain) of the
// extension's SQLSTATEs into this package's typed errors: SF001 into a
// *FencedOutError (the reason from the constraint name; a server that
// sends none gives StaleToken), SF002 to SF005 into an *Error.  Errors
// already classified and all others come back as they are.  token is the
// token the statement wrote with, for the error's text.
func Classify(err error, token Token) error {
	if err == nil {
		return nil
	}
	var fo *FencedOutError
	var fe *Error
	if errors.As(err, &fo) || errors.As(err, &fe) {
		return err
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	if pgErr.Code == "SF001" {
		r := Reason(pgErr.ConstraintName)
		if reasonSentinel[r] == nil {
			r = StaleToken
		}
		return &FencedOutError{Reason: r, Token: token, Err: pgErr}
	}
	if s := codeSentinel[pgErr.Code]; s != nil {
		return &Error{Sentinel: s, Err: pgErr}
	}
	return err
}

// retryable: a serialization failure or a deadlock, and nothing else.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// lockLost is ErrLockLost with the source's words.
type lockLostError struct{ what string }

func (e *lockLostError) Error() string        { return "fencing: lock lost: " + e.what }
func (e *lockLostError) Is(target error) bool { return target == ErrLockLost }

func lost(format string, args ...any) error {
	return &lockLostError{what: fmt.Sprintf(format, args...)}
}

// notAcquired is ErrNotAcquired, also matching the context's error when
// the wait ended with it.
type notAcquiredError struct {
	what string
	ctx  error
}

func (e *notAcquiredError) Error() string {
	if e.ctx != nil {
		return "fencing: lock not acquired: " + e.what + ": " + e.ctx.Error()
	}
	return "fencing: lock not acquired: " + e.what
}
func (e *notAcquiredError) Is(target error) bool { return target == ErrNotAcquired }
func (e *notAcquiredError) Unwrap() error         { return e.ctx }
