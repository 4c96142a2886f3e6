# Quickstart: protect a table, take a lease token, write with it.
# Connection settings come from libpq's PGHOST, PGPORT, PGUSER, PGDATABASE.
import psycopg

from fencing_client import LeaseSource, StaleToken, Token, run_fenced

with psycopg.connect(autocommit=True) as conn:
    conn.execute("CREATE EXTENSION IF NOT EXISTS fencing")
    conn.execute("""CREATE TABLE IF NOT EXISTS quickstart_refunds (
                        id text PRIMARY KEY, state text NOT NULL, fence fencing.fence)""")
    conn.execute("""INSERT INTO quickstart_refunds VALUES ('r-1', 'pending', NULL)
                    ON CONFLICT (id) DO NOTHING""")
    conn.execute("SELECT fencing.protect('quickstart_refunds')")

    # the extension's own lease: a token, or None while another holder has it
    lease = LeaseSource(conn, "quickstart-refunds", holder="worker-a", ttl=30)
    token = lease.acquire()
    if token is None:
        raise SystemExit("another worker holds the lease")

    def pay(cur):
        cur.execute("UPDATE quickstart_refunds SET state = 'paid' WHERE id = %s", ("r-1",))

    run_fenced(conn, token, pay)        # BEGIN; fencing.set_token(token); pay; COMMIT
    print(f"paid r-1 with token {token}")

    # a holder with an older token (a paused one) is refused, and writes nothing
    try:
        run_fenced(conn, Token(token.epoch, token.counter - 1), pay)
    except StaleToken as e:
        print(f"older token refused: {e}")

    lease.release()
