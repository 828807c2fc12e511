"""The network allow-list proxy: HTTP ``CONNECT`` on a Unix socket, each connection checked.

A sandboxed command has no route out (its own network namespace, or a seccomp
filter that denies every socket family but ``AF_UNIX``). With
``network="allow_list"`` the harness runs a :class:`NetProxy` for the command's
lifetime on a Unix socket in a folder bound into the sandbox. A program inside
connects to it and sends ``CONNECT host:port HTTP/1.1``; the proxy takes the
host's canonical spelling (``0x7f.1`` and ``[::ffff:127.0.0.1]`` are
``127.0.0.1``; see :mod:`io_harness.policy._hosts`), opens the connection to
that spelling only when it matches the allow list *and* the per-connection
check (the policy's ``NET host:port``) agrees, then relays bytes both ways.
Every answer is recorded as a :class:`ProxyDecision`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from io_harness.errors import ConfigError
from io_harness.policy._hosts import canonical_host, host_problem, join_net_target
from io_harness.policy._rules import Act, glob_problem, normalise_target, target_matches
from io_harness.sandbox._types import NetCheck

__all__ = ["NetProxy", "ProxyDecision", "net_target"]

_CHUNK = 64 * 1024
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_FIELD_VALUE = re.compile(r"[\t -~]*")
# What a host may be spelled with; host_problem then decides what the spelling means.
_SPELLED_NAME = re.compile(r"(?:[A-Za-z0-9_-]{1,63}\.)*[A-Za-z0-9_-]{1,63}\.*")
_SPELLED_IPV6 = re.compile(r"\[[0-9A-Za-z:.%_~-]+\]")
_PORT = re.compile(r"[0-9]{1,5}")
_PHRASES = {
    400: "Bad Request",
    403: "Forbidden",
    405: "Method Not Allowed",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def net_target(host: str, port: int) -> str:
    """``host:port`` of a canonical host; an IPv6 host goes in brackets (``[::1]:443``)."""
    return join_net_target(host, port)


@dataclass(frozen=True, slots=True)
class ProxyDecision:
    """The proxy's answer to one ``CONNECT``: let through or refused, and why.

    ``host`` is the canonical spelling of the host asked for (an IPv6 address
    in its short form, without brackets), the one that was checked and
    connected to; ``reason`` names the spelling asked for when it differs. An
    allowed connection that then fails to connect is still recorded as
    allowed; the program sees ``502``.
    """

    host: str
    port: int
    allowed: bool
    reason: str

    @property
    def target(self) -> str:
        """``host:port``, as a net rule would name it."""
        return net_target(self.host, self.port)

    def record(self) -> dict[str, Any]:
        """The decision as plain JSON values, for the trace."""
        return {**asdict(self), "target": self.target}


class _Refused(Exception):
    """An HTTP error answer: the status and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = _one_line(reason)


