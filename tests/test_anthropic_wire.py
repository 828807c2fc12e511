"""The Anthropic provider against a real HTTP/SSE server speaking the Messages wire format.

Every test drives the real :class:`Anthropic` class (SDK, HTTP client, SSE
parsing) against :class:`loopback.LoopbackServer`; nothing is mocked. One
server serves the whole module (starting and stopping one costs half a
second); each test scripts its own replies on it through the ``wire`` fixture.
"""

from __future__ import annotations

import asyncio
import gc
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from io_harness import FileContains, RunOutcome, Store, TaskContract, run
from io_harness.errors import ConfigError, ProviderError
from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    Message,
    StreamDelta,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResult,
    ToolSpec,
)
from io_harness.providers._anthropic import Anthropic
from io_harness.providers._base import StreamingProvider
from loopback import CapturedRequest, LoopbackServer, Reply, sse
from wire_anthropic import (
    API_KEY,
    MODEL,
    error_event,
    error_reply,
    messages_stream,
    stream_events,
)

WRITE_TOOL = ToolSpec(
    name="write_file",
    description="Write the file.",
    parameters={
        "type": "object",
        "properties": {"content": {"type": "string"}},
        "required": ["content"],
    },
)


def make_request(
    *messages: Message,
    system: str = "You are terse.",
    tools: Sequence[ToolSpec] = (WRITE_TOOL,),
    max_tokens: int = 256,
    temperature: float | None = None,
) -> CompletionRequest:
    return CompletionRequest(
        model=MODEL,
        system=system,
        messages=messages or (Message.user("say hello"),),
        tools=tuple(tools),
        max_tokens=max_tokens,
        temperature=temperature,
    )


class Wire:
    """The module's loopback server, answering with the replies the current test scripted."""

    def __init__(self) -> None:
        self.server: LoopbackServer | None = None
        self._replies: deque[Reply] = deque()
        self._first = 0

    def reply_to(self, request: CapturedRequest) -> Reply:
        if not self._replies:
            return Reply(status=500, body={"error": {"message": "the test's script has ended"}})
        return self._replies.popleft()

    def script(self, replies: Sequence[Reply]) -> Wire:
        assert self.server is not None
        self._replies = deque(replies)
        self._first = len(self.server.requests)
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return self.server.url

    @property
    def requests(self) -> list[CapturedRequest]:
        """The requests made since the last :meth:`script`."""
        assert self.server is not None
        return self.server.requests[self._first :]


@pytest.fixture(scope="module")
def shared_wire() -> Iterator[Wire]:
    wire = Wire()
    with LoopbackServer(wire.reply_to) as server:
        wire.server = server
        yield wire


@pytest.fixture
def wire(shared_wire: Wire) -> Wire:
    return shared_wire.script(())


def make_provider(wire: Wire, **kwargs: Any) -> Anthropic:
    return Anthropic(MODEL, api_key=API_KEY, base_url=wire.url, **kwargs)


async def collect(
    provider: Anthropic, request: CompletionRequest
) -> tuple[list[StreamDelta], CompletionResponse]:
    deltas: list[StreamDelta] = []
    final: list[CompletionResponse] = []
    async for item in provider.stream(request):
        assert not final, "nothing may follow the response"
        if isinstance(item, CompletionResponse):
            final.append(item)
        else:
            deltas.append(item)
    assert len(final) == 1
    return deltas, final[0]


async def ask(
    wire: Wire,
    replies: Sequence[Reply],
    request: CompletionRequest | None = None,
    **kwargs: Any,
) -> tuple[list[StreamDelta], CompletionResponse, list[CapturedRequest]]:
    wire.script(replies)
    provider = make_provider(wire, **kwargs)
    try:
        deltas, response = await collect(provider, request or make_request())
    finally:
        await provider.aclose()
    return deltas, response, wire.requests


async def failure(
    wire: Wire, replies: Sequence[Reply], **kwargs: Any
) -> tuple[ProviderError, list[StreamDelta], list[CapturedRequest]]:
    wire.script(replies)
    deltas: list[StreamDelta] = []
    provider = make_provider(wire, **kwargs)
    try:
        with pytest.raises(ProviderError) as caught:
            async for item in provider.stream(make_request()):
                if isinstance(item, StreamDelta):
                    deltas.append(item)
    finally:
        await provider.aclose()
    error = caught.value
    assert API_KEY not in str(error) and API_KEY not in repr(error)
    return error, deltas, wire.requests


