"""`pip install ./clients/python` works with no package index: the build
backend needs the standard library only, and the wheel holds every module."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest

import tool_engine

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class InstallTest(unittest.TestCase):
    def test_pip_install_without_an_index(self):
        with tempfile.TemporaryDirectory() as target:
            res = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir",
                                  "--disable-pip-version-check", "--target", target, HERE],
                                 capture_output=True, text=True, timeout=300)
            self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
            modules = sorted(f for f in os.listdir(os.path.join(target, "tool_engine")) if f.endswith(".py"))
            source = sorted(f for f in os.listdir(os.path.dirname(tool_engine.__file__)) if f.endswith(".py"))
            self.assertEqual(modules, source)
            self.assertTrue(os.path.exists(os.path.join(target, "tool_engine", "py.typed")))
            probe = subprocess.run([sys.executable, "-c", "import tool_engine; print(tool_engine.__version__, tool_engine.__file__)"],
                                   cwd=target, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": target})
            self.assertEqual(probe.returncode, 0, probe.stderr)
            version, path = probe.stdout.split()
            self.assertEqual(version, tool_engine.__version__)
            self.assertTrue(path.startswith(target), path)


if __name__ == "__main__":
    unittest.main()
