#!/usr/bin/python3
"""A worker of the locksvc suite: takes a lock from a real lock service,
turns the grant into a fencing token, and writes to PostgreSQL with it
(psycopg 3, the token bound as a parameter through fencing.set_token).

    worker.py etcdctl   --who A --dsn DSN          (run by `etcdctl lock`)
    worker.py zookeeper --who A --dsn DSN --zk HOSTS --lock PATH
    worker.py redis     --who A --dsn DSN --redis-port P --lock KEY --ttl-ms N

It takes the lock when it starts and reads the lock service's generation
from PostgreSQL right then (lock_generations), prints one line
"locked {json}" with what the grant gave it, then obeys lines on stdin:

    write KIND KEY [MAPPING]   one transaction with the token; prints
                               "ok {json}" or "error {json}" (the SQLSTATE)
    unlock                     give the lock back; prints "unlocked"
    quit                       end

KIND: refund (UPDATE refunds, row scope), ledger (INSERT into ledger, key
scope), job (UPDATE jobs, row scope, strict => false), advance (UPDATE accounts SET fence = fencing.advance(fence, token),
no trigger).  MAPPING is how the grant becomes a token; the default is the
right one, the others are the mistakes the suite shows:

    etcd       rev (default): fence(generation, revision)   nogen: fence(0, revision)
    zookeeper  zxid (default): fence_from_zxid(czxid, generation)
               counter: fence(0, czxid & 0xffffffff)        nogen: fence_from_zxid(czxid, 0)
    redis      counter (default): fence(generation, n)       nogen: fence(0, n)
               gen-at-write: fence(generation read when writing, n)

With FENCING_LOCKSVC_BREAK=guard, advance writes the token without
advance() (the suite's run with the guard off).
"""
import argparse
import json
import os
import subprocess
import sys
import time

import psycopg

BREAK = os.environ.get("FENCING_LOCKSVC_BREAK", "")


def say(word, **fields):
    print(word, json.dumps(fields, sort_keys=True), flush=True)


class Worker:
    service = None

    def __init__(self, args):
        self.args = args
        self.who = args.who
        self.db = psycopg.connect(args.dsn, autocommit=True)
        self.generation = None

    def read_generation(self, cur):
        cur.execute("SELECT generation FROM lock_generations WHERE service = %s",
                    (self.service,))
        return cur.fetchone()[0]

    def take_generation(self):
        """The generation is read when the lock is taken, never later."""
        with self.db.cursor() as cur:
            self.generation = self.read_generation(cur)

    # token_sql(mapping) -> (SQL expression of the token, parameters)
    def token_sql(self, mapping, cur):
        raise NotImplementedError

    def write(self, kind, key, mapping):
        try:
            with self.db.transaction():
                with self.db.cursor() as cur:
                    expr, params = self.token_sql(mapping, cur)
                    cur.execute(f"SELECT ({expr})::text", params)
                    token = cur.fetchone()[0]
                    if kind == "advance":
                        fence = "%(token)s::fencing.fence" if BREAK == "guard" else \
                            "fencing.advance(fence, %(token)s::fencing.fence)"
                        cur.execute(f"UPDATE accounts SET balance = balance - 25, "
                                    f"fence = {fence} WHERE id = %(key)s",
                                    {"token": token, "key": key})
                    else:
                        # the token from a bound parameter: SET LOCAL cannot take one
                        cur.execute("SELECT fencing.set_token(%s::fencing.fence)", (token,))
                        if kind == "refund":
                            cur.execute("UPDATE refunds SET paid_by = %(who)s, payouts = payouts + 1 "
                                        "WHERE id = %(key)s", {"who": self.who, "key": key})
                        elif kind == "job":
                            cur.execute("UPDATE jobs SET runs = runs + 1 WHERE id = %(key)s",
                                        {"key": key})
                        elif kind == "ledger":
                            cur.execute("INSERT INTO ledger (account, amount, written_by) "
                                        "VALUES (%(key)s, -25, %(who)s)",
                                        {"who": self.who, "key": key})
                        else:
                            raise ValueError(f"unknown write {kind}")
                    if cur.rowcount != 1:
                        raise RuntimeError(f"{kind} {key} wrote {cur.rowcount} rows")
            say("ok", kind=kind, key=key, token=token, mapping=mapping)
        except psycopg.Error as e:
            diag = e.diag
            say("error", kind=kind, key=key, token=locals().get("token"), mapping=mapping,
                sqlstate=diag.sqlstate, message=diag.message_primary,
                detail=diag.message_detail, hint=diag.message_hint)

    def unlock(self):
        raise NotImplementedError

    def serve(self, commands):
        for line in commands:
            words = line.split()
            if not words:
                continue
            if words[0] == "write":
                self.write(words[1], words[2], words[3] if len(words) > 3 else None)
            elif words[0] == "unlock":
                self.unlock()
                say("unlocked")
            elif words[0] == "quit":
                break
            else:
                say("error", message=f"unknown command {words[0]}")