def text_of(deltas: Sequence[StreamDelta], kind: str) -> str:
    return "".join(d.text for d in deltas if d.kind == kind)


# --- answers ---------------------------------------------------------------------------


async def test_a_plain_text_answer_streams_in_deltas_that_join_to_its_text(wire: Wire) -> None:
    text = "Hello, world! This answer comes in many small pieces."
    deltas, response, requests = await ask(wire, [messages_stream(text, split=4)])

    assert response.text == text
    assert response.content == (TextBlock(text=text),)
    assert response.finish_reason == "stop"
    assert response.model == MODEL
    assert len(deltas) > 10
    assert all(d.kind == "text" for d in deltas)
    assert text_of(deltas, "text") == text
    assert requests[0].path == "/v1/messages"
    assert requests[0].json["stream"] is True


async def test_the_provider_is_a_streaming_provider_and_complete_gives_the_same_answer(
    wire: Wire,
) -> None:
    provider = make_provider(wire.script([messages_stream("one answer")]))
    try:
        assert isinstance(provider, StreamingProvider)
        response = await provider.complete(make_request())
    finally:
        await provider.aclose()
    assert response.text == "one answer"


async def test_a_tool_call_split_across_many_deltas_is_parsed_at_its_end(wire: Wire) -> None:
    arguments = '{"content": "hello, world\\n", "mode": "overwrite"}'
    deltas, response, _ = await ask(
        wire, [messages_stream(tool_calls=[("toolu_01", "write_file", arguments)], split=2)]
    )

    assert response.finish_reason == "tool_use"
    assert response.tool_calls == (
        ToolCall(
            id="toolu_01",
            name="write_file",
            arguments={"content": "hello, world\n", "mode": "overwrite"},
        ),
    )
    fragments = [d for d in deltas if d.kind == "tool_call"]
    assert len(fragments) > 20
    assert (fragments[0].call_id, fragments[0].name) == ("toolu_01", "write_file")
    assert all(f.call_id is None and f.name is None for f in fragments[1:])
    assert all(f.index == 0 for f in fragments)
    assert "".join(f.text for f in fragments) == arguments


async def test_parallel_tool_calls_keep_their_order_and_their_own_index(wire: Wire) -> None:
    calls = [
        ("toolu_a", "read_file", '{"path": "a.txt"}'),
        ("toolu_b", "grep", '{"pattern": "def add", "path": "pkg"}'),
        ("toolu_c", "list_dir", ""),
    ]
    deltas, response, _ = await ask(
        wire, [messages_stream("Looking.", thinking=[("plan", "sig-1")], tool_calls=calls, split=3)]
    )

    assert [(c.id, c.name) for c in response.tool_calls] == [(c[0], c[1]) for c in calls]
    assert response.tool_calls[0].arguments == {"path": "a.txt"}
    assert response.tool_calls[1].arguments == {"pattern": "def add", "path": "pkg"}
    assert response.tool_calls[2].arguments == {}  # no input JSON at all is no arguments
    for index, (call_id, name, arguments) in enumerate(calls):
        mine = [d for d in deltas if d.kind == "tool_call" and d.index == index]
        assert (mine[0].call_id, mine[0].name) == (call_id, name)
        assert "".join(d.text for d in mine) == arguments
    assert response.text == text_of(deltas, "text") == "Looking."


async def test_usage_counts_all_input_including_cache_reads_and_writes(wire: Wire) -> None:
    usage = {
        "input_tokens": 12,
        "cache_read_input_tokens": 3000,
        "cache_creation_input_tokens": 450,
        "output_tokens": 77,
    }
    _, response, _ = await ask(wire, [messages_stream("cached", usage=usage)])

    assert response.usage.input_tokens == 12 + 3000 + 450
    assert response.usage.cache_read_tokens == 3000
    assert response.usage.cache_write_tokens == 450
    assert response.usage.output_tokens == 77
    assert response.usage.total_tokens == 3462 + 77


async def test_the_served_model_comes_from_message_start(wire: Wire) -> None:
    _, response, _ = await ask(wire, [messages_stream("hi", model="claude-test-1-20990101")])

    assert response.model == "claude-test-1-20990101"


