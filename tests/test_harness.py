"""The Harness end to end, through the public API: caller tools, their edges, resume.

Skills and memory have their own end-to-end tests in test_harness_skills_memory.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import pytest

import support
from io_harness import (
    NO_SANDBOX,
    Budget,
    CallbackApprover,
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Decision,
    Harness,
    Policy,
    Price,
    PriceTable,
    ResumeError,
    RunOutcome,
    Store,
    TaskContract,
    ToolSpec,
    Usage,
    WorkspaceFileContains,
    resume,
    run,
    tool,
)
from io_harness.testing import ScriptedProvider, call, reply
from support import observation

WORKER = Path(__file__).parent / "harness_worker.py"
FILE_TOOLS = ["read_file", "write_file", "edit_file", "grep", "find", "list_dir"]


contract = partial(support.contract, goal="open a ticket, then write done.txt")
"""The task of the runs here: done when done.txt holds ``done``."""


def finishing(*first: Any) -> ScriptedProvider:
    """A model that makes the calls given, one step each, then writes done.txt."""
    return ScriptedProvider(
        [
            *(reply(calls=[c]) for c in first),
            reply(calls=[call("write_file", path="done.txt", content="done\n")]),
        ]
    )


opened: list[str] = []


@tool
def open_ticket(title: str, priority: int = 3) -> dict[str, Any]:
    """Open a ticket in the team's tracker.

    Args:
        title: What the ticket is about.
        priority: 1 (urgent) to 5 (some day).
    """
    opened.append(title)
    return {"id": 7, "title": title, "priority": priority}


@tool
async def explode(reason: str) -> str:
    """A tool that always fails."""
    raise LookupError(f"no such ticket: {reason}")


@pytest.fixture(autouse=True)
def _clear_opened() -> None:
    opened.clear()


# -- a caller tool in a run --------------------------------------------------------


async def test_a_caller_tool_is_offered_beside_the_built_ins_and_called(tmp_path: Path) -> None:
    provider = finishing(call("open_ticket", title="flaky test", priority=1))
    store = Store.memory()
    harness = Harness(provider, store=store, tools=[open_ticket])

    result = await harness.run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    offered = [spec.name for spec in provider.requests[0].tools]
    assert offered == [*FILE_TOOLS, "open_ticket"]
    spec = provider.requests[0].tools[-1]
    assert spec.description.startswith("Open a ticket in the team's tracker.")
    assert spec.parameters["properties"]["title"]["description"] == "What the ticket is about."
    assert opened == ["flaky test"]
    assert json.loads(observation(provider, 1)) == {"id": 7, "title": "flaky test", "priority": 1}
    rows = store.trace(result.run_id).tool_calls
    assert [(row.name, row.kind) for row in rows] == [
        ("open_ticket", "caller"),
        ("write_file", "builtin"),
    ]
    assert rows[0].duration is not None and rows[0].error is None
    assert json.loads(rows[0].arguments) == {"title": "flaky test", "priority": 1}


async def test_a_caller_tools_exception_reaches_the_model_as_an_observation(
    tmp_path: Path,
) -> None:
    provider = finishing(call("explode", reason="T-9"))
    store = Store.memory()

    result = await Harness(provider, store=store, tools=[explode]).run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS  # the run went on after the failure
    assert observation(provider, 1) == "explode failed: LookupError: no such ticket: T-9"
    row = store.trace(result.run_id).tool_calls[0]
    assert row.is_error and row.kind == "caller"
    assert row.error == "LookupError: no such ticket: T-9"


async def test_arguments_a_tool_refuses_reach_the_model_naming_the_bad_fields(
    tmp_path: Path,
) -> None:
    provider = finishing(call("open_ticket", priority="urgent"))

    result = await Harness(provider, tools=[open_ticket]).run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    seen = observation(provider, 1)
    assert seen.startswith("open_ticket: invalid arguments:")
    assert "title" in seen and "priority" in seen
    assert opened == []


async def test_a_caller_tool_that_outlives_its_timeout_is_ended_as_an_observation(
    tmp_path: Path,
) -> None:
    never = asyncio.Event()

    @tool(timeout=0.05)
    async def wait_for_ci(build: str) -> str:
        """Wait until the build finishes."""
        await never.wait()
        return "finished"

    provider = finishing(call("wait_for_ci", build="1234"))
    store = Store.memory()

    result = await Harness(provider, store=store, tools=[wait_for_ci]).run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    assert observation(provider, 1) == "wait_for_ci: the call was ended after 0.05 s (its timeout)"
    assert store.trace(result.run_id).tool_calls[0].error == "timeout after 0.05 s"


async def test_a_slow_sync_tool_does_not_hold_up_another_run_of_the_same_harness(
    tmp_path: Path,
) -> None:
    entered, release = threading.Event(), threading.Event()

    @tool
    def slow_report(name: str) -> str:
        """Build a report; it takes a while."""
        entered.set()
        release.wait(timeout=30)
        return f"report {name}"

    def model(request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        slow = "slow" in request.messages[0].text
        if turn == 0 and slow:
            return reply(calls=[call("slow_report", name="q3")])
        return reply(calls=[call("write_file", path="done.txt", content="done\n")])

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    harness = Harness(ScriptedProvider(model), tools=[slow_report])
    slow_contract = TaskContract.workspace(
        "slow: build the report", tmp_path / "a", WorkspaceFileContains("done.txt", "done")
    )
    slow_run = asyncio.create_task(harness.run(slow_contract))
    try:
        assert await asyncio.to_thread(entered.wait, 30)
        # The tool holds its worker thread; the event loop still drives a second run.
        other = await harness.run(contract(tmp_path / "b"))
        assert other.outcome is RunOutcome.SUCCESS
        assert not slow_run.done()
    finally:
        release.set()
    assert (await slow_run).outcome is RunOutcome.SUCCESS


# -- registration is not authorization ----------------------------------------------


async def test_deny_exec_of_one_caller_tool_refuses_it_and_leaves_the_others_working(
    tmp_path: Path,
) -> None:
    @tool
    def close_ticket(ticket: int) -> str:
        """Close a ticket."""
        return f"closed {ticket}"

    provider = finishing(call("close_ticket", ticket=7), call("open_ticket", title="regression"))
    store = Store.memory()
    policy = Policy.permissive().layer("tickets").deny_exec("close_ticket")
    harness = Harness(provider, store=store, policy=policy, tools=[open_ticket, close_ticket])

    result = await harness.run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    assert observation(provider, 1).startswith("close_ticket: refused by the policy")
    assert opened == ["regression"]
    refused = [p for p in store.trace(result.run_id).permissions if p.target == "close_ticket"]
    assert len(refused) == 1
    assert (refused[0].act, refused[0].effect, refused[0].decision) == ("exec", "deny", "refused")
    assert refused[0].layer == "tickets" and refused[0].rule is not None


def worker(db: Path, root: Path, phase: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(WORKER), str(db), str(root), phase],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stderr == "" or done.returncode != 0, done.stderr
    return {"returncode": done.returncode, **(json.loads(done.stdout) if done.stdout else {})}


def test_an_ask_on_a_caller_tool_defers_and_is_approved_in_a_new_process(tmp_path: Path) -> None:
    root, db = tmp_path / "work", tmp_path / "runs.db"
    root.mkdir()

    asked = worker(db, root, "ask")
    assert asked["outcome"] == "awaiting_approval"
    assert not (tmp_path / "ledger.txt").exists()  # nothing ran before the decision
    with Store.open(db) as store:
        (pending,) = store.approvals("ask")
        request = json.loads(pending.request_json)
        assert (request["act"], request["target"], request["tool"]) == (
            "exec",
            "open_ticket",
            "open_ticket",
        )
        assert request["arguments"] == {"title": "a", "priority": 2}

    approved = worker(db, root, "approve")

    assert approved["outcome"] == "success"
    assert (tmp_path / "ledger.txt").read_text() == "a\nb\n"  # each ticket opened once
    with Store.open(db) as store:
        rows = store.trace("ask").tool_calls
        assert [(r.name, r.kind) for r in rows][:2] == [
            ("open_ticket", "caller"),
            ("open_ticket", "caller"),
        ]


def test_a_run_killed_inside_a_caller_tool_resumes_in_a_new_process(tmp_path: Path) -> None:
    root, db = tmp_path / "work", tmp_path / "runs.db"
    root.mkdir()

    crashed = worker(db, root, "crash")
    assert crashed["returncode"] == -9  # SIGKILL, inside the second ticket's call
    with Store.open(db) as store:
        assert store.load_run("crash").steps == 1  # the first step committed; the second not

    resumed = worker(db, root, "resume")

    assert resumed == {"returncode": 0, "outcome": "success", "steps": 3}
    # The call that was acting when the process died is reported, not run again: its
    # intent was stored before it acted, and a caller tool's effect cannot be seen.
    assert (tmp_path / "ledger.txt").read_text() == "a\nb\n"
    with Store.open(db) as store:
        calls = store.trace("crash").tool_calls
    assert [row.name for row in calls] == ["open_ticket", "open_ticket", "write_file"]
    assert "was acting when the harness stopped" in calls[1].result


# -- resuming needs the same tools ----------------------------------------------------


async def deferred_run(root: Path, store: Store) -> str:
    """A run that defers on its first call of open_ticket."""
    policy = Policy.permissive().layer("tickets").ask_exec("open_ticket")
    provider = finishing(call("open_ticket", title="later"))
    result = await Harness(provider, store=store, policy=policy, tools=[open_ticket]).run(
        contract(root)
    )
    assert result.outcome is RunOutcome.AWAITING_APPROVAL
    return result.run_id


async def test_resuming_without_a_caller_tool_the_run_started_with_is_a_resume_error(
    tmp_path: Path,
) -> None:
    store = Store.memory()
    run_id = await deferred_run(tmp_path, store)
    harness = Harness(finishing(), store=store, policy=None)

    with pytest.raises(ResumeError, match=r"'open_ticket', which this harness does not have"):
        await harness.resume(run_id, decision=Decision.approve())


async def test_resuming_with_a_changed_caller_tool_is_a_resume_error_naming_it(
    tmp_path: Path,
) -> None:
    store = Store.memory()
    run_id = await deferred_run(tmp_path, store)

    @tool(name="open_ticket")
    def open_ticket_v2(title: str, priority: int = 3, team: str = "core") -> str:
        """Open a ticket in the team's tracker."""
        return title

    harness = Harness(finishing(), store=store, tools=[open_ticket_v2])

    with pytest.raises(ResumeError, match="'open_ticket' has changed"):
        await harness.resume(run_id, decision=Decision.approve())


