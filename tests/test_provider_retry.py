"""Transient provider failures are retried for a stated total; permanent ones are not (issue 25).

The runs go through the public API (``Harness(retry=RetryPolicy(...))``). Where a
vendor provider is exercised it is the real class, SDK and HTTP client against
:class:`loopback.LoopbackServer` speaking the vendor's wire format; a server that
is down is a port bound on 127.0.0.1 that does not listen, so connecting to it is
refused as connecting to a stopped server is. Nothing asserts a duration: what is
asserted is the trace (each attempt's row, each ``retrying`` event).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import wire_anthropic
import wire_openai
from io_harness import (
    Anthropic,
    Budget,
    CompletionRequest,
    ConfigError,
    Fallback,
    FileContains,
    Harness,
    Message,
    OpenAICompatible,
    ProviderError,
    Retrying,
    RetryPolicy,
    RunEvent,
    RunOutcome,
    RunResult,
    Store,
    TaskContract,
)
from io_harness.testing import ScriptedProvider, call, reply
from loopback import LoopbackServer, Reply, sse

WRITE = ("call_1", "write_file", '{"content": "hello"}')
"""The model's one call: write the greeting, which passes the criterion."""
FAST = RetryPolicy(total_seconds=30, base_seconds=0.05, cap_seconds=0.2)
"""Quick retries for the runs whose failures are scripted."""


class DownServer:
    """A loopback server whose port refuses connections until :meth:`restore` (a stopped
    server), then serves ``script`` on the same port."""

    def __init__(self, script: Sequence[Reply]) -> None:
        self.server = LoopbackServer(script)
        listening = self.server._server.socket
        port = listening.getsockname()[1]
        listening.close()
        self.held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.held.bind(("127.0.0.1", port))  # bound, not listening: a connect is refused
        self.url = f"http://127.0.0.1:{port}"
        self.restored = threading.Event()
        self._lock = threading.Lock()

    def restore(self) -> None:
        """The server is back: the port listens and the script is served (once)."""
        with self._lock:
            if self.restored.is_set():
                return
            self.held.listen()
            self.server._server.socket = self.held
            self.server.__enter__()
            self.restored.set()

    def close(self) -> None:
        with self._lock:
            if self.restored.is_set():
                self.server.__exit__(None, None, None)
            else:
                self.held.close()

    @property
    def requests(self) -> int:
        return len(self.server.requests)


@pytest.fixture
def down() -> Iterator[list[DownServer]]:
    """Down servers made by a test, closed after it."""
    made: list[DownServer] = []
    yield made
    for server in made:
        server.close()


def down_server(made: list[DownServer], script: Sequence[Reply] = ()) -> DownServer:
    made.append(DownServer(script))
    return made[-1]


def greeting(tmp_path: Path, **budget: Any) -> TaskContract:
    return TaskContract.file(
        "write a greeting",
        tmp_path / "greeting.txt",
        FileContains("hello"),
        budget=Budget(**budget),
    )


async def run_openai(
    url: str, contract: TaskContract, store: Store, retry: RetryPolicy, events: list[RunEvent]
) -> RunResult:
    provider = OpenAICompatible("gpt-test", base_url=f"{url}/v1")
    harness = Harness(provider, store=store, retry=retry, observer=events.append)
    try:
        return await harness.run(contract)
    finally:
        await provider.aclose()


def attempts(store: Store, result: RunResult) -> list[str | None]:
    """Each attempt's error kind, ``None`` for the one answered."""
    return [c.error_kind for c in store.trace(result.run_id).provider_calls]


def retrying_rows(store: Store, result: RunResult) -> list[dict[str, Any]]:
    return [e.data for e in store.trace(result.run_id).events if e.kind == "retrying"]


# -- the run: the model server goes away for a few seconds -----------------------------


async def test_a_run_retries_through_a_three_second_outage_and_succeeds(
    down: list[DownServer], tmp_path: Path, store: Store
) -> None:
    server = down_server(down, [wire_openai.chat_stream(tool_calls=[WRITE])])
    back = threading.Timer(3.0, server.restore)
    back.start()
    events: list[RunEvent] = []
    try:
        result = await run_openai(
            server.url, greeting(tmp_path), store, RetryPolicy(total_seconds=30), events
        )
    finally:
        back.cancel()

    assert result.outcome is RunOutcome.SUCCESS
    kinds = attempts(store, result)
    assert kinds[0] == "network" and kinds[-1] is None
    assert set(kinds[:-1]) == {"network"}
    rows = retrying_rows(store, result)
    assert [r["error_kind"] for r in rows] == kinds[:-1]
    assert [r["attempt"] for r in rows] == list(range(2, len(kinds) + 1))
    assert [e.attempt for e in events if isinstance(e, Retrying)] == [r["attempt"] for r in rows]


