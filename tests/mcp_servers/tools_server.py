"""An MCP server for the tests, built with the SDK: ``tools_server.py [http PORT] [--tag=TAG]``.

``--tag`` is ignored: it marks the process so a test can find it.

Its tools answer with text, errors, images, resources, structured content,
huge results, slow results, its pid and environment; ``die`` ends the process
mid-call; ``linger`` keeps it alive past the end of its stdin; ``grow`` adds a
tool and announces the change.
"""

from __future__ import annotations

import base64
import os
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
