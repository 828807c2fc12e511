"""Where a stdio server with ``sandbox = true`` runs: inside the run's OS sandbox.

The run's sandbox prepares the server as it would a command (scratch folder
as its home, caps, its mode over the workspace, the launcher's guard) and
hands back the launcher's command line, which the SDK starts as the server.
The server's network is the allow-list proxy with every host listed, so each
connection it opens is decided by the run's policy alone (``net host:port``,
allowed outright), whatever the sandbox's ``network`` says for commands.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from io_harness._mcp._config import McpServer

if TYPE_CHECKING:
    from io_harness.sandbox import NetCheck, Sandbox
    from io_harness.sandbox._spawn import Service

__all__ = ["NetSeen", "ServerSandbox", "UndoneSeen"]

NetSeen = Callable[[str, bool], None]
"""Told of each connection a sandboxed server asked for: ``host:port`` and whether it went."""
UndoneSeen = Callable[[Sequence[str]], None]
"""Told, once a sandboxed server has stopped, what it did to files that run code later."""


@dataclass(frozen=True, slots=True)
class ServerSandbox:
    """The run's sandbox, workspace and network check, for servers that ask to be contained.

    ``sandbox`` is ``None`` when the run opted out (``NO_SANDBOX``);
    ``net_check`` ``None`` refuses every connection.
    """

    sandbox: Sandbox | None
    workdir: Path
    net_check: NetCheck | None = None

    def problem(self, server: McpServer) -> str | None:
        """Why ``server`` (with ``sandbox = true``) cannot run in this sandbox, or ``None``."""
        from io_harness.sandbox._spawn import ContainedSandbox

        if self.sandbox is None:
            return (
                f"MCP server {server.name!r} asks for sandbox = true, but the run has no "
                "sandbox (NO_SANDBOX); give the run a sandbox or drop sandbox = true"
            )
        if not isinstance(self.sandbox, ContainedSandbox):
            return (
                f"MCP server {server.name!r} asks for sandbox = true, but the run's sandbox "
                f"({self.sandbox.name}) cannot hold a long-lived server; the POSIX backends "
                "(bubblewrap, landlock, namespaces, seatbelt, floor) can"
            )
        return None

    @contextlib.asynccontextmanager
    async def service(
        self, server: McpServer, seen: NetSeen, undone: UndoneSeen | None = None
    ) -> AsyncIterator[Service]:
        """The contained command line of ``server``, for as long as the block lasts; once it
        ends, ``undone`` is told what the server had done to files that run code later."""
        from io_harness.sandbox._proxy import net_target
        from io_harness.sandbox._spawn import ContainedSandbox

        sandbox = self.sandbox
        assert isinstance(sandbox, ContainedSandbox) and server.command is not None
        config = sandbox.config.model_copy(update={"network": "allow_list", "allow_hosts": ("*",)})
        run_check = self.net_check

        async def check(host: str, port: int) -> bool:
            allowed = run_check is not None and await run_check(host, port)
            seen(net_target(host, port), allowed)
            return allowed

        argv = [server.command, *server.args]
        async with sandbox.service(
            argv,
            workdir=self.workdir,
            cwd=server.cwd,
            env=server.env,
            readable=_named_folders(argv, server.cwd),
            config=config,
            net_check=check,
        ) as service:
            yield service
        if service.undone and undone is not None:
            undone(service.undone)


def _named_folders(argv: list[str], cwd: Path | None) -> list[Path]:
    """The folders the server's own configuration names: its start folder, and the folder
    of each absolute path on its command line (a script under ``/tmp``, hidden otherwise)."""
    folders = [cwd] if cwd is not None and cwd.is_dir() else []
    for arg in argv:
        path = Path(arg)
        if path.is_absolute() and path.exists():
            folders.append(path if path.is_dir() else path.parent)
    return folders
