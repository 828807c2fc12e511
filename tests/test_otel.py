"""OpenTelemetry export: GenAI spans and metrics from real scripted runs, read back from the
SDK's in-memory exporter and metric reader.

Times are checked as order and containment (a child span lies within its
parent's), never as durations.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import support
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Containment,
    Decision,
    Harness,
    Policy,
    Price,
    PriceTable,
    ProviderError,
    RunOutcome,
    Store,
    TaskContract,
    Usage,
    WorkspaceFileContains,
)
from io_harness.otel import OtelObserver, instrument
from io_harness.testing import ScriptedProvider, call, reply
from support import spawn

USAGE = Usage(input_tokens=120, output_tokens=30, cache_read_tokens=80, reasoning_tokens=5)
GOAL = "make the greeting say hello"
SECRET = "s3cret-line-of-the-file"
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "io_harness.goal",
    "io_harness.verify.criterion",
    "io_harness.verify.summary",
    "io_harness.verify.output",
    "io_harness.tool.changed",
    "io_harness.approval.target",
}


@dataclass
class Telemetry:
    """An SDK pipeline that keeps what it exports."""

    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def observer(self, **options: Any) -> OtelObserver:
        return OtelObserver(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options
        )

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.finished() if s.name == name]

    def points(self, metric: str) -> list[HistogramDataPoint]:
        data = self.metrics.get_metrics_data()
        assert data is not None
        found: list[HistogramDataPoint] = []
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for each in scope.metrics:
                    if each.name == metric:
                        found += [
                            p for p in each.data.data_points if isinstance(p, HistogramDataPoint)
                        ]
        return found

    def unit(self, metric: str) -> str:
        data = self.metrics.get_metrics_data()
        assert data is not None
        (unit,) = {
            m.unit
            for r in data.resource_metrics
            for s in r.scope_metrics
            for m in s.metrics
            if m.name == metric
        }
        return unit or ""


@pytest.fixture(autouse=True)
def no_content_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default (no content) whatever the environment running the tests says."""
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)


@pytest.fixture
def telemetry() -> Iterator[Telemetry]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    metrics = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[metrics])
    yield Telemetry(spans, metrics, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


@pytest.fixture
def work(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "greeting.txt").write_text(f"{SECRET}: hi\n")
    return root


contract = partial(support.contract, goal=GOAL, file="greeting.txt", needle="hello")
"""The task of the runs here: done when greeting.txt holds ``hello``."""


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def point_attrs(point: HistogramDataPoint) -> dict[str, Any]:
    return dict(point.attributes or {})


def parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def within(inner: ReadableSpan, outer: ReadableSpan) -> bool:
    assert inner.start_time is not None and inner.end_time is not None
    assert outer.start_time is not None and outer.end_time is not None
    return outer.start_time <= inner.start_time <= inner.end_time <= outer.end_time


def every_value(spans: Sequence[ReadableSpan]) -> str:
    """Every attribute and event value of ``spans``, as one text to search."""
    values = [str(v) for s in spans for v in attrs(s).values()]
    values += [str(v) for s in spans for e in s.events for v in (e.attributes or {}).values()]
    values += [s.status.description or "" for s in spans]
    return "\n".join(values)


def fixing_run() -> ScriptedProvider:
    """Reads the file, ends its turn too early (the check fails), then writes it (it passes)."""
    return ScriptedProvider(
        [
            reply("Reading.", [call("read_file", path="greeting.txt")], USAGE),
            reply("It is fine as it is.", usage=USAGE),
            reply("Fixing.", [call("write_file", path="greeting.txt", content="hello\n")], USAGE),
        ]
    )


# -- the span tree of one run ------------------------------------------------------------


async def test_a_run_is_an_invoke_agent_span_over_its_calls_tools_and_checks(
    telemetry: Telemetry, work: Path
) -> None:
    harness = Harness(fixing_run(), observer=telemetry.observer())
    result = await harness.run(contract(work), run_id="greet")

    assert result.outcome is RunOutcome.SUCCESS
    (agent,) = telemetry.named("invoke_agent")
    chats = telemetry.named("chat scripted")
    tools = [s for s in telemetry.finished() if s.name.startswith("execute_tool ")]
    checks = telemetry.named("verify")
    assert [s.name for s in tools] == ["execute_tool read_file", "execute_tool write_file"]
    assert len(chats) == 3 and len(checks) == 2
    assert len(telemetry.finished()) == 1 + 3 + 2 + 2
    assert agent.parent is None and agent.kind is SpanKind.INTERNAL
    for span in (*chats, *tools, *checks):
        assert parent_of(span) == agent.context.span_id
        assert span.context.trace_id == agent.context.trace_id
        assert within(span, agent)
    assert {c.kind for c in chats} == {SpanKind.CLIENT}
    # In the order they happened: each tool call after the answer that asked for it.
    starts = [s.start_time or 0 for s in (chats[0], tools[0], chats[1], checks[0], chats[2])]
    assert starts == sorted(starts)

    assert attrs(agent) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.agent.id": "greet",
        "gen_ai.conversation.id": "greet",
        "io_harness.run_id": "greet",
        "io_harness.step": 0,
        "io_harness.resumed": False,
        "gen_ai.usage.input_tokens": 360,
        "gen_ai.usage.output_tokens": 90,
        "gen_ai.usage.cache_read.input_tokens": 240,
        "gen_ai.usage.reasoning.output_tokens": 15,
        "io_harness.outcome": "success",
        "io_harness.steps": 3,
        "io_harness.cost_micros": 0,
        "io_harness.unpriced_calls": 3,
        "io_harness.verdict": "pass",
    }
    first = attrs(chats[0])
    assert first == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
        "gen_ai.response.finish_reasons": ("tool_use",),
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.cache_read.input_tokens": 80,
        "gen_ai.usage.reasoning.output_tokens": 5,
        "io_harness.run_id": "greet",
        "io_harness.step": 1,
        "io_harness.attempt": 1,
        "io_harness.call.purpose": "answer",
    }
    assert attrs(tools[1]) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "write_file",
        "gen_ai.tool.call.id": "call_5_2",
        "gen_ai.tool.type": "function",
        "io_harness.run_id": "greet",
        "io_harness.step": 3,
        "io_harness.tool.kind": "builtin",
    }
    assert [
        (attrs(c)["io_harness.verify.trigger"], attrs(c)["io_harness.verdict"]) for c in checks
    ] == [
        ("turn_ended", "fail"),
        ("file_changed", "pass"),
    ]
    assert all(s.status.status_code is StatusCode.UNSET for s in telemetry.finished())


