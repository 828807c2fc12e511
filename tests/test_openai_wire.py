"""The Chat Completions providers against a real HTTP/SSE server on loopback, offline.

Every test drives the real :class:`OpenAI`, :class:`OpenRouter` or
:class:`OpenAICompatible` class, with the real SDK and HTTP client, against
:class:`loopback.LoopbackServer` answering in the exact wire format
(:mod:`wire_openai`).
"""

from __future__ import annotations

import asyncio
import json
import threading
import traceback
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import loopback
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    FileContains,
    Message,
    ProviderError,
    RunOutcome,
    Store,
    TaskContract,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
    Usage,
    run,
)
from io_harness.messages import StreamDelta
from io_harness.providers import PRESETS
from io_harness.providers._base import StreamingProvider
from io_harness.providers._openai import OpenAI, OpenAICompatible, OpenRouter
from loopback import Reply, sse
from wire_openai import chat_chunk, chat_stream, error_reply, usage

KEY = "sk-test-0123456789abcdefSECRET"


class LoopbackServer(loopback.LoopbackServer):
    """The loopback server, polling for shutdown every 10 ms instead of every 0.5 s."""

    def __enter__(self) -> LoopbackServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )
        super().__enter__()
        return self


WRITE_TOOL = ToolSpec(
    name="write_file",
    description="Write the file.",
    parameters={"type": "object", "properties": {"content": {"type": "string"}}},
)


def ask(
    *messages: Message, tools: Sequence[ToolSpec] = (), temperature: float | None = None
) -> CompletionRequest:
    return CompletionRequest(
        model="gpt-test",
        system="You are terse.",
        messages=messages or (Message.user("hi"),),
        tools=tuple(tools),
        max_tokens=256,
        temperature=temperature,
    )


def openai_for(server: LoopbackServer, **kwargs: Any) -> OpenAI:
    return OpenAI("gpt-test", api_key=KEY, base_url=f"{server.url}/v1", **kwargs)


async def answer(provider: OpenAI, request: CompletionRequest | None = None) -> CompletionResponse:
    try:
        return await provider.complete(request or ask())
    finally:
        await provider.aclose()


async def streamed(
    provider: OpenAI, request: CompletionRequest | None = None
) -> tuple[list[StreamDelta], CompletionResponse]:
    items: list[StreamDelta | CompletionResponse] = []
    try:
        async for item in provider.stream(request or ask()):
            items.append(item)
    finally:
        await provider.aclose()
    *deltas, final = items
    assert isinstance(final, CompletionResponse)
    assert all(isinstance(d, StreamDelta) for d in deltas)
    return deltas, final  # type: ignore[return-value]


async def failure(script: Sequence[Reply], **kwargs: Any) -> ProviderError:
    with LoopbackServer(script) as server, pytest.raises(ProviderError) as caught:
        await answer(openai_for(server, **kwargs))
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)
    assert KEY not in "".join(traceback.format_exception(caught.value))
    return caught.value


def joined(deltas: Sequence[StreamDelta], kind: str) -> str:
    return "".join(d.text for d in deltas if d.kind == kind)


# -- answers ------------------------------------------------------------------


async def test_plain_text_streams_and_its_deltas_join_to_the_final_text() -> None:
    text = "Hello there, this arrives in many small pieces."
    reply = chat_stream(text, usage=usage(12, 9), model="gpt-test-2025", split=2)
    with LoopbackServer([reply]) as server:
        deltas, final = await streamed(openai_for(server))

    assert final.text == text
    assert joined(deltas, "text") == text
    assert len(deltas) == len(text) // 2 + 1
    assert final.content == (TextBlock(text=text),)
    assert final.finish_reason == "stop"
    assert final.model == "gpt-test-2025"
    assert final.usage == Usage(input_tokens=12, output_tokens=9)


