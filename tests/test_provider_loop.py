"""Real providers in the loop: parity across vendors, fallback, streaming, record → replay.

The parity and determinism tests run the bundled demo (a project whose tests
fail until two bugs are fixed; the criterion is a real pytest run) with the
model's turns spoken in each vendor's wire format by a loopback server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from io_harness import (
    Anthropic,
    Budget,
    CompletionRequest,
    CompletionResponse,
    Fallback,
    FileContains,
    Message,
    OpenAI,
    OpenAICompatible,
    OpenRouter,
    Provider,
    ProviderError,
    ProviderErrorKind,
    Record,
    Replay,
    RunOutcome,
    Store,
    TaskContract,
    TokenStreamed,
    ToolCall,
    Usage,
    run,
)
from io_harness._demo import CASSETTE, prepare
from io_harness.testing import ScriptedProvider, call, reply
from loopback import LoopbackServer, Reply
from wire_anthropic import messages_stream
from wire_openai import chat_stream, usage

KEY = "sk-test-parity-0123456789"


def demo_turns() -> list[CompletionResponse]:
    """The model's answers in the demo recording, in order."""
    lines = CASSETTE.read_text().splitlines()[1:]
    return [
        CompletionResponse.model_validate(entry["response"])
        for entry in map(json.loads, lines)
        if entry.get("response")
    ]


def spoken(vendor: str, answer: CompletionResponse, model: str) -> Reply:
    """``answer`` as ``vendor``'s server would stream it."""
    calls = [(c.id, c.name, json.dumps(c.arguments)) for c in answer.tool_calls]
    tokens = answer.usage
    if vendor == "anthropic":
        return messages_stream(
            answer.text,
            tool_calls=calls,
            usage={"input_tokens": tokens.input_tokens, "output_tokens": tokens.output_tokens},
            stop_reason="tool_use" if calls else "end_turn",
            model=model,
        )
    return chat_stream(
        answer.text or None,
        tool_calls=calls,
        usage=usage(tokens.input_tokens, tokens.output_tokens),
        model=model,
    )


def provider_for(vendor: str, server: LoopbackServer) -> Provider:
    if vendor == "anthropic":
        return Anthropic("claude-test-1", api_key=KEY, base_url=server.url)
    base_url = f"{server.url}/v1"
    if vendor == "openai":
        return OpenAI("gpt-test", api_key=KEY, base_url=base_url)
    if vendor == "openrouter":
        return OpenRouter("vendor/model-test", api_key=KEY, base_url=base_url)
    return OpenAICompatible.preset("ollama", model="qwen-test", base_url=base_url)


@pytest.fixture
def python_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's criterion runs ``python``: make it this interpreter (it has pytest)."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def tool_sequence(store: Store, run_id: str) -> list[tuple[str, str]]:
    return [(c.name, c.arguments) for c in store.trace(run_id).tool_calls]


@pytest.mark.usefixtures("python_on_path")
async def test_one_contract_reaches_verified_success_through_every_vendor(tmp_path: Path) -> None:
    turns = demo_turns()
    sequences = {}
    for vendor in ("openai", "anthropic", "openrouter", "ollama"):
        folder = tmp_path / vendor
        contract = TaskContract.from_toml(prepare(folder))
        served = f"{vendor}-served-1"
        with LoopbackServer([spoken(vendor, t, served) for t in turns]) as server:
            provider = provider_for(vendor, server)
            with Store.open(tmp_path / f"{vendor}.db") as store:
                result = await run(contract, provider, store=store)
                trace = store.trace(result.run_id)
                sequences[vendor] = tool_sequence(store, result.run_id)
            await provider.aclose()  # type: ignore[attr-defined]

        assert result.outcome is RunOutcome.SUCCESS, vendor
        assert result.verification is not None and result.verification.passed
        assert trace.run.provider == provider.name == vendor
        assert {c.provider for c in trace.provider_calls} == {vendor}
        assert {c.served_model for c in trace.provider_calls} == {served}
        assert all(c.time_to_first_token is not None for c in trace.provider_calls)
        assert result.usage == sum((t.usage for t in turns), Usage())
        assert len(server.requests) == len(turns)
        fixed = (folder / "project" / "textstats.py").read_text()
        assert fixed == (tmp_path / "openai" / "project" / "textstats.py").read_text()
    assert len({json.dumps(s) for s in sequences.values()}) == 1


def primary_down(kind: ProviderErrorKind = "server") -> ScriptedProvider:
    return ScriptedProvider(
        lambda request: (_ for _ in ()).throw(ProviderError(kind, f"{kind} trouble")),
        name="primary",
        model="model-a",
    )


async def test_fallback_asks_the_next_provider_after_the_first_used_its_retries(
    tmp_path: Path, store: Store
) -> None:
    target = tmp_path / "out.txt"
    contract = TaskContract.file(
        "write ok", target, FileContains("ok"), budget=Budget(max_retries=1)
    )
    primary = primary_down("server")
    secondary = ScriptedProvider(
        [reply(calls=[call("write_file", content="ok\n")])], name="secondary", model="model-b"
    )

    result = await run(contract, Fallback(primary, secondary), store=store)

    assert result.outcome is RunOutcome.SUCCESS
    attempts = store.trace(result.run_id).provider_calls
    assert [(a.attempt, a.provider, a.model, a.error_kind) for a in attempts] == [
        (1, "primary", "model-a", "server"),
        (2, "primary", "model-a", "server"),
        (3, "secondary", "model-b", None),
    ]
    assert secondary.requests[0].model == "model-b"  # each member is asked for its own model
    steps = [e for e in store.trace(result.run_id).events if e.kind == "step_finished"]
    assert steps[0].data["provider"] == "secondary"


