"""A stand-in for the model providers: a local HTTP server that speaks the
Anthropic Messages request shape (POST /v1/messages) and the OpenAI
Responses request shape (POST /v1/responses), refuses with 400 every
request that breaks a rule the providers document, computes the prompt
cache the provider would give, and answers as a scripted model.

The rules and the cache follow the providers' documentation:

- Anthropic, tool use and tool search
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-search-tool):
  tools marked ``defer_loading`` are loaded when a ``tool_reference`` block
  in a tool_result names them; a search may be a client tool of one's own
  that returns tool_reference blocks ("Custom tool search implementation").
  The Messages API refuses a history whose ``tool_use`` ids are not answered
  by ``tool_result`` blocks at the start of the next message ("tool_use ids
  were found without tool_result blocks immediately after ... Each tool_use
  block must have a corresponding tool_result block in the next message").
- Anthropic, prompt caching
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/tool-use-with-prompt-caching,
  https://platform.claude.com/docs/en/build-with-claude/prompt-caching):
  "Deferred tools are not included in the system-prompt prefix. When the
  model discovers a deferred tool through tool search, the definition is
  appended inline as a tool_reference block in the conversation history.
  The prefix is untouched, so prompt caching is preserved." The cache
  follows the prefix hierarchy tools, then system, then messages; a
  ``cache_control`` breakpoint caches the prefix up to and including its
  block (at most 4 breakpoints); a later request reads the longest cached
  prefix found at a block boundary up to 20 blocks before one of its
  breakpoints; a prefix shorter than the model's minimum (1024 tokens)
  is not cached; an entry lives 5 minutes, refreshed on each hit.
- OpenAI, tool search
  (https://developers.openai.com/api/docs/guides/tools-tool-search):
  "Add tool_search as a tool in your tools array" and "mark the functions,
  namespaces, or MCP servers you want to make searchable with
  defer_loading: true"; "At the start of a request, the model still sees
  the name and description of whatever is searchable" (for a namespace
  only its name and description); a client-executed search is answered
  with a ``tool_search_output`` item whose tools the model may then call;
  "tool search is designed to preserve the model's cache. When new tools
  are discovered by the model, they are injected at the end of the context
  window." A function_call must be answered by a function_call_output with
  its call_id, and an output must answer a call ("No tool call found for
  function call output with call_id ...").
- OpenAI, prompt caching
  (https://developers.openai.com/api/docs/guides/prompt-caching): cache
  hits need an exact prefix match of at least 1024 tokens, counted in
  increments of 128 tokens; the tools are part of the prefix.

Tokens are estimated as 4 bytes of compact JSON each. The figure the tests
compare with the engine's prefix_hash is ``tools_cached``: whether the
cached prefix covers the whole tools section the provider puts in the
prefix (Anthropic: the tools without defer_loading; OpenAI: every tool as
the model sees it at the start, deferred ones by name and description).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

from .scripted_model import ScriptedModel

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MIN_CACHE_TOKENS = 1024
CACHE_TTL = 300.0
LOOKBACK_BLOCKS = 20
MAX_BREAKPOINTS = 4
PREFIX_HEADER = "X-Engine-Prefix-Hash"


class Refused(Exception):
    """A request the provider answers with 400: ``rule`` names the rule."""

    def __init__(self, rule: str, message: str):
        super().__init__(f"{rule}: {message}")
        self.rule = rule


def canon(value: Any) -> bytes:
    """Compact JSON with sorted keys: the bytes a block stands for."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def tokens(blocks: list[bytes]) -> int:
    return sum(len(b) for b in blocks) // 4


def chain(blocks: list[bytes]) -> list[str]:
    """The hash of every prefix of ``blocks``: chain[k] covers blocks[:k]."""
    h = hashlib.sha256()
    out = [h.copy().hexdigest()]
    for b in blocks:
        h.update(hashlib.sha256(b).digest())
        out.append(h.copy().hexdigest())
    return out


@dataclass
class Record:
    """One request the stand-in answered."""

    n: int
    shape: str
    conversation: str
    status: int
    rule: str = ""
    error: str = ""
    total_tokens: int = 0
    cached_tokens: int = 0
    tools_cached: bool = False
    engine_prefix_hash: str = ""
    engine_cached: bool = False
    response_id: str = ""
    action: str = ""

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.total_tokens if self.total_tokens else 0.0


@dataclass
class _Cache:
    """Cached prefixes by hash, each with its expiry (monotonic seconds)."""

    entries: dict[str, float] = field(default_factory=dict)

    def has(self, key: str, now: float) -> bool:
        exp = self.entries.get(key)
        return exp is not None and exp > now

    def put(self, key: str, now: float) -> None:
        self.entries[key] = now + CACHE_TTL