class NetProxy:
    """An HTTP ``CONNECT`` proxy on a Unix socket that lets only allowed ``host:port`` through.

    ``allow_hosts`` are net globs (``host``, ``host:port``, ``*.example.com``;
    any letter case); with none, every connection is refused. ``net_check``,
    if given, is awaited for each connection the list allows and must return
    ``True`` too; if it raises, the connection is refused with the error as the
    reason. Use it as an async context manager: entering starts listening at
    ``socket_path`` (its folder must exist), leaving closes the listener and
    every open connection and removes the socket file.

    The request head must arrive within ``header_timeout`` seconds and fit in
    ``max_header_bytes`` (else ``408`` or ``431``); a connection past
    ``max_connections`` open at once is turned away with ``503``.

    The socket file is made connectable by every user (a sandboxed command may
    run under another uid); who can reach it is decided by its folder.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str],
        *,
        allow_hosts: Sequence[str] = (),
        net_check: NetCheck | None = None,
        connect_timeout: float = 10.0,
        header_timeout: float = 10.0,
        max_header_bytes: int = 8192,
        max_connections: int = 64,
    ) -> None:
        for glob in allow_hosts:
            problem = glob_problem(glob)
            if problem is not None:
                raise ConfigError(f"allow_hosts entry {glob!r}: {problem}")
        self._path = Path(socket_path)
        self._allow_hosts = tuple(allow_hosts)
        self._net_check = net_check
        self._connect_timeout = connect_timeout
        self._header_timeout = header_timeout
        self._max_header_bytes = max_header_bytes
        self._max_connections = max_connections
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._decisions: list[ProxyDecision] = []
        self._closing = False

    @property
    def socket_path(self) -> Path:
        """Where the proxy listens."""
        return self._path

    @property
    def decisions(self) -> tuple[ProxyDecision, ...]:
        """Every decision so far, in the order they were made.

        A request refused before it names a well-formed ``host:port`` (``400``,
        ``405``, ``408``, ``431``) is answered but is not a decision.
        """
        return tuple(self._decisions)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Listen at :attr:`socket_path`. A proxy starts once."""
        if self._server is not None or self._closing:
            raise RuntimeError("the proxy has already been started")
        # The stream limit bounds the request head: readuntil refuses to buffer past it.
        self._server = await asyncio.start_unix_server(
            self._accept, path=self._path, limit=self._max_header_bytes
        )
        os.chmod(self._path, 0o666)

    async def aclose(self) -> None:
        """Stop listening, close every connection and remove the socket file."""
        self._closing = True
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self._path.unlink()

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing or len(self._tasks) >= self._max_connections:
            writer.write(_response(503, "too many connections through the proxy"))
            writer.close()
            return
        task = asyncio.get_running_loop().create_task(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                host, port, asked = await self._read_request(reader)
                await self._decide(host, port, asked)
                # The canonical host: what was checked is what is connected to.
                upstream_reader, upstream = await self._connect(host, port)
            except _Refused as refused:
                writer.write(_response(refused.status, refused.reason))
                await writer.drain()
                return
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await writer.drain()
            await _relay(reader, writer, upstream_reader, upstream)
        except OSError:
            pass  # a side went away; there is no one left to tell
        finally:
            for side in (upstream, writer):
                if side is not None:
                    await self._close(side)

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, int, str]:
        try:
            async with asyncio.timeout(self._header_timeout):
                head = await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            raise _Refused(408, "the request did not arrive in time") from None
        except asyncio.LimitOverrunError:
            raise _Refused(431, f"the request is over {self._max_header_bytes} bytes") from None
        except asyncio.IncompleteReadError:
            raise _Refused(400, "the connection ended before the request did") from None
        return _parse(head)

    async def _decide(self, host: str, port: int, asked: str) -> None:
        allowed, reason = await self._check(host, port)
        if asked.lower() != net_target(host, port):
            reason = f"{reason} (asked for {asked})"
        self._decisions.append(ProxyDecision(host, port, allowed, _one_line(reason)))
        if not allowed:
            raise _Refused(403, reason)

    async def _check(self, host: str, port: int) -> tuple[bool, str]:
        target = normalise_target(Act.NET, net_target(host, port))
        if not any(target_matches(Act.NET, glob, target) for glob in self._allow_hosts):
            return False, f"{target} is not on the allow list"
        if self._net_check is None:
            return True, f"{target} is on the allow list"
        try:
            verdict = await self._net_check(host, port)
        except Exception as exc:
            return False, f"the network check for {target} failed: {_describe(exc)}"
        if verdict is not True:
            return False, f"the network check refused {target}"
        return True, f"{target} is on the allow list and the network check allowed it"

    async def _connect(
        self, host: str, port: int
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            async with asyncio.timeout(self._connect_timeout):
                return await asyncio.open_connection(host, port)
        except OSError as exc:  # TimeoutError and socket.gaierror are OSErrors too
            target = net_target(host, port)
            raise _Refused(502, f"could not connect to {target}: {_describe(exc)}") from None

    async def _close(self, writer: asyncio.StreamWriter) -> None:
        # On shutdown, drop unsent bytes: a peer that stops reading must not hold the exit.
        if self._closing:
            writer.transport.abort()
        else:
            writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def _parse(head: bytes) -> tuple[str, int, str]:
    """The canonical ``host``, the ``port`` and the target as asked of a ``CONNECT`` request
    head, or :class:`_Refused`."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise _Refused(400, "the request is not ASCII") from None
    request_line, *fields = text.removesuffix("\r\n\r\n").split("\r\n")
    parts = request_line.split(" ")
    if (
        len(parts) != 3
        or not _TOKEN.fullmatch(parts[0])
        or parts[2] not in ("HTTP/1.0", "HTTP/1.1")
    ):
        raise _Refused(400, "the request line is not METHOD TARGET HTTP/1.x")
    for line in fields:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.fullmatch(name) or not _FIELD_VALUE.fullmatch(value):
            raise _Refused(400, "a header line is malformed")
    method, authority, _ = parts
    if method != "CONNECT":
        raise _Refused(405, f"only CONNECT is supported, not {method}")
    host, port = _authority(authority)
    return host, port, authority


def _authority(authority: str) -> tuple[str, int]:
    """``host:port`` split and checked, the host in its canonical spelling."""
    host, colon, port_text = authority.rpartition(":")
    if not colon or not _PORT.fullmatch(port_text) or not 0 < int(port_text) < 65536:
        raise _Refused(400, "the target must be host:port with a port from 1 to 65535")
    if not (_SPELLED_IPV6.fullmatch(host) or _SPELLED_NAME.fullmatch(host)):
        raise _Refused(400, "the target's host is malformed")
    problem = host_problem(host)
    if problem is not None:
        raise _Refused(400, problem)
    return canonical_host(host), int(port_text)


async def _relay(
    client_reader: asyncio.StreamReader,
    client_writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
) -> None:
    """Copy bytes both ways until both directions end or one side fails.

    An end of input on one side is passed on as a half-close, so a client that
    shuts its sending side still gets the answer. Each write waits for the
    transport to drain, which bounds what is buffered to a chunk or so.
    """

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while chunk := await reader.read(_CHUNK):
                writer.write(chunk)
                await writer.drain()
            if writer.can_write_eof():
                writer.write_eof()
        except OSError:
            # One side broke: end the tunnel, which wakes the other direction with an EOF.
            client_writer.transport.abort()
            upstream_writer.transport.abort()

    async with asyncio.TaskGroup() as group:
        group.create_task(pipe(client_reader, upstream_writer))
        group.create_task(pipe(upstream_reader, client_writer))


def _response(status: int, reason: str) -> bytes:
    """A complete error answer whose body is the one-line reason."""
    body = (_one_line(reason) + "\n").encode()
    allow = "Allow: CONNECT\r\n" if status == 405 else ""
    head = (
        f"HTTP/1.1 {status} {_PHRASES[status]}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\n"
        f"{allow}Connection: close\r\n\r\n"
    )
    return head.encode() + body


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _one_line(text: str) -> str:
    return " ".join(text.split())