async def test_no_prompt_answer_argument_or_result_leaves_without_the_opt_in(
    telemetry: Telemetry, work: Path
) -> None:
    harness = Harness(fixing_run(), observer=telemetry.observer())
    await harness.run(contract(work))

    spans = telemetry.finished()
    assert not CONTENT_KEYS & {key for s in spans for key in attrs(s)}
    exported = every_value(spans)
    for said in (GOAL, SECRET, "Reading.", "Fixing.", "greeting.txt", "hello\n"):
        assert said not in exported


async def test_with_the_opt_in_the_conversation_and_the_tool_calls_are_exported(
    telemetry: Telemetry, work: Path
) -> None:
    harness = Harness(fixing_run(), observer=telemetry.observer(capture_content=True))
    await harness.run(contract(work))

    (agent,) = telemetry.named("invoke_agent")
    assert attrs(agent)["io_harness.goal"] == GOAL
    first, second, _ = telemetry.named("chat scripted")
    asked = json.loads(attrs(second)["gen_ai.input.messages"])
    assert [m["role"] for m in asked] == ["user", "assistant", "tool"]
    assert GOAL in asked[0]["parts"][0]["content"]
    assert asked[1]["parts"][1] == {
        "type": "tool_call",
        "id": "call_1_2",
        "name": "read_file",
        "arguments": {"path": "greeting.txt"},
    }
    (answer,) = asked[2]["parts"]
    assert answer["type"] == "tool_call_response" and SECRET in answer["response"]
    assert json.loads(attrs(first)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Reading."},
                {
                    "type": "tool_call",
                    "id": "call_1_2",
                    "name": "read_file",
                    "arguments": {"path": "greeting.txt"},
                },
            ],
            "finish_reason": "tool_use",
        }
    ]
    (system,) = json.loads(attrs(first)["gen_ai.system_instructions"])
    assert system["type"] == "text" and system["content"]
    read, write = (s for s in telemetry.finished() if s.name.startswith("execute_tool "))
    assert json.loads(attrs(read)["gen_ai.tool.call.arguments"]) == {"path": "greeting.txt"}
    assert SECRET in attrs(read)["gen_ai.tool.call.result"]
    assert attrs(write)["io_harness.tool.changed"] == ("greeting.txt",)
    failed, passed = telemetry.named("verify")
    assert "hello" in attrs(failed)["io_harness.verify.criterion"]
    assert attrs(passed)["io_harness.verify.summary"]


# -- errors --------------------------------------------------------------------------------