class Anthropic:
    """The Messages shape: validation and the prompt cache."""

    name = "anthropic"

    @staticmethod
    def validate(req: dict) -> dict[str, dict]:
        """Checks the request and returns its tools by name."""
        tools = req.get("tools") or []
        by_name: dict[str, dict] = {}
        for i, t in enumerate(tools):
            name = t.get("name")
            if not isinstance(name, str) or (not t.get("type") and not TOOL_NAME.match(name)):
                raise Refused("tool-name", f"tools.{i}.name: {name!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
            if name in by_name:
                raise Refused("tool-name-unique", f"tools: tool names must be unique: {name!r}")
            if not t.get("type") and "input_schema" not in t:
                raise Refused("tool-schema", f"tools.{i}.input_schema: Field required")
            by_name[name] = t
        deferred = [n for n, t in by_name.items() if t.get("defer_loading")]
        if deferred and len(deferred) == len(by_name):
            raise Refused("defer-all", "tools: all tools have defer_loading; at least one tool must be non-deferred")
        for n, t in by_name.items():
            if t.get("defer_loading") and (n == "tool_search" or str(t.get("type", "")).startswith("tool_search_tool_")):
                raise Refused("defer-search", f"tools: the tool search tool {n!r} cannot have defer_loading")
        marks = sum(1 for t in tools if "cache_control" in t)
        system = req.get("system")
        if isinstance(system, list):
            marks += sum(1 for b in system if isinstance(b, dict) and "cache_control" in b)
        msgs = req.get("messages") or []
        if not msgs:
            raise Refused("messages", "messages: at least one message is required")
        for i, m in enumerate(msgs):
            content = m.get("content")
            if m.get("role") not in ("user", "assistant"):
                raise Refused("role", f"messages.{i}.role: {m.get('role')!r}")
            blocks = content if isinstance(content, list) else []
            marks += sum(1 for b in blocks if isinstance(b, dict) and "cache_control" in b)
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            for b in uses:
                if b.get("name") not in by_name:
                    raise Refused("tool-use-defined", f"messages.{i}: tool_use {b.get('id')} names {b.get('name')!r}, "
                                  "which tools does not define")
            for b in blocks:
                if b.get("type") == "tool_result":
                    for r in b.get("content") if isinstance(b.get("content"), list) else []:
                        if r.get("type") == "tool_reference" and r.get("tool_name") not in by_name:
                            raise Refused("tool-reference-defined",
                                          f"messages.{i}: tool_reference names {r.get('tool_name')!r}, which tools does not define")
                elif b.get("type") == "tool_reference":
                    raise Refused("tool-reference-place", f"messages.{i}: a tool_reference block belongs in a tool_result")
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            prev = msgs[i - 1] if i else None
            asked = [b.get("id") for b in (prev.get("content") if prev and isinstance(prev.get("content"), list) else [])
                     if b.get("type") == "tool_use"] if prev and prev.get("role") == "assistant" else []
            for r in results:
                if r not in asked:
                    raise Refused("tool-result-paired", f"messages.{i}: unexpected tool_use_id found in tool_result blocks: {r}")
            if uses:
                nxt = msgs[i + 1] if i + 1 < len(msgs) else None
                if nxt is None:
                    continue  # the model answers; the next request carries the results
                head = []
                for b in nxt.get("content") if isinstance(nxt.get("content"), list) else []:
                    if b.get("type") != "tool_result":
                        break
                    head.append(b.get("tool_use_id"))
                missing = [b.get("id") for b in uses if b.get("id") not in head]
                if nxt.get("role") != "user" or missing:
                    raise Refused("tool-use-paired", f"messages.{i}: tool_use ids were found without tool_result blocks "
                                  f"immediately after: {', '.join(missing)}. Each tool_use block must have a "
                                  "corresponding tool_result block in the next message.")
        if marks > MAX_BREAKPOINTS:
            raise Refused("cache-breakpoints", f"a maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {marks}.")
        return by_name

    @staticmethod
    def prompt(req: dict, by_name: dict[str, dict]) -> tuple[list[bytes], list[int], int]:
        """The prompt as cache blocks, the indexes of the blocks that carry
        a breakpoint, and the number of tool blocks in the prefix."""
        blocks: list[bytes] = []
        marks: list[int] = []

        def add(value: Any, marked: bool) -> None:
            blocks.append(canon(value))
            if marked:
                marks.append(len(blocks) - 1)

        def bare(t: dict) -> dict:
            return {k: v for k, v in t.items() if k not in ("cache_control", "defer_loading")}

        for t in req.get("tools") or []:
            if not t.get("defer_loading"):
                add(bare(t), "cache_control" in t)
        ntools = len(blocks)
        system = req.get("system")
        for b in system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else []):
            add({k: v for k, v in b.items() if k != "cache_control"}, "cache_control" in b)
        for m in req.get("messages") or []:
            content = m.get("content")
            for b in content if isinstance(content, list) else [{"type": "text", "text": content}]:
                marked = "cache_control" in b
                b = {k: v for k, v in b.items() if k != "cache_control"}
                if b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                    # A discovered tool's definition is expanded inline at its tool_reference.
                    b = dict(b, content=[bare(by_name[r["tool_name"]]) if r.get("type") == "tool_reference" else r
                                         for r in b["content"]])
                add({"role": m.get("role"), **b}, marked)
        return blocks, marks, ntools

    def cache(self, store: _Cache, req: dict, by_name: dict[str, dict], now: float) -> tuple[int, int, bool]:
        """(cached tokens, total tokens, tools cached) for this request, and
        the request's breakpoints written to the cache."""
        blocks, marks, ntools = self.prompt(req, by_name)
        keys = chain(blocks)
        best = 0
        for b in marks:
            for k in range(b + 1, max(0, b + 1 - LOOKBACK_BLOCKS) - 1, -1):
                if k > best and store.has(keys[k], now) and tokens(blocks[:k]) >= MIN_CACHE_TOKENS:
                    best = k
                    break
        if best:
            store.put(keys[best], now)  # a hit refreshes the entry
        for b in marks:
            if tokens(blocks[: b + 1]) >= MIN_CACHE_TOKENS:
                store.put(keys[b + 1], now)
        return tokens(blocks[:best]), tokens(blocks), best >= ntools > 0


