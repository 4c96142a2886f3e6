#!/usr/bin/python3
"""Benchmark: a fenced transaction through the library vs the same
transaction written by hand with psycopg.

    python3 bench.py [--n 2000] [--rounds 10] [--delay-ms D]   (libpq's PG* variables)

Both do: BEGIN; SELECT fencing.set_token(%s) (bound); UPDATE one row of a
protected table; COMMIT — with a fresh, higher token each time.  The
library sends BEGIN and set_token in one round trip (pipeline mode); by
hand they are two.  Rounds alternate (library, by hand, library, ...) so
that drift of the machine hits both alike; each round runs n/rounds
transactions.  Prints the median latency of each and their ratio.  Not a
test: nothing fails on its numbers.

The library is measured twice: as it is (pipeline) and with
pipeline=False (BEGIN and set_token one after the other, as by hand).
--delay-ms D puts a proxy between client and server that holds every
chunk D/2 ms in each direction: a network with a round trip of D ms
instead of the loopback's few microseconds.
"""
import argparse
import os
import socket
import threading
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psycopg  # noqa: E402

import fencing_client as fc  # noqa: E402


def delay_proxy(host: str, port: int, delay: float) -> int:
    """A TCP proxy on 127.0.0.1 that forwards each chunk delay/2 seconds
    late, each way; returns its port."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)

    def pump(src, dst):
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

    def serve():
        while True:
            c, _ = ls.accept()
            u = socket.create_connection((host, port))
            for s in (c, u):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(target=pump, args=(c, u), daemon=True).start()
            threading.Thread(target=pump, args=(u, c), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return ls.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000, help="transactions of each kind")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--table", default="fencing_client_bench")
    ap.add_argument("--delay-ms", type=float, default=0.0)
    a = ap.parse_args()

    conn = psycopg.connect()            # autocommit off: psycopg's default
    if a.delay_ms > 0:
        port = delay_proxy(os.environ.get("PGHOST", "127.0.0.1"), int(os.environ.get("PGPORT", "5432")),
                           a.delay_ms / 1000)
        conn.close()
        conn = psycopg.connect(host="127.0.0.1", port=port)
    with conn.transaction():
        conn.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        conn.execute(f"DROP TABLE IF EXISTS {a.table}")
        conn.execute(f"CREATE TABLE {a.table} (id int PRIMARY KEY, n bigint NOT NULL, fence fencing.fence)")
        conn.execute(f"INSERT INTO {a.table} VALUES (1, 0, NULL)")
        conn.execute(f"SELECT fencing.protect('{a.table}')")
    update = f"UPDATE {a.table} SET n = n + 1 WHERE id = %s"
    counter = [0]

    def token():
        counter[0] += 1
        return fc.Token(1, counter[0])

    def library():
        with fc.fenced(conn, token()) as cur:
            cur.execute(update, (1,))

    def library_no_pipeline():
        with fc.fenced(conn, token(), pipeline=False) as cur:
            cur.execute(update, (1,))

    def by_hand():
        with conn.transaction():
            conn.execute("SELECT fencing.set_token(%s)", (str(token()),))
            conn.execute(update, (1,))

    kinds = (("library", library), ("library, pipeline=False", library_no_pipeline),
             ("by hand", by_hand))
    lat = {k: [] for k, _ in kinds}
    per_round = max(1, a.n // a.rounds)
    for _ in range(50):                 # warm up every path (prepared statements, caches)
        for _, fn in kinds:
            fn()
    for r in range(a.rounds):
        order = kinds if r % 2 == 0 else kinds[::-1]
        for name, fn in order:
            for _ in range(per_round):
                t = time.perf_counter()
                fn()
                lat[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) * 1e6 for k, v in lat.items()}
    p90 = {k: statistics.quantiles(v, n=10)[-1] * 1e6 for k, v in lat.items()}
    for k in lat:
        print(f"{k:24s}: median {med[k]:8.1f} us   p90 {p90[k]:8.1f} us   ({len(lat[k])} transactions)")
    print(f"ratio library / by hand (medians): {med['library'] / med['by hand']:.3f}; "
          f"library with pipeline=False / by hand: "
          f"{med['library, pipeline=False'] / med['by hand']:.3f}"
          + (f" (round trip {a.delay_ms} ms)" if a.delay_ms else " (loopback)"))
    with conn.transaction():
        conn.execute(f"DROP TABLE {a.table}")
    conn.close()


if __name__ == "__main__":
    main()
