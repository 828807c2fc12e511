"""``ioh mcp list CONTRACT``: the tools a contract's MCP servers offer, with the policy's verdicts.

Each server of the contract's ``[[mcp]]`` tables is started (or reached),
asked for its tools and closed again. Each tool is printed under the name an
agent is offered, with the verdict of the contract's policy on calling it
(an ``exec`` of that name). A server whose start the policy denies is not
started; one the policy would ask about is, since the person running the
command asked for it. A server that cannot start is said, with why, and the
command exits with status 2 once every other server is listed.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.console import Console

from io_harness._contract_toml import mcp_servers, sandbox_config
from io_harness._mcp import McpServer, McpSessions, ServerSandbox
from io_harness.cli._permissions import policy_for
from io_harness.cli._text import escape
from io_harness.contract import TaskContract
from io_harness.errors import HarnessError
from io_harness.policy import Act, Effect, Policy, Verdict

__all__ = ["cmd_mcp_list", "render_servers"]

EXIT_FAILED = 2
_DESCRIPTION_CHARS = 100


def render_servers(path: Path) -> str:
    """``ioh doctor --contract``: each ``[[mcp]]`` server and its start's verdict, unstarted."""
    servers = mcp_servers(path)
    if not servers:
        return f"MCP servers: none in {escape(str(path))}"
    policy = policy_for(path, None) or Policy.default()
    lines = [f"MCP servers of {escape(str(path))} (not started; `ioh mcp list` starts them):"]
    for server in servers:
        access = server.start_access()
        verdict = policy.explain(access.act, access.target)
        note = (
            "" if verdict.effect is not Effect.ASK else " (a run refuses it: a start cannot wait)"
        )
        lines.append(
            f"  {escape(server.name)}  {_transport(server)}  {escape(server.target())}  "
            f"start: {escape(verdict.describe())}{note}"
        )
    return "\n".join(lines)


def cmd_mcp_list(args: argparse.Namespace, console: Console) -> int:
    """List each tool of each MCP server of the contract ``args.file``, with its verdict."""
    path: Path = args.file
    servers = list(mcp_servers(path))
    if not servers:
        console.print(escape(f"{path} has no [[mcp]] servers"), soft_wrap=True)
        return 0
    policy = policy_for(path, None)
    if policy is None:
        said = f"{path} has no [policy]; the verdicts are Policy.default()'s"
        console.print(escape(said), soft_wrap=True)
        policy = Policy.default()
    return asyncio.run(_list_all(servers, policy, _server_sandbox(path, servers, policy), console))


def _transport(server: McpServer) -> str:
    """How the server is reached, escaped for markup like every value printed."""
    return escape(f"{server.transport}, sandboxed" if server.sandbox else server.transport)


def _server_sandbox(path: Path, servers: list[McpServer], policy: Policy) -> ServerSandbox | None:
    """Where the contract's servers with ``sandbox = true`` run, as a run of it would have them:
    the sandbox its ``[sandbox]`` table selects, over its workspace, net allowed outright only."""
    if not any(server.sandbox for server in servers):
        return None
    from io_harness.sandbox import SandboxConfig, select
    from io_harness.sandbox._proxy import net_target

    sandbox = select(sandbox_config(path) or SandboxConfig())  # SandboxError: none here

    async def outright(host: str, port: int) -> bool:
        return policy.explain(Act.NET, net_target(host, port)).effect is Effect.ALLOW

    root = TaskContract.from_toml(path).root.resolve()
    return ServerSandbox(sandbox, root, outright)


async def _list_all(
    servers: list[McpServer], policy: Policy, sandbox: ServerSandbox | None, console: Console
) -> int:
    listings = await asyncio.gather(*(_listing(server, policy, sandbox) for server in servers))
    for _, lines in listings:
        for line in lines:
            console.print(line, soft_wrap=True)
    return EXIT_FAILED if any(failed for failed, _ in listings) else 0


async def _listing(
    server: McpServer, policy: Policy, sandbox: ServerSandbox | None
) -> tuple[bool, list[str]]:
    """Whether the server failed, and the lines that describe it and its tools."""
    access = server.start_access()
    start = policy.explain(access.act, access.target)
    lines = [
        f"[bold]{escape(server.name)}[/] ({_transport(server)}: {escape(server.target())})",
        f"  start: {escape(start.describe())}",
    ]
    if start.effect is Effect.DENY:
        lines.append("  not started: the policy denies it")
        return False, lines
    try:
        sessions = await McpSessions.open([server], sandbox=sandbox)
    except HarnessError as exc:
        lines.append(f"  [red]failed:[/] {escape(str(exc))}")
        return True, lines
    try:
        tools = sessions.tools()
    finally:
        await sessions.close()
    lines.append(f"  {len(tools)} tool{'' if len(tools) == 1 else 's'}:")
    for tool in tools:
        verdict = policy.explain(Act.EXEC, tool.name)
        lines.append(f"    {escape(tool.name)}  {_effect(verdict)}")
        summary = _summary(tool.description)
        if summary:
            lines.append(f"      {escape(summary)}")
    return False, lines


def _effect(verdict: Verdict) -> str:
    """The verdict's effect, coloured, and what decided it."""
    colour = {Effect.ALLOW: "green", Effect.ASK: "yellow", Effect.DENY: "red"}[verdict.effect]
    why = (
        f"the default for {verdict.act.value}"
        if verdict.rule is None
        else f"rule '{verdict.rule}' in layer '{verdict.layer}'"
    )
    return f"[{colour}]{verdict.effect.value}[/] ({escape(why)})"


def _summary(description: str) -> str:
    first = description.strip().split("\n", 1)[0].strip()
    if len(first) <= _DESCRIPTION_CHARS:
        return first
    return f"{first[: _DESCRIPTION_CHARS - 3]}..."
