"""One live session with one MCP server, held open by a task of its own.

The SDK's transports and sessions must be entered and left by one task, last
in first out. So each connection has an owner task that enters the transport
(``stdio_client`` or ``streamable_http_client``) and the ``ClientSession``,
answers the handshake, lists the tools, says it is ready and waits to be told
to stop; any other task calls through the session. Closing sets the stop event
(or, before the session is ready, cancels the owner) and waits for the owner:
the SDK then ends a stdio server (stdin closed, 2 s, SIGTERM to its group,
2 s, SIGKILL) or ends an HTTP session (``DELETE``).

On Linux a stdio server starts through ``_guard.py``, which has the kernel
kill the server when the harness dies, however it dies. A server with
``sandbox = true`` starts through the sandbox's launcher instead (given as
``contain``), whose own guard does the same, and its containment ends after
the SDK has stopped it. A stdio server's
stderr goes to a pipe a thread drains all the time (a chatty server never
blocks on it); its last :data:`STDERR_TAIL_BYTES` are kept for error messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from io_harness._mcp._config import McpServer

if TYPE_CHECKING:
    import httpx2
    from mcp import ClientSession
    from mcp.client._transport import TransportStreams
    from mcp.shared._stream_protocols import ReadStream
    from mcp.shared.message import SessionMessage
    from mcp.types import Tool as WireTool

    from io_harness.sandbox._spawn import Service

__all__ = ["STDERR_TAIL_BYTES", "Connection", "StartFailed", "describe_error"]

STDERR_TAIL_BYTES = 4096
"""How much of the end of a stdio server's stderr is kept."""
GUARD = Path(__file__).with_name("_guard.py")
GUARD_MARK = "ioh-mcp-guard:"
LAUNCH_MARK = "ioh-launch:"
SSE_EVENT_LIMIT = 32 * 1024 * 1024
"""Bytes one event of an HTTP server's stream may hold (the SDK's default is 1 MiB):
a result far over the cap is received and cut, not refused."""
SSE_READ_TIMEOUT = 300.0
"""Seconds an HTTP response stream may stay silent (the SDK's own default)."""

Phase = Literal["start", "handshake", "list"]
_FAILED_AT: dict[Phase, str] = {
    "start": "could not start",
    "handshake": "failed the handshake",
    "list": "could not list its tools",
}


class StartFailed(Exception):
    """A server could not be started, did not answer the handshake or could not list its tools."""

    def __init__(self, server: McpServer, phase: Phase, reason: str, stderr: str | None) -> None:
        self.server = server
        self.phase: Phase = phase
        self.reason = reason
        self.stderr = stderr
        super().__init__(self.describe())

    @property
    def what(self) -> str:
        """What failed and why, without the server's name: ``failed the handshake: ...``."""
        return f"{_FAILED_AT[self.phase]}: {self.reason}"

    def describe(self) -> str:
        """One message: the server, what failed, why, and the end of its stderr."""
        head = f"MCP server {self.server.name!r} ({self.server.target()}) {self.what}"
        if self.stderr is None or (not self.stderr and self.phase == "start"):
            return head
        if not self.stderr:
            return f"{head}; it wrote nothing on stderr"
        return f"{head}; its stderr ends with:\n{self.stderr}"


