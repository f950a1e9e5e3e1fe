"""The provider stand-in refuses what the providers refuse and caches what
they cache: each rule and each cache case on a request built by hand."""

from __future__ import annotations

import copy
import json
import unittest
import urllib.request

from .provider_standin import ProviderStandin
from .scripted_model import parse

LONG = "Reads a file and returns its lines. " * 150  # about 1,300 tokens: above the cache minimum


def a_tools() -> list:
    return [
        {"name": "read_file", "description": LONG, "input_schema": {"type": "object", "properties": {
            "path": {"type": "string"}}, "required": ["path"]}},
        {"name": "tool_search", "description": "Loads deferred tools.", "input_schema": {"type": "object"},
         "cache_control": {"type": "ephemeral"}},
        {"name": "send_message", "description": "Sends a message.", "input_schema": {"type": "object"},
         "defer_loading": True},
    ]


def a_req(messages: list, tools: list = None) -> dict:
    return {"model": "m", "max_tokens": 10, "system": [{"type": "text", "text": "be brief"}],
            "tools": a_tools() if tools is None else tools, "messages": messages, "metadata": {"user_id": "conv"}}


USER = {"role": "user", "content": [{"type": "text", "text": "hi [script: say=ok]"}]}
SEARCH = [USER,
          {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "tool_search",
                                             "input": {"names": ["send_message"]}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                        "content": [{"type": "tool_reference", "tool_name": "send_message"}]}]},
          {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "send_message", "input": {}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "sent"}]}]


