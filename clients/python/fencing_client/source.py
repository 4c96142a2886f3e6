"""What every token source does: take a lock, hand out tokens while it is
held, keep it alive, say when it is lost, give it up.

A token source is a lock that hands out fencing tokens.  Taking the lock
(``try_acquire()``, ``acquire(timeout)``) gives the grant's token;
``next_token()`` gives a new, higher token while the lock is still held
(and proves that it is: it raises ``LockLost`` when it is not), which is
what a fenced transaction takes by default, one per transaction, so that a
holder writes as many transactions as it needs on strict tables.

While the lock is held, a thread of this process renews it (every third
of its TTL).  The thread lives in the process whose pause matters: when
the process is frozen (a GC pause, SIGSTOP, a suspended VM) the renewals
stop with it and the lock runs out, which is the point.  When a renewal
finds the lock gone, or none succeeded for a whole TTL, the source sets
``lost`` (a ``threading.Event``) and calls ``on_lost(source)``.

The first meter: ``acquire(fences=[Scope("ledger", "acct-1")])`` raises
those fences to the grant's token right after the grant
(``fencing.raise_fence``, one transaction), so that an older holder that
wakes before the new holder's first real write is refused too.
"""
from __future__ import annotations

import abc
import logging
import os
import socket
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar

import psycopg

from ._db import Database, SourceDb
from .errors import LockLost, NotAcquired, translate
from .token import Token, TokenLike

log = logging.getLogger("fencing_client")

S = TypeVar("S", bound="TokenSource")

RAISE_FENCE = "SELECT fencing.raise_fence(%s::regclass, %s::text::fencing.fence, VARIADIC %s::text[])"


class Scope:
    """A key or table scope whose fence a new holder raises when it takes
    the lock: ``Scope("ledger", "acct-1")`` (the key values, in the order
    of the table's key columns, as text), ``Scope("refunds")`` (the table
    scope).  Row-scope tables raise their fence with
    ``UPDATE t SET fence = %s WHERE ...`` instead."""

    __slots__ = ("table", "key")

    def __init__(self, table: str, *key: object):
        if not table:
            raise ValueError("a scope names its table")
        self.table = table
        self.key: tuple[str, ...] = tuple(str(k) for k in key)

    def __repr__(self) -> str:
        return f"Scope({', '.join(repr(x) for x in (self.table, *self.key))})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scope) and (self.table, self.key) == (other.table, other.key)

    def __hash__(self) -> int:
        return hash((self.table, self.key))


def default_holder() -> str:
    """``host:pid=N:random``: who holds a lock, as the lock services show
    it; one of its own for every source, so that two sources of one
    process never count as the same holder."""
    return f"{socket.gethostname()}:pid={os.getpid()}:{uuid.uuid4().hex[:8]}"