class EtcdctlWorker(Worker):
    """Run by `etcdctl lock NAME worker.py etcdctl ...`: the lock is held
    while this process runs; etcdctl exports ETCD_LOCK_KEY (the lock's key)
    and ETCD_LOCK_REV (the Header.Revision of the grant)."""
    service = "etcd"

    def __init__(self, args):
        super().__init__(args)
        self.key = os.environ["ETCD_LOCK_KEY"]
        self.revision = int(os.environ["ETCD_LOCK_REV"])
        self.take_generation()
        say("locked", lock=self.key, revision=self.revision, generation=self.generation,
            token=f"{self.generation}:{self.revision}")

    def token_sql(self, mapping, cur):
        gen = 0 if mapping == "nogen" else self.generation
        return "fencing.fence(%s, %s)", (gen, self.revision)

    def unlock(self):
        # etcdctl releases the lock when this process ends
        say("unlocked")
        sys.exit(0)


class ZooKeeperWorker(Worker):
    """kazoo's Lock recipe: an ephemeral sequential znode under the lock's
    path; the token is the node's czxid (the zxid that created it)."""
    service = "zookeeper"

    def __init__(self, args):
        super().__init__(args)
        from kazoo.client import KazooClient
        self.zk = KazooClient(hosts=args.zk, timeout=args.session_timeout)
        self.zk.start(timeout=60)
        self.lock = self.zk.Lock(args.lock, self.who)
        self.lock.acquire()
        node = f"{self.lock.path}/{self.lock.node}"
        self.czxid = self.zk.exists(node).czxid
        self.take_generation()
        with self.db.cursor() as cur:
            cur.execute("SELECT fencing.fence_from_zxid(%s, %s)::text", (self.czxid, self.generation))
            token = cur.fetchone()[0]
        say("locked", lock=node, czxid=self.czxid, zk_epoch=self.czxid >> 32,
            zk_counter=self.czxid & 0xffffffff, generation=self.generation, token=token,
            session=hex(self.zk.client_id[0]))

    def token_sql(self, mapping, cur):
        if mapping == "counter":
            return "fencing.fence(0, %s::bigint & 4294967295)", (self.czxid,)
        gen = 0 if mapping == "nogen" else self.generation
        return "fencing.fence_from_zxid(%s, %s)", (self.czxid, gen)

    def unlock(self):
        self.lock.release()


class RedisWorker(Worker):
    """SET key value NX PX ttl for the lock, INCR for the token, with
    redis-cli as a shell script would."""
    service = "redis"

    def cli(self, *words):
        return subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.args.redis_port),
                               *words], check=True, capture_output=True, text=True).stdout.strip()

    def __init__(self, args):
        super().__init__(args)
        self.value = f"{self.who}-{os.getpid()}"
        while self.cli("SET", args.lock, self.value, "NX", "PX", str(args.ttl_ms)) != "OK":
            # another holder: wait for its key to go, as a client would
            time.sleep(0.05)
        self.n = int(self.cli("INCR", args.counter))
        self.take_generation()
        say("locked", lock=args.lock, counter=self.n, generation=self.generation,
            token=f"{self.generation}:{self.n}")

    def token_sql(self, mapping, cur):
        if mapping == "gen-at-write":
            # the mistake: a frozen holder wakes up and reads the new generation
            return "fencing.fence(%s, %s)", (self.read_generation(cur), self.n)
        gen = 0 if mapping == "nogen" else self.generation
        return "fencing.fence(%s, %s)", (gen, self.n)

    def unlock(self):
        # delete the key only while it is still ours
        self.cli("EVAL", "if redis.call('get', KEYS[1]) == ARGV[1] then "
                 "return redis.call('del', KEYS[1]) else return 0 end",
                 "1", self.args.lock, self.value)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("service", choices=["etcdctl", "zookeeper", "redis"])
    p.add_argument("--who", required=True)
    p.add_argument("--dsn", required=True)
    p.add_argument("--run-dir")
    p.add_argument("--commands", help="read the commands from this file (a FIFO) instead of "
                   "stdin: etcdctl lock runs its command with stdin closed")
    p.add_argument("--zk")
    p.add_argument("--lock")
    p.add_argument("--session-timeout", type=float, default=2.0)
    p.add_argument("--redis-port")
    p.add_argument("--counter")
    p.add_argument("--ttl-ms", type=int, default=2000)
    args = p.parse_args()
    worker = {"etcdctl": EtcdctlWorker, "zookeeper": ZooKeeperWorker,
              "redis": RedisWorker}[args.service](args)
    worker.serve(open(args.commands) if args.commands else sys.stdin)


if __name__ == "__main__":
    main()
