"""Spans made whole from one event: a model call's attempt (``chat``) and a check (``verify``).

Each event arrives after the thing ended and carries its own start and
duration, so the span is opened and ended at once, at those times, inside
the context it is given (the run's ``invoke_agent`` span).
"""

from __future__ import annotations

import time

from opentelemetry.context import Context
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer
from opentelemetry.util.types import AttributeValue

from io_harness._otel import _content as content
from io_harness._otel import _names as n
from io_harness._otel._spans import nanos
from io_harness.observe import ProviderCalled, Verified

Attributes = dict[str, AttributeValue]


def chat_span(
    tracer: Tracer, event: ProviderCalled, context: Context | None, capture_content: bool
) -> None:
    """The ``chat {model}`` span of one attempt: its models, tokens, cost, and error."""
    attributes: Attributes = {
        n.OPERATION: n.CHAT,
        n.PROVIDER: event.provider,
        n.REQUEST_MODEL: event.model,
        n.RUN_ID: event.run_id,
        n.STEP: event.step,
        n.ATTEMPT: event.attempt,
        n.PURPOSE: event.purpose,
    }
    if event.served_model:
        attributes[n.RESPONSE_MODEL] = event.served_model
    if event.finish_reason is not None:
        attributes[n.FINISH_REASONS] = [event.finish_reason]
    if event.time_to_first_token is not None:
        attributes[n.TIME_TO_FIRST_TOKEN] = event.time_to_first_token
    if event.error_kind is None:
        attributes.update(n.usage_attributes(event.usage))
        if event.cost_micros is not None:
            attributes[n.COST_MICROS] = event.cost_micros
    if capture_content:
        attributes.update(_call_content(event))
    span = tracer.start_span(
        f"{n.CHAT} {event.model}",
        context=context,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=nanos(event.started_at),
    )
    if event.error_kind is not None:
        span.set_attribute(n.ERROR_TYPE, event.error_kind)
        said = event.error_message if capture_content else None
        status = f" (status {event.error_status})" if event.error_status else ""
        span.set_status(Status(StatusCode.ERROR, said or f"{event.error_kind}{status}"))
    span.end(end_time=nanos(event.started_at + event.duration))


def verify_span(
    tracer: Tracer, event: Verified, context: Context | None, capture_content: bool
) -> None:
    """The ``verify`` span of one check: what triggered it and its verdict."""
    attributes: Attributes = {
        n.RUN_ID: event.run_id,
        n.STEP: event.step,
        n.TRIGGER: event.trigger,
        n.VERDICT: verdict(event),
    }
    if capture_content:
        attributes[n.CRITERION] = event.criterion
        attributes[n.SUMMARY] = event.summary
        attributes[n.CHECK_OUTPUT] = event.output
    # A check stored before checks carried their times has none: it is placed at now.
    started = event.started_at if event.started_at is not None else time.time()
    span = tracer.start_span(
        "verify",
        context=context,
        kind=SpanKind.INTERNAL,
        attributes=attributes,
        start_time=nanos(started),
    )
    span.end(end_time=nanos(started + (event.duration or 0.0)))


def verdict(event: Verified) -> str:
    """``pass`` or ``fail``."""
    return "pass" if event.passed else "fail"


def _call_content(event: ProviderCalled) -> Attributes:
    said: Attributes = {}
    if event.request is not None:
        said[n.SYSTEM_INSTRUCTIONS] = content.system_instructions(event.request)
        said[n.INPUT_MESSAGES] = content.input_messages(event.request)
    if event.response is not None:
        said[n.OUTPUT_MESSAGES] = content.output_messages(event.response)
    return said