async def test_a_resume_with_the_same_caller_tool_performs_the_approved_call(
    tmp_path: Path,
) -> None:
    store = Store.memory()
    run_id = await deferred_run(tmp_path, store)

    @tool
    def unrelated(x: int) -> int:
        """Not part of the run."""
        return x

    provider = finishing()
    harness = Harness(provider, store=store, tools=[unrelated, open_ticket])

    result = await harness.resume(run_id, decision=Decision.approve())

    assert result.outcome is RunOutcome.SUCCESS
    assert opened == ["later"]
    # The run keeps the tools it started with: a tool the harness added since is not offered.
    assert "unrelated" not in [spec.name for spec in provider.requests[0].tools]


# -- the harness's options ------------------------------------------------------------


async def test_bad_caller_tools_are_config_errors_before_any_provider_call(tmp_path: Path) -> None:
    class Shadow:
        def spec(self) -> ToolSpec:
            return ToolSpec(name="read_file", description="mine", parameters={"type": "object"})

        async def invoke(self, arguments: dict[str, Any]) -> str:
            return ""

    provider = ScriptedProvider([])
    with pytest.raises(ConfigError, match=r"'read_file' is the name of a built-in tool"):
        Harness(provider, tools=[Shadow()])
    with pytest.raises(ConfigError, match="two tools are named 'open_ticket'"):
        Harness(provider, tools=[open_ticket, open_ticket])
    with pytest.raises(ConfigError, match="list of tools"):
        Harness(provider, tools=open_ticket)  # type: ignore[arg-type]
    assert provider.requests == []


