"""What the tests share: the server (libpq's PG* variables), the lock
services the suite started (FENCING_TEST_* variables), worker processes,
and waiting for states."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import unittest
import uuid

import psycopg

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)                       # clients/python
PY = sys.executable

# Notes a test leaves for the TAP output ("# ..." lines after its result).
NOTES: list[str] = []


def note(text: str) -> None:
    NOTES.append(text)


def dsn(**extra) -> str:
    """The server the tests run against: libpq's PG* variables."""
    parts = [f"{k}={v}" for k, v in extra.items()]
    return " ".join(parts)


def connect(**kw) -> psycopg.Connection:
    return psycopg.connect(dsn(), **kw)


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def service(var: str) -> str:
    """A lock service's address from the environment; skip the test when it
    is not there, or fail when FENCING_TEST_REQUIRE=1 (the suite)."""
    v = os.environ.get(var)
    if not v:
        if os.environ.get("FENCING_TEST_REQUIRE") == "1":
            raise AssertionError(f"{var} is not set, and the suite requires every service")
        raise unittest.SkipTest(f"{var} not set (no such service started)")
    return v


def wait_for(what: str, fn, timeout: float = 30.0, poll: float = 0.02):
    """Poll fn until it returns a true value (returned); fail after timeout."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for: {what}")
        time.sleep(poll)


def setup_db() -> None:
    with connect(autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS fencing")


def make_rows_table(conn, name: str, ids, *, protect: str = "") -> None:
    """A table NAME(id text primary key, by text, n int, fence), one row per
    id; protect: extra arguments of fencing.protect (SQL text)."""
    conn.execute(f"CREATE TABLE {name} (id text PRIMARY KEY, by text, n int NOT NULL DEFAULT 0, "
                 "fence fencing.fence)")
    for i in ids:
        conn.execute(f"INSERT INTO {name} (id) VALUES (%s)", (i,))
    conn.execute(f"SELECT fencing.protect('{name}'{protect})")


class Worker:
    """tests/worker.py in a process group (session) of its own, so that it
    can be frozen with SIGSTOP as a whole (its threads: keep-alives,
    heartbeats).  Commands are lines on its stdin; each answer is one JSON
    line on its stdout."""

    def __init__(self, who: str, *args: str):
        self.who = who
        self.p = subprocess.Popen([PY, os.path.join(HERE, "worker.py"), "--who", who, *args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, bufsize=1,
                                  start_new_session=True,
                                  env={**os.environ, "PYTHONPATH": ROOT})
        self.frozen = False
        ready = self.read(60)
        assert ready.get("ready"), ready

    def read(self, timeout: float = 60.0) -> dict:
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            raise AssertionError(f"worker {self.who} said nothing in {timeout}s")
        line = self.p.stdout.readline()
        if not line:
            err = self.p.stderr.read() if self.p.poll() is not None else ""
            raise AssertionError(f"worker {self.who} ended: {err[-2000:]}")
        return json.loads(line)

    def cmd(self, line: str, timeout: float = 60.0) -> dict:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        return self.read(timeout)

    def send(self, line: str) -> None:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

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
                self.p.stdin.write("quit\n")
                self.p.stdin.flush()
                self.p.wait(10)
            except Exception:
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.p.wait(10)
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except Exception:
                pass
