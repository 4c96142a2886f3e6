// etcdmutex: a worker of the locksvc suite that takes its lock with etcd's
// Go client (clientv3/concurrency.Mutex, as Go services do) and fences
// its writes with the revision that created its lock key (the key's
// CreateRevision), written to PostgreSQL with pgx.
//
//	etcdmutex -who B -dsn DSN -etcd URL -lock PREFIX [-ttl 2]
//
// The same line protocol as worker.py: "locked {json}" once the lock is
// held, then "write KIND KEY [MAPPING]", "unlock", "quit" on stdin.
// MAPPING: rev (default) fence(generation, create revision), nogen
// fence(0, create revision).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

func say(kind string, fields map[string]interface{}) {
	b, _ := json.Marshal(fields)
	fmt.Printf("%s %s\n", kind, b)
}

func main() {
	who := flag.String("who", "", "worker name")
	dsn := flag.String("dsn", "", "PostgreSQL connection string")
	endpoint := flag.String("etcd", "", "etcd client URL")
	prefix := flag.String("lock", "", "the lock's key prefix")
	ttl := flag.Int("ttl", 2, "session (lease) TTL in seconds")
	flag.String("run-dir", "", "the suite's run directory")
	flag.Parse()
	ctx := context.Background()

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{*endpoint}, DialTimeout: 30 * time.Second})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(*ttl))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	mutex := concurrency.NewMutex(session, *prefix)
	if err := mutex.Lock(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// the token: the revision that created our key, not the grant's header
	resp, err := cli.Get(ctx, mutex.Key())
	if err != nil || len(resp.Kvs) != 1 {
		fmt.Fprintln(os.Stderr, "cannot read the lock key", err)
		os.Exit(1)
	}
	createRev := resp.Kvs[0].CreateRevision

	db, err := pgx.Connect(ctx, *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var generation int64
	// read the generation when the lock is taken, never later
	if err := db.QueryRow(ctx, "SELECT generation FROM lock_generations WHERE service = 'etcd'").Scan(&generation); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	say("locked", map[string]interface{}{
		"lock": mutex.Key(), "create_revision": createRev,
		"header_revision": mutex.Header().Revision, "generation": generation,
		"token": fmt.Sprintf("%d:%d", generation, createRev)})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "write":
			mapping := ""
			if len(words) > 3 {
				mapping = words[3]
			}
			gen := generation
			if mapping == "nogen" {
				gen = 0
			}
			token := fmt.Sprintf("%d:%d", gen, createRev)
			err := write(ctx, db, words[1], words[2], *who, token)
			var pgErr *pgconn.PgError
			if err == nil {
				say("ok", map[string]interface{}{"kind": words[1], "key": words[2], "token": token, "mapping": mapping})
			} else if errors.As(err, &pgErr) {
				say("error", map[string]interface{}{"kind": words[1], "key": words[2], "token": token,
					"mapping": mapping, "sqlstate": pgErr.Code, "message": pgErr.Message,
					"detail": pgErr.Detail, "hint": pgErr.Hint})
			} else {
				say("error", map[string]interface{}{"message": err.Error()})
			}
		case "unlock":
			if err := mutex.Unlock(ctx); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
			say("unlocked", map[string]interface{}{})
		case "quit":
			return
		}
	}
}

// write: one transaction, the token bound as a parameter through
// fencing.set_token($1).
func write(ctx context.Context, db *pgx.Conn, kind, key, who, token string) error {
	tx, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	var tag pgconn.CommandTag
	switch kind {
	case "advance":
		fence := "fencing.advance(fence, $1::text::fencing.fence)"
		if os.Getenv("FENCING_LOCKSVC_BREAK") == "guard" {
			fence = "$1::text::fencing.fence"
		}
		tag, err = tx.Exec(ctx, "UPDATE accounts SET balance = balance - 25, fence = "+fence+" WHERE id = $2", token, key)
	case "refund", "ledger":
		if _, err = tx.Exec(ctx, "SELECT fencing.set_token($1::text::fencing.fence)", token); err != nil {
			return err
		}
		if kind == "refund" {
			tag, err = tx.Exec(ctx, "UPDATE refunds SET paid_by = $1, payouts = payouts + 1 WHERE id = $2", who, key)
		} else {
			tag, err = tx.Exec(ctx, "INSERT INTO ledger (account, amount, written_by) VALUES ($1, -25, $2)", key, who)
		}
	default:
		return fmt.Errorf("unknown write %s", kind)
	}
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("%s %s wrote %d rows", kind, key, tag.RowsAffected())
	}
	return tx.Commit(ctx)
}
