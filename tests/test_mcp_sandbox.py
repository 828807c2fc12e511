"""A stdio MCP server with ``sandbox = true``: run inside the run's OS sandbox, its egress governed.

The server is the SDK-built ``tests/mcp_servers/tools_server.py``; the sandbox
is what ``select()`` gives on this machine (bubblewrap where installed, as the
Makefile does). Its connections go through the sandbox's proxy to a real
loopback echo server and are decided by the run's policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from io_harness import (
    NO_SANDBOX,
    ConfigError,
    Harness,
    McpError,
    McpServer,
    Policy,
    RunOutcome,
    Store,
    TaskContract,
    WorkspaceFileContains,
)
from io_harness._mcp import McpSessions, ServerSandbox
from io_harness.sandbox import SandboxConfig, select
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import RunTools
from support import call_tool, eventually
from test_mcp import SERVERS, TOOLS, tagged

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="the contained server's processes are found through /proc"
)


def contained(name: str = "box", tag: str | None = None, **options: object) -> McpServer:
    args = [str(TOOLS), *([f"--tag={tag}"] if tag else [])]
    return McpServer.stdio(name, sys.executable, args, sandbox=True, **options)  # type: ignore[arg-type]


class Echo:
    """A TCP echo server on loopback, outside every sandbox."""

    def __init__(self) -> None:
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    server = Echo()
    listener = await asyncio.start_server(server.serve, "127.0.0.1", 0)
    server.port = listener.sockets[0].getsockname()[1]
    yield server
    listener.close()


def allowing(*targets: str) -> object:
    """A net check that allows exactly ``targets`` (``host:port``)."""

    async def check(host: str, port: int) -> bool:
        return f"{host}:{port}" in targets

    return check


async def test_a_contained_server_writes_only_its_workspace_and_reaches_no_host_directly(
    tmp_path: Path, echo: Echo
) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    host = ServerSandbox(select(SandboxConfig()), work)

    async with await McpSessions.open([contained()], sandbox=host) as sessions:
        box = RunTools(sessions.tools())
        inside = await call_tool(box, "mcp__box__write", path=str(work / "a.txt"), text="hi")
        beyond = await call_tool(box, "mcp__box__write", path=str(outside / "b.txt"), text="x")
        home = await call_tool(box, "mcp__box__env", name="HOME")
        direct = await call_tool(box, "mcp__box__connect", host="127.0.0.1", port=echo.port)
        events = sessions.take_events()

    assert inside.content == "wrote" and (work / "a.txt").read_text() == "hi"
    assert beyond.content.startswith("refused"), beyond.content
    assert not (outside / "b.txt").exists()
    assert home.content != os.environ.get("HOME") and "ioh-service-" in home.content
    assert not Path(home.content).exists()  # the scratch home is gone with the session
    assert direct.content.startswith("refused"), direct.content
    start = next(e for e in events if e.kind == "start")
    assert start.detail["sandbox"] == host.sandbox.name  # type: ignore[union-attr]


async def test_a_contained_servers_connections_are_each_decided_by_the_run_check(
    tmp_path: Path, echo: Echo
) -> None:
    allowed = f"127.0.0.1:{echo.port}"
    host = ServerSandbox(select(SandboxConfig()), tmp_path, allowing(allowed))  # type: ignore[arg-type]

    async with await McpSessions.open([contained()], sandbox=host) as sessions:
        box = RunTools(sessions.tools())
        through = await call_tool(box, "mcp__box__proxied", host="127.0.0.1", port=echo.port)
        refused = await call_tool(box, "mcp__box__proxied", host="127.0.0.1", port=echo.port + 1)
        events = sessions.take_events()

    assert through.content == "HTTP/1.1 200 Connection established; echoed ping", through.content
    assert refused.content.startswith("HTTP/1.1 403"), refused.content
    nets = [e.detail for e in events if e.kind == "net"]
    assert nets == [
        {"target": allowed, "allowed": True},
        {"target": f"127.0.0.1:{echo.port + 1}", "allowed": False},
    ]


async def test_a_contained_server_without_a_check_reaches_nothing(
    tmp_path: Path, echo: Echo
) -> None:
    host = ServerSandbox(select(SandboxConfig(network="open")), tmp_path)

    async with await McpSessions.open([contained()], sandbox=host) as sessions:
        box = RunTools(sessions.tools())
        refused = await call_tool(box, "mcp__box__proxied", host="127.0.0.1", port=echo.port)
        direct = await call_tool(box, "mcp__box__connect", host="127.0.0.1", port=echo.port)

    # The commands' "open" network is not the server's: its egress is the policy's alone.
    assert refused.content.startswith("HTTP/1.1 403"), refused.content
    assert direct.content.startswith("refused"), direct.content


async def test_no_contained_server_process_outlives_its_session(tmp_path: Path) -> None:
    tag = f"ioh-contained-{uuid.uuid4().hex}"
    host = ServerSandbox(select(SandboxConfig()), tmp_path)

    async with await McpSessions.open([contained(tag=tag)], sandbox=host) as sessions:
        box = RunTools(sessions.tools())
        assert (await call_tool(box, "mcp__box__linger")).content == "lingering"
        assert tagged(tag)

    assert eventually(lambda: not tagged(tag), within=30), f"left running: {tagged(tag)}"


def test_no_contained_server_outlives_a_harness_killed_with_sigkill(tmp_path: Path) -> None:
    tag = f"ioh-contained-{uuid.uuid4().hex}"
    done = subprocess.run(
        [sys.executable, str(SERVERS / "killed_harness.py"), str(TOOLS), str(tmp_path), tag],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == -9, done.stderr
    assert eventually(lambda: not tagged(tag), within=30), f"outlived its harness: {tagged(tag)}"


async def test_a_contained_program_that_cannot_be_found_is_an_mcp_error(tmp_path: Path) -> None:
    server = McpServer.stdio("gone", "no-such-server-ioh", sandbox=True)
    host = ServerSandbox(select(SandboxConfig()), tmp_path)

    with pytest.raises(McpError) as raised:
        await McpSessions.open([server], sandbox=host)

    assert str(raised.value) == (
        "MCP server 'gone' (no-such-server-ioh) could not start: "
        "cannot start 'no-such-server-ioh': no-such-server-ioh: not found"
    )


async def test_sandbox_true_needs_a_sandbox_to_run_in(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="asks for sandbox = true, but no sandbox was given"):
        await McpSessions.open([contained()])
    with pytest.raises(ConfigError, match=r"the run has no sandbox \(NO_SANDBOX\)"):
        await McpSessions.open([contained()], sandbox=ServerSandbox(None, tmp_path))
    with pytest.raises(ConfigError, match=r"the run has no sandbox \(NO_SANDBOX\)"):
        Harness(ScriptedProvider([]), sandbox=NO_SANDBOX, mcp=[contained()])
    with pytest.raises(ConfigError, match="'sandbox' is for a stdio server"):
        McpServer(name="web", url="http://127.0.0.1:1/mcp", sandbox=True)


async def test_a_run_offers_a_contained_servers_tools_and_its_policy_governs_its_egress(
    tmp_path: Path, echo: Echo
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    provider = ScriptedProvider(
        [
            reply(calls=[call("mcp__box__proxied", host="127.0.0.1", port=echo.port)]),
            reply(calls=[call("mcp__box__proxied", host="127.0.0.1", port=echo.port + 1)]),
            reply(calls=[call("mcp__box__write", path=str(work / "done.txt"), text="done")]),
            reply("done"),
        ]
    )
    policy = Policy.default().layer("net").allow_net(f"127.0.0.1:{echo.port}")
    store = Store.memory()
    harness = Harness(provider, store=store, policy=policy, mcp=[contained()])
    contract = TaskContract.workspace(
        "ping, then write done.txt", work, WorkspaceFileContains("done.txt", "done")
    )

    result = await harness.run(contract)

    assert result.outcome is RunOutcome.SUCCESS
    results = [str(r.messages[-1].content[0].content) for r in provider.requests[1:3]]  # type: ignore[union-attr]
    assert results[0].endswith("echoed ping") and results[1].startswith("HTTP/1.1 403")
    trace = store.trace(result.run_id)
    nets = [(e.detail["target"], e.detail["allowed"]) for e in trace.mcp_events if e.kind == "net"]
    assert nets == [(f"127.0.0.1:{echo.port}", True), (f"127.0.0.1:{echo.port + 1}", False)]
    decided = [p for p in trace.permissions if p.act == "net"]
    assert [(p.target, p.effect) for p in decided] == [
        (f"127.0.0.1:{echo.port}", "allow"),
        (f"127.0.0.1:{echo.port + 1}", "deny"),
    ]


def test_a_contracts_sandboxed_server_is_listed_and_run_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from io_harness.cli import main
    from io_harness.providers import Record

    (tmp_path / "work").mkdir()
    toml = tmp_path / "contract.toml"
    toml.write_text(
        'goal = "write done.txt"\nroot = "work"\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "done.txt"\nneedle = "done"\n'
        f'[[mcp]]\nname = "box"\ncommand = {sys.executable!r}\nargs = [{str(TOOLS)!r}]\n'
        "sandbox = true\n"
    )
    cassette = tmp_path / "model.jsonl"
    scratch = tmp_path / "recording"
    scratch.mkdir()
    answers = ScriptedProvider(
        [reply(calls=[call("mcp__box__write", path="done.txt", text="done")]), reply("ok")]
    )
    recorded = Harness(Record(answers, cassette), mcp=[contained()]).run_sync(
        TaskContract.workspace("write done.txt", scratch, WorkspaceFileContains("done.txt", "done"))
    )
    assert recorded.outcome is RunOutcome.SUCCESS

    assert main(["doctor", "--contract", str(toml)]) == 0
    assert "box  stdio, sandboxed" in capsys.readouterr().out
    assert main(["mcp", "list", str(toml)]) == 0
    assert "(stdio, sandboxed:" in capsys.readouterr().out
    store = ["--store", str(tmp_path / "runs.db")]
    assert main(["run", str(toml), *store, "--provider", f"replay:{cassette}"]) == 0
    # Without a cwd, a sandboxed server starts in the workspace: "done.txt" lands there.
    assert (tmp_path / "work" / "done.txt").read_text() == "done"
    assert main(["run", str(toml), *store, "--no-sandbox", "--provider", f"replay:{cassette}"]) == 2
    assert "the run has no sandbox (NO_SANDBOX)" in capsys.readouterr().err


async def test_what_a_contained_server_left_in_files_that_run_code_later_is_undone_and_said(
    tmp_path: Path,
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    host = ServerSandbox(select(SandboxConfig()), work)

    async with await McpSessions.open([contained()], sandbox=host) as sessions:
        box = RunTools(sessions.tools())
        planted = await call_tool(box, "mcp__box__write", path=str(work / ".envrc"), text="x")
        kept = await call_tool(box, "mcp__box__write", path=str(work / "notes.txt"), text="x")
        assert planted.content == kept.content == "wrote"
        assert (work / ".envrc").exists()  # a long-lived server is checked when it stops
    events = sessions.take_events()

    assert not (work / ".envrc").exists()
    assert (work / "notes.txt").read_text() == "x"
    (undone,) = [e for e in events if e.kind == "undone"]
    assert undone.detail["undone"] == [".envrc (made by the command): removed"]
