"""The API's operations: the engine's operation table (docs/api.md,
"Operations"), with the request and reply type of each.

Client methods are the operation names with "-" as "_" (``turn-begin`` is
``Client.turn_begin``). A test compares this table, the request and reply
types and the methods' parameters with the OpenAPI document the engine
serves (GET /v1/openapi.json), so that the client cannot drift from the
engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import replies as rp
from . import requests as rq


@dataclass(frozen=True)
class Operation:
    """One operation: over HTTP ``method`` on ``path`` ({session} and {tool}
    are filled from the request), over NATS a request to
    <prefix>.<channel>.<subject>. ``write`` operations append events: the
    client sends one again after a lost reply only when an idempotency key
    makes the repeat a no-op (an append with ``event_id``)."""

    name: str
    subject: str
    method: str
    path: str
    write: bool
    request: type
    reply: type

    @property
    def method_name(self) -> str:
        """The Client method of the operation."""
        return self.name.replace("-", "_")


OPERATIONS: tuple[Operation, ...] = (
    Operation("append", "events.append", "POST", "/v1/sessions/{session}/events", True,
              rq.AppendRequest, rp.AppendReply),
    Operation("intent", "session.intent", "GET", "/v1/sessions/{session}", False,
              rq.IntentRequest, rp.Session),
    Operation("resolve", "session.resolve", "POST", "/v1/sessions/{session}/resolve", False,
              rq.ResolveRequest, rp.TurnView),
    Operation("history", "session.history", "GET", "/v1/sessions/{session}/history", False,
              rq.HistoryRequest, rp.History),
    Operation("explain", "session.explain", "GET", "/v1/sessions/{session}/explain/{tool}", False,
              rq.ExplainRequest, rp.Explanation),
    Operation("explain-batch", "session.explain.batch", "POST", "/v1/sessions/{session}/explain", False,
              rq.ExplainBatchRequest, rp.ExplainBatchReply),
    Operation("resume", "session.resume", "POST", "/v1/sessions/{session}/resume", True,
              rq.ResumeRequest, rp.ResumeReply),
    Operation("turn-begin", "turn.begin", "POST", "/v1/sessions/{session}/turn/begin", True,
              rq.BeginTurnRequest, rp.TurnView),
    Operation("turn-discover", "turn.discover", "POST", "/v1/sessions/{session}/turn/discover", True,
              rq.DiscoverRequest, rp.DiscoverReply),
    Operation("turn-dispatch", "turn.dispatch", "POST", "/v1/sessions/{session}/turn/dispatch", False,
              rq.DispatchRequest, rp.TurnView),
    Operation("turn-inspect", "turn.inspect", "GET", "/v1/sessions/{session}/turn/dispatch", False,
              rq.TurnRequest, rp.DispatchRecord),
    Operation("turn-call-check", "turn.callcheck", "POST", "/v1/sessions/{session}/turn/call-check", False,
              rq.CallCheckRequest, rp.CallCheckReply),
    Operation("turn-checkpoint", "turn.checkpoint", "POST", "/v1/sessions/{session}/checkpoint", True,
              rq.TurnRequest, rp.CheckpointReply),
    Operation("turn-end", "turn.end", "POST", "/v1/sessions/{session}/turn/end", True,
              rq.TurnRequest, rp.CheckpointReply),
    Operation("session-delete", "session.delete", "DELETE", "/v1/sessions/{session}", True,
              rq.DeleteRequest, rp.DeleteReply),
    Operation("session-compact", "session.compact", "POST", "/v1/sessions/{session}/compact", True,
              rq.CompactRequest, rp.CompactReply),
    Operation("sessions", "sessions.list", "GET", "/v1/sessions", False,
              rq.EmptyRequest, rp.SessionList),
    Operation("registry", "registry.info", "GET", "/v1/registry", False,
              rq.RegistryRequest, rp.RegistryInfo),
    Operation("budget", "registry.budget", "GET", "/v1/budget", False,
              rq.EmptyRequest, rp.BudgetTable),
    Operation("registry-diff", "registry.diff", "POST", "/v1/registry/diff", False,
              rq.RegistryDiffRequest, rp.RegistryImpact),
)
"""Every request/reply operation, in the engine's order."""

LIVE_OPERATIONS: tuple[Operation, ...] = (
    Operation("session-live", "session.live", "GET", "/v1/sessions/{session}/events/live", False,
              rq.LiveRequest, rp.LiveEvent),
    Operation("events-live", "events.live", "GET", "/v1/events/live", False,
              rq.LiveRequest, rp.LiveEvent),
)
"""The streaming operations (Server-Sent Events): their reply is a stream of LiveEvent."""

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS + LIVE_OPERATIONS}
