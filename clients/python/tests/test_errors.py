"""One exception tree: every SQLSTATE of the extension typed (SF001 by its
reason), each also the psycopg error class it came from."""
from __future__ import annotations

import pickle
from typing import Any

import psycopg
import pytest

import fencing_client as fc

from .conftest import make_ledger, make_rows


def raised(db: psycopg.Connection[Any], sqlstate: str, reason: str = "") -> BaseException:
    """The error the library makes of a server error with this SQLSTATE
    (and constraint-name field)."""
    cons = f", CONSTRAINT = '{reason}'" if reason else ""
    try:
        db.execute(f"DO $$BEGIN RAISE EXCEPTION 'test %', 1 USING ERRCODE = '{sqlstate}'"
                   f"{cons}, DETAIL = 'the detail', HINT = 'the hint'; END$$")
    except psycopg.Error as e:
        return fc.translate(e)
    raise AssertionError("no error")


@pytest.mark.parametrize("sqlstate,reason,cls", [
    ("SF001", "stale_token", fc.StaleToken),
    ("SF001", "token_already_used", fc.TokenAlreadyUsed),
    ("SF001", "lease_expired", fc.LeaseExpired),
    ("SF001", "claim_taken_over", fc.ClaimTakenOver),
    ("SF001", "", fc.StaleToken),               # a server older than 1.3: no reason
    ("SF001", "a_reason_of_later", fc.FencedOut),
    ("SF002", "", fc.TokenRequired),
    ("SF003", "", fc.KeyReused),
    ("SF004", "", fc.KeyInProgress),
    ("SF005", "", fc.GuardAltered),
])
def test_every_sqlstate_typed(db: Any, sqlstate: str, reason: str, cls: type) -> None:
    e = raised(db, sqlstate, reason)
    assert type(e) is cls
    assert isinstance(e, fc.FencingError)
    # the driver's own class: psycopg raises DatabaseError for the SF codes
    assert isinstance(e, psycopg.DatabaseError) and isinstance(e, psycopg.Error)
    assert e.sqlstate == sqlstate and e.diag.sqlstate == sqlstate
    assert isinstance(e, fc.DatabaseFencingError)
    assert (e.detail, e.hint) == ("the detail", "the hint")
    assert isinstance(e.__cause__, psycopg.DatabaseError) and e.pgerror is e.__cause__
    assert str(e).startswith("test 1")
    if sqlstate == "SF001":
        assert isinstance(e, fc.FencedOut)
        assert e.reason == (reason or "stale_token")
    # picklable, as psycopg's errors are
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and back.sqlstate == sqlstate and back.diag.message_hint == "the hint"


def test_other_errors_untouched(db: Any) -> None:
    e = raised(db, "22012")
    assert type(e) is psycopg.errors.DivisionByZero
    assert fc.classify(e) is None  # type: ignore[arg-type]


def test_client_errors_in_the_tree() -> None:
    for cls in (fc.NotAcquired, fc.LockLost):
        assert issubclass(cls, fc.FencingError) and not issubclass(cls, psycopg.Error)


def test_handlers_written_for_psycopg_still_catch(db: Any) -> None:
    """An SF001 raised by the guard, through a fenced transaction: caught
    by ``except psycopg.DatabaseError`` and by ``except fc.StaleToken``,
    with the table from the error's fields."""
    t = make_rows(db, ["r1"])
    fc.run_fenced(db, "5:5", lambda cur: cur.execute(f"UPDATE {t} SET n = 1"))
    with pytest.raises(psycopg.DatabaseError) as ei:
        fc.run_fenced(db, "5:4", lambda cur: cur.execute(f"UPDATE {t} SET n = 2"))
    e = ei.value
    assert isinstance(e, fc.StaleToken) and e.table == t and e.reason == "stale_token"
    assert e.diag.constraint_name == "stale_token"
    led = make_ledger(db)
    with pytest.raises(fc.TokenRequired):
        with db.transaction():
            try:
                db.execute(f"INSERT INTO {led} (acct, amount) VALUES ('a', 1)")
            except psycopg.Error as err:
                raise fc.translate(err) from err
