#!/usr/bin/env python3
"""A reference agent backend: whole conversations driven through the engine,
for the Anthropic Messages and the OpenAI Responses request shapes.

Per user message, one turn of the engine (docs/semantics.md#turns):

1. turn-begin freezes the session's tools for the turn.
2. Before each provider request, turn-dispatch gives the turn's rendering:
   ``rendering`` is the provider's tools array, sent as it is (deferred
   tools marked defer_loading, the cache breakpoint in place), and
   ``catalog_text`` goes into the system prompt.
3. The model's tool_search call goes to turn-discover with the model's
   input as it wrote it; the reply's ``output`` is the result the provider
   documents, returned as it is: tool_reference blocks in a tool_result
   (Anthropic), a tool_search_output item (OpenAI).
4. Before any other tool runs, turn-call-check says whether it may: a
   disabled or withheld tool is answered with the engine's note instead;
   an "ask" goes to the user (here the --approve policy), whose answer is
   recorded as a PermissionGranted event before the call is checked again.
5. When the model answers without calling a tool, turn-end closes the turn
   at that safe point, with its checkpoint.

The conversation is saved to --state after every step (written to a new
file and renamed over the old one, so a kill leaves one or the other).
Started again after a kill -9, the loop finds the message it was working
on, calls resume (which ends the turn the crash left open and restores the
loaded tools the last checkpoint recorded, or says per tool why not),
answers the tool calls the crash left without a result as interrupted
rather than running them twice, and finishes the message in a new turn.
The engine's client retries while the engine itself restarts. A write whose
reply was lost (OutcomeUnknownError) is settled by reading the session for
turn-begin and turn-end; for any other the loop exits, and its restart
resumes as after a kill.

Usage: user messages on stdin, one a line; one JSON line per step on stdout.

    python3 examples/agent_loop.py --shape anthropic --session s1 \\
        --engine http://127.0.0.1:7420 --provider https://api.anthropic.com --state s1.json

Tools run through ``run_tool``, a placeholder that only echoes: a real
backend puts its tools there. Needs only the Python standard library and
the tool_engine package (pip install ./clients/python).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import urllib.parse
from typing import Any, Callable, Optional

try:
    import tool_engine  # noqa: F401
except ImportError:  # run from a checkout without pip install ./clients/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
from tool_engine import Client, NoTurnError, OutcomeUnknownError, RetryPolicy, commands
from tool_engine.replies import CallCheckReply, DiscoverReply, TurnView

SYSTEM = "You are a helpful assistant working in the user's project."
INTERRUPTED = "interrupted: the backend restarted before this call ran; call it again if it is still needed"
PREFIX_HEADER = "X-Engine-Prefix-Hash"  # tracing: the engine's prefix hash of the request's tools


class Call:
    """A call the model made: ``search`` (tool_search) or a tool, by its engine name."""

    def __init__(self, kind: str, call_id: str, name: str, args: Any):
        self.kind, self.id, self.name, self.input = kind, call_id, name, args


class AnthropicMessages:
    """The Anthropic Messages shape (POST /v1/messages)."""

    provider = "anthropic"
    path = "/v1/messages"

    def request(self, view: TurnView, history: list, session: str, model: str) -> dict:
        messages = json.loads(json.dumps(history))
        last = messages[-1]["content"]
        last[-1]["cache_control"] = {"type": "ephemeral"}  # caches the conversation so far
        system = SYSTEM + ("\n\n" + view.catalog_text if view.catalog_text else "")
        return {"model": model, "max_tokens": 4096, "system": [{"type": "text", "text": system}],
                "tools": view.rendering, "messages": messages, "metadata": {"user_id": session}}

    def headers(self) -> dict:
        return {"x-api-key": os.environ.get("ANTHROPIC_API_KEY", ""), "anthropic-version": "2023-06-01",
                "anthropic-beta": "advanced-tool-use-2025-11-20"}

    def user(self, history: list, text: str) -> None:
        history.append({"role": "user", "content": [{"type": "text", "text": text}]})

    def assistant(self, history: list, reply: dict) -> list[Call]:
        history.append({"role": "assistant", "content": reply["content"]})
        return self.open_calls(history)

    def open_calls(self, history: list) -> list[Call]:
        """The calls of the last assistant message (none when a user message follows it)."""
        if not history or history[-1]["role"] != "assistant":
            return []
        return [Call("search" if b["name"] == "tool_search" else "tool", b["id"], b["name"], b.get("input") or {})
                for b in history[-1]["content"] if b.get("type") == "tool_use"]

    def results(self, history: list, answers: list[tuple[Call, Any, bool]]) -> None:
        blocks = []
        for call, content, is_error in answers:
            block = {"type": "tool_result", "tool_use_id": call.id, "content": content}
            if is_error:
                block["is_error"] = True
            blocks.append(block)
        history.append({"role": "user", "content": blocks})

    def search_result(self, call: Call, found: DiscoverReply) -> Any:
        return found.output  # tool_reference blocks (and a text block with the engine's note)

    def text(self, value: str) -> Any:
        return [{"type": "text", "text": value}]

    def interrupted(self, call: Call) -> Any:
        return self.text(INTERRUPTED)

    def finished(self, history: list) -> bool:
        return bool(history) and history[-1]["role"] == "assistant" and not self.open_calls(history)


class OpenAIResponses:
    """The OpenAI Responses shape (POST /v1/responses), stateless (store false)."""

    provider = "openai"
    path = "/v1/responses"

    def request(self, view: TurnView, history: list, session: str, model: str) -> dict:
        instructions = SYSTEM + ("\n\n" + view.catalog_text if view.catalog_text else "")
        return {"model": model, "instructions": instructions, "input": history, "tools": view.rendering,
                "store": False, "prompt_cache_key": session}

    def headers(self) -> dict:
        return {"Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")}

    def user(self, history: list, text: str) -> None:
        history.append({"role": "user", "content": text})

    def assistant(self, history: list, reply: dict) -> list[Call]:
        for item in reply["output"]:
            # Items of a response that is not stored go back without their ids.
            history.append({k: v for k, v in item.items() if k not in ("id", "status")})
        return self.open_calls(history)

    def open_calls(self, history: list) -> list[Call]:
        """The calls after the last user message that have no output yet."""
        answered = {it.get("call_id") for it in history if it.get("type") in ("function_call_output", "tool_search_output")}
        calls = []
        for it in history:
            if it.get("call_id") in answered:
                continue
            if it.get("type") == "tool_search_call":
                calls.append(Call("search", it["call_id"], "tool_search", it.get("arguments") or {}))
            elif it.get("type") == "function_call":
                ns = it.get("namespace")
                name = f"mcp__{ns}__{it['name']}" if ns else it["name"]  # the engine's name of a namespaced tool
                calls.append(Call("tool", it["call_id"], name, json.loads(it.get("arguments") or "{}")))
        return calls

    def results(self, history: list, answers: list[tuple[Call, Any, bool]]) -> None:
        for call, content, _ in answers:
            if call.kind == "search":
                history.append(content)
            else:
                history.append({"type": "function_call_output", "call_id": call.id, "output": content})

    def search_result(self, call: Call, found: DiscoverReply) -> Any:
        return found.output  # the tool_search_output item, with the call's id

    def text(self, value: str) -> Any:
        return value

    def interrupted(self, call: Call) -> Any:
        if call.kind == "search":  # a search's answer is an item of its own, here loading nothing
            return {"type": "tool_search_output", "call_id": call.id, "execution": "client", "status": "completed",
                    "tools": []}
        return self.text(INTERRUPTED)

    def finished(self, history: list) -> bool:
        last = history[-1] if history else {}
        return last.get("type", "message") == "message" and last.get("role") == "assistant"


SHAPES = {"anthropic": AnthropicMessages, "openai": OpenAIResponses}


def run_tool(name: str, args: Any) -> str:
    """Runs a tool the engine allowed. A placeholder: a real backend runs its
    tool here (with the permission wrapper call-check named)."""
    return f"{name} ran with {json.dumps(args, sort_keys=True)}"


class AgentLoop:
    """One session's conversation with one provider shape."""

    def __init__(self, engine: Client, provider_url: str, shape: Any, session: str, state_path: str, *,
                 model: str, approve: Callable[[str, CallCheckReply], Optional[str]],
                 emit: Callable[[dict], None]):
        self.engine, self.shape, self.session = engine, shape, session
        self.provider = urllib.parse.urlsplit(provider_url)
        self.state_path, self.model, self.approve, self.emit = state_path, model, approve, emit
        self.state = {"session": session, "shape": shape.provider, "history": [], "pending": None, "turns": 0}
        if os.path.exists(state_path):
            with open(state_path, encoding="utf-8") as f:
                self.state = json.load(f)

    @property
    def history(self) -> list:
        return self.state["history"]

    def save(self) -> None:
        tmp = self.state_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)

    def chat(self, text: str) -> None:
        """Handles one user message: one turn."""
        self.state["pending"] = text
        self.shape.user(self.history, text)
        self.save()
        self.run_turn()

    def recover(self) -> None:
        """After a restart: finishes the message a kill interrupted, if any."""
        if self.state["pending"] is None:
            return
        out = self.engine.resume(self.session)
        self.emit({"event": "resumed", "ok": out.outcome.ok, "restored": out.outcome.restored,
                   "reason": out.outcome.reason, "seq": out.seq})
        if self.shape.finished(self.history):  # killed after the answer, before the state said so
            self.finish(recovered=True)
            return
        calls = self.shape.open_calls(self.history)
        if calls:
            self.shape.results(self.history, [(c, self.shape.interrupted(c), True) for c in calls])
            self.save()
        self.run_turn()

    def run_turn(self) -> None:
        view = self.begin()
        while True:
            view = self.engine.turn_dispatch(self.session, provider=self.shape.provider)
            reply = self.post(self.shape.request(view, self.history, self.session, self.model), view.prefix_hash)
            usage = reply.get("usage") or {}
            cached = usage.get("cache_read_input_tokens", (usage.get("input_tokens_details") or {}).get("cached_tokens", 0))
            total = usage.get("input_tokens", 0) + usage.get("cache_read_input_tokens", 0)
            self.emit({"event": "provider_request", "turn": view.turn, "response": reply.get("id"),
                       "prefix_hash": view.prefix_hash, "cached_share": round(cached / total, 3) if total else 0.0})
            calls = self.shape.assistant(self.history, reply)
            self.save()
            if not calls:
                break
            self.shape.results(self.history, [self.answer(c) for c in calls])
            self.save()
        self.end(view.turn)
        self.finish()

    def finish(self, recovered: bool = False) -> None:
        self.state["pending"] = None
        self.state["turns"] += 1
        self.save()
        self.emit({"event": "turn_done", "turns": self.state["turns"], "recovered": recovered})

    def begin(self) -> TurnView:
        before = self.engine.intent(self.session).turn
        try:
            view = self.engine.turn_begin(self.session, provider=self.shape.provider)
        except OutcomeUnknownError:
            # The engine may have begun the turn before its reply was lost.
            st = self.engine.intent(self.session)
            if not (st.in_turn and st.turn > before):
                view = self.engine.turn_begin(self.session, provider=self.shape.provider)
            else:
                view = self.engine.turn_dispatch(self.session, provider=self.shape.provider)
        self.emit({"event": "turn_begun", "turn": view.turn, "prefix_hash": view.prefix_hash,
                   "loaded": view.loaded, "registry": view.registry_version})
        return view

    def end(self, turn: int) -> None:
        try:
            out = self.engine.turn_end(self.session)
            self.emit({"event": "turn_ended", "turn": turn, "loaded": out.checkpoint.loaded_deferred_tools})
        except NoTurnError:
            self.emit({"event": "turn_ended", "turn": turn, "already": True})  # a retry after a lost reply
        except OutcomeUnknownError:
            st = self.engine.intent(self.session)
            if st.in_turn and st.turn == turn:
                self.end(turn)

    def answer(self, call: Call) -> tuple[Call, Any, bool]:
        """The result of one call: the search's documented output, the
        tool's result, or the engine's reason it may not run."""
        if call.kind == "search":
            found = self.engine.turn_discover(self.session, input=call.input, provider=self.shape.provider,
                                              call_id=call.id)
            self.emit({"event": "discovered", "input": call.input, "loaded": found.loaded, "note": found.note})
            return call, self.shape.search_result(call, found), False
        check = self.engine.turn_call_check(self.session, call.name)
        asked = None
        if check.reason == "ask":
            asked = self.approve(call.name, check)
            if asked:
                self.engine.append(self.session, [commands.grant(call.name, asked, self.engine.actor or "user",
                                                                 check.turn)])
                check = self.engine.turn_call_check(self.session, call.name)
        self.emit({"event": "tool", "name": call.name, "reason": check.reason, "decision": check.decision,
                   "asked": asked, "ran": check.callable})
        if not check.callable:
            return call, self.shape.text(f"not run: {check.note}"), True
        return call, self.shape.text(run_tool(call.name, call.input)), False

    def post(self, body: dict, prefix_hash: str) -> dict:
        """Sends one request to the provider and returns its reply."""
        u = self.provider
        cls = http.client.HTTPSConnection if u.scheme == "https" else http.client.HTTPConnection
        conn = cls(u.hostname, u.port, timeout=300)
        try:
            headers = {"Content-Type": "application/json", PREFIX_HEADER: prefix_hash, **self.shape.headers()}
            conn.request("POST", u.path.rstrip("/") + self.shape.path, body=json.dumps(body), headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise RuntimeError(f"provider answered {resp.status}: {data[:500].decode('utf-8', 'replace')}")
        return json.loads(data)


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=sorted(SHAPES), required=True)
    p.add_argument("--session", required=True)
    p.add_argument("--state", required=True, help="file the conversation is saved to")
    p.add_argument("--engine", default="http://127.0.0.1:7420")
    p.add_argument("--provider", required=True, help="base URL of the provider's API")
    p.add_argument("--model", default="")
    p.add_argument("--channel", default="web")
    p.add_argument("--actor", default="user")
    p.add_argument("--approve", choices=["once", "session", "deny"], default="deny",
                   help="the answer to a tool the channel policy asks about")
    p.add_argument("--engine-wait", type=float, default=120.0, help="seconds to keep retrying an engine that is down")
    a = p.parse_args(argv)
    shape = SHAPES[a.shape]()
    engine = Client(a.engine, channel=a.channel, actor=a.actor,
                    retry=RetryPolicy(max_attempts=100000, deadline=a.engine_wait, max_delay=1.0))

    def emit(event: dict) -> None:
        print(json.dumps(event), flush=True)

    loop = AgentLoop(engine, a.provider, shape, a.session, a.state, model=a.model or
                     {"anthropic": "claude-sonnet-4-5", "openai": "gpt-5.4"}[a.shape],
                     approve=lambda tool, check: None if a.approve == "deny" else a.approve, emit=emit)
    loop.recover()
    emit({"event": "ready", "turns": loop.state["turns"]})
    for line in sys.stdin:
        if line.strip():
            loop.chat(line.rstrip("\n"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