async def test_thinking_with_its_signature_is_carried_back_first_on_the_next_turn(
    wire: Wire,
) -> None:
    thought = "The file must say hello. I will write it."
    first = messages_stream(
        "Writing it.",
        thinking=[(thought, "sig-Zm9vYmFy")],
        tool_calls=[("toolu_1", "write_file", '{"content": "hello"}')],
        split=5,
    )
    provider = make_provider(wire.script([first, messages_stream("Done.")]))
    try:
        deltas, response = await collect(provider, make_request())
        assert response.content[0] == ThinkingBlock(text=thought, signature="sig-Zm9vYmFy")
        assert text_of(deltas, "thinking") == thought
        follow_up = make_request(
            Message.user("say hello"),
            Message(role="assistant", content=response.content),
            Message(
                role="tool",
                content=(ToolResult(tool_use_id="toolu_1", content="wrote 5 bytes"),),
            ),
            Message.user("the check passes now"),
        )
        await collect(provider, follow_up)
    finally:
        await provider.aclose()

    sent = wire.requests[1].json["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assistant = sent[1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": thought, "signature": "sig-Zm9vYmFy"}
    assert assistant[1:] == [
        {"type": "text", "text": "Writing it."},
        {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {"content": "hello"}},
    ]
    assert sent[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "wrote 5 bytes",
            "is_error": False,
        },
        {"type": "text", "text": "the check passes now"},
    ]


async def test_redacted_thinking_round_trips_as_its_opaque_data(wire: Wire) -> None:
    # Needs ThinkingBlock.redacted (messages.py).
    first = messages_stream("ok", redacted=["EmwKAhgBEgy3va3pzix/LafPsn4a"])
    provider = make_provider(wire.script([first, messages_stream("fine")]))
    try:
        _, response = await collect(provider, make_request())
        assert response.content[0] == ThinkingBlock(
            text="", signature="EmwKAhgBEgy3va3pzix/LafPsn4a", redacted=True
        )
        await collect(
            provider,
            make_request(
                Message.user("go"),
                Message(role="assistant", content=response.content),
                Message.user("again"),
            ),
        )
    finally:
        await provider.aclose()

    assistant = wire.requests[1].json["messages"][1]["content"]
    assert assistant == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "text", "text": "ok"},
    ]


async def test_unsigned_thinking_and_raw_string_arguments_are_made_acceptable(wire: Wire) -> None:
    history = make_request(
        Message.user("go"),
        Message(
            role="assistant",
            content=(
                ThinkingBlock(text="another vendor's reasoning"),
                TextBlock(text=""),
                ToolCall(id="call_9", name="write_file", arguments='{"content": "hel'),
            ),
        ),
        Message(
            role="tool",
            content=(ToolResult(tool_use_id="call_9", content="not JSON", is_error=True),),
        ),
    )
    _, _, requests = await ask(wire, [messages_stream("ok")], history)

    sent = requests[0].json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_9", "name": "write_file", "input": {}}],
    }
    assert sent[2]["content"][0]["is_error"] is True


async def test_blocks_deltas_and_events_the_harness_does_not_use_are_skipped(wire: Wire) -> None:
    def event(data: dict[str, Any]) -> str:
        return sse(data, event=data["type"])

    start, *_, message_delta, message_stop = stream_events("x", pings=False)
    server_tool = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    events = [
        start,
        event({"type": "content_block_start", "index": 0, "content_block": server_tool}),
        event(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": '{"query": "x"}'},
            }
        ),
        event({"type": "content_block_stop", "index": 0}),
        event({"type": "content_block_start", "index": 1, "content_block": {"type": "text"}}),
        event(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "citations_delta", "citation": {"type": "char_location"}},
            }
        ),
        event(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "text_delta", "text": "hi"},
            }
        ),
        event({"type": "content_block_stop", "index": 1}),
        event({"type": "some_future_event", "detail": 1}),
        message_delta,
        message_stop,
    ]
    deltas, response, _ = await ask(wire, [Reply(events=events)])

    assert response.content == (TextBlock(text="hi"),)
    assert [(d.kind, d.text) for d in deltas] == [("text", "hi")]


# --- the request on the wire ------------------------------------------------------------


async def test_the_request_carries_key_version_tools_and_a_cached_system_prompt(wire: Wire) -> None:
    _, _, requests = await ask(wire, [messages_stream("ok")], make_request(temperature=0.3))

    sent = requests[0]
    assert sent.method == "POST"
    assert sent.headers["x-api-key"] == API_KEY
    assert "authorization" not in sent.headers
    assert sent.headers["anthropic-version"]
    body = sent.json
    assert body["model"] == MODEL
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.3
    assert body["system"] == [
        {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"] == [
        {
            "name": "write_file",
            "description": "Write the file.",
            "input_schema": WRITE_TOOL.parameters,
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "say hello"}]}
    ]
    assert "thinking" not in body


