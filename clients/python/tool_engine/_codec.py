"""JSON to dataclasses and back, by the dataclasses' type hints.

Decoding is tolerant: a field the reply carries that the dataclass lacks
is ignored (the engine adds reply fields without a new API version), and a
field the reply leaves out keeps its default. A field whose JSON name is a
Python keyword (``from``) is declared with ``json_name`` metadata.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from typing import Any


def field(default: Any = None, *, json: str | None = None, factory: Any = None) -> Any:
    """A dataclass field with a default (or a default factory) and, when the
    JSON name differs from the attribute name, that name."""
    meta = {"json_name": json} if json else {}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def json_name(f: dataclasses.Field) -> str:
    """The JSON name of a dataclass field."""
    return f.metadata.get("json_name", f.name)


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def json_fields(cls: type) -> dict[str, tuple[str, Any]]:
    """The fields of a dataclass by JSON name: (attribute name, type hint)."""
    hints = _hints(cls)
    return {json_name(f): (f.name, hints[f.name]) for f in dataclasses.fields(cls)}


def decode(hint: Any, value: Any) -> Any:
    """Converts decoded JSON ``value`` to the type ``hint`` names: dataclasses
    from objects, lists and dicts of them, optional values; anything else as
    it is (``Any`` keeps raw JSON: lists, dicts, numbers, strings)."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return decode(args[0], value) if len(args) == 1 else value
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return [decode(item, v) for v in value] if isinstance(value, list) else value
    if origin is dict:
        _, item = typing.get_args(hint) or (str, Any)
        return {k: decode(item, v) for k, v in value.items()} if isinstance(value, dict) else value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_json(hint, value) if isinstance(value, dict) else value
    if hint is float and isinstance(value, int):
        return float(value)
    return value


def from_json(cls: type, data: dict) -> Any:
    """Builds dataclass ``cls`` from a decoded JSON object, ignoring unknown
    fields and keeping defaults for missing ones."""
    kwargs = {}
    for key, (attr, hint) in json_fields(cls).items():
        if key in data:
            kwargs[attr] = decode(hint, data[key])
    return cls(**kwargs)


def to_json(value: Any) -> Any:
    """Encodes a request value as JSON data: dataclasses as objects without
    their None fields (the API's optional fields are absent, not null),
    lists and dicts item by item."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is not None:
                out[json_name(f)] = to_json(v)
        return out
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return value