def o_tools() -> list:
    return [
        {"type": "function", "name": "read_file", "description": LONG, "parameters": {"type": "object"}, "strict": False},
        {"type": "function", "name": "send_message", "description": "Sends a message.",
         "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}, "strict": False, "defer_loading": True},
        {"type": "namespace", "name": "github", "description": "GitHub.", "tools": [
            {"type": "function", "name": "create_issue", "description": "Creates an issue.",
             "parameters": {"type": "object"}, "strict": False, "defer_loading": True}]},
        {"type": "tool_search", "execution": "client", "description": "Search.", "parameters": {"type": "object"}},
    ]


def o_req(items: list, tools: list = None) -> dict:
    return {"model": "m", "instructions": "be brief", "input": items, "tools": o_tools() if tools is None else tools,
            "store": False, "prompt_cache_key": "conv"}


O_USER = {"role": "user", "content": "hi [script: say=ok]"}


class StandinTest(unittest.TestCase):
    def setUp(self):
        self.s = ProviderStandin()
        self.addCleanup(self.s.close)

    def post(self, path: str, req: dict, prefix: str = "") -> tuple[int, dict]:
        status, reply = self.s.handle(path, json.dumps(req).encode(), prefix)
        return status, reply

    def refused(self, path: str, req: dict, rule: str) -> None:
        status, reply = self.post(path, req)
        self.assertEqual(status, 400, reply)
        self.assertEqual(self.s.records[-1].rule, rule, self.s.records[-1].error)

    # Anthropic: the rules.

    def test_anthropic_accepts_a_search_and_its_call(self):
        status, reply = self.post("/v1/messages", a_req(SEARCH))
        self.assertEqual(status, 200, reply)
        self.assertEqual(reply["type"], "message")

    def test_anthropic_refuses_undefined_tool_use(self):
        msgs = copy.deepcopy(SEARCH)
        msgs[3]["content"][0]["name"] = "bash"
        self.refused("/v1/messages", a_req(msgs), "tool-use-defined")

    def test_anthropic_refuses_undefined_tool_reference(self):
        tools = [t for t in a_tools() if t["name"] != "send_message"]
        self.refused("/v1/messages", a_req(SEARCH[:3], tools), "tool-reference-defined")

    def test_anthropic_refuses_unanswered_tool_use(self):
        msgs = SEARCH[:2] + [{"role": "user", "content": [{"type": "text", "text": "go on"}]}]
        self.refused("/v1/messages", a_req(msgs), "tool-use-paired")

    def test_anthropic_refuses_result_without_use(self):
        msgs = [USER, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}]}]
        self.refused("/v1/messages", a_req(msgs), "tool-result-paired")

    def test_anthropic_deferral_rules(self):
        tools = a_tools()
        for t in tools:
            t["defer_loading"] = True
        self.refused("/v1/messages", a_req([USER], tools), "defer-all")
        tools = a_tools()
        tools[1]["defer_loading"] = True
        self.refused("/v1/messages", a_req([USER], tools), "defer-search")

    def test_anthropic_tool_names_and_breakpoints(self):
        tools = a_tools() + [dict(a_tools()[0])]
        self.refused("/v1/messages", a_req([USER], tools), "tool-name-unique")
        msgs = [{"role": "user", "content": [{"type": "text", "text": str(i), "cache_control": {"type": "ephemeral"}}
                                              for i in range(4)]}]
        self.refused("/v1/messages", a_req(msgs), "cache-breakpoints")

    # Anthropic: the cache.

    def test_anthropic_cache_follows_the_documented_prefix(self):
        first = a_req(SEARCH)
        self.post("/v1/messages", first)
        self.assertFalse(self.s.records[-1].tools_cached)
        self.post("/v1/messages", first)
        self.assertTrue(self.s.records[-1].tools_cached)
        # A deferred tool's definition is not in the prefix: the tools stay cached;
        # it is expanded at its tool_reference, so the messages after it do not.
        changed = a_req(SEARCH)
        changed["tools"][2]["description"] = "Sends a message to another session."
        self.post("/v1/messages", changed)
        rec = self.s.records[-1]
        self.assertTrue(rec.tools_cached)
        self.assertLess(rec.cached_tokens, rec.total_tokens)
        # A resident tool's change breaks the tools prefix.
        resident = a_req(SEARCH)
        resident["tools"][0]["description"] += " Now with line numbers."
        self.post("/v1/messages", resident)
        self.assertFalse(self.s.records[-1].tools_cached)
        self.assertEqual(self.s.records[-1].cached_tokens, 0)

    def test_anthropic_no_cache_below_the_minimum(self):
        tools = a_tools()
        tools[0]["description"] = "Reads a file."
        for _ in range(2):
            self.post("/v1/messages", a_req([USER], tools))
        self.assertEqual((self.s.records[-1].tools_cached, self.s.records[-1].cached_tokens), (False, 0))

    def test_engine_verdict_is_a_hash_seen_before(self):
        for h in ("a", "b", "a"):
            self.post("/v1/messages", a_req([USER]), prefix=h)
        self.assertEqual([r.engine_cached for r in self.s.records], [False, False, True])

    # OpenAI: the rules.

    def test_openai_accepts_calls_of_defined_and_loaded_functions(self):
        items = [O_USER,
                 {"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": {"query": "issue"}},
                 {"type": "tool_search_output", "call_id": "s1", "execution": "client", "status": "completed",
                  "tools": [{"type": "function", "name": "close_issue", "description": "Closes.", "parameters": {}}]},
                 {"type": "function_call", "call_id": "c1", "name": "create_issue", "namespace": "github", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c1", "output": "ok"},
                 {"type": "function_call", "call_id": "c2", "name": "close_issue", "arguments": "{}"},
                 {"type": "function_call_output", "call_id": "c2", "output": "ok"}]
        status, reply = self.post("/v1/responses", o_req(items))
        self.assertEqual(status, 200, reply)
        self.assertEqual(reply["object"], "response")

    def test_openai_refuses_undefined_and_unpaired_calls(self):
        call = {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"}
        out = {"type": "function_call_output", "call_id": "c1", "output": "ok"}
        self.refused("/v1/responses", o_req([O_USER, call, out]), "function-defined")
        call["name"] = "create_issue"  # defined only inside the github namespace
        self.refused("/v1/responses", o_req([O_USER, call, out]), "function-defined")
        call["namespace"] = "github"
        self.refused("/v1/responses", o_req([O_USER, call]), "call-answered")
        self.refused("/v1/responses", o_req([O_USER, out]), "output-paired")

    def test_openai_deferral_needs_tool_search(self):
        tools = [t for t in o_tools() if t["type"] != "tool_search"]
        self.refused("/v1/responses", o_req([O_USER], tools), "defer-needs-search")

    # OpenAI: the cache.

    def test_openai_cache_sees_deferred_tools_by_name_and_description(self):
        self.post("/v1/responses", o_req([O_USER]))
        self.post("/v1/responses", o_req([O_USER]))
        self.assertTrue(self.s.records[-1].tools_cached)
        self.assertEqual((self.s.records[-1].cached_tokens - 1024) % 128, 0)
        params = o_req([O_USER])
        params["tools"][1]["parameters"]["properties"]["text"] = {"type": "string"}
        self.post("/v1/responses", params)
        self.assertTrue(self.s.records[-1].tools_cached)
        described = o_req([O_USER])
        described["tools"][1]["description"] = "Sends a message to a session."
        self.post("/v1/responses", described)
        self.assertFalse(self.s.records[-1].tools_cached)

    # The scripted model and the HTTP server.

    def test_script_and_http(self):
        self.assertEqual(parse("x [script: search=a b; call=bash; say=done] y"),
                         [("search", "a b"), ("call", "bash"), ("say", "done")])
        req = a_req([{"role": "user", "content": [{"type": "text", "text": "[script: call=read_file]"}]}])
        http_req = urllib.request.Request(self.s.url + "/v1/messages", data=json.dumps(req).encode(),
                                          headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(http_req, timeout=30) as r:
            reply = json.load(r)
        self.assertEqual(reply["stop_reason"], "tool_use")
        self.assertEqual(reply["content"][0]["name"], "read_file")
        self.assertEqual(reply["content"][0]["input"], {"path": "path-value"})
        o = o_req([{"role": "user", "content": "[script: call=mcp__github__create_issue]"}])
        status, out = self.post("/v1/responses", o)
        self.assertEqual(status, 200)
        self.assertEqual((out["output"][0]["namespace"], out["output"][0]["name"]), ("github", "create_issue"))


if __name__ == "__main__":
    unittest.main()
