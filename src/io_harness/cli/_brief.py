"""Text from a run in brief, as ``ioh``'s views print it: a line of it, a call's arguments,
a count, an outcome in its colour. Everything returned is markup-escaped."""

from __future__ import annotations

import json

from io_harness._terminal import escaped_json
from io_harness.cli._text import escape, shown

__all__ = ["call_arguments", "count", "one_line", "outcome_style"]

_SHOWN = 100
_ARGUMENT_CHARS = 40
"""How much of one argument's JSON a trace line shows; a longer one is cut, visibly."""


def one_line(text: str, limit: int = _SHOWN) -> str:
    """The first line of ``text``, cut at ``limit`` characters, `` ...`` when there is more."""
    # Escaped first: then only a newline breaks a line, and every other character that
    # could (a carriage return, U+2028) is shown where it is, not taken for an end.
    visible = shown(text).strip()
    first = visible.split("\n", 1)[0]
    more = len(visible) > len(first) or len(first) > limit
    return escape(first[:limit] + (" ..." if more else ""))


def outcome_style(outcome: str | None, status: str = "running") -> str:
    """A run's outcome in its colour, or its status while it has none."""
    if outcome is None:
        return f"[yellow]{escape(status)}[/]"
    colour = {"success": "green", "awaiting_approval": "yellow", "awaiting_answer": "yellow"}.get(
        outcome, "red"
    )
    return f"[{colour}]{escape(outcome)}[/]"


def count(n: int, one: str, many: str) -> str:
    """``1 pass``, ``3 passes``, ``1,200 tokens``."""
    return f"{n:,} {one if n == 1 else many}"


def call_arguments(raw: str) -> str:
    """A tool call's JSON arguments as ``name=value, ...`` (not escaped: the caller escapes
    the whole call); text that is not JSON is shown as it is."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    if isinstance(value, dict):
        return ", ".join(f"{k}={_argument(v)}" for k, v in value.items())
    return str(value)


def _argument(value: object) -> str:
    """One argument's JSON, cut with a count of what was left out when it is long."""
    text = escaped_json(json.dumps(value, ensure_ascii=False))
    if len(text) <= _ARGUMENT_CHARS:
        return text
    return f"{text[:_ARGUMENT_CHARS]}… [+{len(text) - _ARGUMENT_CHARS} chars]"
