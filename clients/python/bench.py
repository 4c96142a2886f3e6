"""Benchmark: a fenced transaction through the library against the same
transaction written by hand with psycopg, in one run.

    python bench.py [--n 3000] [--delay-ms D]    (libpq's PG* variables)

Each transaction updates one row of a protected table, with a token given
(``token``) or with a new token of a built-in lease per transaction
(``lease``: ``fencing.lease_next`` first).  Two ways each:

  library   ``fenced(conn, token_or_lease)``: BEGIN, the check for a
            leftover token and set_token in one statement, the UPDATE,
            COMMIT
  by hand   the transaction a user writes with psycopg:
            ``with conn.transaction():`` set_token, the UPDATE (no check)

The kinds take turns one transaction at a time, in a rotating order, so
that the drift of a shared machine hits them alike.  Prints the median
latency of each kind and the ratio library / by hand.  Not a test: nothing
fails on its numbers.
``--delay-ms D`` puts a proxy that holds every chunk D/2 ms each way
between client and server: a network with a round trip of D ms.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import threading
import time
from datetime import timedelta
from typing import Any, Callable

import psycopg

import fencing_client as fc


def delay_proxy(host: str, port: int, delay: float) -> int:
    """A TCP proxy on 127.0.0.1 that forwards each chunk delay/2 seconds
    late, each way; its port."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)

    def pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                b = src.recv(65536)
                if not b:
                    break
                time.sleep(delay / 2)
                dst.sendall(b)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def serve() -> None:
        while True:
            c, _ = ls.accept()
            u = socket.create_connection((host, port))
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=pump, args=(c, u), daemon=True).start()
            threading.Thread(target=pump, args=(u, c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    port_: int = ls.getsockname()[1]
    return port_


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000, help="transactions of each kind")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    a = ap.parse_args()

    conn = psycopg.connect()            # autocommit off: psycopg's default
    if a.delay_ms > 0:
        port = delay_proxy(os.environ.get("PGHOST", "127.0.0.1"),
                           int(os.environ.get("PGPORT", "5432")), a.delay_ms / 1000)
        conn.close()
        conn = psycopg.connect(host="127.0.0.1", port=port)
    table = f"fencing_client_bench_{os.getpid()}"
    with conn.transaction():
        conn.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n bigint NOT NULL, "
                     "fence fencing.fence)")
        conn.execute(f"INSERT INTO {table} VALUES (1, 0, NULL), (2, 0, NULL)")
        conn.execute(f"SELECT fencing.protect('{table}')")
    update = f"UPDATE {table} SET n = n + 1 WHERE id = %s"
    counter = [0]

    def token() -> fc.Token:
        counter[0] += 1
        return fc.Token(1, counter[0])

    lease = fc.LeaseSource(conn, f"bench-{os.getpid()}", ttl=600)
    lease.acquire(timeout=10)
    ttl = timedelta(seconds=600)

    def by_hand(tok: str, row: int) -> None:
        # what a user writes: no check, one statement after another
        with conn.transaction():
            conn.execute("SELECT fencing.set_token(%s)", (tok,))
            conn.execute(update, (row,))

    def lease_next() -> str:
        conn.autocommit = True
        r = conn.execute("SELECT fencing.lease_next(%s, %s, %s)::text",
                         (lease.name, str(lease.token), ttl)).fetchone()
        conn.autocommit = False
        assert r is not None
        lease.token = fc.Token.parse(r[0])
        return str(r[0])

    def library_token() -> None:
        with fc.fenced(conn, token()) as cur:
            cur.execute(update, (1,))

    def library_lease() -> None:
        with fc.fenced(conn, lease) as cur:
            cur.execute(update, (2,))

    kinds: list[tuple[str, Callable[[], None]]] = [
        ("token: library", library_token),
        ("token: by hand", lambda: by_hand(str(token()), 1)),
        ("lease: library", library_lease),
        ("lease: by hand", lambda: by_hand(lease_next(), 2))]
    lat: dict[str, list[float]] = {k: [] for k, _ in kinds}
    for _ in range(100):                # warm up every path (prepared statements, caches)
        for _, fn in kinds:
            fn()
    # one transaction of each kind in turn, the order rotating, so that the
    # drift of a shared machine hits every kind alike
    for i in range(a.n):
        r = i % len(kinds)
        for name, fn in kinds[r:] + kinds[:r]:
            t = time.perf_counter()
            fn()
            lat[name].append(time.perf_counter() - t)
    lease.release()
    med = {k: statistics.median(v) * 1e6 for k, v in lat.items()}
    where = f"round trip {a.delay_ms} ms" if a.delay_ms else "loopback"
    impl = psycopg.pq.__impl__
    print(f"psycopg {psycopg.__version__} ({impl}), {where}, {a.n} "
          "transactions of each kind, interleaved one by one")
    for k in lat:
        print(f"{k:15s}: median {med[k]:8.1f} us")
    for pair in ("token", "lease"):
        print(f"{pair}: library / by hand: "
              f"{med[f'{pair}: library'] / med[f'{pair}: by hand']:.3f}")
    with conn.transaction():
        conn.execute(f"DROP TABLE {table}")
    conn.close()


if __name__ == "__main__":
    main()
