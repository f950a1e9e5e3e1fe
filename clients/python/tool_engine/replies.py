"""Typed replies of the engine's API (docs/api.md).

Each dataclass has the fields of one JSON object of a reply, under the same
names (``from_`` for ``from``). Replies are decoded tolerantly
(``_codec.from_json``): fields the engine adds later are ignored, fields it
leaves out keep their defaults. A test reads these classes against the
OpenAPI document the engine serves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ._codec import field
from .requests import Command, Intent

__all__ = ["ContractEntry", "Checkpoint", "Rejection", "Session", "AppendReply", "Budget", "Classification",
           "ViewLists", "EntryLists", "TurnView", "NativeForms", "Tool", "Match", "DiscoverReply", "DispatchRecord", "Grant",
           "CallCheckReply", "CheckpointReply", "ContractChange", "ResumeDecision", "ResumeOutcome",
           "ResumeReply", "EventRef", "Explanation", "ExplainBatchReply", "Compaction", "HistoryEntry",
           "History", "DeleteReply", "CompactReply", "SessionList", "RegistryTool", "Profile",
           "RegistryInfo", "TokenCount", "BudgetTable", "ToolChange", "RegistryDiff", "CheckpointLoss",
           "RegistryImpact", "LiveEvent"]


@dataclass
class ContractEntry:
    """One tool of a checkpoint's contract with its hash."""

    name: str = ""
    hash: str = ""


@dataclass
class Checkpoint:
    """A recorded checkpoint: the loaded deferred tools and their contract."""

    loaded_deferred_tools: list[str] = field(factory=list)
    contract_hash: str = ""
    registry_version: str = ""
    turn: int = 0
    seq: int = 0
    contract: list[ContractEntry] = field(factory=list)


@dataclass
class Rejection:
    """An event kept in the log but not applied."""

    seq: int = 0
    id: str = ""
    type: str = ""
    kind: str = ""
    reason: str = ""


@dataclass
class Session:
    """A session's stored state."""

    session: str = ""
    seq: int = 0
    intent: Intent = field(factory=Intent)
    loaded: list[str] = field(factory=list)
    turn: int = 0
    in_turn: bool = False
    events: int = 0
    skipped: int = 0
    rejected: int = 0
    checkpoint: Optional[Checkpoint] = None
    rejections: list[Rejection] = field(factory=list)


@dataclass
class AppendReply:
    """The outcome of an append: pass ``last_seq`` as ``min_seq`` to read it."""

    session: str = ""
    first_seq: int = 0
    last_seq: int = 0
    duplicate: bool = False
    retries: int = 0
    event_ids: list[str] = field(factory=list)
    state: Session = field(factory=Session)


@dataclass
class Budget:
    """A resolution's token estimate."""

    resident: int = 0
    catalog: int = 0
    total: int = 0
    resident_tools: int = 0
    deferred_tools: int = 0


@dataclass
class Classification:
    """One tool's class in a resolution."""

    name: str = ""
    resident: bool = False
    deferred: bool = False
    loaded: bool = False


@dataclass
class ViewLists:
    """Which page of a view's name lists a reply holds: entries [offset,
    offset+limit) of each, with each full list's length; ``complete`` when
    every list is whole."""

    offset: int = 0
    limit: int = 0
    tools: int = 0
    provider: int = 0
    catalog: int = 0
    classification: int = 0
    unknown: int = 0
    withheld: int = 0
    droppable_references: int = 0
    complete: bool = False


@dataclass
class EntryLists:
    """The full length of each list of a history entry (or dispatch record)
    whose lists were cut to 64 names."""

    tools: int = 0
    provider: int = 0
    catalog: int = 0
    gained: int = 0
    lost: int = 0
    resident: int = 0
    deferred: int = 0
    loaded: int = 0


@dataclass
class TurnView:
    """A resolution: ``rendering`` is the provider tools array to send as it
    is, ``catalog_text`` the deferred catalog for the system prompt, and
    ``prefix_hash`` names the tools prefix the provider caches."""

    session: str = ""
    seq: int = 0
    turn: int = 0
    frozen: bool = False
    intent: Intent = field(factory=Intent)
    source: str = ""
    tools: list[str] = field(factory=list)
    provider: list[str] = field(factory=list)
    catalog: list[str] = field(factory=list)
    catalog_text: str = ""
    unknown: list[str] = field(factory=list)
    rendering: Any = None
    rendered_for: str = ""
    prefix_hash: str = ""
    references_hash: str = ""
    rendering_hash: str = ""
    rendering_unchanged: bool = False
    lists: ViewLists = field(factory=ViewLists)
    contract_hash: str = ""
    registry_version: str = ""
    budget: Budget = field(factory=Budget)
    classification: list[Classification] = field(factory=list)
    loaded: list[str] = field(factory=list)
    droppable_references: list[str] = field(factory=list)
    no_events: bool = False
    policy: str = ""
    withheld: list[str] = field(factory=list)


