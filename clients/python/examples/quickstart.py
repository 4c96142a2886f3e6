# Quickstart: a lock that hands out fencing tokens, transactions that carry
# them, and the database refusing the late write of an older token.
# Connection settings come from libpq's PGHOST, PGPORT, PGUSER, PGDATABASE.
import psycopg

from fencing_client import LeaseSource, StaleToken, run_fenced

with psycopg.connect(autocommit=True) as conn:
    conn.execute("CREATE EXTENSION IF NOT EXISTS fencing")
    conn.execute("""CREATE TABLE IF NOT EXISTS quickstart_ledger (
                        id bigserial PRIMARY KEY, acct text NOT NULL,
                        amount_cents int NOT NULL, fence fencing.fence)""")
    # one fence per account: a write must carry a token newer than the account's
    conn.execute("SELECT fencing.protect('quickstart_ledger', key_columns => '{acct}')")

    # the extension's own lease: a lock kept in PostgreSQL, renewed while held
    with LeaseSource(conn, "quickstart-acct-1", ttl=30) as lock:
        old = lock.next_token()     # taken now, used late: as by a holder frozen meanwhile

        for cents in (1250, -300, -200):    # each transaction takes a new token of the lock
            run_fenced(conn, lock, lambda cur: cur.execute(
                "INSERT INTO quickstart_ledger (acct, amount_cents) VALUES (%s, %s)",
                ("acct-1", cents)))
        print(f"posted 3 ledger entries under one lock, the last with token {lock.token}")

        try:
            run_fenced(conn, old, lambda cur: cur.execute(
                "INSERT INTO quickstart_ledger (acct, amount_cents) VALUES ('acct-1', -99999)"))
        except StaleToken as e:
            print(f"the older token is refused: {type(e).__name__}: {e.diag.message_primary}")
