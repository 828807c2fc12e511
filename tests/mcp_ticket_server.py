"""An MCP server for the end-to-end tests: a ticket tracker over stdio, built with the SDK.

Usage: mcp_ticket_server.py LEDGER [http PORT]

Every call that changes something appends a line to LEDGER, so a test can
count what ran.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

LEDGER = Path(sys.argv[1])
server = MCPServer("tickets")


@server.tool()
def lookup(ticket: int) -> str:
    """Look a ticket up by its number."""
    return f"ticket {ticket}: the build is flaky on Tuesdays"


@server.tool()
def close_ticket(ticket: int) -> str:
    """Close a ticket."""
    with LEDGER.open("a") as out:
        out.write(f"closed {ticket}\n")
    return f"closed {ticket}"


if __name__ == "__main__":
    if sys.argv[2:3] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[3]))
    else:
        server.run()
