"""The README's first example, examples/quickstart.py, run as written,
twice (it must be safe to run again)."""
from __future__ import annotations

import os
import subprocess

from .conftest import PY, ROOT


def test_readme_first_example_is_quickstart() -> None:
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    block = readme.split("```python\n", 1)[1].split("```", 1)[0]
    with open(os.path.join(ROOT, "examples", "quickstart.py")) as f:
        assert block == f.read()


def test_quickstart_runs_twice() -> None:
    for _ in (1, 2):
        p = subprocess.run([PY, os.path.join(ROOT, "examples", "quickstart.py")],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0].startswith("posted 3 ledger entries under one lock, the last with token "), p.stdout
        assert lines[-1].startswith("the older token is refused: StaleToken: stale fence token"), p.stdout
