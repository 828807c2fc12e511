"""MCP servers through the Harness, end to end: offered, called, governed, traced, closed.

The server is tests/mcp_ticket_server.py, built with the SDK's own server
class and started as a real subprocess (stdio) or on loopback (streamable
HTTP). Session-level behaviour (restarts, timeouts, content, orphans after
SIGKILL) is in test_mcp.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    ApprovalContext,
    ApprovalRequest,
    CallbackApprover,
    CompletionRequest,
    CompletionResponse,
    Decision,
    Harness,
    McpServer,
    Policy,
    Record,
    RefusedError,
    ResumeError,
    RunOutcome,
    Store,
)
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply
from support import observation

SERVER = Path(__file__).parent / "mcp_ticket_server.py"
DONE = call("write_file", path="done.txt", content="done\n")
linux_only = pytest.mark.skipif(
    sys.platform != "linux", reason="finds the server's processes through /proc"
)


contract = partial(support.contract, goal="close the flaky ticket, then write done.txt")
"""The task of the runs here: done when done.txt holds ``done``."""


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    return root


@pytest.fixture
def ledger(tmp_path: Path) -> Path:
    return tmp_path / "ledger.txt"


def tickets(ledger: Path) -> McpServer:
    return McpServer.stdio("tickets", sys.executable, [str(SERVER), str(ledger)])


def server_pids(marker: Path) -> list[int]:
    """Processes whose command line names ``marker`` (each test's own ledger path)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if str(marker).encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
    return found


def gone_soon(marker: Path) -> bool:
    deadline = time.monotonic() + 15
    while server_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not server_pids(marker)


@linux_only
async def test_a_servers_tools_are_offered_namespaced_called_and_traced(
    work: Path, ledger: Path
) -> None:
    provider = ScriptedProvider(
        [
            reply(calls=[call("mcp__tickets__lookup", ticket=7)]),
            reply(calls=[call("mcp__tickets__close_ticket", ticket=7)]),
            reply(calls=[DONE]),
        ]
    )
    store = Store.memory()

    result = await Harness(provider, store=store, mcp=[tickets(ledger)]).run(contract(work))

    assert result.outcome is RunOutcome.SUCCESS
    offered = [spec.name for spec in provider.requests[0].tools]
    assert {"mcp__tickets__lookup", "mcp__tickets__close_ticket"} <= set(offered)
    lookup = next(s for s in provider.requests[0].tools if s.name == "mcp__tickets__lookup")
    assert lookup.description == "Look a ticket up by its number."
    assert lookup.parameters["properties"]["ticket"]["type"] == "integer"
    assert observation(provider, 1) == "ticket 7: the build is flaky on Tuesdays"
    assert ledger.read_text() == "closed 7\n"
    trace = store.trace(result.run_id)
    assert [r.kind for r in trace.tool_calls] == ["mcp", "mcp", "builtin"]
    kinds = [e.kind for e in trace.mcp_events]
    assert kinds[:3] == ["start", "handshake", "list"]
    assert kinds.count("call") == 2 and kinds[-1] == "close"
    assert gone_soon(ledger)


async def test_deny_exec_of_one_server_tool_refuses_it_and_leaves_the_others(
    work: Path, ledger: Path
) -> None:
    provider = ScriptedProvider(
        [reply(calls=[call("mcp__tickets__close_ticket", ticket=7)]), reply(calls=[DONE])]
    )
    policy = Policy.default().layer("tickets").deny_exec("mcp__tickets__close_ticket")
    store = Store.memory()

    result = await Harness(provider, store=store, policy=policy, mcp=[tickets(ledger)]).run(
        contract(work)
    )

    assert result.outcome is RunOutcome.SUCCESS
    assert observation(provider, 1).startswith("mcp__tickets__close_ticket: refused by the policy")
    assert not ledger.exists()
    (refusal,) = [p for p in store.trace(result.run_id).permissions if p.decision == "refused"]
    assert (refusal.target, refusal.layer) == ("mcp__tickets__close_ticket", "tickets")


async def test_a_server_whose_program_the_policy_denies_is_refused_before_any_call(
    work: Path, ledger: Path
) -> None:
    provider = ScriptedProvider([])
    policy = Policy.default().layer("no-python").deny_exec("python*")

    with pytest.raises(RefusedError, match="MCP server 'tickets': refused by the policy: exec"):
        await Harness(provider, policy=policy, mcp=[tickets(ledger)]).run(contract(work))

    assert provider.requests == []


@contextlib.contextmanager
def http_server(ledger: Path) -> Iterator[int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(ledger), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            assert time.monotonic() < deadline, "the HTTP server did not start"
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


async def test_an_http_server_is_dialled_only_when_the_policy_allows_its_host(
    work: Path, ledger: Path
) -> None:
    with http_server(ledger) as port:
        server = McpServer.http("tickets", f"http://127.0.0.1:{port}/mcp")
        refused = ScriptedProvider([])
        with pytest.raises(RefusedError, match=f"net 127.0.0.1:{port}: deny"):
            await Harness(refused, mcp=[server]).run(contract(work))
        assert refused.requests == []

        provider = ScriptedProvider(
            [reply(calls=[call("mcp__tickets__close_ticket", ticket=3)]), reply(calls=[DONE])]
        )
        policy = Policy.default().layer("tickets").allow_net(f"127.0.0.1:{port}")
        result = await Harness(provider, policy=policy, mcp=[server]).run(contract(work))

    assert result.outcome is RunOutcome.SUCCESS
    assert ledger.read_text() == "closed 3\n"


@linux_only
async def test_an_ask_on_a_server_tool_defers_and_the_resume_needs_the_server(
    work: Path, ledger: Path
) -> None:
    store = Store.memory()
    policy = Policy.default().layer("tickets").ask_exec("mcp__tickets__close_ticket")
    started = await Harness(
        ScriptedProvider([reply(calls=[call("mcp__tickets__close_ticket", ticket=9)])]),
        store=store,
        policy=policy,
        mcp=[tickets(ledger)],
    ).run(contract(work))
    assert started.outcome is RunOutcome.AWAITING_APPROVAL
    assert gone_soon(ledger)  # a deferred run closes its sessions

    with pytest.raises(ResumeError, match="MCP server 'tickets'"):
        await Harness(ScriptedProvider([]), store=store, policy=policy).resume(
            started.run_id, decision=Decision.approve()
        )
    resumed = await Harness(
        ScriptedProvider([reply(calls=[DONE])]), store=store, policy=policy, mcp=[tickets(ledger)]
    ).resume(started.run_id, decision=Decision.approve())

    assert resumed.outcome is RunOutcome.SUCCESS
    assert ledger.read_text() == "closed 9\n"


@linux_only
async def test_a_cancelled_run_leaves_no_server_process(work: Path, ledger: Path) -> None:
    answered = asyncio.Event()

    async def model(request: CompletionRequest) -> CompletionResponse:
        answered.set()
        await asyncio.Event().wait()  # never answers
        raise AssertionError("unreachable")

    harness = Harness(ScriptedProvider(model), mcp=[tickets(ledger)])
    running = asyncio.create_task(harness.run(contract(work)))
    await asyncio.wait_for(answered.wait(), 60)
    assert server_pids(ledger), "the server should be running while the model is asked"

    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert await asyncio.to_thread(gone_soon, ledger)


def test_a_contracts_mcp_tables_start_with_ioh_run_and_its_resume(
    tmp_path: Path, work: Path, ledger: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "contract.toml"
    toml.write_text(
        'goal = "close the flaky ticket, then write done.txt"\nroot = "work"\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "done.txt"\nneedle = "done"\n'
        '[policy]\nbase = "default"\n[policy.layers.tickets]\n'
        'ask_exec = ["mcp__tickets__close_ticket"]\n'
        "[[mcp]]\n"
        f'name = "tickets"\ncommand = {str(sys.executable)!r}\n'
        f"args = [{str(SERVER)!r}, {str(ledger)!r}]\n"
    )
    cassette = tmp_path / "model.jsonl"
    record_cassette(cassette, tmp_path / "recording")
    store = tmp_path / "runs.db"
    common = ["--store", str(store)]

    assert main(["mcp", "list", str(toml)]) == 0
    listed = capsys.readouterr().out
    assert "mcp__tickets__close_ticket" in listed and "ask" in listed

    started = main(["run", str(toml), *common, "--provider", f"replay:{cassette}",
                    "--approve", "defer", "--run-id", "cli"])  # fmt: skip
    assert started == 3  # awaiting approval
    assert main(["approve", "cli", *common]) == 0
    assert ledger.read_text() == "closed 5\n"


def record_cassette(path: Path, scratch: Path) -> None:
    """A cassette of a model that closes ticket 5, then writes done.txt, recorded in a run."""
    (scratch / "work").mkdir(parents=True)
    answers = ScriptedProvider(
        [reply(calls=[call("mcp__tickets__close_ticket", ticket=5)]), reply(calls=[DONE])]
    )
    done = Harness(Record(answers, path), mcp=[tickets(scratch / "ledger.txt")]).run_sync(
        contract(scratch / "work")
    )
    assert done.outcome is RunOutcome.SUCCESS


def test_ioh_doctor_reports_a_contracts_servers_and_whether_each_may_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = tmp_path / "contract.toml"
    toml.write_text(
        'goal = "g"\nroot = "."\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "done.txt"\nneedle = "done"\n'
        '[[mcp]]\nname = "tickets"\ncommand = "ticket-server"\n'
        '[[mcp]]\nname = "remote"\nurl = "https://mcp.example.com/mcp"\n'
    )

    assert main(["doctor", "--contract", str(toml)]) == 0

    shown = capsys.readouterr().out
    assert "tickets  stdio  ticket-server  start: exec ticket-server: allow" in shown
    assert "remote  http" in shown
    assert "start: net mcp.example.com:443: deny" in shown


async def test_a_server_restarted_mid_run_is_checked_again_and_its_tools_offered_anew(
    work: Path,
) -> None:
    tools = Path(__file__).parent / "mcp_servers" / "tools_server.py"
    server = McpServer.stdio("t", sys.executable, [str(tools)])
    provider = ScriptedProvider(
        [
            reply(calls=[call("mcp__t__die")]),
            reply(calls=[call("mcp__t__echo", text="back")]),
            reply(calls=[DONE]),
        ]
    )
    store = Store.memory()

    result = await Harness(provider, store=store, mcp=[server]).run(contract(work))

    assert result.outcome is RunOutcome.SUCCESS
    assert "restarted for this call" in observation(provider, 2)
    assert observation(provider, 2).endswith("back")
    trace = store.trace(result.run_id)
    starts = [p for p in trace.permissions if p.act == "exec" and p.target == sys.executable]
    assert len(starts) == 2  # the first start and the restart, each a checked act
    assert [e.kind for e in trace.mcp_events].count("restart") == 1


async def test_an_ask_net_on_a_servers_host_asks_at_start_and_defers_each_call(
    work: Path, ledger: Path
) -> None:
    asked: list[str] = []

    async def decide(request: ApprovalRequest, context: ApprovalContext) -> Decision:
        asked.append(request.tool)
        if request.tool.startswith("start the MCP server"):
            return Decision.approve()  # a person lets the run reach the server
        return Decision.defer()  # each call waits for a decision, past this process

    store = Store.memory()
    with http_server(ledger) as port:
        server = McpServer.http("tickets", f"http://127.0.0.1:{port}/mcp")
        policy = Policy.default().layer("tickets").ask_net(f"127.0.0.1:{port}")
        started = await Harness(
            ScriptedProvider([reply(calls=[call("mcp__tickets__close_ticket", ticket=4)])]),
            store=store,
            policy=policy,
            approver=CallbackApprover(decide),
            mcp=[server],
        ).run(contract(work))
        assert started.outcome is RunOutcome.AWAITING_APPROVAL
        assert started.request is not None and started.request.act.value == "net"
        assert not ledger.exists()

        resumed = await Harness(
            ScriptedProvider([reply(calls=[DONE])]),
            store=store,
            policy=policy,
            approver=CallbackApprover(decide),
            mcp=[server],
        ).resume(started.run_id, decision=Decision.approve())

    assert resumed.outcome is RunOutcome.SUCCESS
    assert ledger.read_text() == "closed 4\n"
    assert asked == ["start the MCP server tickets", "mcp__tickets__close_ticket",
                     "start the MCP server tickets"]  # fmt: skip


async def test_an_ask_on_a_servers_start_without_an_approver_is_refused(
    work: Path, ledger: Path
) -> None:
    with http_server(ledger) as port:
        server = McpServer.http("tickets", f"http://127.0.0.1:{port}/mcp")
        policy = Policy.default().layer("tickets").ask_net(f"127.0.0.1:{port}")
        with pytest.raises(RefusedError, match="the ask cannot defer"):
            await Harness(ScriptedProvider([]), policy=policy, mcp=[server]).run(contract(work))
