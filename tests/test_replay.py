"""Cassettes: Record writes what Replay answers from; strict replay names the difference."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    Budget,
    ConfigError,
    ProviderError,
    Record,
    Replay,
    RunOutcome,
    Store,
    TaskContract,
    Usage,
    WorkspaceFileContains,
    run,
)
from io_harness.testing import ScriptedProvider, call, reply

contract = partial(
    support.contract, goal="fix add", file="pkg/calc.py", needle="a + b", max_steps=5
)
"""The task recorded here: done when pkg/calc.py holds ``a + b``."""


def script() -> ScriptedProvider:
    return ScriptedProvider(
        [
            reply("looking", [call("read_file", path="pkg/calc.py")], Usage(input_tokens=10)),
            ProviderError("server", "overloaded", status=503, retry_after=0),
            reply(
                calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")],
                usage=Usage(input_tokens=20, output_tokens=4),
            ),
        ]
    )


def fresh(project: Path) -> None:
    (project / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")


def _comparable(store: Store, run_id: str) -> list[object]:
    trace = store.trace(run_id)
    return [
        [m.model_dump() for m in trace.messages],
        [(c.name, c.arguments, c.result, c.is_error) for c in trace.tool_calls],
        [(p.attempt, p.error_kind, p.input_tokens) for p in trace.provider_calls],
        [(v.trigger, v.passed, v.result) for v in trace.verifications],
        (trace.run.outcome, trace.run.steps, trace.run.tokens),
    ]


async def test_a_recorded_run_replays_offline_to_the_same_outcome_and_trace(
    project: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "run.jsonl"
    recorded_store, replayed_store = Store.memory(), Store.memory()
    recorded = await run(contract(project), Record(script(), cassette), store=recorded_store)
    fresh(project)

    replayed = await run(contract(project), Replay(cassette), store=replayed_store)

    assert recorded.outcome is replayed.outcome is RunOutcome.SUCCESS
    assert _comparable(recorded_store, recorded.run_id) == _comparable(
        replayed_store, replayed.run_id
    )


async def test_the_cassette_format_is_a_header_and_one_line_per_attempt(
    project: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "run.jsonl"
    await run(contract(project), Record(script(), cassette))

    lines = [json.loads(line) for line in cassette.read_text().splitlines()]

    assert lines[0] == {"io_harness_cassette": 1, "provider": "scripted", "model": "scripted"}
    assert [(line["turn"], "error" in line) for line in lines[1:]] == [
        (0, False),
        (1, True),
        (1, False),
    ]
    assert lines[2]["error"] == {
        "kind": "server",
        "message": "overloaded",
        "status": 503,
        "retry_after": 0.0,
    }
    assert set(lines[1]["request"]) == {
        "model",
        "system",
        "messages",
        "tools",
        "max_tokens",
        "temperature",
    }


async def test_strict_replay_refuses_a_request_that_differs_and_names_where(
    project: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "run.jsonl"
    await run(contract(project), Record(script(), cassette))
    fresh(project)

    result = await run(contract(project, goal="fix add, please"), Replay(cassette))

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None and result.error.kind == "bad_request"
    assert "model call 1 differs" in result.error.message
    assert (
        'messages[0].content[0].text, from character 7: recorded "fix add", '
        'got "fix add, please"' in result.error.message
    )


def test_a_difference_deep_in_a_long_text_is_shown_where_it_is() -> None:
    from io_harness.providers._cassette import _first_difference

    recorded, actual = "x" * 5000 + "recorded tail", "x" * 5000 + "actual tail"

    found = _first_difference({"system": recorded}, {"system": actual})

    assert found is not None
    assert found.startswith("system, from character 5000: recorded [4960 chars]...")
    assert 'xxrecorded tail"' in found and 'xxactual tail"' in found


async def test_loose_replay_answers_a_request_that_differs(project: Path, tmp_path: Path) -> None:
    cassette = tmp_path / "run.jsonl"
    await run(contract(project), Record(script(), cassette))
    fresh(project)

    result = await run(contract(project, goal="fix add, please"), Replay(cassette, strict=False))

    assert result.outcome is RunOutcome.SUCCESS


async def test_a_replay_past_the_end_of_the_cassette_fails_with_a_typed_error(
    project: Path, tmp_path: Path
) -> None:
    cassette = tmp_path / "short.jsonl"
    short = ScriptedProvider([reply(calls=[call("list_dir")])])
    await run(
        TaskContract.workspace(
            "x", project, WorkspaceFileContains("a", "b"), budget=Budget(max_steps=1)
        ),
        Record(short, cassette),
    )

    replay = Replay(cassette)
    result = await run(
        TaskContract.workspace(
            "x", project, WorkspaceFileContains("a", "b"), budget=Budget(max_steps=3)
        ),
        replay,
    )

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert result.error is not None
    assert "holds no answer for model call 2" in result.error.message


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the file is empty"),
        ("not json\n", "line 1 is not JSON"),
        ('{"io_harness_cassette": 7}\n', "found version 7"),
        ('{"io_harness_cassette": 1}\n{"turn": 0}\n', "line 2: request: Field required"),
        (
            '{"io_harness_cassette": 1}\n'
            '{"turn": 0, "request": {"model": "m", "system": "", "messages": []}}\n',
            "line 2: needs a response or an error",
        ),
    ],
)
def test_a_bad_cassette_is_a_config_error_at_construction(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)

    with pytest.raises(ConfigError, match=message):
        Replay(path)


def test_a_missing_cassette_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        Replay(tmp_path / "absent.jsonl")


def test_replay_dials_nothing(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"io_harness_cassette": 1, "provider": "p", "model": "m"}\n')

    replay = Replay(path)

    assert (replay.endpoints(), replay.model, replay.name) == ((), "m", "replay")
