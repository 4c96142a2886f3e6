"""Several locks in one transaction: a transfer between two accounts, each
under its own lock, each ledger row carrying its own account's token in
its fence column (no session token).  Judged per key: the newer token
wins on each key, and a stale token on either key aborts the whole
transfer."""
from __future__ import annotations

from typing import Any, Callable

import pytest

import fencing_client as fc

from .conftest import SOURCES, Clients, lock_name, make_ledger


def transfer(ledger: str, amount: int) -> Callable[[Any, dict[str, fc.Token]], None]:
    def fn(cur: Any, tokens: dict[str, fc.Token]) -> None:
        cur.execute(f"INSERT INTO {ledger} (acct, amount, fence) VALUES ('acct-1', %s, %s::text::fencing.fence)",
                    (-amount, str(tokens["acct-1"])))
        cur.execute(f"INSERT INTO {ledger} (acct, amount, fence) VALUES ('acct-2', %s, %s::text::fencing.fence)",
                    (amount, str(tokens["acct-2"])))
    return fn


def balances(db: Any, ledger: str) -> dict[str, int]:
    return dict(db.execute(f"SELECT acct, sum(amount)::int FROM {ledger} GROUP BY acct").fetchall())


def test_judged_per_key(db: Any) -> None:
    """Bare tokens, to choose them: each key by its own token."""
    ledger = make_ledger(db)
    T = fc.Token
    fc.run_fenced_many(db, {"acct-1": T(1, 5), "acct-2": T(1, 3)}, transfer(ledger, 10))
    assert balances(db, ledger) == {"acct-1": -10, "acct-2": 10}
    # acct-1's token is older than its fence, acct-2's is newer: the whole
    # transfer is refused, neither row written
    with pytest.raises(fc.StaleToken) as ei:
        fc.run_fenced_many(db, {"acct-1": T(1, 4), "acct-2": T(1, 9)}, transfer(ledger, 20))
    assert ei.value.reason == "stale_token"
    # the same on the other key
    with pytest.raises(fc.StaleToken):
        fc.run_fenced_many(db, {"acct-1": T(1, 9), "acct-2": T(1, 2)}, transfer(ledger, 20))
    assert balances(db, ledger) == {"acct-1": -10, "acct-2": 10}
    # a token lower than the other key's fence is fine on its own key: the
    # newer token wins on each key, whatever the other key's fence is
    fc.run_fenced_many(db, {"acct-1": T(1, 6), "acct-2": T(1, 4)}, transfer(ledger, 1))
    assert balances(db, ledger) == {"acct-1": -11, "acct-2": 11}
    fences = dict(db.execute(f"SELECT DISTINCT ON (acct) acct, fence::text FROM {ledger} "
                             "ORDER BY acct, id DESC").fetchall())
    assert fences == {"acct-1": "1:6", "acct-2": "1:4"}
    # no session token was set: a row without a fence of its own is refused
    with pytest.raises(fc.TokenRequired):
        fc.run_fenced_many(db, {"acct-1": T(1, 7)}, lambda cur, toks: cur.execute(
            f"INSERT INTO {ledger} (acct, amount) VALUES ('acct-1', 1)"))


@pytest.mark.parametrize("kind", SOURCES)
def test_transfer_under_two_locks(kind: str, db: Any, clients: Clients) -> None:
    """Two real locks, one per account: many transfers under them, then a
    holder whose lock on acct-2 was taken over is refused as a whole."""
    ledger = make_ledger(db)
    n1, n2 = lock_name(kind), lock_name(kind)
    l1 = clients.source(kind, n1, db, ttl=30)
    l2 = clients.source(kind, n2, db, ttl=30)
    l1.acquire(timeout=30)
    l2.acquire(timeout=30)
    for _ in range(5):
        fc.run_fenced_many(db, {"acct-1": l1, "acct-2": l2}, transfer(ledger, 1))
    assert balances(db, ledger) == {"acct-1": -5, "acct-2": 5}
    old2 = l2.next_token()
    l2.release()
    # another holder takes acct-2's lock and writes to acct-2
    new2 = clients.source(kind, n2, db, ttl=30)
    new2.acquire(timeout=30)
    fc.run_fenced(db, new2, lambda cur: cur.execute(
        f"INSERT INTO {ledger} (acct, amount) VALUES ('acct-2', 100)"))
    # the old holder of acct-2's lock, with the token it had: refused whole
    with pytest.raises(fc.StaleToken):
        fc.run_fenced_many(db, {"acct-1": l1, "acct-2": fc.StaticToken(old2)},
                           transfer(ledger, 1))
    assert balances(db, ledger) == {"acct-1": -5, "acct-2": 105}
    # and through its source: the lock is not held, nothing is sent
    with pytest.raises(fc.LockLost):
        fc.run_fenced_many(db, {"acct-1": l1, "acct-2": l2}, transfer(ledger, 1))
    l1.release()
    new2.release()
