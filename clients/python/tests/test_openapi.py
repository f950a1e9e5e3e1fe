"""The client cannot drift from the engine: its operation table, the
methods' parameters, the request and reply dataclasses and the error
classes are read against the OpenAPI document the engine serves
(GET /v1/openapi.json), field by field and type by type."""

from __future__ import annotations

import dataclasses
import inspect
import json
import typing
import unittest
import urllib.request
from typing import Any

import tool_engine
from tool_engine import LIVE_OPERATIONS, OPERATIONS, Client
from tool_engine._codec import json_fields

from .engine import shared_engine

# Operations of the document the client does not call: the document itself,
# and the GET form of resolve (the client sends its POST form).
NOT_CALLED = {"openapi", "resolve-get"}

_LEAF = {"integer": int, "string": str, "boolean": bool, "number": float}


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """The type inside Optional[...], and whether it was optional."""
    if typing.get_origin(hint) in (typing.Union, getattr(__import__("types"), "UnionType")):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return args[0], True
    return hint, False


class OpenAPITest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        url = shared_engine().url + "/v1/openapi.json"
        with urllib.request.urlopen(url, timeout=30) as r:
            cls.doc = json.load(r)
        cls.ops = {}
        for path, item in cls.doc["paths"].items():
            for method, op in item.items():
                if isinstance(op, dict) and "operationId" in op:
                    cls.ops[op["operationId"]] = (method.upper(), path, op)

    def test_operations_match(self):
        served = set(self.ops) - NOT_CALLED
        table = {op.name for op in OPERATIONS + LIVE_OPERATIONS}
        self.assertEqual(table, served, "the client's operations differ from the engine's")
        for op in OPERATIONS + LIVE_OPERATIONS:
            method, path, doc = self.ops[op.name]
            self.assertEqual((op.method, op.path), (method, path), op.name)
            self.assertEqual(op.subject, doc.get("x-nats-subject"), op.name)
            self.assertTrue(callable(getattr(Client, op.method_name, None)), f"Client has no method {op.method_name}")

    def _request_schema(self, name: str) -> tuple[dict, set]:
        """The request's fields (body properties, query and path parameters)
        and the required ones."""
        _, _, doc = self.ops[name]
        fields: dict = {}
        required: set = set()
        for p in doc.get("parameters", []):
            if p["in"] in ("path", "query"):
                # A structured parameter (override) is JSON in the query: its
                # schema is under content.
                content = p.get("content", {}).get("application/json", {})
                fields[p["name"]] = p.get("schema", content.get("schema", {}))
                if p.get("required"):
                    required.add(p["name"])
        body = doc.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body:
            fields.update(body.get("properties", {}))
            required |= set(body.get("required", []))
        return fields, required

    def test_requests_and_methods_match(self):
        for op in OPERATIONS + LIVE_OPERATIONS:
            with self.subTest(op=op.name):
                fields, required = self._request_schema(op.name)
                mine = json_fields(op.request)
                if op.name == "events-live":
                    mine = {k: v for k, v in mine.items() if k != "session"}
                self.assertEqual(set(mine), set(fields), f"{op.request.__name__} fields")
                for key, schema in fields.items():
                    self._check_type(f"{op.name} request {key}", mine[key][1], schema)
                sig = inspect.signature(getattr(Client, op.method_name))
                params = {n: p for n, p in sig.parameters.items() if n not in ("self", "kwargs")}
                self.assertEqual(set(params), set(fields), f"Client.{op.method_name} parameters")
                needed = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
                self.assertEqual(needed, required, f"Client.{op.method_name} required parameters")

    def test_replies_match(self):
        for op in OPERATIONS:
            with self.subTest(op=op.name):
                _, _, doc = self.ops[op.name]
                schema = doc["responses"]["200"]["content"]["application/json"]["schema"]
                self._check_object(op.reply.__name__, op.reply, schema)

    def test_live_event_matches(self):
        for op in LIVE_OPERATIONS:
            _, _, doc = self.ops[op.name]
            stream = doc["responses"]["200"]["content"]["text/event-stream"]
            self._check_object("LiveEvent", op.reply, stream["x-event-data"])

    def test_error_codes_match(self):
        schema = self.doc["components"]["schemas"]["Error"]["properties"]["error"]
        self.assertEqual(list(tool_engine.ERRORS), schema["properties"]["code"]["enum"])
        for code, cls in tool_engine.ERRORS.items():
            self.assertTrue(issubclass(cls, tool_engine.EngineError))
            self.assertEqual(cls.code, code)

    def _check_object(self, where: str, cls: type, schema: dict) -> None:
        self.assertTrue(dataclasses.is_dataclass(cls), f"{where}: {cls} is not a dataclass")
        props = schema.get("properties", {})
        mine = json_fields(cls)
        self.assertEqual(set(mine), set(props), f"{where} ({cls.__name__}) fields")
        for key, sub in props.items():
            self._check_type(f"{where}.{key}", mine[key][1], sub)

    def _check_type(self, where: str, hint: Any, schema: dict) -> None:
        hint, _ = _unwrap(hint)
        if "properties" in schema:
            self._check_object(where, hint, schema)
            return
        if "oneOf" in schema:  # a command object
            self.assertIs(hint, dict, where)
            return
        kind = schema.get("type")
        if isinstance(kind, list):  # a string or an integer: until
            self.assertIs(hint, str, where)
            return
        if kind == "array":
            self.assertIs(typing.get_origin(hint), list, f"{where}: want a list, have {hint}")
            (item,) = typing.get_args(hint)
            self._check_type(where + "[]", item, schema.get("items", {}))
            return
        if kind == "object" and "additionalProperties" in schema:
            self.assertIs(typing.get_origin(hint), dict, f"{where}: want a dict, have {hint}")
            self._check_type(where + "{}", typing.get_args(hint)[1], schema["additionalProperties"])
            return
        if kind in _LEAF:
            self.assertIs(hint, _LEAF[kind], f"{where}: want {_LEAF[kind].__name__}, have {hint}")
            return
        if kind == "object":
            self.assertIn(hint, (dict, Any), where)
            return
        self.assertIs(hint, Any, f"{where}: any JSON value, have {hint}")


if __name__ == "__main__":
    unittest.main()
