"""Through PgBouncer in transaction pooling mode with ONE server connection
(the suite starts it): the token bound as a parameter works, nothing is
left for the next client of the same backend, a session-level token left
on the server connection by another client is reset by the next fenced
transaction, and a lock's many transactions go through."""
from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest

import fencing_client as fc

from .conftest import make_ledger, make_rows, service, unique


@pytest.fixture
def bouncer() -> str:
    port = service("FENCING_TEST_PGBOUNCER")
    # no prepared statements: each transaction may get another backend
    return f"host=127.0.0.1 port={port}"


def client(conninfo: str) -> psycopg.Connection[Any]:
    return psycopg.connect(conninfo, autocommit=True, prepare_threshold=None)


def backend(conn: psycopg.Connection[Any]) -> tuple[int, str]:
    row = conn.execute("SELECT pg_backend_pid(), "
                       "coalesce(current_setting('fencing.token', true), '')").fetchone()
    assert row is not None
    return (row[0], row[1])


def test_set_token_bound_and_nothing_leaks(db: Any, bouncer: str) -> None:
    t = make_rows(db, ["r1"])
    with client(bouncer) as a:
        tok = fc.Token(1, 10)
        pid_a = fc.run_fenced(a, tok, lambda cur: (
            cur.execute(f"UPDATE {t} SET n = n + 1, by = 'a' WHERE id = 'r1'"),
            cur.execute("SELECT pg_backend_pid()").fetchone()[0])[1])
        with pytest.raises(fc.StaleToken):
            fc.run_fenced(a, fc.Token(1, 5), lambda cur: cur.execute(
                f"UPDATE {t} SET by = 'late' WHERE id = 'r1'"))
    with client(bouncer) as b:
        assert backend(b) == (pid_a, ""), "PgBouncer gave another backend, or a token leaked"
        with pytest.raises(psycopg.Error) as ei:
            b.execute(f"UPDATE {t} SET by = 'b' WHERE id = 'r1'")
        assert ei.value.sqlstate == "SF002"
    assert db.execute(f"SELECT by, fence::text FROM {t}").fetchone() == ("a", str(tok))


def test_leftover_on_the_server_connection(db: Any, bouncer: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    t = make_rows(db, ["r1"])
    with client(bouncer) as bad:
        bad.execute("SET fencing.token = '99:99'")        # session level, on the backend
        pid, left = backend(bad)
        assert left == "99:99"
    caplog.set_level(logging.WARNING, logger="fencing_client")
    with client(bouncer) as c:
        got = fc.run_fenced(c, "4:1", lambda cur: (
            cur.execute(f"UPDATE {t} SET n = n + 1 WHERE id = 'r1'"),
            cur.execute("SELECT current_setting('fencing.token')").fetchone()[0])[1])
        assert got == "4:1"
        assert backend(c) == (pid, "")
    assert any(f"backend pid {pid}" in r.getMessage() for r in caplog.records
               if r.name == "fencing_client")
    assert db.execute(f"SELECT fence::text FROM {t}").fetchone() == ("4:1",)


def test_lock_through_pgbouncer(db: Any, bouncer: str) -> None:
    """A built-in lease whose statements go through PgBouncer too: 20
    transactions under one grant on a strict table, 0 refused (twice:
    the lease on the client's connection, and on one of its own)."""
    led = make_ledger(db)
    with client(bouncer) as c:
        lock = fc.LeaseSource(c, unique("lease"), ttl=30)
        with lock:
            for i in range(20):
                fc.run_fenced(c, lock, lambda cur: cur.execute(
                    f"INSERT INTO {led} (acct, amount) VALUES ('a', %s)", (i,)))
    # another lock (for another key), on a connection of the source's own
    with client(bouncer) as c, fc.LeaseSource(bouncer, unique("lease"), ttl=30) as own:
        for i in range(20):
            fc.run_fenced(c, own, lambda cur: cur.execute(
                f"INSERT INTO {led} (acct, amount) VALUES ('b', %s)", (i,)))
    assert db.execute(f"SELECT count(*) FROM {led}").fetchone() == (40,)
