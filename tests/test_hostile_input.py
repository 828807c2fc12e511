"""Any model output ends as an observation the model reads and a committed step.

Each hostile form of a tool call's arguments is sent the way it reaches the
harness: as a vendor's wire text (through the real OpenAI and Anthropic
providers against loopback servers), or as the values a Python provider hands
over (through :class:`ScriptedProvider`). The run must not raise, must not be
left ``running``, must commit the step with its tool call, and the model must
be shown either the tool's answer or what is wrong with its arguments.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from io_harness import (
    NO_SANDBOX,
    Anthropic,
    Budget,
    FileContains,
    Harness,
    OpenAI,
    Provider,
    RunOutcome,
    RunResult,
    Store,
    TaskContract,
    ToolCall,
)
from io_harness._arguments import (
    MAX_ARGUMENT_DEPTH,
    admitted_arguments,
    arguments_problem,
)
from io_harness.providers._anthropic_wire import StreamAssembler
from io_harness.providers._vendor import parse_arguments
from io_harness.testing import ScriptedProvider, reply
from io_harness.tools import tool
from loopback import LoopbackServer
from wire_anthropic import messages_stream
from wire_openai import chat_stream

KEY = "sk-test-hostile-0123456789"


def nested(depth: int, leaf: object = "x") -> object:
    """``leaf`` inside ``depth`` lists (built without recursion, so any depth is cheap)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def depth_of(value: object) -> int:
    """How many levels of lists and objects ``value`` nests, counted without recursion."""
    deepest, stack = 0, [(1, value)]
    while stack:
        depth, node = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            stack += [
                (depth + 1, item) for item in (node.values() if isinstance(node, dict) else node)
            ]
    return deepest


def nested_text(depth: int) -> str:
    return "[" * depth + "]" * depth


KEPT: list[Any] = []
"""The values ``keep`` was called with, in order."""


@tool
def keep(value: Any = None) -> str:
    """Keep any value."""
    KEPT.append(value)
    return "kept"


def contract(root: Path) -> TaskContract:
    # The criterion never passes: after the call's step, a text turn ends the run at the cap.
    return TaskContract.file(
        "write", root / "out.txt", FileContains("never there"), budget=Budget(max_steps=2)
    )


async def run_and_check(
    root: Path, provider: Provider, observation: Callable[[], str]
) -> tuple[RunResult, str]:
    """Run once through the public API; check what holds for every hostile answer.

    Returns the result and the observation the model was sent for the call.
    """
    path = root / f"runs-{uuid.uuid4().hex}.db"
    with Store.open(path) as store:
        result = await Harness(provider, store=store, sandbox=NO_SANDBOX, tools=[keep]).run(
            contract(root)
        )
        (summary,) = store.runs()
        trace = store.trace(result.run_id)
    assert result.outcome is RunOutcome.STEP_CAP_REACHED, result.error
    assert summary.status == "finished" and summary.steps == 2
    assert [s.step for s in trace.steps] == [1, 2]
    (row,) = trace.tool_calls
    assert row.step == 1
    seen = observation()
    assert seen == row.result
    if seen == "kept":  # what the tool was given is what the store keeps, NaN never null
        (stored,) = trace.messages[1].tool_calls
        assert isinstance(stored.arguments, dict)
        assert json.dumps(stored.arguments.get("value"), allow_nan=False) == json.dumps(KEPT[-1])
        assert row.parsed_arguments == stored.arguments
    return result, seen


# --- the wire: text as a vendor sends it ---------------------------------------------------

DEEP = MAX_ARGUMENT_DEPTH * 5
PAST_THE_PARSER = 5000
HOSTILE_TEXT: dict[str, tuple[str, str | None]] = {
    "nested 320 deep": (
        f'{{"value": {nested_text(DEEP - 1)}}}',
        f"the arguments nest {DEEP} levels deep, past the limit of {MAX_ARGUMENT_DEPTH}",
    ),
    "nested past what json parses": (
        f'{{"value": {nested_text(PAST_THE_PARSER)}}}',
        f"the arguments nest {PAST_THE_PARSER + 1} levels deep, past the limit",
    ),
    "NaN": ('{"value": NaN}', "the arguments hold NaN, which is not a JSON number"),
    "Infinity": ('{"value": -Infinity}', "the arguments hold -Infinity, which is not a JSON"),
    "a key twice": ('{"value": 1, "value": 2}', "give the key 'value' twice; send each key once"),
    "a number past a float": ('{"value": 1e999}', "the number 1e999, beyond the range of a"),
    "an integer of 5000 digits": ('{"value": ' + "7" * 5000 + "}", "more than 4300 digits"),
    "a lone surrogate": ('{"value": "\\udc80"}', "hold a lone surrogate (\\udc80)"),
    "a raw control character": ('{"value": "a\x07b"}', "the control character U+0007 inside"),
}


