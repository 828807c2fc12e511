"""The provider-neutral message model.

The loop speaks only these types. Each provider maps them to and from its
vendor's wire format in its own module. Every type is a pydantic model that
round-trips through JSON unchanged, which is how the store keeps them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CompletionRequest",
    "CompletionResponse",
    "ContentBlock",
    "FinishReason",
    "Message",
    "MessageRole",
    "StreamDelta",
    "TextBlock",
    "ThinkingBlock",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "storable",
    "storable_response",
]

MessageRole = Literal["system", "user", "assistant", "tool"]
FinishReason = Literal["stop", "tool_use", "length", "refusal", "content_filter"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextBlock(_Frozen):
    """Plain text from the user or the model."""

    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Frozen):
    """The model's reasoning, carried back to providers that require it.

    ``signature`` is the vendor's opaque token for the block, when it has one.
    A ``redacted`` block's reasoning was withheld by the vendor: ``text`` is
    empty and ``signature`` holds the opaque data to send back.
    """

    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None
    redacted: bool = False


class ToolCall(_Frozen):
    """The model asks for a tool to run.

    ``arguments`` is the parsed JSON object; when the model sent something
    that is not arguments a tool can run with (text that is not a JSON object,
    NaN, a key given twice, nesting past the harness's limit of 64 levels),
    it is that text, and the harness answers with an error result saying what
    is wrong instead of running the tool.
    """

    type: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class ToolResult(_Frozen):
    """The observation a tool call produced, addressed to the call by id."""

    type: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    content: str
    is_error: bool = False


ContentBlock = Annotated[
    TextBlock | ThinkingBlock | ToolCall | ToolResult, Field(discriminator="type")
]


class Message(_Frozen):
    """One turn of the conversation."""

    role: MessageRole
    content: tuple[ContentBlock, ...] = ()

    @classmethod
    def user(cls, text: str) -> Message:
        """A user turn holding one text block."""
        return cls(role="user", content=(TextBlock(text=text),))

    @property
    def text(self) -> str:
        """The text blocks joined, for display."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls this turn asks for, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolCall))


class ToolSpec(_Frozen):
    """A tool as the model is told about it: a name, what it does, its JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class Usage(_Frozen):
    """Token counts of one call, or the sum of many."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens: what a token budget draws down."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )


class CompletionRequest(_Frozen):
    """Everything a provider needs for one model call."""

    model: str
    system: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = 4096
    temperature: float | None = None


class StreamDelta(_Frozen):
    """A piece of an answer as it streams in, before the whole answer is known.

    ``kind`` says which part grows: ``text`` and ``thinking`` carry new text;
    ``tool_call`` carries a fragment of the JSON arguments of the call at
    ``index`` (its place among the answer's tool calls), with ``call_id`` and
    ``name`` on the first fragment. The text deltas of one answer, joined,
    equal the final answer's text.
    """

    kind: Literal["text", "thinking", "tool_call"]
    text: str = ""
    index: int = 0
    call_id: str | None = None
    name: str | None = None


class CompletionResponse(_Frozen):
    """One model answer in canonical form."""

    content: tuple[ContentBlock, ...] = ()
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    finish_reason: FinishReason = "stop"

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls in this answer, in order."""
        return tuple(b for b in self.content if isinstance(b, ToolCall))

    @property
    def text(self) -> str:
        """The text blocks joined."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))


def storable(text: str) -> str:
    """``text`` as the store can keep it: each lone surrogate (``\\ud800`` is valid JSON
    but no UTF-8) becomes a visible escape, ``\\ud800``; other text is returned as it is."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def _storable_value(value: Any) -> Any:
    if isinstance(value, str):
        return storable(value)
    if isinstance(value, dict):
        return {storable(str(k)): _storable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_storable_value(v) for v in value]
    return value


def storable_response(response: CompletionResponse) -> CompletionResponse:
    """``response`` with every string in it :func:`storable` (the same object when all are)."""
    if all(_encodes(text) for text in _response_strings(response)):
        return response  # as a rule: the walk is cheap, the rebuild is not
    return CompletionResponse.model_validate(_storable_value(response.model_dump()))


def _response_strings(response: CompletionResponse) -> Iterator[str]:
    yield response.model
    for block in response.content:
        if isinstance(block, TextBlock | ThinkingBlock):
            yield block.text
            if isinstance(block, ThinkingBlock) and block.signature is not None:
                yield block.signature
        elif isinstance(block, ToolCall):
            yield block.id
            yield block.name
            yield from _strings(block.arguments)
        else:
            yield block.tool_use_id
            yield block.content


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)


def _encodes(text: str) -> bool:
    return text.isascii() or storable(text) is text
