"""The sources take the same locks as every other client of the lock
services, and their tokens share one fence with them.  For each service a
reference holder written from docs/lock-services.md, not from this
library:

- etcd: ``etcdctl lock NAME`` (etcd's own mutex); its numbers are the
  header revisions of a transaction that puts its own key while the key's
  create revision is still its own;
- ZooKeeper: the docs' recipe, kazoo's ``Lock`` with the common node names
  (``<id>-lock-NNNNNNNNNN``), on a session of its own; its numbers the
  mzxid of a ``setData`` on its node, its tokens ``fencing.fence_from_zxid``;
  and nodes named as Curator names its own (``_c_<uuid>-lock-NNNNNNNNNN``);
- Redis: the docs' three scripts on ``lock:{NAME}`` and ``fence:{NAME}``.

The source and the reference holder exclude each other both ways, and one
row's fence takes the tokens of both in lock order: the reference holder's
token after the source's grant beats the source's older token, and the
source's token after the reference holder's grant beats the reference
holder's older one."""
from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import threading
import time
import uuid
from typing import Any, Callable, Optional

import psycopg
import pytest

import fencing_client as fc

from .conftest import Clients, lock_name, make_rows, note, service, unique

# ---------------------------------------------------------------- the flow


def write_by_hand(db: Any, table: str, token: str) -> Optional[str]:
    """A fenced transaction as the docs write one: None, or the SF001 reason."""
    try:
        with db.transaction():
            db.execute("SELECT fencing.set_token(%s)", (token,))
            db.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 'a'")
    except psycopg.Error as e:
        if e.sqlstate == "SF001":
            return str(e.diag.constraint_name)
        raise
    return None


def generation(db: Any, service_name: str) -> int:
    """Read as a holder reads it: right after it took the lock."""
    row = db.execute("SELECT generation FROM fencing_lock_generations WHERE service = %s",
                     (service_name,)).fetchone()
    return int(row[0])


class Reference:
    """A holder of the docs' protocol."""

    def start(self) -> None:
        """Begin taking the lock (waits while another holds it)."""
        raise NotImplementedError

    def locked(self, timeout: float) -> bool:
        raise NotImplementedError

    def next(self) -> str:
        """A new token (E:C) of the lock held."""
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def interop(db: Any, src: fc.TokenSource, ref: Reference,
            holds: Optional[Callable[[bool, fc.Token], None]] = None) -> None:
    """The source and ref on one lock, one row's fence; holds(waiting,
    grant) checks what the source has in the lock service, right after its
    grant and while it waits behind ref."""
    table = make_rows(db, ["a"])

    def write(s: Any) -> None:
        fc.run_fenced(db, s, lambda cur: cur.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 'a'"))

    try:
        # the source holds; the reference holder waits
        grant = src.acquire(timeout=30)
        if holds:
            holds(False, grant)
        write(src)
        ref.start()
        assert not ref.locked(1.5), "the reference holder took the lock the source holds"
        in_hand = src.next_token()          # taken, never written: as a holder that froze
        assert src.release()

        # the reference holder holds; the source waits
        assert ref.locked(30), "the reference holder did not get the lock the source released"
        r1 = ref.next()
        assert write_by_hand(db, table, r1) is None
        assert fc.Token.parse(r1) > in_hand, (r1, in_hand, grant)
        with pytest.raises(fc.StaleToken):
            write(fc.StaticToken(in_hand))
        assert src.try_acquire() is None, "the source took the lock the reference holder holds"
        got: dict[str, Any] = {}
        waiter = threading.Thread(target=lambda: got.update(t=src.acquire(timeout=60)))
        waiter.start()
        waiter.join(1.0)
        assert waiter.is_alive(), f"the source took the lock the reference holder holds: {got}"
        if holds:
            holds(True, grant)
        r_in_hand = ref.next()
        ref.release()

        # the source holds again, after the reference holder
        waiter.join(60)
        assert "t" in got, "the source did not get the lock the reference holder released"
        f = fc.fenced(db, src)
        with f as cur:
            cur.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 'a'")
        last = f.token
        assert last is not None and got["t"] > fc.Token.parse(r_in_hand), (got, r_in_hand)
        assert write_by_hand(db, table, r_in_hand) == "stale_token"
        assert db.execute(f"SELECT n, fence::text FROM {table}").fetchone() == (3, str(last))
        note(f"one fence: source {grant} (in hand {in_hand}), reference {r1} "
             f"(in hand {r_in_hand}), source {last}")
    finally:
        if src.held:
            src.release()
        ref.close()


# ---------------------------------------------------------------- etcd


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


class Etcdctl(Reference):
    """``etcdctl lock NAME``: it prints its key once it holds the lock, and
    unlocks on SIGTERM."""

    def __init__(self, db: Any, etcd: Any, ep: str, name: str):
        self.db, self.etcd, self.ep, self.name = db, etcd, ep, name
        self.proc: Optional[subprocess.Popen[str]] = None
        self.key: Optional[str] = None
        self.line: list[str] = []
        self.create_revision = 0
        self.gen = 0

    def start(self) -> None:
        self.proc = subprocess.Popen(["etcdctl", f"--endpoints=http://{self.ep}", "lock", self.name],
                                     stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "ETCDCTL_API": "3"})
        out = self.proc.stdout
        assert out is not None
        self.reader = threading.Thread(target=lambda: self.line.append(out.readline()), daemon=True)
        self.reader.start()

    def locked(self, timeout: float) -> bool:
        if self.key is not None:
            return True
        self.reader.join(timeout)
        if not self.line:
            return False
        self.key = self.line[0].strip()
        value, meta = self.etcd.get(self.key, metadata=True)[0]
        lease = int(meta["lease"])
        assert self.key == f"{self.name}/{lease:x}", (self.key, "NAME/<lease id in hex>")
        self.create_revision = int(meta["create_revision"])
        self.gen = generation(self.db, "etcd")
        return True

    def next(self) -> str:
        assert self.key is not None
        r = self.etcd.transaction({
            "compare": [{"key": b64(self.key), "result": "EQUAL", "target": "CREATE",
                         "create_revision": self.create_revision}],
            "success": [{"request_put": {"key": b64(self.key), "value": "", "ignore_lease": True}}],
            "failure": []})
        assert r.get("succeeded"), f"etcdctl's {self.key} is no longer its own"
        return f"{self.gen}:{int(r['header']['revision'])}"

    def release(self) -> None:
        self.close()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)