async def test_a_failed_provider_call_carries_its_error_type_on_each_attempt(
    telemetry: Telemetry, work: Path
) -> None:
    down = ProviderError("server", "upstream said no to " + SECRET, status=503, retry_after=0)
    harness = Harness(ScriptedProvider([down, down]), observer=telemetry.observer())
    result = await harness.run(contract(work, max_retries=1))

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    (agent,) = telemetry.named("invoke_agent")
    chats = telemetry.named("chat scripted")
    assert [attrs(c)["io_harness.attempt"] for c in chats] == [1, 2]
    for chat in chats:
        assert attrs(chat)["error.type"] == "server"
        assert chat.status.status_code is StatusCode.ERROR
        assert chat.status.description == "server (status 503)"
        assert "gen_ai.usage.input_tokens" not in attrs(chat)
    assert attrs(agent)["error.type"] == "provider_failed"
    assert attrs(agent)["io_harness.outcome"] == "provider_failed"
    assert agent.status.status_code is StatusCode.ERROR
    (retry,) = agent.events
    assert retry.name == "io_harness.retrying"
    assert dict(retry.attributes or {})["error.type"] == "server"
    assert SECRET not in every_value(telemetry.finished())
    durations = telemetry.points("gen_ai.client.operation.duration")
    assert [(point_attrs(p)["error.type"], p.count) for p in durations] == [("server", 2)]
    assert telemetry.points("gen_ai.client.token.usage") == []


async def test_the_error_message_is_exported_with_the_opt_in(
    telemetry: Telemetry, work: Path
) -> None:
    down = ProviderError("auth", "the key was refused", status=401)
    harness = Harness(ScriptedProvider([down]), observer=telemetry.observer(capture_content=True))
    await harness.run(contract(work))

    (chat,) = telemetry.named("chat scripted")
    assert chat.status.description == "the key was refused"


class Unplugged(BaseException):
    """Something no provider error covers, raised through the loop."""


async def test_a_run_an_exception_ends_has_its_span_ended_with_the_exception_type(
    telemetry: Telemetry, work: Path
) -> None:
    harness = Harness(
        ScriptedProvider(
            [reply("Reading.", [call("read_file", path="greeting.txt")]), Unplugged()]
        ),
        observer=telemetry.observer(),
    )
    with pytest.raises(Unplugged):
        await harness.run(contract(work))

    (agent,) = telemetry.named("invoke_agent")
    assert attrs(agent)["error.type"] == "Unplugged"
    assert attrs(agent)["io_harness.outcome"] == "error"
    assert agent.status.status_code is StatusCode.ERROR
    assert len(telemetry.named("chat scripted")) == 1  # the step that committed


# -- metrics -------------------------------------------------------------------------------


async def test_the_metrics_count_tokens_by_type_and_time_each_call(
    telemetry: Telemetry, work: Path
) -> None:
    prices = PriceTable({"scripted": Price(input=1, output=2)})
    harness = Harness(fixing_run(), observer=telemetry.observer(), prices=prices)
    await harness.run(contract(work))

    assert telemetry.unit("gen_ai.client.token.usage") == "{token}"
    assert telemetry.unit("gen_ai.client.operation.duration") == "s"
    common = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "scripted",
        "gen_ai.request.model": "scripted",
        "gen_ai.response.model": "scripted",
    }
    tokens = {
        point_attrs(p)["gen_ai.token.type"]: (point_attrs(p), p.count, p.sum)
        for p in telemetry.points("gen_ai.client.token.usage")
    }
    assert tokens == {
        "input": ({**common, "gen_ai.token.type": "input"}, 3, 360),
        "output": ({**common, "gen_ai.token.type": "output"}, 3, 90),
    }
    (duration,) = telemetry.points("gen_ai.client.operation.duration")
    assert point_attrs(duration) == common and duration.count == 3
    assert duration.explicit_bounds[:3] == (0.01, 0.02, 0.04)
    (token_point, _) = telemetry.points("gen_ai.client.token.usage")
    assert token_point.explicit_bounds[:4] == (1, 4, 16, 64)
    # Priced: each call's cost is on its span, and the run's on its own.
    (agent,) = telemetry.named("invoke_agent")
    costs = [attrs(c)["io_harness.cost_micros"] for c in telemetry.named("chat scripted")]
    assert costs == [120 + 60] * 3
    assert attrs(agent)["io_harness.cost_micros"] == sum(costs)
    assert attrs(agent)["io_harness.unpriced_calls"] == 0


# -- sub-agents ------------------------------------------------------------------------------


