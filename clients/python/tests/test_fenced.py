"""Fenced transactions: the typed SF001 reasons, SF002, retries of 40001
and 40P01 only, and no token left on a pooled connection."""
import os
import tempfile
import time
import unittest

import psycopg
from psycopg_pool import ConnectionPool

import fencing_client as fc

from .common import connect, dsn, make_rows_table, setup_db, unique, wait_for


def setUpModule():
    setup_db()


def update(table, id_="r1"):
    return lambda cur: cur.execute(f"UPDATE {table} SET n = n + 1 WHERE id = %s", (id_,))


class TestFenced(unittest.TestCase):
    def setUp(self):
        self.db = connect(autocommit=True)
        self.table = unique("f")
        make_rows_table(self.db, self.table, ["r1"])

    def tearDown(self):
        self.db.close()

    def fence(self):
        return self.db.execute(f"SELECT fence::text FROM {self.table} WHERE id = 'r1'").fetchone()[0]

    def test_fenced_commits_with_token(self):
        with connect() as conn:          # autocommit off, as psycopg's default
            with fc.fenced(conn, "1:5") as cur:
                cur.execute(f"UPDATE {self.table} SET n = n + 1 WHERE id = 'r1'")
                cur.execute("SELECT current_setting('fencing.token')")
                self.assertEqual(cur.fetchone()[0], "1:5")
            self.assertEqual(conn.info.transaction_status, psycopg.pq.TransactionStatus.IDLE)
        self.assertEqual(self.fence(), "1:5")

    def test_stale_token(self):
        fc.run_fenced(self.db, "1:5", update(self.table))
        with self.assertRaises(fc.StaleToken) as cm:
            fc.run_fenced(self.db, fc.Token(1, 4), update(self.table))
        e = cm.exception
        self.assertIsInstance(e, fc.FencedOut)
        self.assertEqual((e.reason, e.table), ("stale_token", self.table))
        self.assertEqual(e.pgerror.sqlstate, "SF001")
        self.assertEqual(self.fence(), "1:5")

    def test_equal_token_already_used(self):
        fc.run_fenced(self.db, "2:1", update(self.table))
        with self.assertRaises(fc.TokenAlreadyUsed) as cm:
            fc.run_fenced(self.db, "2:1", update(self.table))
        self.assertEqual(cm.exception.reason, "token_already_used")
        self.assertIsInstance(cm.exception, fc.FencedOut)

    def test_token_required(self):
        with self.assertRaises(fc.TokenRequired):
            with self.db.transaction():
                try:
                    self.db.execute(f"UPDATE {self.table} SET n = n + 1")
                except psycopg.Error as e:
                    raise fc.translate(e) from e
        with self.assertRaises(TypeError):
            fc.run_fenced(self.db, None, update(self.table))

    def test_bad_token_text_refused_before_sending(self):
        with self.assertRaises(ValueError):
            fc.run_fenced(self.db, "3:x", update(self.table))

    def test_connection_in_transaction_refused(self):
        with connect() as conn:
            conn.execute("SELECT 1")
            with self.assertRaises(psycopg.ProgrammingError):
                with fc.fenced(conn, "1:1"):
                    pass

    def test_lease_expired(self):
        name = unique("lease")
        t2 = unique("lt")
        make_rows_table(self.db, t2, ["r1"], protect=f", lease => '{name}'")
        lease = fc.LeaseSource(self.db, name, "me", 1.5)
        tok = lease.acquire()
        fc.run_fenced(self.db, tok, update(t2))
        wait_for("the lease to run out", lambda: self.db.execute(
            "SELECT NOT live FROM fencing.lease_status WHERE name = %s", (name,)).fetchone()[0])
        with self.assertRaises(fc.LeaseExpired) as cm:
            fc.run_fenced(self.db, tok, update(t2))
        self.assertEqual(cm.exception.reason, "lease_expired")
        self.assertFalse(lease.renew())

    def test_lease_renew_keeps_writing(self):
        name = unique("lease")
        t2 = unique("lt")
        make_rows_table(self.db, t2, ["r1", "r2"], protect=f", lease => '{name}'")
        lease = fc.LeaseSource(self.db, name, "me", 30)
        tok = lease.acquire()
        self.assertIsNone(fc.LeaseSource(self.db, name, "other", 30).acquire())
        fc.run_fenced(self.db, tok, update(t2, "r1"))
        self.assertTrue(lease.renew())
        fc.run_fenced(self.db, tok, update(t2, "r2"))
        self.assertTrue(lease.release())
        t3 = fc.LeaseSource(self.db, name, "other", 30).acquire()
        self.assertGreater(t3, tok)

    def test_retry_serialization_failure(self):
        calls = []

        def fn(cur):
            calls.append(1)
            cur.execute(f"UPDATE {self.table} SET n = n + 1 WHERE id = 'r1'")
            if len(calls) == 1:
                cur.execute("DO $$BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '40001'; END$$")
            return len(calls)

        self.assertEqual(fc.run_fenced(self.db, "5:1", fn, retry=3), 2)
        calls.clear()
        with self.assertRaises(psycopg.errors.SerializationFailure):
            fc.run_fenced(self.db, "5:2", fn)          # retry not asked
        self.assertEqual(len(calls), 1)

    def test_retry_deadlock(self):
        calls = []

        def fn(cur):
            calls.append(1)
            if len(calls) < 3:
                cur.execute("DO $$BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '40P01'; END$$")
            cur.execute(f"UPDATE {self.table} SET n = n + 1 WHERE id = 'r1'")

        fc.run_fenced(self.db, "6:1", fn, retry=3)
        self.assertEqual(len(calls), 3)

    def test_fenced_out_never_retried(self):
        fc.run_fenced(self.db, "9:9", update(self.table))
        calls = []

        def fn(cur):
            calls.append(1)
            update(self.table)(cur)

        with self.assertRaises(fc.StaleToken):
            fc.run_fenced(self.db, "9:8", fn, retry=5)
        self.assertEqual(len(calls), 1)

    def test_other_errors_not_retried(self):
        calls = []

        def fn(cur):
            calls.append(1)
            cur.execute("SELECT 1/0")

        with self.assertRaises(psycopg.errors.DivisionByZero):
            fc.run_fenced(self.db, "7:1", fn, retry=5)
        self.assertEqual(len(calls), 1)

    def test_without_pipeline(self):
        fc.run_fenced(self.db, "8:1", update(self.table), pipeline=False)
        with self.assertRaises(fc.StaleToken):
            fc.run_fenced(self.db, "8:0", update(self.table), pipeline=False)
        self.assertEqual(self.fence(), "8:1")


