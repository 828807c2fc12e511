"""MCP servers as a run's tools: configuration, sessions, tools and their events.

Importing this package loads no part of the ``mcp`` SDK: it is imported where
a session opens (:meth:`McpSessions.open`).
"""

from io_harness._mcp._config import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    McpServer,
    check_servers,
    servers_from_tables,
    tool_name,
)
from io_harness._mcp._events import McpEvent, McpEventKind
from io_harness._mcp._sandboxed import ServerSandbox
from io_harness._mcp._session import McpSessions
from io_harness._mcp._tool import McpTool

__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "McpEvent",
    "McpEventKind",
    "McpServer",
    "McpSessions",
    "McpTool",
    "ServerSandbox",
    "check_servers",
    "servers_from_tables",
    "tool_name",
]