def test_etcd(db: Any, clients: Clients) -> None:
    """``etcdctl lock NAME`` and an EtcdSource on NAME: both keys are
    ``NAME/<lease id in hex>``, each waits while the other holds, and one
    fence orders their tokens."""
    ep = service("FENCING_TEST_ETCD")
    if shutil.which("etcdctl") is None:
        pytest.fail("no etcdctl in PATH")
    import etcd3gw
    host, port = ep.split(":")
    etcd = etcd3gw.client(host=host, port=int(port))
    name = unique("interop")
    src = clients.source("etcd", name, db, ttl=10)

    def holds(waiting: bool, grant: fc.Token) -> None:
        want = 2 if waiting else 1      # etcdctl's key first, then the source's
        kvs: list[Any] = []
        end = time.monotonic() + 10
        while len(kvs) != want and time.monotonic() < end:
            kvs = etcd.get_prefix(name + "/", sort_order="ascend", sort_target="create")
            time.sleep(0.02)
        assert len(kvs) == want, kvs
        meta = kvs[-1][1]
        key = meta["key"].decode() if isinstance(meta["key"], bytes) else meta["key"]
        assert key == f"{name}/{int(meta['lease']):x}", (key, "NAME/<lease id in hex>")
        if not waiting:
            assert key == src.key

    interop(db, src, Etcdctl(db, etcd, ep, name), holds)


# ---------------------------------------------------------------- ZooKeeper


def kazoo_client(ep: str, clients: Clients) -> Any:
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=ep, timeout=10.0)
    zk.start(timeout=30)
    clients.closers.append(zk.close)
    clients.closers.append(zk.stop)
    return zk


def docs_shared_lock() -> Any:
    """The docs' recipe: kazoo's Lock with the node names of Curator and Go."""
    from kazoo.recipe.lock import Lock

    class SharedLock(Lock):  # type: ignore[misc]
        """kazoo's Lock recipe with the node names of Curator and Go."""
        _NODE_NAME = "-lock-"
        _EXCLUDE_NAMES = ["lock-"]

    return SharedLock


class KazooHolder(Reference):
    """The docs' recipe, on a ZooKeeper session of its own."""

    def __init__(self, db: Any, zk: Any, path: str):
        self.db, self.zk, self.path = db, zk, path
        self.lock = docs_shared_lock()(zk, path, "reference")
        self.got = threading.Event()
        self.node = ""
        self.gen = 0

    def start(self) -> None:
        def take() -> None:
            if self.lock.acquire(timeout=60):
                self.got.set()
        threading.Thread(target=take, daemon=True).start()

    def locked(self, timeout: float) -> bool:
        if not self.got.wait(timeout):
            return False
        if not self.node:
            self.node = f"{self.lock.path}/{self.lock.node}"
            self.gen = generation(self.db, "zookeeper")
        return True

    def next(self) -> str:
        zxid = self.zk.set(self.node, b"reference").mzxid
        row = self.db.execute("SELECT fencing.fence_from_zxid(%s, %s)::text",
                              (zxid, self.gen)).fetchone()
        return str(row[0])

    def release(self) -> None:
        self.lock.release()

    def close(self) -> None:
        self.lock.cancel()


