"""Token sources: take a lock, give a Token; release the lock.

Every source has ``acquire()`` (a Token, or None when the lock was not
taken) and ``release()``, and keeps the token of its current grant in
``.token``.  The external services' numbers are paired with a
*generation* kept in PostgreSQL (``fencing_lock_generations``), read right
after the lock is taken and kept with the grant, never read again at write
time (docs/lock-services.md, "A generation").

The client libraries of the services are imported only by the sources
that use them: etcd3, kazoo, redis are optional.
"""
from __future__ import annotations

import threading
import time
import uuid
from datetime import timedelta
from typing import Any, Optional, Union

from psycopg import sql

from .errors import NotAcquired
from .fenced import connection_of, query_one
from .token import Token, TokenLike

GENERATIONS_TABLE = "fencing_lock_generations"


def _table_ident(table: str) -> sql.Composable:
    return sql.Identifier(*table.split(".")) if "." in table else sql.Identifier(table)


def ensure_generation_table(conn_or_pool: Any, *services: str,
                            table: str = GENERATIONS_TABLE) -> None:
    """Create ``table(service text primary key, generation int)`` when it is
    missing, and a row with generation 0 for each service that has none."""
    t = _table_ident(table)
    with connection_of(conn_or_pool) as conn, conn.transaction():
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (service text PRIMARY KEY, "
            "generation integer NOT NULL DEFAULT 0 CHECK (generation >= 0))").format(t))
        for s in services:
            conn.execute(sql.SQL("INSERT INTO {} (service, generation) VALUES (%s, 0) "
                                 "ON CONFLICT (service) DO NOTHING").format(t), (s,))


def read_generation(conn_or_pool: Any, service: str, table: str = GENERATIONS_TABLE) -> int:
    """The service's generation, in a transaction of its own."""
    row = query_one(conn_or_pool, sql.SQL("SELECT generation FROM {} WHERE service = %s")
                    .format(_table_ident(table)), (service,))
    if row is None:
        raise LookupError(f"no generation for service {service!r} in {table}: "
                          f"call ensure_generation_table(conn, {service!r}) once")
    return int(row[0])


def raise_generation(conn_or_pool: Any, service: str, by: int = 1,
                     table: str = GENERATIONS_TABLE) -> int:
    """Raise a service's generation (after it lost or rolled back its
    numbers); returns the new generation."""
    with connection_of(conn_or_pool) as conn, conn.transaction():
        row = conn.execute(sql.SQL("UPDATE {} SET generation = generation + %s "
                                   "WHERE service = %s RETURNING generation")
                           .format(_table_ident(table)), (by, service)).fetchone()
    if row is None:
        raise LookupError(f"no generation for service {service!r} in {table}")
    return int(row[0])


def _interval(ttl: Union[float, int, timedelta, str]) -> Union[timedelta, str]:
    if isinstance(ttl, (int, float)):
        return timedelta(seconds=ttl)
    return ttl


class TokenSource:
    """The interface of every source."""

    token: Optional[Token] = None

    def acquire(self) -> Optional[Token]:  # pragma: no cover - interface
        raise NotImplementedError

    def release(self) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    def __enter__(self) -> Token:
        tok = self.acquire()
        if tok is None:
            raise NotAcquired(f"{type(self).__name__}: the lock was not taken")
        return tok

    def __exit__(self, *exc) -> None:
        self.release()


class StaticToken(TokenSource):
    """A token the caller already has: ``StaticToken("3:42")``."""

    def __init__(self, token: TokenLike):
        self.token = Token.parse(token)

    def acquire(self) -> Token:
        return self.token

    def release(self) -> bool:
        return True


class LeaseSource(TokenSource):
    """The extension's own leases: ``fencing.lease_acquire(name, holder, ttl)``.

    ``acquire()`` returns the new token, or None while another holder's
    lease is live.  ``renew()`` extends it (False once it expired, was
    released or taken over), ``release()`` frees it, ``check()`` asks
    whether it is still live.  Times are the server's clock.
    """

    def __init__(self, conn_or_pool: Any, name: str, holder: str,
                 ttl: Union[float, timedelta, str] = 30.0):
        self.db = conn_or_pool
        self.name = name
        self.holder = holder
        self.ttl = _interval(ttl)
        self.token = None

    def _one(self, query: str, params: tuple) -> Any:
        return query_one(self.db, query, params)[0]

    def acquire(self) -> Optional[Token]:
        t = self._one("SELECT fencing.lease_acquire(%s, %s, %s)::text",
                      (self.name, self.holder, self.ttl))
        self.token = Token.parse(t) if t is not None else None
        return self.token

    def renew(self, ttl: Union[float, timedelta, str, None] = None) -> bool:
        if self.token is None:
            return False
        return bool(self._one("SELECT fencing.lease_renew(%s, %s, %s)",
                              (self.name, str(self.token), _interval(ttl) if ttl else self.ttl)))

    def check(self) -> bool:
        if self.token is None:
            return False
        return bool(self._one("SELECT fencing.lease_check(%s, %s)", (self.name, str(self.token))))

    def release(self) -> bool:
        if self.token is None:
            return False
        ok = bool(self._one("SELECT fencing.lease_release(%s, %s)", (self.name, str(self.token))))
        self.token = None
        return ok