async def test_a_tool_call_split_across_many_deltas_is_assembled() -> None:
    arguments = json.dumps({"content": "hello, world\n", "mode": {"append": False}})
    reply = chat_stream(tool_calls=[("call_abc", "write_file", arguments)], split=1)
    with LoopbackServer([reply]) as server:
        deltas, final = await streamed(openai_for(server), ask(tools=[WRITE_TOOL]))

    assert final.tool_calls == (
        ToolCall(
            id="call_abc",
            name="write_file",
            arguments={"content": "hello, world\n", "mode": {"append": False}},
        ),
    )
    assert final.finish_reason == "tool_use"
    calls = [d for d in deltas if d.kind == "tool_call"]
    assert (calls[0].call_id, calls[0].name, calls[0].index) == ("call_abc", "write_file", 0)
    assert all(d.call_id is None and d.name is None for d in calls[1:])
    assert "".join(d.text for d in calls) == arguments
    assert len(calls) == len(arguments) + 1


async def test_parallel_tool_calls_are_kept_apart_even_when_interleaved() -> None:
    reply = chat_stream(
        "Reading both.",
        tool_calls=[
            ("call_1", "read_file", '{"path": "a.py"}'),
            ("call_2", "read_file", '{"path": "b/c.py"}'),
            ("call_3", "list_dir", ""),
        ],
        interleave=True,
        split=2,
    )
    with LoopbackServer([reply]) as server:
        deltas, final = await streamed(openai_for(server))

    assert [(c.id, c.name, c.arguments) for c in final.tool_calls] == [
        ("call_1", "read_file", {"path": "a.py"}),
        ("call_2", "read_file", {"path": "b/c.py"}),
        ("call_3", "list_dir", {}),
    ]
    assert final.text == "Reading both."
    for index in range(2):
        fragments = [d.text for d in deltas if d.kind == "tool_call" and d.index == index]
        assert json.loads("".join(fragments)) == final.tool_calls[index].arguments


async def test_calls_without_ids_get_ids_from_the_turn_and_their_place() -> None:
    reply = chat_stream("Two.", tool_calls=[(None, "list_dir", "{}"), (None, "find", "{}")])
    request = ask(Message.user("a"), Message(role="assistant", content=(TextBlock(text="b"),)))
    with LoopbackServer([reply]) as server:
        final = await answer(openai_for(server), request)

    # The ScriptedProvider scheme: call_<messages in the request>_<1-based place in content>.
    assert [c.id for c in final.tool_calls] == ["call_2_2", "call_2_3"]


async def test_usage_counts_cached_reasoning_and_cache_write_tokens() -> None:
    wire_usage = usage(1200, 300, cached=1024, reasoning=256, cache_write=64)
    with LoopbackServer([chat_stream("ok", usage=wire_usage)]) as server:
        final = await answer(openai_for(server))

    assert final.usage == Usage(
        input_tokens=1200,
        output_tokens=300,
        cache_read_tokens=1024,
        cache_write_tokens=64,
        reasoning_tokens=256,
    )


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_deltas_become_a_thinking_block_first(field: str) -> None:
    reply = chat_stream(
        "The answer is 4.",
        thinking="2 + 2: add the units.",
        thinking_field=field,
        tool_calls=[("call_t", "list_dir", "{}")],
    )
    with LoopbackServer([reply]) as server:
        deltas, final = await streamed(openai_for(server))

    assert final.content[0] == ThinkingBlock(text="2 + 2: add the units.")
    assert final.content[1] == TextBlock(text="The answer is 4.")
    assert isinstance(final.content[2], ToolCall)
    assert joined(deltas, "thinking") == "2 + 2: add the units."
    assert joined(deltas, "text") == final.text == "The answer is 4."


# -- the request on the wire ----------------------------------------------------


def conversation() -> tuple[Message, ...]:
    return (
        Message.user("Fix it."),
        Message(
            role="assistant",
            content=(
                ThinkingBlock(text="private reasoning", signature="sig"),
                TextBlock(text="Looking."),
                ToolCall(id="call_a", name="read_file", arguments={"path": "x.py"}),
                ToolCall(id="call_b", name="write_file", arguments='{"broken": '),
            ),
        ),
        Message(
            role="tool",
            content=(
                ToolResult(tool_use_id="call_a", content="1\tprint(1)"),
                ToolResult(tool_use_id="call_b", content="not a JSON object", is_error=True),
            ),
        ),
        Message(role="assistant", content=(ToolCall(id="call_c", name="list_dir"),)),
        Message(role="tool", content=(ToolResult(tool_use_id="call_c", content="x.py"),)),
    )


