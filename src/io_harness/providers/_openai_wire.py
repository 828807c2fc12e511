"""Chat Completions wire mapping: canonical requests out, streamed chunks back in.

Pure functions and one small accumulator, no I/O: :func:`wire_messages` and
:func:`wire_tools` build the request body, :class:`ChunkAssembler` folds the
streamed ``chat.completion.chunk`` objects into
:class:`~io_harness.messages.StreamDelta` pieces and, at the end, one
:class:`~io_harness.messages.CompletionResponse`.

Chunks are read attribute by attribute and type-checked here, because the
SDK builds them without validation and OpenAI-compatible servers add fields
of their own (``reasoning_content``, ``reasoning``, llama.cpp's ``timings``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from io_harness.errors import ProviderError
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
    ToolResult,
    ToolSpec,
    Usage,
)
from io_harness.providers._vendor import parse_arguments

if TYPE_CHECKING:  # the SDK's types describe the wire; the SDK itself loads with the first call
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageFunctionToolCallParam,
        ChatCompletionMessageParam,
    )

__all__ = ["ChunkAssembler", "wire_messages", "wire_tools"]

_FINISH: Mapping[str, FinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "length",
    "content_filter": "content_filter",
}
# Where compatible servers put the model's reasoning, in order of preference.
_THINKING_FIELDS = ("reasoning_content", "reasoning")
# The key for the deprecated single ``function_call`` delta among tool-call indexes.
_FUNCTION_CALL_INDEX = -1


def wire_messages(request: CompletionRequest) -> list[ChatCompletionMessageParam]:
    """The request's system prompt and conversation as Chat Completions messages.

    Thinking blocks are dropped (Chat Completions has no place for them);
    each tool result becomes its own ``tool`` message, ahead of any text the
    same turn carries, since tool messages must follow their assistant turn.
    """
    out: list[ChatCompletionMessageParam] = []
    if request.system:
        out.append({"role": "system", "content": request.system})
    for message in request.messages:
        out.extend(_wire_message(message))
    return out


def _wire_message(message: Message) -> list[ChatCompletionMessageParam]:
    if message.role == "assistant":
        return [_wire_assistant(message)]
    out: list[ChatCompletionMessageParam] = []
    for block in message.content:
        if isinstance(block, ToolResult):
            content = f"error: {block.content}" if block.is_error else block.content
            out.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
    has_text = any(isinstance(b, TextBlock) for b in message.content)
    if has_text or not out:
        if message.role == "system":
            out.append({"role": "system", "content": message.text})
        else:
            out.append({"role": "user", "content": message.text})
    return out


def _wire_assistant(message: Message) -> ChatCompletionAssistantMessageParam:
    calls: list[ChatCompletionMessageFunctionToolCallParam] = []
    for call in message.tool_calls:
        arguments = call.arguments
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": arguments},
            }
        )
    wire: ChatCompletionAssistantMessageParam = {"role": "assistant"}
    text = message.text
    wire["content"] = text if text or not calls else None
    if calls:
        wire["tool_calls"] = calls
    return wire


def wire_tools(tools: Sequence[ToolSpec]) -> list[ChatCompletionFunctionToolParam]:
    """The tools as Chat Completions ``function`` tools."""
    return [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.parameters,
            },
        }
        for tool in tools
    ]


def _get(obj: object, name: str) -> object:
    """A field of an SDK object, or ``None``; extra fields and mappings work too."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _count(value: object) -> int:
    if isinstance(value, bool):
        return 0
    if isinstance(value, int | float):
        return max(0, int(value))
    return 0


@dataclass
class _Call:
    id: str | None
    name: str
    arguments: list[str] = field(default_factory=list)


