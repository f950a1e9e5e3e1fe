"""Retries, Retry-After, timeouts and lost replies.

A scripted HTTP server answers each request as the test says (an error
reply, a reply after a delay, a connection closed without a reply), so
that each case happens every time; the waits between retries are recorded,
not timed. The last test drops a real engine's reply to an append on the
way back and checks that the client's retry stored the commands once.
"""

from __future__ import annotations

import json
import socket
import threading
import unittest
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tool_engine import (BusyError, Client, ConflictError, OutcomeUnknownError, RetryPolicy, TransportError,
                         UnavailableError, commands)

from .engine import shared_engine

OK_REGISTRY = {"version": "stub-1", "tools": [], "default_tools": [], "resident_tools": [],
               "deferred_default_tools": [], "presets": {}, "profiles": []}


def envelope(code: str, message: str = "scripted", **extra) -> bytes:
    return json.dumps({"error": {"code": code, "message": message, **extra}}).encode()


class Stub:
    """An HTTP server that answers the n-th request with the n-th action:
    (status, body, headers), "drop" (close without a reply) or ("slow",
    seconds, status, body)."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.seen: list[tuple[str, str, bytes]] = []
        self.closed = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                stub.seen.append((self.command, self.path, body))
                action = stub.actions.pop(0) if stub.actions else (200, json.dumps(OK_REGISTRY).encode(), {})
                if action == "drop":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if action == "close-after":  # answer, then close the kept-alive connection
                    action = (200, json.dumps(OK_REGISTRY).encode(), {})
                    self.close_connection = True
                if action[0] == "slow":
                    _, seconds, status, data = action
                    threading.Event().wait(seconds)
                    action = (status, data, {})
                status, data, headers = action
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True  # the client gave up waiting (a timeout test)
                if self.close_connection:
                    try:
                        self.connection.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass  # the client closed it first
                    stub.closed.set()

            do_GET = do_POST = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def recording(client: Client) -> list[float]:
    waits: list[float] = []
    client._sleep = waits.append
    return waits


class RetryTest(unittest.TestCase):
    def stub(self, *actions) -> Stub:
        s = Stub(actions)
        self.addCleanup(s.close)
        return s

    def client(self, url: str, **kw) -> Client:
        c = Client(url, **kw)
        self.addCleanup(c.close)
        return c

    def test_busy_waits_retry_after(self):
        s = self.stub((429, envelope("busy"), {"Retry-After": "1"}))
        c = self.client(s.url)
        waits = recording(c)
        self.assertEqual(c.registry().version, "stub-1")
        self.assertEqual(waits, [1.0])
        self.assertEqual(len(s.seen), 2)

    def test_unavailable_backs_off_without_retry_after(self):
        s = self.stub((503, envelope("unavailable"), {}), (503, envelope("unavailable"), {}))
        c = self.client(s.url, retry=RetryPolicy(base_delay=0.1, max_delay=2.0))
        waits = recording(c)
        c.registry()
        self.assertEqual(waits, [0.1, 0.2])

    def test_retry_after_past_deadline_raises_at_once(self):
        s = self.stub((503, envelope("unavailable"), {"Retry-After": "30"}))
        c = self.client(s.url, retry=RetryPolicy(deadline=5))
        waits = recording(c)
        with self.assertRaises(UnavailableError) as cm:
            c.registry()
        self.assertEqual(cm.exception.retry_after, 30.0)
        self.assertEqual(waits, [])

    def test_attempts_bounded(self):
        s = self.stub(*[(429, envelope("busy"), {"Retry-After": "0"})] * 5)
        c = self.client(s.url, retry=RetryPolicy(max_attempts=3))
        recording(c)
        with self.assertRaises(BusyError):
            c.registry()
        self.assertEqual(len(s.seen), 3)

    def test_refusals_are_not_retried(self):
        s = self.stub((409, envelope("conflict", expected=1, actual=2), {}))
        c = self.client(s.url)
        waits = recording(c)
        with self.assertRaises(ConflictError) as cm:
            c.append("s1", [commands.enable()], expected_seq=1)
        self.assertEqual((cm.exception.expected, cm.exception.actual), (1, 2))
        self.assertEqual((waits, len(s.seen)), ([], 1))

    def test_not_an_envelope_takes_the_status_code(self):
        s = self.stub((502, b"<html>bad gateway</html>", {}), (502, b"<html>bad gateway</html>", {}))
        c = self.client(s.url, retry=RetryPolicy(max_attempts=2))
        recording(c)
        with self.assertRaises(UnavailableError) as cm:
            c.registry()
        self.assertIn("bad gateway", cm.exception.message)

    def test_connection_refused_is_retried(self):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()  # nothing listens there now
        c = self.client(f"http://127.0.0.1:{port}", retry=RetryPolicy(max_attempts=3, base_delay=0.01))
        waits = recording(c)
        with self.assertRaises(TransportError) as cm:
            c.turn_begin("s1")  # a write: nothing was sent, so retrying is safe
        self.assertFalse(cm.exception.sent)
        self.assertEqual(waits, [0.01, 0.02])

    def test_lost_reply_of_a_read_is_retried(self):
        s = self.stub("drop")
        c = self.client(s.url)
        recording(c)
        self.assertEqual(c.registry().version, "stub-1")
        self.assertEqual(len(s.seen), 2)

    def test_lost_reply_of_a_write_is_outcome_unknown(self):
        s = self.stub("drop")
        c = self.client(s.url)
        waits = recording(c)
        with self.assertRaises(OutcomeUnknownError) as cm:
            c.turn_begin("s1")
        self.assertIn("read the session", str(cm.exception))
        self.assertEqual((waits, len(s.seen)), ([], 1))

    def test_write_after_the_engine_closed_the_connection_reconnects(self):
        # The engine closed the kept-alive connection (an idle timeout, or a
        # restart): the write goes out on a new one, not into the closed one.
        s = self.stub("close-after", (200, b'{"session":"s1","turn":1}', {}))
        c = self.client(s.url)
        waits = recording(c)
        c.registry()
        self.assertTrue(s.closed.wait(10))
        self.assertEqual(c.turn_begin("s1").turn, 1)
        self.assertEqual((waits, len(s.seen)), ([], 2))

    def test_timeout_of_a_write_is_outcome_unknown_of_a_read_retried(self):
        s = self.stub(("slow", 0.6, 200, b"{}"), ("slow", 0.6, 200, b"{}"))
        c = self.client(s.url, timeout=0.2)
        recording(c)
        with self.assertRaises(OutcomeUnknownError):
            c.turn_end("s1")
        self.assertEqual(c.registry().version, "stub-1")  # the slow reply timed out; the retry got the default

    def test_append_retry_sends_the_same_key(self):
        s = self.stub("drop")
        c = self.client(s.url)
        recording(c)
        c.append("s1", [commands.enable()])
        bodies = [json.loads(b) for _, _, b in s.seen]
        self.assertEqual(len(bodies), 2)
        self.assertTrue(bodies[0]["event_id"])
        self.assertEqual(bodies[0], bodies[1])

    def test_append_retry_after_a_lost_engine_reply_is_stored_once(self):
        engine = shared_engine()
        proxy = DropFirstReply(engine.http_port)
        self.addCleanup(proxy.close)
        c = self.client(proxy.url, channel="web")
        recording(c)
        s = f"py-retry-{uuid.uuid4().hex[:10]}"
        out = c.append(s, [commands.enable(), commands.disable_tool("bash")])
        self.assertTrue(out.duplicate, "the retry should have found the first try stored")
        self.assertEqual(proxy.connections, 2)
        with Client(engine.url) as direct:
            self.assertEqual(direct.intent(s, min_seq=out.last_seq).events, 2)


class DropFirstReply:
    """A TCP proxy to 127.0.0.1:port that forwards the first connection's
    request and closes it without passing the reply back; later
    connections pass both ways."""

    def __init__(self, port: int):
        self.port = port
        self.connections = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                down, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            up = socket.create_connection(("127.0.0.1", self.port))
            if self.connections == 1:
                threading.Thread(target=self._swallow, args=(down, up), daemon=True).start()
            else:
                threading.Thread(target=self._pipe, args=(down, up), daemon=True).start()
                threading.Thread(target=self._pipe, args=(up, down), daemon=True).start()

    def _swallow(self, down, up):
        # Forward the request, wait for the reply to start, then drop both.
        down.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            data += down.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        while len(body) < length:
            body += down.recv(65536)
        up.sendall(head + b"\r\n\r\n" + body)
        up.recv(65536)
        down.close()
        up.close()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.listener.close()


if __name__ == "__main__":
    unittest.main()
