"""Every operation of the client against a real engine: typed replies,
typed errors, idempotency keys and read-your-writes."""

from __future__ import annotations

import time
import unittest
import uuid

from tool_engine import (Client, ConflictError, DeletedError, ForbiddenError, IdempotencyKeyInUseError,
                         IdempotencyKeyMismatchError, Intent, InvalidError, NoTurnError, Override, commands,
                         idempotency)
from tool_engine import replies as rp

from .engine import shared_engine


def sid(prefix: str = "py") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def poll(cond, wait: float = 30.0, step: float = 0.05) -> bool:
    """Calls cond until it returns true or ``wait`` seconds pass; its last result."""
    end = time.monotonic() + wait
    while True:
        if cond():
            return True
        if time.monotonic() > end:
            return False
        time.sleep(step)


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.engine = shared_engine()
        cls.client = Client(cls.engine.url, channel="web", actor="alice")

    @classmethod
    def tearDownClass(cls):
        cls.client.close()

    def test_append_intent_read_your_writes(self):
        s = sid()
        wrote = self.client.append(s, [commands.enable(), commands.disable_tool("bash"), commands.web_search(True)])
        self.assertIsInstance(wrote, rp.AppendReply)
        self.assertEqual(wrote.session, s)
        self.assertEqual(len(wrote.event_ids), 3)
        self.assertGreater(wrote.last_seq, 0)
        self.assertEqual(wrote.last_seq - wrote.first_seq >= 2, True)
        # The client passes the write's sequence as min_seq by itself.
        state = self.client.intent(s)
        self.assertIsInstance(state, rp.Session)
        self.assertGreaterEqual(state.seq, wrote.last_seq)
        self.assertEqual(state.intent, Intent(enabled=True, web_search=True, disabled=["bash"]))
        # A fresh client without the bookkeeping reads with an explicit min_seq.
        with Client(self.engine.url, read_your_writes=False) as other:
            self.assertEqual(other.intent(s, min_seq=wrote.last_seq).intent.disabled, ["bash"])

    def test_idempotency_key_retry_and_mismatch(self):
        s = sid()
        key = idempotency.new_key()
        first = self.client.append(s, [commands.enable()], event_id=key)
        self.assertFalse(first.duplicate)
        self.assertEqual(first.event_ids, idempotency.event_ids(s, key, 1))
        again = self.client.append(s, [commands.enable()], event_id=key)
        self.assertTrue(again.duplicate)
        self.assertEqual((again.first_seq, again.last_seq, again.event_ids), (first.first_seq, first.last_seq, first.event_ids))
        with self.assertRaises(IdempotencyKeyMismatchError) as cm:
            self.client.append(s, [commands.disable()], event_id=key)
        self.assertEqual(cm.exception.status, 422)
        with self.assertRaises(IdempotencyKeyInUseError):
            self.client.append(sid(), [commands.enable()], event_id=key)
        with self.assertRaises(ValueError):
            self.client.append(s, [commands.enable()], event_id="x" * 256)

    def test_conflict_carries_sequences(self):
        s = sid()
        wrote = self.client.append(s, [commands.enable()], expected_seq=0)
        with self.assertRaises(ConflictError) as cm:
            self.client.append(s, [commands.disable_tool("grep")], expected_seq=0)
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.expected, 0)
        self.assertEqual(cm.exception.actual, wrote.last_seq)

    def test_resolve_providers_and_override(self):
        s = sid()
        self.client.append(s, [commands.enable()])
        for provider in ("anthropic", "openai", "anthropic-engine", "openai-engine"):
            view = self.client.resolve(s, provider=provider)
            self.assertIsInstance(view, rp.TurnView)
            self.assertEqual(view.rendered_for, provider)
            self.assertIsInstance(view.rendering, list)
            self.assertEqual(len(view.prefix_hash), 64)
            self.assertTrue(all(isinstance(c, rp.Classification) for c in view.classification))
        names = self.client.resolve(s, override=Override.of_names(["read_file", "grep"]))
        self.assertEqual(names.tools, ["read_file", "grep"])
        self.assertEqual(self.client.resolve(s, override=Override.empty()).tools, [])
        with self.assertRaises(InvalidError) as cm:
            self.client.resolve(s, provider="no-such-provider")
        self.assertIn("no-such-provider", str(cm.exception))

    def test_history_explain(self):
        s = sid()
        self.client.append(s, [commands.enable()])
        wrote = self.client.append(s, [commands.disable_tool("bash")])
        page = self.client.history(s, limit=1)
        self.assertTrue(page.more)
        self.assertEqual(len(page.entries), 1)
        whole = self.client.history_all(s)
        self.assertEqual([e.type for e in whole.entries], ["ToolsToggled", "ToolDisabled"])
        self.assertEqual(whole.entries[1].payload, {"type": "ToolDisabled", "name": "bash"})
        self.assertIn("bash", whole.entries[1].lost)
        ex = self.client.explain(s, "bash")
        self.assertFalse(ex.included)
        self.assertEqual(ex.event.seq, wrote.last_seq)
        past = self.client.explain(s, "bash", until=str(wrote.first_seq - 1))
        self.assertTrue(past.included)
        batch = self.client.explain_batch(s, ["bash", "grep"])
        self.assertEqual([e.tool for e in batch.explanations], ["bash", "grep"])
        self.assertEqual([e.included for e in batch.explanations], [False, True])

    def test_turn_protocol(self):
        s = sid()
        self.client.append(s, [commands.enable()])
        with self.assertRaises(NoTurnError):
            self.client.turn_end(s)
        view = self.client.turn_begin(s, provider="anthropic")
        self.assertTrue(view.frozen)
        self.assertEqual(view.turn, 1)
        self.assertIn("playwright_browser", view.catalog)
        found = self.client.turn_discover(s, input={"query": "browser screenshot"})
        self.assertIsInstance(found, rp.DiscoverReply)
        self.assertEqual(found.loaded, ["playwright_browser"])
        self.assertEqual(found.output[0], {"type": "tool_reference", "tool_name": "playwright_browser"})
        self.assertTrue(all(isinstance(m, rp.Match) for m in found.matches))
        dispatched = self.client.turn_dispatch(s, provider="anthropic")
        self.assertEqual(dispatched.prefix_hash, view.prefix_hash)  # a native discovery changes no byte
        record = self.client.turn_inspect(s)
        self.assertEqual(record.turn, 1)
        self.assertIn("playwright_browser", record.loaded)
        check = self.client.turn_call_check(s, "playwright_browser")
        self.assertTrue(check.callable, check.note)
        self.assertEqual(check.tool.name, "playwright_browser")
        self.client.append(s, [commands.disable_tool("bash")])
        refused = self.client.turn_call_check(s, "bash")
        self.assertFalse(refused.callable)
        self.assertEqual(refused.reason, "disabled")
        cp = self.client.turn_checkpoint(s)
        self.assertEqual(cp.checkpoint.loaded_deferred_tools, ["playwright_browser"])
        ended = self.client.turn_end(s)
        self.assertEqual(ended.checkpoint.turn, 1)
        self.assertFalse(self.client.intent(s).in_turn)

    def test_resume_restores_checkpoint(self):
        s = sid()
        self.client.append(s, [commands.enable()])
        self.client.turn_begin(s)
        self.client.turn_discover(s, names=["send_message"])
        self.client.turn_end(s)
        self.client.turn_begin(s)  # a crash leaves this turn open
        out = self.client.resume(s)
        self.assertIsInstance(out, rp.ResumeReply)
        self.assertTrue(out.outcome.ok, out.outcome.reason)
        self.assertEqual(out.outcome.restored, ["send_message"])
        self.assertEqual([d.tool for d in out.outcome.tools], ["send_message"])
        self.assertFalse(self.client.intent(s).in_turn)

    def test_registry_budget_sessions_diff(self):
        s = sid()
        self.client.append(s, [commands.enable()])
        # The list is of views, which the projection writes after the append.
        listed = poll(lambda: s in self.client.sessions().sessions)
        self.assertTrue(listed, f"{s} never listed by sessions")
        reg = self.client.registry()
        self.assertIsInstance(reg, rp.RegistryInfo)
        self.assertIn("tool_search", reg.default_tools)
        self.assertTrue(any(t.deferred for t in reg.tools))
        self.assertIsInstance(reg.presets["minimal"], list)
        budget = self.client.budget()
        self.assertEqual(budget.registry_version, reg.version)
        self.assertGreater(budget.without_deferral.real, budget.with_deferral.real)
        impact = self.client.registry_diff({"version": "py-diff-1", "tools": [
            {"name": "read_file", "description": "Read a file.", "parameters": {"type": "object"}},
            {"name": "tool_search", "description": "Load deferred tools.", "parameters": {"type": "object"}}],
            "default_tools": ["read_file", "tool_search"]})
        self.assertIsInstance(impact, rp.RegistryImpact)
        self.assertEqual(impact.diff.from_, reg.version)
        self.assertEqual(impact.diff.to, "py-diff-1")
        self.assertIn("bash", impact.diff.removed)

    def test_compact_and_delete(self):
        s = sid()
        self.client.append(s, [commands.enable()])
        self.client.append(s, [commands.disable_tool("grep")])
        with self.assertRaises(ForbiddenError):
            self.client.session_compact(s)
        with Client(self.engine.url, channel="ops") as ops:
            out = ops.session_compact(s, reason="test")
            self.assertEqual(out.count, 2)
            self.assertEqual(ops.intent(s).intent.disabled, ["grep"])
        gone = self.client.session_delete(s, reason="test")
        self.assertGreater(gone.seq, 0)
        with self.assertRaises(DeletedError) as cm:
            self.client.intent(s)
        self.assertEqual(cm.exception.status, 410)


if __name__ == "__main__":
    unittest.main()
