"""Runs that must not go on as if nothing were wrong (issue 24): a resume whose stored
conversation lost rows, a sub-agent whose drive raised, a resume whose provider would
reach another endpoint than the run started with.

Every store is a real SQLite file; the vendor's wire is a real HTTP server on
127.0.0.1 (:class:`loopback.LoopbackServer`) standing for a gateway, and every
contract's policy denies the vendor's public host, so nothing leaves the machine
whichever way the code under test goes.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Containment,
    Decision,
    Harness,
    Policy,
    ResumeError,
    RunOutcome,
    Store,
    resume,
    run,
)
from io_harness.cli import main
from io_harness.providers import Anthropic
from io_harness.testing import ScriptedProvider, call, reply
from loopback import LoopbackServer, Reply
from support import USAGE, ProcessDied, goal_of, spawn, write
from wire_anthropic import messages_stream

# -- a resume with no conversation ------------------------------------------------------------

read_task = partial(support.contract, goal="fix add", file="pkg/calc.py", needle="a + b")
"""A task the runs here never finish: done when pkg/calc.py holds ``a + b``."""


async def one_step_then_died(root: Path, store: Store) -> str:
    """A run whose first step (a read, answered) committed and whose second died."""
    provider = ScriptedProvider(
        [reply(calls=[call("read_file", path="pkg/calc.py")]), ProcessDied()]
    )
    with pytest.raises(ProcessDied):
        await run(read_task(root, max_steps=5), provider, store=store, run_id="r1")
    return "r1"


def damage(path: Path, statement: str) -> None:
    """Change the store's file behind its back, as a bad disk or a partial restore does."""
    with sqlite3.connect(path) as db:
        db.execute(statement)
    db.close()


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("DELETE FROM messages", "it holds no messages: the task and every answer are missing"),
        ("DELETE FROM messages WHERE step > 0", "the model's answers of 0 steps, not 1"),
        ("DELETE FROM messages WHERE seq = 1", "the task message it begins with is missing"),
        ("DELETE FROM messages WHERE role = 'tool'", "the results of step 1's calls call_1_1"),
    ],
)
async def test_a_resume_whose_conversation_lost_rows_is_refused_naming_what_is_missing(
    project: Path, tmp_path: Path, statement: str, named: str
) -> None:
    path = tmp_path / "runs.db"
    with Store.open(path) as store:
        run_id = await one_step_then_died(project, store)
    damage(path, statement)
    again = ScriptedProvider([reply("done, without knowing what")])

    with Store.open(path) as store:
        with pytest.raises(ResumeError) as refused:
            await resume(run_id, again, store=store)
        assert store.load_run(run_id).status == "running"  # left as it was, for a person
    said = str(refused.value)
    assert "run 'r1' cannot be resumed: its 1 committed steps and its stored conversation" in said
    assert named in said and "messages rows are damaged or were partly restored" in said
    assert again.requests == []


