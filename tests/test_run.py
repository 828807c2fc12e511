"""End to end through ``run`` with the scripted provider: outcomes, budgets, retries."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from io_harness import (
    AllOf,
    Budget,
    Command,
    ConfigError,
    FileContains,
    ProviderError,
    RunOutcome,
    Store,
    TaskContract,
    ToolCall,
    Usage,
    WorkspaceFileContains,
    run,
    run_sync,
)
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import tool

FIXED = "def add(a, b):\n    return a + b\n"


def workspace_contract(root: Path, **budget: object) -> TaskContract:
    return TaskContract.workspace(
        "make add() add",
        root,
        WorkspaceFileContains("pkg/calc.py", "a + b"),
        budget=Budget(**budget),
    )


async def test_a_single_file_run_succeeds_when_its_criterion_passes(tmp_path: Path) -> None:
    target = tmp_path / "greeting.txt"
    contract = TaskContract.file("write a greeting", target, FileContains("hello"))
    provider = ScriptedProvider(
        [
            reply(calls=[call("read_file")]),
            reply("writing it", [call("write_file", content="hello, world\n")]),
        ]
    )

    result = await run(contract, provider)

    assert result.outcome is RunOutcome.SUCCESS
    assert result.steps == 2
    assert target.read_text() == "hello, world\n"
    assert result.verification is not None and result.verification.passed
    provider.assert_exhausted()
    first_observation = provider.requests[1].messages[-1].content[0]
    assert "does not exist yet" in first_observation.content  # type: ignore[union-attr]


async def test_a_single_file_run_offers_only_read_and_write_of_that_file(tmp_path: Path) -> None:
    contract = TaskContract.file("x", tmp_path / "a.txt", FileContains("x"))
    provider = ScriptedProvider([reply(calls=[call("write_file", content="x")])])

    await run(contract, provider)

    request = provider.requests[0]
    assert [t.name for t in request.tools] == ["read_file", "write_file"]
    assert "path" not in request.tools[0].parameters["properties"]
    assert "path" not in request.tools[1].parameters["properties"]
    assert "a.txt" in request.system


async def test_a_workspace_run_changes_several_files_and_is_verified_together(
    project: Path, store: Store
) -> None:
    contract = TaskContract.workspace(
        "fix add and document it",
        project,
        AllOf(
            WorkspaceFileContains("pkg/calc.py", "a + b"),
            WorkspaceFileContains("README.md", "add"),
        ),
    )
    provider = ScriptedProvider(
        [
            reply(calls=[call("grep", pattern="def add")]),
            reply(
                calls=[
                    call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b"),
                ]
            ),
            reply(calls=[call("write_file", path="README.md", content="add(a, b) adds.\n")]),
        ]
    )

    result = await run(contract, provider, store=store)

    assert result.outcome is RunOutcome.SUCCESS
    assert result.steps == 3
    assert (project / "pkg" / "calc.py").read_text() == FIXED
    grep_result = provider.requests[1].messages[-1].content[0]
    assert "pkg/calc.py:1: def add(a, b):" in grep_result.content  # type: ignore[union-attr]
    trace = store.trace(result.run_id)
    assert [v.passed for v in trace.verifications] == [False, True]
    assert trace.verifications[0].trigger == "file_changed"


async def test_the_run_stops_at_the_step_cap(project: Path) -> None:
    provider = ScriptedProvider(lambda request: reply(calls=[call("list_dir")]))

    result = await run(workspace_contract(project, max_steps=3), provider)

    assert result.outcome is RunOutcome.STEP_CAP_REACHED
    assert result.steps == 3
    assert len(provider.requests) == 3


async def test_the_run_stops_when_the_token_budget_is_spent(project: Path) -> None:
    usage = Usage(input_tokens=400, output_tokens=100)
    provider = ScriptedProvider(lambda request: reply(calls=[call("list_dir")], usage=usage))

    result = await run(workspace_contract(project, max_tokens=1200), provider)

    assert result.outcome is RunOutcome.TOKEN_BUDGET_EXCEEDED
    assert result.steps == 3
    assert result.usage.total_tokens == 1500


async def test_the_run_stops_when_the_wall_budget_runs_out_even_mid_call(project: Path) -> None:
    async def slow(request: object) -> object:
        await asyncio.sleep(30)
        raise AssertionError("the call outlived the wall budget")

    provider = ScriptedProvider(slow)  # type: ignore[arg-type]

    result = await run(workspace_contract(project, max_wall_seconds=0.2), provider)

    assert result.outcome is RunOutcome.TIME_BUDGET_EXCEEDED
    assert result.steps == 0


async def test_a_transient_failure_is_retried_and_every_attempt_is_traced(
    project: Path, store: Store
) -> None:
    provider = ScriptedProvider(
        [
            ProviderError("rate_limited", "slow down", status=429, retry_after=0.01),
            ProviderError("server", "overloaded", status=529, retry_after=0),
            reply(calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")]),
        ]
    )
    events: list[object] = []

    result = await run(workspace_contract(project), provider, store=store, observer=events.append)

    assert result.outcome is RunOutcome.SUCCESS
    attempts = store.trace(result.run_id).provider_calls
    assert [(a.attempt, a.error_kind) for a in attempts] == [
        (1, "rate_limited"),
        (2, "server"),
        (3, None),
    ]
    assert [e.kind for e in events if e.kind == "retrying"] == ["retrying", "retrying"]  # type: ignore[attr-defined]


async def test_retries_stop_after_max_retries(project: Path) -> None:
    failure = ProviderError("network", "connection reset", retry_after=0)
    provider = ScriptedProvider([failure, failure, failure, reply("never reached")])

    result = await run(workspace_contract(project, max_retries=2), provider)

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "network"
    assert len(provider.requests) == 3


async def test_an_auth_failure_ends_the_run_at_once(project: Path, store: Store) -> None:
    provider = ScriptedProvider([ProviderError("auth", "bad key", status=401), reply("unused")])

    result = await run(workspace_contract(project), provider, store=store)

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.status == 401
    assert len(provider.requests) == 1
    assert store.runs()[0].outcome == "provider_failed"


async def test_a_retry_never_sleeps_past_the_wall_budget(project: Path) -> None:
    provider = ScriptedProvider([ProviderError("rate_limited", "wait", retry_after=3600)])

    result = await run(workspace_contract(project, max_wall_seconds=60), provider)

    assert result.outcome is RunOutcome.TIME_BUDGET_EXCEEDED
    assert result.error is not None and result.error.kind == "rate_limited"


async def test_a_provider_that_returns_garbage_fails_the_run_with_a_typed_error(
    project: Path,
) -> None:
    provider = ScriptedProvider(lambda request: "not a response")  # type: ignore[arg-type,return-value]

    result = await run(workspace_contract(project), provider)

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and "not a CompletionResponse" in result.error.message


async def test_malformed_tool_calls_come_back_as_observations_and_the_run_goes_on(
    project: Path,
) -> None:
    provider = ScriptedProvider(
        [
            reply(
                calls=[
                    call("delete_everything"),
                    ToolCall(id="raw", name="read_file", arguments='{"path": "pkg/'),
                    call("read_file"),
                    call("read_file", path=7),
                    call("read_file", path="pkg/calc.py", colour="red"),
                ]
            ),
            reply(calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")]),
        ]
    )

    result = await run(workspace_contract(project), provider)

    assert result.outcome is RunOutcome.SUCCESS
    observations = provider.requests[1].messages[-1].content
    texts = [o.content for o in observations]  # type: ignore[union-attr]
    assert all(o.is_error for o in observations)  # type: ignore[union-attr]
    assert "unknown tool 'delete_everything'" in texts[0]
    assert "read_file, write_file, edit_file, grep, find, list_dir" in texts[0]
    assert "not a JSON object" in texts[1]
    assert "path: Field required" in texts[2]
    assert "path: Input should be a valid string" in texts[3]
    assert "colour: Extra inputs are not permitted" in texts[4]


async def test_the_failing_criterion_output_reaches_the_model_when_it_stops_short(
    project: Path,
) -> None:
    contract = TaskContract.workspace(
        "make the check pass",
        project,
        Command(["python", "-c", "import sys; print('calc is still wrong'); sys.exit(3)"]),
        budget=Budget(max_steps=2),
    )
    provider = ScriptedProvider([reply("I am done."), reply("Still done.")])

    result = await run(contract, provider)

    assert result.outcome is RunOutcome.STEP_CAP_REACHED
    feedback = provider.requests[1].messages[-1]
    assert feedback.role == "user"
    assert "does not hold yet" in feedback.text
    assert "calc is still wrong" in feedback.text
    assert "exit status 3" in feedback.text
    assert result.verification is not None and not result.verification.passed


async def test_a_criterion_for_the_other_mode_is_a_config_error_before_any_call(
    project: Path, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="single-file criterion"):
        TaskContract.workspace("x", project, FileContains("y"))
    with pytest.raises(ConfigError, match="workspace criterion"):
        TaskContract.file("x", tmp_path / "f.txt", WorkspaceFileContains("a", "b"))


async def test_a_missing_workspace_is_a_config_error_before_any_call(tmp_path: Path) -> None:
    contract = workspace_contract(tmp_path / "nowhere")
    provider = ScriptedProvider([reply("unused")])

    with pytest.raises(ConfigError, match="does not exist"):
        await run(contract, provider)
    assert provider.requests == []


async def test_something_that_is_not_a_provider_is_a_config_error(project: Path) -> None:
    with pytest.raises(ConfigError, match="not a Provider"):
        await run(workspace_contract(project), object())  # type: ignore[arg-type]


async def test_a_run_id_already_in_the_store_is_a_config_error(project: Path, store: Store) -> None:
    provider = ScriptedProvider(lambda request: reply("stop"))
    contract = workspace_contract(project, max_steps=1)
    await run(contract, provider, store=store, run_id="fixed")

    with pytest.raises(ConfigError, match="already in the store"):
        await run(contract, provider, store=store, run_id="fixed")


def test_run_sync_runs_without_an_event_loop(project: Path) -> None:
    provider = ScriptedProvider(
        [reply(calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")])]
    )

    result = run_sync(workspace_contract(project), provider)

    assert result.outcome is RunOutcome.SUCCESS


async def test_run_sync_inside_an_event_loop_is_a_config_error(project: Path) -> None:
    with pytest.raises(ConfigError, match="running event loop"):
        run_sync(workspace_contract(project), ScriptedProvider([]))


async def test_the_observer_sees_each_event_with_the_data_the_trace_stores(
    project: Path, store: Store
) -> None:
    events: list[object] = []

    async def observe(event: object) -> None:
        events.append(event)

    provider = ScriptedProvider(
        [
            reply(calls=[call("read_file", path="pkg/calc.py")]),
            reply(calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")]),
        ]
    )
    result = await run(workspace_contract(project), provider, store=store, observer=observe)

    kinds = [e.kind for e in events]  # type: ignore[attr-defined]
    assert kinds == [
        "run_started",
        "tool_started",
        "provider_called",
        "tool_called",
        "step_finished",
        # The write acts: its step is journaled, which stores the model call before the
        # tool starts, and the observer is told of it then.
        "provider_called",
        "tool_started",
        "tool_called",
        "verified",
        "step_finished",
        "run_finished",
    ]
    told_only = ("tool_started", "provider_called")  # told to observers, never stored
    kept = [e for e in events if e.kind not in told_only]  # type: ignore[attr-defined]
    stored = [(e.kind, e.data) for e in store.trace(result.run_id).events]
    assert stored == [(e.kind, e.model_dump(mode="json")) for e in kept]  # type: ignore[attr-defined]


async def test_an_observer_that_raises_does_not_end_the_run(project: Path) -> None:
    def broken(event: object) -> None:
        raise RuntimeError("observer bug")

    provider = ScriptedProvider(
        [reply(calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")])]
    )
    with pytest.warns(RuntimeWarning, match="observer bug"):
        result = await run(workspace_contract(project), provider, observer=broken)

    assert result.outcome is RunOutcome.SUCCESS


async def test_a_provider_that_raises_its_own_timeout_is_a_typed_timeout(project: Path) -> None:
    provider = ScriptedProvider([TimeoutError("read timed out")] * 3)

    result = await run(workspace_contract(project, max_retries=0), provider)

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "timeout"
    assert "read timed out" in result.error.message


async def test_a_provider_without_a_model_name_is_a_config_error(project: Path) -> None:
    provider = ScriptedProvider([])
    provider.model = None  # type: ignore[assignment]

    with pytest.raises(ConfigError, match="model must be a non-empty string"):
        await run(workspace_contract(project), provider)


async def test_a_criterion_whose_program_does_not_exist_is_refused_before_any_call(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider([])
    contract = TaskContract.workspace("g", tmp_path, Command(["nosuchprogram-ioh", "--check"]))

    with pytest.raises(ConfigError, match="'nosuchprogram-ioh' is not found on PATH"):
        await run(contract, provider)
    assert provider.requests == []


async def test_a_lone_surrogate_from_the_model_or_a_tool_is_stored_escaped(tmp_path: Path) -> None:
    (tmp_path / "odd.txt").write_text("fine")

    @tool
    def odd() -> str:
        """Answer with a lone surrogate."""
        return "tool says \ud800"

    provider = ScriptedProvider(
        [
            reply(
                "model says \udc00",
                [call("odd"), call("write_file", path="a\ud801.txt", content="x")],
            ),
            reply(calls=[call("write_file", path="done.txt", content="done")]),
        ]
    )
    store = Store.memory()
    contract = TaskContract.workspace("g", tmp_path, WorkspaceFileContains("done.txt", "done"))

    result = await run(contract, provider, store=store, tools=[odd])

    assert result.outcome is RunOutcome.SUCCESS
    trace = store.trace(result.run_id)
    assert trace.messages[1].text == "model says \\udc00"
    assert trace.tool_calls[0].result == "tool says \\ud800"
    assert '"a\\\\ud801.txt"' in trace.tool_calls[1].arguments
