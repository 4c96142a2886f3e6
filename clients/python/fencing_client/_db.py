"""The database a token source or a helper talks to: a psycopg Connection,
a psycopg_pool ConnectionPool (one checkout per use), or a conninfo
string (a connection of the source's own, opened when first needed and
again after it broke)."""
from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Any, Iterator, Optional, Union

import psycopg
from psycopg.pq import TransactionStatus

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

    Database = Union["psycopg.Connection[Any]", "ConnectionPool[Any]", str]
else:
    Database = Any


def is_pool(obj: object) -> bool:
    """A psycopg_pool pool (anything with ``connection()``, ``getconn()``
    and ``putconn()``)."""
    return all(hasattr(obj, a) for a in ("connection", "getconn", "putconn"))


@contextlib.contextmanager
def connection_of(db: Any) -> Iterator["psycopg.Connection[Any]"]:
    """A connection: the one given, or one checked out of a pool for the
    duration of the block."""
    if is_pool(db):
        with db.connection() as conn:
            yield conn
    elif isinstance(db, psycopg.Connection):
        yield db
    else:
        raise TypeError("expected a psycopg Connection or a psycopg_pool ConnectionPool, "
                        f"not {type(db).__name__}")


def _one(conn: "psycopg.Connection[Any]", query: Any, params: Any) -> Any:
    status = conn.pgconn.transaction_status
    if status != TransactionStatus.IDLE:
        raise psycopg.ProgrammingError(
            "the token source's connection is in a transaction "
            f"({TransactionStatus(status).name}): give the source a connection of its own, "
            "a pool or a conninfo string, or call it between your transactions")
    if conn.autocommit:
        return conn.execute(query, params).fetchone()
    conn.autocommit = True
    try:
        return conn.execute(query, params).fetchone()
    finally:
        if not conn.broken and not conn.closed:
            conn.autocommit = False


class SourceDb:
    """The database of a token source, used from the caller's thread and
    from the source's renewal thread, one at a time (``lock``)."""

    def __init__(self, db: Database):
        if not (isinstance(db, (str, psycopg.Connection)) or is_pool(db)):
            raise TypeError("db: a psycopg Connection, a psycopg_pool ConnectionPool or a "
                            f"conninfo string, not {type(db).__name__}")
        self.db = db
        self.lock = threading.RLock()
        self._own: Optional[psycopg.Connection[Any]] = None

    def uses(self, conn: "psycopg.Connection[Any]") -> bool:
        """Is ``conn`` the very connection this source works on?"""
        return conn is self.db

    @contextlib.contextmanager
    def connection(self) -> Iterator["psycopg.Connection[Any]"]:
        with self.lock:
            conn = self._direct()
            if conn is not None:
                yield conn
            else:
                with connection_of(self.db) as pooled:
                    yield pooled

    def idle(self) -> bool:
        """May a statement of the source run now, outside any transaction
        of the caller's?  (Always, unless the source shares a connection
        that is in a transaction.)"""
        db = self.db
        if isinstance(db, psycopg.Connection):
            return db.info.transaction_status == TransactionStatus.IDLE
        return True

    def _direct(self) -> "Optional[psycopg.Connection[Any]]":
        """The connection itself when there is no pool to check one out of."""
        db = self.db
        if isinstance(db, psycopg.Connection):
            return db
        if isinstance(db, str):
            own = self._own
            if own is None or own.closed or own.broken:
                if own is not None:
                    own.close()
                # no prepared statements: a PgBouncer in transaction mode
                # before 1.21 would give them to other backends
                own = self._own = psycopg.connect(db, autocommit=True, prepare_threshold=None)
            return own
        return None

    def query_one(self, query: Any, params: Any = ()) -> Any:
        """The first row of one statement, committed on its own in one round
        trip (the connection switched to autocommit for it when needed)."""
        with self.lock:
            conn = self._direct()
            if conn is not None:
                return _one(conn, query, params)
            with connection_of(self.db) as pooled:
                return _one(pooled, query, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator["psycopg.Connection[Any]"]:
        """A transaction of its own on the source's connection."""
        with self.connection() as conn:
            status = conn.info.transaction_status
            if status != TransactionStatus.IDLE:
                raise psycopg.ProgrammingError(
                    "the token source's connection is in a transaction "
                    f"({status.name}): give the source a connection of its own, "
                    "a pool or a conninfo string")
            with conn.transaction():
                yield conn

    def close(self) -> None:
        with self.lock:
            if self._own is not None:
                self._own.close()
                self._own = None