class ChunkAssembler:
    """Folds one streamed answer, chunk by chunk, into deltas and a final response.

    Feed every chunk to :meth:`feed`, which returns the deltas it carries;
    then :meth:`finish` builds the answer, or raises a ``bad_response``
    :class:`~io_harness.errors.ProviderError` for a stream that never said
    why it stopped.
    """

    def __init__(self, request: CompletionRequest) -> None:
        self._request = request
        self._chunks = 0
        self._text: list[str] = []
        self._thinking: list[str] = []
        self._calls: list[_Call] = []
        self._slot_of: dict[int, int] = {}  # the wire's call index -> place in _calls
        self._finish: str | None = None
        self._refused = False
        self._model = ""
        self._usage: object = None
        self._timings: object = None

    def feed(self, chunk: object) -> list[StreamDelta]:
        """Take one chunk in; the deltas it carries, in order."""
        self._chunks += 1
        model = _str(_get(chunk, "model"))
        if model and not self._model:
            self._model = model
        usage = _get(chunk, "usage")
        if usage is not None:
            self._usage = usage
        timings = _get(chunk, "timings")
        if isinstance(timings, Mapping):
            self._timings = timings
        choices = _get(chunk, "choices")
        if not isinstance(choices, Sequence):
            return []
        deltas: list[StreamDelta] = []
        for choice in choices:
            if _get(choice, "index") not in (0, None):
                continue  # another candidate answer; only one is asked for
            deltas.extend(self._feed_delta(_get(choice, "delta")))
            finish = _str(_get(choice, "finish_reason"))
            if finish:
                self._finish = finish
        return deltas

    def _feed_delta(self, delta: object) -> list[StreamDelta]:
        out: list[StreamDelta] = []
        if delta is None:
            return out
        for name in _THINKING_FIELDS:
            thinking = _str(_get(delta, name))
            if thinking:
                self._thinking.append(thinking)
                out.append(StreamDelta(kind="thinking", text=thinking))
                break
        content = _str(_get(delta, "content"))
        if content:
            self._text.append(content)
            out.append(StreamDelta(kind="text", text=content))
        refusal = _str(_get(delta, "refusal"))
        if refusal:
            self._refused = True
            self._text.append(refusal)
            out.append(StreamDelta(kind="text", text=refusal))
        tool_calls = _get(delta, "tool_calls")
        if isinstance(tool_calls, Sequence) and not isinstance(tool_calls, str):
            for fragment in tool_calls:
                out.extend(self._feed_call(fragment, _get(fragment, "index")))
        function_call = _get(delta, "function_call")
        if function_call is not None:
            out.extend(self._feed_call({"function": function_call}, _FUNCTION_CALL_INDEX))
        return out

    def _feed_call(self, fragment: object, wire_index: object) -> list[StreamDelta]:
        call_id = _str(_get(fragment, "id")) or None
        function = _get(fragment, "function")
        name = _str(_get(function, "name")) or None
        arguments = _str(_get(function, "arguments")) or ""
        if not isinstance(wire_index, int) or isinstance(wire_index, bool):
            # No index: a fragment with an id starts a call, one without continues the last.
            wire_index = len(self._calls) if call_id or not self._calls else len(self._calls) - 1
        slot = self._slot_of.get(wire_index)
        current = self._calls[slot] if slot is not None else None
        if current is None or (call_id and current.id and call_id != current.id):
            # A new call (some servers reuse one index for parallel calls, each with its id).
            slot = len(self._calls)
            self._slot_of[wire_index] = slot
            self._calls.append(_Call(id=call_id, name=name or "", arguments=[arguments]))
            first = StreamDelta(
                kind="tool_call", text=arguments, index=slot, call_id=call_id, name=name
            )
            return [first]
        assert slot is not None
        current.id = current.id or call_id
        current.name = current.name or name or ""
        current.arguments.append(arguments)
        if not arguments:
            return []
        return [StreamDelta(kind="tool_call", text=arguments, index=slot)]

    def finish(self) -> CompletionResponse:
        """The whole answer; ``bad_response`` if the stream never finished it."""
        if self._chunks == 0:
            raise ProviderError(
                "bad_response",
                "the server sent no completion chunks: the answer is empty or not an event "
                "stream (is the base URL a Chat Completions API?)",
            )
        if self._finish is None:
            raise ProviderError(
                "bad_response",
                "the answer stream ended before the model finished: no finish_reason",
            )
        if self._finish == "error":
            raise ProviderError("server", "the server reported an error in mid-answer")
        content: list[ContentBlock] = []
        thinking = "".join(self._thinking)
        if thinking:
            content.append(ThinkingBlock(text=thinking))
        text = "".join(self._text)
        if text:
            content.append(TextBlock(text=text))
        turn = len(self._request.messages)
        for call in self._calls:
            position = len(content) + 1  # the same id scheme as ScriptedProvider
            content.append(
                ToolCall(
                    id=call.id or f"call_{turn}_{position}",
                    name=call.name,
                    arguments=parse_arguments("".join(call.arguments)),
                )
            )
        return CompletionResponse(
            content=tuple(content),
            usage=self._final_usage(),
            model=self._model or self._request.model,
            finish_reason=self._finish_reason(),
        )

    def _finish_reason(self) -> FinishReason:
        if self._refused:
            return "refusal"
        reason = _FINISH.get(self._finish or "")
        if reason is None or (reason == "stop" and self._calls):
            # Unknown reasons, and servers that say "stop" after calling tools.
            return "tool_use" if self._calls else "stop"
        return reason

    def _final_usage(self) -> Usage:
        usage = self._usage
        if usage is not None:
            prompt = _get(usage, "prompt_tokens_details")
            completion = _get(usage, "completion_tokens_details")
            return Usage(
                input_tokens=_count(_get(usage, "prompt_tokens")),
                output_tokens=_count(_get(usage, "completion_tokens")),
                cache_read_tokens=_count(_get(prompt, "cached_tokens")),
                cache_write_tokens=_count(_get(prompt, "cache_write_tokens")),
                reasoning_tokens=_count(_get(completion, "reasoning_tokens")),
            )
        timings = self._timings
        if timings is not None:
            # llama.cpp: prompt_n counts only the tokens it evaluated, cache_n those it reused.
            cached = _count(_get(timings, "cache_n"))
            return Usage(
                input_tokens=_count(_get(timings, "prompt_n")) + cached,
                output_tokens=_count(_get(timings, "predicted_n")),
                cache_read_tokens=cached,
            )
        return Usage()
