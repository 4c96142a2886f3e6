"""One exception tree: ``FencingError`` above every error of this library.

The errors of the extension's SQLSTATEs (``SF001`` to ``SF005``) are also
``psycopg.DatabaseError``, the class psycopg itself raises for them (it
has no class of its own for the ``SF`` codes), so a handler written for
psycopg (``except psycopg.DatabaseError``, ``except psycopg.Error``) still
catches them, with psycopg's ``sqlstate``, ``diag``, ``pgresult``.  The
psycopg error they came from is their ``__cause__`` and ``pgerror``.

    FencingError
     +-- FencedOut             SF001: a newer token won (``reason`` says how)
     |    +-- StaleToken            stale_token: the lock was lost
     |    +-- TokenAlreadyUsed      token_already_used: strict table, a token
     |    |                         of another transaction (a programming error)
     |    +-- LeaseExpired          lease_expired: the built-in lease ran out
     |    +-- ClaimTakenOver        claim_taken_over: an idempotency claim was lost
     +-- TokenRequired         SF002: a write without a token, or with two
     +-- KeyReused             SF003: an idempotency key reused for another request
     +-- KeyInProgress         SF004: another owner runs the idempotency key
     +-- GuardAltered          SF005: DDL that would break a protected table's guard
     +-- NotAcquired           (client) the lock was not taken in time
     +-- LockLost              (client) the lock was lost while held
"""
from __future__ import annotations

from typing import Any, Optional

import psycopg
from psycopg.errors import Diagnostic


class FencingError(Exception):
    """Base class of every error of this library."""


class NotAcquired(FencingError):
    """A token source did not take its lock (in time, for ``acquire``)."""


class LockLost(FencingError):
    """The lock is not held any more (its TTL ran out, the lock service
    said so, or it was released): ``next_token()`` gives no token."""


class DatabaseFencingError(FencingError, psycopg.DatabaseError):
    """An error of the extension, raised by the server with one of its
    SQLSTATEs.  Also a ``psycopg.DatabaseError``; ``pgerror`` (and
    ``__cause__``) is the psycopg error it came from, and ``diag`` that
    error's diagnostics."""

    sqlstate: Optional[str] = None

    def __init__(self, *args: Any, info: Any = None, encoding: str = "utf-8",
                 pgconn: Any = None, pgerror: Optional[psycopg.Error] = None):
        psycopg.DatabaseError.__init__(self, *args, info=info, encoding=encoding, pgconn=pgconn)
        self.pgerror = pgerror

    @property
    def diag(self) -> Diagnostic:
        if self.pgerror is not None:
            return self.pgerror.diag
        return super().diag

    @property
    def detail(self) -> Optional[str]:
        return self.diag.message_detail

    @property
    def hint(self) -> Optional[str]:
        return self.diag.message_hint

    @property
    def table(self) -> Optional[str]:
        return self.diag.table_name

    @property
    def schema(self) -> Optional[str]:
        return self.diag.schema_name


class FencedOut(DatabaseFencingError):
    """SF001: the write's token lost to a newer one.  Never retried.

    ``reason`` is the server's machine-readable reason, the error's
    constraint-name field: ``stale_token``, ``token_already_used``,
    ``lease_expired`` or ``claim_taken_over`` (each has its class below);
    a reason this library does not know yet gives a plain ``FencedOut``
    with that ``reason``."""

    sqlstate = "SF001"
    reason: str = "stale_token"


class StaleToken(FencedOut):
    """A newer token was accepted: the lock is lost.  Stop; take the lock
    again to go on."""

    reason = "stale_token"


class TokenAlreadyUsed(FencedOut):
    """Strict table: this very token was used by another transaction.  Not
    a lost lock but a programming error: take a new token per transaction
    (a token source does), or protect the table with ``strict => false``."""

    reason = "token_already_used"


class LeaseExpired(FencedOut):
    """The built-in lease behind the token ran out or was released."""

    reason = "lease_expired"


class ClaimTakenOver(FencedOut):
    """An idempotency claim was lost (taken over after its lease ran out,
    or completed or abandoned): record nothing."""

    reason = "claim_taken_over"


class TokenRequired(DatabaseFencingError):
    """SF002: a write that needs a token had none, or two that differ."""

    sqlstate = "SF002"


class KeyReused(DatabaseFencingError):
    """SF003: the idempotency key was used with another request."""

    sqlstate = "SF003"


class KeyInProgress(DatabaseFencingError):
    """SF004: another owner is running the idempotency key; retry later."""

    sqlstate = "SF004"


class GuardAltered(DatabaseFencingError):
    """SF005: DDL that would disable or break a protected table's guard."""

    sqlstate = "SF005"


REASONS: dict[str, type[FencedOut]] = {
    cls.reason: cls for cls in (StaleToken, TokenAlreadyUsed, LeaseExpired, ClaimTakenOver)
}

BY_SQLSTATE: dict[str, type[DatabaseFencingError]] = {
    "SF002": TokenRequired,
    "SF003": KeyReused,
    "SF004": KeyInProgress,
    "SF005": GuardAltered,
}

# PostgreSQL's "run the transaction again" errors: serialization failure
# and deadlock.  No SQLSTATE of the extension is among them.
RETRYABLE: frozenset[str] = frozenset({"40001", "40P01"})


def classify(err: psycopg.Error) -> Optional[DatabaseFencingError]:
    """The typed error for a psycopg error of the extension, or None for
    any other error.  SF001 is typed by ``diag.constraint_name``; without
    one (a server older than 1.3) it is a StaleToken."""
    state = err.sqlstate or err.diag.sqlstate
    msg = err.diag.message_primary or str(err)
    cls: Optional[type[DatabaseFencingError]]
    reason = None
    if state == "SF001":
        reason = err.diag.constraint_name or "stale_token"
        cls = REASONS.get(reason, FencedOut)
    else:
        cls = BY_SQLSTATE.get(state or "")
    if cls is None:
        return None
    typed = cls(msg, info=err.pgresult, pgconn=err.pgconn, pgerror=err)
    if reason is not None and isinstance(typed, FencedOut) and typed.reason != reason:
        typed.reason = reason
    return typed


def translate(err: BaseException) -> BaseException:
    """``err`` itself, or its typed error when it is one of the extension's
    (with ``err`` as its ``__cause__``)."""
    if isinstance(err, psycopg.Error) and not isinstance(err, DatabaseFencingError):
        typed = classify(err)
        if typed is not None:
            typed.__cause__ = err
            return typed
    return err
