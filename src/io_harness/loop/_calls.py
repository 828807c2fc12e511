"""Asking the provider: streaming, retries, fallback, the wall budget, a row per attempt."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from io_harness._arguments import admitted_response
from io_harness._retry import DEFAULT_RETRY, RetryPolicy
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

__all__ = ["ProviderCaller", "Unanswered"]


class _WallTimeUp(Exception):
    """The wall-time budget ended a provider call in flight."""


_NOT_RETRIED = " (not retried: a provider says it cannot answer with a ProviderError)"


class _Defect(Exception):
    """A provider broke its protocol (raised something else than a ProviderError, or returned
    something else than an answer): another attempt would do the same, so none is made."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(frozen=True, slots=True)
class Unanswered:
    """A model call that will not be answered: the outcome it ends the run with."""

    outcome: RunOutcome
    error: ProviderError | None


@dataclass(frozen=True, slots=True)
class _Retries:
    """One provider's retrying of one model call: its policy, its count cap, its start."""

    policy: RetryPolicy
    max_retries: int | None
    began: float
    """When the call's first attempt started (``time.time()``)."""

    def wait(self, retry: int, error: ProviderError, wall_end: float | None) -> float | Unanswered:
        """Seconds before retry number ``retry`` after ``error``; or the call's end, and why."""
        if not error.transient or (self.max_retries is not None and retry > self.max_retries):
            return Unanswered(RunOutcome.PROVIDER_FAILED, error)
        now = time.time()
        total = self.policy.total_seconds
        left = self.began + total - now
        asked = error.retry_after
        delay = max(0.0, asked) if asked is not None else min(self.policy.backoff(retry), left)
        if wall_end is not None and now + delay >= wall_end:
            return Unanswered(RunOutcome.TIME_BUDGET_EXCEEDED, error)
        if left <= 0:
            note = (
                f"gave up after {retry} attempts in {now - self.began:.1f} s: "
                f"the {total:g} s retry budget (RetryPolicy.total_seconds) is spent"
            )
            return Unanswered(RunOutcome.PROVIDER_FAILED, _noted(error, note))
        if delay > left:
            note = (
                f"not retried: the provider asked to wait {delay:g} s, past the {left:.1f} s "
                f"left of the {total:g} s retry budget (RetryPolicy.total_seconds)"
            )
            return Unanswered(RunOutcome.PROVIDER_FAILED, _noted(error, note))
        return delay


def _noted(error: ProviderError, note: str) -> ProviderError:
    """``error`` with ``note`` added to its message: why the retries ended with it."""
    return ProviderError(
        error.kind, f"{error.message} ({note})", status=error.status, retry_after=error.retry_after
    )


class ProviderCaller:
    """Makes one model call of a run: each provider in turn, transient failures retried.

    A :class:`~io_harness.providers.Fallback` is unrolled here, so each member
    gets the run's retries before the next is asked, and every attempt is a
    row under the member that made it. ``retry`` says for how long and how
    far apart; ``max_retries`` (the contract's, when set) caps their number.
    """

    def __init__(
        self,
        provider: Provider,
        run_id: str,
        max_retries: int | None,
        wall_end: float | None,
        emit: Callable[[Sequence[RunEvent]], Awaitable[None]],
        prices: PriceTable | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.members = members_of(provider)
        self.run_id = run_id
        self.max_retries = max_retries
        self.wall_end = wall_end
        self.emit = emit
        self.prices = prices
        self.retry = retry

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
        retries = _Retries(self.retry, self.max_retries, time.time())
        attempt = 0
        while True:
            attempt += 1
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
            except _Defect as defect:
                error = defect.error
                record.attempts.append(
                    self._attempt(provider, number, started, timing, error=error)
                )
                return Unanswered(RunOutcome.PROVIDER_FAILED, error)
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
            delay = retries.wait(attempt, error, self.wall_end)
            if isinstance(delay, Unanswered):
                return delay
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

    async def _ask(
        self,
        provider: Provider,
        request: CompletionRequest,
        step: int,
        attempt: int,
        timing: _Timing,
    ) -> CompletionResponse:
        # Anything a provider raises besides ProviderError (and a connection error, the
        # network's) is a provider defect; the run ends with it as a typed failure, not
        # retried, instead of crashing the caller.
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
        except ConnectionError as exc:  # refused, reset, broken: the network's, retried
            said = f"the provider could not connect: {type(exc).__name__}: {exc}"
            raise ProviderError("network", said) from exc
        except Exception as exc:
            said = f"the provider raised {type(exc).__name__}: {exc}"
            raise _Defect(ProviderError("bad_response", f"{said}{_NOT_RETRIED}")) from exc
        if not isinstance(response, CompletionResponse):
            said = f"the provider returned {type(response).__name__}, not a CompletionResponse"
            raise _Defect(ProviderError("bad_response", f"{said}{_NOT_RETRIED}"))
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
