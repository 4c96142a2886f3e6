"""Each token source against its real service: tokens grow with every
grant, and a holder frozen (SIGSTOP) past its lock's TTL, thawed after
another worker took the lock and wrote, is refused with StaleToken."""
import os
import time
import unittest

import psycopg

import fencing_client as fc

from .common import Worker, connect, make_rows_table, service, setup_db, unique, wait_for


def setUpModule():
    setup_db()
    with connect(autocommit=True) as c:
        fc.ensure_generation_table(c, "etcd", "zookeeper", "redis")


class PauseScenario:
    """A takes the lock and writes; A is frozen past the TTL; B takes the
    lock (waiting for the state: B's acquire succeeds only once A's grant
    is gone) and writes; A thawed writes and gets StaleToken."""

    source = ""
    ttl = 2.0

    def endpoint(self) -> str:
        return ""

    def lock_name(self) -> str:
        return unique("lock")

    def setUp(self):
        self.db = connect(autocommit=True)
        self.table = unique("rows")
        make_rows_table(self.db, self.table, ["r1"])
        self.name = self.lock_name()
        self.workers = []

    def tearDown(self):
        for w in self.workers:
            w.stop()
        self.db.close()

    def worker(self, who):
        w = Worker(who, "--source", self.source, "--name", self.name, "--table", self.table,
                   "--ttl", str(self.ttl), "--endpoint", self.endpoint())
        self.workers.append(w)
        return w

    def test_tokens_increase(self):
        a = self.worker("A")
        tokens = []
        for _ in range(3):
            t = a.cmd("acquire 30")["token"]
            self.assertIsNotNone(t)
            tokens.append(fc.Token.parse(t))
            self.assertTrue(a.cmd("write r1").get("ok"))
            # (False when a short TTL ran out first, on a busy machine)
            self.assertIn(a.cmd("release")["released"], (True, False))
        self.assertEqual(tokens, sorted(set(tokens)), f"tokens not strictly increasing: {tokens}")

    def test_pause_past_ttl_stale(self):
        a, b = self.worker("A"), self.worker("B")
        ta = fc.Token.parse(a.cmd("acquire 30")["token"])
        self.assertEqual(a.cmd("write r1"), {"ok": True})
        a.freeze()
        rb = b.cmd("acquire 60", timeout=90)
        self.assertIsNotNone(rb["token"], "B never got the lock while A was frozen")
        tb = fc.Token.parse(rb["token"])
        self.assertGreater(tb, ta)
        self.assertEqual(b.cmd("write r1"), {"ok": True})
        a.thaw()
        r = a.cmd("write r1")
        self.assertEqual(r.get("error"), "StaleToken", r)
        self.assertEqual(r.get("reason"), "stale_token", r)
        by = self.db.execute(f"SELECT by, fence::text FROM {self.table} WHERE id = 'r1'").fetchone()
        self.assertEqual(by, ("B", str(tb)))


class TestRedis(PauseScenario, unittest.TestCase):
    source = "redis"
    ttl = 0.5

    def endpoint(self):
        return service("FENCING_TEST_REDIS")

    def test_loser_gets_no_token(self):
        import redis
        host, port = self.endpoint().split(":")
        r = redis.Redis(host=host, port=int(port))
        a, b = self.worker("A"), self.worker("B")
        # a long lock: B must see it held
        src = fc.RedisLockSource(r, self.name, self.db, ttl_ms=60000)
        t = src.try_acquire()
        self.assertIsNotNone(t)
        before = int(r.get(src.counter_key))
        self.assertEqual(b.cmd("acquire")["token"], None)
        self.assertEqual(int(r.get(src.counter_key)), before, "the loser moved the counter")
        self.assertEqual(b.cmd("release")["released"], False)
        self.assertIsNotNone(r.get(src.lock_key), "the loser freed the holder's lock")
        self.assertTrue(src.release())
        self.assertIsNotNone(a.cmd("acquire")["token"])

    def test_release_only_own_lock(self):
        import redis
        host, port = self.endpoint().split(":")
        r = redis.Redis(host=host, port=int(port))
        old = fc.RedisLockSource(r, self.name, self.db, ttl_ms=300)
        self.assertIsNotNone(old.try_acquire())
        wait_for("the lock key to expire", lambda: r.pttl(old.lock_key) == -2)
        new = fc.RedisLockSource(r, self.name, self.db, ttl_ms=60000)
        self.assertGreater(new.try_acquire(), old.token)
        self.assertFalse(old.release(), "an expired holder deleted the next holder's lock")
        self.assertIsNotNone(r.get(new.lock_key))
        self.assertTrue(new.release())


