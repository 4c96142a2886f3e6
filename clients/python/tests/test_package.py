"""The package builds offline (Debian's setuptools, no index) as
fencing_client 1.3.0, and the built wheel holds the whole library."""
import os
import shutil
import subprocess
import tempfile
import unittest
import zipfile

import fencing_client

from .common import PY, ROOT


class TestPackage(unittest.TestCase):
    def test_wheel_builds_offline(self):
        tmp = tempfile.mkdtemp()
        try:
            src = os.path.join(tmp, "src")
            shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
            p = subprocess.run([PY, "-c", "from setuptools import build_meta as b; "
                                f"print(b.build_wheel({os.path.join(tmp, 'dist')!r}))"],
                               cwd=src, capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr[-2000:])
            wheel = p.stdout.strip().splitlines()[-1]
            self.assertEqual(wheel, "fencing_client-1.3.0-py3-none-any.whl")
            with zipfile.ZipFile(os.path.join(tmp, "dist", wheel)) as z:
                names = set(z.namelist())
                meta = z.read("fencing_client-1.3.0.dist-info/METADATA").decode()
            for m in ("__init__", "errors", "fenced", "idempotency", "sources", "token"):
                self.assertIn(f"fencing_client/{m}.py", names)
            self.assertRegex(meta, r"Requires-Dist: psycopg ?\(?>=3\.1")
            self.assertIn("Requires-Python: >=3.11", meta)
            self.assertEqual(fencing_client.__version__, "1.3.0")
        finally:
            shutil.rmtree(tmp)
