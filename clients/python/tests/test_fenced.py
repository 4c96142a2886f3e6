"""Fenced transactions: the typed SF001 reasons, a bare token's second
transaction, retries of 40001 and 40P01 only (each on a fresh checkout
with a fresh token), round trips, and a pool that never hands out a
connection carrying a token."""
from __future__ import annotations

import logging
import os
import tempfile
from typing import Any, Callable

import psycopg
import pytest
from psycopg_pool import ConnectionPool

import fencing_client as fc

from .conftest import connect, make_ledger, make_rows, unique, wait_for


def update(table: str, id_: str = "r1") -> Callable[[Any], Any]:
    return lambda cur: cur.execute(f"UPDATE {table} SET n = n + 1 WHERE id = %s", (id_,))


def fence(db: Any, table: str) -> str:
    return str(db.execute(f"SELECT fence::text FROM {table} WHERE id = 'r1'").fetchone()[0])


def test_fenced_commits_with_token(db: Any) -> None:
    t = make_rows(db, ["r1"])
    with connect() as conn:          # autocommit off, psycopg's default
        f = fc.fenced(conn, "1:5")
        with f as cur:
            cur.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 'r1'")
            cur.execute("SELECT current_setting('fencing.token')")
            assert cur.fetchone()[0] == "1:5"
        assert f.token == fc.Token(1, 5)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert not conn.autocommit
    assert fence(db, t) == "1:5"


def test_reasons(db: Any) -> None:
    t = make_rows(db, ["r1"])
    fc.run_fenced(db, "1:5", update(t))
    with pytest.raises(fc.StaleToken) as ei:
        fc.run_fenced(db, fc.Token(1, 4), update(t))
    assert (ei.value.reason, ei.value.table) == ("stale_token", t)
    # a bare token is the same token in every transaction: strict refuses the second
    with pytest.raises(fc.TokenAlreadyUsed) as eu:
        fc.run_fenced(db, fc.StaticToken("1:5"), update(t))
    assert eu.value.reason == "token_already_used"
    assert fence(db, t) == "1:5"


def test_token_required_and_bad_tokens(db: Any) -> None:
    t = make_rows(db, ["r1"])
    with pytest.raises(TypeError):
        fc.run_fenced(db, None, update(t))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        fc.run_fenced(db, "3:x", update(t))
    with connect() as conn:
        conn.execute("SELECT 1")            # a transaction is open
        with pytest.raises(psycopg.ProgrammingError):
            with fc.fenced(conn, "1:1"):
                pass


def test_token_from_server(db: Any) -> None:
    # a fence as the server prints it, in either edition's text form (a
    # fence column's own output: 3:42 in the C edition, (3,42) in the
    # edition for managed PostgreSQL; cast to text: 3:42 in both)
    row = db.execute("SELECT '3:42'::text::fencing.fence::text, '(3,42)', "
                     "'9223372036854775807:0'::text::fencing.fence::text, "
                     "'3:42'::text::fencing.fence").fetchone()
    assert [fc.Token.from_server(x) for x in row] == [
        fc.Token(3, 42), fc.Token(3, 42), fc.Token(9223372036854775807, 0), fc.Token(3, 42)]


def test_lease_expired(db: Any) -> None:
    name = unique("lease")
    t = make_rows(db, ["r1"], protect=f", lease => '{name}'")
    lease = fc.LeaseSource(db, name, ttl=1.0)
    tok = lease.acquire(timeout=10)
    fc.run_fenced(db, lease, update(t))
    lease._stop_renewal()            # as if the holder's process were frozen
    wait_for("the lease to run out", lambda: db.execute(
        "SELECT NOT live FROM fencing.lease_status WHERE name = %s", (name,)).fetchone()[0])
    with pytest.raises(fc.LeaseExpired) as ei:
        fc.run_fenced(db, fc.StaticToken(lease.token or tok), update(t))
    assert ei.value.reason == "lease_expired"
    with pytest.raises(fc.LockLost):
        fc.run_fenced(db, lease, update(t))
    assert lease.lost.is_set()


def test_retry_serialization_failure_fresh_token(db: Any) -> None:
    t = make_rows(db, ["r1"])
    lease = fc.LeaseSource(db, unique("lease"), ttl=30)
    lease.acquire(timeout=10)
    seen: list[Any] = []

    def fn(cur: Any) -> int:
        seen.append(cur.execute("SELECT current_setting('fencing.token')").fetchone()[0])
        cur.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 'r1'")
        if len(seen) == 1:
            cur.execute("DO $$BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '40001'; END$$")
        return len(seen)

    assert fc.run_fenced(db, lease, fn, attempts=3) == 2
    assert seen[0] != seen[1] and fc.Token.parse(seen[1]) > fc.Token.parse(seen[0])
    seen.clear()
    with pytest.raises(psycopg.errors.SerializationFailure):
        fc.run_fenced(db, lease, fn)          # attempts=1: no retry
    assert len(seen) == 1
    lease.release()


