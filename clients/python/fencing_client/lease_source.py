"""The extension's own leases: ``fencing.lease_acquire``, ``lease_next``,
``lease_renew``, ``lease_release``."""
from __future__ import annotations

import time
from datetime import timedelta
from typing import Callable, Optional

from ._db import Database
from .source import TokenSource, default_holder
from .token import Token


class LeaseSource(TokenSource):
    """A built-in lease, a lock kept in PostgreSQL itself:
    ``LeaseSource(db, "refunds", ttl=30)``.

    ``db``: a conninfo string (the source opens a connection of its own),
    a psycopg_pool ``ConnectionPool``, or a psycopg ``Connection`` (the
    source's statements then run on it between your transactions: a
    renewal is skipped while it is in a transaction).  Times are the
    server's clock.

    The grant is ``fencing.lease_acquire(name, holder, ttl)``; each
    ``next_token()`` is ``fencing.lease_next(name, current, ttl)``, which
    also renews the lease; a thread renews it (``fencing.lease_renew``)
    every third of ``ttl`` while it is held.  A table protected with
    ``fencing.protect(..., lease => name)`` refuses a write whose lease
    ran out (``LeaseExpired``) even before another holder wrote.
    """

    def __init__(self, db: Database, name: str, *, holder: Optional[str] = None,
                 ttl: float = 30.0, on_lost: Optional[Callable[[TokenSource], None]] = None,
                 poll: float = 0.05):
        super().__init__(ttl=ttl, on_lost=on_lost, db=db)
        self.name = name
        self.holder = holder or default_holder()
        self.poll = poll

    def __repr__(self) -> str:
        return f"LeaseSource({self.name!r})"

    def _interval(self) -> timedelta:
        iv = self._iv
        if iv is None or iv[0] != self.ttl:
            iv = self._iv = (self.ttl, timedelta(seconds=self.ttl))
        return iv[1]

    _iv: Optional[tuple[float, timedelta]] = None

    def _one(self, query: str, params: tuple[object, ...]) -> object:
        row = self._database().query_one(query, params)
        return None if row is None else row[0]

    def _try_grant(self, wait: Optional[float]) -> Optional[Token]:
        end = None if wait is None else time.monotonic() + wait
        pause = self.poll
        while True:
            t = self._one("SELECT fencing.lease_acquire(%s, %s, %s)::text",
                          (self.name, self.holder, self._interval()))
            if t is not None:
                return Token.parse(str(t))
            if end is not None and time.monotonic() >= end:
                return None
            left = None if end is None else end - time.monotonic()
            time.sleep(pause if left is None else max(0.0, min(pause, left)))
            pause = min(pause * 2, 0.5, self.ttl / 10)

    def _next(self) -> Optional[Token]:
        db = self._database()
        with db.lock:       # not between a renewal's read of the token and its call
            cur = self.token
            if cur is None:
                return None
            row = db.query_one("SELECT fencing.lease_next(%s, %s, %s)::text",
                               (self.name, str(cur), self._interval()))
            if row is None or row[0] is None:
                return None
            tok = Token.from_server(row[0])
            self.token = tok
            return tok

    def _renew(self) -> Optional[bool]:
        db = self._database()
        with db.lock:
            if not db.idle():
                return None
            cur = self.token
            if cur is None:
                return None
            return bool(self._one("SELECT fencing.lease_renew(%s, %s, %s)",
                                  (self.name, str(cur), self._interval())))

    def _release(self) -> bool:
        # release() cleared .token; the lease's current token is the last one
        tok = self._last
        if tok is None:
            return False
        return bool(self._one("SELECT fencing.lease_release(%s, %s)", (self.name, str(tok))))

    def release(self) -> bool:
        self._last = self.token
        try:
            return super().release()
        finally:
            self._last = None

    _last: Optional[Token] = None

    def check(self) -> bool:
        """Is the lease live with this holder's current token
        (``fencing.lease_check``)?"""
        tok = self.token
        if tok is None:
            return False
        return bool(self._one("SELECT fencing.lease_check(%s, %s)", (self.name, str(tok))))
