"""The step loop. Running and resuming are one path: it always starts from stored state.

One step, as data: check the budgets → assemble the request → call the
provider (with retries) → dispatch each tool call → check the criterion when
a file changed or the turn ended → commit everything the step produced in one
transaction → hand its events to the observer.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

from io_harness.contract import TaskContract
from io_harness.errors import ProviderError
from io_harness.loop._context import failing_check_message
from io_harness.loop._outcome import RunOutcome, RunResult, error_to_json
from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    Message,
    ToolResult,
    ToolSpec,
    Usage,
)
from io_harness.observe import (
    Observer,
    Retrying,
    RunEvent,
    RunFinished,
    RunStarted,
    StepFinished,
    ToolCalled,
    Trigger,
    Verified,
)
from io_harness.providers import Provider
from io_harness.store import Store
from io_harness.store._records import (
    EventRow,
    Finish,
    ProviderAttempt,
    StepRecord,
    StoredRun,
    ToolCallRow,
    VerificationRow,
)
from io_harness.tools import Toolbox
from io_harness.verify import VerificationResult

__all__ = ["MAX_OUTPUT_TOKENS", "Engine"]

MAX_OUTPUT_TOKENS = 8192
_BACKOFF_BASE_SECONDS = 1.0
_BACKOFF_CAP_SECONDS = 30.0


class _WallTimeUp(Exception):
    """The wall-time budget ended a provider call in flight."""


@dataclass(frozen=True, slots=True)
class _Stop:
    """A provider call that will not be answered: the outcome it ends the run with."""

    outcome: RunOutcome
    error: ProviderError | None


def run_started(
    run_id: str, step: int, contract: TaskContract, provider: Provider, resumed: bool
) -> RunStarted:
    """The event that opens a run, or a resumption of it."""
    return RunStarted(
        run_id=run_id,
        step=step,
        goal=contract.goal,
        provider=provider.name,
        model=provider.model,
        resumed=resumed,
    )


def backoff_delay(attempt: int, error: ProviderError) -> float:
    """Seconds before retry ``attempt``: the provider's wish, else exponential with jitter."""
    if error.retry_after is not None:
        return max(0.0, error.retry_after)
    ceiling = min(_BACKOFF_CAP_SECONDS, _BACKOFF_BASE_SECONDS * 2.0 ** (attempt - 1))
    return ceiling * random.uniform(0.5, 1.0)


