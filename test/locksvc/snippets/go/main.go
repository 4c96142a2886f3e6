// Pay a refund with the token of a lock (Go, pgx).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

// Refused is SF001: the token was refused. Never retry with the same token.
type Refused struct {
	Reason  string // stale_token, token_already_used, lease_expired, claim_taken_over
	Message string
}

func (e *Refused) Error() string { return e.Message }

func payRefund(ctx context.Context, conn *pgx.Conn, token, refundID string) error {
	for attempt := 1; ; attempt++ {
		err := pay(ctx, conn, token, refundID)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "SF001":
			// why, in the error's constraint name field (never the text); a
			// server without it only says: a newer token was accepted
			reason := pgErr.ConstraintName
			if reason == "" {
				reason = "stale_token"
			}
			return &Refused{Reason: reason, Message: pgErr.Message}
		case errors.As(err, &pgErr) && pgErr.Code == "40001" && attempt < 5:
			fmt.Println("40001: serialization failure, retrying")
		default:
			return err
		}
	}
}

func pay(ctx context.Context, conn *pgx.Conn, token, refundID string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	// the token as a bound parameter: SET LOCAL cannot take one
	if _, err := tx.Exec(ctx, "SELECT fencing.set_token($1)", token); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "UPDATE refunds SET state = 'paid' WHERE id = $1", refundID); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func main() {
	ctx := context.Background()
	dsn, token, refundID := os.Args[1], os.Args[2], os.Args[3]
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	err = payRefund(ctx, conn, token, refundID)
	var refused *Refused
	switch {
	case err == nil:
		fmt.Println("committed with token " + token)
	case errors.As(err, &refused) && refused.Reason == "token_already_used":
		// not a lost lock: this token wrote in another transaction already:
		// take a new one from the lock for each transaction
		fmt.Printf("SF001 %s: %s: stopping\n", refused.Reason, refused.Message)
		conn.Close(ctx)
		os.Exit(4)
	case errors.As(err, &refused):
		// stale_token, lease_expired (claim_taken_over: the same for a
		// claim): the lock is gone; re-acquire it before any new work
		fmt.Printf("SF001: %s: the lock is gone (%s), stopping\n", refused.Message, refused.Reason)
		conn.Close(ctx)
		os.Exit(3)
	default:
		panic(err)
	}
}