def tree_model(request: CompletionRequest) -> CompletionResponse:
    """Each agent by its goal and turn: the root spawns two children, then writes its file."""
    goal = str(request.messages[0].text).split("\n\n", 1)[0]
    turn = sum(m.role == "assistant" for m in request.messages)
    if goal == "coordinate":
        if turn == 0:
            spawns = [spawn("write a", "a.txt"), spawn("write b", "b.txt")]
            return reply("Two helpers.", spawns, USAGE)
        return reply("Joining.", [call("write_file", path="root.txt", content="done\n")], USAGE)
    file = "a.txt" if goal == "write a" else "b.txt"
    return reply(f"Writing {file}.", [call("write_file", path=file, content="done\n")], USAGE)


async def test_a_sub_agent_runs_inside_its_parents_spawn_agent_span(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    work = tmp_path / "tree"
    work.mkdir()
    harness = Harness(
        ScriptedProvider(tree_model),
        observer=telemetry.observer(),
        containment=Containment(max_depth=1, max_concurrent_agents=2),
    )
    root_contract = TaskContract.workspace(
        "coordinate", work, WorkspaceFileContains("root.txt", "done")
    )
    result = await harness.run(root_contract, run_id="root")

    assert result.outcome is RunOutcome.SUCCESS
    agents = {attrs(s)["io_harness.run_id"]: s for s in telemetry.named("invoke_agent")}
    assert set(agents) == {"root", "root.1", "root.2"}
    root = agents["root"]
    spawns = telemetry.named("execute_tool spawn_agent")
    assert len(spawns) == 2
    for spawned, child_id in zip(
        sorted(spawns, key=lambda s: attrs(s)["gen_ai.tool.call.id"]),
        ("root.1", "root.2"),
        strict=True,
    ):
        child = agents[child_id]
        assert parent_of(spawned) == root.context.span_id
        assert parent_of(child) == spawned.context.span_id
        assert attrs(child)["io_harness.parent_run_id"] == "root"
        assert within(child, spawned) and within(spawned, root)
        assert child.context.trace_id == root.context.trace_id
        (chat,) = [
            c for c in telemetry.named("chat scripted") if parent_of(c) == child.context.span_id
        ]
        assert within(chat, child)
    assert {s.context.trace_id for s in telemetry.finished()} == {root.context.trace_id}


# -- a resumed run -------------------------------------------------------------------------


async def test_a_run_resumed_after_an_approval_pause_continues_its_trace(
    telemetry: Telemetry, work: Path
) -> None:
    store = Store.memory()
    provider = ScriptedProvider(
        [
            reply("Fixing.", [call("write_file", path="greeting.txt", content="hello\n")], USAGE),
        ]
    )
    harness = Harness(provider, store=store, policy=Policy.guarded(), observer=telemetry.observer())
    paused = await harness.run(contract(work), run_id="ask")
    assert paused.outcome is RunOutcome.AWAITING_APPROVAL

    (first,) = telemetry.named("invoke_agent")
    assert attrs(first)["io_harness.outcome"] == "awaiting_approval"
    assert first.status.status_code is StatusCode.UNSET
    (deferred,) = telemetry.named("execute_tool write_file")
    assert attrs(deferred)["io_harness.interrupted"] == "awaiting_approval"
    assert within(deferred, first)
    (waiting,) = first.events
    assert waiting.name == "io_harness.awaiting_approval"
    assert dict(waiting.attributes or {})["act"] == "write"
    assert "io_harness.approval.target" not in dict(waiting.attributes or {})

    finished = await harness.resume("ask", decision=Decision.approve())

    assert finished.outcome is RunOutcome.SUCCESS
    first_again, resumed = sorted(telemetry.named("invoke_agent"), key=lambda s: s.start_time or 0)
    assert first_again.context == first.context
    assert resumed.context.trace_id == first.context.trace_id
    assert parent_of(resumed) == first.context.span_id
    assert [link.context for link in resumed.links] == [first.context]
    assert attrs(resumed)["io_harness.resumed"] is True
    assert attrs(resumed)["io_harness.outcome"] == "success"
    assert attrs(resumed)["io_harness.verdict"] == "pass"
    assert (first.end_time or 0) <= (resumed.start_time or 0)
    _, written = telemetry.named("execute_tool write_file")
    assert parent_of(written) == resumed.context.span_id and "error.type" not in attrs(written)
    # The model was asked once: its call belongs to the first start.
    (chat,) = telemetry.named("chat scripted")
    assert parent_of(chat) == first.context.span_id
    store.close()


# -- wiring ----------------------------------------------------------------------------------


async def test_instrument_keeps_the_harness_observer_and_awaits_it(
    telemetry: Telemetry, work: Path
) -> None:
    seen: list[str] = []

    async def mine(event: Any) -> None:
        seen.append(event.kind)

    harness = Harness(fixing_run(), observer=mine)
    observer = instrument(
        harness,
        tracer_provider=telemetry.tracer_provider,
        meter_provider=telemetry.meter_provider,
    )
    await harness.run(contract(work))

    assert harness.observer is observer and observer.then is mine
    with pytest.raises(ConfigError, match="instrumented already"):
        instrument(harness)
    assert seen[0] == "run_started" and seen[-1] == "run_finished"
    assert "provider_called" in seen and "tool_started" in seen
    assert len(telemetry.named("invoke_agent")) == 1


def test_bad_options_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="capture_content must be True or False"):
        OtelObserver(capture_content="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="then must be an observer"):
        OtelObserver(then="print")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="instrument takes a Harness"):
        instrument(object())