def test_zookeeper(db: Any, clients: Clients) -> None:
    """The docs' kazoo recipe and a ZooKeeperSource on one path: the
    source's nodes are ``<id>-lock-NNNNNNNNNN`` too, each waits while the
    other holds, and one fence orders their tokens."""
    ep = service("FENCING_TEST_ZK")
    path = lock_name("zookeeper")
    src = clients.source("zookeeper", path, db, ttl=10)
    ref = KazooHolder(db, kazoo_client(ep, clients), path)
    name = re.compile(r"^[0-9a-f]{32}-lock-\d{10}$")

    def holds(waiting: bool, grant: fc.Token) -> None:
        children: list[str] = []
        end = time.monotonic() + 10
        while len(children) != (2 if waiting else 1) and time.monotonic() < end:
            children = ref.zk.get_children(path)
            time.sleep(0.02)
        assert all(name.match(c) for c in children), children
        if waiting:
            # the kazoo holder's node first: it holds; the source's waits behind it
            ordered = sorted(children, key=lambda c: c[-10:])
            assert len(ordered) == 2 and f"{path}/{ordered[0]}" == ref.node, (ordered, ref.node)
        else:
            assert children == [str(src.node).rsplit("/", 1)[1]], (children, src.node)

    interop(db, src, ref, holds)


def test_zookeeper_curator_names(db: Any, clients: Clients) -> None:
    """Nodes named as Curator names its own (``_c_<uuid>-lock-NNNNNNNNNN``)
    are contenders like any other: the source waits behind a lower one and
    holds while a higher one waits; kazoo's own names (``__lock__``) are
    no contender of the common recipe, lowest as they are."""
    from kazoo.exceptions import NoNodeError

    ep = service("FENCING_TEST_ZK")
    zk = kazoo_client(ep, clients)
    path = lock_name("zookeeper")
    zk.ensure_path(path)
    own = zk.create(f"{path}/{uuid.uuid4().hex}__lock__", b"", ephemeral=True, sequence=True)

    def curator() -> str:
        return str(zk.create(f"{path}/_c_{uuid.uuid4()}-lock-", b"", ephemeral=True,
                             sequence=True))

    first = curator()
    src = clients.source("zookeeper", path, db, ttl=10)
    assert src.try_acquire() is None, f"the source took the lock Curator's {first} holds"
    got: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: got.update(t=src.acquire(timeout=30)))
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive(), got
    zk.delete(first)
    waiter.join(30)
    assert "t" in got, f"the source did not get the lock once {first} was gone"
    second = curator()
    assert src.next_token() > got["t"], "the source lost the lock to a later Curator node"
    assert src.release()
    for n in (second, own):
        try:
            zk.delete(n)
        except NoNodeError:
            pass


# ---------------------------------------------------------------- Redis

# the scripts of docs/lock-services.md, as written there
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return redis.call('INCR', KEYS[2])
end
return nil
"""
NEXT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return redis.call('INCR', KEYS[2])
end
return nil
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisHolder(Reference):
    def __init__(self, db: Any, r: Any, name: str):
        self.db, self.r = db, r
        self.lock, self.fence = f"lock:{{{name}}}", f"fence:{{{name}}}"
        self.me = str(uuid.uuid4())
        self.got = threading.Event()
        self.stop = threading.Event()
        self.gen: Optional[int] = None

    def start(self) -> None:
        def take() -> None:
            while not self.stop.is_set():
                if self.r.eval(ACQUIRE, 2, self.lock, self.fence, self.me, 10000) is not None:
                    self.got.set()
                    return
                time.sleep(0.05)
        threading.Thread(target=take, daemon=True).start()

    def locked(self, timeout: float) -> bool:
        if not self.got.wait(timeout):
            return False
        if self.gen is None:
            self.gen = generation(self.db, "redis")
        return True

    def next(self) -> str:
        n = self.r.eval(NEXT, 2, self.lock, self.fence, self.me, 10000)
        assert n is not None, "the docs' holder lost its lock"
        return f"{self.gen}:{int(n)}"

    def release(self) -> None:
        assert self.r.eval(RELEASE, 1, self.lock, self.me) == 1

    def close(self) -> None:
        self.stop.set()


def test_redis(db: Any, clients: Clients) -> None:
    """The docs' Redis scripts and a RedisSource on one name: the source's
    lock is ``lock:{NAME}`` with its id, its counter ``fence:{NAME}``, each
    waits while the other holds, and one fence orders their tokens."""
    import redis
    host, port = service("FENCING_TEST_REDIS").split(":")
    r = redis.Redis(host=host, port=int(port))
    clients.closers.append(r.close)
    name = unique("interop")
    src = clients.source("redis", name, db, ttl=10)

    def holds(waiting: bool, grant: fc.Token) -> None:
        if not waiting:
            assert r.get(f"lock:{{{name}}}") == str(src.id).encode()
            assert int(r.get(f"fence:{{{name}}}")) == grant.counter

    interop(db, src, RedisHolder(db, r, name), holds)