async def test_sandbox_none_is_refused_as_ambiguous_and_no_sandbox_runs_uncontained(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError, match="NO_SANDBOX"):
        Harness(ScriptedProvider([]), sandbox=None)  # type: ignore[arg-type]

    result = await Harness(finishing(), sandbox=NO_SANDBOX).run(contract(tmp_path))

    assert result.sandbox == "none"


async def test_one_harness_keeps_its_runs_in_one_store_when_none_is_given(tmp_path: Path) -> None:
    harness = Harness(ScriptedProvider(lambda _: reply("nothing to do")))

    first = await harness.run(contract(tmp_path, max_steps=1))
    second = await harness.run(contract(tmp_path, max_steps=1))

    assert {r.id for r in harness.store.runs()} == {first.run_id, second.run_id}


async def test_a_resume_uses_the_prices_the_run_was_started_with(tmp_path: Path) -> None:
    prices = PriceTable({"scripted": Price(input=1, output=1)})
    usage = Usage(input_tokens=1000, output_tokens=1000)
    store = Store.memory()
    policy = Policy.permissive().layer("tickets").ask_exec("open_ticket")
    spend = Budget(max_cost=1)
    started = await Harness(
        ScriptedProvider([reply(calls=[call("open_ticket", title="x")], usage=usage)]),
        store=store,
        policy=policy,
        prices=prices,
        tools=[open_ticket],
    ).run(contract(tmp_path).model_copy(update={"budget": spend}))
    assert started.cost_micros == 2000

    # No prices given: the run's own are used, so max_cost needs nothing more.
    resumed = await Harness(
        ScriptedProvider(
            [reply(calls=[call("write_file", path="done.txt", content="done\n")], usage=usage)]
        ),
        store=store,
        tools=[open_ticket],
    ).resume(started.run_id, decision=Decision.approve())

    assert resumed.outcome is RunOutcome.SUCCESS
    assert resumed.cost_micros == 4000


