"""Anthropic Messages API wire format: canonical requests out, raw stream events in.

Pure functions and one small state machine, no I/O: :func:`request_params`
builds the keyword arguments of ``messages.create``; :class:`StreamAssembler`
folds the raw stream events (``message_start``, ``content_block_*``,
``message_delta``, ``message_stop``) into :class:`StreamDelta` pieces and the
final :class:`CompletionResponse`; :func:`stream_error` types an ``error``
event sent in the middle of a stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from io_harness._arguments import json_text
from io_harness.errors import ProviderError, ProviderErrorKind
from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    ContentBlock,
    FinishReason,
    Message,
    StreamDelta,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
)
from io_harness.providers._http import body_message, is_context_overflow
from io_harness.providers._vendor import parse_arguments

__all__ = [
    "FINISH_REASONS",
    "StreamAssembler",
    "request_params",
    "stream_error",
    "wire_messages",
]

FINISH_REASONS: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_use",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "refusal",
}
"""Anthropic's ``stop_reason`` values and the canonical finish reason each means."""

# error.type of an ``error`` event -> the kind of failure it is.
_ERROR_KINDS: dict[str, ProviderErrorKind] = {
    "overloaded_error": "server",
    "api_error": "server",
    "rate_limit_error": "rate_limited",
    "authentication_error": "auth",
    "permission_error": "auth",
    "invalid_request_error": "bad_request",
    "not_found_error": "bad_request",
    "request_too_large": "bad_request",
    "billing_error": "bad_request",
    "timeout_error": "timeout",
}

WireRole = Literal["user", "assistant"]


# --- canonical -> wire ---------------------------------------------------------------