class TestPool(unittest.TestCase):
    """set_token is transaction-local: the next checkout of the same
    connection has no token, after a commit, a fenced-out write and an
    exception of the caller's own."""

    def setUp(self):
        self.db = connect(autocommit=True)
        self.table = unique("p")
        make_rows_table(self.db, self.table, ["r1"])
        self.pool = ConnectionPool(dsn(), min_size=1, max_size=1, open=True)

    def tearDown(self):
        self.pool.close()
        self.db.close()

    def next_checkout(self):
        with self.pool.connection() as conn:
            return conn.execute("SELECT pg_backend_pid(), "
                                "coalesce(current_setting('fencing.token', true), '')").fetchone()

    def test_no_token_on_next_checkout(self):
        pid, tok = self.next_checkout()
        self.assertEqual(tok, "")
        fc.run_fenced(self.pool, "1:1", update(self.table))
        self.assertEqual(self.next_checkout(), (pid, ""))
        with self.assertRaises(fc.StaleToken):
            fc.run_fenced(self.pool, "1:0", update(self.table))
        self.assertEqual(self.next_checkout(), (pid, ""))

        def boom(cur):
            update(self.table)(cur)
            raise KeyError("the caller's own error")

        with self.assertRaises(KeyError):
            fc.run_fenced(self.pool, "1:2", boom)
        self.assertEqual(self.next_checkout(), (pid, ""))
        with self.assertRaises(psycopg.errors.DivisionByZero):
            fc.run_fenced(self.pool, "1:3", lambda cur: cur.execute("SELECT 1/0"))
        self.assertEqual(self.next_checkout(), (pid, ""))
        # and the fence kept the committed token only
        self.assertEqual(self.db.execute(f"SELECT fence::text, n FROM {self.table}").fetchone(),
                         ("1:1", 1))

    def test_no_tokenless_write_after_fenced(self):
        fc.run_fenced(self.pool, "2:1", update(self.table))
        with self.pool.connection() as conn:
            with self.assertRaises(psycopg.Error) as cm:
                conn.execute(f"UPDATE {self.table} SET n = n + 1")
            self.assertEqual(cm.exception.sqlstate, "SF002")


class TestRoundTrips(unittest.TestCase):
    """BEGIN and set_token travel together: a fenced transaction with one
    statement is three round trips (BEGIN+set_token, the statement,
    COMMIT), one fewer than the same transaction written by hand."""

    def round_trips(self, conn, fn):
        path = os.path.join(tempfile.mkdtemp(), "trace")
        with open(path, "w") as f:
            conn.pgconn.trace(f.fileno())
            try:
                fn()
            finally:
                conn.pgconn.untrace()
        with open(path) as f:
            return sum(1 for line in f if "\tB\t" in line and "ReadyForQuery" in line)

    def test_round_trips(self):
        db = connect(autocommit=True)
        table = unique("rt")
        make_rows_table(db, table, ["r1"])
        for autocommit in (False, True):
            with self.subTest(autocommit=autocommit), connect(autocommit=autocommit) as conn:
                base = 10 if autocommit else 0

                def lib():
                    with fc.fenced(conn, fc.Token(1, base + 1)) as cur:
                        cur.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 'r1'")

                def by_hand():
                    with conn.transaction():
                        conn.execute("SELECT fencing.set_token(%s)", (f"1:{base + 2}",))
                        conn.execute(f"UPDATE {table} SET n = n + 1 WHERE id = 'r1'")

                self.assertEqual(self.round_trips(conn, lib), 3)
                self.assertEqual(self.round_trips(conn, by_hand), 4)
                self.assertEqual(conn.autocommit, autocommit)
        db.close()
