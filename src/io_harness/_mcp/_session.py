"""The run's MCP sessions: one per server, opened at the start and closed at the end.

:class:`McpSessions` starts every server at once (:meth:`McpSessions.open`),
offers their tools (:meth:`~McpSessions.tools`), re-lists a server's tools when
it announces a change (:meth:`~McpSessions.refresh`), keeps what happened as
:class:`McpEvent` records for the trace and closes everything
(:meth:`~McpSessions.close`). Each server's own session (its tools, its
calls, its one restart) is a :class:`~io_harness._mcp._server.ServerSession`.

Nothing here raises during a run: only :meth:`McpSessions.open` does, before
the first provider call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from io_harness._mcp._config import McpServer, check_servers
from io_harness._mcp._connection import StartFailed
from io_harness._mcp._events import McpEvent
from io_harness._mcp._sandboxed import ServerSandbox
from io_harness._mcp._server import ServerSession
from io_harness.errors import ConfigError, McpError
from io_harness.tools._base import HarnessTool

__all__ = ["McpSessions", "StartCheck", "check_sandboxes"]

StartCheck = Callable[[McpServer], str | None]
"""Whether a server may be started: ``None``, or why not (the policy's refusal)."""


def check_sandboxes(servers: Sequence[McpServer], sandbox: ServerSandbox | None) -> None:
    """:class:`ConfigError` for each server with ``sandbox = true`` that cannot be contained."""
    problems = []
    for server in servers:
        if not server.sandbox:
            continue
        if sandbox is None:
            problems.append(
                f"MCP server {server.name!r} asks for sandbox = true, but no sandbox was given "
                "to run it in (a run gives its own)"
            )
        elif (problem := sandbox.problem(server)) is not None:
            problems.append(problem)
    if problems:
        raise ConfigError("; ".join(problems))


class McpSessions:
    """The run's MCP sessions, one per server: opened together, closed together.

    Use :meth:`open` (or ``async with await McpSessions.open(servers)``). The
    sessions live in tasks of their own, so any task of the event loop may
    call the tools; :meth:`close` must be awaited on the same loop, and is
    safe to call more than once and from a cancelled task.
    """

    def __init__(
        self,
        servers: Sequence[McpServer],
        may_start: StartCheck | None = None,
        sandbox: ServerSandbox | None = None,
    ) -> None:
        """Sessions not yet started; :meth:`open` builds and starts them."""
        self._events: list[McpEvent] = []
        self._servers = [ServerSession(s, self._events, may_start, sandbox) for s in servers]
        self._closed = False

    @classmethod
    async def open(
        cls,
        servers: Sequence[McpServer],
        *,
        may_start: StartCheck | None = None,
        sandbox: ServerSandbox | None = None,
    ) -> McpSessions:
        """Start every server at once, answer the handshake and list each one's tools.

        ``may_start`` is asked before a server is started again after it
        died (the caller checked the first starts): a refusal, as text, leaves
        the server gone. ``sandbox`` is where servers with ``sandbox = true``
        run; such a server without one, or one that sandbox cannot hold, is a
        :class:`~io_harness.errors.ConfigError` before anything starts. A
        server that cannot start, answer or list its tools is an
        :class:`~io_harness.errors.McpError` naming it, with the end of its
        stderr; a bad or duplicate name, or a tool whose offered name would be
        too long, is a :class:`~io_harness.errors.ConfigError`. Either way
        every server already started is closed first. So is every server when
        the opening task is cancelled.
        """
        servers = list(servers)
        check_servers(servers)
        check_sandboxes(servers, sandbox)
        sessions = cls(servers, may_start, sandbox)
        try:
            outcomes = await asyncio.gather(
                *(server.start() for server in sessions._servers), return_exceptions=True
            )
        except BaseException:
            await sessions.close()
            raise
        failures = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
        if failures:
            await sessions.close()
            config = [str(f) for f in failures if isinstance(f, ConfigError)]
            if config:
                raise ConfigError("; ".join(config))
            started = [str(f) for f in failures if isinstance(f, StartFailed)]
            if len(started) == len(failures):
                raise McpError("\n".join(started))
            raise next(f for f in failures if not isinstance(f, StartFailed))
        return sessions

    @property
    def servers(self) -> tuple[str, ...]:
        """The servers' names, in the order they were given."""
        return tuple(server.name for server in self._servers)

    def tools(self) -> list[HarnessTool[Any]]:
        """Every tool of every server, as offered now (``mcp__<server>__<tool>``, kind ``mcp``)."""
        return [tool for server in self._servers for tool in server.tools.values()]

    def status(self) -> dict[str, str]:
        """Each server's state: ``running``; ``stopped`` (it is started again at the next call
        of one of its tools); ``gone`` (it stopped after its one restart); ``closed``."""
        return {server.name: server.status() for server in self._servers}

    @property
    def changed(self) -> bool:
        """Whether :meth:`refresh` has news: a server announced new tools, or was restarted
        with other tools than it had."""
        return any(server.announced or server.changed for server in self._servers)

    async def refresh(self) -> bool:
        """Re-list the tools of each server that announced a change; whether :meth:`tools` changed.

        Meant to be awaited before each model call; without news it does no I/O.
        It never raises: a listing that fails keeps the tools as they were (an
        event says so), a tool whose name cannot be offered is left out (the
        ``list`` event names it and why).
        """
        changed = False
        for server in self._servers:
            changed = await server.refresh() or changed
        return changed

    def take_events(self) -> list[McpEvent]:
        """The events since the last call, handed over in order."""
        taken = self._events[:]
        del self._events[: len(taken)]
        return taken

    async def close(self) -> None:
        """End every session: stdio servers are stopped (their process groups killed if they
        linger), HTTP sessions ended. Idempotent; never raises but for cancellation, and a
        cancelled close still ends every session (each ends in a task of its own)."""
        self._closed = True
        await asyncio.gather(*(server.close() for server in self._servers))

    async def __aenter__(self) -> McpSessions:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"McpSessions({list(self.servers)!r})"
