"""An MCP server for the tests, built with the SDK: ``tools_server.py [http PORT] [--tag=TAG]``.

``--tag`` is ignored: it marks the process so a test can find it.

Its tools answer with text, errors, images, resources, structured content,
huge results, slow results, its pid and environment; ``die`` ends the process
mid-call; ``linger`` keeps it alive past the end of its stdin; ``grow`` adds a
tool and announces the change; ``write``, ``connect`` and ``proxied`` try what
a sandbox should contain (a file written, a direct connection, one through the
sandbox's proxy).
"""

from __future__ import annotations

import base64
import os
import socket
import sys
import threading
import time

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import EmbeddedResource, TextContent, TextResourceContents

server = MCPServer("tools")


@server.tool()
def echo(text: str) -> str:
    """Answer with the text given."""
    return text


@server.tool()
def fail(message: str = "it went wrong") -> str:
    """Report an error."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Answer after a while."""
    await anyio.sleep(seconds)
    return "done"


@server.tool()
def huge(n: int) -> str:
    """Answer with n characters."""
    return "x" * n


@server.tool()
def image(size: int = 12 * 1024) -> Image:
    """Answer with a PNG image of ``size`` bytes."""
    return Image(data=b"\x89PNG\r\n\x1a\n".ljust(size, b"\0"), format="png")


@server.tool()
def add(a: int, b: int) -> dict[str, int]:
    """Add two numbers (structured content)."""
    return {"sum": a + b}


@server.tool()
def document() -> list[TextContent | EmbeddedResource]:
    """Answer with a text block, an embedded text resource and an embedded blob."""
    blob = base64.b64encode(b"\0" * 2048).decode()
    return [
        TextContent(text="here it is"),
        EmbeddedResource(
            resource=TextResourceContents(
                uri="file:///notes.txt", mime_type="text/plain", text="a note"
            )
        ),
        EmbeddedResource.model_validate(
            {
                "type": "resource",
                "resource": {
                    "uri": "file:///data.bin",
                    "mimeType": "application/octet-stream",
                    "blob": blob,
                },
            }
        ),
    ]


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable, or (unset)."""
    return os.environ.get(name, "(unset)")


@server.tool()
def noisy(lines: int = 20000) -> str:
    """Write many lines on stderr, then answer."""
    for number in range(lines):
        print(f"noise {number}", file=sys.stderr)
    sys.stderr.flush()
    return "said a lot"


@server.tool()
def linger() -> str:
    """Keep the process alive after its stdin ends (a thread that sleeps for an hour)."""
    threading.Thread(target=time.sleep, args=(3600,), daemon=False).start()
    return "lingering"


@server.tool()
def die() -> str:
    """End the server's process during the call."""
    print("dying now", file=sys.stderr, flush=True)
    os._exit(3)


@server.tool()
def write(path: str, text: str) -> str:
    """Write ``text`` to the file ``path``; say what happened."""
    try:
        with open(path, "w") as handle:
            handle.write(text)
    except OSError as exc:
        return f"refused: {exc.strerror}"
    return "wrote"


@server.tool()
def connect(host: str, port: int) -> str:
    """Open a TCP connection straight to ``host:port``; say what happened."""
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        return f"refused: {exc.strerror or exc}"
    return "connected"


@server.tool()
def proxied(host: str, port: int, message: str = "ping") -> str:
    """Send ``message`` to ``host:port`` through the sandbox's proxy; its answer's status line
    and, when let through, what came back."""
    path = os.environ.get("IOH_PROXY_SOCKET")
    if not path:
        return "(no proxy)"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(path)
        sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
        status = head.split(b"\r\n", 1)[0].decode()
        if " 200 " not in status:
            return status
        sock.sendall(message.encode())
        return f"{status}; echoed {sock.recv(4096).decode()}"


def extra(text: str) -> str:
    """A tool added by grow."""
    return f"extra: {text}"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool 'extra' and announce that the tools changed."""
    server.add_tool(extra)
    await ctx.session.send_tool_list_changed()
    return "grown"


@server.tool()
def header(name: str, ctx: Context) -> str:
    """The value of a header of the HTTP request that called this tool."""
    request = getattr(ctx.request_context, "request", None)
    headers = getattr(request, "headers", None)
    return headers.get(name, "(none)") if headers is not None else "(not http)"


if __name__ == "__main__":
    print("tools server starting", file=sys.stderr, flush=True)
    arguments = [argument for argument in sys.argv[1:] if not argument.startswith("--tag=")]
    if arguments[:1] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(arguments[1]))
    else:
        server.run()
