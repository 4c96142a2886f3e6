"""etcd: etcd's own mutex (``etcdctl lock NAME``, Go's ``concurrency.Mutex``),
through etcd's JSON gateway with etcd3gw."""
from __future__ import annotations

import base64
import math
import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._db import Database
from .generations import GENERATIONS_TABLE, read_generation
from .source import TokenSource, default_holder
from .token import Token

if TYPE_CHECKING:
    import etcd3gw


def _b64(data: str | bytes) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return base64.b64encode(raw).decode()


def _prefix_end(prefix: str) -> str:
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return _b64(bytes(raw))


class EtcdSource(TokenSource):
    """etcd's mutex: ``EtcdSource(etcd3gw.client(host=..., port=...),
    "refunds", db, ttl=10)``.

    The lock is etcd's own: the key ``NAME/<lease id, hex>`` under a lease
    of ``ttl`` seconds; the waiter whose key has the lowest create revision
    holds it (the protocol of ``etcdctl lock NAME`` and of Go's
    ``concurrency.Mutex``, so those and this exclude each other).

    The number is the **header revision of a transaction that puts the
    holder's own key** (``If(CreateRevision(key) == mine)
    Then(Put(key, ignore_lease))``), made while it holds the lock: the
    grant's token is the first such put, right after the lock was taken;
    each ``next_token()`` is another (a failed compare means the lock is
    lost).  The token is ``(generation, revision)``, the generation read
    from PostgreSQL (``fencing_lock_generations``, service ``etcd``) right
    after the grant and kept for it.

    The lease is kept alive by a thread of this process (every third of
    ``ttl``): a frozen process stops refreshing it and loses the lock after
    ``ttl``.  (A keep-alive in another process, a sidecar, would keep a
    frozen writer's lock alive.)  etcd grants leases of its minimum TTL at
    least (about 2 s with its default election timeout).
    """

    def __init__(self, etcd: "etcd3gw.Etcd3Client", name: str, db: Database, *,
                 ttl: float = 10.0, on_lost: Optional[Callable[[TokenSource], None]] = None,
                 holder: Optional[str] = None, service: str = "etcd",
                 table: str = GENERATIONS_TABLE):
        super().__init__(ttl=ttl, on_lost=on_lost, db=db)
        self.etcd = etcd
        self.name = name
        self.prefix = name + "/"
        self.holder = holder or default_holder()
        self.service = service
        self.table = table
        self.key: Optional[str] = None
        self.create_revision: Optional[int] = None
        self.generation: Optional[int] = None
        self._lease: Any = None

    def __repr__(self) -> str:
        return f"EtcdSource({self.name!r})"

    # ---- etcd

    def _txn(self, txn: dict[str, Any]) -> dict[str, Any]:
        r: dict[str, Any] = dict(self.etcd.transaction(txn))
        return r

    def _range(self, request: dict[str, Any]) -> dict[str, Any]:
        r: dict[str, Any] = self.etcd.post(self.etcd.get_url("/kv/range"), json=request)
        return r

    def _owner_range(self) -> dict[str, Any]:
        # the waiter with the lowest create revision: the holder
        return {"request_range": {"key": _b64(self.prefix), "range_end": _prefix_end(self.prefix),
                                  "sort_order": "ASCEND", "sort_target": "CREATE", "limit": 1}}

    def _put_mine(self) -> Optional[int]:
        """The header revision of a put of this holder's own key, while it
        is still this grant's; None when it is not (the lock is lost)."""
        key, rev = self.key, self.create_revision
        if key is None or rev is None:
            return None
        r = self._txn({
            "compare": [{"key": _b64(key), "result": "EQUAL", "target": "CREATE",
                         "create_revision": rev}],
            "success": [{"request_put": {"key": _b64(key), "value": _b64(self.holder),
                                         "ignore_lease": True}}],
            "failure": []})
        if not r.get("succeeded"):
            return None
        return int(r["header"]["revision"])

    def _drop(self) -> bool:
        """Delete this holder's key (only its own) and revoke its lease;
        True when the key was still ours."""
        key, rev, lease = self.key, self.create_revision, self._lease
        self.key = self.create_revision = self._lease = None
        ours = False
        try:
            if key is not None and rev is not None:
                r = self._txn({
                    "compare": [{"key": _b64(key), "result": "EQUAL", "target": "CREATE",
                                 "create_revision": rev}],
                    "success": [{"request_delete_range": {"key": _b64(key)}}],
                    "failure": []})
                ours = bool(r.get("succeeded"))
        finally:
            if lease is not None:
                try:
                    lease.revoke()
                except Exception:
                    pass
        return ours

    # ---- the source

    def _try_grant(self, wait: Optional[float]) -> Optional[Token]:
        from etcd3gw.exceptions import WatchTimedOut

        end = None if wait is None else time.monotonic() + wait
        lease = self.etcd.lease(max(1, math.ceil(self.ttl)))
        self._lease = lease
        key = f"{self.prefix}{lease.id:x}"
        try:
            r = self._txn({
                "compare": [{"key": _b64(key), "result": "EQUAL", "target": "CREATE",
                             "create_revision": 0}],
                "success": [{"request_put": {"key": _b64(key), "value": _b64(self.holder),
                                             "lease": lease.id}}, self._owner_range()],
                "failure": [{"request_range": {"key": _b64(key)}}, self._owner_range()]})
            if r.get("succeeded"):
                rev = int(r["header"]["revision"])
            else:
                rev = int(r["responses"][0]["response_range"]["kvs"][0]["create_revision"])
            self.key, self.create_revision = key, rev
            owner = r["responses"][1]["response_range"].get("kvs") or []
            refreshed = time.monotonic()
            if owner and int(owner[0]["create_revision"]) != rev:
                if wait == 0:
                    self._drop()
                    return None
                # wait until every key created before ours is gone
                while True:
                    now = time.monotonic()
                    if end is not None and now >= end:
                        self._drop()
                        return None
                    if now - refreshed >= self.ttl / 3:
                        lease.refresh()
                        refreshed = now
                    before = self._range({
                        "key": _b64(self.prefix), "range_end": _prefix_end(self.prefix),
                        "sort_order": "DESCEND", "sort_target": "CREATE", "limit": 1,
                        "max_create_revision": rev - 1})
                    kvs = before.get("kvs") or []
                    if not kvs:
                        break
                    step = self.ttl / 3
                    if end is not None:
                        step = max(0.01, min(step, end - time.monotonic()))
                    try:
                        # its deletion, from the revision we read it at
                        self.etcd.watch_once(base64.b64decode(kvs[0]["key"]), timeout=step,
                                             start_revision=int(before["header"]["revision"]) + 1,
                                             filters=["NOPUT"])
                    except WatchTimedOut:
                        pass
            # held: the grant's token is the first put of our key
            put = self._put_mine()
            if put is None:             # our key is gone: the lease ran out while we waited
                self._drop()
                return None
            self.generation = read_generation(self._database(), self.service, self.table)
            return Token(self.generation, put)
        except BaseException:
            self._drop()
            raise

    def _next(self) -> Optional[Token]:
        if self.generation is None:
            return None
        put = self._put_mine()
        return None if put is None else Token(self.generation, put)

    def _renew(self) -> Optional[bool]:
        lease = self._lease
        if lease is None:
            return None
        return int(lease.refresh()) > 0

    def _release(self) -> bool:
        return self._drop()

    def _after_lost(self) -> None:
        self._drop()
