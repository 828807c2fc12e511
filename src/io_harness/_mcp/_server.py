"""One MCP server's session across a run: its tools, its one restart, its events.

:class:`ServerSession` starts the server (:meth:`~ServerSession.start`),
offers its tools under their offered names, re-lists them when the server
announces a change (:meth:`~ServerSession.refresh`) and answers each call of
one of them (:meth:`~ServerSession.call`); every way a call can fail is the
call's observation, never an exception. What happens is appended to the
run's :class:`McpEvent` list.

A server that stops during a run is started again once, at the next call of
one of its tools (if the policy still lets it start), and that call's
observation says so; if it stops again, or cannot start, it is gone: its
tools answer that it is, for the rest of the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from io_harness._mcp._config import McpServer, tool_name, tool_name_problem
from io_harness._mcp._connection import Connection, StartFailed, describe_error
from io_harness._mcp._content import result_text
from io_harness._mcp._events import McpEvent, McpEventKind
from io_harness._mcp._sandboxed import ServerSandbox
from io_harness._mcp._tool import McpTool, capped
from io_harness.errors import ConfigError
from io_harness.messages import ToolSpec
from io_harness.tools._base import ToolOutcome

if TYPE_CHECKING:
    from mcp.types import Tool as WireTool

    from io_harness._mcp._session import StartCheck

__all__ = ["CALL_GRACE", "ServerSession"]

CALL_GRACE = 10.0
"""Seconds past a call's timeout before the harness stops waiting on its own clock (the
SDK's clock ends the call first; this one covers a request that cannot even be written)."""


