"""Idempotency keys: run a request once, replay its recorded result after.

Built on fencing.idem_begin / idem_checkpoint / idem_complete /
idem_abandon (docs/idempotency.md).  idem_begin
answers one of three states:

  started   the key is new: we own it with claim ``token``; run the request
  resumed   the last owner's lease ran out (or it abandoned) before
            finishing: we own it with a higher token; go on from
            ``recovery_point``
  done      a result was recorded: return it; do not run again

and raises SF003 (the key was used with another request: KeyReused) or
SF004 (another owner is running it: KeyInProgress).

Each transaction these helpers open first resets a session-level
``fencing.token`` left on the connection (as a fenced transaction does).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Iterator, Optional, Union

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from ._db import Database, connection_of
from .errors import FencedOut, translate
from .fenced import SET_TOKEN, reset_leftover
from .token import Token

Interval = Union[timedelta, str, float, int]

BEGIN_SQL = ("SELECT state, token::text, result, recovery_point, expires_at "
             "FROM fencing.idem_begin(%s, %s, lease => %s, retention => %s, wait => %s)")


def _iv(v: Optional[Interval], default: str) -> Union[timedelta, str]:
    if v is None:
        return default
    if isinstance(v, (int, float)):
        return timedelta(seconds=v)
    return v


@contextlib.contextmanager
def _typed_errors() -> Iterator[None]:
    try:
        yield
    except psycopg.Error as e:
        typed = translate(e)
        if typed is e:
            raise
        raise typed from e


def _require_idle(conn: "psycopg.Connection[Any]") -> None:
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise psycopg.ProgrammingError(
            "run_once() runs transactions of its own: the connection is already in one")


@dataclass
class Claim:
    """What idem_begin gave us: ``state`` ('started' or 'resumed'), the claim
    ``token``, the ``recovery_point`` the last owner recorded (None when
    started), and ``expires_at``."""

    key: str
    state: str
    token: Token
    recovery_point: Optional[str]
    expires_at: Optional[datetime]
    _conn: "psycopg.Connection[Any]" = field(repr=False)
    _steps: bool = field(default=False, repr=False)
    completed: bool = field(default=False)
    result: Any = field(default=None, repr=False)

    def checkpoint(self, recovery_point: str, lease: Optional[Interval] = None) -> None:
        """Record how far the request got (and renew the claim's lease).

        In ``run_once_steps`` it commits at once, in a transaction of its
        own: a later owner resumes from it.  In ``run_once`` (one
        transaction) it is part of that transaction.  A claim taken over
        raises ClaimTakenOver."""
        q = "SELECT fencing.idem_checkpoint(%s, %s, %s, %s)"
        params = (self.key, str(self.token), recovery_point,
                  _iv(lease, "0") if lease is not None else None)
        with _typed_errors():
            if self._steps:
                with self._conn.transaction():
                    self._conn.execute(q, params)
            else:
                self._conn.execute(q, params)
        self.recovery_point = recovery_point

    def complete(self, write: Callable[["psycopg.Cursor[Any]"], Any], *,
                 fence: bool = False) -> Any:
        """``run_once_steps`` only: one transaction that runs ``write(cur)``
        (the business writes) and records what it returns as the result,
        with idem_complete: both commit, or neither.  ``fence=True`` also
        sets the claim token as the transaction's fencing token (for tables
        protected in key scope by the request's key)."""
        if not self._steps:
            raise psycopg.ProgrammingError("Claim.complete() is for run_once_steps(); "
                                           "run_once() records fn's result itself")
        if self.completed:
            raise psycopg.ProgrammingError("the claim is already completed")
        _require_idle(self._conn)
        with _typed_errors(), self._conn.transaction(), self._conn.cursor() as cur:
            reset_leftover(self._conn)
            if fence:
                cur.execute(SET_TOKEN, (str(self.token),))
            result = write(cur)
            cur.execute("SELECT fencing.idem_complete(%s, %s, %s)",
                        (self.key, str(self.token), Jsonb(result)))
        self.completed, self.result = True, result
        return result

    def abandon(self) -> None:
        """Give the claim up: the next idem_begin resumes at once."""
        with _typed_errors():
            if self._steps:
                with self._conn.transaction():
                    self._conn.execute("SELECT fencing.idem_abandon(%s, %s)",
                                       (self.key, str(self.token)))
            else:
                self._conn.execute("SELECT fencing.idem_abandon(%s, %s)",
                                   (self.key, str(self.token)))


def _begin(conn: "psycopg.Connection[Any]", key: str, request: Any,
           lease: Optional[Interval], retention: Optional[Interval],
           wait: bool) -> tuple[str, Token, Any, Optional[str], Optional[datetime]]:
    row = conn.execute(BEGIN_SQL, (key, Jsonb(request), _iv(lease, "1 minute"),
                                   _iv(retention, "24 hours"), wait)).fetchone()
    assert row is not None
    state, token, result, recovery_point, expires_at = row
    return (state, Token.parse(token) if token is not None else Token(0, 0), result,
            recovery_point, expires_at)


def run_once(db: Database, key: str, request: Any,
             fn: Callable[["psycopg.Cursor[Any]", Claim], Any], *,
             lease: Optional[Interval] = None, retention: Optional[Interval] = None,
             wait: bool = True, fence: bool = False) -> Any:
    """Run a request once, in ONE transaction: idem_begin, ``fn(cur, claim)``
    (the business writes, with ``cur``), idem_complete with what ``fn``
    returned (any JSON value), COMMIT — the result is recorded in the same
    transaction as the writes, or neither is.

    A key already done returns its recorded result without calling ``fn``.
    A key another owner runs raises KeyInProgress (SF004); with ``wait=True``
    (the default) a concurrent transaction on the same key is waited for
    first, and its result replayed.  ``lease`` is the claim's lease
    (idem_begin's default: 1 minute), ``retention`` how long the result is
    kept (24 hours).  ``fence=True`` also makes the claim token the
    transaction's fencing token.  A claim lost meanwhile raises
    ClaimTakenOver and records nothing.
    """
    with connection_of(db) as conn:
        _require_idle(conn)
        with _typed_errors(), conn.transaction(), conn.cursor() as cur:
            reset_leftover(conn)
            state, token, result, rp, exp = _begin(conn, key, request, lease, retention, wait)
            if state == "done":
                return result
            claim = Claim(key, state, token, rp, exp, conn)
            if fence:
                cur.execute(SET_TOKEN, (str(token),))
            out = fn(cur, claim)
            cur.execute("SELECT fencing.idem_complete(%s, %s, %s)",
                        (key, str(token), Jsonb(out)))
            claim.completed, claim.result = True, out
        return out


def run_once_steps(db: Database, key: str, request: Any,
                   fn: Callable[[Claim], Any], *, lease: Interval,
                   retention: Optional[Interval] = None, wait: bool = True,
                   abandon_on_error: bool = True) -> Any:
    """A request that spans transactions and external calls (the refund of
    docs/idempotency.md): the claim is taken and committed first, with
    ``lease`` (longer than the slowest step); ``fn(claim)`` then runs with
    no transaction open, records progress with ``claim.checkpoint(point)``
    (each commits, and renews the lease), and ends with
    ``claim.complete(write)``: the last business writes and the result in
    one transaction.  When ``fn`` returns without completing, its return
    value is recorded as the result.

    A resumed claim (``claim.state == 'resumed'``) carries the last owner's
    ``claim.recovery_point``: continue from there.  When ``fn`` raises
    (anything but a lost claim), the claim is abandoned so that the next
    caller resumes at once (``abandon_on_error=False`` leaves it to its
    lease).  A claim lost while paused raises ClaimTakenOver at the next
    checkpoint or at complete, and nothing is recorded.
    """
    with connection_of(db) as conn:
        _require_idle(conn)
        with _typed_errors(), conn.transaction():
            state, token, result, rp, exp = _begin(conn, key, request, lease, retention, wait)
        if state == "done":
            return result
        claim = Claim(key, state, token, rp, exp, conn, _steps=True)
        try:
            out = fn(claim)
            if not claim.completed:
                claim.complete(lambda cur: out)
        except FencedOut:
            raise
        except BaseException:
            if abandon_on_error and not claim.completed:
                try:
                    if conn.info.transaction_status != TransactionStatus.IDLE:
                        conn.rollback()
                    claim.abandon()
                except Exception:
                    pass
            raise
        return claim.result
