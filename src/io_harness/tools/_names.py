"""The names the harness keeps for its own tools, and the form every tool name takes."""

from __future__ import annotations

import re

from io_harness._confined import MEMORY_PREFIX

__all__ = ["BUILTIN_TOOL_NAMES", "MCP_PREFIX", "MEMORY_PREFIX", "TOOL_NAME", "tool_name_problem"]

BUILTIN_TOOL_NAMES = frozenset(
    {
        "read_file",
        "write_file",
        "edit_file",
        "grep",
        "find",
        "list_dir",
        "exec",
        "read_skill",
        "remember",
        "forget",
        "spawn_agent",
        "ask_user",
    }
)
"""Every tool the harness offers itself, whether or not a run has it: no caller tool takes one."""

MCP_PREFIX = "mcp__"
"""The prefix of an MCP server's tools (``mcp__<server>__<tool>``): no caller tool takes it."""


TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
"""The names every vendor accepts for a tool."""


def tool_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a caller's tool, or ``None`` when it can."""
    if not isinstance(name, str) or not name.strip():
        return "the name is empty or blank"
    if name in BUILTIN_TOOL_NAMES:
        return f"{name!r} is the name of a built-in tool"
    if name.startswith(MCP_PREFIX):
        return f"the prefix {MCP_PREFIX!r} is kept for MCP servers' tools"
    if not TOOL_NAME.fullmatch(name):
        return f"{name!r} is not 1-64 of a-z, A-Z, 0-9, '_' and '-' (what the vendors accept)"
    return None
