#!/usr/bin/python3
"""A worker of the locksvc suite: takes a lock from a real lock service and
writes to PostgreSQL with a new token for each transaction, taken from the
lock service while the lock is held (docs/lock-services.md, "One grant,
many transactions"; psycopg 3, the token bound through fencing.set_token).

    worker.py etcdctl   --who A --dsn DSN --etcd URL   (run by `etcdctl lock`)
    worker.py zookeeper --who A --dsn DSN --zk HOSTS --lock PATH
    worker.py redis     --who A --dsn DSN --redis-port P --lock KEY --counter KEY --ttl-ms N

It takes the lock when it starts, reads the lock service's generation from
PostgreSQL right then (fencing_lock_generations) and takes the grant
token, prints one line "locked {json}" with what the grant gave it, then
obeys lines on stdin:

    next                       take a number now, kept for the next write
                               (a token in hand: the worker may freeze
                               before it writes); "ok {json}" or "lost {json}"
    write KIND KEY [MAPPING]   one transaction: with the token in hand, or
                               a new number; "ok {json}" or "error {json}"
                               (the SQLSTATE and reason, or "lost" when the
                               lock service refused a number)
    raise KIND KEY             the first meter: the fence of KIND's KEY
                               raised to the grant token, nothing written
    many N KIND KEY            N writes, each its own transaction and token;
                               "ok {json}" with the outcomes counted
    unlock                     give the lock back; prints "unlocked"
    quit                       end

KIND: refund (UPDATE refunds, row scope), ledger (INSERT into ledger, key
scope), job (UPDATE jobs, row scope, strict => false), advance (UPDATE
accounts SET fence = fencing.advance(fence, token), no trigger).  MAPPING
is how a number becomes a token; the default is the right one, the others
are the mistakes the suite shows:

    every service  grant: the grant token again (one token, many transactions)
    etcd       rev (default): fence(generation, put revision)   nogen: fence(0, ...)
               lockrev: fence(generation, ETCD_LOCK_REV)  create: fence(generation, CreateRevision)
    zookeeper  zxid (default): fence_from_zxid(mzxid, generation)
               counter: fence(0, mzxid & 0xffffffff)        nogen: fence_from_zxid(mzxid, 0)
    redis      counter (default): fence(generation, n)       nogen: fence(0, n)
               gen-at-write: fence(generation read when writing, n)

With FENCING_LOCKSVC_BREAK=guard, advance writes the token without
advance() and raise does nothing (the suite's run with the guard off).
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


class LockLost(Exception):
    """The lock service gave no number: the lock is lost."""


class Worker:
    service = None

    def __init__(self, args):
        self.args = args
        self.who = args.who
        self.db = psycopg.connect(args.dsn, autocommit=True)
        self.generation = None
        self.grant = None           # the grant's number
        self.held = []              # numbers taken by "next", not yet written with

    def read_generation(self, cur):
        cur.execute("SELECT generation FROM fencing_lock_generations WHERE service = %s",
                    (self.service,))
        return cur.fetchone()[0]

    def take_generation(self):
        """The generation is read when the lock is taken, never later."""
        with self.db.cursor() as cur:
            self.generation = self.read_generation(cur)

    # next_number() -> a new number while the lock is held; LockLost otherwise
    def next_number(self):
        raise NotImplementedError

    # token_sql(number, mapping) -> (SQL expression of the token, parameters)
    def token_sql(self, number, mapping, cur):
        raise NotImplementedError

    def token_of(self, number, mapping=None):
        with self.db.cursor() as cur:
            expr, params = self.token_sql(number, mapping, cur)
            cur.execute(f"SELECT ({expr})::text", params)
            return cur.fetchone()[0]

    def take(self):
        try:
            n = self.next_number()
        except LockLost as e:
            say("lost", message=str(e))
            return
        self.held.append(n)
        say("ok", token=self.token_of(n), held=len(self.held))

    def write(self, kind, key, mapping, quiet=False):
        token = None
        try:
            if mapping == "grant":
                number = self.grant
            elif self.held:
                number = self.held.pop(0)
            else:
                number = self.next_number()
            with self.db.transaction():
                with self.db.cursor() as cur:
                    expr, params = self.token_sql(number, mapping, cur)
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
            if not quiet:
                say("ok", kind=kind, key=key, token=token, mapping=mapping)
            return "ok"
        except LockLost as e:
            if not quiet:
                say("error", kind=kind, key=key, mapping=mapping, sqlstate="lost", message=str(e))
            return "lost"
        except psycopg.Error as e:
            diag = e.diag
            if not quiet:
                say("error", kind=kind, key=key, token=token, mapping=mapping,
                    sqlstate=diag.sqlstate, reason=diag.constraint_name,
                    message=diag.message_primary, detail=diag.message_detail,
                    hint=diag.message_hint)
            return f"{diag.sqlstate}/{diag.constraint_name or ''}"

    def raise_fence(self, kind, key):
        """The first meter: the fence raised to the grant token, no row written."""
        token = self.token_of(self.grant)
        try:
            if BREAK != "guard":
                with self.db.transaction():
                    if kind == "refund":
                        self.db.execute("UPDATE refunds SET fence = %s WHERE id = %s", (token, key))
                    elif kind == "ledger":
                        self.db.execute("SELECT fencing.raise_fence('ledger', %s, %s)", (token, key))
                    elif kind == "advance":
                        self.db.execute("UPDATE accounts SET fence = fencing.advance(fence, %s) "
                                        "WHERE id = %s", (token, key))
                    else:
                        raise ValueError(f"unknown fence {kind}")
            say("ok", kind=kind, key=key, token=token)
        except psycopg.Error as e:
            say("error", kind=kind, key=key, token=token, sqlstate=e.diag.sqlstate,
                reason=e.diag.constraint_name, message=e.diag.message_primary)

    def many(self, n, kind, key):
        outcomes = {}
        first = time.monotonic()
        for _ in range(n):
            r = self.write(kind, key, None, quiet=True)
            outcomes[r] = outcomes.get(r, 0) + 1
        say("ok", kind=kind, key=key, n=n, outcomes=outcomes,
            seconds=round(time.monotonic() - first, 3))

    def unlock(self):
        raise NotImplementedError

    def serve(self, commands):
        for line in commands:
            words = line.split()
            if not words:
                continue
            if words[0] == "next":
                self.take()
            elif words[0] == "write":
                self.write(words[1], words[2], words[3] if len(words) > 3 else None)
            elif words[0] == "raise":
                self.raise_fence(words[1], words[2])
            elif words[0] == "many":
                self.many(int(words[1]), words[2], words[3])
            elif words[0] == "unlock":
                self.unlock()
                say("unlocked")
            elif words[0] == "quit":
                break
            else:
                say("error", message=f"unknown command {words[0]}")


class EtcdctlWorker(Worker):
    """Run by `etcdctl lock NAME worker.py etcdctl ...` (etcd's mutex, as
    Go's concurrency.Mutex): the lock is held while this process runs;
    etcdctl exports ETCD_LOCK_KEY (this holder's key, NAME/<lease id>) and
    ETCD_LOCK_REV (the grant's header revision).  Each number is the
    revision of a put on that key, in a transaction that checks the key's
    create revision is still this holder's (etcdctl txn, as a shell script
    would)."""
    service = "etcd"

    def __init__(self, args):
        super().__init__(args)
        self.key = os.environ["ETCD_LOCK_KEY"]
        self.lock_rev = int(os.environ["ETCD_LOCK_REV"])
        kv = json.loads(self.ctl("get", self.key, "-w", "json"))["kvs"][0]
        self.create_rev = int(kv["create_revision"])
        self.take_generation()
        self.grant = self.next_number()
        say("locked", lock=self.key, revision=self.grant, lock_rev=self.lock_rev,
            create_revision=self.create_rev, generation=self.generation,
            token=self.token_of(self.grant))

    def ctl(self, *words, stdin=None):
        return subprocess.run(["etcdctl", f"--endpoints={self.args.etcd}", *words],
                              input=stdin, check=True,
                              capture_output=True, text=True).stdout

    def next_number(self):
        txn = (f'create("{self.key}") = "{self.create_rev}"\n\n'
               f'put {self.key} --ignore-value --ignore-lease\n\n\n')
        r = json.loads(self.ctl("txn", "-w", "json", stdin=txn))
        if not r.get("succeeded"):
            raise LockLost(f"{self.key} is no longer this holder's")
        return int(r["header"]["revision"])

    def token_sql(self, number, mapping, cur):
        gen = 0 if mapping == "nogen" else self.generation
        if mapping == "lockrev":
            number = self.lock_rev
        elif mapping == "create":
            number = self.create_rev
        return "fencing.fence(%s, %s)", (gen, number)

    def unlock(self):
        # etcdctl releases the lock when this process ends
        say("unlocked")
        sys.exit(0)


class ZooKeeperWorker(Worker):
    """The lock recipe with the node names of Curator and Go's zk.Lock
    (PATH/<id>-lock-NNNNNNNNNN; kazoo's Lock given those names); each
    number is the mzxid of a setData on this holder's own node."""
    service = "zookeeper"

    def __init__(self, args):
        super().__init__(args)
        from kazoo.client import KazooClient
        from kazoo.recipe.lock import Lock

        class SharedLock(Lock):
            _NODE_NAME = "-lock-"
            _EXCLUDE_NAMES = ["lock-"]

        self.zk = KazooClient(hosts=args.zk, timeout=args.session_timeout)
        self.zk.start(timeout=60)
        self.lock = SharedLock(self.zk, args.lock, self.who)
        self.lock.acquire()
        self.node = f"{self.lock.path}/{self.lock.node}"
        self.take_generation()
        self.grant = self.next_number()
        say("locked", lock=self.node, zxid=self.grant, zk_epoch=self.grant >> 32,
            zk_counter=self.grant & 0xffffffff, generation=self.generation,
            token=self.token_of(self.grant), session=hex(self.zk.client_id[0]))

    def next_number(self):
        from kazoo.exceptions import KazooException
        try:
            return self.zk.set(self.node, self.who.encode()).mzxid
        except KazooException as e:
            raise LockLost(f"{self.node}: {type(e).__name__}") from e

    def token_sql(self, number, mapping, cur):
        if mapping == "counter":
            return "fencing.fence(0, %s::bigint & 4294967295)", (number,)
        gen = 0 if mapping == "nogen" else self.generation
        return "fencing.fence_from_zxid(%s, %s)", (number, gen)

    def unlock(self):
        self.lock.release()


# The scripts of docs/lock-services.md: the grant (SET NX PX, and INCR
# only when the lock was taken), each transaction's number (INCR only
# while the lock holds this holder's id, the lock extended), the release.
ACQUIRE = ("if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then "
           "return redis.call('INCR', KEYS[2]) end return nil")
NEXT = ("if redis.call('GET', KEYS[1]) == ARGV[1] then "
        "redis.call('PEXPIRE', KEYS[1], ARGV[2]) return redis.call('INCR', KEYS[2]) end "
        "return nil")
RELEASE = ("if redis.call('GET', KEYS[1]) == ARGV[1] then "
           "return redis.call('DEL', KEYS[1]) else return 0 end")


class RedisWorker(Worker):
    """lock:{NAME} and fence:{NAME}, the scripts run with redis-cli as a
    shell script would."""
    service = "redis"

    def cli(self, *words):
        return subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.args.redis_port),
                               *words], check=True, capture_output=True, text=True).stdout.strip()

    def __init__(self, args):
        super().__init__(args)
        self.value = f"{self.who}-{os.getpid()}"
        while True:
            n = self.cli("EVAL", ACQUIRE, "2", args.lock, args.counter, self.value,
                         str(args.ttl_ms))
            if n:
                break
            # another holder: wait for its key to go, as a client would
            time.sleep(0.05)
        self.grant = int(n)
        self.take_generation()
        say("locked", lock=args.lock, counter=self.grant, generation=self.generation,
            token=self.token_of(self.grant))

    def next_number(self):
        n = self.cli("EVAL", NEXT, "2", self.args.lock, self.args.counter, self.value,
                     str(self.args.ttl_ms))
        if not n:
            raise LockLost(f"{self.args.lock} is no longer this holder's")
        return int(n)

    def token_sql(self, number, mapping, cur):
        if mapping == "gen-at-write":
            # the mistake: a frozen holder wakes up and reads the new generation
            return "fencing.fence(%s, %s)", (self.read_generation(cur), number)
        gen = 0 if mapping == "nogen" else self.generation
        return "fencing.fence(%s, %s)", (gen, number)

    def unlock(self):
        # delete the key only while it is still ours
        self.cli("EVAL", RELEASE, "1", self.args.lock, self.value)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("service", choices=["etcdctl", "zookeeper", "redis"])
    p.add_argument("--who", required=True)
    p.add_argument("--dsn", required=True)
    p.add_argument("--run-dir")
    p.add_argument("--commands", help="read the commands from this file (a FIFO) instead of "
                   "stdin: etcdctl lock runs its command with stdin closed")
    p.add_argument("--etcd", help="etcd's client URL (etcdctl)")
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
