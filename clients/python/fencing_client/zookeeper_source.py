"""ZooKeeper: the lock recipe (kazoo's ``Lock``, Curator's
``InterProcessMutex``) under PATH."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable, Optional

from ._db import Database
from .generations import GENERATIONS_TABLE, read_generation
from .source import TokenSource, default_holder
from .token import Token

if TYPE_CHECKING:
    from kazoo.client import KazooClient


class ZooKeeperSource(TokenSource):
    """A ZooKeeper lock: ``ZooKeeperSource(kazoo_client, "/locks/refunds", db)``.

    The lock is kazoo's ``Lock`` recipe (an ephemeral sequential znode
    under ``path``; the lowest holds it), so kazoo's and Curator's locks on
    the same path exclude this one.  The number is the **mzxid of a
    ``setData`` on the holder's own lock znode**, made while it holds the
    lock: the grant's token is the first, right after the lock was taken,
    each ``next_token()`` another (the znode is ephemeral: once the session
    expired it is gone, and ``setData`` fails: the lock is lost).  The token
    is ``fencing.fence_from_zxid(mzxid, generation)``, computed here with
    the same arithmetic (``Token.from_zxid``), the generation read from
    PostgreSQL (``fencing_lock_generations``, service ``zookeeper``) right
    after the grant and kept for it.

    The TTL is the client's **session timeout** (``KazooClient(timeout=)``,
    within the servers' ``minSessionTimeout``..``maxSessionTimeout``): the
    lock is lost when the session expires, a pause shorter than that loses
    nothing.  kazoo keeps the session alive from a thread of this process;
    this source watches the session (a lost session sets ``lost`` at once)
    and checks its znode every third of the timeout.
    """

    def __init__(self, zk: "KazooClient", path: str, db: Database, *,
                 on_lost: Optional[Callable[[TokenSource], None]] = None,
                 identifier: Optional[str] = None, service: str = "zookeeper",
                 table: str = GENERATIONS_TABLE):
        timeout_ms = getattr(zk, "_session_timeout", 10000)
        super().__init__(ttl=max(0.001, timeout_ms / 1000.0), on_lost=on_lost, db=db)
        self.zk = zk
        self.path = path.rstrip("/") or "/"
        self.identifier = identifier if identifier is not None else default_holder()
        self.service = service
        self.table = table
        self.generation: Optional[int] = None
        self.node: Optional[str] = None     # the lock znode's full path
        self._lock: Any = None
        self._listening = False

    def __repr__(self) -> str:
        return f"ZooKeeperSource({self.path!r})"

    def _listener(self, state: str) -> None:
        # kazoo's thread: only note it, never block here
        if state == "LOST":
            threading.Thread(target=self._mark_lost, args=(self._grant, "the ZooKeeper session expired"),
                             daemon=True).start()

    def _try_grant(self, wait: Optional[float]) -> Optional[Token]:
        from kazoo.exceptions import LockTimeout

        lock = self.zk.Lock(self.path, self.identifier)
        try:
            if wait == 0:
                got = lock.acquire(blocking=False)
            else:
                got = lock.acquire(blocking=True, timeout=wait)
        except LockTimeout:
            got = False
        if not got:
            return None
        try:
            self._lock = lock
            self.node = f"{self.path}/{lock.node}"
            stat = self._set_mine()
            if stat is None:        # the session expired right after the grant
                self._drop()
                return None
            self.generation = read_generation(self._database(), self.service, self.table)
            if not self._listening:
                self.zk.add_listener(self._listener)
                self._listening = True
            return Token.from_zxid(int(stat.mzxid), self.generation)
        except BaseException:
            self._drop()
            raise

    def _set_mine(self) -> Any:
        """setData on our own znode: its Stat, or None when it is gone."""
        from kazoo.exceptions import NoNodeError, SessionExpiredError

        node = self.node
        if node is None:
            return None
        try:
            return self.zk.set(node, self.identifier.encode())
        except (NoNodeError, SessionExpiredError):
            return None

    def _next(self) -> Optional[Token]:
        if self.generation is None:
            return None
        stat = self._set_mine()
        return None if stat is None else Token.from_zxid(int(stat.mzxid), self.generation)

    def _renew(self) -> Optional[bool]:
        node = self.node
        if node is None:
            return None
        if self.zk.state == "LOST":
            return False
        if self.zk.state != "CONNECTED":
            raise ConnectionError(f"ZooKeeper connection {self.zk.state}")
        return self.zk.exists(node) is not None

    def _drop(self) -> None:
        lock, self._lock, self.node = self._lock, None, None
        if lock is not None:
            try:
                lock.release()
            except Exception:
                pass

    def _release(self) -> bool:
        held = self.node is not None and self.zk.state == "CONNECTED" and \
            self.zk.exists(self.node) is not None
        self._drop()
        if self._listening:
            self.zk.remove_listener(self._listener)
            self._listening = False
        return held

    def _after_lost(self) -> None:
        self._drop()
