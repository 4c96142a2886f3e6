# Pay a refund with the token of a lock (psycopg 3).
import sys

import psycopg


class LockLost(Exception):
    """SF001: the lock that issued the token is gone. Stop; never retry."""


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
                raise LockLost(e.diag.message_primary) from e
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
        except LockLost as e:
            print(f"SF001: {e}: the lock is gone, stopping")
            sys.exit(3)