class TokenSource(abc.ABC):
    """A lock that hands out fencing tokens (the interface of every source).

    ``token`` is the newest token this source handed out for the current
    grant (None while the lock is not held); ``lost`` is set when a held
    lock was lost.  ``with source:`` takes the lock (``acquire()``, unless
    it is held already), gives the source itself, and releases it at the
    end.
    """

    #: seconds
    ttl: float

    def __init__(self, *, ttl: float, on_lost: Optional[Callable[["TokenSource"], None]] = None,
                 db: Optional[Database] = None):
        if ttl <= 0:
            raise ValueError("ttl is in seconds, and more than 0")
        self.ttl = float(ttl)
        self.on_lost = on_lost
        self.lost = threading.Event()
        self.token: Optional[Token] = None
        self._db = SourceDb(db) if db is not None else None
        self._state = threading.RLock()     # token, held, the renewal thread
        self._held = False
        self._grant = 0                     # counts grants: a renewal thread serves one
        self._stop: Optional[threading.Event] = None
        self._thread: Optional[threading.Thread] = None

    # ---- what each source implements

    @abc.abstractmethod
    def _try_grant(self, wait: Optional[float]) -> Optional[Token]:
        """Take the lock: the grant's token, or None when another holds
        it.  ``wait``: 0 = one attempt; a number = wait up to that many
        seconds; None = wait as long as it takes."""

    @abc.abstractmethod
    def _next(self) -> Optional[Token]:
        """A new token while the lock is held; None when it is not."""

    @abc.abstractmethod
    def _renew(self) -> Optional[bool]:
        """Renew the lock: True when still held, False when lost, None
        when this round was skipped; raises on a failure to reach the
        service (retried until a whole TTL passed)."""

    @abc.abstractmethod
    def _release(self) -> bool:
        """Give the lock up; True when it was still held."""

    def _after_lost(self) -> None:
        """Clean-up after the lock was found lost (a source may override)."""

    # ---- the interface

    @property
    def held(self) -> bool:
        """Is the lock held (taken, not released, not found lost)?"""
        return self._held and not self.lost.is_set()

    def try_acquire(self, *, fences: Sequence[Scope] = ()) -> Optional[Token]:
        """Take the lock if it is free: the grant's token, or None at once
        when another holder has it."""
        return self._acquire(0.0, fences)

    def acquire(self, timeout: Optional[float] = None, *, fences: Sequence[Scope] = ()) -> Token:
        """Take the lock, waiting up to ``timeout`` seconds (None: as long
        as it takes): the grant's token.  Raises ``NotAcquired`` when the
        lock was not taken in time."""
        if timeout is not None and timeout < 0:
            raise ValueError("timeout is in seconds, 0 or more (None: no limit)")
        tok = self._acquire(timeout, fences)
        if tok is None:
            raise NotAcquired(f"{self!r}: the lock was not taken"
                              + (f" within {timeout:g} s" if timeout is not None else ""))
        return tok

    def _acquire(self, wait: Optional[float], fences: Sequence[Scope]) -> Optional[Token]:
        with self._state:
            if self.held:
                raise RuntimeError(f"{self!r} holds its lock already: release it first")
        tok = self._try_grant(wait)
        if tok is None:
            return None
        with self._state:
            self._grant += 1
            self.token = tok
            self._held = True
            self.lost.clear()
        if fences:
            try:
                self.raise_fences(fences, tok)
            except BaseException:
                self.release()
                raise
        self._start_renewal()
        return tok

    def raise_fences(self, fences: Iterable[Scope], token: Optional[TokenLike] = None) -> None:
        """Raise the fences of ``fences`` to ``token`` (the grant's token by
        default) in one transaction: ``fencing.raise_fence`` for each."""
        scopes = list(fences)
        if not scopes:
            return
        tok = Token.parse(token) if token is not None else self.token
        if tok is None:
            raise LockLost(f"{self!r}: no token to raise fences with (the lock is not held)")
        db = self._database()
        try:
            with db.transaction() as conn:
                for s in scopes:
                    if not isinstance(s, Scope):
                        raise TypeError(f"fences: Scope(table, *key) objects, not {s!r}")
                    conn.execute(RAISE_FENCE, (s.table, str(tok), list(s.key)))
        except psycopg.Error as e:
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e

    def next_token(self) -> Token:
        """A new token, higher than every token handed out before, while
        the lock is held; raises ``LockLost`` when it is not."""
        with self._state:
            if not self._held:
                raise LockLost(f"{self!r}: the lock is not held")
            if self.lost.is_set():
                raise LockLost(f"{self!r}: the lock was lost")
            grant = self._grant
        tok = self._next()
        if tok is None:
            self._mark_lost(grant, "the lock service says the lock is not held")
            raise LockLost(f"{self!r}: the lock was lost (the lock service says so)")
        with self._state:
            if grant == self._grant:
                self.token = tok
        return tok

    def release(self) -> bool:
        """Give the lock up (only this holder's own: a holder whose lock ran
        out never frees the next holder's).  True when it was still held."""
        with self._state:
            was = self._held
            lost = self.lost.is_set()
            self._held = False
            self.token = None
            self._grant += 1
            thread = self._stop_renewal()
        _join(thread)
        if not was:
            return False
        try:
            ok = self._release()
        except Exception:
            if lost:
                return False
            raise
        return ok and not lost

    def __enter__(self: S) -> S:
        if not self.held:
            self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    # ---- renewal and the lost signal

    def _database(self) -> SourceDb:
        if self._db is None:
            raise TypeError(f"{type(self).__name__} has no database: pass db=")
        return self._db

    def _renew_interval(self) -> float:
        return self.ttl / 3.0

    def _start_renewal(self) -> None:
        with self._state:
            old = self._stop_renewal()
            stop = threading.Event()
            t = threading.Thread(target=self._renewal, args=(self._grant, stop),
                                 name=f"fencing-renew-{self!r}", daemon=True)
            self._stop, self._thread = stop, t
            t.start()
        _join(old)

    def _stop_renewal(self) -> Optional[threading.Thread]:
        """Tell the renewal thread to stop (with ``_state`` held); the
        caller joins it after letting ``_state`` go."""
        if self._stop is not None:
            self._stop.set()
        t = self._thread
        self._stop = self._thread = None
        return t

    def _renewal(self, grant: int, stop: threading.Event) -> None:
        last_ok = time.monotonic()
        while not stop.wait(self._renew_interval()):
            with self._state:
                if grant != self._grant:
                    return
            try:
                held = self._renew()
            except Exception as e:      # the service did not answer: try again
                if time.monotonic() - last_ok >= self.ttl:
                    self._mark_lost(grant, f"no renewal succeeded for {self.ttl:g} s ({e!r})")
                    return
                log.debug("%r: renewal failed, trying again: %r", self, e)
                continue
            if held is None:
                continue
            if not held:
                self._mark_lost(grant, "a renewal found the lock gone")
                return
            last_ok = time.monotonic()

    def _mark_lost(self, grant: int, why: str) -> None:
        with self._state:
            if grant != self._grant or not self._held or self.lost.is_set():
                return
            self.lost.set()
            if self._stop is not None:
                self._stop.set()
        log.warning("%r: lock lost: %s", self, why)
        try:
            self._after_lost()
        except Exception as e:
            log.debug("%r: clean-up after the loss failed: %r", self, e)
        cb = self.on_lost
        if cb is not None:
            try:
                cb(self)
            except Exception:
                log.exception("%r: on_lost raised", self)


