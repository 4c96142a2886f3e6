"""A worker process of the tests: takes a lock through one of the
library's token sources and writes with the token, on command.

    worker.py --who A --source redis|etcd|zk|lease|idem --name LOCK --table T [--ttl S]

Commands (stdin, one a line), answers (stdout, one JSON line each):
    acquire [TIMEOUT]   {"token": "E:C"} or {"token": null}
    write ID            {"ok": true} or {"error": CLASS, "reason": R, "sqlstate": S}
    release             {"released": bool}
    quit
"""
import argparse
import json
import sys

import psycopg

import fencing_client as fc


def say(**kw):
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--who", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--table", required=True)
    ap.add_argument("--ttl", type=float, default=2.0)
    ap.add_argument("--endpoint", default="")
    a = ap.parse_args()

    db = psycopg.connect("", autocommit=True)
    if a.source == "redis":
        import redis
        host, port = a.endpoint.split(":")
        src = fc.RedisLockSource(redis.Redis(host=host, port=int(port)), a.name, db,
                                 ttl_ms=int(a.ttl * 1000))
    elif a.source == "etcd":
        import etcd3
        host, port = a.endpoint.split(":")
        src = fc.EtcdLockSource(etcd3.client(host=host, port=int(port)), a.name, db,
                                ttl=int(a.ttl))
    elif a.source == "zk":
        from kazoo.client import KazooClient
        zk = KazooClient(hosts=a.endpoint, timeout=a.ttl)
        zk.start(timeout=30)
        src = fc.ZooKeeperLockSource(zk, a.name, db, identifier=a.who)
    elif a.source == "lease":
        src = fc.LeaseSource(db, a.name, a.who, a.ttl)
    else:
        raise SystemExit(f"unknown source {a.source}")
    say(ready=True)

    token = None
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "acquire":
            timeout = float(words[1]) if len(words) > 1 else 0.0
            if a.source == "redis":
                token = src.acquire(timeout=timeout)
            elif a.source == "lease":
                token = src.acquire()
                if token is None and timeout > 0:
                    import time
                    end = time.monotonic() + timeout
                    while token is None and time.monotonic() < end:
                        time.sleep(0.02)
                        token = src.acquire()
            else:
                token = src.acquire(timeout=timeout or 30)
            say(token=str(token) if token is not None else None)
        elif words[0] == "write":
            try:
                fc.run_fenced(db, token, lambda cur: cur.execute(
                    f"UPDATE {a.table} SET by = %s, n = n + 1 WHERE id = %s", (a.who, words[1])))
                say(ok=True)
            except fc.FencingError as e:
                say(error=type(e).__name__, reason=getattr(e, "reason", None),
                    sqlstate=e.pgerror.sqlstate if e.pgerror else None, message=str(e))
        elif words[0] == "release":
            try:
                say(released=bool(src.release()))
            except Exception as e:   # a lost session, an expired lease
                say(released=False, error=type(e).__name__)
        elif words[0] == "quit":
            break


if __name__ == "__main__":
    main()
