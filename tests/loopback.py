"""A real HTTP server on 127.0.0.1 that answers from a script: the vendors' wire, offline.

Each request gets the next scripted :class:`Reply` (or the answer of a
function of the request). Bodies go out as real HTTP/1.1; event streams as
real Server-Sent Events in chunked transfer encoding, flushed event by event,
so the provider under test parses the same bytes a vendor would send. A reply
can stall (to hit a timeout) or break off mid-event (a cut stream).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["CapturedRequest", "LoopbackServer", "Reply", "sse"]


def sse(data: object, event: str | None = None) -> str:
    """One Server-Sent Event: an optional ``event:`` line, a ``data:`` line, a blank line."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n"


@dataclass
class Reply:
    """One scripted HTTP answer.

    ``events`` makes it a ``text/event-stream`` (each item written and flushed
    on its own); otherwise ``body`` (a ``str``/``bytes``, or JSON-able data)
    is sent whole. ``cut_after`` breaks the stream after that many events
    with half an event written and no terminating chunk. ``delay`` waits
    before the status line; ``event_delay`` between events.
    """

    status: int = 200
    body: Any = None
    events: Sequence[str] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    cut_after: int | None = None
    delay: float = 0.0
    event_delay: float = 0.0


@dataclass(frozen=True)
class CapturedRequest:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


Script = Sequence[Reply] | Callable[[CapturedRequest], Reply]


class LoopbackServer:
    """Serves a script on ``127.0.0.1``; use as a context manager.

    ``url`` is the base URL; every request is kept in :attr:`requests`. A
    request past the end of a list script gets a 500 saying so.
    """

    def __init__(self, script: Script) -> None:
        self.script = script
        self.requests: list[CapturedRequest] = []
        self._next = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def handle(self) -> None:
                # The client may drop a kept-alive connection at any time.
                with contextlib.suppress(ConnectionResetError, BrokenPipeError):
                    super().handle()

            def do_GET(self) -> None:
                self._answer()

            def do_POST(self) -> None:
                self._answer()

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                captured = CapturedRequest(
                    method=self.command,
                    path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    body=self.rfile.read(length),
                )
                reply = server._reply_to(captured)
                if reply.delay and server._stop.wait(reply.delay):
                    return
                try:
                    if reply.events is not None:
                        self._stream(reply)
                    else:
                        self._whole(reply)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _whole(self, reply: Reply) -> None:
                body = reply.body
                if isinstance(body, str):
                    data = body.encode()
                elif isinstance(body, bytes):
                    data = body
                else:
                    data = json.dumps(body if body is not None else {}).encode()
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                self.wfile.flush()

            def _stream(self, reply: Reply) -> None:
                self.send_response(reply.status)
                headers = {"Content-Type": "text/event-stream", **reply.headers}
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                assert reply.events is not None
                for index, event in enumerate(reply.events):
                    if reply.cut_after is not None and index == reply.cut_after:
                        half = event.encode()[: max(1, len(event) // 2)]
                        self._chunk(half)
                        self.close_connection = True
                        return  # no terminating chunk: the stream breaks off
                    if reply.event_delay and server._stop.wait(reply.event_delay):
                        return
                    self._chunk(event.encode())
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        _host, port = self._server.server_address[:2]
        self.host = f"127.0.0.1:{port}"
        self.url = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    def _reply_to(self, request: CapturedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if callable(self.script):
                return self.script(request)
            if self._next >= len(self.script):
                return Reply(status=500, body={"error": {"message": "the script has ended"}})
            reply = self.script[self._next]
            self._next += 1
            return reply

    def __enter__(self) -> LoopbackServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        # Give handler threads stuck in a delay a moment to notice the stop.
        time.sleep(0)