def request_params(
    request: CompletionRequest,
    *,
    model: str,
    cache_system: bool = True,
    thinking_budget: int | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``messages.create`` for ``request`` (without ``stream``).

    The system prompt is one text block, marked for prompt caching when
    ``cache_system``; with a ``thinking_budget`` extended thinking is on,
    ``max_tokens`` grows by the budget and ``temperature`` is left out (the
    API refuses it with thinking).
    """
    system_parts = [request.system] if request.system else []
    system_parts += [m.text for m in request.messages if m.role == "system" and m.text]
    params: dict[str, Any] = {
        "model": request.model or model,
        "max_tokens": request.max_tokens,
        "messages": wire_messages(request.messages),
    }
    if system_parts:
        block: dict[str, Any] = {"type": "text", "text": "\n\n".join(system_parts)}
        if cache_system:
            block["cache_control"] = {"type": "ephemeral"}
        params["system"] = [block]
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.parameters}
            for t in request.tools
        ]
    if thinking_budget is not None:
        params["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
        params["max_tokens"] = thinking_budget + request.max_tokens
    elif request.temperature is not None:
        params["temperature"] = request.temperature
    return params


def wire_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """The ``messages`` array: canonical turns as Anthropic turns.

    A ``tool`` turn becomes a ``user`` turn of ``tool_result`` blocks, and
    consecutive turns of one wire role merge into one (the API wants the
    roles to alternate). Blocks the API would refuse are dropped: empty text,
    and thinking without a signature (another vendor's reasoning).
    """
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue  # folded into the system prompt by request_params
        role: WireRole = "assistant" if message.role == "assistant" else "user"
        blocks = [b for b in (_wire_block(block) for block in message.content) if b is not None]
        if not blocks:
            continue
        if wire and wire[-1]["role"] == role:
            wire[-1]["content"].extend(blocks)
        else:
            wire.append({"role": role, "content": blocks})
    return wire


def _wire_block(block: ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text} if block.text else None
    if isinstance(block, ThinkingBlock):
        if not block.signature:
            return None  # unsigned reasoning (another vendor's): the API would reject it
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature}
        return {"type": "thinking", "thinking": block.text, "signature": block.signature}
    if isinstance(block, ToolCall):
        arguments = block.arguments if isinstance(block.arguments, dict) else {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": arguments}
    return {  # a ToolResult
        "type": "tool_result",
        "tool_use_id": block.tool_use_id,
        "content": block.content,
        "is_error": block.is_error,
    }


# --- wire -> canonical ---------------------------------------------------------------


def stream_error(body: object, secrets: Iterable[str | None] = ()) -> ProviderError:
    """The typed error an ``error`` event in the middle of a stream amounts to.

    ``body`` is the event's data (``{"type": "error", "error": {"type": ...,
    "message": ...}}``, or whatever text came instead).
    """
    error = body.get("error") if isinstance(body, Mapping) else None
    error_type = error.get("type") if isinstance(error, Mapping) else None
    message = body_message(body if body is not None else "", secrets)
    kind = _ERROR_KINDS.get(error_type, "server") if isinstance(error_type, str) else "server"
    if kind == "bad_request" and is_context_overflow(message):
        kind = "context_overflow"
    return ProviderError(kind, f"error event in the stream: {message}")


def _malformed(what: str) -> ProviderError:
    return ProviderError("bad_response", f"the event stream is malformed: {what}")


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass
class _Block:
    """A content block being streamed."""

    kind: Literal["text", "thinking", "redacted_thinking", "tool_use"]
    signature: str = ""
    call_id: str = ""
    name: str = ""
    ordinal: int = 0  # the tool call's place among the answer's tool calls
    parts: list[str] = field(default_factory=list)

    def finish(self) -> ContentBlock | None:
        text = "".join(self.parts)
        if self.kind == "text":
            return TextBlock(text=text) if text else None
        if self.kind == "thinking":
            return ThinkingBlock(text=text, signature=self.signature or None)
        if self.kind == "redacted_thinking":
            return ThinkingBlock(text="", signature=self.signature or None, redacted=True)
        return ToolCall(id=self.call_id, name=self.name, arguments=parse_arguments(text))


class StreamAssembler:
    """Folds raw Messages stream events into deltas and, at the end, the whole answer.

    Feed each event's data (a JSON object) to :meth:`feed`, which returns the
    deltas it carries; after the last event :meth:`response` returns the
    answer, or raises ``bad_response`` if the stream never finished.
    ``secrets`` are scrubbed from the message of an ``error`` event.
    """

    def __init__(self, *, model: str = "", secrets: Iterable[str | None] = ()) -> None:
        self.model = model
        self._secrets = tuple(secrets)
        self._blocks: dict[int, _Block] = {}
        self._skipped: set[int] = set()  # blocks of kinds the harness does not use
        self._tool_calls = 0
        self._usage: dict[str, int] = {}
        self._reasoning_tokens = 0
        self._stop_reason: str | None = None
        self._started = False
        self.finished = False

    def feed(self, event: object) -> list[StreamDelta]:
        """Take one event; return the deltas it carries (often none)."""
        if not isinstance(event, Mapping):
            raise _malformed(f"an event is {type(event).__name__}, not a JSON object")
        kind = event.get("type")
        if self.finished or kind == "ping":
            return []
        if kind == "error":
            raise stream_error(event, self._secrets)
        if kind == "message_start":
            self._message_start(event.get("message"))
            return []
        if not self._started:
            raise _malformed(f"{kind!r} before message_start")
        if kind == "content_block_start":
            return self._block_start(event)
        if kind == "content_block_delta":
            return self._block_delta(event)
        if kind == "content_block_stop":
            index = self._index(event)
            if index not in self._blocks and index not in self._skipped:
                raise _malformed(f"content_block_stop for block {index}, which never started")
            return []
        if kind == "message_delta":
            self._message_delta(event)
        elif kind == "message_stop":
            self.finished = True
        return []  # events this mapping does not know are skipped, as the API asks

    def response(self) -> CompletionResponse:
        """The whole answer; ``bad_response`` if the stream ended before ``message_stop``."""
        if not self._started:
            raise _malformed("no message_start: the body is not a Messages event stream")
        if not self.finished:
            raise ProviderError(
                "bad_response", "the event stream ended before message_stop: the answer is cut off"
            )
        if self._stop_reason is None:
            raise _malformed("the message stopped without a stop_reason")
        content = [self._blocks[i].finish() for i in sorted(self._blocks)]
        read = self._usage.get("cache_read_input_tokens", 0)
        written = self._usage.get("cache_creation_input_tokens", 0)
        usage = Usage(
            input_tokens=self._usage.get("input_tokens", 0) + read + written,
            output_tokens=self._usage.get("output_tokens", 0),
            cache_read_tokens=read,
            cache_write_tokens=written,
            reasoning_tokens=self._reasoning_tokens,
        )
        return CompletionResponse(
            content=tuple(b for b in content if b is not None),
            usage=usage,
            model=self.model,
            finish_reason=FINISH_REASONS.get(self._stop_reason, "stop"),
        )

    def _message_start(self, message: object) -> None:
        if not isinstance(message, Mapping):
            raise _malformed("message_start without a message")
        self._started = True
        self.model = _str(message.get("model")) or self.model
        self._take_usage(message.get("usage"))

    def _message_delta(self, event: Mapping[str, Any]) -> None:
        delta = event.get("delta")
        if isinstance(delta, Mapping) and isinstance(delta.get("stop_reason"), str):
            self._stop_reason = delta["stop_reason"]
        self._take_usage(event.get("usage"))

    def _take_usage(self, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self._usage[key] = value  # counts are cumulative: the latest wins
        details = usage.get("output_tokens_details")
        if isinstance(details, Mapping) and "thinking_tokens" in details:
            self._reasoning_tokens = _int(details.get("thinking_tokens"))

    def _index(self, event: Mapping[str, Any]) -> int:
        index = event.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise _malformed(f"{event.get('type')} without an index")
        return index

    def _block_start(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        index = self._index(event)
        wire = event.get("content_block")
        if not isinstance(wire, Mapping):
            raise _malformed("content_block_start without a content_block")
        kind = wire.get("type")
        if kind == "text":
            block = _Block("text")
            return self._grow(index, block, _str(wire.get("text")), "text")
        if kind == "thinking":
            block = _Block("thinking", signature=_str(wire.get("signature")))
            return self._grow(index, block, _str(wire.get("thinking")), "thinking")
        if kind == "redacted_thinking":
            self._blocks[index] = _Block("redacted_thinking", signature=_str(wire.get("data")))
            return []
        if kind == "tool_use":
            call_id, name = _str(wire.get("id")), _str(wire.get("name"))
            if not call_id or not name:
                raise _malformed("a tool_use block without an id or a name")
            block = _Block("tool_use", call_id=call_id, name=name, ordinal=self._tool_calls)
            self._tool_calls += 1
            self._blocks[index] = block
            initial = wire.get("input")
            if isinstance(initial, Mapping) and initial:
                block.parts.append(json_text(dict(initial)))  # nested past json's recursion too
            first = StreamDelta(
                kind="tool_call",
                text="".join(block.parts),
                index=block.ordinal,
                call_id=call_id,
                name=name,
            )
            return [first]
        self._skipped.add(index)
        return []  # server tools and other blocks the harness does not use

    def _grow(
        self, index: int, block: _Block, text: str, kind: Literal["text", "thinking"]
    ) -> list[StreamDelta]:
        self._blocks[index] = block
        if not text:
            return []
        block.parts.append(text)
        return [StreamDelta(kind=kind, text=text)]

    def _block_delta(self, event: Mapping[str, Any]) -> list[StreamDelta]:
        index = self._index(event)
        block = self._blocks.get(index)
        delta = event.get("delta")
        if not isinstance(delta, Mapping):
            raise _malformed("content_block_delta without a delta")
        kind = delta.get("type")
        if block is None:
            if index in self._skipped:
                return []
            raise _malformed(f"a delta for block {index}, which never started")
        expected = {
            "text_delta": ("text", "text"),
            "thinking_delta": ("thinking", "thinking"),
            "input_json_delta": ("tool_use", "partial_json"),
            "signature_delta": ("thinking", "signature"),
        }.get(_str(kind))
        if expected is None:
            return []  # citations and other deltas the harness does not use
        block_kind, key = expected
        if block.kind != block_kind:
            raise _malformed(f"a {kind} for a {block.kind} block")
        piece = delta.get(key)
        if not isinstance(piece, str):
            raise _malformed(f"a {kind} without {key!r} text")
        if kind == "signature_delta":
            block.signature += piece
            return []
        if not piece:
            return []
        block.parts.append(piece)
        if block.kind == "tool_use":
            return [StreamDelta(kind="tool_call", text=piece, index=block.ordinal)]
        return [StreamDelta(kind="text" if block.kind == "text" else "thinking", text=piece)]
