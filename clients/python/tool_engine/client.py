"""The HTTP client of the engine's API.

One method per operation of the API (ops.OPERATIONS), named as the
operation with "_" for "-", taking the request's fields as arguments and
returning the reply as a dataclass (replies.py); errors are the classes of
errors.py. The client

- sends each request with a timeout (``timeout``, per attempt);
- retries, within ``retry_deadline`` seconds and ``max_attempts`` tries, a
  request the engine could not take: connection refused (nothing was
  sent), 429 busy and 503 unavailable, waiting what the reply's Retry-After
  says (else an exponential backoff); a request whose reply was lost is
  retried only when that is safe: operations that write nothing, and
  appends, which carry an idempotency key (one is generated per call when
  the caller gives none); any other write whose reply was lost raises
  OutcomeUnknownError;
- reads its own writes: after a write it remembers the session's sequence
  and passes it as ``min_seq`` on ``intent`` and ``resolve`` (``read_your_writes``);
- follows live events (``session_live``, ``events_live``) with resume by
  Last-Event-ID (live.py).

A Client is safe to share between threads: each thread keeps its own
connection.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Optional

from . import idempotency
from ._codec import from_json, to_json
from .errors import (BusyError, EngineError, OutcomeUnknownError, TransportError, UnavailableError,
                     error_from_reply)
from .ops import BY_NAME, Operation
from .replies import (AppendReply, BudgetTable, CallCheckReply, CheckpointReply, CompactReply, DeleteReply,
                      DiscoverReply, DispatchRecord, ExplainBatchReply, Explanation, History, RegistryImpact,
                      RegistryInfo, ResumeReply, Session, SessionList, TurnView)
from .requests import (AppendRequest, BeginTurnRequest, CallCheckRequest, Command, CompactRequest,
                       DeleteRequest, DiscoverRequest, DispatchRequest, EmptyRequest, ExplainBatchRequest,
                       ExplainRequest, HistoryRequest, IntentRequest, Override, RegistryDiffRequest,
                       ResolveRequest, ResumeRequest, TurnRequest)

DEFAULT_URL = "http://127.0.0.1:7420"
"""The engine's default HTTP address (engine serve --http)."""

IDLE_REUSE = 30.0
"""Seconds a kept-alive connection may sit idle before the client opens a new one."""


@dataclass
class RetryPolicy:
    """How the client retries a request the engine could not take: at most
    ``max_attempts`` tries within ``deadline`` seconds; without a
    Retry-After it waits ``base_delay`` seconds, doubling up to ``max_delay``."""

    max_attempts: int = 6
    deadline: float = 15.0
    base_delay: float = 0.1
    max_delay: float = 2.0