class OpenAI:
    """The Responses shape: validation and the prompt cache."""

    name = "openai"

    @staticmethod
    def _functions(tools: list[dict]) -> dict[tuple[str, str], dict]:
        """The functions the request defines, by (namespace, name)."""
        out: dict[tuple[str, str], dict] = {}
        spaces = set()
        for i, t in enumerate(tools):
            kind = t.get("type")
            if kind == "function":
                if not TOOL_NAME.match(str(t.get("name"))):
                    raise Refused("tool-name", f"tools[{i}].name: {t.get('name')!r} must match ^[a-zA-Z0-9_-]{{1,64}}$")
                if ("", t["name"]) in out:
                    raise Refused("tool-name-unique", f"tools: duplicate function name {t['name']!r}")
                out[("", t["name"])] = t
            elif kind == "namespace":
                ns = t.get("name")
                if ns in spaces or not TOOL_NAME.match(str(ns)):
                    raise Refused("namespace-name", f"tools[{i}]: namespace {ns!r} is not a unique valid name")
                spaces.add(ns)
                for f in t.get("tools") or []:
                    if f.get("type") != "function" or not TOOL_NAME.match(str(f.get("name"))):
                        raise Refused("tool-name", f"tools[{i}] ({ns}): {f.get('name')!r} is not a valid function")
                    out[(ns, f["name"])] = f
        return out

    def validate(self, req: dict) -> dict[tuple[str, str], dict]:
        tools = req.get("tools") or []
        defined = self._functions(tools)
        searchable = any(t.get("defer_loading") for t in tools) or any(
            f.get("defer_loading") for t in tools if t.get("type") == "namespace" for f in t.get("tools") or [])
        if searchable and not any(t.get("type") == "tool_search" for t in tools):
            raise Refused("defer-needs-search", "tools: defer_loading needs a tool_search tool in tools")
        items = req.get("input")
        if not isinstance(items, list) or not items:
            raise Refused("input", "input: a list of items is required")
        loaded = dict(defined)
        open_calls: dict[str, str] = {}
        for i, it in enumerate(items):
            kind = it.get("type", "message")
            if kind == "tool_search_output":
                if it.get("execution") == "client" and it.get("call_id") not in open_calls:
                    raise Refused("search-output-paired", f"input[{i}]: no tool search call found for call_id {it.get('call_id')}")
                open_calls.pop(it.get("call_id"), None)
                for k, f in self._functions(it.get("tools") or []).items():
                    loaded[k] = f
            elif kind == "tool_search_call":
                if it.get("execution") == "client":
                    open_calls[it.get("call_id")] = "tool_search"
            elif kind == "function_call":
                key = (it.get("namespace") or "", it.get("name"))
                if key not in loaded:
                    raise Refused("function-defined", f"input[{i}]: function_call names {key[1]!r}"
                                  f"{' in namespace ' + key[0] if key[0] else ''}, which no tool defines")
                open_calls[it.get("call_id")] = key[1]
            elif kind == "function_call_output":
                if it.get("call_id") not in open_calls:
                    raise Refused("output-paired", f"input[{i}]: No tool call found for function call output with call_id {it.get('call_id')}.")
                open_calls.pop(it.get("call_id"))
            elif kind == "message" and open_calls:
                raise Refused("call-answered", f"input[{i}]: No tool output found for function call {next(iter(open_calls))}.")
        if open_calls:
            raise Refused("call-answered", f"No tool output found for function call {next(iter(open_calls))}.")
        return loaded

    @staticmethod
    def visible(t: dict) -> dict:
        """A tool as the model sees it at the start: deferred functions and
        namespaces by name and description."""
        if t.get("type") == "namespace":
            return {"type": "namespace", "name": t.get("name"), "description": t.get("description", ""),
                    "tools": [OpenAI.visible(f) for f in t.get("tools") or [] if not f.get("defer_loading")]}
        if t.get("defer_loading"):
            return {"type": t.get("type"), "name": t.get("name"), "description": t.get("description", "")}
        return t

    def cache(self, store: "_Cache", req: dict, _: Any, now: float) -> tuple[int, int, bool]:
        blocks = [canon(self.visible(t)) for t in req.get("tools") or []]
        ntools = len(blocks)
        if req.get("instructions"):
            blocks.append(canon({"instructions": req["instructions"]}))
        blocks += [canon(it) for it in req.get("input") or []]
        keys = chain(blocks)
        best = 0
        for k in range(len(blocks), 0, -1):
            if store.has(keys[k], now):
                best = k
                break
        cached = tokens(blocks[:best])
        cached = 0 if cached < MIN_CACHE_TOKENS else MIN_CACHE_TOKENS + (cached - MIN_CACHE_TOKENS) // 128 * 128
        for k in range(1, len(blocks) + 1):
            store.put(keys[k], now)
        return cached, tokens(blocks), cached > 0 and best >= ntools > 0


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a backend killed mid-request resets its connection: expected here