def test_retry_deadlock_on_fresh_checkouts(db: Any) -> None:
    t = make_rows(db, ["r1"])
    pids: list[int] = []
    with ConnectionPool("", min_size=2, max_size=2, open=True) as pool:
        with pool.connection() as held:       # one checked out: each attempt is a new checkout
            def fn(cur: Any) -> None:
                pids.append(cur.execute("SELECT pg_backend_pid()").fetchone()[0])
                if len(pids) < 3:
                    cur.execute("DO $$BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '40P01'; END$$")
                cur.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 'r1'")

            fc.run_fenced(pool, "7:1", fn, attempts=3)
            assert held.info.backend_pid not in pids
    assert len(pids) == 3


def test_fenced_out_and_other_errors_never_retried(db: Any) -> None:
    t = make_rows(db, ["r1"])
    fc.run_fenced(db, "9:9", update(t))
    calls: list[int] = []

    def stale(cur: Any) -> None:
        calls.append(1)
        update(t)(cur)

    with pytest.raises(fc.StaleToken):
        fc.run_fenced(db, "9:8", stale, attempts=5)
    assert len(calls) == 1
    calls.clear()

    def div(cur: Any) -> None:
        calls.append(1)
        cur.execute("SELECT 1/0")

    with pytest.raises(psycopg.errors.DivisionByZero):
        fc.run_fenced(db, "9:10", div, attempts=5)
    assert len(calls) == 1
    with pytest.raises(ValueError):
        fc.run_fenced(db, "9:11", div, attempts=0)


def test_pipeline_argument_ignored(db: Any) -> None:
    # accepted for code written against 1.3, where it chose pipeline mode;
    # it changes nothing and a DeprecationWarning says so
    t = make_rows(db, ["r1"])
    with pytest.warns(DeprecationWarning, match="pipeline= has no effect"):
        fc.run_fenced(db, "8:1", update(t), pipeline=False)
    with pytest.raises(fc.StaleToken), pytest.warns(DeprecationWarning):
        fc.run_fenced(db, "8:0", update(t), pipeline=True)
    with pytest.warns(DeprecationWarning), connect() as conn, \
            fc.fenced(conn, "8:2", pipeline=False) as cur:
        cur.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 'r1'")
    assert fence(db, t) == "8:2"


def test_run_locked(db: Any) -> None:
    led = make_ledger(db)
    lock = fc.LeaseSource(db, unique("lease"), ttl=30)
    out = fc.run_locked(db, lock, lambda cur: cur.execute(
        f"INSERT INTO {led} (acct, amount) VALUES ('a', 1) RETURNING fence::text").fetchone()[0],
        timeout=5, fences=[fc.Scope(led, "a")])
    assert not lock.held and fc.Token.parse(out)
    other = fc.LeaseSource(db, lock.name, ttl=30)
    assert other.try_acquire() is not None, "run_locked did not release"
    with pytest.raises(fc.NotAcquired):
        fc.run_locked(db, lock, lambda cur: None, timeout=0.2)
    other.release()
    with pytest.raises(TypeError):
        fc.run_locked(db, "1:1", lambda cur: None)  # type: ignore[arg-type]