NO_RETRY = RetryPolicy(max_attempts=1)
"""A policy that sends each request once."""


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle kept-alive connection was closed by the other end: it
    has something to read (the end of the stream) when nothing is due."""
    if conn.sock is None:
        return False
    try:
        readable, _, _ = select.select([conn.sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _Lost(Exception):
    """A request whose connection failed: ``sent`` when it may have reached the engine."""

    def __init__(self, err: BaseException, sent: bool):
        super().__init__(str(err))
        self.err = err
        self.sent = sent


class Client:
    """A client of the engine's HTTP API at ``base_url``.

    ``channel`` is the Engine-Channel header (the writing channel; None: the
    engine's default, "http"); ``token`` the bearer token of an engine
    serving with --http-tokens (the channel is then the token's); ``actor``
    the Engine-Actor header of every request. ``timeout`` bounds each try in
    seconds: keep it above 5, the engine's wait for ``min_seq``.
    """

    def __init__(self, base_url: str = DEFAULT_URL, *, channel: Optional[str] = None, token: Optional[str] = None,
                 actor: Optional[str] = None, timeout: float = 30.0, retry: Optional[RetryPolicy] = None,
                 read_your_writes: bool = True):
        if "://" not in base_url:
            base_url = "http://" + base_url
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base URL {base_url!r}: want http://host:port or https://host:port")
        self.base_url = base_url.rstrip("/")
        self._scheme, self._host, self._port = u.scheme, u.hostname, u.port
        self._prefix = u.path.rstrip("/")
        self.channel, self.token, self.actor = channel, token, actor
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.read_your_writes = read_your_writes
        self._local = threading.local()
        self._open: set = set()  # every thread's connection, for close()
        self._seqs: dict[str, int] = {}
        self._lock = threading.Lock()
        self._sleep = time.sleep  # the waits between retries; tests record them

    # Transport.

    def _conn(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is not None and (time.monotonic() - getattr(self._local, "used", 0.0) > IDLE_REUSE
                                 or _closed_by_peer(conn)):
            # A request on a connection the engine closes (after 60 s idle)
            # or closed (it restarted) would fail after it was written, with
            # its outcome unknown: open a new one first.
            self._drop()
            conn = None
        if conn is None:
            cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        if conn.sock is None:  # new, or closed by close(): it connects on this request
            with self._lock:
                self._open.add(conn)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._lock:
                self._open.discard(conn)

    def close(self) -> None:
        """Closes the connections of every thread; a later request opens a new one."""
        with self._lock:
            conns, self._open = self._open, set()
        for conn in conns:
            conn.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def headers(self) -> dict[str, str]:
        """The headers every request carries: Accept, and the channel, token and actor when set."""
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        elif self.channel:
            h["Engine-Channel"] = self.channel
        if self.actor:
            h["Engine-Actor"] = self.actor
        return h

    def _send(self, method: str, target: str, body: Optional[bytes], headers: dict[str, str],
              timeout: float) -> tuple[int, bytes, Optional[str]]:
        """One try: (status, body, Retry-After), or _Lost."""
        conn = self._conn(timeout)
        try:
            conn.request(method, self._prefix + target, body=body, headers=headers)
        except (OSError, http.client.HTTPException) as e:
            # Connecting or writing failed: the engine did not get a whole
            # request, so it ran nothing.
            self._drop()
            raise _Lost(e, sent=False) from e
        try:
            resp = conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            # The request went out and no whole reply came back: the engine
            # may have run it (it may have died doing so).
            self._drop()
            raise _Lost(e, sent=True) from e
        self._local.used = time.monotonic()
        if resp.getheader("Connection", "").lower() == "close":
            self._drop()
        return resp.status, data, resp.getheader("Retry-After")

    def request(self, op: Operation, req: Any) -> Any:
        """Calls ``op`` with the request dataclass ``req`` and returns its
        reply dataclass; the typed methods below call it."""
        fields = to_json(req)
        path = op.path
        for name in ("session", "tool"):
            token = "{" + name + "}"
            if token in path:
                value = fields.pop(name, None)
                if not isinstance(value, str) or not value:
                    raise ValueError(f"{op.name}: {name} is required (a non-empty string), got {value!r}")
                path = path.replace(token, urllib.parse.quote(value, safe=""))
        body = None
        headers = self.headers()
        if op.method == "POST":
            body = json.dumps(fields, separators=(",", ":")).encode()
            headers["Content-Type"] = "application/json"
        elif fields:
            query = {k: v if isinstance(v, str) else json.dumps(v, separators=(",", ":")) for k, v in fields.items()}
            path += "?" + urllib.parse.urlencode(query)
        safe = not op.write or (op.name == "append" and bool(fields.get("event_id")))
        data = self._call(op, path, body, headers, safe)
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise EngineError(f"reply is not JSON: {e}: {data[:200]!r}", status=200, code="internal",
                              operation=op.name) from e
        return from_json(op.reply, doc)

    def _call(self, op: Operation, target: str, body: Optional[bytes], headers: dict[str, str], safe: bool) -> bytes:
        policy = self.retry
        start = time.monotonic()
        delay = policy.base_delay
        attempt = 0
        while True:
            attempt += 1
            wait: Optional[float] = None
            failure: BaseException
            try:
                status, data, retry_after = self._send(op.method, target, body, headers, self.timeout)
                if status == 200:
                    return data
                failure = error_from_reply(status, data, retry_after, op.name)
                retryable = isinstance(failure, (BusyError, UnavailableError)) or (
                    isinstance(failure, OutcomeUnknownError) and safe)
                wait = failure.retry_after
            except _Lost as lost:
                if lost.sent and not safe:
                    raise OutcomeUnknownError(
                        f"{op.method} {target}: the connection failed after the request was sent ({lost.err}); "
                        "it may or may not have been applied: read the session before writing again",
                        status=0, operation=op.name) from lost.err
                failure = TransportError(f"{op.method} {self.base_url}{target}: {lost.err}", sent=lost.sent,
                                         operation=op.name)
                retryable = True
            if wait is None:
                wait = delay
                delay = min(delay * 2, policy.max_delay)
            elapsed = time.monotonic() - start
            if not retryable or attempt >= policy.max_attempts or elapsed + wait > policy.deadline:
                raise failure
            self._sleep(wait)

    # Read-your-writes bookkeeping.

    def _wrote(self, session: str, seq: int) -> None:
        if seq:
            with self._lock:
                if seq > self._seqs.get(session, 0):
                    self._seqs[session] = seq

    def _min_seq(self, session: str, given: Optional[int]) -> Optional[int]:
        if not self.read_your_writes:
            return given
        with self._lock:
            seen = self._seqs.get(session, 0)
        best = max(given or 0, seen)
        return best or None

    # Operations: one method per row of ops.OPERATIONS, in its order.

    def append(self, session: str, commands: list[Command], *, expected_seq: Optional[int] = None,
               actor: Optional[str] = None, event_id: Optional[str] = None) -> AppendReply:
        """Appends ``commands`` (tool_engine.commands) to a session,
        atomically. ``expected_seq`` makes it conditional (0: no events
        yet; ConflictError otherwise). ``event_id`` is the idempotency key;
        without one the client generates one, so that its own retries after
        a lost reply store the commands once."""
        if event_id is None:
            event_id = idempotency.new_key()
        idempotency.check_key(event_id)
        out = self.request(BY_NAME["append"], AppendRequest(session, list(commands), expected_seq, actor, event_id))
        self._wrote(session, out.last_seq)
        return out

    def intent(self, session: str, *, min_seq: Optional[int] = None) -> Session:
        """Reads a session's intent, loaded deferred tools, turn and last checkpoint."""
        return self.request(BY_NAME["intent"], IntentRequest(session, self._min_seq(session, min_seq)))

    def resolve(self, session: str, *, profile: Optional[str] = None, provider: Optional[str] = None,
                override: Optional[Override] = None, min_seq: Optional[int] = None) -> TurnView:
        """Resolves a session's tools: the provider rendering, catalog and prefix hash (writes nothing)."""
        req = ResolveRequest(session, profile, provider, override, self._min_seq(session, min_seq))
        return self.request(BY_NAME["resolve"], req)

    def history(self, session: str, *, until: Optional[str] = None, profile: Optional[str] = None,
                override: Optional[Override] = None, after_seq: Optional[int] = None,
                limit: Optional[int] = None) -> History:
        """One page of a session's timeline (``history_all`` reads every page)."""
        req = HistoryRequest(session, None if until is None else str(until), profile, override, after_seq, limit)
        return self.request(BY_NAME["history"], req)

    def history_all(self, session: str, *, until: Optional[str] = None, profile: Optional[str] = None,
                    override: Optional[Override] = None) -> History:
        """A session's whole timeline, read page by page; the state is the one after the last entry."""
        entries = []
        after = None
        while True:
            page = self.history(session, until=until, profile=profile, override=override, after_seq=after)
            entries.extend(page.entries)
            if not page.more:
                page.entries = entries
                return page
            if page.next_after_seq <= (after or 0):
                raise EngineError(f"history of {session!r}: the page after {after} says more but its "
                                  f"next_after_seq is {page.next_after_seq}", code="internal", operation="history")
            after = page.next_after_seq

    def explain(self, session: str, tool: str, *, until: Optional[str] = None, profile: Optional[str] = None,
                override: Optional[Override] = None) -> Explanation:
        """Why ``tool`` is or is not in a session's set: the rule and the event responsible."""
        req = ExplainRequest(session, tool, None if until is None else str(until), profile, override)
        return self.request(BY_NAME["explain"], req)

    def explain_batch(self, session: str, tools: list[str], *, until: Optional[str] = None,
                      profile: Optional[str] = None, override: Optional[Override] = None) -> ExplainBatchReply:
        """Explains each of ``tools`` (1 to 100) in one request."""
        req = ExplainBatchRequest(session, list(tools), None if until is None else str(until), profile, override)
        return self.request(BY_NAME["explain-batch"], req)

    def resume(self, session: str, *, profile: Optional[str] = None, override: Optional[Override] = None,
               actor: Optional[str] = None) -> ResumeReply:
        """After a crash: ends a turn left open, verifies the last
        checkpoint's contract and restores its loaded tools (or says per
        tool why not)."""
        out = self.request(BY_NAME["resume"], ResumeRequest(session, profile, override, actor))
        self._wrote(session, out.seq)
        return out

    def turn_begin(self, session: str, *, profile: Optional[str] = None, provider: Optional[str] = None,
                   override: Optional[Override] = None, actor: Optional[str] = None) -> TurnView:
        """Begins the next turn: resolves and freezes the session's tools."""
        out = self.request(BY_NAME["turn-begin"], BeginTurnRequest(session, profile, provider, override, actor))
        self._wrote(session, out.seq)
        return out

    def turn_discover(self, session: str, *, input: Any = None, names: Optional[list[str]] = None,
                      provider: Optional[str] = None, call_id: Optional[str] = None, actor: Optional[str] = None,
                      query_vector: Optional[list[float]] = None, view: Optional[str] = None) -> DiscoverReply:
        """The model's tool_search call in the open turn: pass its input as
        it wrote it; return the reply's ``output`` to the model. ``view``
        "none" leaves the turn's next provider request out of the reply."""
        req = DiscoverRequest(session, input, names, provider, call_id, actor, query_vector, view)
        out = self.request(BY_NAME["turn-discover"], req)
        self._wrote(session, out.view.seq)
        return out

    def turn_dispatch(self, session: str, *, provider: Optional[str] = None) -> TurnView:
        """The provider request of the open turn (its frozen tools), recording its classification."""
        return self.request(BY_NAME["turn-dispatch"], DispatchRequest(session, provider))

    def turn_inspect(self, session: str, *, actor: Optional[str] = None) -> DispatchRecord:
        """The classification the session's last dispatch recorded."""
        return self.request(BY_NAME["turn-inspect"], TurnRequest(session, actor))

    def turn_call_check(self, session: str, tool: str) -> CallCheckReply:
        """Before executing a tool call: may ``tool`` run now? A refusal is
        ``callable`` False with a reason, not an error."""
        return self.request(BY_NAME["turn-call-check"], CallCheckRequest(session, tool))

    def turn_checkpoint(self, session: str, *, actor: Optional[str] = None) -> CheckpointReply:
        """Records a checkpoint (safe point) of the open turn."""
        out = self.request(BY_NAME["turn-checkpoint"], TurnRequest(session, actor))
        self._wrote(session, out.seq)
        return out

    def turn_end(self, session: str, *, actor: Optional[str] = None) -> CheckpointReply:
        """Ends the open turn at a safe point, with its checkpoint."""
        out = self.request(BY_NAME["turn-end"], TurnRequest(session, actor))
        self._wrote(session, out.seq)
        return out

    def session_delete(self, session: str, *, reason: Optional[str] = None, erase: Optional[bool] = None,
                       actor: Optional[str] = None) -> DeleteReply:
        """Deletes a session for good; ``erase`` also purges its events (erase channel only)."""
        return self.request(BY_NAME["session-delete"], DeleteRequest(session, reason, erase, actor))

    def session_compact(self, session: str, *, reason: Optional[str] = None,
                        actor: Optional[str] = None) -> CompactReply:
        """Compacts a session into one snapshot event (erase channel only)."""
        out = self.request(BY_NAME["session-compact"], CompactRequest(session, reason, actor))
        self._wrote(session, out.seq)
        return out

    def sessions(self) -> SessionList:
        """The sessions that have a view."""
        return self.request(BY_NAME["sessions"], EmptyRequest())

    def registry(self) -> RegistryInfo:
        """The live registry: version, tools, defaults, presets, profiles."""
        return self.request(BY_NAME["registry"], EmptyRequest())

    def budget(self) -> BudgetTable:
        """The default session's per-turn token table, by a real tokenizer."""
        return self.request(BY_NAME["budget"], EmptyRequest())

    def registry_diff(self, registry: Any) -> RegistryImpact:
        """What pushing ``registry`` (a registry file's JSON, as a dict) would
        change; writes nothing."""
        return self.request(BY_NAME["registry-diff"], RegistryDiffRequest(registry))

    # Live operations (live.py).

    def session_live(self, session: str, *, after_seq: Optional[int] = None, message: Optional[bool] = None, **kwargs: Any):
        """Follows a session's events live from after ``after_seq``: an
        iterator of LiveEvent that reconnects with Last-Event-ID and ends
        after the session's deletion (live.LiveStream). ``message`` asks for
        the untyped SSE form a browser's EventSource needs; the iterator
        yields the same events either way."""
        from .live import LiveStream
        return LiveStream(self, BY_NAME["session-live"], session, after_seq, message=bool(message), **kwargs)

    def events_live(self, *, after_seq: Optional[int] = None, message: Optional[bool] = None, **kwargs: Any):
        """Follows every session's events live, in stream order (live.LiveStream)."""
        from .live import LiveStream
        return LiveStream(self, BY_NAME["events-live"], None, after_seq, message=bool(message), **kwargs)
