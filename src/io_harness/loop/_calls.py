"""Asking the provider: retries with backoff, the wall budget, and a row per attempt."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from io_harness.errors import ProviderError
from io_harness.loop._outcome import RunOutcome
from io_harness.messages import CompletionRequest, CompletionResponse, Usage
from io_harness.observe import Retrying, RunEvent
from io_harness.providers import Provider
from io_harness.store._records import ProviderAttempt, StepRecord

__all__ = ["ProviderCaller", "Unanswered", "backoff_delay"]

_BACKOFF_BASE_SECONDS = 1.0
_BACKOFF_CAP_SECONDS = 30.0


class _WallTimeUp(Exception):
    """The wall-time budget ended a provider call in flight."""


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A model call that will not be answered: the outcome it ends the run with."""

    outcome: RunOutcome
    error: ProviderError | None


def backoff_delay(attempt: int, error: ProviderError) -> float:
    """Seconds before retry ``attempt``: the provider's wish, else exponential with jitter."""
    if error.retry_after is not None:
        return max(0.0, error.retry_after)
    ceiling = min(_BACKOFF_CAP_SECONDS, _BACKOFF_BASE_SECONDS * 2.0 ** (attempt - 1))
    return ceiling * random.uniform(0.5, 1.0)


class ProviderCaller:
    """Makes one model call of a run, retrying transient failures within the budget."""

    def __init__(
        self,
        provider: Provider,
        run_id: str,
        max_retries: int,
        wall_end: float | None,
        emit: Callable[[Sequence[RunEvent]], Awaitable[None]],
    ) -> None:
        self.provider = provider
        self.run_id = run_id
        self.max_retries = max_retries
        self.wall_end = wall_end
        self.emit = emit

    async def call(
        self, request: CompletionRequest, record: StepRecord, events: list[RunEvent]
    ) -> CompletionResponse | Unanswered:
        """The answer, with each attempt added to ``record`` and retries to ``events``."""
        retries = self.max_retries
        for attempt in range(1, retries + 2):
            started, clock = time.time(), time.monotonic()
            error: ProviderError
            try:
                response = await self._ask(request)
            except _WallTimeUp:
                error = ProviderError("timeout", "the wall-time budget ran out during the call")
                record.attempts.append(self._attempt(attempt, started, clock, error=error))
                return Unanswered(RunOutcome.TIME_BUDGET_EXCEEDED, error)
            except ProviderError as exc:
                error = exc
            else:
                record.attempts.append(self._attempt(attempt, started, clock, response=response))
                return response
            record.attempts.append(self._attempt(attempt, started, clock, error=error))
            if not error.transient or attempt > retries:
                return Unanswered(RunOutcome.PROVIDER_FAILED, error)
            delay = backoff_delay(attempt, error)
            if self.wall_end is not None and time.time() + delay >= self.wall_end:
                return Unanswered(RunOutcome.TIME_BUDGET_EXCEEDED, error)
            retrying = Retrying(
                run_id=self.run_id,
                step=record.step,
                attempt=attempt + 1,
                error_kind=error.kind,
                message=error.message,
                delay=delay,
            )
            events.append(retrying)
            await self.emit([retrying])
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns")

    async def _ask(self, request: CompletionRequest) -> CompletionResponse:
        # Anything a provider raises besides ProviderError is a provider defect; the
        # run ends with it as a typed failure instead of crashing the caller.
        try:
            if self.wall_end is None:
                response = await self.provider.complete(request)
            else:
                remaining = self.wall_end - time.time()
                response = await asyncio.wait_for(self.provider.complete(request), remaining)
        except ProviderError:
            raise
        except TimeoutError as exc:
            if self.wall_end is not None and time.time() >= self.wall_end:
                raise _WallTimeUp from None
            raise ProviderError("timeout", f"the provider timed out: {exc}") from exc
        except Exception as exc:
            raise ProviderError(
                "bad_request", f"the provider raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(response, CompletionResponse):
            raise ProviderError(
                "bad_request",
                f"the provider returned {type(response).__name__}, not a CompletionResponse",
            )
        return response

    def _attempt(
        self,
        attempt: int,
        started: float,
        clock: float,
        *,
        response: CompletionResponse | None = None,
        error: ProviderError | None = None,
    ) -> ProviderAttempt:
        return ProviderAttempt(
            attempt=attempt,
            provider=self.provider.name,
            model=response.model
            if response is not None and response.model
            else self.provider.model,
            started_at=started,
            latency=time.monotonic() - clock,
            usage=response.usage if response is not None else Usage(),
            finish_reason=response.finish_reason if response is not None else None,
            error_kind=error.kind if error is not None else None,
            error_status=error.status if error is not None else None,
            error_message=error.message if error is not None else None,
        )
