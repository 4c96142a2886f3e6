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

// ErrLockLost is SF001: the lock that issued the token is gone. Stop; never retry.
var ErrLockLost = errors.New("the lock is gone")

func payRefund(ctx context.Context, conn *pgx.Conn, token, refundID string) error {
	for attempt := 1; ; attempt++ {
		err := pay(ctx, conn, token, refundID)
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &pgErr) && pgErr.Code == "SF001":
			return fmt.Errorf("%w: %s", ErrLockLost, pgErr.Message)
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
	switch {
	case err == nil:
		fmt.Println("committed with token " + token)
	case errors.Is(err, ErrLockLost):
		fmt.Printf("SF001: %v, stopping\n", err)
		os.Exit(3)
	default:
		panic(err)
	}
}
