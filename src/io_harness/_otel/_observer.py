"""OtelObserver: a run's events as OpenTelemetry GenAI spans and metrics.

Spans, by the GenAI conventions:

- ``invoke_agent`` (INTERNAL) for each start or resumption of a run, from
  ``RunStarted`` to ``RunFinished`` (or ``RunStopped``: a pause or an
  exception); a sub-agent's is the child of its parent's ``spawn_agent``
  tool span;
- ``chat {model}`` (CLIENT) for each attempt at a model call, so a retried
  or fallen-back call shows every try with its own duration and
  ``error.type``; timed from the attempt's own start and duration;
- ``execute_tool {name}`` (INTERNAL) for each tool call, opened when the call
  begins (``ToolStarted``) so that a spawned sub-agent nests under it, and
  ended at its observation; a ``spawn_agent`` span lasts until its child
  has ended too;
- ``verify`` (INTERNAL) for each check of the criterion.

Every time comes from the event (when the thing happened), never from when
the observer was called: most events arrive after their step's commit.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Awaitable
from typing import Any

from opentelemetry import metrics, trace
from opentelemetry.context import Context
from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TracerProvider,
)
from opentelemetry.util.types import AttributeValue

from io_harness._otel import _content as content
from io_harness._otel import _names as n
from io_harness._otel._metrics import ClientMetrics
from io_harness._otel._spans import RunSpan, StoppedStarts, ToolSpan, nanos
from io_harness._otel._whole import chat_span, verdict, verify_span
from io_harness.errors import ConfigError
from io_harness.observe import (
    AwaitingApproval,
    Observer,
    ProviderCalled,
    Retrying,
    RunFinished,
    RunStarted,
    RunStopped,
    StepFinished,
    ToolCalled,
    ToolStarted,
    Verified,
)

__all__ = ["OtelObserver", "instrument"]

_SCOPE = "io_harness"
CONTENT_SWITCH = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_SPAWN_TOOL = "spawn_agent"
Attributes = dict[str, AttributeValue]


class OtelObserver:
    """An observer that exports runs as OpenTelemetry spans and metrics (GenAI conventions).

    Give it as ``Harness(observer=OtelObserver())``, or wrap a harness's own
    observer with :func:`instrument`. ``tracer_provider`` and
    ``meter_provider`` default to the global ones (set by the application,
    or by ``opentelemetry-instrument``). ``then`` is another observer that
    gets every event after this one, so the two compose.

    Prompts, answers, tool arguments and results, the goal, the criterion's
    text and output, and error messages are exported only with
    ``capture_content=True``; without it the spans hold names, counts,
    times, outcomes and verdicts. Left as ``None``, it follows the GenAI
    instrumentations' shared switch, the environment variable
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` (``true``,
    ``span_only`` or ``span_and_event`` turn it on).
    """

    def __init__(
        self,
        *,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        capture_content: bool | None = None,
        then: Observer | None = None,
    ) -> None:
        if capture_content is None:
            capture_content = _content_switched_on()
        if not isinstance(capture_content, bool):
            raise ConfigError(f"capture_content must be True or False, not {capture_content!r}")
        if then is not None and not callable(then):
            raise ConfigError(f"then must be an observer (a callable), not {type(then).__name__}")
        from io_harness import __version__

        self.capture_content = capture_content
        self.then = then
        self._tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
        self._metrics = ClientMetrics(
            metrics.get_meter(_SCOPE, __version__, meter_provider=meter_provider)
        )
        self._runs: dict[str, RunSpan] = {}
        self._stopped = StoppedStarts()

    def __call__(self, event: Any) -> Awaitable[None] | None:
        """Record ``event``, then hand it to ``then``; a failure to record is warned about."""
        try:
            self._record(event)
        except Exception as exc:  # telemetry must never cost the run
            warnings.warn(
                f"io-harness OpenTelemetry export failed on {getattr(event, 'kind', event)!r}: "
                f"{type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )
        return self.then(event) if self.then is not None else None

    def _record(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            self._run_started(event)
        elif isinstance(event, ToolStarted):
            self._tool_started(event)
        elif isinstance(event, ProviderCalled):
            self._provider_called(event)
        elif isinstance(event, ToolCalled):
            self._tool_called(event)
        elif isinstance(event, Verified):
            self._verified(event)
        elif isinstance(event, StepFinished):
            if event.run_id in self._runs:
                self._runs[event.run_id].steps = event.step
        elif isinstance(event, Retrying):
            self._note(event.run_id, "io_harness.retrying", self._retrying(event))
        elif isinstance(event, AwaitingApproval):
            self._note(event.run_id, "io_harness.awaiting_approval", self._awaiting(event))
        elif isinstance(event, RunFinished):
            self._run_finished(event)
        elif isinstance(event, RunStopped):
            self._run_stopped(event)

    # -- runs ----------------------------------------------------------------------

    def _run_started(self, event: RunStarted) -> None:
        if event.run_id in self._runs:  # a start the observer never saw end: close it first
            self._close(event.run_id, event.at or _now(), "restarted", None)
        at = event.at or _now()
        earlier = self._stopped.take(event.run_id)
        parent = self._parent(event, at, earlier)
        attributes: Attributes = {
            n.OPERATION: n.INVOKE_AGENT,
            n.PROVIDER: event.provider,
            n.REQUEST_MODEL: event.model,
            n.AGENT_ID: event.run_id,
            n.CONVERSATION_ID: event.run_id,
            n.RUN_ID: event.run_id,
            n.STEP: event.step,
            n.RESUMED: event.resumed,
        }
        if event.parent_id is not None:
            attributes[n.PARENT_RUN_ID] = event.parent_id
        if self.capture_content:
            attributes[n.GOAL] = event.goal
        span = self._tracer.start_span(
            n.INVOKE_AGENT,
            context=parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            links=[Link(earlier, {"io_harness.link": "resumes"})] if earlier else None,
            start_time=nanos(at),
        )
        self._runs[event.run_id] = RunSpan(
            span, event.run_id, event.parent_id, event.spawn_call, steps=event.step
        )

    def _parent(self, event: RunStarted, at: float, earlier: SpanContext | None) -> Context | None:
        """Where a run's span goes: under its spawn, under the caller's current span, under
        the start it resumes (one trace), or at the root of a new trace.

        ``None`` means the current context: the caller's span if there is one.
        """
        spawn = self._spawn_span(event, at)
        if spawn is not None:
            return trace.set_span_in_context(spawn)
        if trace.get_current_span().get_span_context().is_valid or earlier is None:
            return None
        return trace.set_span_in_context(NonRecordingSpan(earlier))

    def _spawn_span(self, event: RunStarted, at: float) -> Span | None:
        """The parent's ``spawn_agent`` span a sub-agent's span nests under.

        A resumed tree's spawns are made again before the parent's step goes
        on, with no tool call of this drive: such a child gets a stand-in
        spawn span, opened now and ended with it.
        """
        if event.parent_id is None or event.spawn_call is None:
            return None
        parent = self._runs.get(event.parent_id)
        if parent is None:
            return None
        tool = parent.tools.get(event.spawn_call)
        if tool is None:
            tool = self._open_tool(parent, event.spawn_call, _SPAWN_TOOL, at, event.step)
            tool.stand_in = True
            tool.span.set_attribute(n.RESUMED, True)
        return tool.span

    def _run_finished(self, event: RunFinished) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        run.steps = event.steps
        error = None
        if event.outcome != "success":
            detail = event.error if self.capture_content and event.error else event.outcome
            error = (event.outcome, detail)
        self._close(event.run_id, event.finished_at or _now(), event.outcome, error)

    def _run_stopped(self, event: RunStopped) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        context = run.span.get_span_context()
        error = None
        if event.reason == "error":
            kind = n.exception_type(event.error)
            error = (kind, event.error if self.capture_content and event.error else kind)
        self._close(event.run_id, event.at, event.reason, error)
        self._stopped.remember(event.run_id, context)

    def _close(self, run_id: str, at: float, outcome: str, error: tuple[str, str] | None) -> None:
        """End a run's span (and any tool span still open in it) at ``at``."""
        run = self._runs.pop(run_id)
        for call_id, tool in list(run.tools.items()):
            tool.span.set_attribute(n.INTERRUPTED, outcome)
            tool.span.end(end_time=nanos(max(at, tool.children_ended)))
            del run.tools[call_id]
        span = run.span
        span.set_attributes(n.usage_attributes(run.usage))
        span.set_attributes(
            {
                n.OUTCOME: outcome,
                n.STEPS: run.steps,
                n.COST_MICROS: run.cost_micros,
                n.UNPRICED_CALLS: run.unpriced_calls,
            }
        )
        if run.verdict is not None:
            span.set_attribute(n.VERDICT, run.verdict)
        if error is not None:
            span.set_attribute(n.ERROR_TYPE, error[0])
            span.set_status(Status(StatusCode.ERROR, error[1]))
        span.end(end_time=nanos(at))
        self._child_ended(run, at)

    def _child_ended(self, child: RunSpan, at: float) -> None:
        """A sub-agent ended: its spawn span lasts at least as long; a stand-in ends now."""
        if child.parent_id is None or child.spawn_call is None:
            return
        parent = self._runs.get(child.parent_id)
        tool = parent.tools.get(child.spawn_call) if parent is not None else None
        if parent is None or tool is None:
            return
        tool.children_ended = max(tool.children_ended, at)
        if tool.stand_in:
            del parent.tools[child.spawn_call]
            tool.span.end(end_time=nanos(at))

    # -- model calls and checks -----------------------------------------------------

    def _provider_called(self, event: ProviderCalled) -> None:
        run = self._runs.get(event.run_id)
        chat_span(self._tracer, event, _inside(run), self.capture_content)
        self._metrics.record(event)
        if run is not None and event.error_kind is None:
            run.usage = run.usage + event.usage
            if event.cost_micros is None:
                run.unpriced_calls += 1
            else:
                run.cost_micros += event.cost_micros

    def _verified(self, event: Verified) -> None:
        run = self._runs.get(event.run_id)
        verify_span(self._tracer, event, _inside(run), self.capture_content)
        if run is not None:
            run.verdict = verdict(event)

    # -- tool calls ----------------------------------------------------------------

    def _tool_started(self, event: ToolStarted) -> None:
        run = self._runs.get(event.run_id)
        if run is not None:
            self._open_tool(run, event.call_id, event.name, event.at, event.step)

    def _open_tool(self, run: RunSpan, call_id: str, name: str, at: float, step: int) -> ToolSpan:
        attributes: Attributes = {
            n.OPERATION: n.EXECUTE_TOOL,
            n.TOOL_NAME: name,
            n.TOOL_CALL_ID: call_id,
            n.TOOL_TYPE: "function",
            n.RUN_ID: run.run_id,
            n.STEP: step,
        }
        span = self._tracer.start_span(
            f"{n.EXECUTE_TOOL} {name}",
            context=trace.set_span_in_context(run.span),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=nanos(at),
        )
        run.tools[call_id] = tool = ToolSpan(span, name)
        return tool

    def _tool_called(self, event: ToolCalled) -> None:
        run = self._runs.get(event.run_id)
        if run is None:
            return
        tool = run.tools.pop(event.call_id, None)
        started = event.started_at if event.started_at is not None else _now()
        if tool is None:  # told without its start: the span is made from the event's times
            tool = self._open_tool(run, event.call_id, event.name, started, event.step)
        span = tool.span
        span.set_attribute(n.TOOL_KIND, event.tool_kind)
        if event.is_error:
            span.set_attribute(n.ERROR_TYPE, n.tool_error_type(event.error))
            span.set_status(Status(StatusCode.ERROR, n.tool_error_type(event.error)))
        if self.capture_content:
            span.set_attribute(n.TOOL_ARGUMENTS, content.arguments_text(event.arguments))
            span.set_attribute(n.TOOL_RESULT, event.result)
            if event.changed:
                span.set_attribute(n.CHANGED, list(event.changed))
        ended = started + (event.duration or 0.0)
        span.end(end_time=nanos(max(ended, tool.children_ended)))

    # -- notes on a run's span -----------------------------------------------------

    def _note(self, run_id: str, name: str, attributes: Attributes) -> None:
        run = self._runs.get(run_id)
        if run is not None:
            run.span.add_event(name, attributes)

    @staticmethod
    def _retrying(event: Retrying) -> Attributes:
        return {n.ATTEMPT: event.attempt, n.ERROR_TYPE: event.error_kind, "delay": event.delay}

    def _awaiting(self, event: AwaitingApproval) -> Attributes:
        said: Attributes = {"request_id": event.request_id, "act": event.act, "tool": event.tool}
        if event.rule is not None:
            said["rule"] = event.rule
        if event.layer is not None:
            said["layer"] = event.layer
        if self.capture_content:
            said[n.TARGET] = event.target
        return said


def instrument(
    harness: Any,
    *,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    capture_content: bool | None = None,
) -> OtelObserver:
    """Make ``harness`` export its runs: an :class:`OtelObserver` in front of its observer.

    The harness's own observer (if it has one) still gets every event. The
    observer is returned; its runs' spans go to ``tracer_provider`` (the
    global one when omitted).
    """
    from io_harness import Harness

    if not isinstance(harness, Harness):
        raise ConfigError(f"instrument takes a Harness, not {type(harness).__name__}")
    if isinstance(harness.observer, OtelObserver):
        raise ConfigError("this harness is instrumented already: its runs would be exported twice")
    observer = OtelObserver(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=capture_content,
        then=harness.observer,
    )
    harness.observer = observer
    return observer


def _inside(run: RunSpan | None) -> Context | None:
    """The context of a span made inside ``run``'s (the current one when the run is unknown)."""
    return trace.set_span_in_context(run.span) if run is not None else None


def _content_switched_on() -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` asks for content on spans."""
    said = os.environ.get(CONTENT_SWITCH, "").strip().lower()
    return said in ("true", "1", "span_only", "span_and_event")


def _now() -> float:
    """Now, for an event stored before it carried its own time."""
    return time.time()
