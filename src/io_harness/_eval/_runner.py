"""Running a suite: every case with every provider, each repeat, at most N runs at once.

A run that fails in any way is a record, never the suite's end: a provider
error ends its run with ``provider_failed`` (its kind kept), and a run that
raises (a policy refusing its check, an MCP server that does not start) is
recorded with outcome ``error`` and the error's kind. Cancelling the suite
cancels its runs, each keeping its committed steps, and removes their copies.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from io_harness._eval._harnesses import SpecHarnesses, SuiteRun
from io_harness._eval._results import RAISED, RunRecord, SuiteResult
from io_harness._eval._suite import Suite
from io_harness._eval._workspace import own_copy
from io_harness._harness import Harness
from io_harness._preflight import new_run_id
from io_harness.contract import TaskContract
from io_harness.errors import (
    ConfigError,
    HarnessError,
    McpError,
    ProviderError,
    RefusedError,
    ResumeError,
    SandboxError,
    StorageError,
)
from io_harness.loop import RunOutcome, RunResult
from io_harness.store import Store

__all__ = ["LABELS", "HarnessFor", "run_suite"]

HarnessFor = Callable[[SuiteRun], Harness]
"""What builds the harness of one run of a suite."""

LABELS = ("suite", "case", "provider", "repeat", "eval")
"""The labels every run of a suite is stored with: the suite's name, the case's, the
provider's, the repeat (from 1), and the id of this execution of the suite."""

_KINDS: tuple[tuple[type[HarnessError], str], ...] = (
    (ConfigError, "config"),
    (RefusedError, "refused"),
    (SandboxError, "sandbox"),
    (McpError, "mcp"),
    (ResumeError, "resume"),
    (StorageError, "storage"),
)


async def run_suite(
    suite: Suite,
    *,
    harness_for: HarnessFor | None = None,
    store: Store | None = None,
    concurrency: int | None = None,
    on_start: Callable[[SuiteRun], None] | None = None,
    on_finish: Callable[[RunRecord], None] | None = None,
) -> SuiteResult:
    """Run every case of ``suite`` with every provider, each case ``repeat`` times.

    ``harness_for`` builds each run's harness (a new provider each time: a
    provider may keep state over a run); by default each provider's specs
    are built as ``ioh run`` builds them (:class:`SpecHarnesses`), storing
    into ``store`` (in memory when omitted). ``concurrency`` bounds the runs
    at once (default: the suite's). ``on_start`` is called as a run starts,
    ``on_finish`` with its record as it ends.

    Each run is stored with the labels :data:`LABELS`. Contracts that do
    not load, a suite with no provider or a spec that builds none is a
    :class:`ConfigError` before any run; what happens to a run is in its record.
    """
    if harness_for is not None and store is not None:
        raise ConfigError("give store= or harness_for=, not both: each harness has its store")
    if not suite.providers:
        raise ConfigError(f"suite {suite.name!r} names no provider; add a [[provider]] table")
    bound = suite.concurrency if concurrency is None else concurrency
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
        raise ConfigError(f"concurrency must be a whole number of runs, 1 or more, not {bound!r}")
    contracts = {case.name: case.load() for case in suite.cases}
    if harness_for is None:
        harness_for = SpecHarnesses(suite, store if store is not None else Store.memory())
    planned = _plan(suite, new_run_id())
    slots = asyncio.Semaphore(bound)
    builder = harness_for

    async def one(run: SuiteRun) -> RunRecord:
        async with slots:
            if on_start is not None:
                on_start(run)
            record = await _drive(run, contracts[run.case.name], builder, suite.isolate)
        if on_finish is not None:
            on_finish(record)
        return record

    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(one(run)) for run in planned]
    return SuiteResult(
        suite=suite.name,
        eval_id=planned[0].labels["eval"],
        cases=tuple(case.name for case in suite.cases),
        providers=tuple(provider.name for provider in suite.providers),
        records=tuple(task.result() for task in tasks),
    )


def _plan(suite: Suite, eval_id: str) -> list[SuiteRun]:
    """Every run of the suite, by repeat, then case, then provider, so the first runs
    started cover every case and provider; each named ``EVAL_ID-N``."""
    combinations = [
        (case, provider, repeat)
        for repeat in range(1, max(case.repeat for case in suite.cases) + 1)
        for case in suite.cases
        if repeat <= case.repeat
        for provider in suite.providers
    ]
    digits = len(str(len(combinations)))
    return [
        SuiteRun(
            case,
            provider,
            repeat,
            run_id=f"{eval_id}-{number:0{digits}d}",
            labels=dict(
                zip(
                    LABELS,
                    (suite.name, case.name, provider.name, str(repeat), eval_id),
                    strict=True,
                )
            ),
        )
        for number, (case, provider, repeat) in enumerate(combinations, start=1)
    ]


async def _drive(
    run: SuiteRun,
    contract: TaskContract,
    harness_for: HarnessFor,
    isolate: bool,
) -> RunRecord:
    """One run to its record, in its own copy of the workspace unless ``isolate`` is off.

    The run's id is chosen beforehand, so a run that raises once stored is still named.
    """
    started = time.monotonic()
    harness: Harness | None = None
    try:
        with own_copy(contract) if isolate else contextlib.nullcontext(contract) as where:
            harness = harness_for(run)
            result = await harness.run(where, run_id=run.run_id, labels=run.labels)
    except Exception as exc:  # a run that cannot run is a failed run, not the suite's end
        stored = harness is not None and _stored(harness.store, run.run_id)
        return _raised(run, exc, time.monotonic() - started, run.run_id if stored else None)
    return _ended(run, harness, result)


def _stored(store: Store, run_id: str) -> bool:
    try:
        store.load_run(run_id)
    except HarnessError:
        return False
    return True


def _ended(run: SuiteRun, harness: Harness, result: RunResult) -> RunRecord:
    """The record of a run that ended, read back from its trace."""
    trace = harness.store.trace(result.run_id, undecodable="replace")
    told_it_failed = any(
        not check.passed and check.trigger == "turn_ended" for check in trace.verifications
    )
    failed_with = result.error if result.outcome is RunOutcome.PROVIDER_FAILED else None
    return RunRecord(
        case=run.case.name,
        provider=run.provider.name,
        repeat=run.repeat,
        run_id=result.run_id,
        outcome=result.outcome.value,
        first_try=result.succeeded and not told_it_failed,
        steps=result.steps,
        tokens=trace.run.tokens,
        cost_micros=result.cost_micros,
        unpriced_calls=result.unpriced_calls,
        currency=harness.prices.currency if harness.prices is not None else None,
        seconds=(trace.run.finished_at or time.time()) - trace.run.started_at,
        error_kind=failed_with.kind if failed_with is not None else None,
        error=failed_with.message if failed_with is not None else None,
    )


def _raised(run: SuiteRun, exc: Exception, seconds: float, run_id: str | None) -> RunRecord:
    """The record of a run that raised instead of ending."""
    kind = "internal"
    if isinstance(exc, ProviderError):
        kind = exc.kind
    else:
        kind = next((name for cls, name in _KINDS if isinstance(exc, cls)), kind)
    said = str(exc) if isinstance(exc, HarnessError) else f"{type(exc).__name__}: {exc}"
    return RunRecord(
        case=run.case.name,
        provider=run.provider.name,
        repeat=run.repeat,
        run_id=run_id,
        outcome=RAISED,
        first_try=False,
        steps=0,
        tokens=0,
        cost_micros=0,
        unpriced_calls=0,
        currency=None,
        seconds=seconds,
        error_kind=kind,
        error=said,
    )