class ServerSession:
    """One server's session across a run: its tools, its one restart, its events."""

    def __init__(
        self,
        config: McpServer,
        events: list[McpEvent],
        may_start: StartCheck | None = None,
        sandbox: ServerSandbox | None = None,
    ) -> None:
        self.config = config
        self.name = config.name
        self._events = events
        self._may_start = may_start
        """Asked before a restart: the start is an act like the first one."""
        self._sandbox = sandbox if config.sandbox else None
        """Where the server runs contained, when it asks to be."""
        self.conn: Connection | None = None
        self._connections: list[Connection] = []
        self.tools: dict[str, McpTool] = {}
        """The offered tools by offered name, in the server's order."""
        self.announced = False
        """The server said its tools changed; they are re-listed at the next refresh."""
        self.changed = False
        """The offered tools changed (a re-list, a restart) since the last refresh."""
        self._dead: str | None = None
        self._restarted = False
        self._gone: str | None = None
        self._closed = False
        self._lock = asyncio.Lock()

    def _emit(self, kind: McpEventKind, **detail: Any) -> None:
        self._events.append(McpEvent(kind, self.name, detail))

    def _announce(self) -> None:
        self.announced = True

    def _net_seen(self, target: str, allowed: bool) -> None:
        self._emit("net", target=target, allowed=allowed)

    def _undone_seen(self, undone: Sequence[str]) -> None:
        self._emit("undone", undone=list(undone))

    async def start(self, reason: str = "start") -> None:
        """Start (or restart) the server and list its tools.

        :class:`StartFailed` when it cannot; at the first start, a tool whose
        offered name would be too long or bad is a :class:`ConfigError`.
        """
        contain = None
        if self._sandbox is not None:
            contain = partial(self._sandbox.service, self.config, self._net_seen, self._undone_seen)
        conn = Connection(self.config, self._announce, contain)
        self._connections.append(conn)
        target = {"transport": self.config.transport, "target": self.config.target()}
        try:
            await conn.open()
        except StartFailed as failed:
            conn.reported = True  # its events say how it ended
            self._emit_start(conn, target, failed, reason)
            raise
        if self._closed:  # closed while it started: this connection is closed too
            await self._close(conn)
            raise StartFailed(self.config, "start", "the sessions were closed", None)
        self._emit_start(conn, target, None, reason)
        self.conn = conn
        self._adopt(conn.tools, reason, strict=reason == "start")

    def _emit_start(
        self, conn: Connection, target: dict[str, Any], failed: StartFailed | None, reason: str
    ) -> None:
        """The events of a start: each phase reached, the failed one with its error."""
        info = conn.info
        phases = ("start", "handshake", "list")
        reached = phases.index(failed.phase) if failed is not None else len(phases)
        start = {**target, "seconds": info.get("start_seconds")}
        if "sandbox" in info:
            start["sandbox"] = info["sandbox"]
        if reached == 0 and failed is not None:
            self._emit("start", **start, ok=False, error=str(failed))
            return
        self._emit("start", **start, ok=True)
        if failed is not None and reached == 1:
            self._emit("handshake", ok=False, error=str(failed))
            return
        self._emit(
            "handshake",
            ok=True,
            server=info.get("server"),
            version=info.get("version"),
            protocol=info.get("protocol"),
            seconds=info.get("handshake_seconds"),
        )
        if failed is not None:
            self._emit("list", ok=False, reason=reason, error=str(failed))

    def _adopt(self, listed: list[WireTool], reason: str, *, strict: bool) -> None:
        """Offer the tools ``listed``; a name that cannot be offered is left out and said."""
        tools: dict[str, McpTool] = {}
        left_out: dict[str, str] = {}
        for wire in listed:
            problem = tool_name_problem(self.name, wire.name)
            name = tool_name(self.name, wire.name)
            if problem is not None and strict:
                raise ConfigError(problem)
            if problem is None and name in tools:
                problem = f"MCP server {self.name!r} lists the tool {wire.name!r} twice"
            if problem is not None:
                left_out[wire.name] = problem
                continue
            spec = ToolSpec(
                name=name, description=wire.description or "", parameters=wire.input_schema
            )
            connection = self.config.start_access() if self.config.transport == "http" else None
            tools[name] = McpTool(self, self.name, wire.name, spec, connection)
        before = {name: tool.spec for name, tool in self.tools.items()}
        after = {name: tool.spec for name, tool in tools.items()}
        if reason != "start" and before != after:
            self.changed = True
        self.tools = tools
        detail: dict[str, Any] = {"ok": True, "tools": len(tools), "reason": reason}
        if reason != "start":
            detail["added"] = [n for n in after if n not in before]
            detail["removed"] = [n for n in before if n not in after]
            detail["changed"] = [n for n in after if n in before and after[n] != before[n]]
        if left_out:
            detail["left_out"] = left_out
        self._emit("list", **detail)

    async def refresh(self) -> bool:
        """Re-list the tools if the server announced a change; whether the offered tools changed."""
        if self.announced and not self._usable():
            self.announced = False  # a restart lists the tools again; a gone one is not asked
        if self.announced:
            async with self._lock:
                self.announced = False
                conn = self.conn
                if conn is not None and self._usable():
                    try:
                        listed = await conn.list_tools()
                    except Exception as exc:  # the old list stays; the next call says the rest
                        self._emit("list", ok=False, reason="changed", error=describe_error(exc))
                    else:
                        self._adopt(listed, "changed", strict=False)
        changed, self.changed = self.changed, False
        return changed

    def status(self) -> str:
        """``running``, ``stopped`` (restarted at its next call), ``gone`` or ``closed``."""
        if self._closed:
            return "closed"
        if self._gone is not None:
            return "gone"
        if self._dead is not None or self.conn is None or self.conn.lost() is not None:
            return "stopped"
        return "running"

    def _usable(self) -> bool:
        return not self._closed and self._gone is None and self._dead is None

    async def call(self, tool: str, arguments: dict[str, Any], name: str) -> ToolOutcome:
        """One call of ``tool``; every way it can fail is the observation."""
        started = time.perf_counter()
        async with self._lock:
            ready = await self._ready(name)
        if isinstance(ready, ToolOutcome):
            self._call_event(tool, started, "closed" if self._closed else "gone", ready, 0)
            return ready
        note, conn = ready
        outcome, kind, cut = await self._call(conn, tool, arguments, name)
        if note:
            outcome = dataclasses.replace(outcome, content=f"{note}\n{outcome.content}")
        self._call_event(tool, started, kind, outcome, cut)
        return outcome

    def _call_event(
        self, tool: str, started: float, kind: str, outcome: ToolOutcome, cut: int
    ) -> None:
        detail: dict[str, Any] = {
            "tool": tool,
            "seconds": round(time.perf_counter() - started, 3),
            "outcome": kind,
            "chars": len(outcome.content),
        }
        if cut:
            detail["cut"] = cut
        if outcome.error is not None:
            detail["error"] = outcome.error
        self._emit("call", **detail)

    async def _ready(self, name: str) -> tuple[str | None, Connection] | ToolOutcome:
        """The live connection (restarted, with a note saying so), or why there is none."""
        if self._closed:
            error = "the run's MCP sessions are closed"
            return ToolOutcome(f"{name}: {error}", True, error=error)
        if self._gone is not None:
            return self._gone_outcome(name)
        conn = self.conn
        reason = self._dead or (conn.lost() if conn is not None else "its restart was cut short")
        if reason is None and conn is not None:
            return None, conn
        reason = reason or "it stopped"
        if self._restarted:
            self._gone = f"it stopped again after its restart ({reason})"
            self._emit("restart", ok=False, reason=reason, error=self._gone)
            return self._gone_outcome(name)
        return await self._restart(reason, name)

    def _gone_outcome(self, name: str) -> ToolOutcome:
        error = f"the MCP server {self.name!r} is gone: {self._gone}"
        return ToolOutcome(
            f"{name}: {error}; it is not started again, and its tools are unavailable "
            "for the rest of this run",
            True,
            error=error,
        )

    async def _restart(self, reason: str, name: str) -> tuple[str, Connection] | ToolOutcome:
        old = self.conn
        if old is not None:
            await self._close(old, reason="restart")
        self._restarted, self._dead, self.conn = True, None, None
        refusal = self._may_start(self.config) if self._may_start is not None else None
        if refusal is not None:
            self._gone = (
                f"it had stopped ({reason}) and the policy refuses to start it again: {refusal}"
            )
            self._emit("restart", ok=False, reason=reason, error=self._gone)
            return self._gone_outcome(name)
        try:
            await self.start("restart")
        except StartFailed as failed:
            self._gone = f"it had stopped ({reason}) and, started again, {failed.what}"
            self._emit("restart", ok=False, reason=reason, error=str(failed))
            return self._gone_outcome(name)
        self._emit("restart", ok=True, reason=reason)
        assert self.conn is not None
        note = (
            f"[the MCP server {self.name!r} had stopped ({reason}); it was restarted for this call]"
        )
        return note, self.conn

    async def _call(
        self, conn: Connection, tool: str, arguments: dict[str, Any], name: str
    ) -> tuple[ToolOutcome, str, int]:
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT

        assert conn.session is not None
        timeout = self.config.call_timeout
        backstop = asyncio.timeout(timeout + CALL_GRACE)
        try:
            async with backstop:
                result = await conn.session.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == REQUEST_TIMEOUT:
                return self._timed_out(name), "timeout", 0
            if exc.code == CONNECTION_CLOSED or conn.done:
                return await self._died(conn, name, describe_error(exc)), "died", 0
            error = f"the server answered with an error: {exc.message} (MCP error {exc.code})"
            return self._failed(name, error), "failed", 0
        except TimeoutError as exc:
            if backstop.expired():
                return self._timed_out(name), "timeout", 0
            return self._failed(name, describe_error(exc)), "failed", 0
        except Exception as exc:  # a result the SDK refused (say, against the output schema)
            if conn.done:
                return await self._died(conn, name, describe_error(exc)), "died", 0
            return self._failed(name, describe_error(exc)), "failed", 0
        text = result_text(result)
        if result.is_error:
            content, cut = capped(f"{name}: {text}", self.config.max_result_chars)
            return ToolOutcome(content, True), "error", cut
        content, cut = capped(text, self.config.max_result_chars)
        return ToolOutcome(content), "ok", cut

    def _timed_out(self, name: str) -> ToolOutcome:
        timeout = self.config.call_timeout
        return ToolOutcome(
            f"{name}: the call was ended after {timeout:g} s (its timeout); the server "
            "was asked to cancel it and is still running",
            True,
            error=f"timeout after {timeout:g} s",
        )

    def _failed(self, name: str, error: str) -> ToolOutcome:
        error, _ = capped(error, self.config.max_result_chars, "error")
        return ToolOutcome(f"{name} failed: {error}", True, error=error)

    async def _died(self, conn: Connection, name: str, why: str) -> ToolOutcome:
        """The server stopped during a call: the next call restarts it, or, a second time, never."""
        words = await conn.last_words()
        error = f"{self._stopped()} during the call ({why})"
        if words:  # the model is shown the last lines, the trace all that was kept
            error = f"{error}; its stderr ends with:\n{words}"
        shown = f"the MCP server {self.name!r} {self._stopped()} during the call ({why})"
        last = _last_lines(words)
        shown = f"{shown}; the last lines of its stderr:\n{last}\n" if last else f"{shown}. "
        if self._restarted:
            self._gone = f"it {self._stopped()} again after its restart ({why})"
            self._emit("restart", ok=False, reason=why, error=self._gone)
            return ToolOutcome(
                f"{name}: {shown}It was restarted once already and is not started again: "
                "its tools are unavailable for the rest of this run",
                True,
                error=error,
            )
        self._dead = why
        return ToolOutcome(
            f"{name}: {shown}The call may or may not have taken effect. The server will be "
            "started again at the next call of one of its tools",
            True,
            error=error,
        )

    def _stopped(self) -> str:
        return "lost its connection" if self.config.transport == "http" else "stopped"

    async def _close(self, conn: Connection, reason: str = "end") -> None:
        if conn.reported:
            await conn.close()
            return
        conn.reported = True
        started = time.perf_counter()
        error = await conn.close()
        detail: dict[str, Any] = {
            "reason": reason,
            "seconds": round(time.perf_counter() - started, 3),
        }
        if error is not None:
            detail["error"] = error
        self._emit("close", **detail)

    async def close(self) -> None:
        """End every session this server had; idempotent."""
        self._closed = True
        await asyncio.gather(*(self._close(conn) for conn in self._connections if conn.opened))


def _last_lines(text: str, lines: int = 3, chars: int = 300) -> str:
    """The last few lines of ``text``, at most ``chars`` characters of them."""
    last = "\n".join(text.strip().splitlines()[-lines:])
    return last if len(last) <= chars else f"[...]{last[-chars:]}"
