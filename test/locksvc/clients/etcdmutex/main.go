// etcdmutex: a worker of the locksvc suite that takes its lock with etcd's
// Go client (clientv3/concurrency.Mutex, as Go services do) and writes to
// PostgreSQL with pgx, a new token for each transaction: the revision of
// a put on its own lock key, in a transaction that checks the key is still
// its own (mutex.IsOwner()), the protocol of docs/lock-services.md.
//
//	etcdmutex -who B -dsn DSN -etcd URL -lock PREFIX [-ttl 2]
//
// The same line protocol as worker.py: "locked {json}" once the lock is
// held (with the grant token: the first such put), then "next", "write
// KIND KEY [MAPPING]", "raise KIND KEY", "many N KIND KEY", "unlock",
// "quit" on stdin.  MAPPING: rev (default) fence(generation, put
// revision), nogen fence(0, put revision), grant the grant token again,
// create fence(generation, the key's CreateRevision).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

var errLost = errors.New("the lock key is no longer this holder's")

func say(kind string, fields map[string]interface{}) {
	b, _ := json.Marshal(fields)
	fmt.Printf("%s %s\n", kind, b)
}

type worker struct {
	cli        *clientv3.Client
	mutex      *concurrency.Mutex
	db         *pgx.Conn
	who        string
	generation int64
	createRev  int64
	grant      int64
	held       []int64
}

// next: a new number while the lock is ours, the revision of a put on our
// own key (its lease kept) if its create revision is still ours
func (w *worker) next(ctx context.Context) (int64, error) {
	resp, err := w.cli.Txn(ctx).If(w.mutex.IsOwner()).
		Then(clientv3.OpPut(w.mutex.Key(), "", clientv3.WithIgnoreLease())).Commit()
	if err != nil {
		return 0, err
	}
	if !resp.Succeeded {
		return 0, errLost
	}
	return resp.Header.Revision, nil
}

func (w *worker) token(number int64, mapping string) string {
	gen := w.generation
	switch mapping {
	case "nogen":
		gen = 0
	case "create":
		number = w.createRev
	}
	return fmt.Sprintf("%d:%d", gen, number)
}

// write: one transaction; its outcome ("ok", "lost", "SQLSTATE/reason")
// and what to say
func (w *worker) write(ctx context.Context, kind, key, mapping string) (string, map[string]interface{}) {
	fields := map[string]interface{}{"kind": kind, "key": key, "mapping": mapping}
	var number int64
	switch {
	case mapping == "grant":
		number = w.grant
	case len(w.held) > 0:
		number, w.held = w.held[0], w.held[1:]
	default:
		n, err := w.next(ctx)
		if err != nil {
			fields["sqlstate"], fields["message"] = "lost", err.Error()
			return "lost", fields
		}
		number = n
	}
	token := w.token(number, mapping)
	fields["token"] = token
	err := writeTx(ctx, w.db, kind, key, w.who, token)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return "ok", fields
	case errors.As(err, &pgErr):
		fields["sqlstate"], fields["reason"], fields["message"] = pgErr.Code, pgErr.ConstraintName, pgErr.Message
		fields["detail"], fields["hint"] = pgErr.Detail, pgErr.Hint
		return pgErr.Code + "/" + pgErr.ConstraintName, fields
	default:
		fields["message"] = err.Error()
		return "error", fields
	}
}

// raise: the first meter, the fence raised to the grant token
func (w *worker) raise(ctx context.Context, kind, key string) error {
	if os.Getenv("FENCING_LOCKSVC_BREAK") == "guard" {
		return nil
	}
	token := w.token(w.grant, "")
	var err error
	switch kind {
	case "refund":
		_, err = w.db.Exec(ctx, "UPDATE refunds SET fence = $1::text::fencing.fence WHERE id = $2", token, key)
	case "ledger":
		_, err = w.db.Exec(ctx, "SELECT fencing.raise_fence('ledger', $1::text::fencing.fence, $2::text)", token, key)
	case "advance":
		_, err = w.db.Exec(ctx, "UPDATE accounts SET fence = fencing.advance(fence, $1::text::fencing.fence) WHERE id = $2", token, key)
	default:
		err = fmt.Errorf("unknown fence %s", kind)
	}
	return err
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
	resp, err := cli.Get(ctx, mutex.Key())
	if err != nil || len(resp.Kvs) != 1 {
		fmt.Fprintln(os.Stderr, "cannot read the lock key", err)
		os.Exit(1)
	}
	db, err := pgx.Connect(ctx, *dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := &worker{cli: cli, mutex: mutex, db: db, who: *who, createRev: resp.Kvs[0].CreateRevision}
	// read the generation when the lock is taken, never later
	if err := db.QueryRow(ctx, "SELECT generation FROM fencing_lock_generations WHERE service = 'etcd'").Scan(&w.generation); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if w.grant, err = w.next(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	say("locked", map[string]interface{}{
		"lock": mutex.Key(), "revision": w.grant, "create_revision": w.createRev,
		"header_revision": mutex.Header().Revision, "generation": w.generation,
		"token": w.token(w.grant, "")})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		words := strings.Fields(in.Text())
		if len(words) == 0 {
			continue
		}
		switch words[0] {
		case "next":
			n, err := w.next(ctx)
			if err != nil {
				say("lost", map[string]interface{}{"message": err.Error()})
				continue
			}
			w.held = append(w.held, n)
			say("ok", map[string]interface{}{"token": w.token(n, ""), "held": len(w.held)})
		case "write":
			mapping := ""
			if len(words) > 3 {
				mapping = words[3]
			}
			outcome, fields := w.write(ctx, words[1], words[2], mapping)
			if outcome == "ok" {
				say("ok", fields)
			} else {
				say("error", fields)
			}
		case "raise":
			if err := w.raise(ctx, words[1], words[2]); err != nil {
				var pgErr *pgconn.PgError
				if errors.As(err, &pgErr) {
					say("error", map[string]interface{}{"sqlstate": pgErr.Code, "reason": pgErr.ConstraintName, "message": pgErr.Message})
				} else {
					say("error", map[string]interface{}{"message": err.Error()})
				}
				continue
			}
			say("ok", map[string]interface{}{"kind": words[1], "key": words[2], "token": w.token(w.grant, "")})
		case "many":
			n, _ := strconv.Atoi(words[1])
			outcomes := map[string]int{}
			start := time.Now()
			for i := 0; i < n; i++ {
				outcome, _ := w.write(ctx, words[2], words[3], "")
				outcomes[outcome]++
			}
			say("ok", map[string]interface{}{"kind": words[2], "key": words[3], "n": n,
				"outcomes": outcomes, "seconds": time.Since(start).Seconds()})
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

// writeTx: one transaction, the token bound as a parameter through
// fencing.set_token($1).
func writeTx(ctx context.Context, db *pgx.Conn, kind, key, who, token string) error {
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
	case "refund", "ledger", "job":
		if _, err = tx.Exec(ctx, "SELECT fencing.set_token($1::text::fencing.fence)", token); err != nil {
			return err
		}
		switch kind {
		case "refund":
			tag, err = tx.Exec(ctx, "UPDATE refunds SET paid_by = $1, payouts = payouts + 1 WHERE id = $2", who, key)
		case "job":
			tag, err = tx.Exec(ctx, "UPDATE jobs SET runs = runs + 1 WHERE id = $1", key)
		default:
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
