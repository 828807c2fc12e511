"""MCP servers as a run's tools: configuration, sessions, calls, restarts, and each server's end.

The servers are real: ``tests/mcp_servers/tools_server.py`` is built with the
SDK and runs as a subprocess over stdio, or over streamable HTTP on a free
loopback port. Calls go through ``RunTools.dispatch`` as a run's do. No test
asserts a duration; every wait for a process to end is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from io_harness._mcp import McpServer, McpSessions, McpTool, check_servers, servers_from_tables
from io_harness._mcp._content import result_text, size_text
from io_harness.errors import ConfigError, McpError
from io_harness.messages import ToolCall
from io_harness.policy import Act, Effect, Policy
from io_harness.policy._gate import Access, Gate
from io_harness.tools import RunTools, ToolOutcome
from support import call_tool as call
from support import eventually

SERVERS = Path(__file__).parent / "mcp_servers"
TOOLS = SERVERS / "tools_server.py"
SILENT = SERVERS / "silent.py"
LINUX = sys.platform == "linux"
linux_only = pytest.mark.skipif(not LINUX, reason="finds processes through /proc")

# --- helpers -----------------------------------------------------------------------------


def tools_server(name: str = "t", *, tag: str | None = None, **options: Any) -> McpServer:
    """The test server over stdio, marked with ``tag`` when given."""
    args = [str(TOOLS), *([f"--tag={tag}"] if tag else [])]
    return McpServer.stdio(name, sys.executable, args, **options)


@pytest.fixture
async def sessions() -> AsyncIterator[McpSessions]:
    """The test server's session, closed after the test."""
    opened = await McpSessions.open([tools_server(call_timeout=2.0)])
    yield opened
    await opened.close()