def _join(thread: Optional[threading.Thread]) -> None:
    if thread is not None and thread is not threading.current_thread():
        thread.join(timeout=30)


class StaticToken(TokenSource):
    """A token you already have: ``StaticToken("3:42")``.  It is not a
    lock: every transaction gets this same token, so on a strict table a
    second transaction with it is refused (``TokenAlreadyUsed``); nothing
    renews it and it is never lost."""

    def __init__(self, token: TokenLike):
        super().__init__(ttl=1.0)
        self._static = Token.parse(token)
        self.token = self._static
        self._held = True

    def __repr__(self) -> str:
        return f"StaticToken({str(self._static)!r})"

    @property
    def held(self) -> bool:
        return True

    def _acquire(self, wait: Optional[float], fences: Sequence[Scope]) -> Optional[Token]:
        if fences:
            self.raise_fences(fences, self._static)
        return self._static

    def raise_fences(self, fences: Iterable[Scope], token: Optional[TokenLike] = None) -> None:
        raise TypeError("StaticToken has no database to raise fences in: use a token source")

    def _try_grant(self, wait: Optional[float]) -> Optional[Token]:
        return self._static

    def next_token(self) -> Token:
        return self._static

    def _next(self) -> Optional[Token]:
        return self._static

    def _renew(self) -> Optional[bool]:
        return True

    def _release(self) -> bool:
        return True

    def release(self) -> bool:
        return True


def as_source(source: "TokenSource | TokenLike") -> TokenSource:
    """A token source: the one given, or a StaticToken of a Token or text."""
    if isinstance(source, TokenSource):
        return source
    if isinstance(source, (Token, str)):
        return StaticToken(source)
    raise TypeError(f"expected a TokenSource, a Token or 'epoch:counter' text, not "
                    f"{type(source).__name__}")
