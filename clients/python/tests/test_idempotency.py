"""run_once / run_once_steps over fencing.idem_*: a new key runs once and
records its result with the business write; a done key replays; a running
key is KeyInProgress; a key reused for another request is KeyReused; a
claim taken over is ClaimTakenOver."""
from __future__ import annotations

import threading
import unittest
from typing import Any

import pytest

import fencing_client as fc

from .conftest import connect, unique, wait_for


class TestRunOnce(unittest.TestCase):
    db: Any

    def setUp(self) -> None:
        self.db = connect(autocommit=True)
        self.table = unique("orders")
        self.db.execute(f"CREATE TABLE {self.table} (id text PRIMARY KEY, qty int)")

    def tearDown(self) -> None:
        self.db.close()

    def count(self):
        return self.db.execute(f"SELECT count(*) FROM {self.table}").fetchone()[0]

    def test_runs_once_then_replays(self):
        key, calls = unique("order"), []

        def place(cur, claim):
            calls.append(claim.state)
            cur.execute(f"INSERT INTO {self.table} VALUES (%s, 2)", (key,))
            return {"order": key, "token": str(claim.token)}

        r1 = fc.run_once(self.db, key, {"qty": 2}, place)
        r2 = fc.run_once(self.db, key, {"qty": 2}, place)
        self.assertEqual(r1, r2)
        self.assertEqual(calls, ["started"])
        self.assertEqual(self.count(), 1)
        with pytest.raises(fc.KeyReused):
            fc.run_once(self.db, key, {"qty": 3}, place)

    def test_result_and_write_roll_back_together(self):
        key = unique("order")

        def fail(cur, claim):
            cur.execute(f"INSERT INTO {self.table} VALUES (%s, 1)", (key,))
            raise RuntimeError("crash after the write")

        with self.assertRaises(RuntimeError):
            fc.run_once(self.db, key, {}, fail)
        self.assertEqual(self.count(), 0)
        # nothing was recorded: the next call starts afresh and runs
        r = fc.run_once(self.db, key, {}, lambda cur, c: c.state)
        self.assertEqual(r, "started")

    def test_concurrent_same_key_in_progress(self):
        key = unique("order")
        inside, release = threading.Event(), threading.Event()

        def slow(cur, claim):
            inside.set()
            release.wait(30)
            return "first"

        out = {}

        def first():
            with connect(autocommit=True) as c:
                out["r"] = fc.run_once(c, key, {}, slow)

        t = threading.Thread(target=first)
        t.start()
        try:
            self.assertTrue(inside.wait(30))
            with pytest.raises(fc.KeyInProgress):
                fc.run_once(self.db, key, {}, lambda cur, c: "second", wait=False)
        finally:
            release.set()
            t.join(30)
        self.assertEqual(out["r"], "first")
        self.assertEqual(fc.run_once(self.db, key, {}, lambda cur, c: "third"), "first")

    def test_steps_in_progress_then_resumed_from_checkpoint(self):
        key = unique("refund")
        seen = {}

        def first(claim):
            claim.checkpoint("psp:re_1")
            # a second worker while our lease is live
            with pytest.raises(fc.KeyInProgress), connect(autocommit=True) as c2:
                fc.run_once_steps(c2, key, {}, lambda c: 0, lease=30)
            raise RuntimeError("worker gives up")   # abandons: the next resumes at once

        with self.assertRaises(RuntimeError):
            fc.run_once_steps(self.db, key, {}, first, lease=30)

        def second(claim):
            seen.update(state=claim.state, rp=claim.recovery_point)
            return claim.complete(lambda cur: cur.execute(
                f"INSERT INTO {self.table} VALUES (%s, 1)", (key,)) and None or {"psp": "re_1"})

        self.assertEqual(fc.run_once_steps(self.db, key, {}, second, lease=30), {"psp": "re_1"})
        self.assertEqual(seen, {"state": "resumed", "rp": "psp:re_1"})
        self.assertEqual(fc.run_once_steps(self.db, key, {}, second, lease=30), {"psp": "re_1"})
        self.assertEqual(self.count(), 1)

    def test_claim_taken_over(self):
        key = unique("refund")
        other = connect(autocommit=True)
        results = {}

        def first(claim):
            claim.checkpoint("psp:re_9")
            # paused past the claim's lease (the server's clock says so) ...
            wait_for("the claim's lease to run out", lambda: self.db.execute(
                "SELECT locked_until < clock_timestamp() FROM fencing.idempotency_keys "
                "WHERE key = %s", (key,)).fetchone()[0], timeout=30)
            # ... while another worker resumed and completed the request
            results["other"] = fc.run_once_steps(
                other, key, {}, lambda c: c.complete(lambda cur: {"by": "other", "state": c.state}),
                lease=30)
            # the paused one now records its booking and result: refused, rolled back
            return claim.complete(lambda cur: cur.execute(
                f"INSERT INTO {self.table} VALUES (%s, 1)", (key,)) and None or {"by": "first"})

        with pytest.raises(fc.ClaimTakenOver) as cm:
            fc.run_once_steps(self.db, key, {}, first, lease=0.3)
        self.assertEqual(cm.value.reason, "claim_taken_over")
        self.assertIsInstance(cm.value, fc.FencedOut)
        self.assertEqual(results["other"], {"by": "other", "state": "resumed"})
        self.assertEqual(self.count(), 0, "the taken-over claim's booking was committed")
        self.assertEqual(fc.run_once_steps(self.db, key, {}, lambda c: 0, lease=30),
                         {"by": "other", "state": "resumed"})
        other.close()

    def test_fence_with_claim_token(self):
        key = unique("acct")
        t = unique("ledger")
        self.db.execute(f"CREATE TABLE {t} (id bigserial PRIMARY KEY, acct text NOT NULL, "
                        "amount int, fence fencing.fence)")
        self.db.execute(f"SELECT fencing.protect('{t}', key_columns => '{{acct}}')")

        def book(cur, claim):
            cur.execute(f"INSERT INTO {t} (acct, amount) VALUES (%s, -5)", (key,))
            return str(claim.token)

        tok = fc.run_once(self.db, key, {}, book, fence=True)
        self.assertEqual(self.db.execute(f"SELECT fence::text FROM {t}").fetchone()[0], tok)
