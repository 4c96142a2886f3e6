"""A fenced transaction: BEGIN; SELECT fencing.set_token(%s); your writes; COMMIT.

The token is bound as a parameter (works behind PgBouncer in transaction
pooling mode) and is transaction-local: it ends with the COMMIT or the
ROLLBACK, so no connection goes back to a pool with a token set.  No
session-level SET is ever sent.

BEGIN and set_token go to the server together (psycopg's pipeline mode,
one round trip), so a fenced transaction costs no round trip more than the
same transaction without a token.
"""
from __future__ import annotations

import contextlib
import random
import time
from typing import Any, Callable, Iterator, Optional, TypeVar, Union

import psycopg
from psycopg.pq import TransactionStatus

from .errors import translate
from .token import TokenLike, as_text

SET_TOKEN = "SELECT fencing.set_token(%s)"

# PostgreSQL's "retry the transaction" errors: serialization failure and
# deadlock.  SF001 is not among them and is never retried.
RETRYABLE = frozenset({"40001", "40P01"})

T = TypeVar("T")


class fenced:
    """``with fenced(conn, token) as cur:`` — one transaction whose writes
    carry ``token``.

    The connection must not be in a transaction already (the token must
    end with the transaction that set it).  On leaving the block the
    transaction commits, or rolls back when the block raised.  Errors of
    the extension come out typed (``StaleToken``, ``TokenAlreadyUsed``,
    ``LeaseExpired``, ``ClaimTakenOver``, all ``FencedOut``;
    ``TokenRequired``, ...), the psycopg error as their ``__cause__``.

    ``pipeline=False`` sends BEGIN and set_token one after the other (two
    round trips), for servers or poolers that do not take pipelined
    queries.
    """

    def __init__(self, conn: psycopg.Connection, token: TokenLike, *, pipeline: bool = True):
        self.conn = conn
        self.token = as_text(token)
        self.pipeline = pipeline and psycopg.Pipeline.is_supported()
        self._tx: Optional[psycopg.Transaction] = None
        self._cur: Optional[psycopg.Cursor] = None

    def __enter__(self) -> psycopg.Cursor:
        conn = self.conn
        if conn.info.transaction_status != TransactionStatus.IDLE:
            raise psycopg.ProgrammingError(
                "fenced() runs a transaction of its own: the connection is already in one "
                f"({conn.info.transaction_status.name}); commit or roll back first")
        # A Transaction object of our own: conn.transaction() inside a
        # pipeline nests pipelines of its own, which would keep the whole
        # transaction in pipeline mode.  In pipeline mode the connection is
        # switched to autocommit until the transaction ends: psycopg would
        # otherwise send a BEGIN of its own, and wait for it, before the
        # first statement (it cannot know yet that ours is on its way).
        self._tx = psycopg.Transaction(conn)
        self._autocommit = conn.autocommit
        entered = False
        try:
            with conn.cursor() as setter:
                if self.pipeline:
                    if not self._autocommit:
                        conn.autocommit = True
                    with conn.pipeline():
                        self._tx.__enter__()
                        entered = True
                        setter.execute(SET_TOKEN, (self.token,))
                    # leaving the pipeline sent both and read both answers
                else:
                    self._tx.__enter__()
                    entered = True
                    setter.execute(SET_TOKEN, (self.token,))
        except BaseException as e:
            try:
                if entered:
                    self._tx.__exit__(type(e), e, e.__traceback__)
            finally:
                self._restore()
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e
        # the caller's cursor: a fresh one, outside pipeline mode
        self._cur = conn.cursor()
        return self._cur

    def _restore(self) -> None:
        conn = self.conn
        if conn.autocommit == self._autocommit or conn.closed or conn.broken:
            return
        if conn.info.transaction_status == TransactionStatus.UNKNOWN:
            return      # the connection is lost: nothing to restore
        conn.autocommit = self._autocommit

    def __exit__(self, et, ev, tb) -> bool:
        assert self._tx is not None and self._cur is not None
        try:
            self._tx.__exit__(et, ev, tb)
        except BaseException as e:
            # the COMMIT itself failed (or the rollback after an error)
            typed = translate(e)
            if typed is e:
                raise
            raise typed from e
        finally:
            self._cur.close()
            self._restore()
        if ev is not None:
            typed = translate(ev)
            if typed is not ev:
                raise typed from ev
        return False


def _is_pool(obj: Any) -> bool:
    return hasattr(obj, "getconn") and hasattr(obj, "putconn")


@contextlib.contextmanager
def connection_of(conn_or_pool: Any) -> Iterator[psycopg.Connection]:
    """A connection: the one given, or one checked out of a psycopg_pool
    pool for the duration of the block."""
    if _is_pool(conn_or_pool):
        with conn_or_pool.connection() as conn:
            yield conn
    else:
        yield conn_or_pool


def query_one(conn_or_pool: Any, query: str, params: tuple = ()) -> Any:
    """The first row of one statement, committed on its own in one round
    trip (autocommit for the statement when the connection is idle and not
    in autocommit), or run inside the caller's transaction when one is
    open."""
    with connection_of(conn_or_pool) as conn:
        if conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE:
            return conn.execute(query, params).fetchone()
        conn.autocommit = True
        try:
            return conn.execute(query, params).fetchone()
        finally:
            if not conn.broken and not conn.closed:
                conn.autocommit = False


def run_fenced(conn_or_pool: Union[psycopg.Connection, Any], token: TokenLike,
               fn: Callable[[psycopg.Cursor], T], *, retry: int = 1,
               backoff: float = 0.01, pipeline: bool = True) -> T:
    """Run ``fn(cur)`` in a fenced transaction and return what it returns.

    ``conn_or_pool``: a psycopg Connection, or a psycopg_pool
    ConnectionPool (a connection is checked out for each attempt).
    ``retry``: the most attempts (1: no retry).  Only serialization
    failures (40001) and deadlocks (40P01) are retried, with the same
    token, after a short random backoff; a fenced-out write (SF001) and
    every other error are raised at once.
    """
    if retry < 1:
        raise ValueError("retry is the number of attempts: 1 or more")
    attempt = 0
    while True:
        attempt += 1
        try:
            with connection_of(conn_or_pool) as conn:
                with fenced(conn, token, pipeline=pipeline) as cur:
                    return fn(cur)
        except psycopg.Error as e:
            if e.sqlstate in RETRYABLE and attempt < retry:
                time.sleep(backoff * attempt * (0.5 + random.random()))
                continue
            raise