class RedisLockSource(TokenSource):
    """Redis, one node: ``SET lock:NAME <unique> NX PX ttl`` and, only when
    that took the lock, ``INCR fence:NAME`` — both in ONE Lua script, so a
    caller that did not get the lock never moves the counter and gets no
    token.  The token is ``generation:counter``, the generation read from
    PostgreSQL right after the lock was taken.

    ``release()`` deletes the lock key only while it still holds this
    source's unique value (compare-and-delete, one script): a holder whose
    lock expired never frees the next holder's lock.

    Redlock over several nodes has no counter they agree on: fence with a
    counter in one durable place (docs/lock-services.md).
    """

    ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
"""
    RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
    EXTEND = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""

    def __init__(self, redis_client: Any, name: str, db: Any, *, ttl_ms: int = 10000,
                 service: str = "redis", table: str = GENERATIONS_TABLE,
                 lock_key: Optional[str] = None, counter_key: Optional[str] = None):
        self.r = redis_client
        self.name = name
        self.db = db
        self.ttl_ms = int(ttl_ms)
        self.service = service
        self.table = table
        self.lock_key = lock_key or f"lock:{name}"
        self.counter_key = counter_key or f"fence:{name}"
        self._acquire = redis_client.register_script(self.ACQUIRE)
        self._release = redis_client.register_script(self.RELEASE)
        self._extend = redis_client.register_script(self.EXTEND)
        self.value: Optional[str] = None
        self.counter: Optional[int] = None
        self.generation: Optional[int] = None
        self.token = None

    def try_acquire(self) -> Optional[Token]:
        """One attempt: the token, or None when another holds the lock."""
        value = uuid.uuid4().hex
        n = self._acquire(keys=[self.lock_key, self.counter_key], args=[value, self.ttl_ms])
        if n is None:
            return None
        self.value, self.counter = value, int(n)
        self.generation = read_generation(self.db, self.service, self.table)
        self.token = Token(self.generation, self.counter)
        return self.token

    def acquire(self, timeout: float = 0.0, poll: float = 0.01) -> Optional[Token]:
        """Try until ``timeout`` seconds have passed (0: once)."""
        end = time.monotonic() + timeout
        while True:
            tok = self.try_acquire()
            if tok is not None or time.monotonic() >= end:
                return tok
            time.sleep(poll)

    def extend(self, ttl_ms: Optional[int] = None) -> bool:
        """Push the lock's expiry out, while it is still ours."""
        if self.value is None:
            return False
        return bool(self._extend(keys=[self.lock_key], args=[self.value, int(ttl_ms or self.ttl_ms)]))

    def release(self) -> bool:
        if self.value is None:
            return False
        ok = bool(self._release(keys=[self.lock_key], args=[self.value]))
        self.value = None
        self.token = None
        return ok


