"""A child whose drive raised: ended with a stored outcome, so no child runs for good.

A root whose drive raises stops with its run resumable, and its caller sees
the exception. A child's exception is its parent's observation instead, and
the parent goes on, so a child left ``running`` would never be driven again
(its tree ends around it). Whatever its drive raised, the child ends
``provider_failed`` with the exception named, in one commit under its lease,
and its parent reads that result. What stops the whole tree is left alone,
since the tree is resumed later, whole: cancellation, the process's own
stop (``KeyboardInterrupt``, ``SystemExit``), and a store that cannot be
trusted or another writer's run (``StorageError``, ``ResumeError``).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING

from io_harness.errors import ProviderError, ResumeError, StorageError
from io_harness.loop._events import emit, event_row
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.observe import RunFinished
from io_harness.store._records import Finish, StepRecord

if TYPE_CHECKING:
    from io_harness.prepare._kit import RunKit

__all__ = ["ended_on", "stops_the_tree"]

_TREE_STOPS = (
    asyncio.CancelledError,
    KeyboardInterrupt,
    SystemExit,
    GeneratorExit,
    ResumeError,
    StorageError,
)


def stops_the_tree(exc: BaseException) -> bool:
    """Whether ``exc`` stops the whole tree (it is resumed later) rather than one child."""
    return isinstance(exc, _TREE_STOPS)


async def ended_on(kit: RunKit, run_id: str, exc: BaseException) -> RunResult | None:
    """End the child ``run_id`` (its lease held) whose drive raised ``exc``; its result.

    ``None`` when it is not running: a child awaiting a decision keeps its
    pause (its approval's record is the only one that may end it).
    """
    store = kit.store
    stored = store.load_run(run_id)
    if stored.status != "running":
        return None
    error = ProviderError(
        "bad_response",
        f"the sub-agent's drive raised {type(exc).__name__}: {exc}; it was ended here so "
        "that its parent goes on",
    )
    now = time.time()
    outcome = RunOutcome.PROVIDER_FAILED.value
    finished = RunFinished(
        run_id=run_id,
        step=stored.steps,
        outcome=outcome,
        steps=stored.steps,
        usage=stored.usage,
        error=str(error),
        cost_micros=stored.cost_micros,
        unpriced_calls=stored.unpriced_calls,
        finished_at=now,
    )
    record = StepRecord(
        step=stored.steps + 1,
        started_at=now,
        finished_at=now,
        events=[event_row(finished)],
        finish=Finish(outcome, now, json.dumps(error.to_dict())),
    )
    store.commit_step(run_id, record)
    await emit(kit.observer, [finished])
    return RunResult.from_stored(store.load_run(run_id))
