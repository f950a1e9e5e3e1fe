"""The stand-in's model: it follows a script written in the user's message.

The last user message of a request that carries text holds the turn's
script, ``[script: STEP; STEP; ...]``, each step one of

- ``search=WORDS``: call tool_search with {"query": WORDS}
- ``load=NAME,NAME``: call tool_search with {"names": [...]}
- ``call=TOOL``: call TOOL, with a value for each required parameter
- ``say=TEXT``: answer TEXT and end the turn

The model reads where it is from the conversation itself: the number of
its own outputs since that user message is the index of the next step, so
a request sent again (a backend restarted after a kill) gets the same step,
as it would from a real model reading the same history. Once the script
runs out it answers "done" and ends the turn. Like a real model it reports
usage, here with the stand-in's cache figures.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

SCRIPT = re.compile(r"\[script:([^\]]*)\]")


def parse(text: str) -> list[tuple[str, str]]:
    """The steps of the script in ``text`` ([] when it has none)."""
    m = SCRIPT.search(text or "")
    if not m:
        return []
    steps = []
    for part in m.group(1).split(";"):
        kind, _, arg = part.strip().partition("=")
        if kind:
            steps.append((kind.strip(), arg.strip()))
    return steps


def example_input(schema: Any) -> dict:
    """A value for each required parameter of a JSON schema."""
    out: dict = {}
    if not isinstance(schema, dict):
        return out
    props = schema.get("properties") or {}
    for name in schema.get("required") or []:
        kind = (props.get(name) or {}).get("type")
        enum = (props.get(name) or {}).get("enum")
        out[name] = enum[0] if enum else {"integer": 1, "number": 1, "boolean": False, "array": [],
                                          "object": {}}.get(kind, f"{name}-value")
    return out


class ScriptedModel:
    """Answers a request with the next step of its script."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    @staticmethod
    def conversation(shape: str, req: dict) -> str:
        """The conversation a request belongs to: Anthropic's metadata.user_id,
        OpenAI's prompt_cache_key."""
        if shape == "anthropic":
            return str((req.get("metadata") or {}).get("user_id", ""))
        return str(req.get("prompt_cache_key", ""))

    def reply(self, shape: str, req: dict, rec: Any) -> tuple[dict, str]:
        """The response body and a one-line description of the step taken."""
        if shape == "anthropic":
            return self._anthropic(req, rec)
        return self._openai(req, rec)

    # Anthropic Messages.

    def _anthropic(self, req: dict, rec: Any) -> tuple[dict, str]:
        msgs = req["messages"]
        start = 0
        for i, m in enumerate(msgs):
            c = m.get("content")
            if m["role"] == "user" and (isinstance(c, str) or any(b.get("type") == "text" for b in c)):
                start = i
        c = msgs[start]["content"]
        text = c if isinstance(c, str) else " ".join(b.get("text", "") for b in c if b.get("type") == "text")
        done = sum(1 for m in msgs[start + 1:] if m["role"] == "assistant")
        steps = parse(text)
        kind, arg = steps[done] if done < len(steps) else ("say", "done")
        n = next(self._ids)
        schemas = {t["name"]: t.get("input_schema") for t in req.get("tools") or []}
        if kind in ("search", "load"):
            block = {"type": "tool_use", "id": f"toolu_{n:06d}", "name": "tool_search",
                     "input": {"query": arg} if kind == "search" else {"names": arg.split(",")}}
            content, stop, action = [block], "tool_use", f"tool_search {block['input']}"
        elif kind == "call":
            block = {"type": "tool_use", "id": f"toolu_{n:06d}", "name": arg, "input": example_input(schemas.get(arg))}
            content, stop, action = [block], "tool_use", f"call {arg}"
        else:
            content, stop, action = [{"type": "text", "text": arg or "done"}], "end_turn", "answer"
        usage = {"input_tokens": rec.total_tokens - rec.cached_tokens, "cache_read_input_tokens": rec.cached_tokens,
                 "cache_creation_input_tokens": 0, "output_tokens": 10}
        return {"id": f"msg_{n:06d}", "type": "message", "role": "assistant", "model": req.get("model", ""),
                "content": content, "stop_reason": stop, "usage": usage}, action

    # OpenAI Responses.

    def _openai(self, req: dict, rec: Any) -> tuple[dict, str]:
        items = req["input"]
        start = 0
        for i, it in enumerate(items):
            if it.get("type", "message") == "message" and it.get("role") == "user":
                start = i
        c = items[start].get("content")
        text = c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or [])
        done = sum(1 for it in items[start + 1:] if it.get("type") in ("function_call", "tool_search_call")
                   or (it.get("type", "message") == "message" and it.get("role") == "assistant"))
        steps = parse(text)
        kind, arg = steps[done] if done < len(steps) else ("say", "done")
        n = next(self._ids)
        if kind in ("search", "load"):
            out = {"type": "tool_search_call", "id": f"tsc_{n:06d}", "call_id": f"call_{n:06d}", "execution": "client",
                   "status": "completed",
                   "arguments": {"query": arg} if kind == "search" else {"names": arg.split(",")}}
            action = f"tool_search {out['arguments']}"
        elif kind == "call":
            ns, name, schema = self._function(req, items, arg)
            out = {"type": "function_call", "id": f"fc_{n:06d}", "call_id": f"call_{n:06d}", "name": name,
                   "arguments": json.dumps(example_input(schema), separators=(",", ":")), "status": "completed"}
            if ns:
                out["namespace"] = ns
            action = f"call {arg}"
        else:
            out = {"type": "message", "id": f"msg_{n:06d}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": arg or "done", "annotations": []}]}
            action = "answer"
        usage = {"input_tokens": rec.total_tokens, "input_tokens_details": {"cached_tokens": rec.cached_tokens},
                 "output_tokens": 10, "total_tokens": rec.total_tokens + 10}
        return {"id": f"resp_{n:06d}", "object": "response", "status": "completed", "model": req.get("model", ""),
                "output": [out], "usage": usage}, action

    @staticmethod
    def _function(req: dict, items: list, tool: str) -> tuple[str, str, Any]:
        """Where the model finds ``tool`` (an engine name; mcp__ns__name is
        function name in namespace ns): (namespace, name, parameters)."""
        ns, name = "", tool
        if tool.startswith("mcp__") and tool.count("__") >= 2:
            _, ns, name = tool.split("__", 2)
        pools = [req.get("tools") or []] + [it.get("tools") or [] for it in items if it.get("type") == "tool_search_output"]
        for pool in pools:
            for t in pool:
                if t.get("type") == "namespace" and t.get("name") == ns:
                    for f in t.get("tools") or []:
                        if f.get("name") == name:
                            return ns, name, f.get("parameters")
                elif not ns and t.get("type") == "function" and t.get("name") == name:
                    return "", name, t.get("parameters")
        return ns, name, None

