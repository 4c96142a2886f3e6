"""Every token source against its real service (the built-in lease, Redis,
etcd, a ZooKeeper ensemble): taking the lock (at once or waiting), tokens
that only grow, many transactions under one lock on a strict table,
renewal while the holder lives, the lost signal, the pause stories with
SIGSTOP past the TTL, and the first meter."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

import pytest

import fencing_client as fc

from .conftest import (SOURCES, TTL, Clients, Worker, endpoint, lock_name, make_ledger, note,
                       wait_for)

pytestmark = pytest.mark.parametrize("kind", SOURCES)


def worker(start: Callable[..., Worker], kind: str, who: str, name: str) -> Worker:
    return start(who, "--source", kind, "--name", name, "--ttl", str(TTL[kind]),
                 "--endpoint", endpoint(kind))


def test_take_wait_and_release(kind: str, db: Any, clients: Clients) -> None:
    name = lock_name(kind)
    a = clients.source(kind, name, "")
    b = clients.source(kind, name, "")
    ta = a.try_acquire()
    assert ta is not None and a.held and a.token == ta
    assert b.try_acquire() is None, "two holders at once"
    t0 = time.monotonic()
    with pytest.raises(fc.NotAcquired):
        b.acquire(timeout=0.5)
    assert time.monotonic() - t0 >= 0.45
    assert not b.held
    # a waiter gets the lock as soon as the holder gives it up
    got: dict[str, Any] = {}
    th = threading.Thread(target=lambda: got.update(t=b.acquire(timeout=30)))
    th.start()
    time.sleep(0.3)
    assert th.is_alive(), "the waiter did not wait"
    assert a.release() is True
    th.join(30)
    assert got["t"] > ta, (got, ta)
    assert not a.held and a.release() is False
    with pytest.raises(fc.LockLost):
        a.next_token()
    assert b.release() is True


def test_tokens_only_grow(kind: str, db: Any, clients: Clients) -> None:
    name = lock_name(kind)
    seen = []
    for _ in range(3):
        s = clients.source(kind, name, "")
        seen.append(s.acquire(timeout=30))
        seen.append(s.next_token())
        seen.append(s.next_token())
        s.release()
    assert seen == sorted(set(seen)), f"tokens do not strictly grow: {seen}"


def test_context_manager_is_the_source(kind: str, db: Any, clients: Clients) -> None:
    s = clients.source(kind, lock_name(kind), "")
    with s as lock:
        assert lock is s and s.held and s.token is not None
    assert not s.held
    other = clients.source(kind, s.name if kind != "zookeeper" else s.path, "")
    assert other.try_acquire() is not None, "the lock was not given up at the end of with"
    other.release()


def test_many_transactions_under_one_lock(kind: str, db: Any, clients: Clients) -> None:
    """100 fenced transactions under one grant on a strict key-scope table:
    0 refusals, each with a higher token."""
    ledger = make_ledger(db)
    s = clients.source(kind, lock_name(kind), db)
    s.acquire(timeout=30)
    tokens = []
    t0 = time.monotonic()
    for i in range(100):
        f = fc.fenced(db, s)
        with f as cur:
            cur.execute(f"INSERT INTO {ledger} (acct, amount) VALUES ('acct-1', %s)", (i,))
        tokens.append(f.token)
    took = time.monotonic() - t0
    s.release()
    assert tokens == sorted(set(tokens))
    rows = db.execute(f"SELECT count(*), (array_agg(fence::text ORDER BY id DESC))[1] "
                      f"FROM {ledger}").fetchone()
    assert rows == (100, str(tokens[-1]))
    note(f"{kind}: 100 transactions under one lock in strict mode, 0 refused, "
         f"{took * 10:.1f} ms each")


def test_renewed_while_alive(kind: str, db: Any, clients: Clients) -> None:
    """Held for 2.5 TTLs without writing: the renewal thread keeps it."""
    lost: list[Any] = []
    # a TTL of 2 s at least: a renewal every 2/3 s leaves room for a busy machine
    s = clients.source(kind, lock_name(kind), db, on_lost=lost.append, ttl=max(2.0, TTL[kind]))
    t = s.acquire(timeout=30)
    time.sleep(2.5 * s.ttl)
    assert s.held and not s.lost.is_set() and not lost
    other = clients.source(kind, s.name if kind != "zookeeper" else s.path, db)
    assert other.try_acquire() is None, "another holder got a lock that was renewed"
    assert s.next_token() > t
    assert s.release() is True


def test_lost_signal_after_a_pause(kind: str, db: Any, clients: Clients,
                                   workers: Callable[..., Worker]) -> None:
    """A holder frozen past its TTL, whose lock another took meanwhile:
    when it wakes, ``lost`` is set and ``on_lost`` called, ``next_token()``
    raises LockLost, and its next transaction is refused before it starts."""
    ledger = make_ledger(db)
    name = lock_name(kind)
    a = worker(workers, kind, "A", name)
    assert "token" in a.cmd("acquire 30")
    assert a.cmd(f"write {ledger} acct-1").get("ok")
    a.freeze()
    b = clients.source(kind, name, db)
    tb = b.acquire(timeout=60)
    fc.run_fenced(db, b, lambda cur: cur.execute(
        f"INSERT INTO {ledger} (acct, amount, by) VALUES ('acct-1', 1, 'B')"))
    a.thaw()
    state = wait_for("A to notice it lost its lock (lost set, on_lost called)",
                     lambda: (lambda r: r if r["lost"] and r["callbacks"] else None)(
                         a.cmd("lost")), timeout=30)
    assert state == {"lost": True, "callbacks": 1, "held": False}
    assert a.cmd("next").get("error") == "LockLost"
    r = a.cmd(f"write {ledger} acct-1")
    assert r.get("error") == "LockLost", r
    assert db.execute(f"SELECT by, fence::text FROM {ledger} ORDER BY id DESC LIMIT 1"
                      ).fetchone() == ("B", str(b.token))
    assert b.release() and tb is not None


def test_pause_story(kind: str, db: Any, clients: Clients,
                     workers: Callable[..., Worker]) -> None:
    """A holder frozen after its transaction took its token, past the TTL;
    another takes the lock and writes; the frozen one wakes and writes:
    refused by the database (StaleToken), nothing of it written."""
    ledger = make_ledger(db)
    name = lock_name(kind)
    a = worker(workers, kind, "A", name)
    a.cmd("acquire 30")
    assert a.cmd(f"write {ledger} acct-1").get("ok")
    ta = fc.Token.parse(a.cmd("begin")["token"])
    a.freeze()
    t0 = time.monotonic()
    b = clients.source(kind, name, db)
    tb = b.acquire(timeout=60)
    waited = time.monotonic() - t0
    assert tb > ta
    fc.run_fenced(db, b, lambda cur: cur.execute(
        f"INSERT INTO {ledger} (acct, amount, by) VALUES ('acct-1', 1, 'B')"))
    a.thaw()
    r = a.cmd(f"finish {ledger} acct-1")
    assert (r.get("error"), r.get("reason")) == ("StaleToken", "stale_token"), r
    assert db.execute(f"SELECT count(*) FILTER (WHERE by = 'A' AND fence::text = %s) "
                      f"FROM {ledger}", (str(ta),)).fetchone() == (0,)
    b.release()
    note(f"{kind}: A frozen with token {ta}; B took the lock after {waited:.1f} s "
         f"(token {tb}), wrote; A woke: StaleToken")


@pytest.mark.parametrize("fences", [True, False], ids=["fences", "no-fences"])
def test_first_meter(kind: str, fences: bool, db: Any, clients: Clients,
                     workers: Callable[..., Worker]) -> None:
    """A holder frozen after its transaction took its token, past the TTL;
    another takes the lock but has not written yet.  With the new holder's
    fences raised when it took the lock, the old holder's write is refused
    when it wakes; without them it is accepted (the window the first meter
    closes)."""
    ledger = make_ledger(db)
    name = lock_name(kind)
    a = worker(workers, kind, "A", name)
    a.cmd("acquire 30")
    ta = fc.Token.parse(a.cmd("begin")["token"])
    a.freeze()
    b = clients.source(kind, name, db)
    tb = b.acquire(timeout=60, fences=[fc.Scope(ledger, "acct-1")] if fences else [])
    assert tb > ta
    a.thaw()
    r = a.cmd(f"finish {ledger} acct-1")
    if fences:
        assert (r.get("error"), r.get("reason")) == ("StaleToken", "stale_token"), r
        assert db.execute(f"SELECT count(*) FROM {ledger}").fetchone() == (0,)
        # the new holder writes on: its transactions' tokens beat its grant's
        fc.run_fenced(db, b, lambda cur: cur.execute(
            f"INSERT INTO {ledger} (acct, amount, by) VALUES ('acct-1', 1, 'B')"))
    else:
        assert r.get("ok"), r
    b.release()


def test_first_meter_table_scope(kind: str, db: Any, clients: Clients) -> None:
    """A table-scope fence raised at the grant: an older token is refused
    on the whole table; the stale grant itself is refused at acquire."""
    t = fc.Token
    table = f"tscope_{kind}_{int(time.time() * 1000) % 10**8}"
    db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, n int, fence fencing.fence)")
    db.execute(f"SELECT fencing.protect('{table}', key_columns => '{{}}')")
    s = clients.source(kind, lock_name(kind), db)
    tok = s.acquire(timeout=30, fences=[fc.Scope(table)])
    with pytest.raises(fc.StaleToken):
        fc.run_fenced(db, t(tok.epoch, tok.counter - 1), lambda cur: cur.execute(
            f"INSERT INTO {table} VALUES (1, 1)"))
    fc.run_fenced(db, s, lambda cur: cur.execute(f"INSERT INTO {table} VALUES (1, 1)"))
    s.release()
