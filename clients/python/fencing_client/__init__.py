"""fencing_client: the Python client of the fencing PostgreSQL extension.

A token source is a lock that hands out fencing tokens; a fenced
transaction carries a new token of it, and the database refuses the writes
of a holder whose lock was lost::

    import psycopg
    from fencing_client import LeaseSource, run_fenced

    with psycopg.connect() as conn, LeaseSource(conn, "refunds", ttl=30) as lock:
        run_fenced(conn, lock, lambda cur: cur.execute(
            "UPDATE refunds SET state = 'paid' WHERE id = %s", ("r-1",)))
"""
from .errors import (RETRYABLE, ClaimTakenOver, DatabaseFencingError, FencedOut, FencingError,
                     GuardAltered, KeyInProgress, KeyReused, LeaseExpired, LockLost, NotAcquired,
                     StaleToken, TokenAlreadyUsed, TokenRequired, classify, translate)
from .etcd_source import EtcdSource
from .fenced import fenced, run_fenced, run_fenced_many, run_locked
from .generations import (GENERATIONS_TABLE, ensure_generation_table, raise_generation,
                          read_generation)
from .idempotency import Claim, run_once, run_once_steps
from .lease_source import LeaseSource
from .redis_source import RedisSource
from .source import Scope, StaticToken, TokenSource
from .token import Token
from .zookeeper_source import ZooKeeperSource

__version__ = "1.4.0"

__all__ = [
    "Token", "TokenSource", "StaticToken", "LeaseSource", "EtcdSource", "ZooKeeperSource",
    "RedisSource", "Scope", "fenced", "run_fenced", "run_locked", "run_fenced_many",
    "run_once", "run_once_steps", "Claim", "ensure_generation_table", "read_generation",
    "raise_generation", "GENERATIONS_TABLE", "RETRYABLE", "FencingError", "DatabaseFencingError",
    "FencedOut", "StaleToken", "TokenAlreadyUsed", "LeaseExpired", "ClaimTakenOver",
    "TokenRequired", "KeyReused", "KeyInProgress", "GuardAltered", "NotAcquired", "LockLost",
    "classify", "translate", "__version__",
]