class TestPool:
    """A pool never hands out a connection that carries a token: the
    transaction-local token ends with the transaction, and a session-level
    one left by other code is reset by the next fenced transaction."""

    def checkout(self, pool: ConnectionPool[Any]) -> tuple[int, str]:
        with pool.connection() as conn:
            row = conn.execute("SELECT pg_backend_pid(), "
                               "coalesce(current_setting('fencing.token', true), '')").fetchone()
            assert row is not None
            return (row[0], row[1])

    def test_no_token_on_next_checkout(self, db: Any) -> None:
        t = make_rows(db, ["r1"])
        with ConnectionPool("", min_size=1, max_size=1, open=True) as pool:
            pid, tok = self.checkout(pool)
            assert tok == ""
            fc.run_fenced(pool, "1:1", update(t))
            assert self.checkout(pool) == (pid, "")
            with pytest.raises(fc.StaleToken):
                fc.run_fenced(pool, "1:0", update(t))
            assert self.checkout(pool) == (pid, "")

            def boom(cur: Any) -> None:
                update(t)(cur)
                raise KeyError("the caller's own error")

            with pytest.raises(KeyError):
                fc.run_fenced(pool, "1:2", boom)
            assert self.checkout(pool) == (pid, "")
            assert db.execute(f"SELECT fence::text, n FROM {t}").fetchone() == ("1:1", 1)

    def test_source_on_a_pool_of_one(self, db: Any) -> None:
        """A lease on the same pool of one connection as the transactions:
        the token is taken before the checkout, nothing waits for itself."""
        led = make_ledger(db)
        with ConnectionPool("", min_size=1, max_size=1, open=True, timeout=5) as pool:
            with fc.LeaseSource(pool, unique("lease"), ttl=30) as lock:
                for i in range(5):
                    fc.run_fenced(pool, lock, lambda cur: cur.execute(
                        f"INSERT INTO {led} (acct, amount) VALUES ('a', %s)", (i,)))
                fc.run_fenced_many(pool, {"a": lock}, lambda cur, toks: cur.execute(
                    f"INSERT INTO {led} (acct, amount, fence) VALUES ('a', 5, %s::text::fencing.fence)",
                    (str(toks["a"]),)))
        assert db.execute(f"SELECT count(*) FROM {led}").fetchone() == (6,)

    def test_leftover_session_token_reset(self, db: Any, caplog: pytest.LogCaptureFixture) -> None:
        """Other code left ``SET fencing.token`` on a pooled connection: the
        next fenced transaction resets it, writes with its own token, logs
        a warning naming the backend; the next checkout is clean."""
        t = make_rows(db, ["r1"])
        with ConnectionPool("", min_size=1, max_size=1, open=True,
                            kwargs={"autocommit": True}) as pool:
            with pool.connection() as conn:
                conn.execute("SET fencing.token = '99:99'")      # a bad neighbour
            pid, tok = self.checkout(pool)
            assert tok == "99:99"
            caplog.set_level(logging.WARNING, logger="fencing_client")
            f_tok = fc.run_fenced(pool, "2:1", lambda cur: (update(t)(cur), cur.execute(
                "SELECT current_setting('fencing.token')").fetchone()[0])[1])
            assert f_tok == "2:1"
            assert self.checkout(pool) == (pid, "")
            warn = [r for r in caplog.records if r.name == "fencing_client"]
            assert len(warn) == 1 and f"backend pid {pid}" in warn[0].getMessage()
            assert fence(db, t) == "2:1"
            # the same through run_fenced_many (no session token of its own)
            with pool.connection() as conn:
                conn.execute("SET fencing.token = '99:99'")
            fc.run_fenced_many(pool, {"r1": "3:1"}, lambda cur, toks: cur.execute(
                f"UPDATE {t} SET n = n + 1, fence = %s::text::fencing.fence WHERE id = 'r1'", (str(toks["r1"]),)))
            assert self.checkout(pool) == (pid, "")
            assert fence(db, t) == "3:1"
            # and through run_once
            with pool.connection() as conn:
                conn.execute("SET fencing.token = '99:99'")
            fc.run_once(pool, unique("k"), {}, lambda cur, claim: None)
            assert self.checkout(pool) == (pid, "")


class TestRoundTrips:
    """The leftover check and set_token are one statement: a fenced
    transaction with one statement is four round trips (BEGIN, check +
    set_token, the statement, COMMIT), as many as the same transaction by
    hand."""

    @staticmethod
    def round_trips(conn: Any, fn: Callable[[], Any]) -> int:
        path = os.path.join(tempfile.mkdtemp(), "trace")
        with open(path, "w") as f:
            conn.pgconn.trace(f.fileno())
            try:
                fn()
            finally:
                conn.pgconn.untrace()
        with open(path) as f:
            return sum(1 for line in f if "\tB\t" in line and "ReadyForQuery" in line)

    def test_round_trips(self, db: Any) -> None:
        t = make_rows(db, ["r1"])
        for autocommit in (False, True):
            with connect(autocommit=autocommit) as conn:
                base = 10 if autocommit else 0

                def lib() -> None:
                    with fc.fenced(conn, fc.Token(1, base + 1)) as cur:
                        cur.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 'r1'")

                def by_hand() -> None:
                    with conn.transaction():
                        conn.execute("SELECT fencing.set_token(%s)", (f"1:{base + 2}",))
                        conn.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 'r1'")

                assert self.round_trips(conn, lib) == 4
                assert self.round_trips(conn, by_hand) == 4
                assert conn.autocommit == autocommit
