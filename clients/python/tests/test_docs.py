"""docs/python.md does what it says: every Python block runs, in order, in
one namespace, against a real engine (its asserts included), and every curl
command runs, in order, on a session of its own, and gets a 200. The
engine's address in the page is replaced by the test engine's. Blocks that
are not curl commands (pip install, the agent loop's command line) are run
by test_install and test_agent_loop_e2e instead."""

from __future__ import annotations

import os
import re
import subprocess
import unittest
import uuid

from tool_engine import LIVE_OPERATIONS, OPERATIONS

from .engine import REPO, Engine

PAGE = os.path.join(REPO, "docs", "python.md")
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)
DOC_URL = "http://127.0.0.1:7420"


def blocks(kind: str) -> list[str]:
    with open(PAGE, encoding="utf-8") as f:
        return [body for lang, body in BLOCK.findall(f.read()) if lang == kind]


def commands(block: str) -> list[str]:
    """The block's commands: lines joined after a backslash or inside quotes."""
    out, cur = [], ""
    for line in block.splitlines():
        cur += line + "\n"
        if cur.count("'") % 2 == 0 and not line.endswith("\\"):
            if cur.strip() and not cur.lstrip().startswith("#"):
                out.append(cur.strip())
            cur = ""
    return out


class DocsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # An engine of its own, with serve's defaults: the page describes `engine serve`.
        cls.engine = Engine().start()

    @classmethod
    def tearDownClass(cls):
        cls.engine.cleanup()

    def test_every_operation_is_shown_both_ways(self):
        with open(PAGE, encoding="utf-8") as f:
            headings = " ".join(line for line in f if line.startswith("### "))
        code = "\n".join(blocks("python"))
        curls = [c for b in blocks("sh") for c in commands(b) if c.startswith("curl ")]
        for op in OPERATIONS + LIVE_OPERATIONS:
            with self.subTest(op=op.name):
                self.assertIn(f"`{op.name}`", headings)
                self.assertIn(f".{op.method_name}(", code)
                route = re.compile(re.escape(DOC_URL + op.path).replace(r"\{session\}", "s1").replace(r"\{tool\}", r"[\w-]+")
                                   + r"(?:['?\s]|$)")
                def sends(c: str) -> bool:
                    return f"-X {op.method}" in c if op.method != "GET" else "-X " not in c
                self.assertTrue(any(route.search(c) and sends(c) for c in curls), f"no curl {op.method} {op.path}")

    def test_python_blocks_run(self):
        code = blocks("python")
        self.assertGreaterEqual(len(code), 20)
        ns: dict = {}
        for i, block in enumerate(code):
            with self.subTest(block=i, first_line=block.splitlines()[0]):
                exec(compile(block.replace(DOC_URL, self.engine.url), f"docs/python.md python block {i}", "exec"), ns)
        ns["engine"].close()

    def test_curl_commands_run(self):
        session = f"doc-curl-{uuid.uuid4().hex[:8]}"
        cmds = [c for b in blocks("sh") for c in commands(b) if c.startswith("curl ")]
        self.assertGreaterEqual(len(cmds), 20)
        for c in cmds:
            run = c.replace(DOC_URL, self.engine.url).replace("/sessions/s1", f"/sessions/{session}")
            run = run.replace("curl -s ", "curl -sf ").replace("curl -sN ", "curl -sfN ")
            with self.subTest(command=c[:100]):
                res = subprocess.run(["bash", "-c", run], capture_output=True, text=True, timeout=60)
                # A live stream runs until --max-time ends it (curl exit 28) after its events.
                want = 28 if "--max-time" in c else 0
                self.assertEqual(res.returncode, want, res.stdout[-500:] + res.stderr[-500:])
                if "/events/live" in c:
                    self.assertIn("\nid: ", "\n" + res.stdout)


if __name__ == "__main__":
    unittest.main()
