"""The README's programs: the first is examples/quickstart.py, and every
```python block runs as written, twice (each must be safe to run again),
against the suite's services (REDIS_URL, ETCD_HOST, ETCD_PORT, ZK_HOSTS)."""
from __future__ import annotations

import os
import re
import subprocess
import tempfile

import pytest

from .conftest import PY, ROOT, service


def blocks() -> list[str]:
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"^```python\n(.*?)^```$", f.read(), re.S | re.M)


def test_readme_first_example_is_quickstart() -> None:
    with open(os.path.join(ROOT, "examples", "quickstart.py")) as f:
        assert blocks()[0] == f.read()


def test_quickstart_runs_twice(c_edition: None) -> None:
    for _ in (1, 2):
        p = subprocess.run([PY, os.path.join(ROOT, "examples", "quickstart.py")],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0].startswith("posted 3 ledger entries under one lock, the last with token ")
        assert lines[-1].startswith("the older token is refused: StaleToken: stale fence token")


@pytest.mark.parametrize("n", range(1, len(blocks())))
def test_readme_program_runs_twice(n: int, c_edition: None) -> None:
    etcd_host, etcd_port = service("FENCING_TEST_ETCD").split(":")
    env = {**os.environ, "REDIS_URL": f"redis://{service('FENCING_TEST_REDIS')}/0",
           "ETCD_HOST": etcd_host, "ETCD_PORT": etcd_port, "ZK_HOSTS": service("FENCING_TEST_ZK")}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, f"readme_{n}.py")
        with open(path, "w") as f:
            f.write(blocks()[n])
        for _ in (1, 2):
            p = subprocess.run([PY, path], capture_output=True, text=True, timeout=120, env=env,
                               cwd=d)
            assert p.returncode == 0, f"README block {n}:\n{blocks()[n]}\n{p.stderr}"
            assert p.stdout.strip(), f"README block {n} printed nothing"
