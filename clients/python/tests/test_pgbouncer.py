"""Through PgBouncer in transaction pooling mode with ONE server connection
(the suite starts it): set_token with the token bound as a parameter
works, and nothing is left for the next client on the same backend."""
import os
import unittest

import psycopg

import fencing_client as fc

from .common import connect, make_rows_table, service, setup_db, unique


def setUpModule():
    setup_db()


class TestPgBouncer(unittest.TestCase):
    def setUp(self):
        self.port = service("FENCING_TEST_PGBOUNCER")
        self.db = connect(autocommit=True)
        self.table = unique("pb")
        make_rows_table(self.db, self.table, ["r1"])

    def tearDown(self):
        self.db.close()

    def client(self):
        # no prepared statements: each transaction may get another backend
        return psycopg.connect(f"host=127.0.0.1 port={self.port}", autocommit=True,
                               prepare_threshold=None)

    def test_set_token_bound_and_nothing_leaks(self):
        for pipeline in (True, False):
            with self.subTest(pipeline=pipeline):
                with self.client() as a:
                    tok = fc.Token(1, 10 if pipeline else 20)
                    pid_a = fc.run_fenced(a, tok, lambda cur: (
                        cur.execute(f"UPDATE {self.table} SET n = n + 1, by = 'a' WHERE id = 'r1'"),
                        cur.execute("SELECT pg_backend_pid()").fetchone()[0])[1],
                        pipeline=pipeline)
                    with self.assertRaises(fc.StaleToken):
                        fc.run_fenced(a, fc.Token(1, 5), lambda cur: cur.execute(
                            f"UPDATE {self.table} SET by = 'late' WHERE id = 'r1'"), pipeline=pipeline)
                with self.client() as b:
                    pid_b, leftover = b.execute(
                        "SELECT pg_backend_pid(), coalesce(current_setting('fencing.token', true), '')"
                    ).fetchone()
                    self.assertEqual(pid_b, pid_a, "PgBouncer gave the next client another backend")
                    self.assertEqual(leftover, "")
                    with self.assertRaises(psycopg.Error) as cm:
                        b.execute(f"UPDATE {self.table} SET by = 'b' WHERE id = 'r1'")
                    self.assertEqual(cm.exception.sqlstate, "SF002")
                self.assertEqual(self.db.execute(f"SELECT by, fence::text FROM {self.table}").fetchone(),
                                 ("a", str(tok)))
