"""A tool call's arguments as the harness takes them in: a JSON object it can keep, or text.

Every answer enters the loop through :func:`admitted_response`, whatever the
provider: a vendor's wire (whose text :func:`parse_arguments` parses), a
scripted or a caller's own provider. Past it, a call's ``arguments`` is
either a JSON object every later step can serialise — the journal, the
message, the event, the wire back to the vendor — or text, which the tool
never sees: the model reads :func:`arguments_problem` instead, and the step
commits as any other.

The one bound is :data:`MAX_ARGUMENT_DEPTH`. It is far below what the parsers
and serialisers downstream refuse (``json`` near Python's recursion limit,
pydantic's serialiser at about 250 levels with the message around the
arguments), so a call that passes it never fails there; and far above what a
tool's schema asks for (a few levels).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from typing import Any

from io_harness.messages import (
    CompletionResponse,
    ContentBlock,
    ToolCall,
    storable,
    storable_response,
)

__all__ = [
    "MAX_ARGUMENT_DEPTH",
    "admitted_arguments",
    "admitted_response",
    "arguments_problem",
    "arguments_value_problem",
    "json_text",
    "parse_arguments",
]

MAX_ARGUMENT_DEPTH = 64
"""How many levels a call's arguments may nest: ``{"a": 1}`` is one, ``{"a": [1]}`` two."""

_SHOWN_CHARS = 500
_LONGEST_INTEGER_BITS = 14_000
"""Integers of more bits have more digits than Python writes (``sys.get_int_max_str_digits``)."""


class _Unusable(ValueError):
    """Valid-looking JSON the harness will not take: its reason is the model's to read."""


def parse_arguments(raw: str) -> dict[str, Any] | str:
    """A tool call's arguments from the model's text: the JSON object, ``{}`` for nothing,
    else the text (its lone surrogates escaped, so it can be stored), for the model to be
    told what is wrong with it (:func:`arguments_problem`)."""
    if not raw.strip():
        return {}
    text = storable(raw)
    if text is not raw:
        return text
    try:
        parsed = _strict_loads(raw)
    except (ValueError, RecursionError):
        return raw
    if not isinstance(parsed, dict) or _value_problem(parsed, text_only=True) is not None:
        return raw
    return parsed


def admitted_arguments(arguments: object) -> dict[str, Any] | str:
    """``arguments`` as the loop takes them: a JSON object within the bounds, else text.

    Text is parsed as a vendor's would be. A mapping with something JSON cannot
    keep (nesting past the bound, NaN, a set, a cycle, a key that is not text)
    becomes its text, written without recursion, so the model is told why.
    """
    if isinstance(arguments, str):
        return parse_arguments(arguments)
    if isinstance(arguments, dict) and _value_problem(arguments, text_only=False) is None:
        return arguments
    return json_text(arguments)


def admitted_response(response: CompletionResponse) -> CompletionResponse:
    """``response`` as the loop takes it in: each call's arguments admitted, every string
    storable (see :func:`~io_harness.messages.storable_response`); the same object when
    nothing needed changing, as it is for an ordinary answer."""
    blocks = tuple(_admitted_block(block) for block in response.content)
    if any(new is not old for new, old in zip(blocks, response.content, strict=True)):
        response = response.model_copy(update={"content": blocks})
    return storable_response(response)


def _admitted_block(block: ContentBlock) -> ContentBlock:
    if not isinstance(block, ToolCall):
        return block
    arguments = admitted_arguments(block.arguments)
    if arguments is block.arguments:
        return block
    return block.model_copy(update={"arguments": arguments})


def arguments_problem(raw: str) -> str:
    """Why the text ``raw`` is not arguments a tool can run with, as the model reads it."""
    cut = len(raw) - _SHOWN_CHARS
    shown = raw if cut <= 0 else f"{raw[:_SHOWN_CHARS]}... [+{cut} chars]"
    not_an_object = f"the arguments are not a JSON object: {shown!r}"
    try:
        parsed = _strict_loads(raw)
    except RecursionError:
        return _too_deep(_text_depth(raw))
    except _Unusable as exc:
        return str(exc)
    except json.JSONDecodeError as exc:
        if exc.msg.startswith("Invalid control character"):
            return (
                f"the arguments hold the control character U+{ord(raw[exc.pos]):04X} inside a "
                "string, which JSON must escape (as \\n, \\t or \\u00XX)"
            )
        return not_an_object
    except ValueError:  # an integer longer than Python reads
        return (
            f"the arguments hold an integer of more than {sys.get_int_max_str_digits()} "
            "digits; send it as a string"
        )
    if not isinstance(parsed, dict):
        return not_an_object
    return _value_problem(parsed, text_only=True) or not_an_object


def arguments_value_problem(arguments: dict[str, Any]) -> str | None:
    """What in a call's parsed ``arguments`` the loop would not have taken in, or ``None``:
    the check a stored message's calls pass when the store reads them back."""
    return _value_problem(arguments, text_only=False)


def _strict_loads(raw: str) -> Any:
    """``json.loads`` refusing what Python's parser lets through and JSON does not mean:
    NaN and Infinity, numbers past a float's range, and a key given twice."""
    return json.loads(
        raw,
        parse_constant=_no_constant,
        parse_float=_finite_float,
        object_pairs_hook=_unique_keys,
    )


def _no_constant(name: str) -> Any:
    raise _Unusable(
        f"the arguments hold {name}, which is not a JSON number; send a number or a string"
    )


