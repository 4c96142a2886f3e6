"""One worker of the storm (tests/test_storm.py): WRITES fenced writes,
each with a token of the built-in lease of one of KEYS tables (protected
with lease => that lease), through a psycopg_pool ConnectionPool.

A seeded schedule (the same on every run) picks the iterations where the
worker pauses past the lease's TTL between taking the token and writing
(every such write must be refused), and those where it writes a second
time with the same token in another transaction (refused too).  Each
accepted write records its token in storm_log in the same transaction.
At the end every pooled connection is checked for a token left set.
Prints one JSON line: what happened.

    storm_worker.py WHO SEED KEYS WRITES TTL_SECONDS
"""
import json
import random
import sys
import time
from collections import Counter

from psycopg_pool import ConnectionPool

import fencing_client as fc

PAUSE_P = 0.03      # pause past the TTL before writing
DOUBLE_P = 0.03     # write again with the same token, in a second transaction


def main():
    who, seed, keys, writes, ttl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), float(sys.argv[5])
    rnd = random.Random(seed)
    pool = ConnectionPool("", min_size=2, max_size=2, open=True, timeout=60)
    out = Counter()
    attempts = 0

    def write(k, token):
        def fn(cur):
            n = cur.execute(f"UPDATE storm_k{k} SET n = n + 1 WHERE id = 1 RETURNING n").fetchone()[0]
            cur.execute("INSERT INTO storm_log (key, seq, token, who) VALUES (%s, %s, %s, %s)",
                        (k, n, str(token), who))
        fc.run_fenced(pool, token, fn)

    def attempt(k, token, expect_refused):
        nonlocal attempts
        attempts += 1
        try:
            write(k, token)
            out["accepted"] += 1
            if expect_refused:
                out["BUG_accepted_when_refusal_due"] += 1
            return True
        except fc.UnknownReason as e:
            out[f"unknown:{e.reason}"] += 1
        except fc.FencedOut as e:
            out[e.reason] += 1
        except Exception as e:   # anything else is counted, and fails the test
            out[f"error:{type(e).__name__}:{getattr(e, 'sqlstate', '')}"] += 1
        return False

    while attempts < writes:
        k = rnd.randrange(keys)
        pause = rnd.random() < PAUSE_P
        double = rnd.random() < DOUBLE_P
        lease = fc.LeaseSource(pool, f"storm-{k}", who, ttl)
        token = lease.acquire()
        if token is None:
            out["lease_busy"] += 1
            time.sleep(0.01)
            continue
        if pause:
            out["paused"] += 1
            time.sleep(ttl + 0.05 + rnd.random() * 0.1)     # the server's lease has run out
        ok = attempt(k, token, expect_refused=pause)
        if ok and double and attempts < writes:
            out["doubled"] += 1
            attempt(k, token, expect_refused=True)
        lease.release()

    # no pooled connection may carry a token: take both at once
    with_token = 0
    with pool.connection() as c1, pool.connection() as c2:
        for c in (c1, c2):
            v = c.execute("SELECT coalesce(current_setting('fencing.token', true), '')").fetchone()[0]
            with_token += v != ""
            c.rollback()
    pool.close()
    out["attempts"] = attempts
    out["pooled_with_token"] = with_token
    print(json.dumps(dict(out)), flush=True)


if __name__ == "__main__":
    main()
