"""Whole conversations through examples/agent_loop.py against the provider
stand-in: 50 turns per provider shape, with discoveries, toggles between
turns and mid-turn, registry pushes between turns and mid-turn, a channel
policy that asks, a preset that leaves out tools the history references
(the rendering keeps them defined, call-check refuses them), a kill -9 of
the backend and one of the engine, each followed by a resume.

Asserted on every request: the stand-in never answers 400 (every tool_use,
tool_reference and function call names a tool the request defines, calls
and results pair up, deferred tools are marked as the provider requires),
and its cache verdict for the tools prefix (computed from the request by
the provider's documented rule) equals the engine's prefix_hash verdict
(a prefix hash seen before within the cache lifetime is a cached prefix).
The cached share of every request is printed.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
from typing import Callable, Optional

from tool_engine import Client, RetryPolicy, commands

from .engine import REPO, Engine
from .provider_standin import ProviderStandin

LOOP = os.path.join(REPO, "examples", "agent_loop.py")
TURNS = 50


def registry(version: str, changes: Optional[Callable[[dict], None]] = None) -> dict:
    """The default registry plus a GitHub namespace of deferred tools and a
    channel policy that asks before send_message on the web channel."""
    with open(os.path.join(REPO, "resolver", "default_registry.json"), encoding="utf-8") as f:
        doc = json.load(f)
    doc["version"] = version
    doc["tools"] += [
        {"name": "mcp__github__create_issue", "description": "Creates an issue in a GitHub repository.",
         "permission": "network", "parameters": {"type": "object", "properties": {
             "repo": {"type": "string"}, "title": {"type": "string"}}, "required": ["repo", "title"]}},
        {"name": "mcp__github__list_issues", "description": "Lists the open issues of a GitHub repository.",
         "permission": "network", "parameters": {"type": "object", "properties": {
             "repo": {"type": "string"}}, "required": ["repo"]}},
    ]
    doc["namespaces"] = {"github": {"description": "GitHub issues and pull requests.", "defer": True}}
    doc["default_tools"] += ["mcp__github__create_issue", "mcp__github__list_issues"]
    doc["channel_policy"] = {"version": "pol-1", "decisions": [
        {"tool": "*", "decision": "allow"}, {"channel": "web", "tool": "send_message", "decision": "ask"}]}
    if changes:
        changes(doc)
    return doc


def describe(tool: str, suffix: str) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        for t in doc["tools"]:
            if t["name"] == tool:
                t["description"] += suffix
    return change


class Turn:
    """One user message: its script, what the test does before it, and
    what it does while the k-th provider request of the turn is in flight."""

    def __init__(self, script: str, before: tuple = (), during: Optional[dict] = None):
        self.script, self.before, self.during = script, before, during or {}


class Backend:
    """examples/agent_loop.py as a child process: one JSON event a line."""

    def __init__(self, args: list[str]):
        self.args = args
        self.events: "queue.Queue" = queue.Queue()
        self.log: list[dict] = []
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "clients", "python"))
        self.proc = subprocess.Popen([sys.executable, LOOP, *self.args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env)
        self.starts += 1
        proc = self.proc

        def read() -> None:
            for line in proc.stdout:
                self.events.put(json.loads(line))
            proc.wait()
            stderr = proc.stderr.read()
            for f in (proc.stdout, proc.stderr, proc.stdin):
                try:
                    f.close()
                except OSError:
                    pass  # stdin of a killed process
            self.events.put({"event": "exited", "code": proc.returncode, "stderr": stderr})

        threading.Thread(target=read, daemon=True).start()

    def send(self, text: str) -> None:
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        """kill -9: no handler runs, nothing is flushed."""
        self.proc.send_signal(signal.SIGKILL)

    def until(self, kind: str, wait: float = 120.0) -> dict:
        """The next event of ``kind``; a process killed meanwhile is started
        again (it resumes the interrupted message by itself)."""
        while True:
            ev = self.events.get(timeout=wait)
            self.log.append(ev)
            if ev["event"] == kind:
                return ev
            if ev["event"] == "exited":
                if ev["code"] != -signal.SIGKILL:
                    raise AssertionError(f"agent loop exited with {ev['code']}:\n{ev['stderr'][-3000:]}")
                self.start()

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class AgentLoopEndToEnd(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="agent-loop-e2e-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.files = {}
        for version, change in (("e2e-1", None), ("e2e-2", describe("grep", " Matches are listed by file.")),
                                ("e2e-3", describe("read_file", " Binary files are refused."))):
            path = os.path.join(cls.dir, f"{version}.json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(registry(version, change), f)
            cls.files[version] = path
        cls.engine = Engine(registry=cls.files["e2e-1"], registry_kv=True)
        cls.addClassCleanup(cls.engine.cleanup)
        cls.engine.start()
        cls.standin = ProviderStandin()
        cls.addClassCleanup(cls.standin.close)

    def scenario(self, settings: Client, session: str, backend: Backend) -> list[Turn]:
        """The 50 turns: each kind of step several times."""
        eng = self.engine

        def app(*cmds):
            return lambda: settings.append(session, list(cmds))

        def push(version):
            return lambda: eng.cli("registry", "push", self.files[version])

        def kill_engine():
            eng.kill()
            restart = threading.Timer(0.5, eng.start)  # the backend's calls meet a dead engine first
            self.restarts.append(restart)
            restart.start()

        chat = "[script: say=hello]"
        browse = "[script: search=browser screenshot; call=playwright_browser; say=found it]"
        github = "[script: load=mcp__github__create_issue; call=mcp__github__create_issue; say=filed]"
        files = "[script: call=read_file; call=grep; say=read]"
        ask = "[script: load=send_message; call=send_message; say=sent]"
        twice = "[script: call=bash; call=bash; say=ran]"
        plan = "[script: search=plan mode; call=enter_plan_mode; say=planning]"
        turns = {
            1: Turn(chat), 2: Turn(files), 3: Turn(browse), 4: Turn(github),
            5: Turn(ask),
            6: Turn(twice, during={2: lambda _: app(commands.disable_tool("bash"))()}),  # hits a disabled tool
            7: Turn(files, before=(app(commands.enable_tool("bash")),)),
            8: Turn(chat, before=(app(commands.web_search(True)),)),
            9: Turn(plan),
            10: Turn(files, during={1: lambda _: app(commands.disable_tool("glob"))()}),  # mid-turn, not called
            12: Turn(chat, before=(app(commands.web_search(False), commands.enable_tool("glob")),)),
            14: Turn(ask),
            15: Turn(chat, before=(app(commands.disable_tool("notebook_edit")),)),
            18: Turn(files, before=(app(commands.enable_tool("notebook_edit")),)),
            20: Turn(browse, during={2: lambda _: backend.kill()}),  # kill -9 of the backend
            22: Turn(github),
            25: Turn(files, before=(push("e2e-2"),)),  # a registry push between turns
            27: Turn(twice, during={2: lambda _: app(commands.disable_tool("bash"))()}),
            28: Turn(chat, before=(app(commands.enable_tool("bash")),)),
            30: Turn(plan),
            33: Turn(ask),
            35: Turn(files, during={2: lambda _: kill_engine()}),  # kill -9 of the engine
            38: Turn(browse),
            40: Turn(files, during={1: lambda _: push("e2e-3")()}),  # a push mid-turn: the turn stays frozen
            42: Turn(github),
            45: Turn(chat, before=(app(commands.preset("coding")),)),
            46: Turn("[script: call=read_file; call=send_message; say=ok]"),  # loaded before, left out by the preset
            47: Turn(chat, before=(app(commands.preset(None)),)),
            49: Turn(browse),
        }
        fill = [chat, files, browse, github]
        return [turns.get(i) or Turn(fill[i % len(fill)]) for i in range(1, TURNS + 1)]

    def run_shape(self, shape: str) -> None:
        session = f"e2e-{shape}"
        state = os.path.join(self.dir, f"{session}.json")
        backend = Backend(["--shape", shape, "--session", session, "--state", state, "--engine", self.engine.url,
                           "--provider", self.standin.url, "--channel", "web", "--actor", "alice",
                           "--approve", "once"])
        settings = Client(self.engine.url, channel="settings", actor="alice",
                          retry=RetryPolicy(max_attempts=1000, deadline=120))
        self.addCleanup(settings.close)
        self.addCleanup(backend.close)
        self.restarts: list[threading.Timer] = []
        self.addCleanup(self.join_restarts)
        settings.append(session, [commands.enable()])
        backend.start()
        backend.until("ready")
        for i, turn in enumerate(self.scenario(settings, session, backend), 1):
            for action in turn.before:
                action()
            done = sum(1 for r in self.standin.records if r.conversation == session)
            for k, fn in turn.during.items():
                self.standin.hooks[(session, done + k)] = fn
            backend.send(f"turn {i}: {turn.script}")
            backend.until("turn_done")
        self.check(shape, session, backend)

    def join_restarts(self) -> None:
        """Waits for the engine restarts the scenario set off, so that none
        starts an engine after the test is over."""
        for timer in self.restarts:
            timer.join()

    def check(self, shape: str, session: str, backend: Backend) -> None:
        records = [r for r in self.standin.records if r.conversation == session]
        turn_of = {e["response"]: e["turn"] for e in backend.log if e["event"] == "provider_request"}
        print(f"\n{shape}: {len(records)} provider requests over {TURNS} turns "
              f"(request, engine turn, status, cached share, tools prefix cached by the provider's rule / by the engine's "
              "prefix_hash, the model's step)")
        for r in records:
            print(f"  {shape} #{r.n:3d} turn {turn_of.get(r.response_id, '?'):>3} {r.status} "
                  f"cached {r.cached_share:6.1%} of {r.total_tokens:6d} tokens  tools {'hit ' if r.tools_cached else 'miss'}"
                  f" / {'hit ' if r.engine_cached else 'miss'}  {r.action or r.error}")
        refused = [r for r in records if r.status != 200]
        self.assertEqual(refused, [], "the stand-in refused requests:\n" + "\n".join(r.error for r in refused))
        differ = [r for r in records if r.tools_cached != r.engine_cached]
        shares = [r.cached_share for r in records]
        print(f"{shape}: 400s {len(refused)}, verdicts equal {len(records) - len(differ)}/{len(records)}, "
              f"cached share mean {sum(shares) / len(shares):.1%}, min {min(shares):.1%}, max {max(shares):.1%}")
        self.assertEqual([(r.n, r.tools_cached, r.engine_cached, r.action) for r in differ], [],
                         "the stand-in's cache verdict differs from the engine's prefix_hash")
        # The scenario did what it says.
        ev = backend.log
        self.assertEqual(sum(1 for e in ev if e["event"] == "turn_done"), TURNS)
        found = [e for e in ev if e["event"] == "discovered"]
        self.assertGreaterEqual(len(found), 10)
        self.assertLessEqual({"playwright_browser", "send_message", "mcp__github__create_issue"},
                             {n for e in found for n in e["loaded"]})
        self.assertTrue(any(e["event"] == "tool" and e["reason"] == "disabled" and not e["ran"] for e in ev))
        self.assertTrue(any(e["event"] == "tool" and e["name"] == "send_message" and e["reason"] == "not_in_turn"
                            and not e["ran"] for e in ev))
        self.assertTrue(any(e["event"] == "tool" and e["asked"] == "once" and e["ran"] for e in ev))
        resumed = [e for e in ev if e["event"] == "resumed"]
        print(f"{shape}: backend started {backend.starts} times, engine {self.engine.starts}; resumed: {resumed}")
        self.assertTrue(resumed, "the killed backend did not resume")
        self.assertGreaterEqual(backend.starts, 2)
        versions = {e["registry"] for e in ev if e["event"] == "turn_begun"}
        self.assertLessEqual({"e2e-2", "e2e-3"}, versions)
        self.assertTrue(any(r.tools_cached for r in records))

    def test_anthropic_messages(self):
        self.run_shape("anthropic")

    def test_openai_responses(self):
        self.run_shape("openai")

    def test_restart_answers_calls_a_kill_left_without_results(self):
        # A backend killed after the model's call was saved and before its
        # result was: the restarted loop answers the call as interrupted
        # (never runs it twice) and finishes the message in a new turn.
        script = "[script: search=browser screenshot; call=read_file; say=ok]"
        cases = {
            "anthropic": ([{"role": "user", "content": [{"type": "text", "text": script}]},
                           {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_k1", "name": "tool_search",
                                                              "input": {"query": "browser screenshot"}}]}],
                          lambda h: h[2]["content"][0]),
            "openai": ([{"role": "user", "content": script},
                        {"type": "tool_search_call", "call_id": "call_k1", "execution": "client",
                         "arguments": {"query": "browser screenshot"}}],
                       lambda h: h[2]),
        }
        for shape, (history, answer_of) in cases.items():
            with self.subTest(shape=shape):
                session = f"e2e-restart-{shape}"
                state = os.path.join(self.dir, f"{session}.json")
                with open(state, "w", encoding="utf-8") as f:
                    json.dump({"session": session, "shape": shape, "history": history, "pending": script, "turns": 0}, f)
                with Client(self.engine.url, channel="web") as c:
                    c.append(session, [commands.enable()])
                    c.turn_begin(session, provider=shape)  # the turn the killed backend had open
                env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "clients", "python"))
                res = subprocess.run([sys.executable, LOOP, "--shape", shape, "--session", session, "--state", state,
                                      "--engine", self.engine.url, "--provider", self.standin.url],
                                     input="", capture_output=True, text=True, env=env, timeout=120)
                self.assertEqual(res.returncode, 0, res.stderr)
                events = [json.loads(line) for line in res.stdout.splitlines()]
                self.assertEqual([e["event"] for e in events][:2], ["resumed", "turn_begun"])
                self.assertTrue(any(e["event"] == "turn_done" and not e["recovered"] for e in events))
                records = [r for r in self.standin.records if r.conversation == session]
                self.assertEqual([r.status for r in records], [200, 200], [r.error for r in records])
                self.assertEqual([r.action for r in records], ["call read_file", "answer"])
                with open(state, encoding="utf-8") as f:
                    saved = json.load(f)
                self.assertIsNone(saved["pending"])
                answer = answer_of(saved["history"])
                if shape == "anthropic":
                    self.assertEqual((answer["tool_use_id"], answer.get("is_error")), ("toolu_k1", True))
                    self.assertIn("interrupted", answer["content"][0]["text"])
                else:
                    self.assertEqual((answer["type"], answer["call_id"], answer["tools"]), ("tool_search_output", "call_k1", []))


if __name__ == "__main__":
    unittest.main()