async def test_refused_then_503_then_served_is_retried_with_the_servers_wait(
    down: list[DownServer], tmp_path: Path, store: Store
) -> None:
    unavailable = wire_openai.error_reply(503, "Service Unavailable", type="server_error")
    wait = wire_openai.error_reply(503, "warming up", headers={"Retry-After": "1"})
    server = down_server(down, [wait, unavailable, wire_openai.chat_stream(tool_calls=[WRITE])])

    events: list[RunEvent] = []

    def observe(event: RunEvent) -> None:
        events.append(event)
        if sum(isinstance(e, Retrying) for e in events) == 2:
            server.restore()  # back after two refused connections, answering 503 at first

    provider = OpenAICompatible("gpt-test", base_url=f"{server.url}/v1")
    retry = RetryPolicy(total_seconds=30, base_seconds=0.2)
    try:
        result = await Harness(provider, store=store, retry=retry, observer=observe).run(
            greeting(tmp_path)
        )
    finally:
        await provider.aclose()

    assert result.outcome is RunOutcome.SUCCESS
    calls = store.trace(result.run_id).provider_calls
    assert [(c.attempt, c.error_kind, c.error_status) for c in calls] == [
        (1, "network", None),
        (2, "network", None),
        (3, "server", 503),
        (4, "server", 503),
        (5, None, None),
    ]
    rows = retrying_rows(store, result)
    assert [r["error_kind"] for r in rows] == ["network", "network", "server", "server"]
    assert rows[2]["delay"] == 1.0  # the Retry-After of the first 503
    assert server.requests == 3


async def test_a_server_that_stays_down_ends_the_run_when_the_total_is_spent(
    down: list[DownServer], tmp_path: Path, store: Store
) -> None:
    server = down_server(down)
    retry = RetryPolicy(total_seconds=1, base_seconds=0.1, cap_seconds=0.2)

    result = await run_openai(server.url, greeting(tmp_path), store, retry, [])

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "network"
    assert "the 1 s retry budget (RetryPolicy.total_seconds) is spent" in result.error.message
    kinds = attempts(store, result)
    assert len(kinds) >= 2 and set(kinds) == {"network"}
    assert len(retrying_rows(store, result)) == len(kinds) - 1


async def test_a_retry_after_past_the_total_ends_the_retries_at_once_and_says_so(
    tmp_path: Path, store: Store
) -> None:
    later = wire_openai.error_reply(429, "Rate limit reached", headers={"Retry-After": "3600"})
    with LoopbackServer([later]) as server:
        result = await run_openai(server.url, greeting(tmp_path), store, FAST, [])

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    error = result.error
    assert error is not None and (error.kind, error.status) == ("rate_limited", 429)
    assert "not retried: the provider asked to wait 3600 s" in error.message
    assert "of the 30 s retry budget" in error.message
    assert len(server.requests) == 1 and retrying_rows(store, result) == []
    (row,) = store.trace(result.run_id).provider_calls
    assert row.error_message == "Rate limit reached | rate_limit_exceeded"  # the server's own


# -- the policy against scripted failures ------------------------------------------------------


def failing(count: int, kind: str = "server") -> ScriptedProvider:
    """A model that fails ``count`` times in a row, then writes the greeting."""
    errors: list[Any] = [ProviderError(kind, f"down {n}", retry_after=0) for n in range(count)]  # type: ignore[arg-type]
    return ScriptedProvider([*errors, reply(calls=[call("write_file", content="hello")])])


