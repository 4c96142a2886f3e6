"""Typed errors of the fencing extension.

Every error raised here keeps the psycopg error it came from as
``__cause__`` and in ``.pgerror``, with its SQLSTATE and diagnostics.
"""
from __future__ import annotations

from typing import Optional

import psycopg


class FencingError(Exception):
    """Base class of every error of the fencing extension."""

    sqlstate: Optional[str] = None

    def __init__(self, message: str, pgerror: Optional[psycopg.Error] = None):
        super().__init__(message)
        self.pgerror = pgerror
        diag = pgerror.diag if pgerror is not None else None
        self.detail = diag.message_detail if diag is not None else None
        self.hint = diag.message_hint if diag is not None else None
        self.table = diag.table_name if diag is not None else None
        self.schema = diag.schema_name if diag is not None else None


class FencedOut(FencingError):
    """SF001: the write's token lost.  Never retried by this library.

    ``reason`` is the server's machine-readable reason (the error's
    constraint_name field): stale_token, token_already_used,
    lease_expired or claim_taken_over.
    """

    sqlstate = "SF001"
    reason = "stale_token"


class StaleToken(FencedOut):
    """A newer token was accepted: the lock is lost.  Stop, re-acquire."""

    reason = "stale_token"


class TokenAlreadyUsed(FencedOut):
    """Strict table: this very token was already used by another
    transaction.  Not a lost lock: retry through an idempotency key or
    take a new token."""

    reason = "token_already_used"


class LeaseExpired(FencedOut):
    """The built-in lease behind the token ran out or was released."""

    reason = "lease_expired"


class ClaimTakenOver(FencedOut):
    """An idempotency claim was lost (taken over after its lease, or
    completed or abandoned): record nothing, call idem_begin again."""

    reason = "claim_taken_over"


class TokenRequired(FencingError):
    """SF002: a write that needs a token had none, or two that differ."""

    sqlstate = "SF002"


class RequestMismatch(FencingError):
    """SF003: the idempotency key was used with another request."""

    sqlstate = "SF003"


class InProgress(FencingError):
    """SF004: another owner is running the idempotency key; retry later."""

    sqlstate = "SF004"


class GuardAltered(FencingError):
    """SF005: DDL that would disable or break a protected table's guard."""

    sqlstate = "SF005"


class NotAcquired(Exception):
    """A token source could not take its lock (within its timeout)."""


FENCED_OUT_REASONS = {
    cls.reason: cls for cls in (StaleToken, TokenAlreadyUsed, LeaseExpired, ClaimTakenOver)
}

_BY_SQLSTATE = {
    "SF002": TokenRequired,
    "SF003": RequestMismatch,
    "SF004": InProgress,
    "SF005": GuardAltered,
}


class UnknownReason(FencedOut):
    """An SF001 whose reason this library does not know (a newer server)."""

    reason = "unknown"


def classify(err: psycopg.Error) -> Optional[FencingError]:
    """The typed error for a psycopg error of the extension, or None for
    any other error.  SF001 is classified by ``diag.constraint_name``;
    without it (a server older than 1.3) it is a StaleToken."""
    state = err.sqlstate
    msg = err.diag.message_primary or str(err)
    if state == "SF001":
        reason = err.diag.constraint_name or "stale_token"
        cls = FENCED_OUT_REASONS.get(reason)
        if cls is None:
            out = UnknownReason(msg, err)
            out.reason = reason
            return out
        return cls(msg, err)
    cls = _BY_SQLSTATE.get(state or "")
    return cls(msg, err) if cls is not None else None


def translate(err: BaseException) -> BaseException:
    """``err`` itself, or its typed error when it is one of the extension's."""
    if isinstance(err, psycopg.Error):
        typed = classify(err)
        if typed is not None:
            typed.__cause__ = err
            return typed
    return err