class ProviderStandin:
    """The stand-in server. ``records`` holds every request it answered;
    ``hooks`` maps a request number (1-based, per conversation) to a
    function called with the conversation before the model answers it (the
    test kills processes or writes to the engine there)."""

    def __init__(self, model: Optional[ScriptedModel] = None):
        self.model = model or ScriptedModel()
        self.records: list[Record] = []
        self.hooks: dict[tuple[str, int], Callable[[str], None]] = {}
        self._shapes = {"/v1/messages": Anthropic(), "/v1/responses": OpenAI()}
        self._caches = {"anthropic": _Cache(), "openai": _Cache()}
        self._seen_hashes: dict[str, dict[str, float]] = {"anthropic": {}, "openai": {}}
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n)
                status, reply = standin.handle(self.path, body, self.headers.get(PREFIX_HEADER, ""))
                data = json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    self.close_connection = True  # the backend was killed while waiting

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, path: str, body: bytes, engine_hash: str) -> tuple[int, dict]:
        shape = self._shapes.get(path)
        if shape is None:
            return 404, {"error": {"type": "not_found_error", "message": f"no route {path}"}}
        try:
            req = json.loads(body)
        except ValueError as e:
            return 400, self._error(shape.name, "json", f"body is not JSON: {e}")
        conv = self.model.conversation(shape.name, req)
        with self._lock:
            self._counts[conv] = self._counts.get(conv, 0) + 1
            n = self._counts[conv]
            rec = Record(n=len(self.records) + 1, shape=shape.name, conversation=conv, status=400,
                         engine_prefix_hash=engine_hash)
            self.records.append(rec)
        hook = self.hooks.pop((conv, n), None)
        if hook is not None:
            hook(conv)
        with self._lock:
            try:
                defined = shape.validate(req)
            except Refused as e:
                rec.rule, rec.error = e.rule, str(e)
                return 400, self._error(shape.name, e.rule, str(e))
            now = time.monotonic()
            rec.cached_tokens, rec.total_tokens, rec.tools_cached = shape.cache(self._caches[shape.name], req, defined, now)
            seen = self._seen_hashes[shape.name]
            rec.engine_cached = bool(engine_hash) and seen.get(engine_hash, 0) > now
            if engine_hash:
                seen[engine_hash] = now + CACHE_TTL
            rec.status = 200
        reply, rec.action = self.model.reply(shape.name, req, rec)
        rec.response_id = reply["id"]
        return 200, reply

    @staticmethod
    def _error(shape: str, rule: str, message: str) -> dict:
        if shape == "anthropic":
            return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
        return {"error": {"type": "invalid_request_error", "message": message, "code": rule, "param": None}}
