"""Run events as the loop makes them, stores them and hands them to the observer."""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Sequence

from io_harness.contract import TaskContract
from io_harness.observe import Observer, Retrying, RunEvent, RunStarted
from io_harness.providers import Provider
from io_harness.store._records import EventRow

__all__ = ["LIVE_EVENTS", "emit", "event_row", "run_started"]

LIVE_EVENTS = (RunStarted, Retrying)
"""Events the observer gets as they happen; the rest follow their step's commit."""


def run_started(
    run_id: str,
    step: int,
    contract: TaskContract,
    provider: Provider,
    resumed: bool,
    policy_replaced: bool = False,
) -> RunStarted:
    """The event that opens a run, or a resumption of it."""
    return RunStarted(
        run_id=run_id,
        step=step,
        goal=contract.goal,
        provider=provider.name,
        model=provider.model,
        resumed=resumed,
        policy_replaced=policy_replaced,
    )


async def emit(observer: Observer | None, events: Sequence[RunEvent]) -> None:
    """Hand ``events`` to the observer; an observer that raises is warned about, not fatal."""
    if observer is None:
        return
    for event in events:
        try:
            result = observer(event)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # an observer's bug must not end the run
            warnings.warn(
                f"io-harness observer raised {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=3,
            )


def event_row(event: RunEvent) -> EventRow:
    """A run event as the store keeps it."""
    return EventRow(
        step=event.step, kind=event.kind, at=time.time(), data_json=event.model_dump_json()
    )