def test_without_the_sdk_the_module_says_how_to_install_it() -> None:
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry.sdk"] = None  # as if the extra were not installed
        from io_harness import ConfigError
        try:
            import io_harness.otel
        except ConfigError as exc:
            print(exc)
        else:
            raise SystemExit("imported without the SDK")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )

    assert done.returncode == 0, done.stderr
    assert "pip install 'io-harness[otel]'" in done.stdout


async def test_a_tree_paused_by_its_childs_ask_resumes_with_the_child_under_its_parent(
    telemetry: Telemetry, tmp_path: Path
) -> None:
    def model(request: CompletionRequest) -> CompletionResponse:
        goal = str(request.messages[0].text).split("\n\n", 1)[0]
        turn = sum(m.role == "assistant" for m in request.messages)
        if goal == "coordinate":
            if turn == 0:
                notes = call("write_file", path="notes.txt", content="plan\n")
                return reply("Delegating.", [spawn("careful", "c.txt"), notes], USAGE)
            return reply("Done.", [call("write_file", path="root.txt", content="done\n")], USAGE)
        if turn == 0:
            return reply("Writing.", [call("write_file", path="c.txt", content="done\n")], USAGE)
        return reply("Written.", usage=USAGE)

    work = tmp_path / "tree"
    work.mkdir()
    store = Store.memory()
    harness = Harness(
        ScriptedProvider(model),
        store=store,
        policy=Policy.default().layer("review").ask_write("c.txt"),
        containment=Containment(max_depth=1),
        observer=telemetry.observer(),
    )
    root_contract = TaskContract.workspace(
        "coordinate", work, WorkspaceFileContains("root.txt", "done")
    )
    paused = await harness.run(root_contract, run_id="t")
    assert paused.outcome is RunOutcome.AWAITING_APPROVAL

    before = {attrs(s)["io_harness.run_id"]: s for s in telemetry.named("invoke_agent")}
    assert {r: attrs(s)["io_harness.outcome"] for r, s in before.items()} == {
        "t": "awaiting_approval",
        "t.1": "awaiting_approval",
    }
    (spawned,) = telemetry.named("execute_tool spawn_agent")
    assert parent_of(before["t.1"]) == spawned.context.span_id
    assert within(before["t.1"], spawned) and within(spawned, before["t"])

    finished = await harness.resume("t", decision=Decision.approve())

    assert finished.outcome is RunOutcome.SUCCESS
    later = [s for s in telemetry.named("invoke_agent") if attrs(s)["io_harness.resumed"] is True]
    resumed = {attrs(s)["io_harness.run_id"]: s for s in later}
    assert set(resumed) == {"t", "t.1"}
    assert parent_of(resumed["t"]) == before["t"].context.span_id
    # The root's journaled turn had done its spawn: the spawn is made again before the turn
    # goes on, with no tool call, so a stand-in spawn_agent span under the resumed root holds
    # the resumed child, which links to its paused start.
    _, again = sorted(telemetry.named("execute_tool spawn_agent"), key=lambda s: s.start_time or 0)
    assert attrs(again)["io_harness.resumed"] is True
    assert parent_of(again) == resumed["t"].context.span_id
    assert parent_of(resumed["t.1"]) == again.context.span_id
    assert within(resumed["t.1"], again) and within(again, resumed["t"])
    assert [link.context for link in resumed["t.1"].links] == [before["t.1"].context]
    assert {attrs(s)["io_harness.outcome"] for s in later} == {"success"}
    assert {s.context.trace_id for s in telemetry.finished()} == {before["t"].context.trace_id}
    store.close()


def test_left_unset_the_opt_in_follows_the_genai_instrumentations_switch(
    telemetry: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert telemetry.observer().capture_content is False
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "True")
    assert telemetry.observer().capture_content is True
    assert telemetry.observer(capture_content=False).capture_content is False