def test_ioh_resume_of_a_run_whose_messages_are_gone_says_so_without_a_traceback(
    project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    with Store.open(path) as store:
        asyncio.run(one_step_then_died(project, store))
    damage(path, "DELETE FROM messages")
    # Port 9 (discard) is never listened on here: a resume that went ahead could not be answered.
    spec = "compatible:http://127.0.0.1:9/v1#m"

    status = main(["resume", "r1", "--provider", spec, "--store", str(path)])

    err = capsys.readouterr().err
    assert status == 2, err
    assert "its stored conversation disagree (it holds no messages" in err
    assert "Traceback" not in err


# -- a sub-agent whose drive raised -----------------------------------------------------------


async def flaky_child_tree(work: Path, store: Store) -> ScriptedProvider:
    """A root that spawns a child whose model raises a BaseException, then finishes its own
    task; its provider."""

    async def answer(request: CompletionRequest) -> CompletionResponse:
        if goal_of(request) == "count the words":
            raise ProcessDied("the model's process went away")
        turn = sum(m.role == "assistant" for m in request.messages)
        return [
            reply("splitting", [spawn("count the words", "count.txt")], USAGE),
            reply("finishing", [write("root.txt")], USAGE),
        ][turn]

    provider = ScriptedProvider(answer)
    harness = Harness(provider, store=store, containment=Containment(max_depth=1))
    tree = support.contract(work, goal="coordinate", file="root.txt", max_steps=4)
    result = await harness.run(tree, run_id="root")
    assert result.outcome is RunOutcome.SUCCESS
    return provider


async def test_a_child_whose_provider_raises_a_base_exception_ends_with_a_stored_outcome(
    tmp_path: Path, store: Store
) -> None:
    work = tmp_path / "work"
    work.mkdir()

    provider = await flaky_child_tree(work, store)

    child = store.load_run("root.1")
    assert (child.status, child.outcome) == ("finished", "provider_failed")
    assert child.error_json is not None
    error = json.loads(child.error_json)
    assert (
        "the sub-agent's drive raised ProcessDied: the model's process went away"
        in (error["message"])
    )
    assert [e.kind for e in store.trace("root.1").events][-1] == "run_finished"
    second_turn = [r for r in provider.requests if goal_of(r) == "coordinate"][1]
    told = str(second_turn.messages[-1].content[0].content)  # type: ignore[union-attr]
    assert told.startswith("sub-agent root.1 ('count the words'): provider_failed after 0 steps")
    assert "its error: bad_response: the sub-agent's drive raised ProcessDied" in told
    assert [n.run.status for n in store.tree("root")] == ["finished", "finished"]


def test_ioh_tree_shows_a_child_that_raised_as_ended(
    tmp_path: Path, store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    asyncio.run(flaky_child_tree(work, store))

    assert main(["tree", "root", "--store", str(tmp_path / "runs.db")]) == 0
    shown = capsys.readouterr().out
    assert "provider_failed" in shown and "running" not in shown


# -- a resume reaches the endpoint its run started with ---------------------------------------

KEY = "sk-ant-test-hardening-0123456789abcdef"
PUBLIC = "api.anthropic.com:443"
DRAFT = json.dumps({"path": "out.txt", "content": "draft\n"})
HELLO = json.dumps({"path": "out.txt", "content": "hello\n"})
POLICY = """
[policy]
base = "guarded"
[policy.layers.org]
deny_net = ["api.anthropic.com"]
"""
"""Writes are asked about; the vendor's public host is never dialled, whatever happens."""


def writes(content: str) -> Reply:
    return messages_stream(
        "Writing.",
        tool_calls=[("toolu_w", "write_file", content)],
        usage={"input_tokens": 90, "output_tokens": 4},
    )


@pytest.fixture
def vendor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Anthropic's key set, and neither its model nor its base URL, as in a fresh shell."""
    for variable in ("ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def gateway(vendor: None) -> Iterator[LoopbackServer]:
    """The endpoint the runs start with, a gateway: a draft (asked about), then hello
    (remembered, so allowed)."""
    with LoopbackServer([writes(DRAFT), writes(HELLO)]) as server:
        yield server


def started_at_the_gateway(
    tmp_path: Path, gateway: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """``ioh run`` with the gateway's base URL set, paused on its first write; then the
    variable is gone, as in another shell. The contract file and the store."""
    (tmp_path / "ws").mkdir()
    contract = tmp_path / "contract.toml"
    contract.write_text(
        'goal = "write hello to out.txt"\nroot = "ws"\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
        "[budget]\nmax_retries = 0\nmax_steps = 4\n" + POLICY
    )
    store = tmp_path / "runs.db"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", gateway.url)
    argv = ["run", str(contract), "--provider", "anthropic:claude-test", "--run-id", "r1"]
    assert main([*argv, "--store", str(store)]) == 3  # awaiting approval
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    assert len(gateway.requests) == 1
    return contract, store


def test_ioh_approve_in_a_shell_without_the_base_url_goes_on_at_the_endpoint_the_run_started_with(
    tmp_path: Path,
    gateway: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, store = started_at_the_gateway(tmp_path, gateway, monkeypatch)
    capsys.readouterr()

    status = main(["approve", "r1", "--remember", "--store", str(store)])

    out = capsys.readouterr().out
    assert status == 0, out
    assert "outcome: success" in out
    assert len(gateway.requests) == 2  # the resumed run's model call went to the gateway
    assert (tmp_path / "ws" / "out.txt").read_text() == "hello\n"


def test_ioh_resume_with_a_provider_that_would_reach_another_endpoint_is_refused_and_says_why(
    tmp_path: Path,
    gateway: LoopbackServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, store = started_at_the_gateway(tmp_path, gateway, monkeypatch)
    capsys.readouterr()
    given = ["--provider", "anthropic:claude-test", "--store", str(store)]

    refused = main(["approve", "r1", "--remember", *given])
    err = capsys.readouterr().err
    # The decision was stored before the resume was refused: a resume that is told
    # nothing about the provider rebuilds the run's own and performs it.
    resumed = main(["resume", "r1", "--store", str(store)])

    assert refused == 2, err
    assert f"connecting to {gateway.host}, and this resume's would connect to {PUBLIC}" in err
    assert f"set ANTHROPIC_BASE_URL to the base URL the run started with ({gateway.url})" in err
    assert "Traceback" not in err
    assert resumed == 0, capsys.readouterr()
    assert len(gateway.requests) == 2


async def test_a_resume_through_the_api_whose_provider_moved_is_refused_before_any_request(
    tmp_path: Path, store: Store, vendor: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    task = support.contract(root, goal="write hello", file="out.txt", needle="hello", max_retries=0)
    policy = Policy.guarded().layer("org").deny_net("api.anthropic.com")
    with LoopbackServer([writes(HELLO)]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        waiting = await run(task, Anthropic("claude-test"), store=store, policy=policy)
        monkeypatch.delenv("ANTHROPIC_BASE_URL")
        assert waiting.outcome is RunOutcome.AWAITING_APPROVAL
        approve = Decision.approve()

        with pytest.raises(ResumeError) as moved:
            await resume(waiting.run_id, Anthropic("claude-test"), store=store, decision=approve)
        there = Anthropic("claude-test", base_url=server.url)
        done = await resume(waiting.run_id, there, store=store, decision=approve)

    said = str(moved.value)
    assert f"started with the provider 'anthropic' connecting to {server.host}" in said
    assert f"would connect to {PUBLIC}" in said and "so nothing was sent" in said
    assert f"base_url={server.url!r} or set ANTHROPIC_BASE_URL" in said
    assert done.outcome is RunOutcome.SUCCESS
    assert len(server.requests) == 1  # the first run's only call: the approved write passed


async def test_a_run_remembers_where_its_provider_connected_but_never_a_credential_in_its_url(
    tmp_path: Path, store: Store
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    secret = "hunter2-in-the-url"
    with LoopbackServer([writes(HELLO)]) as server:
        url = f"http://user:{secret}@{server.host}"
        provider = Anthropic("claude-test", api_key=KEY, base_url=url)
        await run(
            support.contract(root, file="out.txt", needle="hello"),
            provider,
            store=store,
            run_id="r1",
        )

    setup = store.load_run("r1").setup_json
    assert setup is not None and secret not in setup
    assert json.loads(setup)["provider"] == [
        {"name": "anthropic", "model": "claude-test", "endpoints": [server.host], "base_url": None}
    ]
