"""Compaction: the model's view of a long run fits its window, pairs stay whole, the task stays.

The agent is scripted; so is the compactor (it answers the pass's request,
recognised by its system prompt), so each run is a pure function of what the
harness sends.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Harness,
    Message,
    ProviderError,
    RunOutcome,
    Store,
    TextBlock,
    ToolCall,
    ToolResult,
)
from io_harness.compaction._pass import (
    SUMMARY_HEADING,
    Compaction,
    Edit,
    View,
    apply_pass,
    protected,
)
from io_harness.testing import ScriptedProvider, call, reply

WORKER = Path(__file__).with_name("compaction_worker.py")
READS = 6


def is_compactor(request: CompletionRequest) -> bool:
    return request.system.startswith("You compact the conversation")


def compactor_answer(request: CompletionRequest) -> CompletionResponse:
    """Mark every message the numbered listing does not protect; say how many reads went."""
    listing = str(request.messages[0].text)
    shown = re.findall(r"^#(\d+) (\w+)( \(protected\))?:", listing, re.M)
    ids = [int(n) for n, _, guarded in shown if not guarded]
    reads = sum(1 for n, role, guarded in shown if not guarded and role == "assistant")
    return reply(
        calls=[
            call("write_summary", text=f"big.txt holds x's; reads: {reads}"),
            call("mark_for_deletion", ids=ids),
        ]
    )


def agent_answer(request: CompletionRequest) -> CompletionResponse:
    """Read big.txt READS times, then write done.txt; reads a summary took away still count."""
    summarised = sum(int(n) for n in re.findall(r"reads: (\d+)", str(request.messages[0].text)))
    turn = summarised + sum(m.role == "assistant" for m in request.messages)
    if turn < READS:
        return reply(f"reading {turn}", [call("read_file", path="big.txt")])
    return reply("done", [call("write_file", path="done.txt", content="done\n")])


def respond(request: CompletionRequest) -> CompletionResponse:
    return compactor_answer(request) if is_compactor(request) else agent_answer(request)


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "big.txt").write_text("x" * 3000 + "\n")
    return root


contract = partial(
    support.contract, goal="read big.txt until you know it, then write done.txt", max_steps=20
)
"""The agent's task in every run here, in test_cli_compaction.py and compaction_worker.py."""


# -- the rules of a pass --------------------------------------------------------------


def _transcript() -> list[Message]:
    def pair(n: int) -> list[Message]:
        return [
            Message(
                role="assistant", content=(ToolCall(id=f"c{n}", name="read_file", arguments={}),)
            ),
            Message(role="tool", content=(ToolResult(tool_use_id=f"c{n}", content="..."),)),
        ]

    return [Message.user("the task"), *pair(1), *pair(2), *pair(3)]


def test_a_pass_deletes_a_pair_whole_and_never_the_task_or_the_recent() -> None:
    messages = _transcript()  # 1 task, 2-3 pair, 4-5 pair, 6-7 pair
    view = View()
    guarded = protected(messages, view, keep_recent=2)
    assert guarded == {1, 6, 7}

    calls = [
        ToolCall(id="a", name="write_summary", arguments={"text": "s"}),
        ToolCall(id="b", name="mark_for_deletion", arguments={"ids": [3, 1, 7, 99]}),
    ]
    edits, refused = apply_pass(calls, messages, view, guarded, step=4)

    assert [(e.kind, e.message) for e in edits] == [("summary", None), ("delete", 2), ("delete", 3)]
    assert refused == [
        "#1 is protected (or paired with a protected one)",
        "#7 is protected (or paired with a protected one)",
        "#99 is not a message",
    ]
    view.add(edits)
    shown = view.apply(messages)
    assert len(shown) == 5 and shown[0].text.startswith("the task")
    assert shown[0].content[-1] == TextBlock(text=f"{SUMMARY_HEADING}\ns")


def test_bad_compactor_calls_are_refused_not_raised() -> None:
    messages = _transcript()
    calls = [
        ToolCall(id="a", name="write_summary", arguments={"text": ""}),
        ToolCall(id="b", name="mark_for_deletion", arguments={"ids": "all"}),
        ToolCall(id="c", name="rm", arguments={}),
    ]
    edits, refused = apply_pass(calls, messages, View(), {1}, step=2)
    assert edits == [] and len(refused) == 3


# -- runs -------------------------------------------------------------------------------


def _pairs_whole(messages: tuple[Message, ...]) -> bool:
    called = {b.id for m in messages for b in m.content if isinstance(b, ToolCall)}
    answered = {b.tool_use_id for m in messages for b in m.content if isinstance(b, ToolResult)}
    return called == answered