class TestEtcd(PauseScenario, unittest.TestCase):
    source = "etcd"
    ttl = 2.0

    def endpoint(self):
        return service("FENCING_TEST_ETCD")


class TestZooKeeper(PauseScenario, unittest.TestCase):
    source = "zk"
    ttl = 2.0   # kazoo's session timeout, in seconds (the servers allow 1 to 10 s)

    def endpoint(self):
        return service("FENCING_TEST_ZK")

    def lock_name(self):
        return "/locks/" + unique("zk")


class TestLease(PauseScenario, unittest.TestCase):
    source = "lease"
    ttl = 0.5


class TestStatic(unittest.TestCase):
    def test_static_token(self):
        s = fc.StaticToken("3:42")
        self.assertEqual(s.acquire(), fc.Token(3, 42))
        self.assertEqual(str(s.acquire()), "3:42")
        self.assertTrue(s.release())
        with fc.StaticToken("7") as t:
            self.assertEqual(t, fc.Token(0, 7))

    def test_token_parse(self):
        self.assertEqual(fc.Token.parse(" 1:2 "), fc.Token(1, 2))
        self.assertLess(fc.Token(1, 99), fc.Token(2, 0))
        for bad in ("a:1", "1:", "-1:2", "1:2:3", "", "9223372036854775808:0"):
            with self.assertRaises(ValueError, msg=bad):
                fc.Token.parse(bad)


class TestGenerations(unittest.TestCase):
    def test_custom_table_and_raise(self):
        db = connect(autocommit=True)
        table = unique("gens")
        fc.ensure_generation_table(db, "svc", table=table)
        fc.ensure_generation_table(db, "svc", table=table)      # again: nothing changes
        self.assertEqual(fc.read_generation(db, "svc", table), 0)
        self.assertEqual(fc.raise_generation(db, "svc", table=table), 1)
        self.assertEqual(fc.read_generation(db, "svc", table), 1)
        with self.assertRaises(LookupError):
            fc.read_generation(db, "nope", table)
        db.close()

    def test_redis_generation_beats_lost_counter(self):
        """Redis lost its counter (FLUSHALL): the rightful holder is refused
        until the generation is raised, then writes; the generation is read
        when the lock is taken."""
        import redis
        host, port = service("FENCING_TEST_REDIS").split(":")
        r = redis.Redis(host=host, port=int(port))
        db = connect(autocommit=True)
        table, name, gens = unique("rows"), unique("lock"), unique("gens")
        make_rows_table(db, table, ["r1"])
        fc.ensure_generation_table(db, "redis", table=gens)

        def write(tok):
            fc.run_fenced(db, tok, lambda cur: cur.execute(
                f"UPDATE {table} SET n = n + 1 WHERE id = 'r1'"))

        for _ in range(3):
            s = fc.RedisLockSource(r, name, db, ttl_ms=10000, table=gens)
            write(s.acquire())
            s.release()
        old = s
        r.delete(old.counter_key)               # the counter is lost
        s = fc.RedisLockSource(r, name, db, ttl_ms=10000, table=gens)
        low = s.acquire()
        self.assertEqual(low, fc.Token(0, 1))
        with self.assertRaises(fc.StaleToken):
            write(low)
        s.release()
        fc.raise_generation(db, "redis", table=gens)
        s = fc.RedisLockSource(r, name, db, ttl_ms=10000, table=gens)
        tok = s.acquire()
        self.assertEqual(tok, fc.Token(1, 2))
        write(tok)
        s.release()
        db.close()