async def test_an_auth_failure_does_not_fall_back(tmp_path: Path) -> None:
    contract = TaskContract.file("x", tmp_path / "x.txt", FileContains("x"))
    secondary = ScriptedProvider([reply("never asked")], name="secondary")

    result = await run(contract, Fallback(primary_down("auth"), secondary))

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "auth"
    assert secondary.requests == []


async def test_when_every_member_fails_the_last_error_ends_the_run(tmp_path: Path) -> None:
    contract = TaskContract.file(
        "x", tmp_path / "x.txt", FileContains("x"), budget=Budget(max_retries=0)
    )
    last = ScriptedProvider([ProviderError("context_overflow", "too long")], name="last")

    result = await run(contract, Fallback(primary_down("server"), last))

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error == ProviderError("context_overflow", "too long")


async def test_fallback_outside_the_loop_tries_members_in_order() -> None:
    secondary = ScriptedProvider([reply("from b")], name="b", model="model-b")
    fallback = Fallback(primary_down("network"), secondary)

    answer = await fallback.complete(
        CompletionRequest(model="model-a", system="", messages=(Message.user("hi"),))
    )

    assert answer.text == "from b"
    assert secondary.requests[0].model == "model-b"
    assert fallback.endpoints() == ()


async def test_streamed_tokens_reach_the_observer_live_and_are_not_stored(
    tmp_path: Path, store: Store
) -> None:
    target = tmp_path / "out.txt"
    contract = TaskContract.file("say hi", target, FileContains("hi"))
    target.write_text("hi\n")  # already true: the first turn that ends is verified
    seen: list[Any] = []
    text = "Looks done already; nothing to change here."
    with LoopbackServer([chat_stream(text, split=4)]) as server:
        provider = OpenAI("gpt-test", api_key=KEY, base_url=f"{server.url}/v1")
        result = await run(contract, provider, store=store, observer=seen.append)
        await provider.aclose()

    tokens = [e for e in seen if isinstance(e, TokenStreamed)]
    assert len(tokens) > 5  # split into many deltas
    assert "".join(e.delta.text for e in tokens if e.delta.kind == "text") == text
    assert {(e.provider, e.attempt, e.step) for e in tokens} == {("openai", 1, 1)}
    trace = store.trace(result.run_id)
    assert trace.messages[-1].text == text
    assert "token" not in {e.kind for e in trace.events}
    assert trace.provider_calls[0].time_to_first_token is not None


async def test_a_tool_call_cut_off_by_the_token_limit_is_an_observation(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    contract = TaskContract.file("write ok", target, FileContains("ok"), budget=Budget(max_steps=2))
    cut = CompletionResponse(
        content=(ToolCall(id="c1", name="write_file", arguments='{"content": "o'),),
        finish_reason="length",
    )
    provider = ScriptedProvider([cut, reply(calls=[call("write_file", content="ok\n")])])

    result = await run(contract, provider)

    assert result.outcome is RunOutcome.SUCCESS
    observation = provider.requests[1].messages[-1].content[0]
    assert "cut off by the output token limit" in observation.content  # type: ignore[union-attr]
    assert observation.is_error  # type: ignore[union-attr]


def _without_durations(text: str) -> str:
    return re.sub(r"\b\d+\.\d+s\b", "<s>", text)


def comparable(store: Store, run_id: str) -> dict[str, Any]:
    """A run's trace without what differs between two runs of the same thing: times."""
    trace = store.trace(run_id)
    keep = {
        "tool_calls": ("step", "name", "arguments", "result", "is_error", "changed"),
        "verifications": ("step", "trigger", "passed", "criterion", "summary"),
        "provider_calls": ("step", "attempt", "error_kind", "finish_reason", "input_tokens"),
    }
    picked: dict[str, Any] = {
        table: [{k: getattr(row, k) for k in keys} for row in getattr(trace, table)]
        for table, keys in keep.items()
    }
    picked["messages"] = [m.model_dump() for m in trace.messages]
    picked["outcome"] = trace.run.outcome
    picked["steps"] = trace.run.steps
    loaded: dict[str, Any] = json.loads(_without_durations(json.dumps(picked)))
    return loaded


@pytest.mark.usefixtures("python_on_path")
async def test_a_recorded_live_run_replays_offline_to_the_same_trace(tmp_path: Path) -> None:
    turns = demo_turns()
    script = [
        Reply(
            status=429, body={"error": {"message": "slow down"}}, headers={"retry-after-ms": "10"}
        )
    ]
    script += [spoken("openai", t, "gpt-test-served") for t in turns]
    folder = tmp_path / "demo"
    cassette = tmp_path / "recorded.jsonl"

    contract = TaskContract.from_toml(prepare(folder))
    with LoopbackServer(script) as server, Store.open(tmp_path / "live.db") as live:
        provider = OpenAI("gpt-test", api_key=KEY, base_url=f"{server.url}/v1")
        recorded = await run(contract, Record(provider, cassette), store=live)
        await provider.aclose()
        live_trace = comparable(live, recorded.run_id)

    # The same project in the same place, fresh, and no server at all.
    shutil.rmtree(folder)
    contract = TaskContract.from_toml(prepare(folder))
    with Store.open(tmp_path / "replay.db") as offline:
        replayed = await run(contract, Replay(cassette), store=offline)
        replay_trace = comparable(offline, replayed.run_id)

    assert recorded.outcome is replayed.outcome is RunOutcome.SUCCESS
    assert replay_trace == live_trace
    assert live_trace["provider_calls"][0]["error_kind"] == "rate_limited"
    written = cassette.read_text()
    assert KEY not in written
    assert "authorization" not in written.lower()