async def test_a_run_past_its_share_is_compacted_with_pairs_whole_and_the_task_kept(
    tmp_path: Path,
) -> None:
    root = workspace(tmp_path)
    provider = ScriptedProvider(respond, context_window=3000)
    store = Store.memory()
    harness = Harness(provider, store=store, compaction=Compaction(at_share=0.8, keep_recent=2))

    result = await harness.run(contract(root), run_id="c")

    assert result.outcome is RunOutcome.SUCCESS
    passes = [r for r in provider.requests if is_compactor(r)]
    agent = [r for r in provider.requests if not is_compactor(r)]
    assert passes, "no compaction pass ran"
    for request in agent:
        assert request.system == agent[0].system  # the system prompt (the condition) stays
        assert request.messages[0].text.startswith(contract(root).goal)
        assert _pairs_whole(request.messages)
    assert len(agent[-1].messages) < len(store.load_run("c").messages)
    trace = store.trace("c")
    assert [c.kind for c in trace.compactions].count("summary") == len(passes)
    # The transcript is whole: every message of every step is stored.
    assert len(trace.messages) == 1 + 2 * (READS + 1)


async def test_an_overflow_error_compacts_once_and_retries(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    overflowed: list[int] = []

    def provider_says(request: CompletionRequest) -> CompletionResponse:
        if not is_compactor(request) and len(request.messages) > 7 and not overflowed:
            overflowed.append(len(request.messages))
            raise ProviderError("context_overflow", "prompt is too long")
        return respond(request)

    provider = ScriptedProvider(provider_says, context_window=10**6)
    harness = Harness(provider, compaction=Compaction(keep_recent=2))

    result = await harness.run(contract(root))

    assert result.outcome is RunOutcome.SUCCESS
    assert overflowed and sum(is_compactor(r) for r in provider.requests) == 1


async def test_a_run_that_cannot_fit_ends_context_exhausted(tmp_path: Path) -> None:
    root = workspace(tmp_path)

    def never_fits(request: CompletionRequest) -> CompletionResponse:
        if is_compactor(request) or len(request.messages) < 4:
            return respond(request)
        raise ProviderError("context_overflow", "prompt is too long")

    harness = Harness(
        ScriptedProvider(never_fits, context_window=10**6), compaction=Compaction(keep_recent=8)
    )

    result = await harness.run(contract(root))

    assert result.outcome is RunOutcome.CONTEXT_EXHAUSTED
    assert result.error is not None and result.error.kind == "context_overflow"


async def test_compaction_needs_a_known_window(tmp_path: Path) -> None:
    harness = Harness(ScriptedProvider(respond), compaction=Compaction())
    with pytest.raises(ConfigError, match="context window"):
        await harness.run(contract(workspace(tmp_path)))


def _worker(db: Path, root: Path, mode: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(WORKER), str(db), str(root), mode]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _passes(db: Path) -> list[tuple[int, str | None]]:
    with Store.open(db) as store:
        trace = store.trace("killed")
    assert [s.step for s in trace.steps] == list(range(1, len(trace.steps) + 1))
    return [(c.step, c.text) for c in trace.compactions if c.kind == "summary"]


def test_a_pass_cut_short_by_sigkill_is_made_once_after_the_resume(tmp_path: Path) -> None:
    clean = tmp_path / "clean"
    clean.mkdir()
    done = _worker(clean / "runs.db", workspace(clean), "clean")
    assert done.returncode == 0, done.stderr
    root = workspace(tmp_path)
    db = tmp_path / "runs.db"

    killed = _worker(db, root, "run")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    resumed = _worker(db, root, "resume")
    assert resumed.returncode == 0, resumed.stderr

    assert json.loads(resumed.stdout)["outcome"] == "success"
    # Each pass once, at the step an uninterrupted run makes it, none repeated.
    assert _passes(db) == _passes(clean / "runs.db")
    assert len(_passes(db)) >= 1


def test_an_edit_is_plain_data() -> None:
    assert Edit("delete", 3, message=4) == Edit("delete", 3, 4, None)


async def test_a_roles_compaction_and_window_are_its_own(tmp_path: Path) -> None:
    root = workspace(tmp_path)
    (tmp_path / "roles.toml").write_text(
        '[roles.reader]\ntools = ["read_file", "write_file"]\ncontext_window = 3000\n'
        "[roles.reader.compaction]\nkeep_recent = 2\n"
    )
    for name in ("read_file", "write_file"):
        schema = root / "descriptions" / "tools" / f"{name}.json"
        schema.parent.mkdir(parents=True, exist_ok=True)
        schema.write_text('{"type": "object"}')
    provider = ScriptedProvider(respond)  # no window of its own: the role's is used
    harness = Harness(provider, roles=tmp_path / "roles.toml")
    role_contract = contract(root).model_copy(update={"role": "reader"})

    result = await harness.run(role_contract)

    assert result.outcome is RunOutcome.SUCCESS
    assert any(is_compactor(r) for r in provider.requests)