@pytest.fixture
def box(sessions: McpSessions) -> RunTools:
    return RunTools(sessions.tools())


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def tagged(tag: str) -> list[int]:
    """The running processes whose command line holds ``tag``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if tag.encode() in command and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


async def eventually_async(condition: Any, within: float = 30.0) -> bool:
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def serve_http(port: int) -> subprocess.Popen[bytes]:
    """The test server over streamable HTTP on ``port``, once it accepts connections."""
    process = subprocess.Popen(
        [sys.executable, str(TOOLS), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return process.poll() is not None  # it died: stop waiting, the test fails
        return True

    assert eventually(listening, within=60), "the HTTP server did not start"
    assert process.poll() is None, "the HTTP server exited"
    return process


@pytest.fixture
def http_port() -> Iterator[tuple[int, list[subprocess.Popen[bytes]]]]:
    """A free port and the HTTP servers a test starts on it, ended after the test."""
    started: list[subprocess.Popen[bytes]] = []
    yield free_port(), started
    for process in started:
        process.kill()
        process.wait(timeout=30)


# --- configuration -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["", "has space", "dot.ted", "two__parts", "trailing_", "n" * 57, "é"]
)
def test_a_server_name_outside_the_allowed_form_is_a_config_error(name: str) -> None:
    with pytest.raises(ConfigError, match="name"):
        McpServer.stdio(name, "server")


def test_the_longest_server_name_leaves_room_for_a_one_character_tool() -> None:
    assert McpServer.stdio("n" * 56, "server").name == "n" * 56


def test_two_servers_with_one_name_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="two MCP servers are named 'files'"):
        check_servers([McpServer.stdio("files", "a"), McpServer.http("files", "http://h/mcp")])


async def test_opening_two_servers_with_one_name_is_a_config_error_before_any_starts() -> None:
    with pytest.raises(ConfigError, match="two MCP servers are named 't'"):
        await McpSessions.open([tools_server(), tools_server()])


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({}, "exactly one of 'command'"),
        ({"command": "x", "url": "http://h/mcp"}, "exactly one of 'command'"),
        ({"url": "ftp://h/mcp"}, "http:// or https://"),
        ({"url": "http://h/mcp", "args": ["a"]}, "'args' is for a stdio server"),
        ({"command": "x", "headers": {"a": "b"}}, "'headers' is for an HTTP server"),
        ({"command": " "}, "the command is empty"),
        ({"command": "x", "call_timeout": 0}, "call_timeout"),
        ({"command": "x", "start_timeout": float("inf")}, "start_timeout"),
        ({"command": "x", "max_result_chars": True}, "max_result_chars"),
    ],
)
def test_a_bad_server_is_a_config_error_naming_what_is_wrong(
    fields: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem):
        McpServer(name="s", **fields)


def test_a_table_mistake_names_the_file_and_key() -> None:
    with pytest.raises(ConfigError) as raised:
        servers_from_tables(
            [{"name": "ok", "command": "x"}, {"name": "s", "command": "x", "call_timout": 5}],
            "contract.toml",
        )
    assert str(raised.value).startswith("contract.toml: mcp[1].call_timout: unknown key")

    with pytest.raises(ConfigError, match=r"contract.toml: mcp\[0\].env.KEY: .*string"):
        servers_from_tables([{"name": "s", "command": "x", "env": {"KEY": 1}}], "contract.toml")
    with pytest.raises(ConfigError, match=r"contract.toml: mcp: expected an array of tables"):
        servers_from_tables({"name": "s"}, "contract.toml")
    with pytest.raises(ConfigError, match=r"contract.toml: mcp: two MCP servers are named 's'"):
        servers_from_tables([{"name": "s", "command": "x"}] * 2, "contract.toml")


def test_a_tables_stdio_server_starts_in_the_files_folder_or_its_cwd_beneath_it(
    tmp_path: Path,
) -> None:
    plain, placed, http = servers_from_tables(
        [
            {"name": "a", "command": "x"},
            {"name": "b", "command": "x", "cwd": "servers"},
            {"name": "c", "url": "https://h/mcp"},
        ],
        "contract.toml",
        folder=tmp_path,
    )

    assert plain.cwd == tmp_path
    assert placed.cwd == tmp_path / "servers"
    assert http.cwd is None


def test_starting_a_server_is_an_exec_of_its_program_or_a_connection_to_its_host() -> None:
    stdio = McpServer.stdio("s", "npx", ["-y", "pkg"])
    assert stdio.start_access() == Access(Act.EXEC, "npx", ("npx", "-y", "pkg"))
    assert McpServer.http("h", "https://mcp.example.com/mcp").start_access() == Access(
        Act.NET, "mcp.example.com:443"
    )
    assert McpServer.http("h", "http://Example.com/mcp").start_access().target == "example.com:80"
    assert McpServer.http("h", "http://[::1]:8080/mcp").start_access().target == "[::1]:8080"


def test_secrets_of_a_server_are_not_shown_by_its_repr() -> None:
    shown = repr(McpServer.http("h", "https://h/mcp", {"Authorization": "Bearer s3cret"}))
    shown += repr(McpServer.stdio("s", "x", env={"TOKEN": "s3cret"}))

    assert "s3cret" not in shown


def test_importing_the_mcp_package_loads_no_part_of_the_sdk() -> None:
    code = (
        "import sys\n"
        "from io_harness._mcp import McpServer, McpSessions, check_servers\n"
        "check_servers([McpServer.stdio('s', 'x')])\n"
        "import io_harness.cli._mcp\n"
        "loaded = sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.'))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr


# --- result content ----------------------------------------------------------------------


def test_each_kind_of_content_becomes_text_the_model_can_read() -> None:
    from mcp.types import CallToolResult

    blob = "AAAA" * 1024  # 3 KB once decoded
    result = CallToolResult.model_validate(
        {
            "content": [
                {"type": "text", "text": "first"},
                {"type": "image", "data": blob, "mimeType": "image/png"},
                {"type": "audio", "data": "AAA=", "mimeType": "audio/wav"},
                {
                    "type": "resource_link",
                    "uri": "file:///a.txt",
                    "name": "a.txt",
                    "mimeType": "text/plain",
                    "size": 2048,
                },
                {
                    "type": "resource",
                    "resource": {"uri": "file:///b.txt", "mimeType": "text/plain", "text": "bee"},
                },
                {
                    "type": "resource",
                    "resource": {"uri": "file:///c.bin", "blob": blob},
                },
            ],
            "structuredContent": {"rows": 2},
        }
    )

    assert result_text(result).split("\n") == [
        "first",
        "[image/png, 3 KB]",
        "[audio/wav, 2 bytes]",
        "[resource link file:///a.txt (text/plain, 2 KB)] a.txt",
        "[resource file:///b.txt (text/plain, 3 characters)]",
        "bee",
        "[resource file:///c.bin (3 KB)]",
        "[structured content]",
        '{"rows": 2}',
    ]


def test_structured_content_alone_is_sent_as_json_and_never_twice() -> None:
    from mcp.types import CallToolResult

    alone = CallToolResult.model_validate({"content": [], "structuredContent": {"sum": 5}})
    carried = CallToolResult.model_validate(
        {"content": [{"type": "text", "text": '{\n  "sum": 5\n}'}], "structuredContent": {"sum": 5}}
    )
    wrapped = CallToolResult.model_validate(
        {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"result": "hi"}}
    )
    empty = CallToolResult.model_validate({"content": []})

    assert result_text(alone) == '{"sum": 5}'
    assert result_text(carried) == '{\n  "sum": 5\n}'
    assert result_text(wrapped) == "hi"
    assert result_text(empty) == "(the tool returned no content)"


def test_sizes_read_as_a_person_would_say_them() -> None:
    assert [size_text(n) for n in (1, 812, 12 * 1024, 3_565_158)] == [
        "1 byte",
        "812 bytes",
        "12 KB",
        "3.4 MB",
    ]


# --- sessions over stdio -----------------------------------------------------------------


async def test_a_servers_tools_are_offered_under_its_namespace_as_it_describes_them(
    sessions: McpSessions,
) -> None:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=[str(TOOLS)])
    with os.fdopen(os.open(os.devnull, os.O_WRONLY), "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as streams,
            ClientSession(*streams) as direct,
        ):
            await direct.initialize()
            listed = (await direct.list_tools()).tools

    tools = sessions.tools()
    assert [tool.name for tool in tools] == [f"mcp__t__{tool.name}" for tool in listed]
    for tool, wire in zip(tools, listed, strict=True):
        assert isinstance(tool, McpTool)
        assert tool.kind == "mcp"
        assert tool.spec.description == wire.description
        assert tool.spec.parameters == wire.input_schema


async def test_a_call_answers_with_the_tools_text(box: RunTools) -> None:
    done = await call(box, "mcp__t__echo", text="hello")

    assert (done.content, done.is_error, done.error) == ("hello", False, None)


async def test_an_error_result_is_an_error_observation(box: RunTools) -> None:
    done = await call(box, "mcp__t__fail", message="no such ticket")

    assert done.is_error
    assert done.content.startswith("mcp__t__fail: ")
    assert "no such ticket" in done.content


async def test_a_call_over_its_timeout_is_an_observation_and_the_session_stays_usable(
    box: RunTools,
) -> None:
    slow = await call(box, "mcp__t__slow", seconds=600)
    after = await call(box, "mcp__t__echo", text="still here")

    assert slow.is_error
    assert "ended after 2 s (its timeout)" in slow.content
    assert slow.error == "timeout after 2 s"
    assert after.content == "still here"


async def test_a_result_over_the_cap_is_cut_with_a_marker_saying_how_much() -> None:
    async with await McpSessions.open([tools_server(max_result_chars=1000)]) as opened:
        done = await call(RunTools(opened.tools()), "mcp__t__huge", n=5000)

    assert done.content.startswith("x" * 1000 + "\n[... 4000 characters cut")
    assert "the result was 5000 characters, over this tool's cap of 1000" in done.content
    (event,) = [e for e in opened.take_events() if e.kind == "call"]
    assert event.detail["cut"] == 4000


async def test_an_image_is_summarised_with_its_type_and_size(box: RunTools) -> None:
    done = await call(box, "mcp__t__image", size=12 * 1024)

    assert done.content == "[image/png, 12 KB]"


async def test_structured_content_reaches_the_model_once(box: RunTools) -> None:
    done = await call(box, "mcp__t__add", a=2, b=3)

    assert json.loads(done.content) == {"sum": 5}


async def test_embedded_resources_give_their_uri_type_and_size(box: RunTools) -> None:
    done = await call(box, "mcp__t__document")

    assert done.content == (
        "here it is\n[resource file:///notes.txt (text/plain, 6 characters)]\na note\n"
        "[resource file:///data.bin (application/octet-stream, 2 KB)]"
    )


async def test_a_chatty_server_never_blocks_on_its_stderr(box: RunTools) -> None:
    done = await call(box, "mcp__t__noisy", lines=200_000)

    assert done.content == "said a lot"


async def test_each_call_is_an_exec_check_on_the_offered_name(box: RunTools) -> None:
    policy = Policy.permissive().layer("app").rule(Act.EXEC, "mcp__t__echo", Effect.DENY)
    gate = Gate(policy)

    refused = await box.dispatch(
        ToolCall(id="c1", name="mcp__t__echo", arguments={"text": "x"}), gate=gate
    )
    allowed = await box.dispatch(
        ToolCall(id="c2", name="mcp__t__add", arguments={"a": 1, "b": 1}), gate=gate
    )

    assert isinstance(refused, ToolOutcome) and refused.is_error
    assert "refused by the policy" in refused.content
    assert isinstance(allowed, ToolOutcome) and not allowed.is_error
    assert [(row.act, row.target, row.decision) for row in gate.scope.rows] == [
        ("exec", "mcp__t__echo", "refused"),
        ("exec", "mcp__t__add", "allowed"),
    ]


async def test_a_server_that_dies_mid_call_is_restarted_once_then_gone() -> None:
    async with await McpSessions.open([tools_server()]) as opened:
        box = RunTools(opened.tools())
        first = await call(box, "mcp__t__pid")
        died = await call(box, "mcp__t__die")
        restarted = await call(box, "mcp__t__pid")
        died_again = await call(box, "mcp__t__die")
        gone = await call(box, "mcp__t__echo", text="anyone?")

    assert died.is_error and "stopped during the call" in died.content
    assert "dying now" in died.content  # the end of its stderr
    assert "will be started again at the next call" in died.content
    note, _, pid = restarted.content.partition("\n")
    assert note.startswith("[the MCP server 't' had stopped") and "restarted" in note
    assert not restarted.is_error and pid != first.content
    assert died_again.is_error and "not started again" in died_again.content
    assert gone.is_error and "is gone" in gone.content and "unavailable" in gone.content
    restarts = [e.detail["ok"] for e in opened.take_events() if e.kind == "restart"]
    assert restarts == [True, False]


@linux_only
async def test_a_server_killed_between_calls_is_restarted_before_the_next_one(
    sessions: McpSessions, box: RunTools
) -> None:
    pid = int((await call(box, "mcp__t__pid")).content)
    assert sessions.status() == {"t": "running"}
    os.kill(pid, signal.SIGKILL)
    assert await eventually_async(lambda: sessions.status() == {"t": "stopped"})

    done = await call(box, "mcp__t__echo", text="back")

    assert not done.is_error
    assert done.content.startswith("[the MCP server 't' had stopped (it exited)")
    assert done.content.endswith("\nback")
    assert sessions.status() == {"t": "running"}


async def test_a_server_that_never_answers_the_handshake_is_an_mcp_error_with_its_stderr() -> None:
    tag = uuid.uuid4().hex
    silent = McpServer.stdio(
        "quiet", sys.executable, [str(SILENT), f"--tag={tag}"], start_timeout=1
    )

    with pytest.raises(McpError) as raised:
        await McpSessions.open([silent])

    message = str(raised.value)
    assert message.startswith("MCP server 'quiet' (")
    assert "failed the handshake: no answer within 1 s (its start timeout)" in message
    assert message.endswith("the last word: waiting for nothing")
    assert "early noise 0\n" not in message  # only the end of its stderr is kept
    assert len(message) < 5000
    if LINUX:
        assert tagged(tag) == []


async def test_a_program_that_does_not_exist_is_an_mcp_error() -> None:
    with pytest.raises(McpError, match=r"MCP server 'm' .* could not start: .*no-such-program"):
        await McpSessions.open([McpServer.stdio("m", "no-such-program-ioh")])


async def test_a_server_that_exits_at_start_is_an_mcp_error_with_its_last_words() -> None:
    code = "import sys; print('fatal: no API key', file=sys.stderr); sys.exit(2)"
    with pytest.raises(McpError, match=r"(?s)failed the handshake: .*fatal: no API key"):
        await McpSessions.open([McpServer.stdio("e", sys.executable, ["-c", code])])


@linux_only
async def test_when_one_server_fails_the_ones_already_started_are_closed() -> None:
    tag = uuid.uuid4().hex
    with pytest.raises(McpError, match="'m'"):
        await McpSessions.open([tools_server(tag=tag), McpServer.stdio("m", "no-such-program")])

    assert tagged(tag) == []


async def test_a_tool_name_too_long_to_offer_is_a_config_error_naming_server_and_tool() -> None:
    with pytest.raises(ConfigError, match=r"MCP server '(n){56}': its tool 'echo'.* 67 characters"):
        await McpSessions.open([tools_server("n" * 56)])


async def test_a_change_the_server_announces_is_picked_up_by_refresh(
    sessions: McpSessions, box: RunTools
) -> None:
    assert not sessions.changed
    assert not await sessions.refresh()

    await call(box, "mcp__t__grow")
    assert await eventually_async(lambda: sessions.changed, within=10)
    assert await sessions.refresh()

    names = [tool.name for tool in sessions.tools()]
    assert names[-1] == "mcp__t__extra"
    assert not await sessions.refresh()
    done = await call(RunTools(sessions.tools()), "mcp__t__extra", text="new")
    assert done.content == "extra: new"
    (listing,) = [
        e for e in sessions.take_events() if e.kind == "list" and e.detail["reason"] == "changed"
    ]
    assert listing.detail["added"] == ["mcp__t__extra"]


async def test_a_stdio_server_sees_only_its_own_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("IOH_TEST_SECRET", "s3cret")
    async with await McpSessions.open([tools_server(env={"GIVEN": "yes"})]) as opened:
        box = RunTools(opened.tools())
        secret = await call(box, "mcp__t__env", name="IOH_TEST_SECRET")
        given = await call(box, "mcp__t__env", name="GIVEN")
        path = await call(box, "mcp__t__env", name="PATH")

    assert secret.content == "(unset)"
    assert given.content == "yes"
    assert path.content == os.environ["PATH"]


async def test_events_say_what_each_server_did() -> None:
    async with await McpSessions.open([tools_server()]) as opened:
        await call(RunTools(opened.tools()), "mcp__t__echo", text="x")
    events = opened.take_events()

    assert [e.kind for e in events] == ["start", "handshake", "list", "call", "close"]
    assert {e.server for e in events} == {"t"}
    start, handshake, listing, called, closed = (e.detail for e in events)
    assert start["transport"] == "stdio" and start["ok"]
    assert handshake["server"] == "tools" and handshake["protocol"]
    assert listing["tools"] == len(opened.tools())
    assert (called["tool"], called["outcome"]) == ("echo", "ok")
    assert called["seconds"] >= 0
    assert "error" not in closed
    assert opened.take_events() == []


# --- the end of every server -------------------------------------------------------------


@linux_only
async def test_no_server_process_is_left_after_close() -> None:
    tag = uuid.uuid4().hex
    opened = await McpSessions.open([tools_server(tag=tag)])
    assert len(tagged(tag)) == 1

    await opened.close()

    assert tagged(tag) == []


async def test_close_is_idempotent_and_a_call_after_it_is_an_observation() -> None:
    opened = await McpSessions.open([tools_server()])
    box = RunTools(opened.tools())
    await opened.close()
    await opened.close()

    done = await call(box, "mcp__t__echo", text="late")

    assert done.is_error and "closed" in done.content
    assert [e.kind for e in opened.take_events()].count("close") == 1


@linux_only
async def test_no_server_process_is_left_when_the_owning_task_is_cancelled() -> None:
    tag = uuid.uuid4().hex
    ready = asyncio.Event()

    async def use() -> None:
        async with await McpSessions.open([tools_server(tag=tag)]):
            ready.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(use())
    await asyncio.wait_for(ready.wait(), 60)
    assert len(tagged(tag)) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await eventually_async(lambda: tagged(tag) == [])


@linux_only
async def test_no_server_process_is_left_when_the_task_opening_it_is_cancelled() -> None:
    tag = uuid.uuid4().hex
    silent = McpServer.stdio("quiet", sys.executable, [str(SILENT), f"--tag={tag}"])

    task = asyncio.create_task(McpSessions.open([silent]))
    assert await eventually_async(lambda: len(tagged(tag)) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await eventually_async(lambda: tagged(tag) == [])


@linux_only
def test_no_server_process_outlives_a_harness_killed_with_sigkill() -> None:
    done = subprocess.run(
        [sys.executable, str(SERVERS / "killed_harness.py"), str(TOOLS)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == -signal.SIGKILL, done.stderr
    pid = int(done.stdout.split()[-1])
    assert eventually(lambda: not alive(pid), within=30), f"the server {pid} outlived its harness"


# --- sessions over streamable HTTP -------------------------------------------------------


async def test_an_http_servers_tools_are_called_with_its_headers(
    http_port: tuple[int, list[subprocess.Popen[bytes]]],
) -> None:
    port, started = http_port
    started.append(serve_http(port))
    server = McpServer.http(
        "web", f"http://127.0.0.1:{port}/mcp", {"X-Ioh-Test": "sent"}, call_timeout=2
    )

    async with await McpSessions.open([server]) as opened:
        box = RunTools(opened.tools())
        echoed = await call(box, "mcp__web__echo", text="over http")
        header = await call(box, "mcp__web__header", name="x-ioh-test")
        slow = await call(box, "mcp__web__slow", seconds=600)
        after = await call(box, "mcp__web__echo", text="still here")
        huge = await call(box, "mcp__web__huge", n=3_000_000)

    assert echoed.content == "over http"
    assert header.content == "sent"
    assert slow.is_error and slow.error == "timeout after 2 s"
    assert after.content == "still here"
    assert "2968000 characters cut" in huge.content  # past the SDK's 1 MiB event limit
    assert opened.take_events()[0].detail["target"] == f"http://127.0.0.1:{port}/mcp"


async def test_an_http_server_that_went_away_is_reconnected_at_the_next_call(
    http_port: tuple[int, list[subprocess.Popen[bytes]]],
) -> None:
    port, started = http_port
    started.append(serve_http(port))
    server = McpServer.http("web", f"http://127.0.0.1:{port}/mcp", start_timeout=10)

    async with await McpSessions.open([server]) as opened:
        box = RunTools(opened.tools())
        started[0].kill()
        started[0].wait(timeout=30)
        lost = await call(box, "mcp__web__echo", text="hello?")
        started.append(serve_http(port))
        back = await call(box, "mcp__web__echo", text="hello again")

    assert lost.is_error and "the MCP server 'web'" in lost.content
    assert back.content.startswith("[the MCP server 'web' had stopped")
    assert back.content.endswith("\nhello again")


async def test_an_http_server_that_refuses_connections_is_an_mcp_error() -> None:
    server = McpServer.http("web", f"http://127.0.0.1:{free_port()}/mcp", start_timeout=10)

    with pytest.raises(McpError, match=r"MCP server 'web' \(http://127.0.0.1:\d+/mcp\) failed"):
        await McpSessions.open([server])


# --- ioh mcp list ------------------------------------------------------------------------


def test_ioh_mcp_list_prints_each_offered_tool_with_its_verdict(tmp_path: Path) -> None:
    contract = tmp_path / "contract.toml"
    contract.write_text(
        f"""
