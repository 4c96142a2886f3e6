"""A fenced transaction: ``BEGIN; SELECT fencing.set_token($1); your
statements; COMMIT``, with a new token from the lock for each transaction.

The token is bound as a parameter (it works behind PgBouncer in transaction
pooling mode) and is transaction-local: it ends with the COMMIT or the
ROLLBACK, so no connection goes back to a pool with a token set.  The
transaction is the one a careful user writes by hand (psycopg's own BEGIN,
the token, the statements, COMMIT): no round trip more, and no more time.

A pool never hands out a connection that carries a token: the statement
that sets the token reads ``current_setting('fencing.token')`` first
(``SELECT current_setting(...), fencing.set_token($1)``, evaluated left to
right); at the start of a transaction any value there was
left at session level (a ``SET fencing.token`` of other code on the same
connection, or on the same PgBouncer server connection).  It is then reset
inside the transaction (``RESET fencing.token``, kept when it commits), the
token set again, and a warning logged (logger ``fencing_client``) with the
backend's pid.
"""
from __future__ import annotations

import random
import time
import warnings
from types import TracebackType
from typing import Any, Callable, Mapping, Optional, Sequence, TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from ._db import Database, connection_of, is_pool
from .errors import RETRYABLE, FencingError, translate
from .source import Scope, TokenSource, as_source, log
from .token import Token, TokenLike

SET_TOKEN = "SELECT fencing.set_token(%s)"
LEFTOVER = ("SELECT pg_catalog.current_setting('fencing.token', true), "
            "pg_catalog.pg_backend_pid()")
CHECK = "SELECT pg_catalog.current_setting('fencing.token', true)"
# the leftover check and the token in one statement: current_setting is
# evaluated before set_token (left to right), so it sees what the session
# carried before this transaction set anything
CHECK_AND_SET = CHECK + ", fencing.set_token(%s)"
# on the rare leftover: reset it (session level, kept at COMMIT), and the
# backend's pid for the warning
RESET = "RESET fencing.token"
PID = "SELECT pg_catalog.pg_backend_pid()"

T = TypeVar("T")
K = TypeVar("K")

_IDLE = TransactionStatus.IDLE


def _no_pipeline(pipeline: Optional[bool]) -> None:
    if pipeline is not None:
        warnings.warn("pipeline= has no effect: a fenced transaction sends BEGIN, then the "
                      "token with the leftover check in one statement, as a transaction by "
                      "hand does; drop the argument", DeprecationWarning, stacklevel=3)


class _Transaction:
    """BEGIN (psycopg's own), the leftover check and (with a token)
    set_token in one statement; COMMIT or ROLLBACK at the end; errors of
    the extension typed."""

    __slots__ = ("conn", "token", "locks", "_tx", "_cur", "_held")

    def __init__(self, conn: "psycopg.Connection[Any]", token: Optional[Token],
                 locks: Sequence[Any] = ()):
        self.conn = conn
        self.token = token
        self.locks = locks
        self._tx: Optional[psycopg.Transaction] = None
        self._cur: Optional[psycopg.Cursor[Any]] = None
        self._held: list[Any] = []

    def enter(self) -> "psycopg.Cursor[Any]":
        conn = self.conn
        status = conn.pgconn.transaction_status
        if status != _IDLE:
            raise psycopg.ProgrammingError(
                "a fenced transaction is a transaction of its own: the connection is already "
                f"in one ({TransactionStatus(status).name}); commit or roll back first")
        for lock in self.locks:
            lock.acquire()
            self._held.append(lock)
        # psycopg's Transaction sends BEGIN whether or not the connection
        # is in autocommit, and COMMIT or ROLLBACK at its end
        tx = self._tx = psycopg.Transaction(conn)
        entered = False
        # one cursor: the check's, then the caller's
        cur = self._cur = conn.cursor()
        try:
            tx.__enter__()
            entered = True
            tok = None if self.token is None else (str(self.token),)
            if tok is None:
                row = cur.execute(CHECK).fetchone()
            else:
                row = cur.execute(CHECK_AND_SET, tok).fetchone()
            if row is not None and row[0]:
                # a session-level token left on this connection: reset it
                # and set ours again
                cur.execute(RESET)
                if tok is not None:
                    cur.execute(SET_TOKEN, tok)
                pid = cur.execute(PID).fetchone()
                log.warning("the connection to backend pid %s carried a session-level "
                            "fencing.token (left by a SET fencing.token on it); reset it "
                            "before this fenced transaction", None if pid is None else pid[0])
        except BaseException as e:
            try:
                cur.close()
                if entered:
                    tx.__exit__(type(e), e, e.__traceback__)
            finally:
                self._release()
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e
        return cur

    def _release(self) -> None:
        held = self._held
        while held:
            held.pop().release()

    def exit(self, et: Optional[type[BaseException]], ev: Optional[BaseException],
             tb: Optional[TracebackType]) -> None:
        assert self._tx is not None and self._cur is not None
        try:
            self._tx.__exit__(et, ev, tb)
        except BaseException as e:
            # the COMMIT itself failed (or the ROLLBACK after an error)
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e
        finally:
            self._cur.close()
            self._release()
        if ev is not None:
            typed = translate(ev)
            if typed is not ev:
                raise typed from ev