async def test_without_system_caching_or_system_prompt_the_request_says_so(wire: Wire) -> None:
    _, _, uncached = await ask(wire, [messages_stream("ok")], cache_system=False)
    _, _, empty = await ask(wire, [messages_stream("ok")], make_request(system="", tools=()))

    assert uncached[0].json["system"] == [{"type": "text", "text": "You are terse."}]
    assert "system" not in empty[0].json
    assert "tools" not in empty[0].json


async def test_a_thinking_budget_turns_thinking_on_and_drops_the_temperature(wire: Wire) -> None:
    _, _, requests = await ask(
        wire,
        [messages_stream("ok", thinking=[("hmm", "sig")])],
        make_request(temperature=0.7, max_tokens=1000),
        thinking_budget=2048,
    )

    body = requests[0].json
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] == 3048
    assert "temperature" not in body


# --- stop reasons -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("pause_turn", "stop"),
        ("tool_use", "tool_use"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "refusal"),
    ],
)
async def test_stop_reasons_are_normalised(
    wire: Wire, stop_reason: str, finish_reason: str
) -> None:
    _, response, _ = await ask(wire, [messages_stream("text", stop_reason=stop_reason)])

    assert response.finish_reason == finish_reason


async def test_max_tokens_mid_tool_call_keeps_the_raw_arguments(wire: Wire) -> None:
    cut = '{"content": "hello, wor'
    _, response, _ = await ask(
        wire,
        [messages_stream(tool_calls=[("toolu_1", "write_file", cut)], stop_reason="max_tokens")],
    )

    assert response.finish_reason == "length"
    assert response.tool_calls == (ToolCall(id="toolu_1", name="write_file", arguments=cut),)


async def test_arguments_that_are_json_but_not_an_object_stay_raw(wire: Wire) -> None:
    _, response, _ = await ask(wire, [messages_stream(tool_calls=[("t", "write_file", "[1, 2]")])])

    assert response.tool_calls[0].arguments == "[1, 2]"


# --- failures ---------------------------------------------------------------------------


async def test_429_is_rate_limited_with_the_wait_the_server_asks_for(wire: Wire) -> None:
    error, _, _ = await failure(
        wire, [error_reply(429, "rate_limit_error", "Slow down", headers={"Retry-After": "7"})]
    )

    assert (error.kind, error.status, error.retry_after) == ("rate_limited", 429, 7.0)
    assert error.transient


@pytest.mark.parametrize(
    ("status", "error_type"), [(529, "overloaded_error"), (500, "api_error"), (503, "api_error")]
)
async def test_overloaded_and_server_errors_are_server(
    wire: Wire, status: int, error_type: str
) -> None:
    error, _, requests = await failure(wire, [error_reply(status, error_type, "try later")])

    assert (error.kind, error.status) == ("server", status)
    assert "try later" in error.message
    assert len(requests) == 1  # the SDK does not retry: the loop does


async def test_401_is_auth_and_not_transient(wire: Wire) -> None:
    error, _, _ = await failure(
        wire, [error_reply(401, "authentication_error", "invalid x-api-key")]
    )

    assert (error.kind, error.status, error.transient) == ("auth", 401, False)


async def test_a_prompt_too_long_400_is_context_overflow_and_other_400s_bad_request(
    wire: Wire,
) -> None:
    too_long = "prompt is too long: 210000 tokens > 200000 maximum"
    overflow, _, _ = await failure(wire, [error_reply(400, "invalid_request_error", too_long)])
    bad, _, _ = await failure(
        wire, [error_reply(400, "invalid_request_error", "tools.0: bad schema")]
    )

    assert (overflow.kind, overflow.status) == ("context_overflow", 400)
    assert (bad.kind, bad.status) == ("bad_request", 400)