class StderrTail:
    """The end of what a stdio server writes on stderr, read by a thread until the pipe ends."""

    def __init__(self, limit: int = STDERR_TAIL_BYTES) -> None:
        self._limit = limit
        self._data = bytearray()
        self._cut = False
        self._lock = threading.Lock()
        self._ended = threading.Event()
        read_fd, write_fd = os.pipe()
        self._read_fd = read_fd
        self.writer = os.fdopen(write_fd, "w")
        """What the server's stderr is; closed by :meth:`spawned` once the server holds its own."""
        self._thread = threading.Thread(target=self._drain, name="ioh-mcp-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read_fd, 65536):
                with self._lock:
                    self._data += chunk
                    if len(self._data) > self._limit:
                        del self._data[: len(self._data) - self._limit]
                        self._cut = True
        except OSError:
            pass
        finally:
            os.close(self._read_fd)
            self._ended.set()

    def spawned(self) -> None:
        """Close this process's copy of the write end: the pipe ends when the server's does."""
        if not self.writer.closed:
            self.writer.close()

    @property
    def ended(self) -> bool:
        """Whether every writer has closed the pipe (the server has exited, as a rule)."""
        return self._ended.is_set()

    async def settled(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the pipe to end (for a last word of a dead server)."""
        if not self.ended:
            await asyncio.to_thread(self._ended.wait, timeout)

    def text(self, limit: int | None = None) -> str:
        """The kept end, decoded; ``[...]`` stands for what came before it."""
        with self._lock:
            data, cut = bytes(self._data), self._cut
        if limit is not None and len(data) > limit:
            data, cut = data[-limit:], True
        text = data.decode("utf-8", "replace")
        if cut:
            text = "[...]" + (text[text.index("\n") :] if "\n" in text else text)
        return text.strip()


class Connection:
    """One session with one server, from its start to its close; see the module's docstring.

    ``tools_changed`` is called when the server announces that its tools changed.
    ``contain``, for a server with ``sandbox = true``, gives the contained command
    line to start it with, for as long as its block lasts.
    """

    def __init__(
        self,
        server: McpServer,
        tools_changed: Callable[[], None],
        contain: Callable[[], AbstractAsyncContextManager[Service]] | None = None,
    ) -> None:
        self.server = server
        self._tools_changed = tools_changed
        self._contain = contain
        self.session: ClientSession | None = None
        """The live session, once the connection is ready."""
        self.tools: list[WireTool] = []
        """The tools listed when the session opened."""
        self.phase: Phase = "start"
        self.failure: str | None = None
        """Why the connection could not open (the phase says where)."""
        self.close_error: str | None = None
        """What went wrong while the session ended, or ended it early (a lost HTTP stream)."""
        self.info: dict[str, Any] = {}
        """The handshake's answer (``server``, ``version``, ``protocol``), each phase's seconds."""
        self.stderr: StderrTail | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._closing = False
        self._starting = True
        """Still in the start's phases (start, handshake, list), where a close may cancel."""
        self._task: asyncio.Task[None] | None = None
        self._read_ended = False
        self.reported = False
        """Whether the end of this connection is in the events already (its user's flag)."""

    async def open(self) -> None:
        """Start the owner task and wait until the session is ready; :class:`StartFailed` if not."""
        self._task = asyncio.create_task(self._own(), name=f"ioh-mcp-{self.server.name}")
        await self._ready.wait()
        if self.session is None:
            await self.close()
            raise await self._start_failed()

    async def _start_failed(self) -> StartFailed:
        phase, reason = self.phase, self.failure or "unknown"
        if self.stderr is None:
            return StartFailed(self.server, phase, reason, None)
        await self.stderr.settled(2.0)
        stderr = self.stderr.text()
        marks = (GUARD_MARK, LAUNCH_MARK)
        guard = [line for line in stderr.splitlines() if line.startswith(marks)]
        if guard:  # the guard or launcher could not run the program: that is the whole story
            phase, reason = "start", guard[-1].split(":", 1)[1].strip()
            stderr = "\n".join(line for line in stderr.splitlines() if line not in guard)
        return StartFailed(self.server, phase, reason, stderr)

    async def _own(self) -> None:
        from mcp import ClientSession
        from mcp.types import ToolListChangedNotification

        async def on_message(message: object) -> None:
            if isinstance(message, ToolListChangedNotification):
                self._tools_changed()

        deadline = asyncio.timeout(self.server.start_timeout)
        started = time.perf_counter()
        try:
            async with deadline, contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                session = await stack.enter_async_context(
                    ClientSession(_Watched(read, self._ended), write, message_handler=on_message)
                )
                self.phase = "handshake"
                self.info["start_seconds"] = round(time.perf_counter() - started, 3)
                try:
                    answered = await session.initialize()
                    self.info.update(
                        server=answered.server_info.name,
                        version=answered.server_info.version,
                        protocol=answered.protocol_version,
                        handshake_seconds=round(time.perf_counter() - started, 3),
                    )
                    self.phase = "list"
                    self.tools = await list_all(session)
                    self.info["list_seconds"] = round(time.perf_counter() - started, 3)
                except Exception as exc:  # caught here, the transports close without a group
                    self.failure = describe_error(exc)
                    # The SDK's teardown follows: neither the deadline nor a close may
                    # cancel it, or the server is never stopped.
                    deadline.reschedule(None)
                    self._starting = False
                    return
                deadline.reschedule(None)
                self._starting = False
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except TimeoutError as exc:
            self._record(
                f"no answer within {self.server.start_timeout:g} s (its start timeout)"
                if deadline.expired()
                else describe_error(exc)
            )
        except Exception as exc:  # an OSError of the start, an ExceptionGroup of a transport
            self._record(describe_error(exc))
        except BaseException:
            self._record("the session was cancelled")
            raise
        finally:
            if self.stderr is not None:
                self.stderr.spawned()
            self._ready.set()

    def _record(self, problem: str) -> None:
        if self.session is None:
            self.failure = self.failure or problem
        else:
            self.close_error = self.close_error or problem

    async def _transport(self, stack: contextlib.AsyncExitStack) -> TransportStreams:
        server = self.server
        if server.command is None:
            from mcp.client.streamable_http import streamable_http_client

            assert server.url is not None
            client = await stack.enter_async_context(_http_client(server))
            return await stack.enter_async_context(
                streamable_http_client(
                    server.url,
                    http_client=client,
                    max_sse_event_size=max(SSE_EVENT_LIMIT, 16 * server.max_result_chars),
                )
            )
        from mcp import StdioServerParameters, stdio_client

        command, args = server.command, list(server.args)
        env, cwd = dict(server.env), server.cwd
        if self._contain is not None:
            service = await stack.enter_async_context(self._contain())
            command, args = service.argv[0], list(service.argv[1:])
            env, cwd = dict(service.env), service.cwd
            self.info["sandbox"] = service.backend
        elif sys.platform == "linux":
            command, args = (
                sys.executable,
                ["-I", "-S", "-B", str(GUARD), str(os.getpid()), command, *args],
            )
        self.stderr = StderrTail()
        params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
        try:
            return await stack.enter_async_context(stdio_client(params, errlog=self.stderr.writer))
        finally:
            self.stderr.spawned()

    @property
    def opened(self) -> bool:
        """Whether :meth:`open` started the owner task."""
        return self._task is not None

    @property
    def done(self) -> bool:
        """Whether the owner task has ended (closed, or its transport failed)."""
        return self._task is not None and self._task.done()

    def lost(self) -> str | None:
        """Why the session is known to be gone, or ``None`` while it looks alive.

        It is gone when its owner task has ended (closed, or its transport
        failed) or when the server closed its side of the connection (a stdio
        server that exited closes its stdout).
        """
        if self.done or self.session is None:
            return self.close_error or "its session ended"
        if self._read_ended:
            return "it closed the connection" if self.server.transport == "http" else "it exited"
        return None

    def _ended(self) -> None:
        self._read_ended = True

    async def list_tools(self) -> list[WireTool]:
        """The server's tools now, every page, within the start timeout."""
        assert self.session is not None
        async with asyncio.timeout(self.server.start_timeout):
            return await list_all(self.session)

    async def last_words(self) -> str:
        """The kept end of a stdio server's stderr once its pipe has ended (a bounded wait)."""
        if self.stderr is None:
            return ""
        await self.stderr.settled(1.0)
        return self.stderr.text()

    async def close(self) -> str | None:
        """End the session (once; later calls wait for the same end); what went wrong, if anything.

        Safe when the caller is cancelled meanwhile: the owner task ends the
        session on its own, whether or not anyone waits for it.
        """
        task = self._task
        if task is None:
            return None
        if not self._closing:
            self._closing = True
            if self._starting:
                task.cancel()  # still starting: abort the start (its teardown is not cut)
            self._stop.set()
        await asyncio.wait([task])
        if not task.cancelled():
            task.exception()  # retrieved: an error of the owner is in close_error
        return self.close_error


class _Watched:
    """A session's read stream that says when it ends: the server closed the connection."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], ended: Callable[[], None]):
        self._inner = inner
        self._ended = ended

    async def receive(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._ended()
            raise

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # ``last_context`` and whatever else it offers
        return getattr(self._inner, name)


async def list_all(session: ClientSession) -> list[WireTool]:
    """Every tool ``session``'s server lists, page after page."""
    from mcp.types import PaginatedRequestParams

    tools: list[WireTool] = []
    cursor: str | None = None
    seen: set[str] = set()
    while True:
        page = await session.list_tools(
            params=PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        )
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools
        if cursor in seen:
            raise RuntimeError(f"the server gave the page cursor {cursor!r} twice")
        seen.add(cursor)


def _http_client(server: McpServer) -> httpx2.AsyncClient:
    """The HTTP client of one HTTP server's session: its headers, timeouts and the net check.

    Every request of the session goes through it (the SDK uses the client it
    is given and leaves closing it to the owner). Connecting, writing and
    waiting for a pooled connection are bounded by the server's start
    timeout; a read by longer than a call may take, since a response stream
    stays open while a tool runs.
    """
    import httpx2

    from io_harness._net import checked_async_client

    read = max(SSE_READ_TIMEOUT, server.call_timeout + 30.0)
    # The run's network check decides each request before a socket exists.
    return checked_async_client(
        headers=dict(server.headers), timeout=httpx2.Timeout(server.start_timeout, read=read)
    )


def describe_error(exc: BaseException) -> str:
    """One line for what went wrong: the first real error of a group, an MCP error's message."""
    leaves = list(_leaves(exc))
    real = [e for e in leaves if not isinstance(e, asyncio.CancelledError)] or leaves
    first = real[0]
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    from io_harness.errors import HarnessError

    if isinstance(first, HarnessError):  # the sandbox's refusal to start the program
        return str(first)
    if isinstance(first, MCPError):
        if first.code == CONNECTION_CLOSED:
            return (
                "the connection closed" if first.message == "Connection closed" else first.message
            )
        return f"{first.message} (MCP error {first.code})"
    if isinstance(first, OSError) and not type(first).__module__.startswith("httpx"):
        if first.strerror and first.filename is not None:
            return f"{first.strerror}: {os.fsdecode(first.filename)}"
        return first.strerror or str(first) or type(first).__name__
    text = str(first)
    return f"{type(first).__name__}: {text}" if text else type(first).__name__


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
