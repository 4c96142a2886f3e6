"""The package as pip installed it from the wheel the suite built (not the
source tree): its version, its typing marker, its dependencies."""
from __future__ import annotations

import importlib.metadata
import os

import pytest

import fencing_client

from .conftest import ROOT


@pytest.fixture
def installed() -> None:
    if os.environ.get("FENCING_TEST_INSTALLED") != "1":
        pytest.skip("FENCING_TEST_INSTALLED is not 1: testing a source tree, not the wheel")


def test_the_installed_wheel_is_tested(installed: None) -> None:
    where = os.path.dirname(os.path.abspath(fencing_client.__file__))
    assert "site-packages" in where.split(os.sep), where
    assert not where.startswith(os.path.abspath(ROOT) + os.sep)
    assert os.path.isfile(os.path.join(where, "py.typed"))
    dist = importlib.metadata.distribution("fencing-client")
    assert dist.version == fencing_client.__version__ == "1.4.0"
    requires = dist.requires or []
    assert any(r.replace(" ", "").startswith("psycopg>=3.2") for r in requires), requires
    assert dist.metadata["Requires-Python"] == ">=3.10"
    files = {str(f) for f in dist.files or []}
    for m in ("__init__", "errors", "fenced", "idempotency", "source", "lease_source",
              "redis_source", "etcd_source", "zookeeper_source", "generations", "token", "_db"):
        assert f"fencing_client/{m}.py" in files
    assert "fencing_client/py.typed" in files