@pytest.mark.parametrize(
    ("error_type", "message", "kind"),
    [
        ("overloaded_error", "Overloaded", "server"),
        ("api_error", "Internal server error", "server"),
        ("rate_limit_error", "Number of request tokens exceeded", "rate_limited"),
        ("authentication_error", "invalid key", "auth"),
        ("permission_error", "not allowed", "auth"),
        ("invalid_request_error", "prompt is too long: 1 tokens > 0 maximum", "context_overflow"),
        ("invalid_request_error", "messages.1: bad block", "bad_request"),
    ],
)
async def test_an_error_event_mid_stream_is_typed_by_its_error_type(
    wire: Wire, error_type: str, message: str, kind: str
) -> None:
    events = [*stream_events("Half an ans", finish=False), error_event(error_type, message)]
    error, deltas, _ = await failure(wire, [Reply(events=events)])

    assert error.kind == kind
    assert message in error.message
    assert text_of(deltas, "text") == "Half an ans"  # what came before the error was streamed


async def test_a_redirect_is_not_followed(wire: Wire) -> None:
    moved = Reply(status=307, body="", headers={"Location": "http://203.0.113.9/v1/messages"})
    error, _, requests = await failure(wire, [moved])

    assert (error.kind, error.status) == ("bad_request", 307)
    assert len(requests) == 1


async def test_a_stream_cut_mid_event_is_bad_response(wire: Wire) -> None:
    reply = messages_stream("a long answer that breaks off", cut_after=6)
    error, deltas, _ = await failure(wire, [reply])

    assert error.kind == "bad_response"
    assert error.transient
    assert deltas  # some text arrived before the break


async def test_a_stream_that_ends_without_message_stop_is_bad_response(wire: Wire) -> None:
    error, _, _ = await failure(wire, [Reply(events=stream_events("cut short", finish=False))])

    assert error.kind == "bad_response"
    assert "message_stop" in error.message


async def test_a_200_body_that_is_not_an_event_stream_is_bad_response(wire: Wire) -> None:
    html = Reply(
        body="<html><body>502 gateway</body></html>", headers={"Content-Type": "text/html"}
    )
    error, _, _ = await failure(wire, [html])
    as_json, _, _ = await failure(wire, [Reply(body={"id": "msg_1", "type": "message"})])

    assert error.kind == "bad_response"
    assert as_json.kind == "bad_response"


async def test_an_event_whose_data_is_not_json_is_bad_response(wire: Wire) -> None:
    events = [*stream_events("ok")[:2], "event: content_block_start\ndata: {not json\n\n"]
    error, _, _ = await failure(wire, [Reply(events=events)])

    assert error.kind == "bad_response"


async def test_events_out_of_order_are_bad_response(wire: Wire) -> None:
    delta = sse(
        {"type": "content_block_delta", "index": 4, "delta": {"type": "text_delta", "text": "x"}},
        event="content_block_delta",
    )
    error, _, _ = await failure(wire, [Reply(events=[*stream_events("ok")[:2], delta])])

    assert error.kind == "bad_response"
    assert "never started" in error.message


async def test_a_server_that_never_answers_times_out(wire: Wire) -> None:
    error, _, _ = await failure(wire, [Reply(delay=10)], timeout=0.5)

    assert error.kind == "timeout"


async def test_a_stream_that_stalls_mid_answer_times_out(wire: Wire) -> None:
    error, _, _ = await failure(wire, [messages_stream("slow", event_delay=10)], timeout=0.5)

    assert error.kind == "timeout"


async def test_the_api_key_never_appears_in_an_error_even_when_the_server_echoes_it(
    wire: Wire,
) -> None:
    echoed = f"invalid x-api-key: {API_KEY}"
    status, _, _ = await failure(wire, [error_reply(401, "authentication_error", echoed)])
    events = [*stream_events("x", finish=False), error_event("api_error", echoed)]
    mid_stream, _, _ = await failure(wire, [Reply(events=events)])

    for error in (status, mid_stream):
        assert API_KEY not in error.message
        assert "[redacted]" in error.message


async def test_no_part_of_the_key_survives_where_a_long_message_is_shortened(wire: Wire) -> None:
    for at in range(470, 510, 7):  # the key straddles the point where messages are cut
        echoed = "x" * at + API_KEY + " and more"
        status, _, _ = await failure(wire, [error_reply(401, "authentication_error", echoed)])
        events = [*stream_events("x", finish=False), error_event("api_error", echoed)]
        mid_stream, _, _ = await failure(wire, [Reply(events=events)])

        for error in (status, mid_stream):
            assert API_KEY[:12] not in error.message


# --- configuration ----------------------------------------------------------------------


