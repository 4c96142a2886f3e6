"""What the tests share: the server (libpq's PG* variables), the lock
services the suite started (FENCING_TEST_* variables), worker processes
that can be frozen, waiting for states, and the TAP lines the suite reads.

    FENCING_TEST_ETCD       host:port of etcd's client URL
    FENCING_TEST_ZK         a ZooKeeper connect string (host:port,...)
    FENCING_TEST_REDIS      host:port of Redis
    FENCING_TEST_PGBOUNCER  the port of a PgBouncer (127.0.0.1, transaction
                            pooling, one server connection) in front of the
                            database the PG* variables name
    FENCING_TEST_REQUIRE=1  a service not given fails its tests instead of
                            skipping them (the suite gives them all)
    FENCING_TEST_TAP=FILE   one TAP line per test into FILE ("ok - ...",
                            "not ok - ...", "# note"), for the suite
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from typing import Any, Callable, Iterator, Optional, TypeVar

import psycopg
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
T = TypeVar("T")

# ---------------------------------------------------------------- TAP lines

_NOTES: list[str] = []


def note(text: str) -> None:
    """A line the suite shows under this test's result."""
    _NOTES.append(text)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get("FENCING_TEST_TAP")
    if not path:
        return
    line = None
    if report.when == "setup" and report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        line = f"ok - python: {report.nodeid} # SKIP {reason.removeprefix('Skipped: ')}"
    elif report.when in ("setup", "teardown") and report.failed:
        line = f"not ok - python: {report.nodeid} ({report.when})"
    elif report.when == "call":
        took = f"({report.duration:.1f}s)"
        if report.passed:
            line = f"ok - python: {report.nodeid} {took}"
        elif report.skipped:
            line = f"ok - python: {report.nodeid} # SKIP"
        else:
            line = f"not ok - python: {report.nodeid} {took}"
    if line is None:
        return
    with open(path, "a") as f:
        f.write(line + "\n")
        if report.failed:
            for ln in str(report.longrepr).splitlines()[-40:]:
                f.write(f"#   {ln}\n")
        if report.when in ("call", "teardown"):
            for n in _NOTES:
                f.write(f"# {n}\n")
            _NOTES.clear()


# ---------------------------------------------------------------- helpers

def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def service(var: str) -> str:
    """A lock service's address from the environment; skip the test when
    it is not there, or fail when FENCING_TEST_REQUIRE=1 (the suite)."""
    v = os.environ.get(var)
    if not v:
        if os.environ.get("FENCING_TEST_REQUIRE") == "1":
            pytest.fail(f"{var} is not set, and the suite requires every service")
        pytest.skip(f"{var} not set (no such service started)")
    return v


