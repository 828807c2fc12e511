"""Test helpers shipped with the library: a scripted provider, response builders, and
:func:`check_sandbox`, which holds a sandbox of your own to the sandbox protocol.

Use them to test code that embeds io-harness, offline and deterministically::

    from io_harness.testing import ScriptedProvider, reply, call

    provider = ScriptedProvider([
        reply(calls=[call("write_file", content="print('hi')\\n")]),
        reply("done"),
    ])
    result = await run(contract, provider)
    provider.assert_exhausted()
    assert provider.requests[1].messages[-1].role == "tool"
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from io_harness.errors import ProviderError
from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    ContentBlock,
    TextBlock,
    ToolCall,
    Usage,
)

__all__ = [
    "SANDBOX_CASES",
    "SandboxCase",
    "SandboxCheck",
    "ScriptItem",
    "ScriptedProvider",
    "call",
    "check_sandbox",
    "reply",
]

if TYPE_CHECKING:
    from io_harness.sandbox._check import SANDBOX_CASES, SandboxCase, SandboxCheck, check_sandbox

_SANDBOX_CHECK = ("SANDBOX_CASES", "SandboxCase", "SandboxCheck", "check_sandbox")


def __getattr__(name: str) -> Any:
    # The sandbox check pulls in the sandbox: loaded only by who asks for it.
    if name in _SANDBOX_CHECK:
        from io_harness.sandbox import _check

        return getattr(_check, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


Responder = Callable[[CompletionRequest], CompletionResponse | Awaitable[CompletionResponse]]
ScriptItem = CompletionResponse | BaseException | Responder
"""One scripted answer: a response, an exception to raise, or a function of the request."""


def call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call for a scripted reply.

    Its id is left empty; :class:`ScriptedProvider` fills it with ``call_M_I``,
    where M is the length of the conversation it answers and I the call's
    place in the reply, so ids are unique within a run and the same on every
    replay and resume.
    """
    return ToolCall(id="", name=name, arguments=arguments)


def reply(
    text: str | None = None,
    calls: Sequence[ToolCall] = (),
    usage: Usage | None = None,
    *,
    model: str = "scripted",
) -> CompletionResponse:
    """A scripted model answer: optional text, then tool calls (none ends the turn)."""
    content: list[ContentBlock] = []
    if text is not None:
        content.append(TextBlock(text=text))
    content.extend(calls)
    return CompletionResponse(
        content=tuple(content),
        usage=usage or Usage(),
        model=model,
        finish_reason="tool_use" if calls else "stop",
    )


class ScriptedProvider:
    """A provider that answers from a script, in order; offline and deterministic.

    ``script`` is a list of items (a :class:`CompletionResponse`, an exception
    to raise, or a callable ``(CompletionRequest) -> CompletionResponse``,
    which may be async), or one callable that answers every request. Every
    request received is kept in :attr:`requests`. A call past the end of the
    script fails as a ``bad_request`` :class:`ProviderError` saying so.
    """

    def __init__(
        self,
        script: Sequence[ScriptItem] | Responder,
        *,
        name: str = "scripted",
        model: str = "scripted",
        context_window: int | None = None,
    ) -> None:
        self.name = name
        self.model = model
        self.context_window = context_window
        """Tokens the model takes in one request, for compaction (``None``: unknown)."""
        self.requests: list[CompletionRequest] = []
        self._responder: Responder | None = None
        self._items: list[ScriptItem] = []
        if callable(script) and not isinstance(script, Sequence):
            self._responder = script
        else:
            self._items = list(script)
        self._next = 0

    def endpoints(self) -> tuple[str, ...]:
        """None: a script connects nowhere."""
        return ()

    @property
    def remaining(self) -> int:
        """Items not yet used (0 for a single-callable script)."""
        return len(self._items) - self._next

    def assert_exhausted(self) -> None:
        """Fail (``AssertionError``) if scripted items were never used."""
        if self.remaining > 0:
            raise AssertionError(
                f"{self.remaining} of {len(self._items)} scripted items were never used"
            )

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        """The next scripted answer to ``request``."""
        self.requests.append(request)
        item: ScriptItem
        if self._responder is not None:
            item = self._responder
        elif self._next < len(self._items):
            item = self._items[self._next]
            self._next += 1
        else:
            raise ProviderError(
                "bad_request",
                f"the script has no answer for call {len(self.requests)} "
                f"(it holds {len(self._items)})",
            )
        if isinstance(item, BaseException):
            raise item
        if callable(item):
            answer = item(request)
            response = await answer if inspect.isawaitable(answer) else answer
        else:
            response = item
        return _with_call_ids(response, request)


def _with_call_ids(response: CompletionResponse, request: CompletionRequest) -> CompletionResponse:
    if not isinstance(response, CompletionResponse) or all(b.id for b in response.tool_calls):
        return response  # garbage passes through: the harness must be the one to refuse it
    # The conversation grows every turn, so its length tells turns apart in O(1).
    turn = len(request.messages)
    content: list[ContentBlock] = []
    for index, block in enumerate(response.content, start=1):
        if isinstance(block, ToolCall) and not block.id:
            content.append(block.model_copy(update={"id": f"call_{turn}_{index}"}))
        else:
            content.append(block)
    return response.model_copy(update={"content": tuple(content)})