def openai_provider(server: LoopbackServer) -> Provider:
    return OpenAI("gpt-test", api_key=KEY, base_url=f"{server.url}/v1")


def tool_message(server: LoopbackServer) -> str:
    """What the second request sent the model for the first call."""
    messages = server.requests[1].json["messages"]
    (message,) = [m for m in messages if m["role"] == "tool"]
    content: str = message["content"]
    return content.removeprefix("error: ")


@pytest.mark.parametrize("form", HOSTILE_TEXT)
async def test_hostile_argument_text_from_the_openai_wire_ends_as_an_observation(
    tmp_path: Path, form: str
) -> None:
    raw, said = HOSTILE_TEXT[form]
    script = [
        chat_stream(tool_calls=[("call_1", "keep", raw)], split=1 << 20),
        chat_stream("nothing more"),
    ]
    with LoopbackServer(script) as server:
        provider = openai_provider(server)
        _, seen = await run_and_check(tmp_path, provider, lambda: tool_message(server))
        await provider.aclose()  # type: ignore[attr-defined]

    assert said is not None and seen.startswith("keep: ") and said in seen


ORDINARY_TEXT = {
    "escaped control characters": '{"value": "\\u0000\\u001b[2J\\u0007"}',
    "three megabytes": '{"value": "' + "x" * 3_000_000 + '"}',
    "nested to the limit": f'{{"value": {nested_text(MAX_ARGUMENT_DEPTH - 1)}}}',
    "nothing": "",
}


@pytest.mark.parametrize("form", ORDINARY_TEXT)
async def test_ordinary_argument_text_still_reaches_the_tool(tmp_path: Path, form: str) -> None:
    # The control: the bound refuses no arguments a tool could run with.
    script = [
        chat_stream(tool_calls=[("call_1", "keep", ORDINARY_TEXT[form])], split=1 << 20),
        chat_stream("nothing more"),
    ]
    with LoopbackServer(script) as server:
        provider = openai_provider(server)
        _, seen = await run_and_check(tmp_path, provider, lambda: tool_message(server))
        await provider.aclose()  # type: ignore[attr-defined]

    assert seen == "kept"


@pytest.mark.parametrize("form", ["nested 320 deep", "NaN", "a key twice", "a lone surrogate"])
async def test_hostile_argument_text_from_the_anthropic_wire_ends_as_an_observation(
    tmp_path: Path, form: str
) -> None:
    raw, said = HOSTILE_TEXT[form]
    script = [
        messages_stream(tool_calls=[("toolu_1", "keep", raw)], stop_reason="tool_use"),
        messages_stream("nothing more", stop_reason="end_turn"),
    ]

    def observation() -> str:
        messages = server.requests[1].json["messages"]
        results = [b for m in messages for b in m["content"] if b.get("type") == "tool_result"]
        (result,) = results
        assert result["is_error"] is True
        content: str = result["content"]
        return content

    with LoopbackServer(script) as server:
        provider = Anthropic("claude-test-1", api_key=KEY, base_url=server.url)
        _, seen = await run_and_check(tmp_path, provider, observation)
        await provider.aclose()

    assert said is not None and said in seen


def test_an_anthropic_tool_block_that_starts_with_deep_input_is_a_call_not_a_crash() -> None:
    # Some gateways send the whole input in content_block_start rather than as deltas.
    assembler = StreamAssembler(model="m")
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": "m", "usage": {}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {
                "type": "tool_use",
                "id": "t1",
                "name": "keep",
                "input": {"value": nested(PAST_THE_PARSER)},
            },
        },
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
        {"type": "message_stop"},
    ]
    for event in events:
        assembler.feed(event)

    (call,) = assembler.response().tool_calls
    assert isinstance(call.arguments, str) and call.arguments.startswith('{"value": [[[')


# --- Python values: what a provider of the caller's hands over -----------------------------


def cycle() -> dict[str, object]:
    looped: dict[str, object] = {"value": 1}
    looped["again"] = looped
    return looped


