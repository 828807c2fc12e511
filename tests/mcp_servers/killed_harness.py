"""A harness process that opens an MCP session, prints its server's pid and SIGKILLs itself.

``killed_harness.py SERVER_SCRIPT [WORKSPACE TAG]``: the server is first told
to outlive the end of its stdin (``linger``), so only the guard can end it;
the test then checks that it does not outlive the harness. With a workspace,
the server runs in the default sandbox over it, marked with ``--tag=TAG``
(its pid is its own namespace's, so the test finds it by the tag).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

from io_harness._mcp import McpServer, McpSessions, ServerSandbox
from io_harness.messages import ToolCall
from io_harness.sandbox import SandboxConfig, select
from io_harness.tools import RunTools, ToolOutcome


async def main() -> None:
    if len(sys.argv) > 2:
        workspace, tag = Path(sys.argv[2]), sys.argv[3]
        args = [sys.argv[1], f"--tag={tag}"]
        server = McpServer.stdio("t", sys.executable, args, sandbox=True)
        contained = ServerSandbox(select(SandboxConfig()), workspace)
        sessions = await McpSessions.open([server], sandbox=contained)
    else:
        server = McpServer.stdio("t", sys.executable, [sys.argv[1]])
        sessions = await McpSessions.open([server])
    box = RunTools(sessions.tools())
    lingering = await box.dispatch(ToolCall(id="1", name="mcp__t__linger"))
    assert isinstance(lingering, ToolOutcome) and lingering.content == "lingering", lingering
    outcome = await box.dispatch(ToolCall(id="2", name="mcp__t__pid"))
    assert isinstance(outcome, ToolOutcome), outcome
    print(outcome.content, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


asyncio.run(main())
