"""The generations of the lock services, and the services' own clients:
Redis lost its counter (every holder refused until the generation is
raised), an etcd lock held by ``etcdctl lock`` excludes an EtcdSource and
the other way round (one protocol), a row-scope table has no fence to
raise."""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Any

import psycopg
import pytest

import fencing_client as fc

from .conftest import Clients, make_rows, service, unique


def test_generation_table(db: Any) -> None:
    table = unique("gens")
    fc.ensure_generation_table(db, "svc", table=table)
    fc.ensure_generation_table(db, "svc", table=table)      # again: nothing changes
    assert fc.read_generation(db, "svc", table) == 0
    assert fc.raise_generation(db, "svc", table=table) == 1
    assert fc.raise_generation(db, "svc", by=2, table=table) == 3
    assert fc.read_generation(db, "svc", table) == 3
    with pytest.raises(LookupError):
        fc.read_generation(db, "nope", table)
    with pytest.raises(ValueError):
        fc.raise_generation(db, "svc", by=0, table=table)
    cols = db.execute("SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' "
                      "ORDER BY attnum) FROM pg_attribute WHERE attrelid = %s::regclass "
                      "AND attnum > 0", (table,)).fetchone()
    assert cols == ("service text, generation bigint",)


def test_redis_lost_its_counter(db: Any, clients: Clients) -> None:
    """Redis lost its counter: the rightful new holder is refused (its
    tokens are below the fence) until the generation is raised; the
    generation is read when the lock is taken, never again."""
    import redis
    host, port = service("FENCING_TEST_REDIS").split(":")
    r = redis.Redis(host=host, port=int(port))
    table, name, gens = make_rows(db, ["r1"]), unique("lock"), unique("gens")
    fc.ensure_generation_table(db, "redis", table=gens)

    def write(src: fc.TokenSource) -> None:
        fc.run_fenced(db, src, lambda cur: cur.execute(f"UPDATE {table} SET n = n + 1"))

    for _ in range(3):
        with fc.RedisSource(r, name, db, ttl=10, table=gens) as s:
            write(s)
    r.delete(f"fence:{{{name}}}")                    # the counter is lost
    with fc.RedisSource(r, name, db, ttl=10, table=gens) as s:
        assert s.token == fc.Token(0, 1)
        with pytest.raises(fc.StaleToken):
            write(s)
    fc.raise_generation(db, "redis", table=gens)
    with fc.RedisSource(r, name, db, ttl=10, table=gens) as s:
        assert s.generation == 1
        write(s)
        fc.raise_generation(db, "redis", table=gens)   # raised while held: this grant keeps 1
        write(s)
        assert s.token is not None and s.token.epoch == 1
    r.close()


def test_etcdctl_lock_excludes(db: Any, clients: Clients) -> None:
    """``etcdctl lock NAME`` and an EtcdSource on NAME exclude each other."""
    ep = service("FENCING_TEST_ETCD")
    if shutil.which("etcdctl") is None:
        pytest.fail("no etcdctl in PATH")
    name = unique("lock")
    env = {**os.environ, "ETCDCTL_API": "3"}
    held = subprocess.Popen(["etcdctl", f"--endpoints=http://{ep}", "lock", name],
                            stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert held.stdout is not None
        key = held.stdout.readline().strip()            # etcdctl prints its key once it holds
        assert key.startswith(name + "/"), key
        src = clients.source("etcd", name, db, ttl=5)
        assert src.try_acquire() is None, "an EtcdSource took a lock etcdctl holds"
    finally:
        held.terminate()
        held.wait(10)
    assert src.acquire(timeout=30) is not None
    waiter = subprocess.Popen(["etcdctl", f"--endpoints=http://{ep}", "lock", name, "echo", "got"],
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            waiter.wait(1.5)                            # etcdctl waits while we hold
        assert src.release()
        out, _ = waiter.communicate(timeout=30)
        assert "got" in out
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait(10)


def test_row_scope_has_no_fence_to_raise(db: Any) -> None:
    t = make_rows(db, ["r1"])
    lock = fc.LeaseSource(db, unique("lease"), ttl=30)
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        lock.acquire(timeout=5, fences=[fc.Scope(t, "r1")])
    assert not lock.held, "a lock whose fences could not be raised stays taken"
    again = fc.LeaseSource(db, lock.name, ttl=30)
    assert again.try_acquire() is not None
    again.release()