class Engine:
    """Drives one run from its stored state to an outcome."""

    def __init__(
        self,
        contract: TaskContract,
        provider: Provider,
        store: Store,
        toolbox: Toolbox,
        stored: StoredRun,
        observer: Observer | None,
    ) -> None:
        self.contract = contract
        self.provider = provider
        self.store = store
        self.toolbox = toolbox
        self.observer = observer
        self.run_id = stored.id
        self.system = stored.system_prompt
        self.tools: tuple[ToolSpec, ...] = toolbox.specs
        self.messages: list[Message] = list(stored.messages)
        self.steps = stored.steps
        self.usage = stored.usage
        budget = contract.budget
        self.wall_end = (
            stored.started_at + budget.max_wall_seconds
            if budget.max_wall_seconds is not None
            else None
        )
        self.last_error: ProviderError | None = None
        self.check_pending = False
        self.verification = (
            VerificationResult.model_validate_json(stored.verification_json)
            if stored.verification_json
            else None
        )

    # -- the loop ----------------------------------------------------------------

    async def drive(self, *, resumed: bool) -> RunResult:
        """Take steps until an outcome; every step is committed before the next begins.

        A new run's ``RunStarted`` was stored with the run; a resumed run's is
        stored with its first record.
        """
        started = run_started(self.run_id, self.steps, self.contract, self.provider, resumed)
        await self._emit([started])
        pending: list[RunEvent] = [started] if resumed else []
        # A process that died between a write and its step's commit left a change
        # nobody checked: a resumed run checks in its first step whatever the model
        # does, or, if the run ends before the model answers, as it ends.
        self.check_pending = resumed
        while True:
            record = StepRecord(step=self.steps + 1, started_at=time.time())
            events, pending = pending, []
            outcome = self._budget_outcome()
            if outcome is None:
                outcome = await self._step(record, events)
            unchecked = self.check_pending and outcome not in (None, RunOutcome.SUCCESS)
            if unchecked and await self._verify(record, events, "resumed"):
                outcome = RunOutcome.SUCCESS
            if outcome is not None:
                events.append(self._finish(record, outcome))
            record.finished_at = time.time()
            record.events = [event_row(e) for e in events]
            self.store.commit_step(self.run_id, record)
            await self._emit([e for e in events if not isinstance(e, _LIVE_EVENTS)])
            if outcome is not None:
                return RunResult(
                    run_id=self.run_id,
                    outcome=outcome,
                    steps=self.steps,
                    usage=self.usage,
                    verification=self.verification,
                    error=self.last_error,
                )

    def _budget_outcome(self) -> RunOutcome | None:
        budget = self.contract.budget
        if self.steps >= budget.max_steps:
            return RunOutcome.STEP_CAP_REACHED
        if budget.max_tokens is not None and self.usage.total_tokens >= budget.max_tokens:
            return RunOutcome.TOKEN_BUDGET_EXCEEDED
        if self.wall_end is not None and time.time() >= self.wall_end:
            return RunOutcome.TIME_BUDGET_EXCEEDED
        return None

    async def _step(self, record: StepRecord, events: list[RunEvent]) -> RunOutcome | None:
        request = CompletionRequest.model_construct(
            model=self.provider.model,
            system=self.system,
            messages=tuple(self.messages),
            tools=self.tools,
            max_tokens=MAX_OUTPUT_TOKENS,
            temperature=None,
        )
        answer = await self._call(request, record, events)
        if isinstance(answer, _Stop):
            self.last_error = answer.error
            return answer.outcome
        step = record.step
        assistant = Message(role="assistant", content=answer.content)
        record.messages.append(assistant)
        record.usage = answer.usage
        results: list[ToolResult] = []
        changed = False
        for call in answer.tool_calls:
            done = await self.toolbox.dispatch(call)
            changed = changed or bool(done.changed)
            results.append(
                ToolResult(tool_use_id=call.id, content=done.content, is_error=done.is_error)
            )
            record.tool_calls.append(
                ToolCallRow(
                    call_id=call.id,
                    name=call.name,
                    arguments_json=json.dumps(call.arguments),
                    result=done.content,
                    is_error=done.is_error,
                    changed=done.changed,
                )
            )
            events.append(
                ToolCalled(
                    run_id=self.run_id,
                    step=step,
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    result=done.content,
                    is_error=done.is_error,
                    changed=done.changed,
                )
            )
        if results:
            record.messages.append(Message(role="tool", content=tuple(results)))
        outcome: RunOutcome | None = None
        trigger: Trigger | None = None
        if changed:
            trigger = "file_changed"
        elif not results:
            trigger = "turn_ended"
        elif self.check_pending:
            trigger = "resumed"
        if trigger is not None:
            passed = await self._verify(record, events, trigger)
            if passed:
                outcome = RunOutcome.SUCCESS
        self.messages.extend(record.messages)
        self.steps = step
        self.usage = self.usage + record.usage
        events.append(
            StepFinished(
                run_id=self.run_id,
                step=step,
                usage=record.usage,
                total_usage=self.usage,
                tool_calls=len(results),
                text=assistant.text,
            )
        )
        return outcome or self._budget_outcome()

    async def _verify(self, record: StepRecord, events: list[RunEvent], trigger: Trigger) -> bool:
        deadline = None
        if self.wall_end is not None:
            deadline = time.monotonic() + (self.wall_end - time.time())
        self.check_pending = False
        started = time.monotonic()
        criterion = self.contract.verify
        try:
            result = await criterion.check(self.contract.subject(deadline))
        except Exception as exc:  # a check that breaks fails; it never passes or crashes
            result = VerificationResult(
                passed=False,
                criterion=criterion.describe(),
                output=f"the check could not run: {type(exc).__name__}: {exc}",
            )
        result_json = result.model_dump_json()
        record.verifications.append(
            VerificationRow(
                trigger=trigger,
                passed=result.passed,
                criterion=result.criterion,
                summary=result.summary,
                result_json=result_json,
                duration=time.monotonic() - started,
            )
        )
        self.verification = result
        events.append(
            Verified(
                run_id=self.run_id,
                step=record.step,
                trigger=trigger,
                passed=result.passed,
                criterion=result.criterion,
                summary=result.summary,
                output=result.output,
            )
        )
        if not result.passed and trigger == "turn_ended":
            record.messages.append(failing_check_message(result))
        return result.passed

    # -- the provider call ---------------------------------------------------------

    async def _call(
        self, request: CompletionRequest, record: StepRecord, events: list[RunEvent]
    ) -> CompletionResponse | _Stop:
        retries = self.contract.budget.max_retries
        for attempt in range(1, retries + 2):
            started, clock = time.time(), time.monotonic()
            error: ProviderError
            try:
                response = await self._ask(request)
            except _WallTimeUp:
                error = ProviderError("timeout", "the wall-time budget ran out during the call")
                record.attempts.append(self._attempt(attempt, started, clock, error=error))
                return _Stop(RunOutcome.TIME_BUDGET_EXCEEDED, error)
            except ProviderError as exc:
                error = exc
            else:
                record.attempts.append(self._attempt(attempt, started, clock, response=response))
                return response
            record.attempts.append(self._attempt(attempt, started, clock, error=error))
            if not error.transient or attempt > retries:
                return _Stop(RunOutcome.PROVIDER_FAILED, error)
            delay = backoff_delay(attempt, error)
            if self.wall_end is not None and time.time() + delay >= self.wall_end:
                return _Stop(RunOutcome.TIME_BUDGET_EXCEEDED, error)
            retrying = Retrying(
                run_id=self.run_id,
                step=record.step,
                attempt=attempt + 1,
                error_kind=error.kind,
                message=error.message,
                delay=delay,
            )
            events.append(retrying)
            await self._emit([retrying])
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

    # -- ending and telling --------------------------------------------------------

    def _finish(self, record: StepRecord, outcome: RunOutcome) -> RunFinished:
        record.finish = Finish(
            outcome=outcome.value,
            finished_at=time.time(),
            error_json=error_to_json(self.last_error),
        )
        return RunFinished(
            run_id=self.run_id,
            step=self.steps,
            outcome=outcome.value,
            steps=self.steps,
            usage=self.usage,
            error=str(self.last_error) if self.last_error is not None else None,
        )

    async def _emit(self, events: Sequence[RunEvent]) -> None:
        if self.observer is None:
            return
        for event in events:
            try:
                result = self.observer(event)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # an observer's bug must not end the run
                warnings.warn(
                    f"io-harness observer raised {type(exc).__name__}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )


_LIVE_EVENTS = (RunStarted, Retrying)
"""Events the observer gets as they happen; the rest follow their step's commit."""


def event_row(event: RunEvent) -> EventRow:
    """A run event as the store keeps it."""
    return EventRow(
        step=event.step, kind=event.kind, at=time.time(), data_json=event.model_dump_json()
    )
