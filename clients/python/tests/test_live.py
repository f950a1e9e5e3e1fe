"""Following events live over SSE: order, resume by Last-Event-ID across a
kill -9 of the engine, and the end of a deleted session's stream."""

from __future__ import annotations

import queue
import threading
import unittest
import uuid

from tool_engine import Client, DeletedError, LiveStream, commands

from .engine import Engine, shared_engine


def follow(stream: LiveStream) -> "queue.Queue":
    """Reads the stream on a thread into a queue; None marks its end."""
    q: queue.Queue = queue.Queue()

    def run():
        try:
            for ev in stream:
                q.put(ev)
        except Exception as e:  # the test reads the failure from the queue
            q.put(e)
        q.put(None)

    threading.Thread(target=run, daemon=True).start()
    return q


def take(q: "queue.Queue", n: int, wait: float = 60.0) -> list:
    out = []
    for _ in range(n):
        item = q.get(timeout=wait)
        if isinstance(item, Exception):
            raise item
        if item is None:
            break
        out.append(item)
    return out


class LiveTest(unittest.TestCase):
    def test_session_events_in_order_and_resume_after(self):
        c = Client(shared_engine().url, channel="web")
        self.addCleanup(c.close)
        s = f"py-live-{uuid.uuid4().hex[:10]}"
        first = c.append(s, [commands.enable(), commands.disable_tool("bash")])
        stream = c.session_live(s)
        self.addCleanup(stream.close)
        q = follow(stream)
        got = take(q, 2)
        self.assertEqual([e.type for e in got], ["ToolsToggled", "ToolDisabled"])
        self.assertEqual([e.seq for e in got], [first.first_seq, first.last_seq])
        self.assertEqual(got[1].payload, {"type": "ToolDisabled", "name": "bash"})
        self.assertEqual(got[1].session, s)
        self.assertEqual(got[1].channel, "web")
        later = c.append(s, [commands.web_search(True)])
        (ev,) = take(q, 1)
        self.assertEqual((ev.seq, ev.type), (later.last_seq, "WebSearchSet"))
        # A new stream from after the first event starts with the second.
        again = c.session_live(s, after_seq=first.first_seq)
        self.addCleanup(again.close)
        self.assertEqual(next(again).seq, first.last_seq)

    def test_stream_ends_after_delete(self):
        c = Client(shared_engine().url, channel="web")
        self.addCleanup(c.close)
        s = f"py-live-{uuid.uuid4().hex[:10]}"
        c.append(s, [commands.enable()])
        stream = c.session_live(s)
        self.addCleanup(stream.close)
        q = follow(stream)
        take(q, 1)
        c.session_delete(s)
        rest = take(q, 5)
        self.assertEqual([e.type for e in rest], ["SessionDeleted"])
        self.assertTrue(stream.ended)
        # Following the deleted session again replays it to its deletion, then ends.
        replay = c.session_live(s, after_seq=0)
        self.addCleanup(replay.close)
        self.assertEqual([e.type for e in replay], ["ToolsToggled", "SessionDeleted"])
        with self.assertRaises(DeletedError):
            c.intent(s)

    def test_message_form_yields_the_same_events(self):
        # message=True: the engine sends every event untyped (what a
        # browser's EventSource needs); the stream yields the same events
        # and ends after the deletion as the typed form does.
        c = Client(shared_engine().url, channel="web")
        self.addCleanup(c.close)
        s = f"py-live-{uuid.uuid4().hex[:10]}"
        c.append(s, [commands.enable(), commands.disable_tool("bash")])
        c.session_delete(s)
        stream = c.session_live(s, message=True)
        self.addCleanup(stream.close)
        self.assertEqual([e.type for e in stream], ["ToolsToggled", "ToolDisabled", "SessionDeleted"])
        self.assertTrue(stream.ended)

    def test_resume_by_last_event_id_across_engine_kill(self):
        engine = Engine().start()
        self.addCleanup(engine.cleanup)
        c = Client(engine.url, channel="web")
        self.addCleanup(c.close)
        a, b = (f"py-live-{x}-{uuid.uuid4().hex[:8]}" for x in "ab")
        c.append(a, [commands.enable()])
        stream = c.events_live(reconnect_delay=0.1)
        self.addCleanup(stream.close)
        q = follow(stream)
        before = take(q, 1)
        engine.restart_after_kill()
        wrote = [c.append(a, [commands.disable_tool("grep")]), c.append(b, [commands.enable()]),
                 c.append(a, [commands.enable_tool("grep")])]
        after = take(q, 3)
        self.assertGreaterEqual(stream.reconnects, 1)
        self.assertEqual([e.seq for e in before + after], [before[0].seq] + [w.last_seq for w in wrote])
        self.assertEqual([e.session for e in after], [a, b, a])


if __name__ == "__main__":
    unittest.main()
