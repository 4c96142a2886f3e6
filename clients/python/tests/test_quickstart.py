"""The README's first example, examples/quickstart.py, run as written."""
import os
import subprocess
import unittest

from .common import PY, ROOT, setup_db


class TestQuickstart(unittest.TestCase):
    def test_readme_first_example_is_quickstart(self):
        with open(os.path.join(ROOT, "README.md")) as f:
            readme = f.read()
        block = readme.split("```python\n", 1)[1].split("```", 1)[0]
        with open(os.path.join(ROOT, "examples", "quickstart.py")) as f:
            self.assertEqual(block, f.read())

    def test_quickstart_runs(self):
        for run in (1, 2):      # twice: it must be rerunnable as it is
            p = subprocess.run([PY, os.path.join(ROOT, "examples", "quickstart.py")],
                               capture_output=True, text=True, timeout=60,
                               env={**os.environ, "PYTHONPATH": ROOT})
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r"paid r-1 with token \d+:\d+\n")
            self.assertIn("older token refused: stale fence token", p.stdout)