HOSTILE_VALUES: dict[str, tuple[Callable[[], dict[Any, Any]], str]] = {
    "nested 320 deep": (lambda: {"value": nested(DEEP - 1)}, f"nest {DEEP} levels deep"),
    "nested past Python's recursion": (
        lambda: {"value": nested(50_000)},
        "nest 50001 levels deep, past the limit",
    ),
    "a cycle": (cycle, 'not a JSON object: \'{"value": 1, "again": <cycle>}\''),
    "NaN": (lambda: {"value": float("nan")}, "the arguments hold NaN, which is not a JSON"),
    "a set": (lambda: {"value": {1, 2}}, "<set {1, 2}>"),
    "a key that is no string": (lambda: {1: "value"}, "not a JSON object: '{1: \"value\"}'"),
    "an integer too long to write": (lambda: {"value": 10**5000}, "<int of 16610 bits>"),
}


def scripted(arguments: object) -> ScriptedProvider:
    # Unchecked, as a provider that builds its own ToolCall without validation hands it over.
    unchecked = cast("dict[str, Any]", arguments)
    hostile = ToolCall.model_construct(id="call_1", name="keep", arguments=unchecked)
    return ScriptedProvider([reply(calls=[hostile]), reply("nothing more")])


def scripted_observation(provider: ScriptedProvider) -> Callable[[], str]:
    def seen() -> str:
        (result,) = provider.requests[1].messages[-1].content
        content: str = result.content  # type: ignore[union-attr]
        return content

    return seen


@pytest.mark.parametrize("form", HOSTILE_VALUES)
async def test_hostile_argument_values_from_a_python_provider_end_as_an_observation(
    tmp_path: Path, form: str
) -> None:
    build, said = HOSTILE_VALUES[form]
    provider = scripted(build())

    _, seen = await run_and_check(tmp_path, provider, scripted_observation(provider))

    assert seen.startswith("keep: ") and said in seen


# --- the property: any JSON-ish value, as a value and as text ------------------------------

ANY_CHARACTER = st.characters(exclude_categories=())  # lone surrogates included
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=10**300, max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(ANY_CHARACTER, max_size=20)
)
JSONISH = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(ANY_CHARACTER, max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)
SHAPES = st.tuples(st.integers(0, 3) | st.integers(0, 2000), JSONISH)
"""``(depth, inner)``: ``inner`` inside ``depth`` lists, past json's ~990 levels at times."""
VARIANTS = st.integers(0, 3)


def value_of(shape: tuple[int, object]) -> dict[str, object]:
    depth, inner = shape
    return {"value": nested(depth, inner)}


def text_of(shape: tuple[int, object], variant: int) -> str:
    """The shape's value as a model might spell it: as JSON (NaN and all, escaped or not),
    cut short, or with its key given twice. Written without recursion, as deep as it is."""
    depth, inner = shape
    body = "[" * depth + json.dumps(inner, ensure_ascii=variant % 2 == 0) + "]" * depth
    text = f'{{"value": {body}}}'
    if variant == 2:
        return text[: len(text) // 2]
    if variant == 3:
        return text[:-1] + ', "value": null}'
    return text


SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(shape=SHAPES)
async def test_any_value_a_provider_hands_over_ends_as_an_observation(
    tmp_path: Path, shape: tuple[int, object]
) -> None:
    provider = scripted(value_of(shape))

    _, seen = await run_and_check(tmp_path, provider, scripted_observation(provider))

    assert seen == "kept" or seen.startswith("keep: the arguments")


@SETTINGS
@given(shape=SHAPES, variant=VARIANTS)
async def test_any_text_a_model_sends_ends_as_an_observation(
    tmp_path: Path, shape: tuple[int, object], variant: int
) -> None:
    script = [
        chat_stream(tool_calls=[("call_1", "keep", text_of(shape, variant))], split=1 << 20),
        chat_stream("nothing more"),
    ]
    with LoopbackServer(script) as server:
        provider = openai_provider(server)
        _, seen = await run_and_check(tmp_path, provider, lambda: tool_message(server))
        await provider.aclose()  # type: ignore[attr-defined]

    assert seen == "kept" or seen.startswith("keep: the arguments")


@given(shape=SHAPES, variant=VARIANTS)
def test_what_is_admitted_is_a_json_object_within_the_limit_or_text(
    shape: tuple[int, object], variant: int
) -> None:
    for admitted in (admitted_arguments(value_of(shape)), parse_arguments(text_of(shape, variant))):
        if isinstance(admitted, dict):
            text = json.dumps(admitted, allow_nan=False)  # NaN or Infinity would raise here
            assert depth_of(json.loads(text)) <= MAX_ARGUMENT_DEPTH
            assert admitted_arguments(admitted) is admitted
        else:
            admitted.encode("utf-8")  # storable: no lone surrogate survives
            assert arguments_problem(admitted).startswith("the arguments")