def test_a_missing_key_or_model_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_MODEL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)

    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        Anthropic(MODEL)
    with pytest.raises(ConfigError, match="ANTHROPIC_MODEL"):
        Anthropic(api_key=API_KEY)


def test_the_environment_fills_what_is_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-from-env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:8080/")

    provider = Anthropic.from_env()
    explicit = Anthropic.from_env(model="claude-given", base_url="https://example.test")

    assert provider.model == "claude-from-env"
    assert provider.endpoints() == ("127.0.0.1:8080",)
    assert explicit.model == "claude-given"
    assert explicit.endpoints() == ("example.test:443",)
    assert API_KEY not in repr(provider)


def test_the_default_endpoint_is_the_anthropic_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)

    assert Anthropic(MODEL, api_key=API_KEY).endpoints() == ("api.anthropic.com:443",)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_url": "ftp://example.test"},
        {"base_url": "http://example.test:port"},
        {"timeout": 0},
        {"thinking_budget": 10},
    ],
)
def test_bad_options_are_config_errors(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        Anthropic(MODEL, api_key=API_KEY, **kwargs)


def test_one_provider_works_across_two_event_loops(wire: Wire) -> None:
    provider = make_provider(wire.script([messages_stream("first"), messages_stream("second")]))
    first = asyncio.run(provider.complete(make_request()))
    second = asyncio.run(provider.complete(make_request()))
    gc.collect()  # a connection left open by either loop would warn here (warnings are errors)

    assert (first.text, second.text) == ("first", "second")


async def test_after_aclose_the_next_call_opens_a_new_client(wire: Wire) -> None:
    provider = make_provider(wire.script([messages_stream("one"), messages_stream("two")]))
    first = await provider.complete(make_request())
    await provider.aclose()
    await provider.aclose()  # closing twice is harmless
    second = await provider.complete(make_request())
    await provider.aclose()

    assert (first.text, second.text) == ("one", "two")


# --- through the public loop -----------------------------------------------------------


async def test_a_run_with_anthropic_writes_the_file_and_traces_the_served_model(
    wire: Wire, tmp_path: Path, store: Store
) -> None:
    target = tmp_path / "greeting.txt"
    contract = TaskContract.file("write a greeting", target, FileContains("hello"))
    served = "claude-test-1-20990101"
    answer = messages_stream(
        "Writing the greeting.",
        tool_calls=[("toolu_1", "write_file", '{"content": "hello, world\\n"}')],
        model=served,
        usage={"input_tokens": 100, "output_tokens": 20},
    )
    provider = make_provider(wire.script([answer]))
    try:
        result = await run(contract, provider, store=store)
    finally:
        await provider.aclose()

    assert result.outcome is RunOutcome.SUCCESS
    assert target.read_text() == "hello, world\n"
    calls = store.trace(result.run_id).provider_calls
    assert [(c.provider, c.served_model, c.error_kind) for c in calls] == [
        ("anthropic", served, None)
    ]
    assert calls[0].model == provider.model  # asked for; served_model is who answered
    assert calls[0].time_to_first_token is not None
    assert wire.requests[0].json["tools"][0]["name"] == "read_file"


async def test_a_run_retries_a_500_and_stops_at_a_401(
    wire: Wire, tmp_path: Path, store: Store
) -> None:
    target = tmp_path / "greeting.txt"
    contract = TaskContract.file("write a greeting", target, FileContains("hello"))
    write = ("toolu_1", "write_file", '{"content": "hello"}')
    flaky = [
        error_reply(500, "api_error", "Internal server error", headers={"Retry-After": "0"}),
        messages_stream(tool_calls=[write]),
    ]
    provider = make_provider(wire.script(flaky))
    try:
        retried = await run(contract, provider, store=store)
    finally:
        await provider.aclose()

    assert retried.outcome is RunOutcome.SUCCESS
    calls = store.trace(retried.run_id).provider_calls
    assert [(c.attempt, c.error_kind, c.error_status) for c in calls] == [
        (1, "server", 500),
        (2, None, None),
    ]

    target.unlink()
    provider = make_provider(wire.script([error_reply(401, "authentication_error", "bad key")]))
    try:
        refused = await run(contract, provider, store=store)
    finally:
        await provider.aclose()

    assert refused.outcome is RunOutcome.PROVIDER_FAILED
    assert refused.error is not None and refused.error.kind == "auth"
    assert len(wire.requests) == 1
    assert len(store.trace(refused.run_id).provider_calls) == 1
