"""An MCP server's tool as the harness runs it: :class:`McpTool`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from io_harness.messages import ToolSpec
from io_harness.policy._gate import Access
from io_harness.policy._rules import Act
from io_harness.tools._base import HarnessTool, ToolContext, ToolOutcome
from io_harness.tools._caller import CallerArgs

__all__ = ["McpTool", "ToolCaller", "capped"]


class ToolCaller(Protocol):
    """What answers an :class:`McpTool`'s calls: the session of its server."""

    async def call(self, tool: str, arguments: dict[str, Any], name: str) -> ToolOutcome:
        """Call ``tool`` (the server's name for it; ``name`` is the offered one); never raises."""
        ...


class McpTool(HarnessTool[CallerArgs]):
    """One tool of one MCP server, offered as ``mcp__<server>__<tool>``.

    Its description and input schema are the server's, verbatim; the server
    checks the arguments. A call is an ``exec`` of the offered name for the
    policy and, for a server reached over HTTP, a ``net`` of its ``host:port``
    too, so an ``ask_net`` on the server's host asks (or defers) before the
    call like any act. Everything that can go wrong -- a timeout, an error
    result, a server that died -- is the call's observation.
    """

    kind = "mcp"
    args = CallerArgs

    def __init__(
        self,
        caller: ToolCaller,
        server: str,
        tool: str,
        spec: ToolSpec,
        connection: Access | None = None,
    ) -> None:
        self._caller = caller
        self._connection = connection
        """The ``net`` act a call makes (an HTTP server's); ``None`` for stdio."""
        self.server = server
        """The server's name."""
        self.tool = tool
        """The tool's name on its server."""
        self._spec = spec

    # ``name`` and ``description`` are class attributes of the built-ins; here
    # they are the server's, so each is a property with a setter that refuses.
    @property
    def name(self) -> str:
        """The offered name, ``mcp__<server>__<tool>``."""
        return self._spec.name

    @name.setter
    def name(self, value: str) -> None:
        raise AttributeError("an MCP tool's name is its server's and its own")

    def accesses(self, args: CallerArgs) -> Sequence[Access]:
        """An ``exec`` of the offered name, then the connection an HTTP server's call makes."""
        own = Access(Act.EXEC, self.name)
        return (own,) if self._connection is None else (own, self._connection)

    @property
    def description(self) -> str:
        """The server's description of the tool."""
        return self._spec.description

    @description.setter
    def description(self, value: str) -> None:
        raise AttributeError("an MCP tool's description is its server's")

    @property
    def spec(self) -> ToolSpec:
        """The offered name, with the server's description and input schema unchanged."""
        return self._spec

    async def invoke(self, args: CallerArgs, context: ToolContext) -> ToolOutcome:
        """Call the tool on its server."""
        return await self._caller.call(self.tool, dict(args.model_extra or {}), self.name)

    def __repr__(self) -> str:
        return f"McpTool({self.name!r})"


def capped(text: str, cap: int, what: str = "result") -> tuple[str, int]:
    """``text`` within ``cap`` characters and how many were cut; a cut is said, never silent."""
    if len(text) <= cap:
        return text, 0
    cut = len(text) - cap
    return (
        f"{text[:cap]}\n[... {cut} characters cut: the {what} was {len(text)} characters, "
        f"over this tool's cap of {cap} ...]",
        cut,
    )
