"""One worker of the storm (tests/test_storm.py): takes the built-in lease of
one of KEYS tables (each protected with lease => that lease) and writes a
few fenced transactions under it, through a psycopg_pool pool, until it
has tried WRITES transactions.

A seeded schedule (the same on every run) picks the transactions during
which the worker pauses: after the transaction took its token and before
its write, the whole process is frozen (SIGSTOP; a helper sends SIGCONT)
past the lease's TTL, so its renewals stop too.  Every such write must be
refused.  Each accepted write records its token in storm_log in the same
transaction.  At the end every pooled connection is checked for a token.
Prints one JSON line: what happened.

    storm_worker.py WHO SEED KEYS WRITES TTL_SECONDS
"""
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any

from psycopg_pool import ConnectionPool

import fencing_client as fc

PAUSE_P = 0.03      # freeze past the TTL between the token and the write
RUN = (1, 4)        # transactions under one grant


def freeze(seconds: float) -> None:
    """SIGSTOP this process; a helper sends SIGCONT after ``seconds``."""
    subprocess.Popen(["sh", "-c", f"sleep {seconds:.3f}; kill -CONT {os.getpid()}"])
    os.kill(os.getpid(), signal.SIGSTOP)


def main() -> None:
    who, seed, keys, writes, ttl = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), float(sys.argv[5])
    rnd = random.Random(seed)
    pool = ConnectionPool("", min_size=2, max_size=2, open=True, timeout=60)
    out: Counter[str] = Counter()
    attempts = 0

    def write(k: int, lock: fc.TokenSource, pause: bool) -> None:
        nonlocal attempts
        attempts += 1
        try:
            with pool.connection() as conn:
                f = fc.fenced(conn, lock)
                with f as cur:
                    if pause:
                        out["paused"] += 1
                        freeze(ttl + 0.05 + rnd.random() * 0.1)
                    n = cur.execute(f"UPDATE storm_k{k} SET n = n + 1 WHERE id = 1 "
                                    "RETURNING n").fetchone()[0]
                    cur.execute("INSERT INTO storm_log (key, seq, token, who) "
                                "VALUES (%s, %s, %s, %s)", (k, n, str(f.token), who))
            out["accepted"] += 1
            if pause:
                out["BUG_accepted_after_a_pause"] += 1
        except fc.LockLost:
            out["lock_lost"] += 1
        except fc.FencedOut as e:
            out[e.reason] += 1
        except Exception as e:      # anything else is counted, and fails the test
            out[f"error:{type(e).__name__}:{getattr(e, 'sqlstate', '')}"] += 1

    while attempts < writes:
        k = rnd.randrange(keys)
        lock = fc.LeaseSource(pool, f"storm-{k}", holder=who, ttl=ttl)
        if lock.try_acquire() is None:
            out["lease_busy"] += 1
            time.sleep(0.01)
            continue
        for _ in range(rnd.randint(*RUN)):
            if attempts >= writes or not lock.held:
                break
            write(k, lock, rnd.random() < PAUSE_P)
        lock.release()

    # no pooled connection may carry a token: take both at once
    with_token = 0
    conns: list[Any] = []
    with pool.connection() as c1, pool.connection() as c2:
        conns = [c1, c2]
        for c in conns:
            v = c.execute("SELECT coalesce(current_setting('fencing.token', true), '')").fetchone()
            with_token += v is not None and v[0] != ""
            c.rollback()
    pool.close()
    out["attempts"] = attempts
    out["pooled_with_token"] = with_token
    print(json.dumps(dict(out)), flush=True)


if __name__ == "__main__":
    main()
