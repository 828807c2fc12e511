"""Anthropic Messages API replies for :class:`loopback.LoopbackServer`, byte for byte.

Builders (stable names; other tests import them):

* :func:`stream_events` -- the Server-Sent Events of one streamed message, as a
  list of strings, so a test can cut, reorder or extend them;
* :func:`messages_stream` -- the same events as a ready :class:`loopback.Reply`;
* :func:`error_reply` -- an HTTP error with Anthropic's JSON error body;
* :func:`error_event` -- an ``error`` event sent in the middle of a stream.

The events follow the API's documented order: ``message_start``, ``ping``,
then per content block ``content_block_start``, its ``content_block_delta``
events, ``content_block_stop``; then ``message_delta`` (stop reason, final
usage) and ``message_stop``. Every event has its ``event:`` line, as the API
sends (the SDK skips events without one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from loopback import Reply, sse
from support import pieces

__all__ = [
    "API_KEY",
    "MODEL",
    "error_event",
    "error_reply",
    "messages_stream",
    "pieces",
    "stream_events",
]

MODEL = "claude-test-1"
"""The model name the builders report as served, unless given another."""

API_KEY = "sk-ant-test-0123456789abcdef"
"""A key for tests: long enough that redaction applies, and easy to look for."""


def _event(data: Mapping[str, Any]) -> str:
    return sse(data, event=str(data["type"]))


def stream_events(
    text: str = "",
    *,
    thinking: Sequence[tuple[str, str]] = (),
    redacted: Sequence[str] = (),
    tool_calls: Sequence[tuple[str, str, str]] = (),
    usage: Mapping[str, int] | None = None,
    stop_reason: str | None = None,
    model: str = MODEL,
    split: int = 3,
    finish: bool = True,
    pings: bool = True,
) -> list[str]:
    """The SSE events of one streamed message.

    Content blocks come in this order: ``thinking`` blocks (``(text,
    signature)``, the signature sent as a ``signature_delta``), ``redacted``
    thinking blocks (their opaque data), one text block when ``text`` is
    non-empty, then ``tool_calls`` (``(id, name, input_json)``; the JSON is
    sent as given, valid or not). Text, thinking and JSON are cut into deltas
    of at most ``split`` characters. ``usage`` holds the API's usage fields
    (``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``,
    ``cache_creation_input_tokens``); ``stop_reason`` defaults to ``tool_use``
    when there are tool calls, else ``end_turn``. ``finish=False`` leaves out
    ``message_delta`` and ``message_stop`` (append an :func:`error_event`, or
    nothing for a stream that just ends). ``pings`` adds ``ping`` events.
    """
    counts = {"input_tokens": 10, "output_tokens": 5, **(usage or {})}
    start_usage = {k: v for k, v in counts.items() if k != "output_tokens"}
    events = [
        _event(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_test_01",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {**start_usage, "output_tokens": 1},
                },
            }
        )
    ]
    if pings:
        events.append(_event({"type": "ping"}))
    index = 0

    def block(start: Mapping[str, Any], deltas: Sequence[Mapping[str, Any]]) -> None:
        nonlocal index
        events.append(
            _event({"type": "content_block_start", "index": index, "content_block": start})
        )
        for delta in deltas:
            events.append(_event({"type": "content_block_delta", "index": index, "delta": delta}))
        events.append(_event({"type": "content_block_stop", "index": index}))
        index += 1

    for thought, signature in thinking:
        deltas: list[Mapping[str, Any]] = [
            {"type": "thinking_delta", "thinking": p} for p in pieces(thought, split)
        ]
        deltas.append({"type": "signature_delta", "signature": signature})
        block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    for data in redacted:
        block({"type": "redacted_thinking", "data": data}, [])
    if text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in pieces(text, split)],
        )
    for call_id, name, input_json in tool_calls:
        block(
            {"type": "tool_use", "id": call_id, "name": name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in pieces(input_json, split)],
        )
    if not finish:
        return events
    if pings:
        events.append(_event({"type": "ping"}))
    reason = stop_reason or ("tool_use" if tool_calls else "end_turn")
    events.append(
        _event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": reason, "stop_sequence": None},
                "usage": counts,
            }
        )
    )
    events.append(_event({"type": "message_stop"}))
    return events


def messages_stream(
    text: str = "",
    *,
    thinking: Sequence[tuple[str, str]] = (),
    redacted: Sequence[str] = (),
    tool_calls: Sequence[tuple[str, str, str]] = (),
    usage: Mapping[str, int] | None = None,
    stop_reason: str | None = None,
    model: str = MODEL,
    split: int = 3,
    finish: bool = True,
    pings: bool = True,
    cut_after: int | None = None,
    event_delay: float = 0.0,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A 200 ``text/event-stream`` reply of :func:`stream_events` (same arguments).

    ``cut_after`` breaks the stream inside that event (see :class:`loopback.Reply`),
    ``event_delay`` waits between events, ``headers`` adds response headers.
    """
    events = stream_events(
        text,
        thinking=thinking,
        redacted=redacted,
        tool_calls=tool_calls,
        usage=usage,
        stop_reason=stop_reason,
        model=model,
        split=split,
        finish=finish,
        pings=pings,
    )
    return Reply(
        events=events,
        cut_after=cut_after,
        event_delay=event_delay,
        headers={"request-id": "req_test_01", **(headers or {})},
    )


def error_reply(
    status: int,
    error_type: str,
    message: str,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An HTTP error as the API sends it: ``{"type": "error", "error": {"type", "message"}}``."""
    body = {"type": "error", "error": {"type": error_type, "message": message}}
    return Reply(status=status, body=json.dumps(body), headers=dict(headers or {}))


def error_event(error_type: str = "overloaded_error", message: str = "Overloaded") -> str:
    """An ``error`` event, as the API sends mid-stream when it fails after the 200."""
    return _event({"type": "error", "error": {"type": error_type, "message": message}})