def reset_leftover(conn: "psycopg.Connection[Any]") -> bool:
    """Inside a transaction just begun: reset a session-level
    ``fencing.token`` left on the connection (logged); True when there was
    one."""
    row = conn.execute(LEFTOVER).fetchone()
    if row is None or not row[0]:
        return False
    conn.execute(RESET)
    log.warning("the connection to backend pid %s carried a session-level fencing.token "
                "(left by a SET fencing.token on it); reset it", row[1])
    return True


def _locks(conn: "psycopg.Connection[Any]", sources: Sequence[TokenSource]) -> list[Any]:
    """The locks of the sources that work on this very connection: held
    for the whole transaction, so that their renewals wait for its end."""
    out: list[Any] = []
    for s in sources:
        db = s._db
        if db is not None and db.uses(conn):
            lock = db.lock
            if not any(lock is x for x in out):
                out.append(lock)
    return out


class fenced:
    """``with fenced(conn, source) as cur:`` — one transaction whose writes
    carry a token of ``source``.

    ``source``: a token source holding its lock (the transaction takes a
    new token with ``source.next_token()``; ``LockLost`` when the lock is
    not held any more), or a token you already have (a ``Token``, text
    ``"epoch:counter"`` or a ``StaticToken``: every transaction then
    carries that same token, and on a strict table a second one is
    refused with ``TokenAlreadyUsed``).  ``.token`` is the transaction's
    token.

    The connection must not be in a transaction already.  On leaving the
    block the transaction commits, or rolls back when the block raised.
    Errors of the extension come out typed (``StaleToken``, ...; also
    ``psycopg.DatabaseError``), the psycopg error as their ``__cause__``.
    ``pipeline`` is accepted and ignored (nothing is pipelined any more;
    a ``DeprecationWarning`` says so).
    """

    def __init__(self, conn: "psycopg.Connection[Any]", source: TokenSource | TokenLike, *,
                 pipeline: Optional[bool] = None):
        _no_pipeline(pipeline)
        self.conn = conn
        self.source: Optional[TokenSource] = None
        self.token: Optional[Token] = None
        if isinstance(source, TokenSource):
            self.source = source
        elif isinstance(source, (Token, str)):
            self.token = Token.parse(source)        # a bare token: no source to ask
        else:
            raise TypeError(f"expected a TokenSource, a Token or 'epoch:counter' text, not "
                            f"{type(source).__name__}")
        self._tx: Optional[_Transaction] = None

    def __enter__(self) -> "psycopg.Cursor[Any]":
        src = self.source
        if src is None:
            assert self.token is not None
            self._tx = _Transaction(self.conn, self.token)
            return self._tx.enter()
        db = src._db
        if db is None or not db.uses(self.conn):
            self.token = src.next_token()
            self._tx = _Transaction(self.conn, self.token)
            return self._tx.enter()
        # a source on this very connection: its lock held from the token to
        # the end of the transaction, no renewal between them
        lock = db.lock
        with lock:
            self.token = src.next_token()
            self._tx = _Transaction(self.conn, self.token, (lock,))
            return self._tx.enter()

    def __exit__(self, et: Optional[type[BaseException]], ev: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        assert self._tx is not None
        self._tx.exit(et, ev, tb)


def _attempts(attempts: int) -> None:
    if attempts < 1:
        raise ValueError("attempts is the number of tries: 1 (the default, no retry) or more")


def _retry(e: BaseException, attempt: int, attempts: int, backoff: float) -> bool:
    """Only serialization failures and deadlocks are tried again."""
    if isinstance(e, FencingError) or not isinstance(e, psycopg.Error):
        return False
    if e.sqlstate not in RETRYABLE or attempt >= attempts:
        return False
    time.sleep(backoff * attempt * (0.5 + random.random()))
    return True


def run_fenced(db: Database, source: TokenSource | TokenLike,
               fn: Callable[["psycopg.Cursor[Any]"], T], *, attempts: int = 1,
               backoff: float = 0.01, pipeline: Optional[bool] = None) -> T:
    """Run ``fn(cur)`` in a fenced transaction and return what it returns.

    ``db``: a psycopg Connection, or a psycopg_pool ConnectionPool (a
    connection is checked out for each attempt).  ``attempts``: the most
    tries (1: no retry).  Only serialization failures (``40001``) and
    deadlocks (``40P01``) are tried again, each time on a fresh checkout
    and with a fresh token from the source, after a short random pause;
    a fenced-out write (``SF001``), every other error of the extension and
    every other error are raised at once.  A transaction whose COMMIT was
    cut off (the connection broke) may have committed: it is not tried
    again; make such work safe to repeat with an idempotency key
    (``run_once``).  ``pipeline``: ignored, as in ``fenced``.
    """
    _no_pipeline(pipeline)
    _attempts(attempts)
    src = source if isinstance(source, TokenSource) else Token.parse(source)
    pool = is_pool(db)
    attempt = 0
    while True:
        attempt += 1
        try:
            # from a pool: the token first, then the checkout (no connection
            # held while the lock service answers; a source on the same pool
            # never waits for the connection this transaction holds)
            tx_src = src.next_token() if pool and isinstance(src, TokenSource) else src
            with connection_of(db) as conn, fenced(conn, tx_src) as cur:
                return fn(cur)
        except Exception as e:
            if _retry(e, attempt, attempts, backoff):
                continue
            raise


def run_locked(db: Database, source: TokenSource, fn: Callable[["psycopg.Cursor[Any]"], T], *,
               timeout: Optional[float] = None, fences: Sequence[Scope] = (),
               attempts: int = 1, backoff: float = 0.01, pipeline: Optional[bool] = None) -> T:
    """Take the lock (``source.acquire(timeout, fences=fences)``; raises
    ``NotAcquired``), run ``fn(cur)`` in a fenced transaction
    (``run_fenced``), give the lock up; what ``fn`` returned.  The same,
    with more transactions under the lock::

        with source:                        # acquire(); release() at the end
            run_fenced(db, source, step_one)
            run_fenced(db, source, step_two)
    """
    if not isinstance(source, TokenSource):
        raise TypeError("run_locked takes a token source (a lock): a token has nothing to take")
    _no_pipeline(pipeline)
    source.acquire(timeout, fences=fences)
    try:
        return run_fenced(db, source, fn, attempts=attempts, backoff=backoff)
    finally:
        source.release()


def run_fenced_many(db: Database, sources: Mapping[K, TokenSource | TokenLike],
                    fn: Callable[["psycopg.Cursor[Any]", dict[K, Token]], T], *,
                    attempts: int = 1, backoff: float = 0.01,
                    pipeline: Optional[bool] = None) -> T:
    """Several locks in one transaction: ``fn(cur, tokens)`` gets a new
    token of each source (``{name: Token}``) and writes each into the fence
    column of the rows that lock covers::

        def transfer(cur, tokens):
            cur.execute("INSERT INTO ledger (acct, amount, fence) VALUES (%s, %s, %s)",
                        ("acct-1", -100, str(tokens["from"])))
            cur.execute("INSERT INTO ledger (acct, amount, fence) VALUES (%s, %s, %s)",
                        ("acct-2", 100, str(tokens["to"])))

        run_fenced_many(pool, {"from": lock_1, "to": lock_2}, transfer)

    No session token is set: the guard judges each row by its own token,
    and a stale one on any row aborts the whole transaction.  Retries and
    the leftover check as ``run_fenced``; ``pipeline`` ignored.
    """
    _no_pipeline(pipeline)
    _attempts(attempts)
    srcs = {k: as_source(s) for k, s in sources.items()}
    attempt = 0
    while True:
        attempt += 1
        try:
            tokens = {k: s.next_token() for k, s in srcs.items()} if is_pool(db) else None
            with connection_of(db) as conn:
                locks = _locks(conn, list(srcs.values()))
                for lock in locks:
                    lock.acquire()
                try:
                    if tokens is None:
                        tokens = {k: s.next_token() for k, s in srcs.items()}
                    tx = _Transaction(conn, None, locks)
                    cur = tx.enter()
                finally:
                    for lock in locks:
                        lock.release()
                try:
                    out = fn(cur, tokens)
                except BaseException as e:
                    tx.exit(type(e), e, e.__traceback__)
                    raise
                tx.exit(None, None, None)
                return out
        except Exception as e:
            if _retry(e, attempt, attempts, backoff):
                continue
            raise
