"""OpenTelemetry: a run (with a sub-agent) exported as GenAI spans and metrics.

Needs the extra: ``pip install 'io-harness[otel]'``. ``OtelObserver`` turns
a run's events into spans — ``invoke_agent`` per run, ``chat {model}`` per
model call, ``execute_tool {name}`` per tool call, ``verify`` per check — and
records ``gen_ai.client.token.usage`` and ``gen_ai.client.operation.duration``.

Here the spans go to an in-memory exporter so the script can print the
tree; in a service you would add an OTLP exporter instead::

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))

A scripted provider stands in for the model, so this runs offline.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Containment,
    Harness,
    RunOutcome,
    Store,
    TaskContract,
    Usage,
    WorkspaceFileContains,
)
from io_harness.otel import OtelObserver
from io_harness.testing import ScriptedProvider, call, reply

USAGE = Usage(input_tokens=900, output_tokens=60, cache_read_tokens=600)


def model(request: CompletionRequest) -> CompletionResponse:
    """The root hands the intro to a helper, then writes the report; the helper writes."""
    goal = str(request.messages[0].text)
    turn = sum(m.role == "assistant" for m in request.messages)
    if goal.startswith("write the report"):
        if turn == 0:
            verify = {"kind": "workspace_file_contains", "file": "intro.md", "needle": "ok"}
            spawn = call("spawn_agent", goal="write the intro", verify=verify)
            return reply("A helper writes the intro.", [spawn], USAGE)
        return reply("Now the report.", [call("write_file", path="report.md", content="ok\n")])
    return reply("Writing.", [call("write_file", path="intro.md", content="ok\n")], USAGE)


def print_tree(spans: list[ReadableSpan]) -> None:
    """Each span under its parent, in start order, with its duration and key attributes."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def show(parent: int | None, depth: int) -> None:
        for span in children.get(parent, []):
            attributes = span.attributes or {}
            took = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
            shown = {
                "run": "io_harness.run_id",
                "outcome": "io_harness.outcome",
                "verdict": "io_harness.verdict",
                "input tokens": "gen_ai.usage.input_tokens",
            }
            notes = [
                f"{label}={attributes[key]!s}" for label, key in shown.items() if key in attributes
            ]
            print(f"{'  ' * depth}{span.name:<28} {took:8.2f} ms  {' '.join(notes)}".rstrip())
            show(span.context.span_id, depth + 1)

    show(None, 0)


async def main() -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metrics])
    observer = OtelObserver(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        # No prompt, answer or tool argument is exported unless this is True (when it is
        # left out, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true turns it on).
        capture_content=False,
    )

    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch, "work")
        work.mkdir()
        contract = TaskContract.workspace(
            "write the report", work, WorkspaceFileContains("report.md", "ok")
        )
        with Store.open(Path(scratch, "runs.db")) as store:
            harness = Harness(
                ScriptedProvider(model),
                store=store,
                observer=observer,
                containment=Containment(max_depth=1),
            )
            result = await harness.run(contract, run_id="report")
            assert result.outcome is RunOutcome.SUCCESS, result

    finished = list(spans.get_finished_spans())
    print_tree(finished)
    assert len({s.context.trace_id for s in finished}) == 1  # the whole tree is one trace
    assert not any("gen_ai.input.messages" in (s.attributes or {}) for s in finished)

    data = metrics.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    assert isinstance(point, HistogramDataPoint)
                    kind = (point.attributes or {}).get("gen_ai.token.type", "")
                    sums = f"{point.count} calls, sum {point.sum:g} {metric.unit}"
                    print(f"{metric.name} {kind}: {sums}")
    tracer_provider.shutdown()
    meter_provider.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