class EtcdLockSource(TokenSource):
    """etcd (the etcd3 package): the lock is the key ``/locks/NAME``, put
    under a lease in a transaction that succeeds only when the key does not
    exist (``create_revision == 0``); a waiter watches the key and tries
    again.  (etcd3's own ``Lock.acquire`` is not used: in Debian 12 it
    fails whenever it has to wait, with tenacity 8.)

    The number is the lock key's **create_revision**: the revision of the
    transaction that created the key, i.e. of this grant.  It is read in
    that same transaction (a range read after the put), so it is this
    grant's own.  We never use the grant's header revision: one kind of
    revision per fence (docs/lock-services.md).  The token is
    ``generation:create_revision``, the generation read from PostgreSQL
    right after the grant.

    **The lease keep-alive must live in the process whose pause matters.**
    ``keepalive=True`` refreshes the lease from a daemon thread of this
    process every ttl/3 seconds: when this process is paused (GC, SIGSTOP,
    VM suspend) the refreshes stop with it, the lease runs out after
    ``ttl`` seconds and the next holder gets a higher revision, which the
    database then prefers.  A keep-alive in another process (a sidecar)
    would keep the lock alive for a writer that is frozen, and a frozen
    sidecar would let a live writer lose its lock without knowing it.
    etcd grants leases of 2 seconds at least (with its default election
    timeout).
    """

    prefix = "/locks/"

    def __init__(self, etcd_client: Any, name: str, db: Any, *, ttl: int = 10,
                 service: str = "etcd", table: str = GENERATIONS_TABLE,
                 keepalive: bool = True):
        self.client = etcd_client
        self.name = name
        self.key = self.prefix + name
        self.db = db
        self.ttl = int(ttl)
        self.service = service
        self.table = table
        self.keepalive = keepalive
        self.lease: Any = None
        self.value: Optional[bytes] = None
        self.revision: Optional[int] = None
        self.generation: Optional[int] = None
        self.token = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def try_acquire(self) -> Optional[Token]:
        """One attempt: the token, or None when another holds the lock."""
        c = self.client
        value = uuid.uuid4().hex.encode()
        lease = c.lease(self.ttl)
        ok, responses = c.transaction(
            compare=[c.transactions.create(self.key) == 0],
            success=[c.transactions.put(self.key, value, lease=lease),
                     c.transactions.get(self.key)],
            failure=[])
        if not ok:
            lease.revoke()
            return None
        kvs = responses[1]
        if not kvs or kvs[0][0] != value:       # cannot happen: same transaction
            lease.revoke()
            return None
        self.lease, self.value = lease, value
        self.revision = int(kvs[0][1].create_revision)
        self.generation = read_generation(self.db, self.service, self.table)
        self.token = Token(self.generation, self.revision)
        if self.keepalive:
            self._stop.clear()
            self._thread = threading.Thread(target=self._refresh, args=(lease,),
                                            name=f"etcd-keepalive-{self.name}", daemon=True)
            self._thread.start()
        return self.token

    def acquire(self, timeout: Optional[float] = 10) -> Optional[Token]:
        """Wait for the lock (None: for ever), watching its key between
        attempts; None when it was not taken within ``timeout`` seconds."""
        import etcd3.exceptions
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            tok = self.try_acquire()
            if tok is not None:
                return tok
            left = 0.5 if end is None else min(0.5, end - time.monotonic())
            if left <= 0:
                return None
            try:
                # any change of the key (its deletion) wakes us; the short
                # timeout covers a deletion before the watch began
                self.client.watch_once(self.key, timeout=left)
            except etcd3.exceptions.WatchTimedOut:
                pass

    def _refresh(self, lease: Any) -> None:
        while not self._stop.wait(self.ttl / 3.0):
            try:
                lease.refresh()
            except Exception:
                return

    def is_held(self) -> bool:
        """Does the lock key still hold this grant's value?"""
        if self.value is None:
            return False
        v, _ = self.client.get(self.key)
        return v == self.value

    def release(self) -> bool:
        """Delete the lock key only while it is still this grant's
        (compare-and-delete), and revoke the lease."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.value is None:
            return False
        c = self.client
        ok, _ = c.transaction(compare=[c.transactions.value(self.key) == self.value],
                              success=[c.transactions.delete(self.key)], failure=[])
        try:
            self.lease.revoke()
        except Exception:
            pass
        self.lease = self.value = None
        self.token = None
        return bool(ok)


class ZooKeeperLockSource(TokenSource):
    """ZooKeeper (kazoo): the lock recipe's ephemeral sequential znode; the
    number is that znode's **czxid**, the token is computed by the server:
    ``SELECT fencing.fence_from_zxid(czxid, generation)::text``, so that a
    leader change (a new zxid epoch) keeps tokens in order.

    The lock is lost when the client's ZooKeeper **session expires**: its
    ephemeral node is deleted ``session timeout`` after the last heartbeat
    (kazoo's ``KazooClient(timeout=...)``, negotiated within the servers'
    minSessionTimeout..maxSessionTimeout, by default 2 to 20 tickTimes).
    A pause shorter than the session timeout loses nothing; a pause longer
    than it lets the next waiter take the lock with a higher czxid, and the
    thawed holder's writes then fail with StaleToken.
    """

    def __init__(self, zk_client: Any, path: str, db: Any, *, identifier: str = "",
                 service: str = "zookeeper", table: str = GENERATIONS_TABLE):
        self.zk = zk_client
        self.path = path
        self.db = db
        self.identifier = identifier
        self.service = service
        self.table = table
        self.lock: Any = None
        self.czxid: Optional[int] = None
        self.generation: Optional[int] = None
        self.token = None

    def acquire(self, timeout: Optional[float] = 10) -> Optional[Token]:
        lock = self.zk.Lock(self.path, self.identifier)
        if not lock.acquire(blocking=True, timeout=timeout):
            return None
        stat = self.zk.exists(f"{self.path}/{lock.node}")
        if stat is None:
            # the session expired between the grant and the read
            return None
        self.lock = lock
        self.czxid = int(stat.czxid)
        self.generation = read_generation(self.db, self.service, self.table)
        text = query_one(self.db, "SELECT fencing.fence_from_zxid(%s, %s)::text",
                         (self.czxid, self.generation))[0]
        self.token = Token.parse(text)
        return self.token

    def release(self) -> bool:
        if self.lock is None:
            return False
        ok = bool(self.lock.release())
        self.lock = None
        self.token = None
        return ok
