"""A worker process of the tests: holds a lock through one of the
library's token sources and writes with its tokens, on command.

    worker.py --who A --source lease|redis|etcd|zookeeper --name LOCK [--ttl S] [--endpoint E]

Commands (stdin, one a line), answers (stdout, one JSON line each):
    acquire TIMEOUT [TABLE KEY]  the lock (and the first meter: the fence of
                           TABLE's KEY raised): {"token": "E:C"} or {"error": ...}
    write TABLE KEY        one fenced transaction: INSERT a ledger entry for
                           KEY: {"ok": true, "token": ...} or {"error": CLASS, ...}
    begin                  a fenced transaction's BEGIN and token, then wait:
                           {"token": ...} (freeze the worker now)
    finish TABLE KEY       the INSERT of that transaction, and COMMIT
    many N TABLE KEY       N fenced transactions: {"ok": n, "errors": {...}}
    lost                   {"lost": bool, "callbacks": n, "held": bool}
    next                   {"token": ...} or {"error": "LockLost"}
    release                {"released": bool}
    quit
"""
import argparse
import json
import sys
from collections import Counter
from typing import Any, Optional

import psycopg

import fencing_client as fc


def say(**kw: Any) -> None:
    print(json.dumps(kw), flush=True)


def error(e: BaseException) -> dict[str, Any]:
    out: dict[str, Any] = {"error": type(e).__name__, "message": str(e).splitlines()[0]}
    if isinstance(e, fc.FencedOut):
        out["reason"] = e.reason
    if isinstance(e, psycopg.Error):
        out["sqlstate"] = e.sqlstate
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--who", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--ttl", type=float, default=2.0)
    ap.add_argument("--endpoint", default="")
    a = ap.parse_args()

    db = psycopg.connect("", autocommit=True)
    lost_calls = []
    kw: dict[str, Any] = {"on_lost": lambda s: lost_calls.append(1)}
    src: fc.TokenSource
    if a.source == "lease":
        src = fc.LeaseSource("", a.name, holder=a.who, ttl=a.ttl, **kw)
    elif a.source == "redis":
        import redis
        host, port = a.endpoint.split(":")
        src = fc.RedisSource(redis.Redis(host=host, port=int(port)), a.name, db, ttl=a.ttl, **kw)
    elif a.source == "etcd":
        import etcd3gw
        host, port = a.endpoint.split(":")
        src = fc.EtcdSource(etcd3gw.client(host=host, port=int(port)), a.name, db, ttl=a.ttl,
                            holder=a.who, **kw)
    elif a.source == "zookeeper":
        from kazoo.client import KazooClient
        zk = KazooClient(hosts=a.endpoint, timeout=a.ttl)
        zk.start(timeout=30)
        src = fc.ZooKeeperSource(zk, a.name, db, identifier=a.who, **kw)
    else:
        raise SystemExit(f"unknown source {a.source}")
    say(ready=True)

    tx: Optional[fc.fenced] = None
    cur: Any = None

    def insert(c: Any, table: str, key: str) -> None:
        c.execute(f"INSERT INTO {table} (acct, amount, by) VALUES (%s, 1, %s)", (key, a.who))

    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        try:
            if w[0] == "acquire":
                fences = [fc.Scope(w[2], w[3])] if len(w) > 3 else []
                say(token=str(src.acquire(float(w[1]), fences=fences)))
            elif w[0] == "write":
                f = fc.fenced(db, src)
                with f as c:
                    insert(c, w[1], w[2])
                say(ok=True, token=str(f.token))
            elif w[0] == "begin":
                tx = fc.fenced(db, src)
                cur = tx.__enter__()
                say(token=str(tx.token))
            elif w[0] == "finish":
                assert tx is not None
                t, tx = tx, None
                try:
                    insert(cur, w[1], w[2])
                except BaseException as e:
                    t.__exit__(type(e), e, e.__traceback__)
                    raise
                t.__exit__(None, None, None)
                say(ok=True, token=str(t.token))
            elif w[0] == "many":
                errors: Counter[str] = Counter()
                ok = 0
                for _ in range(int(w[1])):
                    try:
                        fc.run_fenced(db, src, lambda c: insert(c, w[2], w[3]))
                        ok += 1
                    except fc.FencingError as e:
                        errors[getattr(e, "reason", type(e).__name__)] += 1
                say(ok=ok, errors=dict(errors), token=str(src.token))
            elif w[0] == "lost":
                say(lost=src.lost.is_set(), callbacks=len(lost_calls), held=src.held)
            elif w[0] == "next":
                say(token=str(src.next_token()))
            elif w[0] == "release":
                say(released=src.release())
            elif w[0] == "quit":
                break
            else:
                say(error="unknown command", line=line)
        except Exception as e:
            say(**error(e))


if __name__ == "__main__":
    main()