goal = "x"
root = "."
[verify]
kind = "command"
argv = ["true"]
[policy]
base = "permissive"
[policy.layers.app]
deny_exec = ["mcp__t__die", "forbidden-server"]
ask_exec = ["mcp__t__slow"]
[[mcp]]
name = "t"
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(TOOLS))}]
[[mcp]]
name = "off"
command = "forbidden-server"
[[mcp]]
name = "broken"
command = "no-such-program-ioh"
"""
    )
    out = io.StringIO()
    from io_harness.cli._mcp import cmd_mcp_list

    status = cmd_mcp_list(argparse.Namespace(file=contract), Console(file=out, width=200))

    printed = out.getvalue()
    assert status == 2  # 'broken' could not start
    assert "mcp__t__echo  allow (the default for exec)" in printed
    assert "mcp__t__die  deny (rule 'deny exec mcp__t__die' in layer 'app')" in printed
    assert "mcp__t__slow  ask (rule 'ask exec mcp__t__slow' in layer 'app')" in printed
    assert "Answer with the text given." in printed
    assert "off (stdio: forbidden-server)\n  start: exec forbidden-server: deny" in printed
    assert "not started: the policy denies it" in printed
    assert "broken" in printed and "could not start" in printed


@linux_only
async def test_a_list_failure_near_the_start_deadline_still_stops_the_server() -> None:
    # The failure's teardown runs after the handshake and list phases: the start
    # timeout, still armed, must not cut it short and leave the server running.
    marker = f"fails-list-{uuid.uuid4().hex}"
    server = McpServer.stdio(
        "f", sys.executable, [str(SERVERS / "fails_list.py"), marker, "2.5"], start_timeout=3
    )

    with pytest.raises(McpError, match="could not list its tools: boom"):
        await asyncio.wait_for(McpSessions.open([server]), 60)

    assert eventually(lambda: not tagged(marker), within=30)
