"""A lease holder frozen inside its fenced transaction keeps nobody from
the lease: the token of each transaction comes from ``lease_next()`` in a
statement of its own, before ``BEGIN``, so the transaction never holds
the lease's row (an ``UPDATE`` of it inside the transaction would keep it
locked until the transaction ends, and the next holder's
``lease_acquire()`` waiting on it)."""
from __future__ import annotations

import time
from typing import Any, Callable

import fencing_client as fc

from .conftest import Worker, connect, make_ledger, note, unique, wait_for


def test_frozen_between_two_statements(db: Any, workers: Callable[..., Worker]) -> None:
    """A, frozen between two statements of its open fenced transaction on a
    table protected with the lease, past the lease's TTL: B takes the lease
    while A is still frozen (its lease_acquire waits on no row lock: with a
    lock_timeout, a wait would fail it) and writes; A, thawed, is refused
    at its next statement, and nothing of its transaction is written."""
    name = unique("lease")
    ledger = make_ledger(db, protect=f", lease => '{name}'")
    a = workers("A", "--source", "lease", "--name", name, "--ttl", "1")
    ta = fc.Token.parse(a.cmd("acquire 30")["token"])
    assert fc.Token.parse(a.cmd("begin")["token"]) > ta
    assert a.cmd(f"step {ledger} acct-2").get("ok")     # the transaction's first statement
    a.freeze()
    t0 = time.monotonic()
    with connect(autocommit=True, options="-c lock_timeout=20s") as b_db:
        b = fc.LeaseSource(b_db, name, holder="B", ttl=30)
        tb = b.acquire(timeout=60)
        waited = time.monotonic() - t0
        assert tb > ta
        assert db.execute("SELECT holder FROM fencing.lease_status WHERE name = %s",
                          (name,)).fetchone() == ("B",)
        fc.run_fenced(b_db, b, lambda cur: cur.execute(
            f"INSERT INTO {ledger} (acct, amount, by) VALUES ('acct-1', 1, 'B')"))
        a.thaw()
        r = a.cmd(f"finish {ledger} acct-1")           # the transaction's second statement
        assert (r.get("error"), r.get("reason")) == ("StaleToken", "stale_token"), r
        assert db.execute(f"SELECT array_agg(by ORDER BY id) FROM {ledger}").fetchone() == (["B"],)
        state = wait_for("A to notice it lost the lease",
                         lambda: (lambda s: s if s["lost"] else None)(a.cmd("lost")))
        assert state["held"] is False
        assert a.cmd(f"write {ledger} acct-1").get("error") == "LockLost"
        b.release()
    note(f"A frozen inside its transaction (grant {ta}); B took the lease {waited:.1f} s "
         f"later (token {tb}) while A was frozen; A woke: StaleToken")
