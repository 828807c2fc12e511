"""Asking the provider: streaming, retries, fallback, the wall budget, a row per attempt."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from io_harness._arguments import admitted_response
from io_harness.errors import ProviderError, RefusedError
from io_harness.loop._outcome import RunOutcome
from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    StreamDelta,
    Usage,
)
from io_harness.observe import Retrying, RunEvent, TokenStreamed
from io_harness.pricing import PriceTable
from io_harness.providers import Provider, StreamingProvider, members_of
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
    """Makes one model call of a run: each provider in turn, transient failures retried.

    A :class:`~io_harness.providers.Fallback` is unrolled here, so each member
    gets the run's retries before the next is asked, and every attempt is a
    row under the member that made it.
    """

    def __init__(
        self,
        provider: Provider,
        run_id: str,
        max_retries: int,
        wall_end: float | None,
        emit: Callable[[Sequence[RunEvent]], Awaitable[None]],
        prices: PriceTable | None = None,
    ) -> None:
        self.members = members_of(provider)
        self.run_id = run_id
        self.max_retries = max_retries
        self.wall_end = wall_end
        self.emit = emit
        self.prices = prices

    async def call(
        self, request: CompletionRequest, record: StepRecord, events: list[RunEvent]
    ) -> CompletionResponse | Unanswered:
        """The answer, with each attempt added to ``record`` and retries to ``events``."""
        answer: CompletionResponse | Unanswered | None = None
        for member in self.members:
            asked = request.model_copy(update={"model": member.model})
            answer = await self._call_one(member, asked, record, events)
            if isinstance(answer, CompletionResponse):
                return answer
            error = answer.error
            if answer.outcome is not RunOutcome.PROVIDER_FAILED or (error and error.kind == "auth"):
                return answer
        assert answer is not None  # members_of never returns an empty tuple
        return answer

    async def _call_one(
        self,
        provider: Provider,
        request: CompletionRequest,
        record: StepRecord,
        events: list[RunEvent],
    ) -> CompletionResponse | Unanswered:
        retries = self.max_retries
        for attempt in range(1, retries + 2):
            number = len(record.attempts) + 1
            started, clock = time.time(), time.monotonic()
            timing = _Timing(clock)
            error: ProviderError
            try:
                response = await self._ask(provider, request, record.step, number, timing)
            except _WallTimeUp:
                error = ProviderError("timeout", "the wall-time budget ran out during the call")
                record.attempts.append(
                    self._attempt(provider, number, started, timing, error=error)
                )
                return Unanswered(RunOutcome.TIME_BUDGET_EXCEEDED, error)
            except ProviderError as exc:
                error = exc
            else:
                # Whatever the provider sent, from here on its calls' arguments are a JSON
                # object every later step can serialise, or text the model is told about.
                response = admitted_response(response)
                record.attempts.append(
                    self._attempt(provider, number, started, timing, response=response)
                )
                return response
            record.attempts.append(self._attempt(provider, number, started, timing, error=error))
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

    async def _ask(
        self,
        provider: Provider,
        request: CompletionRequest,
        step: int,
        attempt: int,
        timing: _Timing,
    ) -> CompletionResponse:
        # Anything a provider raises besides ProviderError is a provider defect; the
        # run ends with it as a typed failure instead of crashing the caller.
        answer = self._streamed(provider, request, step, attempt, timing)
        try:
            if self.wall_end is None:
                response = await answer
            else:
                response = await asyncio.wait_for(answer, self.wall_end - time.time())
        except ProviderError:
            raise
        except RefusedError as exc:  # the policy refused a connection: never retried
            raise ProviderError("refused", str(exc)) from exc
        except TimeoutError as exc:
            if self.wall_end is not None and time.time() >= self.wall_end:
                raise _WallTimeUp from None
            raise ProviderError("timeout", f"the provider timed out: {exc}") from exc
        except Exception as exc:
            raise ProviderError(
                "bad_response", f"the provider raised {type(exc).__name__}: {exc}"
            ) from exc
        if not isinstance(response, CompletionResponse):
            raise ProviderError(
                "bad_response",
                f"the provider returned {type(response).__name__}, not a CompletionResponse",
            )
        return response

    async def _streamed(
        self,
        provider: Provider,
        request: CompletionRequest,
        step: int,
        attempt: int,
        timing: _Timing,
    ) -> CompletionResponse:
        """The answer; from a streaming provider, with each delta told to the observer."""
        if not isinstance(provider, StreamingProvider):
            return await provider.complete(request)
        final: CompletionResponse | None = None
        items = provider.stream(request)
        try:
            async for item in items:
                timing.arrived()
                if isinstance(item, CompletionResponse):
                    final = item
                elif isinstance(item, StreamDelta):
                    token = TokenStreamed(
                        run_id=self.run_id,
                        step=step,
                        provider=provider.name,
                        attempt=attempt,
                        delta=item,
                    )
                    await self.emit([token])
        finally:
            close = getattr(items, "aclose", None)
            if close is not None:
                await close()
        if final is None:
            raise ProviderError("bad_response", "the stream ended without a complete answer")
        return final

    def _attempt(
        self,
        provider: Provider,
        number: int,
        started: float,
        timing: _Timing,
        *,
        response: CompletionResponse | None = None,
        error: ProviderError | None = None,
    ) -> ProviderAttempt:
        usage = response.usage if response is not None else Usage()
        served = response.model if response is not None and response.model else None
        price = self.prices.price_for(served, provider.model) if self.prices else None
        return ProviderAttempt(
            attempt=number,
            provider=provider.name,
            model=provider.model,
            started_at=started,
            latency=time.monotonic() - timing.started,
            usage=usage,
            finish_reason=response.finish_reason if response is not None else None,
            error_kind=error.kind if error is not None else None,
            error_status=error.status if error is not None else None,
            error_message=error.message if error is not None else None,
            served_model=served,
            time_to_first_token=timing.first,
            cost_micros=price.cost_micros(usage) if price is not None else None,
        )


class _Timing:
    """When an attempt started and when its first piece arrived (``None``: not streamed)."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.first: float | None = None

    def arrived(self) -> None:
        if self.first is None:
            self.first = time.monotonic() - self.started
