"""Resume: the same conversation, no repeated step, tokens and wall time carried over."""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Unpack

import pytest

import support
from _stores import StoreFactory
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    ResumeError,
    RunOutcome,
    Store,
    Usage,
    resume,
    run,
)
from io_harness.testing import ScriptedProvider, call, reply
from support import Limits, ProcessDied


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    """Resume is a store's promise: every test here runs on each backend."""
    return store_factory()


contract = partial(support.contract, goal="fix add", file="pkg/calc.py", needle="a + b")
"""The task of the runs here: done when pkg/calc.py holds ``a + b``."""


USAGE = Usage(input_tokens=50, output_tokens=5)
READ = reply(calls=[call("read_file", path="pkg/calc.py")], usage=USAGE)
FIX = reply(
    calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")], usage=USAGE
)


async def interrupted_run(root: Path, store: Store, **budget: Unpack[Limits]) -> str:
    """A run with two committed steps whose third step dies."""
    provider = ScriptedProvider([READ, READ, ProcessDied()])
    with pytest.raises(ProcessDied):
        await run(contract(root, **budget), provider, store=store, run_id="r1")
    return "r1"


async def test_resume_continues_the_same_conversation_without_repeating_steps(
    project: Path, store: Store
) -> None:
    run_id = await interrupted_run(project, store)
    assert store.runs()[0].status == "running"
    stored_conversation = store.trace(run_id).messages

    provider = ScriptedProvider([FIX])
    result = await resume(run_id, provider, store=store)

    assert result.outcome is RunOutcome.SUCCESS
    assert result.steps == 3
    assert result.usage.total_tokens == 3 * USAGE.total_tokens
    assert provider.requests[0].messages == stored_conversation
    events = store.trace(run_id).events
    assert [e.kind for e in events if e.kind == "run_started"] == ["run_started"] * 2


async def test_resume_counts_wall_time_from_the_start_downtime_included(
    project: Path, store: Store
) -> None:
    run_id = await interrupted_run(project, store, max_wall_seconds=0.3)
    await asyncio.sleep(0.35)
    provider = ScriptedProvider([FIX])

    result = await resume(run_id, provider, store=store)

    assert result.outcome is RunOutcome.TIME_BUDGET_EXCEEDED
    assert provider.requests == []


async def test_resume_counts_the_tokens_already_spent(project: Path, store: Store) -> None:
    run_id = await interrupted_run(project, store, max_tokens=2 * USAGE.total_tokens + 1)
    provider = ScriptedProvider([READ, READ])

    result = await resume(run_id, provider, store=store)

    assert result.outcome is RunOutcome.TOKEN_BUDGET_EXCEEDED
    assert (result.steps, result.usage.total_tokens) == (3, 3 * USAGE.total_tokens)
    assert len(provider.requests) == 1


async def test_resuming_a_finished_run_returns_its_result_unchanged(
    project: Path, store: Store
) -> None:
    finished = await run(contract(project), ScriptedProvider([FIX]), store=store)
    provider = ScriptedProvider([])

    again = await resume(finished.run_id, provider, store=store)

    assert again == finished
    assert provider.requests == []


async def test_resuming_an_unknown_run_is_a_resume_error(store: Store) -> None:
    with pytest.raises(ResumeError, match="no run 'ghost'"):
        await resume("ghost", ScriptedProvider([]), store=store)


async def test_a_resumed_provider_failure_keeps_its_typed_error(
    project: Path, store: Store
) -> None:
    from io_harness import ProviderError

    failing = ScriptedProvider([ProviderError("auth", "revoked key", status=403)])
    result = await run(contract(project), failing, store=store)

    again = await resume(result.run_id, ScriptedProvider([]), store=store)

    assert again.outcome is RunOutcome.PROVIDER_FAILED
    assert again.error is not None
    assert (again.error.kind, again.error.status, again.error.message) == (
        "auth",
        403,
        "revoked key",
    )


async def test_running_and_resuming_answer_from_the_same_stored_state(
    project: Path, store: Store
) -> None:
    def answer(request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        return READ if turn < 2 else FIX

    straight = await run(contract(project), ScriptedProvider(answer), store=Store.memory())
    (project / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    run_id = await interrupted_run(project, store)
    resumed = await resume(run_id, ScriptedProvider(answer), store=store)

    assert (resumed.outcome, resumed.steps, resumed.usage) == (
        straight.outcome,
        straight.steps,
        straight.usage,
    )


async def test_the_first_resumed_step_checks_a_change_whose_step_never_committed(
    project: Path, store: Store
) -> None:
    run_id = await interrupted_run(project, store)
    # The dead process had applied the fix before it could commit the step.
    (project / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    provider = ScriptedProvider([FIX])  # the replayed edit now finds nothing to change

    result = await resume(run_id, provider, store=store)

    assert result.outcome is RunOutcome.SUCCESS
    assert store.trace(run_id).verifications[-1].trigger == "resumed"


async def test_a_resumed_run_that_ends_before_its_first_answer_still_checks(
    project: Path, store: Store
) -> None:
    from io_harness import ProviderError

    run_id = await interrupted_run(project, store)
    (project / "pkg" / "calc.py").write_text("def add(a, b):\n    return a + b\n")

    result = await resume(
        run_id, ScriptedProvider([ProviderError("auth", "key revoked")]), store=store
    )

    assert result.outcome is RunOutcome.SUCCESS
    assert result.steps == 2
    assert store.trace(run_id).verifications[-1].trigger == "resumed"


async def test_each_start_of_a_run_is_in_the_trace_with_its_step(
    project: Path, store: Store
) -> None:
    run_id = await interrupted_run(project, store)
    await resume(run_id, ScriptedProvider([FIX]), store=store)

    started = [e for e in store.trace(run_id).events if e.kind == "run_started"]

    assert [(e.step, e.data["resumed"]) for e in started] == [
        (0, False),
        (2, True),
    ]
