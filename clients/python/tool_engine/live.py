"""Live events: a session's (or every session's) events as Server-Sent
Events (docs/api.md, "Live subscriptions").

A LiveStream is an iterator of LiveEvent in stream order. When the
connection drops, the engine restarts, or nothing (not even the engine's
heartbeat, every 15 s) arrives for ``idle_timeout`` seconds, it reconnects
with Last-Event-ID set to the last event it yielded, so no event is lost or
repeated. It ends after the watched session's SessionDeleted (the engine
sends "event: end"), when ``close()`` is called, or on an error reply the
engine will not change its mind about (a bad id, a deleted session: the
error class of errors.py); busy and unavailable replies are retried after
their Retry-After.
"""

from __future__ import annotations

import http.client
import json
import time
import urllib.parse
from typing import TYPE_CHECKING, Iterator, Optional

from ._codec import from_json
from .errors import BusyError, UnavailableError, error_from_reply
from .ops import Operation
from .replies import LiveEvent

if TYPE_CHECKING:
    from .client import Client


class LiveStream:
    """An iterator of LiveEvent that follows a live operation and resumes
    after the last event it yielded (``last_seq``). ``reconnect_delay`` is the
    wait before reconnecting a dropped stream; ``max_reconnect`` bounds the
    reconnections in a row that yield nothing (None: no bound);
    ``reconnects`` counts them all."""

    def __init__(self, client: "Client", op: Operation, session: Optional[str], after_seq: Optional[int], *,
                 idle_timeout: float = 45.0, reconnect_delay: float = 1.0, max_reconnect: Optional[int] = None,
                 message: bool = False):
        if op.path.count("{session}") and not session:
            raise ValueError(f"{op.name}: session is required (a non-empty string)")
        self._client = client
        self._op = op
        self._session = session
        self._message = message
        self.last_seq = after_seq or 0
        self.idle_timeout = idle_timeout
        self.reconnect_delay = reconnect_delay
        self.max_reconnect = max_reconnect
        self.reconnects = 0
        self.ended = False
        self._conn: Optional[http.client.HTTPConnection] = None
        self._resp: Optional[http.client.HTTPResponse] = None
        self._closed = False

    def __iter__(self) -> Iterator[LiveEvent]:
        return self

    def __enter__(self) -> "LiveStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops the stream; the iterator then ends. Safe from another thread."""
        self._closed = True
        conn = self._conn
        if conn is not None:
            try:
                if conn.sock is not None:
                    conn.sock.shutdown(2)
            except OSError:
                pass
            conn.close()

    def _open(self) -> None:
        c = self._client
        path = self._op.path
        if self._session:
            path = path.replace("{session}", urllib.parse.quote(self._session, safe=""))
        if self._message:
            path += "?message=true"  # every event untyped, its type in data
        headers = c.headers()
        headers["Accept"] = "text/event-stream"
        if self.last_seq:
            headers["Last-Event-ID"] = str(self.last_seq)
        cls = http.client.HTTPSConnection if c._scheme == "https" else http.client.HTTPConnection
        conn = cls(c._host, c._port, timeout=self.idle_timeout)
        self._conn = conn
        conn.request("GET", c._prefix + path, headers=headers)
        resp = conn.getresponse()
        if resp.status != 200:
            body = resp.read()
            conn.close()
            raise error_from_reply(resp.status, body, resp.getheader("Retry-After"), self._op.name)
        self._resp = resp

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = self._resp = None

    def __next__(self) -> LiveEvent:
        idle = 0
        while not self._closed and not self.ended:
            try:
                if self._resp is None:
                    self._open()
                ev = self._read_event()
                if ev is not None:
                    return ev
            except (BusyError, UnavailableError) as e:
                self._drop()
                self._pause(e.retry_after or self.reconnect_delay)
                continue
            except (OSError, http.client.HTTPException):
                if self._closed:
                    break
            self._drop()
            if self.ended or self._closed:
                break
            idle += 1
            self.reconnects += 1
            if self.max_reconnect is not None and idle > self.max_reconnect:
                raise ConnectionError(f"{self._op.name}: stream dropped {idle} times in a row without an event")
            self._pause(self.reconnect_delay)
        self._drop()
        raise StopIteration

    def _pause(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self._closed and time.monotonic() < end:
            time.sleep(min(0.05, end - time.monotonic()))

    def _read_event(self) -> Optional[LiveEvent]:
        """Reads one SSE message: the next event, or None when the stream
        ended (the connection closed, "event: end", or an "event: error"
        whose error the caller retries)."""
        assert self._resp is not None
        event, data, ident = "", [], None
        while True:
            raw = self._resp.readline()
            if not raw:
                return None  # the engine closed the stream: reconnect
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                if not data and not event:
                    continue
                if event == "end":
                    self.ended = True
                    return None
                text = "\n".join(data)
                if not event:
                    # message=true: the type is in data; the end and the
                    # error come as {"type":"end"} and {"type":"error",...}.
                    kind = json.loads(text).get("type")
                    if kind == "end":
                        self.ended = True
                        return None
                    if kind == "error":
                        event = "error"
                if event == "error":
                    err = error_from_reply(0, text.encode(), None, self._op.name)
                    if isinstance(err, (BusyError, UnavailableError)):
                        return None
                    raise err
                ev = from_json(LiveEvent, json.loads(text))
                if ident is not None and ident.isdigit():
                    ev.seq = ev.seq or int(ident)
                self.last_seq = max(self.last_seq, ev.seq)
                return ev
            if line.startswith(":"):
                continue  # a comment: the heartbeat
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            elif name == "id":
                ident = value