def wait_for(what: str, fn: Callable[[], T], timeout: float = 30.0, poll: float = 0.02) -> T:
    """Poll fn until it returns a true value (returned); fail after timeout."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(poll)


def connect(**kw: Any) -> psycopg.Connection[Any]:
    return psycopg.connect("", **kw)


def make_rows(conn: psycopg.Connection[Any], ids: list[str], *, protect: str = "") -> str:
    """A row-scope table (id text primary key, by text, n int, fence), one
    row per id; protect: more arguments of fencing.protect (SQL text)."""
    name = unique("rows")
    conn.execute(f"CREATE TABLE {name} (id text PRIMARY KEY, by text, n int NOT NULL DEFAULT 0, "
                 "fence fencing.fence)")
    for i in ids:
        conn.execute(f"INSERT INTO {name} (id) VALUES (%s)", (i,))
    conn.execute(f"SELECT fencing.protect('{name}'{protect})")
    return name


def make_ledger(conn: psycopg.Connection[Any], *, protect: str = "") -> str:
    """A key-scope ledger: one fence per account (strict, the default)."""
    name = unique("ledger")
    conn.execute(f"CREATE TABLE {name} (id bigserial PRIMARY KEY, acct text NOT NULL, "
                 "amount int NOT NULL, by text, fence fencing.fence)")
    conn.execute(f"SELECT fencing.protect('{name}', key_columns => '{{acct}}'{protect})")
    return name


@pytest.fixture(scope="session", autouse=True)
def extension() -> None:
    with connect(autocommit=True) as c:
        # the C edition, unless the database has an edition already (the
        # edition for managed PostgreSQL is installed by the DBA, never
        # beside the C edition)
        c.execute("DO $$ BEGIN IF pg_catalog.to_regnamespace('fencing') IS NULL THEN "
                  "CREATE EXTENSION fencing; END IF; END $$")
        c.execute("CREATE TABLE IF NOT EXISTS fencing_lock_generations (service text PRIMARY KEY, "
                  "generation bigint NOT NULL DEFAULT 0)")
        c.execute("INSERT INTO fencing_lock_generations VALUES ('etcd', 0), ('zookeeper', 0), "
                  "('redis', 0) ON CONFLICT DO NOTHING")


@pytest.fixture
def c_edition() -> None:
    """Skip a test of what the edition for managed PostgreSQL (fencing_sql)
    does otherwise, as managed/README.md says; the reason names it."""
    with connect() as c:
        if c.execute("SELECT pg_catalog.count(*) FROM pg_catalog.pg_extension "
                     "WHERE extname OPERATOR(pg_catalog.=) 'fencing_sql'").fetchone()[0]:
            pytest.skip("the edition for managed PostgreSQL is installed by the DBA, and the README's "
                        "programs run CREATE EXTENSION fencing, the C edition (managed/README.md: Install)")


@pytest.fixture
def db() -> Iterator[psycopg.Connection[Any]]:
    with connect(autocommit=True) as c:
        yield c


# ---------------------------------------------------------------- workers

class Worker:
    """tests/worker.py in a session (process group) of its own, so that it
    can be frozen with SIGSTOP as a whole (its threads: renewals, kazoo's
    heartbeats).  Commands are lines on its stdin; each answer is one JSON
    line on its stdout."""

    def __init__(self, who: str, *args: str):
        self.who = who
        self.p = subprocess.Popen([PY, os.path.join(HERE, "worker.py"), "--who", who, *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1,
                                  start_new_session=True)
        self.frozen = False
        ready = self.read(60)
        assert ready.get("ready"), ready

    def read(self, timeout: float = 60.0) -> dict[str, Any]:
        assert self.p.stdout is not None
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise AssertionError(f"worker {self.who} said nothing in {timeout}s")
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read() if self.p.stderr and self.p.poll() is not None else ""
            raise AssertionError(f"worker {self.who} ended: {err[-2000:]}")
        out: dict[str, Any] = json.loads(line)
        return out

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def cmd(self, line: str, timeout: float = 60.0) -> dict[str, Any]:
        self.send(line)
        return self.read(timeout)

    def freeze(self) -> None:
        os.killpg(self.p.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        os.killpg(self.p.pid, signal.SIGCONT)
        self.frozen = False

    def stop(self) -> None:
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGCONT)
                self.send("quit")
                self.p.wait(10)
            except Exception:
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.p.wait(10)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                if f is not None:
                    f.close()
            except Exception:
                pass


@pytest.fixture
def workers() -> Iterator[Callable[..., Worker]]:
    started: list[Worker] = []

    def start(who: str, *args: str) -> Worker:
        w = Worker(who, *args)
        started.append(w)
        return w

    yield start
    for w in started:
        w.stop()


# ---------------------------------------------------------------- sources

SOURCES = ("lease", "redis", "etcd", "zookeeper")
# each source's TTL in the stories, seconds (etcd grants 2 s at least; a
# ZooKeeper session of the suite's ensemble lasts 1 to 10 s)
TTL = {"lease": 1.0, "redis": 1.0, "etcd": 2.0, "zookeeper": 2.0}
ENDPOINT_VAR = {"redis": "FENCING_TEST_REDIS", "etcd": "FENCING_TEST_ETCD",
                "zookeeper": "FENCING_TEST_ZK"}


def endpoint(kind: str) -> str:
    var = ENDPOINT_VAR.get(kind)
    return service(var) if var else ""


def lock_name(kind: str) -> str:
    return "/locks/" + unique("zk") if kind == "zookeeper" else unique("lock")


class Clients:
    """The lock services' clients of this process, closed at the end."""

    def __init__(self) -> None:
        self.closers: list[Callable[[], Any]] = []

    def source(self, kind: str, name: str, db: Any, *, ttl: Optional[float] = None,
               **kw: Any) -> Any:
        import fencing_client as fc
        ttl = TTL[kind] if ttl is None else ttl
        ep = endpoint(kind)
        if kind == "lease":
            return fc.LeaseSource(db, name, ttl=ttl, **kw)
        if kind == "redis":
            import redis
            host, port = ep.split(":")
            r = redis.Redis(host=host, port=int(port))
            self.closers.append(r.close)
            return fc.RedisSource(r, name, db, ttl=ttl, **kw)
        if kind == "etcd":
            import etcd3gw
            host, port = ep.split(":")
            return fc.EtcdSource(etcd3gw.client(host=host, port=int(port)), name, db, ttl=ttl, **kw)
        if kind == "zookeeper":
            from kazoo.client import KazooClient
            zk = KazooClient(hosts=ep, timeout=ttl)
            zk.start(timeout=30)
            self.closers.append(zk.close)
            self.closers.append(zk.stop)
            return fc.ZooKeeperSource(zk, name, db, **kw)
        raise ValueError(kind)

    def close(self) -> None:
        for c in reversed(self.closers):
            try:
                c()
            except Exception:
                pass


@pytest.fixture
def clients() -> Iterator[Clients]:
    c = Clients()
    yield c
    c.close()