def _finite_float(literal: str) -> float:
    value = float(literal)
    if math.isinf(value):
        shown = literal if len(literal) <= 40 else f"{literal[:40]}..."
        raise _Unusable(
            f"the arguments hold the number {shown}, beyond the range of a 64-bit float; "
            "send it as a string"
        )
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    mapping = dict(pairs)
    if len(mapping) == len(pairs):
        return mapping
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _Unusable(f"the arguments give the key {key!r} twice; send each key once")
        seen.add(key)
    raise AssertionError("unreachable: fewer keys than pairs means one came twice")


def _too_deep(depth: int) -> str:
    return (
        f"the arguments nest {depth} levels deep, past the limit of {MAX_ARGUMENT_DEPTH}; "
        "send them with less nesting"
    )


def _value_problem(value: dict[Any, Any], *, text_only: bool) -> str | None:
    """What in ``value`` JSON or the store cannot keep, or ``None``; walked without
    recursion, and no deeper than the bound, so a cycle ends the walk too. ``text_only``:
    a lone surrogate is a problem as well (parsed text must be Unicode; a mapping built
    in Python has its surrogates escaped later instead)."""
    stack: list[tuple[int, object]] = [(1, value)]
    while stack:
        depth, node = stack.pop()
        if isinstance(node, str):
            if text_only and not _unicode(node):
                return _lone_surrogate(node)
        elif isinstance(node, dict | list | tuple):
            if depth > MAX_ARGUMENT_DEPTH:
                return _too_deep(_deepest(value))
            if isinstance(node, list | tuple):
                stack.extend((depth + 1, item) for item in node)
                continue
            for key, item in node.items():
                if not isinstance(key, str):
                    return "the arguments hold a key that is not a string"
                if text_only and not _unicode(key):
                    return _lone_surrogate(key)
                stack.append((depth + 1, item))
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int):
            if node.bit_length() > _LONGEST_INTEGER_BITS:
                return "the arguments hold an integer too long to write; send it as a string"
        elif isinstance(node, float):
            if not math.isfinite(node):
                return f"the arguments hold {node}, which is not a JSON number"
        else:
            return f"the arguments hold a {type(node).__name__}, which JSON does not have"
    return None


def _lone_surrogate(text: str) -> str:
    return (
        f"the arguments hold a lone surrogate ({_surrogate(text)}), which is not Unicode "
        "text; send the character itself, or leave it out"
    )


def _deepest(value: object) -> int:
    """How many levels ``value`` nests (containers only), counted without recursion; a
    cycle counts as one level past the bound."""
    deepest = 0
    on_path: set[int] = set()
    stack: list[tuple[int, object] | int] = [(1, value)]
    while stack:
        item = stack.pop()
        if isinstance(item, int):
            on_path.discard(item)  # every container below this one is done
            continue
        depth, node = item
        if not isinstance(node, dict | list | tuple):
            continue
        if id(node) in on_path:
            return max(deepest, MAX_ARGUMENT_DEPTH + 1)
        deepest = max(deepest, depth)
        on_path.add(id(node))
        stack.append(id(node))
        members = node.values() if isinstance(node, dict) else node
        stack.extend((depth + 1, member) for member in members)
    return deepest


def _text_depth(raw: str) -> int:
    """How deep the brackets of JSON text nest, outside its strings; for text too deep to parse."""
    depth = deepest = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _unicode(text: str) -> bool:
    return text.isascii() or storable(text) is text


def _surrogate(text: str) -> str:
    return next(f"\\u{ord(c):04x}" for c in text if 0xD800 <= ord(c) <= 0xDFFF)


def json_text(value: object) -> str:
    """``value`` written as JSON text without recursion; what JSON cannot spell (NaN, a set,
    a key that is not a string, a cycle) is written so that the text does not parse."""
    parts: list[str] = []
    on_path: set[int] = set()
    stack: list[_Write] = [_Write(value)]
    while stack:
        item = stack.pop()
        node = item.value
        if item.text is not None:
            parts.append(item.text)  # punctuation a container pushed
            on_path.discard(item.leaving)
        elif not isinstance(node, dict | list | tuple):
            parts.append(_leaf(node))
        elif id(node) in on_path:
            parts.append("<cycle>")
        else:
            on_path.add(id(node))
            stack.extend(reversed(_container_writes(node)))
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class _Write:
    """One thing :func:`json_text` has still to write: a value, or text (closing a container
    when ``leaving`` names it)."""

    value: object = None
    text: str | None = None
    leaving: int = 0


def _container_writes(node: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[_Write]:
    close = _Write(text="}" if isinstance(node, dict) else "]", leaving=id(node))
    writes = [_Write(text="{" if isinstance(node, dict) else "[")]
    if isinstance(node, dict):
        for index, (key, member) in enumerate(node.items()):
            written = json.dumps(key) if isinstance(key, str) else _leaf(key)
            writes += [_Write(text=f"{', ' if index else ''}{written}: "), _Write(member)]
    else:
        for index, member in enumerate(node):
            writes += [_Write(text=", ") if index else _Write(text=""), _Write(member)]
    return [*writes, close]


def _leaf(value: object) -> str:
    if isinstance(value, str | bool | float) or value is None:
        return json.dumps(value)  # NaN and Infinity as Python writes them: not JSON
    if isinstance(value, int):
        if value.bit_length() <= _LONGEST_INTEGER_BITS:
            return str(value)
        return f"<int of {value.bit_length()} bits>"
    try:
        return f"<{type(value).__name__} {value!r}>"
    except Exception:  # a repr that fails still leaves the text whole
        return f"<{type(value).__name__}>"
