"""Redis (one node): the lock ``lock:{NAME}`` and the counter
``fence:{NAME}``, each step one Lua script."""
from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Callable, Optional

from ._db import Database
from .generations import GENERATIONS_TABLE, read_generation
from .source import TokenSource
from .token import Token

if TYPE_CHECKING:
    import redis

# the grant: the lock, and a number only when the lock was taken
GRANT = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
"""
# each transaction's token: only while the lock is still this holder's
# (and its expiry pushed out)
NEXT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return redis.call('INCR', KEYS[2])
end
return false
"""
RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class RedisSource(TokenSource):
    """A Redis lock with a counter: ``RedisSource(redis.Redis(...), "refunds",
    db, ttl=10)``.

    The grant is one script: ``SET lock:{NAME} <random id> NX PX ttl`` and,
    only when that set it, ``INCR fence:{NAME}``: a caller that did not get
    the lock never moves the counter.  Each ``next_token()`` is one script
    too: while ``lock:{NAME}`` still holds this holder's id, push its
    expiry out and ``INCR fence:{NAME}``.  The token is
    ``(generation, counter)``, the generation read from PostgreSQL
    (``fencing_lock_generations``, service ``redis``) right after the grant
    and kept for it.  ``release()`` deletes the lock only while it holds
    this holder's id.  (The braces keep both keys in one Redis Cluster
    slot; Redlock over several nodes has no counter they agree on.)

    ``db`` is where the generation is read and the first meter's fences
    raised: a Connection, a ConnectionPool or a conninfo string.
    """

    def __init__(self, redis_client: "redis.Redis", name: str, db: Database, *, ttl: float = 10.0,
                 on_lost: Optional[Callable[[TokenSource], None]] = None,
                 service: str = "redis", table: str = GENERATIONS_TABLE, poll: float = 0.05):
        super().__init__(ttl=ttl, on_lost=on_lost, db=db)
        self.redis = redis_client
        self.name = name
        self.lock_key = f"lock:{{{name}}}"
        self.counter_key = f"fence:{{{name}}}"
        self.service = service
        self.table = table
        self.poll = poll
        self.id: Optional[str] = None
        self.generation: Optional[int] = None
        self._grant_script = redis_client.register_script(GRANT)
        self._next_script = redis_client.register_script(NEXT)
        self._renew_script = redis_client.register_script(RENEW)
        self._release_script = redis_client.register_script(RELEASE)

    def __repr__(self) -> str:
        return f"RedisSource({self.name!r})"

    def _ms(self) -> int:
        return max(1, int(self.ttl * 1000))

    def _try_grant(self, wait: Optional[float]) -> Optional[Token]:
        end = None if wait is None else time.monotonic() + wait
        pause = self.poll
        while True:
            value = uuid.uuid4().hex
            n = self._grant_script(keys=[self.lock_key, self.counter_key], args=[value, self._ms()])
            if n is not None:
                self.id = value
                try:
                    self.generation = read_generation(self._database(), self.service, self.table)
                except BaseException:
                    self._release_script(keys=[self.lock_key], args=[value])
                    self.id = None
                    raise
                return Token(self.generation, int(n))
            if end is not None and time.monotonic() >= end:
                return None
            left = None if end is None else end - time.monotonic()
            time.sleep(pause if left is None else max(0.0, min(pause, left)))
            pause = min(pause * 2, 0.5, self.ttl / 10)

    def _next(self) -> Optional[Token]:
        if self.id is None or self.generation is None:
            return None
        n = self._next_script(keys=[self.lock_key, self.counter_key], args=[self.id, self._ms()])
        return None if n is None else Token(self.generation, int(n))

    def _renew(self) -> Optional[bool]:
        if self.id is None:
            return None
        return bool(self._renew_script(keys=[self.lock_key], args=[self.id, self._ms()]))

    def _release(self) -> bool:
        value, self.id = self.id, None
        if value is None:
            return False
        return bool(self._release_script(keys=[self.lock_key], args=[value]))
