"""fencing_client: the Python client of the fencing PostgreSQL extension.

    from fencing_client import LeaseSource, run_fenced

    lease = LeaseSource(conn, "refunds", "worker-a", ttl=30)
    token = lease.acquire()                  # Token(epoch, counter), or None
    run_fenced(conn, token, lambda cur: cur.execute(
        "UPDATE refunds SET state = 'paid' WHERE id = %s", ("r-1",)))
"""
from .errors import (ClaimTakenOver, FencedOut, FencingError, GuardAltered, InProgress,
                     LeaseExpired, NotAcquired, RequestMismatch, StaleToken, TokenAlreadyUsed,
                     TokenRequired, UnknownReason, classify, translate)
from .fenced import RETRYABLE, connection_of, fenced, run_fenced
from .idempotency import Claim, run_once, run_once_steps
from .sources import (GENERATIONS_TABLE, EtcdLockSource, LeaseSource, RedisLockSource,
                      StaticToken, TokenSource, ZooKeeperLockSource, ensure_generation_table,
                      raise_generation, read_generation)
from .token import Token

__version__ = "1.3.0"

__all__ = [
    "Token", "fenced", "run_fenced", "run_once", "run_once_steps", "Claim", "connection_of",
    "RETRYABLE", "TokenSource", "StaticToken", "LeaseSource", "RedisLockSource",
    "EtcdLockSource", "ZooKeeperLockSource", "ensure_generation_table", "read_generation",
    "raise_generation", "GENERATIONS_TABLE", "FencingError", "FencedOut", "StaleToken",
    "TokenAlreadyUsed", "LeaseExpired", "ClaimTakenOver", "UnknownReason", "TokenRequired",
    "RequestMismatch", "InProgress", "GuardAltered", "NotAcquired", "classify", "translate",
]