async def test_the_request_has_the_chat_completions_shape() -> None:
    with LoopbackServer([chat_stream("ok")]) as server:
        await answer(openai_for(server), ask(*conversation(), tools=[WRITE_TOOL], temperature=0.2))
    sent = server.requests[0]

    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    body = sent.json
    assert body["model"] == "gpt-test"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 256
    assert "max_tokens" not in body
    assert body["temperature"] == 0.2
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "write_file",
                "description": "Write the file.",
                "parameters": WRITE_TOOL.parameters,
            },
        }
    ]
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Fix it."},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "x.py"}'},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": '{"broken": '},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "1\tprint(1)"},
        {"role": "tool", "tool_call_id": "call_b", "content": "error: not a JSON object"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_c",
                    "type": "function",
                    "function": {"name": "list_dir", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": "x.py"},
    ]


async def test_no_tools_and_no_temperature_leave_those_fields_out() -> None:
    with LoopbackServer([chat_stream("ok")]) as server:
        await answer(openai_for(server))
    body = server.requests[0].json

    assert "tools" not in body
    assert "temperature" not in body


async def test_openrouter_sends_max_tokens_and_its_attribution_headers() -> None:
    with LoopbackServer([chat_stream("ok"), chat_stream("ok")]) as server:
        url = f"{server.url}/api/v1"
        await answer(OpenRouter("vendor/model", api_key=KEY, base_url=url))
        await answer(
            OpenRouter(
                "vendor/model", api_key=KEY, base_url=url, app_url="https://x.test", app_name="X"
            )
        )
    first, second = server.requests

    assert first.path == "/api/v1/chat/completions"
    assert first.json["max_tokens"] == 256
    assert "max_completion_tokens" not in first.json
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.headers["http-referer"] == "https://github.com/io-harness/io-harness"
    assert first.headers["x-title"] == "io-harness"
    assert (second.headers["http-referer"], second.headers["x-title"]) == ("https://x.test", "X")


async def test_a_compatible_server_gets_max_tokens_and_a_placeholder_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    with LoopbackServer([chat_stream("ok")]) as server:
        provider = OpenAICompatible("llama3", base_url=f"{server.url}/v1")
        final = await answer(provider)
    body = server.requests[0].json

    assert final.text == "ok"
    assert body["max_tokens"] == 256
    assert "max_completion_tokens" not in body
    assert server.requests[0].headers["authorization"] == "Bearer not-needed"
    assert "http-referer" not in server.requests[0].headers


# -- finish reasons -----------------------------------------------------------------


async def test_length_in_the_middle_of_a_tool_call_keeps_the_raw_arguments() -> None:
    reply = chat_stream(tool_calls=[("call_x", "write_file", '{"content": "hel')], finish="length")
    with LoopbackServer([reply]) as server:
        final = await answer(openai_for(server))

    assert final.finish_reason == "length"
    assert final.tool_calls == (
        ToolCall(id="call_x", name="write_file", arguments='{"content": "hel'),
    )


async def test_arguments_that_are_json_but_not_an_object_stay_raw() -> None:
    reply = chat_stream(tool_calls=[("call_y", "find", '["a", "b"]')])
    with LoopbackServer([reply]) as server:
        final = await answer(openai_for(server))

    assert final.tool_calls[0].arguments == '["a", "b"]'


@pytest.mark.parametrize(
    ("wire", "canonical"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content_filter")],
)
async def test_finish_reasons_are_normalised(wire: str, canonical: str) -> None:
    with LoopbackServer([chat_stream("partial", finish=wire)]) as server:
        final = await answer(openai_for(server))

    assert final.finish_reason == canonical


async def test_a_refusal_becomes_the_text_with_finish_refusal() -> None:
    reply = chat_stream(refusal="I can't help with that.", finish="stop")
    with LoopbackServer([reply]) as server:
        deltas, final = await streamed(openai_for(server))

    assert final.text == "I can't help with that."
    assert joined(deltas, "text") == final.text
    assert final.finish_reason == "refusal"


async def test_a_server_that_says_stop_after_calling_tools_still_means_tool_use() -> None:
    reply = chat_stream(tool_calls=[("call_o", "list_dir", "{}")], finish="stop")
    with LoopbackServer([reply]) as server:
        final = await answer(openai_for(server))

    assert final.finish_reason == "tool_use"


# -- servers without streaming usage ------------------------------------------------------


async def test_llamacpp_timings_stand_in_for_missing_usage() -> None:
    reply = chat_stream("ok", timings={"prompt_n": 40, "predicted_n": 7, "cache_n": 100})
    with LoopbackServer([reply]) as server:
        final = await answer(openai_for(server))

    assert final.usage == Usage(input_tokens=140, output_tokens=7, cache_read_tokens=100)


async def test_no_usage_at_all_is_zeros_and_the_requested_model_stands() -> None:
    reply = chat_stream("ok", model="")
    with LoopbackServer([reply]) as server:
        final = await answer(openai_for(server))

    assert final.usage == Usage()
    assert final.model == "gpt-test"


# -- failures --------------------------------------------------------------------------


async def test_429_is_rate_limited_with_the_wait_it_asks_for() -> None:
    error = await failure([error_reply(429, "Rate limit reached", headers={"Retry-After": "7"})])

    assert (error.kind, error.status, error.retry_after) == ("rate_limited", 429, 7.0)
    assert error.transient


async def test_500_is_a_server_error() -> None:
    error = await failure([error_reply(500, "The server had an error", type="server_error")])

    assert (error.kind, error.status) == ("server", 500)


async def test_401_is_auth_and_the_echoed_key_is_scrubbed() -> None:
    message = f"Incorrect API key provided: {KEY}. You can find your API key at ..."
    error = await failure([error_reply(401, message, "invalid_api_key")])

    assert (error.kind, error.status) == ("auth", 401)
    assert not error.transient
    assert "[redacted]" in error.message


async def test_an_error_event_mid_stream_is_typed_and_scrubbed() -> None:
    events = [
        sse(chat_chunk({"content": "par"})),
        sse({"error": {"message": f"upstream failed for key {KEY}", "code": 502}}),
    ]
    error = await failure([Reply(events=events)])

    assert error.kind == "server"
    assert "[redacted]" in error.message


async def test_openai_context_length_exceeded_is_context_overflow() -> None:
    message = "This model's maximum context length is 128000 tokens. However, you requested 130000."
    error = await failure([error_reply(400, message, "context_length_exceeded")])

    assert (error.kind, error.status) == ("context_overflow", 400)


@pytest.mark.parametrize(
    "body",
    [
        # vLLM: a top-level error object
        {
            "object": "error",
            "message": "This model's maximum context length is 4096 tokens. However, you "
            "requested 5120 tokens in the messages.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        },
        # Ollama's OpenAI-compatible endpoint
        {"error": {"message": "prompt exceeds the context length (8192)", "type": "api_error"}},
    ],
)
async def test_compatible_server_context_messages_are_context_overflow(
    body: dict[str, Any],
) -> None:
    error = await failure([Reply(status=400, body=body)])

    assert error.kind == "context_overflow"


async def test_a_stream_cut_mid_event_is_bad_response() -> None:
    error = await failure([chat_stream("a long answer that never ends", split=2, cut_after=4)])

    assert error.kind == "bad_response"
    assert error.transient


async def test_a_stream_that_ends_without_a_finish_reason_is_bad_response() -> None:
    error = await failure([chat_stream("cut short", finish=None)])

    assert error.kind == "bad_response"
    assert "finish_reason" in error.message


@pytest.mark.parametrize(
    "reply",
    [
        Reply(
            body="<html><body>502 Bad Gateway</body></html>", headers={"Content-Type": "text/html"}
        ),
        Reply(body={"id": "chatcmpl-1", "object": "chat.completion", "choices": []}),
        Reply(body="data: {not json\n\n", headers={"Content-Type": "text/event-stream"}),
        Reply(events=[]),
    ],
    ids=["html", "non-streaming-json", "broken-event", "empty-stream"],
)
async def test_a_200_that_is_not_a_chunk_stream_is_bad_response(reply: Reply) -> None:
    error = await failure([reply])

    assert error.kind == "bad_response"


async def test_a_server_that_does_not_answer_in_time_is_a_timeout() -> None:
    error = await failure([chat_stream("late", delay=5.0)], timeout=0.5)

    assert error.kind == "timeout"
    assert error.transient


async def test_a_stream_that_stalls_between_events_is_a_timeout() -> None:
    error = await failure([chat_stream("stalls", event_delay=5.0)], timeout=0.5)

    assert error.kind == "timeout"


async def test_an_unreachable_server_is_a_network_error() -> None:
    with LoopbackServer([]) as server:
        url = f"{server.url}/v1"
    with pytest.raises(ProviderError) as caught:
        await answer(OpenAI("gpt-test", api_key=KEY, base_url=url))

    assert caught.value.kind == "network"
    assert KEY not in str(caught.value)


# -- configuration -------------------------------------------------------------------


def clear_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for vendor in ("OPENAI", "OPENROUTER", "OPENAI_COMPATIBLE"):
        for part in ("API_KEY", "MODEL", "BASE_URL"):
            monkeypatch.delenv(f"{vendor}_{part}", raising=False)


def test_a_missing_key_or_model_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clear_env(monkeypatch)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAI("gpt-test")
    with pytest.raises(ConfigError, match="OPENROUTER_API_KEY"):
        OpenRouter("vendor/model")
    with pytest.raises(ConfigError, match="OPENAI_MODEL"):
        OpenAI(api_key=KEY)
    with pytest.raises(ConfigError, match="OPENROUTER_MODEL"):
        OpenRouter(api_key=KEY)
    with pytest.raises(ConfigError, match="OPENAI_COMPATIBLE_BASE_URL"):
        OpenAICompatible("llama3")
    with pytest.raises(ConfigError, match="OPENAI_COMPATIBLE_MODEL"):
        OpenAICompatible(base_url="http://localhost:8000/v1")
    with pytest.raises(ConfigError, match="http"):
        OpenAI("gpt-test", api_key=KEY, base_url="localhost:8000")


def test_the_environment_fills_what_is_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_env(monkeypatch)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_MODEL", "gpt-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", "http://gpu-box:8000/v1")
    monkeypatch.setenv("OPENAI_COMPATIBLE_MODEL", "qwen")

    provider = OpenAI.from_env()
    assert (provider.name, provider.model, provider.endpoints()) == (
        "openai",
        "gpt-env",
        ("127.0.0.1:9",),
    )
    assert OpenAI.from_env(model="gpt-kwarg").model == "gpt-kwarg"
    compatible = OpenAICompatible.from_env()
    assert (compatible.name, compatible.model, compatible.endpoints()) == (
        "compatible",
        "qwen",
        ("gpu-box:8000",),
    )
    assert KEY not in repr(provider)


def test_default_endpoints_come_from_the_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_env(monkeypatch)

    assert OpenAI("m", api_key=KEY).endpoints() == ("api.openai.com:443",)
    assert OpenRouter("m", api_key=KEY).endpoints() == ("openrouter.ai:443",)
    assert OpenAICompatible("m", base_url="http://box/v1").endpoints() == ("box:80",)
    assert OpenAICompatible("m", base_url="http://[::1]:8080/v1").endpoints() == ("[::1]:8080",)


def test_presets_name_the_provider_and_point_at_the_local_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clear_env(monkeypatch)
    expected = {
        "ollama": "localhost:11434",
        "vllm": "localhost:8000",
        "llamacpp": "localhost:8080",
        "lmstudio": "localhost:1234",
    }
    for name, host in expected.items():
        provider = OpenAICompatible.preset(name, model="m")
        assert (provider.name, provider.endpoints()) == (name, (host,))
        assert provider.base_url == PRESETS[name]
    moved = OpenAICompatible.preset("ollama", model="m", base_url="http://gpu:11434/v1")
    assert (moved.name, moved.endpoints()) == ("ollama", ("gpu:11434",))
    with pytest.raises(ConfigError, match="ollama, vllm, llamacpp, lmstudio"):
        OpenAICompatible.preset("tgi", model="m")


def test_one_provider_object_works_across_two_event_loops() -> None:
    with LoopbackServer([chat_stream("first"), chat_stream("second")]) as server:
        provider = openai_for(server)
        provider_is_streaming = isinstance(provider, StreamingProvider)
        first = asyncio.run(provider.complete(ask()))
        second = asyncio.run(answer(provider))

    assert provider_is_streaming
    assert (first.text, second.text) == ("first", "second")


async def test_consecutive_calls_in_one_loop_share_one_client() -> None:
    with LoopbackServer([chat_stream("one"), chat_stream("two")]) as server:
        async with openai_for(server) as provider:
            first = (await provider.complete(ask())).text
            client = provider._clients.current
            second = (await provider.complete(ask())).text
            assert provider._clients.current is client is not None

    assert (first, second) == ("one", "two")


async def test_stopping_early_closes_the_stream() -> None:
    with LoopbackServer([chat_stream("a" * 60, split=1)]) as server:
        async with openai_for(server) as provider:
            stream: AsyncIterator[object] = provider.stream(ask())
            first = await anext(stream)
            await stream.aclose()  # type: ignore[attr-defined]

    assert first == StreamDelta(kind="text", text="a")


# -- through the public loop ----------------------------------------------------------


async def test_a_run_writes_a_file_through_a_streamed_tool_call(tmp_path: Path) -> None:
    target = tmp_path / "greeting.txt"
    contract = TaskContract.file("write a greeting", target, FileContains("hello"))
    arguments = json.dumps({"content": "hello, world\n"})
    script = [
        chat_stream("Writing it.", tool_calls=[("call_w", "write_file", arguments)], split=2),
        chat_stream("Done."),
    ]
    with LoopbackServer(script) as server:
        async with openai_for(server) as provider:
            result = await run(contract, provider)

    assert result.outcome is RunOutcome.SUCCESS
    assert target.read_text() == "hello, world\n"
    tools = [t["function"]["name"] for t in server.requests[0].json["tools"]]
    assert tools == ["read_file", "write_file"]


async def test_a_run_retries_a_429_and_records_both_attempts(tmp_path: Path, store: Store) -> None:
    target = tmp_path / "greeting.txt"
    contract = TaskContract.file("write a greeting", target, FileContains("hello"))
    arguments = json.dumps({"content": "hello\n"})
    script = [
        error_reply(429, "Rate limit reached", headers={"retry-after-ms": "50"}),
        chat_stream(tool_calls=[("call_w", "write_file", arguments)], usage=usage(30, 5)),
    ]
    with LoopbackServer(script) as server:
        async with openai_for(server) as provider:
            result = await run(contract, provider, store=store)

    assert result.outcome is RunOutcome.SUCCESS
    assert len(server.requests) == 2
    attempts = store.trace(result.run_id).provider_calls
    assert [(a.attempt, a.error_kind) for a in attempts] == [(1, "rate_limited"), (2, None)]


async def test_a_run_ends_provider_failed_after_one_401(tmp_path: Path, store: Store) -> None:
    contract = TaskContract.file("x", tmp_path / "a.txt", FileContains("x"))
    script = [error_reply(401, f"Incorrect API key provided: {KEY}"), chat_stream("unused")]
    with LoopbackServer(script) as server:
        async with openai_for(server) as provider:
            result = await run(contract, provider, store=store)

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "auth"
    assert len(server.requests) == 1
    assert KEY not in json.dumps([dict(a) for a in store.trace(result.run_id).provider_calls])