@dataclass
class NativeForms:
    """A tool's provider-native definitions, as the registry gives them."""

    anthropic: Any = None
    openai: Any = None


@dataclass
class Tool:
    """A registry tool with its schema."""

    name: str = ""
    description: str = ""
    parameters: Any = None
    available: bool = False
    permission: str = ""
    native: Optional[NativeForms] = None


@dataclass
class Match:
    """One ranked result of a query or regex; ``weak`` ones were not loaded."""

    name: str = ""
    via: str = ""
    score: float = 0.0
    weak: bool = False


@dataclass
class DiscoverReply:
    """The outcome of tool_search: ``output`` is the tool result to return to
    the model as it is; ``view`` the turn's next provider request."""

    tools: list[Tool] = field(factory=list)
    loaded: list[str] = field(factory=list)
    not_found: list[str] = field(factory=list)
    matches: list[Match] = field(factory=list)
    note: str = ""
    output: Any = None
    view: TurnView = field(factory=TurnView)


@dataclass
class DispatchRecord:
    """The classification the session's last dispatch recorded."""

    session: str = ""
    turn: int = 0
    contract_hash: str = ""
    resident: list[str] = field(factory=list)
    deferred: list[str] = field(factory=list)
    loaded: list[str] = field(factory=list)
    at_ms: int = 0
    lists: Optional[EntryLists] = None


@dataclass
class Grant:
    """A user's answer to an "ask": ``tool`` allowed for ``scope`` by ``by``."""

    tool: str = ""
    scope: str = ""
    by: str = ""
    turn: int = 0
    seq: int = 0


@dataclass
class CallCheckReply:
    """May the call run? ``callable`` only for reason "callable"; otherwise
    ``note`` says why (reasons: disabled, not_in_turn, unknown, ask, denied)."""

    session: str = ""
    seq: int = 0
    turn: int = 0
    name: str = ""
    callable: bool = False
    reason: str = ""
    note: str = ""
    tool: Optional[Tool] = None
    permission: str = ""
    deferred: bool = False
    loaded: bool = False
    provider: str = ""
    channel: str = ""
    decision: str = ""
    rule: str = ""
    grant: Optional[Grant] = None


@dataclass
class CheckpointReply:
    """The outcome of turn-checkpoint and turn-end."""

    session: str = ""
    seq: int = 0
    checkpoint: Checkpoint = field(factory=Checkpoint)


@dataclass
class ContractChange:
    """One difference between a checkpoint's contract and the current one."""

    tool: str = ""
    kind: str = ""
    from_: str = field("", json="from")
    to: str = ""
    description: str = ""


@dataclass
class ResumeDecision:
    """What a resume did with one loaded tool."""

    tool: str = ""
    kind: str = ""
    rule: str = ""
    reason: str = ""


@dataclass
class ResumeOutcome:
    """What a resume restored, and why each loaded tool was restored or dropped."""

    restored: list[str] = field(factory=list)
    ok: bool = False
    reason: str = ""
    changes: list[ContractChange] = field(factory=list)
    tools: list[ResumeDecision] = field(factory=list)


@dataclass
class ResumeReply:
    """The outcome of resume; ``seq`` 0 means it wrote nothing."""

    session: str = ""
    outcome: ResumeOutcome = field(factory=ResumeOutcome)
    checkpoint: Optional[Checkpoint] = None
    seq: int = 0


@dataclass
class EventRef:
    """Names an event of the log."""

    seq: int = 0
    id: str = ""
    type: str = ""
    channel: str = ""
    actor: str = ""
    time: str = ""


@dataclass
class Explanation:
    """Why a tool is in or out: the deciding rule and the event after which
    that last changed."""

    tool: str = ""
    included: bool = False
    rule: str = ""
    detail: str = ""
    event: Optional[EventRef] = None
    registry_version: str = ""
    evicted: Optional[EventRef] = None
    seq: int = 0


@dataclass
class ExplainBatchReply:
    """One explanation per requested tool, in the request's order."""

    session: str = ""
    explanations: list[Explanation] = field(factory=list)


@dataclass
class Compaction:
    """What a SessionCompacted replaced, and who compacted it when."""

    seq: int = 0
    first_seq: int = 0
    last_seq: int = 0
    count: int = 0
    first_time: str = ""
    last_time: str = ""
    channel: str = ""
    actor: str = ""
    time: str = ""
    reason: str = ""


