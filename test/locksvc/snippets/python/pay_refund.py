# Pay a refund with the token of a lock (psycopg 3).
import sys

import psycopg


class Refused(Exception):
    """SF001: the token was refused. Never retry with the same token."""

    def __init__(self, reason, message):
        super().__init__(message)
        self.reason = reason


def pay_refund(conn, token, refund_id, attempts=5):
    for attempt in range(1, attempts + 1):
        try:
            with conn.transaction():
                # the token as a bound parameter: SET LOCAL cannot take one
                conn.execute("SELECT fencing.set_token(%s)", (token,))
                conn.execute("UPDATE refunds SET state = 'paid' WHERE id = %s",
                             (refund_id,))
            return
        except psycopg.Error as e:
            if e.sqlstate == "SF001":
                # why, in the error's constraint_name field (never the text);
                # a server without it only says: a newer token was accepted
                raise Refused(e.diag.constraint_name or "stale_token",
                              e.diag.message_primary) from e
            if e.sqlstate == "40001" and attempt < attempts:
                print("40001: serialization failure, retrying")
                continue
            raise


if __name__ == "__main__":
    dsn, token, refund_id = sys.argv[1:4]
    with psycopg.connect(dsn) as conn:
        try:
            pay_refund(conn, token, refund_id)
            print(f"committed with token {token}")
        except Refused as e:
            if e.reason == "token_already_used":
                # not a lost lock: this token wrote in another transaction
                # already: take a new one from the lock for each transaction
                print(f"SF001 {e.reason}: {e}: stopping")
                sys.exit(4)
            # stale_token, lease_expired (claim_taken_over: the same for a
            # claim): the lock is gone; re-acquire it before any new work
            print(f"SF001: {e}: the lock is gone ({e.reason}), stopping")
            sys.exit(3)
