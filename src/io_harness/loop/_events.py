"""Run events as the loop makes them, stores them and hands them to the observer."""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import Sequence
from typing import Literal

from io_harness.contract import TaskContract
from io_harness.messages import CompletionRequest, CompletionResponse
from io_harness.observe import Observer, ProviderCalled, Retrying, RunEvent, RunStarted
from io_harness.providers import Provider
from io_harness.store._records import EventRow, ProviderAttempt, TreePlace

__all__ = ["LIVE_EVENTS", "emit", "event_row", "provider_calls", "run_started"]

LIVE_EVENTS = (RunStarted, Retrying)
"""Events the observer gets as they happen; the rest follow their step's commit."""


def run_started(
    run_id: str,
    step: int,
    contract: TaskContract,
    provider: Provider,
    resumed: bool,
    policy_replaced: bool = False,
    place: TreePlace | None = None,
) -> RunStarted:
    """The event that opens a run, or a resumption of it (``place``: where it sits in a tree)."""
    return RunStarted(
        run_id=run_id,
        step=step,
        goal=contract.goal,
        provider=provider.name,
        model=provider.model,
        resumed=resumed,
        policy_replaced=policy_replaced,
        parent_id=place.parent_id if place is not None else None,
        spawn_call=place.spawn_call if place is not None else None,
        at=time.time(),
    )


def provider_calls(
    run_id: str,
    step: int,
    attempts: Sequence[ProviderAttempt],
    request: CompletionRequest,
    answer: object,
    purpose: Literal["answer", "compaction"] = "answer",
) -> list[ProviderCalled]:
    """The events of one model call's attempts; the answer goes with the last, if it got one."""
    called = []
    for attempt in attempts:
        answered = attempt is attempts[-1] and isinstance(answer, CompletionResponse)
        called.append(
            ProviderCalled(
                run_id=run_id,
                step=step,
                attempt=attempt.attempt,
                provider=attempt.provider,
                model=attempt.model,
                served_model=attempt.served_model,
                started_at=attempt.started_at,
                duration=attempt.latency,
                usage=attempt.usage,
                finish_reason=attempt.finish_reason,
                error_kind=attempt.error_kind,
                error_status=attempt.error_status,
                error_message=attempt.error_message,
                time_to_first_token=attempt.time_to_first_token,
                cost_micros=attempt.cost_micros,
                purpose=purpose,
                request=request,
                response=answer if answered else None,
            )
        )
    return called


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
