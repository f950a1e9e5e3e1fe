"""Typed requests of the engine's API (docs/api.md), and the values requests
and replies share (Intent, Override, Command).

Each dataclass has the fields of one JSON object of the API, under the same
names. A request leaves a field out when it is None. A test reads these
classes against the OpenAPI document the engine serves, so that they follow
the engine's types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ._codec import field

__all__ = ["Intent", "Override", "Command", "AppendRequest", "IntentRequest", "ResolveRequest",
           "HistoryRequest", "ExplainRequest", "ExplainBatchRequest", "ResumeRequest", "BeginTurnRequest",
           "DiscoverRequest", "DispatchRequest", "TurnRequest", "CallCheckRequest", "DeleteRequest",
           "CompactRequest", "EmptyRequest", "RegistryDiffRequest", "LiveRequest"]

# Shared values.


@dataclass
class Intent:
    """A session's stored intent (docs/semantics.md#intent): None is unset."""

    enabled: Optional[bool] = None
    web_search: Optional[bool] = None
    preset: Optional[str] = None
    disabled: Optional[list[str]] = None
    picked: Optional[list[str]] = None


@dataclass
class Override:
    """A per-turn override: kind "none", "empty" (no tools), "names" (exactly
    ``names``) or "intent" (``intent`` expanded live, ``allowed`` filtering
    the defaults). Build one with the class methods."""

    kind: str = "none"
    intent: Optional[Intent] = None
    allowed: Optional[list[str]] = None
    names: Optional[list[str]] = None

    @classmethod
    def empty(cls) -> "Override":
        """No tools at all for this request."""
        return cls(kind="empty")

    @classmethod
    def of_names(cls, names: list[str]) -> "Override":
        """Exactly these tools, in this order."""
        return cls(kind="names", names=list(names))

    @classmethod
    def of_intent(cls, intent: Intent, allowed: Optional[list[str]] = None) -> "Override":
        """An intent expanded live against the registry."""
        return cls(kind="intent", intent=intent, allowed=allowed)


Command = dict
"""One intent command of ``append``: a dict with a "type" and that type's
fields (``tool_engine.commands`` builds them)."""

# Requests.


@dataclass
class AppendRequest:
    """Appends ``commands`` to a session atomically. ``expected_seq`` (0: no
    events yet) makes it conditional; ``event_id`` is its idempotency key."""

    session: str
    commands: list[Command] = field(factory=list)
    expected_seq: Optional[int] = None
    actor: Optional[str] = None
    event_id: Optional[str] = None


@dataclass
class IntentRequest:
    """Reads a session; ``min_seq`` (an append's last_seq) reads your writes."""

    session: str
    min_seq: Optional[int] = None


@dataclass
class ResolveRequest:
    """Resolves a session's tools for ``provider`` ("anthropic" by default)."""

    session: str
    profile: Optional[str] = None
    provider: Optional[str] = None
    override: Optional[Override] = None
    min_seq: Optional[int] = None


@dataclass
class HistoryRequest:
    """A page of a session's timeline, bounded by ``until`` (a sequence or an
    RFC 3339 time), after ``after_seq``, at most ``limit`` entries."""

    session: str
    until: Optional[str] = None
    profile: Optional[str] = None
    override: Optional[Override] = None
    after_seq: Optional[int] = None
    limit: Optional[int] = None


@dataclass
class ExplainRequest:
    """Why ``tool`` is or is not in a session's set."""

    session: str
    tool: str
    until: Optional[str] = None
    profile: Optional[str] = None
    override: Optional[Override] = None


@dataclass
class ExplainBatchRequest:
    """Explains each of ``tools`` (1 to 100) at one point of a session."""

    session: str
    tools: list[str] = field(factory=list)
    until: Optional[str] = None
    profile: Optional[str] = None
    override: Optional[Override] = None


@dataclass
class ResumeRequest:
    """Resumes a session after a crash from its last checkpoint."""

    session: str
    profile: Optional[str] = None
    override: Optional[Override] = None
    actor: Optional[str] = None


@dataclass
class BeginTurnRequest:
    """Begins the session's next turn and freezes its tools."""

    session: str
    profile: Optional[str] = None
    provider: Optional[str] = None
    override: Optional[Override] = None
    actor: Optional[str] = None


@dataclass
class DiscoverRequest:
    """One tool_search call in the open turn: the model's ``input`` as it
    wrote it, or ``names``; ``call_id`` is the provider's id of the call."""

    session: str
    input: Optional[Any] = None
    names: Optional[list[str]] = None
    provider: Optional[str] = None
    call_id: Optional[str] = None
    actor: Optional[str] = None
    query_vector: Optional[list[float]] = None
    view: Optional[str] = None


@dataclass
class DispatchRequest:
    """Asks for the provider request of the open turn."""

    session: str
    provider: Optional[str] = None


@dataclass
class TurnRequest:
    """Names the session of turn-inspect, turn-checkpoint and turn-end."""

    session: str
    actor: Optional[str] = None


@dataclass
class CallCheckRequest:
    """May a call of ``tool`` execute now in the session's open turn?"""

    session: str
    tool: str


@dataclass
class DeleteRequest:
    """Deletes a session; ``erase`` also purges its events (erase channel only)."""

    session: str
    reason: Optional[str] = None
    erase: Optional[bool] = None
    actor: Optional[str] = None


@dataclass
class CompactRequest:
    """Compacts a session (erase channel only)."""

    session: str
    reason: Optional[str] = None
    actor: Optional[str] = None


@dataclass
class EmptyRequest:
    """The request of operations without parameters (sessions, registry, budget)."""


@dataclass
class RegistryDiffRequest:
    """A candidate registry (the JSON of a registry file) to compare with the live one."""

    registry: Any = None


@dataclass
class LiveRequest:
    """Starts a live stream of a session's events (every session's when
    ``session`` is None) after ``after_seq``. ``message`` asks the engine to
    send every event as the SSE default type (for browsers' EventSource);
    LiveStream reads both forms."""

    session: Optional[str] = None
    after_seq: Optional[int] = None
    message: Optional[bool] = None