async def test_the_default_retries_more_than_the_two_retries_it_used_to(
    tmp_path: Path, store: Store
) -> None:
    provider = failing(5)

    result = await Harness(provider, store=store).run(greeting(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    assert attempts(store, result) == ["server"] * 5 + [None]


async def test_max_retries_when_set_still_caps_the_retries(tmp_path: Path, store: Store) -> None:
    provider = failing(5)

    result = await Harness(provider, store=store, retry=FAST).run(greeting(tmp_path, max_retries=1))

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert attempts(store, result) == ["server", "server"]
    assert result.error is not None and result.error.message == "down 1"


async def test_a_total_of_zero_retries_nothing(tmp_path: Path, store: Store) -> None:
    retry = RetryPolicy(total_seconds=0)

    result = await Harness(failing(1), store=store, retry=retry).run(greeting(tmp_path))

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert attempts(store, result) == ["server"]
    assert result.error is not None and "retry budget" in result.error.message


async def test_the_wall_budget_still_bounds_the_retries(tmp_path: Path, store: Store) -> None:
    provider = ScriptedProvider(lambda request: (_ for _ in ()).throw(ProviderError("server", "x")))
    retry = RetryPolicy(total_seconds=120, base_seconds=0.05, cap_seconds=0.1)

    result = await Harness(provider, store=store, retry=retry).run(
        greeting(tmp_path, max_wall_seconds=0.5)
    )

    assert result.outcome is RunOutcome.TIME_BUDGET_EXCEEDED
    assert set(attempts(store, result)) == {"server"}


async def test_each_fallback_member_gets_its_own_total(tmp_path: Path, store: Store) -> None:
    always_down = ScriptedProvider(
        lambda request: (_ for _ in ()).throw(ProviderError("network", "gone")), name="primary"
    )
    second = failing(1)
    retry = RetryPolicy(total_seconds=0.3, base_seconds=0.05, cap_seconds=0.1)

    result = await Harness(Fallback(always_down, second), store=store, retry=retry).run(
        greeting(tmp_path)
    )

    assert result.outcome is RunOutcome.SUCCESS
    calls = store.trace(result.run_id).provider_calls
    primary = [c.error_kind for c in calls if c.provider == "primary"]
    assert len(primary) >= 2 and set(primary) == {"network"}
    assert [c.error_kind for c in calls if c.provider == "scripted"] == ["server", None]


async def test_a_provider_that_breaks_its_protocol_is_not_retried(
    tmp_path: Path, store: Store
) -> None:
    def broken(request: CompletionRequest) -> Any:
        raise KeyError("choices")

    result = await Harness(ScriptedProvider(broken), store=store).run(greeting(tmp_path))

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "bad_response"
    assert "the provider raised KeyError" in result.error.message
    assert "not retried" in result.error.message
    assert attempts(store, result) == ["bad_response"]


async def test_a_connection_error_a_provider_raises_is_a_retried_network_failure(
    tmp_path: Path, store: Store
) -> None:
    answers: list[Any] = [ConnectionRefusedError(111, "Connection refused")] * 2
    provider = ScriptedProvider([*answers, reply(calls=[call("write_file", content="hello")])])

    result = await Harness(provider, store=store, retry=FAST).run(greeting(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    assert attempts(store, result) == ["network", "network", None]


def test_the_policy_is_checked_and_its_backoff_grows_to_its_cap() -> None:
    assert RetryPolicy() == RetryPolicy(total_seconds=120, base_seconds=1, cap_seconds=30)
    with pytest.raises(ConfigError, match="RetryPolicy: total_seconds"):
        RetryPolicy(total_seconds=-1)
    with pytest.raises(ConfigError, match="retry must be a RetryPolicy"):
        Harness(ScriptedProvider([]), retry=30)  # type: ignore[arg-type]
    policy = RetryPolicy(base_seconds=1, cap_seconds=8)
    for retry, ceiling in [(1, 1), (2, 2), (3, 4), (4, 8), (5, 8), (200, 8)]:
        assert ceiling / 2 <= policy.backoff(retry) <= ceiling


# -- which failures each vendor's provider calls transient --------------------------------------

TRANSIENT = [(408, "timeout"), (429, "rate_limited"), (500, "server"), (502, "server")]
TRANSIENT += [(503, "server"), (504, "server"), (529, "server")]
PERMANENT = [(400, "bad_request"), (401, "auth"), (403, "auth"), (404, "bad_request")]
PERMANENT += [(422, "bad_request")]


def ask() -> CompletionRequest:
    return CompletionRequest(model="m", system="s", messages=(Message.user("hi"),), max_tokens=16)


async def failure_of(provider: OpenAICompatible | Anthropic) -> ProviderError:
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete(ask())
    finally:
        await provider.aclose()
    return caught.value


def openai_at(url: str, timeout: float = 120.0) -> OpenAICompatible:
    return OpenAICompatible("gpt-test", base_url=f"{url}/v1", timeout=timeout)


def anthropic_at(url: str, timeout: float = 120.0) -> Anthropic:
    return Anthropic("m", api_key=wire_anthropic.API_KEY, base_url=url, timeout=timeout)


@pytest.mark.parametrize(("status", "kind"), TRANSIENT + PERMANENT)
async def test_each_status_is_typed_alike_by_both_vendors(status: int, kind: str) -> None:
    openai_reply = wire_openai.error_reply(status, "it failed")
    anthropic_reply = wire_anthropic.error_reply(status, "api_error", "it failed")
    with LoopbackServer([openai_reply]) as a, LoopbackServer([anthropic_reply]) as b:
        errors = [await failure_of(openai_at(a.url)), await failure_of(anthropic_at(b.url))]

    assert [(e.kind, e.status, e.transient) for e in errors] == [
        (kind, status, (status, kind) in TRANSIENT)
    ] * 2


async def test_a_refused_connection_and_a_timeout_are_transient_for_both_vendors(
    down: list[DownServer],
) -> None:
    gone = down_server(down)
    late = [wire_openai.chat_stream("late", delay=5.0)]
    with LoopbackServer(late) as a, LoopbackServer([Reply(body={}, delay=5.0)]) as b:
        errors = [
            await failure_of(openai_at(gone.url)),
            await failure_of(anthropic_at(gone.url)),
            await failure_of(openai_at(a.url, timeout=0.3)),
            await failure_of(anthropic_at(b.url, timeout=0.3)),
        ]

    assert [(e.kind, e.transient) for e in errors] == [("network", True)] * 2 + [
        ("timeout", True)
    ] * 2


async def test_a_spent_quota_is_no_rate_limit_and_is_not_retried(
    tmp_path: Path, store: Store
) -> None:
    message = "You exceeded your current quota, please check your plan and billing details."
    quota = wire_openai.error_reply(429, message, "insufficient_quota", type="insufficient_quota")
    with LoopbackServer([quota, quota]) as server:
        result = await run_openai(server.url, greeting(tmp_path), store, FAST, [])

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    error = result.error
    assert error is not None and (error.kind, error.status) == ("bad_request", 429)
    assert not error.transient and len(server.requests) == 1


def stream_failing_with(error: dict[str, Any]) -> Reply:
    """A 200 stream that begins an answer, then sends ``error`` as OpenAI-family servers do."""
    first = wire_openai.chat_chunk({"role": "assistant", "content": "Hel"})
    return Reply(events=[sse(first), sse({"error": error})])


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": 401, "message": "User not found."}, "auth"),  # OpenRouter: a status as code
        ({"code": 429, "message": "Rate limit exceeded"}, "rate_limited"),
        ({"code": "502", "message": "Provider returned error"}, "server"),
        ({"code": 400, "message": "Invalid model"}, "bad_request"),
        ({"code": "rate_limit_exceeded", "message": "slow down"}, "rate_limited"),
        ({"message": "bad tools", "type": "invalid_request_error"}, "bad_request"),
        ({"code": "server_error", "message": "Provider disconnected"}, "server"),
        ({"message": "something broke"}, "server"),
    ],
)
async def test_an_error_inside_an_openai_family_stream_is_typed_by_its_code(
    error: dict[str, Any], kind: str
) -> None:
    with LoopbackServer([stream_failing_with(error)]) as server:
        failed = await failure_of(openai_at(server.url))

    assert failed.kind == kind


@pytest.mark.parametrize(
    ("error_type", "kind"),
    [
        ("overloaded_error", "server"),
        ("rate_limit_error", "rate_limited"),
        ("api_error", "server"),
        ("authentication_error", "auth"),
        ("invalid_request_error", "bad_request"),
    ],
)
async def test_an_error_event_inside_an_anthropic_stream_is_typed_by_its_type(
    error_type: str, kind: str
) -> None:
    events = wire_anthropic.stream_events("Hello there")[:3]
    events.append(wire_anthropic.error_event(error_type, "it failed"))
    with LoopbackServer([Reply(events=events)]) as server:
        failed = await failure_of(anthropic_at(server.url))

    assert failed.kind == kind
