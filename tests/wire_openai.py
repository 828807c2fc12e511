"""Builders for OpenAI Chat Completions answers, as :class:`loopback.Reply` objects.

The bytes match what the Chat Completions API streams with
``stream_options={"include_usage": true}``: a first chunk with the
assistant role, content pieces of a few characters each, tool calls whose
argument JSON arrives in fragments (id, type and name on the first one), a
chunk with ``finish_reason``, a last chunk with ``choices: []`` and the
``usage``, then ``data: [DONE]``. Errors come as the API's JSON error body.

Names here are stable; other tests import them::

    from wire_openai import chat_stream, error_reply, usage

    with LoopbackServer([chat_stream(text="hi", usage=usage(10, 2))]) as server:
        ...
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loopback import Reply, sse
from support import pieces

__all__ = [
    "ToolCallSpec",
    "chat_chunk",
    "chat_events",
    "chat_stream",
    "error_reply",
    "pieces",
    "usage",
]

ToolCallSpec = tuple[str | None, str, str]
"""A streamed tool call: ``(id or None, name, arguments JSON text)``."""


def usage(
    prompt: int,
    completion: int,
    *,
    cached: int | None = None,
    reasoning: int | None = None,
    cache_write: int | None = None,
) -> dict[str, Any]:
    """A wire ``usage`` object; ``prompt`` already includes the ``cached`` tokens, as OpenAI's does.

    ``cache_write`` is OpenRouter's ``prompt_tokens_details.cache_write_tokens``.
    """
    body: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None or cache_write is not None:
        details: dict[str, Any] = {"cached_tokens": cached or 0, "audio_tokens": 0}
        if cache_write is not None:
            details["cache_write_tokens"] = cache_write
        body["prompt_tokens_details"] = details
    if reasoning is not None:
        body["completion_tokens_details"] = {"reasoning_tokens": reasoning, "audio_tokens": 0}
    return body


def chat_chunk(
    delta: Mapping[str, Any] | None = None,
    *,
    finish: str | None = None,
    model: str = "gpt-test",
    choices: bool = True,
    **extra: Any,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice (or none: ``choices=False``).

    ``extra`` adds top-level fields, e.g. ``usage=`` or llama.cpp's ``timings=``.
    """
    chunk: dict[str, Any] = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": model,
        "system_fingerprint": "fp_loopback",
        "choices": [],
    }
    if choices:
        chunk["choices"] = [
            {"index": 0, "delta": dict(delta or {}), "logprobs": None, "finish_reason": finish}
        ]
    chunk.update(extra)
    return chunk


def chat_events(
    text: str | None = None,
    *,
    thinking: str | None = None,
    thinking_field: str = "reasoning_content",
    tool_calls: Sequence[ToolCallSpec] = (),
    refusal: str | None = None,
    usage: Mapping[str, Any] | None = None,
    timings: Mapping[str, Any] | None = None,
    finish: str | None = "auto",
    model: str = "gpt-test",
    split: int = 3,
    interleave: bool = False,
    done: bool = True,
) -> list[str]:
    """The SSE events of one streamed answer, in the order the API sends them.

    ``thinking`` streams first in ``thinking_field`` (``reasoning_content``
    as vLLM, llama.cpp and DeepSeek send it, or ``reasoning`` as OpenRouter
    and Ollama do), then ``text``, then ``refusal``, then each tool call;
    every text and argument string is cut into pieces of ``split``
    characters. ``interleave`` alternates the fragments of parallel calls.
    ``finish`` is the finish reason (``"auto"``: ``tool_calls`` when there are
    calls, else ``stop``; ``None``: no finish chunk at all). ``usage`` goes in
    a last chunk with ``choices: []``; ``timings`` (llama.cpp) rides on the
    finish chunk. ``done=False`` leaves out ``data: [DONE]``.
    """
    chunks: list[dict[str, Any]] = [
        chat_chunk({"role": "assistant", "content": "", "refusal": None}, model=model)
    ]
    for piece in pieces(thinking or "", split):
        chunks.append(chat_chunk({thinking_field: piece}, model=model))
    for piece in pieces(text or "", split):
        chunks.append(chat_chunk({"content": piece}, model=model))
    for piece in pieces(refusal or "", split):
        chunks.append(chat_chunk({"refusal": piece}, model=model))
    streams: list[list[dict[str, Any]]] = []
    for index, (call_id, name, arguments) in enumerate(tool_calls):
        first: dict[str, Any] = {
            "index": index,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        if call_id is not None:
            first = {"index": index, "id": call_id, **first}
        fragments = [first] + [
            {"index": index, "function": {"arguments": piece}} for piece in pieces(arguments, split)
        ]
        streams.append(fragments)
    if interleave:
        longest = max((len(s) for s in streams), default=0)
        ordered = [s[i] for i in range(longest) for s in streams if i < len(s)]
    else:
        ordered = [fragment for s in streams for fragment in s]
    for fragment in ordered:
        chunks.append(chat_chunk({"tool_calls": [fragment]}, model=model))
    if finish == "auto":
        finish = "tool_calls" if tool_calls else "stop"
    if finish is not None:
        extra: dict[str, Any] = {"timings": dict(timings)} if timings is not None else {}
        chunks.append(chat_chunk({}, finish=finish, model=model, **extra))
    if usage is not None:
        chunks.append(chat_chunk(choices=False, model=model, usage=dict(usage)))
    events = [sse(chunk) for chunk in chunks]
    if done:
        events.append(sse("[DONE]"))
    return events


def chat_stream(
    text: str | None = None,
    *,
    thinking: str | None = None,
    thinking_field: str = "reasoning_content",
    tool_calls: Sequence[ToolCallSpec] = (),
    refusal: str | None = None,
    usage: Mapping[str, Any] | None = None,
    timings: Mapping[str, Any] | None = None,
    finish: str | None = "auto",
    model: str = "gpt-test",
    split: int = 3,
    interleave: bool = False,
    done: bool = True,
    headers: Mapping[str, str] | None = None,
    cut_after: int | None = None,
    event_delay: float = 0.0,
    delay: float = 0.0,
) -> Reply:
    """One streamed Chat Completions answer as a :class:`Reply` (see :func:`chat_events`).

    ``cut_after`` breaks the stream mid-event after that many events;
    ``delay`` and ``event_delay`` stall it (for timeout tests).
    """
    events = chat_events(
        text,
        thinking=thinking,
        thinking_field=thinking_field,
        tool_calls=tool_calls,
        refusal=refusal,
        usage=usage,
        timings=timings,
        finish=finish,
        model=model,
        split=split,
        interleave=interleave,
        done=done,
    )
    return Reply(
        events=events,
        headers=dict(headers or {}),
        cut_after=cut_after,
        event_delay=event_delay,
        delay=delay,
    )


def error_reply(
    status: int,
    message: str,
    code: str | None = None,
    *,
    type: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An API error: ``{"error": {"message", "type", "param", "code"}}`` with ``status``."""
    kind = type or ("rate_limit_exceeded" if status == 429 else "invalid_request_error")
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Reply(status=status, body=body, headers=dict(headers or {}))
