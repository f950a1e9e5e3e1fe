"""Builders of ``append`` commands: each returns the command object of one
event type (docs/api.md, "Overrides and commands"), named as the Go
client's constructors are.
"""

from __future__ import annotations

from typing import Optional


def enable() -> dict:
    """Master switch on: every default tool (ToolsToggled true)."""
    return {"type": "ToolsToggled", "enabled": True}


def disable() -> dict:
    """Master switch off: no tools, except web_search when its overlay is on."""
    return {"type": "ToolsToggled", "enabled": False}


def follow() -> dict:
    """Master switch unset: follow the agent profile."""
    return {"type": "ToolsToggled", "enabled": None}


def web_search(on: Optional[bool]) -> dict:
    """The web_search overlay: True adds web_search, False and None add nothing."""
    return {"type": "WebSearchSet", "enabled": on}


def preset(name: Optional[str]) -> dict:
    """Chooses a named preset (None: no preset)."""
    return {"type": "PresetChosen", "preset": name}


def disable_tool(name: str) -> dict:
    """Switches one tool off by hand."""
    return {"type": "ToolDisabled", "name": name}


def enable_tool(name: str) -> dict:
    """Takes a tool off the session's disabled list."""
    return {"type": "ToolEnabled", "name": name}


def pick(*names: str) -> dict:
    """An explicit, user-curated list of tools, in this order."""
    return {"type": "ToolsPicked", "names": list(names)}


def unpick() -> dict:
    """Drops the picked list."""
    return {"type": "ToolsPicked", "names": None}


def grant(tool: str, scope: str, by: str, turn: Optional[int] = None) -> dict:
    """A user's answer to an "ask" (PermissionGranted): ``scope`` "session"
    allows ``tool`` for the rest of the session, "once" in the turn ``turn``
    (the open turn)."""
    cmd = {"type": "PermissionGranted", "tool": tool, "scope": scope, "by": by}
    if turn is not None:
        cmd["turn"] = turn
    return cmd