@dataclass
class HistoryEntry:
    """One event of a timeline with the state it left."""

    seq: int = 0
    id: str = ""
    type: str = ""
    channel: str = ""
    actor: str = ""
    time: str = ""
    payload: Optional[Command] = None
    error: str = ""
    rejected: bool = False
    intent: Intent = field(factory=Intent)
    tools: list[str] = field(factory=list)
    gained: list[str] = field(factory=list)
    lost: list[str] = field(factory=list)
    provider: list[str] = field(factory=list)
    catalog: list[str] = field(factory=list)
    loaded: list[str] = field(factory=list)
    prefix_hash: str = ""
    prefix_changed: bool = False
    references_hash: str = ""
    cause: str = ""
    turn: int = 0
    in_turn: bool = False
    registry_version: str = ""
    dispatch: Optional[DispatchRecord] = None
    compacted: Optional[Compaction] = None
    lists: Optional[EntryLists] = None


@dataclass
class History:
    """A page of a session's timeline; ``more`` says the next page is after
    ``next_after_seq``."""

    session: str = ""
    entries: list[HistoryEntry] = field(factory=list)
    state: Session = field(factory=Session)
    more: bool = False
    next_after_seq: int = 0


@dataclass
class DeleteReply:
    """The outcome of a delete (and of an erase: the purged range)."""

    session: str = ""
    seq: int = 0
    erased: bool = False
    first_seq: int = 0
    last_seq: int = 0
    purged: int = 0
    audit_seq: int = 0


@dataclass
class CompactReply:
    """The outcome of a compaction."""

    session: str = ""
    seq: int = 0
    event_id: str = ""
    already: bool = False
    first_seq: int = 0
    last_seq: int = 0
    count: int = 0
    first_time: str = ""
    last_time: str = ""
    purged: int = 0


@dataclass
class SessionList:
    """The sessions that have a view."""

    sessions: list[str] = field(factory=list)


@dataclass
class RegistryTool:
    """One registry tool, without its schema."""

    name: str = ""
    description: str = ""
    available: bool = False
    deferred: bool = False
    permission: str = ""
    native: list[str] = field(factory=list)


@dataclass
class Profile:
    """An agent profile of the registry."""

    name: str = ""
    tools: list[str] = field(factory=list)
    preset: str = ""
    allowed: list[str] = field(factory=list)


@dataclass
class RegistryInfo:
    """The live registry."""

    version: str = ""
    tool_count: int = 0
    tools: list[RegistryTool] = field(factory=list)
    default_tools: list[str] = field(factory=list)
    resident_tools: list[str] = field(factory=list)
    deferred_default_tools: list[str] = field(factory=list)
    presets: dict[str, list[str]] = field(factory=dict)
    profiles: list[Profile] = field(factory=list)


@dataclass
class TokenCount:
    """A token count by the engine's estimate and by a real tokenizer."""

    estimate: int = 0
    real: int = 0


@dataclass
class BudgetTable:
    """The live registry's per-turn token table."""

    registry_version: str = ""
    encoding: str = ""
    tools: int = 0
    resident_tools: int = 0
    deferred: list[str] = field(factory=list)
    deferred_count: int = 0
    without_deferral: TokenCount = field(factory=TokenCount)
    with_deferral: TokenCount = field(factory=TokenCount)
    catalog: TokenCount = field(factory=TokenCount)
    catalog_grouped: bool = False
    reduction_percent: float = 0.0
    net_reduction_percent: float = 0.0
    estimated_reduction_percent: float = 0.0
    unreachable: list[str] = field(factory=list)


@dataclass
class ToolChange:
    """A tool of both registries whose contract bytes differ."""

    name: str = ""
    fields: list[str] = field(factory=list)


@dataclass
class RegistryDiff:
    """A candidate registry (``to``) against the live one (``from_``)."""

    from_: str = field("", json="from")
    to: str = ""
    added: list[str] = field(factory=list)
    removed: list[str] = field(factory=list)
    changed: list[ToolChange] = field(factory=list)
    embeddings: list[str] = field(factory=list)
    all_hashes_change: bool = False
    policy_from: str = ""
    policy_to: str = ""
    defaults_change: bool = False
    presets: list[str] = field(factory=list)
    profiles: list[str] = field(factory=list)


@dataclass
class CheckpointLoss:
    """A session whose last checkpoint would lose tools on resume."""

    session: str = ""
    lost: list[str] = field(factory=list)


@dataclass
class RegistryImpact:
    """What pushing a candidate registry would change."""

    diff: RegistryDiff = field(factory=RegistryDiff)
    sessions: int = 0
    prefix_changed: list[str] = field(factory=list)
    references_changed: list[str] = field(factory=list)
    checkpoints: int = 0
    checkpoint_losses: list[CheckpointLoss] = field(factory=list)


@dataclass
class LiveEvent:
    """One event of a live stream: its reference, session and payload (a
    command object), or ``error`` when the engine cannot decode it."""

    seq: int = 0
    id: str = ""
    type: str = ""
    channel: str = ""
    actor: str = ""
    time: str = ""
    session: str = ""
    payload: Optional[Command] = None
    error: str = ""