async def test_the_module_level_run_and_resume_take_every_harness_option(tmp_path: Path) -> None:
    store = Store.memory()
    policy = Policy.permissive().layer("tickets").ask_exec("open_ticket")
    started = await run(
        contract(tmp_path),
        finishing(call("open_ticket", title="one")),
        store=store,
        policy=policy,
        tools=[open_ticket],
        run_id="module-level",
    )
    assert started.outcome is RunOutcome.AWAITING_APPROVAL

    resumed = await resume(
        "module-level", finishing(), store=store, tools=[open_ticket], decision=Decision.approve()
    )

    assert resumed.outcome is RunOutcome.SUCCESS
    assert opened == ["one"]


async def test_resuming_under_another_policy_needs_replace_policy(tmp_path: Path) -> None:
    store = Store.memory()
    run_id = await deferred_run(tmp_path, store)
    stricter = Policy.guarded()
    harness = Harness(finishing(), store=store, policy=stricter, tools=[open_ticket])

    with pytest.raises(ConfigError, match="replace_policy=True"):
        await harness.resume(run_id)


def test_run_sync_returns_when_a_sync_tool_outlives_its_timeout(tmp_path: Path) -> None:
    release = threading.Event()

    @tool(timeout=0.05)
    def stuck(ticket: int) -> str:
        """Never answers in time."""
        release.wait()  # until the test ends
        return "late"

    outcome: list[RunOutcome] = []
    harness = Harness(finishing(call("stuck", ticket=1)), tools=[stuck])
    # run_sync in a thread of its own, so a run_sync that waited for the abandoned
    # tool would be seen here as a thread still alive, not as a hung test.
    runner = threading.Thread(
        target=lambda: outcome.append(harness.run_sync(contract(tmp_path)).outcome)
    )
    runner.start()
    try:
        runner.join(timeout=60)
        assert not runner.is_alive(), "run_sync waited for the abandoned tool"
        assert outcome == [RunOutcome.SUCCESS]
    finally:
        release.set()
        runner.join()


async def test_a_tools_spec_is_asked_for_once_a_run(tmp_path: Path) -> None:
    class Counted:
        asked = 0

        def spec(self) -> ToolSpec:
            Counted.asked += 1
            return ToolSpec(name="counted", description="d", parameters={"type": "object"})

        async def invoke(self, arguments: dict[str, Any]) -> str:
            return "ok"

    harness = Harness(finishing(), tools=[Counted()])
    await harness.run(contract(tmp_path))
    assert Counted.asked == 1
    harness.provider = finishing()
    await harness.run(contract(tmp_path))
    assert Counted.asked == 2


async def test_an_approvers_rewrite_a_tool_refuses_is_said_to_be_the_approvers(
    tmp_path: Path,
) -> None:
    async def rewrite(request: Any, context: Any) -> Decision:
        return Decision.approve(modified={"title": "x", "priority": "urgent"})

    provider = finishing(call("open_ticket", title="ok"))
    policy = Policy.permissive().layer("tickets").ask_exec("open_ticket")
    harness = Harness(
        provider, policy=policy, approver=CallbackApprover(rewrite), tools=[open_ticket]
    )

    result = await harness.run(contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    seen = observation(provider, 1)
    assert seen.startswith("the approver's rewrite is not a valid call: invalid arguments:")
    assert "priority" in seen
    assert opened == []
