"""A run that stops without success can go on: `Harness.continue_run` and `ioh resume`.

The run goes on from its last commit under a new budget (recorded), with a user turn
the model reads; its steps stay contiguous and nothing is repeated; success is final.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

import crash_worker
from _stores import StoreFactory
from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Containment,
    Harness,
    ProviderError,
    ResumeError,
    RunOutcome,
    StorageError,
    Store,
)
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply
from loopback import LoopbackServer, Reply
from support import USAGE, child, contract, goal_of, spawn, write
from wire_openai import chat_stream, error_reply, usage


def looks_then_writes(after_looks: int) -> ScriptedProvider:
    """A model that lists the folder ``after_looks`` times, then writes done.txt, then stops."""

    def answer(request: CompletionRequest) -> CompletionResponse:
        turns = sum(m.role == "assistant" for m in request.messages)
        if turns < after_looks:
            return reply("looking", [call("list_dir")])
        if turns == after_looks:
            return reply("writing", [write("done.txt")])
        return reply("done")

    return ScriptedProvider(answer)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "runs.db")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


async def test_a_run_stopped_at_its_step_cap_goes_on_with_more_steps_to_success(
    root: Path, store: Store
) -> None:
    provider = looks_then_writes(3)
    harness = Harness(provider, store=store)
    stopped = await harness.run(contract(root, max_steps=2))
    assert stopped.outcome is RunOutcome.STEP_CAP_REACHED and stopped.steps == 2

    done = await harness.continue_run(stopped.run_id, budget=Budget(max_steps=6))

    assert done.outcome is RunOutcome.SUCCESS
    assert done.run_id == stopped.run_id and done.steps == 4
    trace = store.trace(done.run_id)
    assert [s.step for s in trace.steps] == [1, 2, 3, 4]  # contiguous, none repeated
    assert json.loads(store.load_run(done.run_id).contract_json)["budget"]["max_steps"] == 6
    continued = [e for e in trace.events if e.kind == "run_continued"]
    assert len(continued) == 1 and continued[0].step == 2
    # The model saw the whole conversation again, never a reset one.
    assert len(provider.requests[2].messages) == len(provider.requests[1].messages) + 2


async def test_a_message_is_a_user_turn_the_model_reads_next_and_ioh_show_shows(
    root: Path, store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    provider = looks_then_writes(2)
    harness = Harness(provider, store=store)
    stopped = await harness.run(contract(root, max_steps=1))

    done = await harness.continue_run(
        stopped.run_id, budget=Budget(max_steps=5), message="the file is done.txt, write it"
    )

    assert done.outcome is RunOutcome.SUCCESS
    told = provider.requests[1].messages[-1]
    assert told.role == "user" and told.text == "the file is done.txt, write it"
    store.close()
    assert main(["show", stopped.run_id, "--store", str(tmp_path / "runs.db")]) == 0
    shown = capsys.readouterr().out
    assert "continued" in shown and "the file is done.txt, write it" in shown


async def test_a_run_whose_provider_failed_goes_on_with_its_own_budget(
    root: Path, store: Store
) -> None:
    failing = ScriptedProvider([ProviderError("auth", "the key was revoked")])
    stopped = await Harness(failing, store=store).run(contract(root, max_steps=5))
    assert stopped.outcome is RunOutcome.PROVIDER_FAILED

    done = await Harness(looks_then_writes(0), store=store).continue_run(stopped.run_id)

    assert done.outcome is RunOutcome.SUCCESS and done.steps == 1
    attempts = store.trace(done.run_id).provider_calls
    # The failed attempt stays where it was; the step's next attempt numbers on from it.
    assert [(a.step, a.attempt, a.error_kind) for a in attempts][:2] == [
        (1, 1, "auth"),
        (1, 2, None),
    ]


async def test_success_is_final(root: Path, store: Store) -> None:
    harness = Harness(looks_then_writes(0), store=store)
    done = await harness.run(contract(root))

    with pytest.raises(ResumeError, match="success is final: start a new run"):
        await harness.continue_run(done.run_id, budget=Budget(max_steps=50))
    assert (await harness.resume(done.run_id)).outcome is RunOutcome.SUCCESS  # unchanged


async def test_a_capped_run_without_more_is_told_what_to_give(root: Path, store: Store) -> None:
    harness = Harness(looks_then_writes(5), store=store)
    stopped = await harness.run(contract(root, max_steps=2))

    with pytest.raises(ConfigError, match="stopped at its step cap: continue it with more"):
        await harness.continue_run(stopped.run_id)
    with pytest.raises(ConfigError, match="max_steps = 2: it has 2 steps taken already"):
        await harness.continue_run(stopped.run_id, budget=Budget(max_steps=2))
    # Refused before anything changed: the run is still stopped, as it was.
    assert store.load_run(stopped.run_id).outcome == "step_cap_reached"


async def test_a_run_that_has_not_stopped_is_resumed_not_continued(
    root: Path, store: Store
) -> None:
    class Crash(BaseException):
        pass

    crashing = ScriptedProvider([reply("looking", [call("list_dir")]), Crash()])
    with pytest.raises(Crash):
        await Harness(crashing, store=store).run(contract(root), run_id="cut")

    harness = Harness(looks_then_writes(1), store=store)
    with pytest.raises(ResumeError, match="has not stopped \\(it is running\\)"):
        await harness.continue_run("cut", budget=Budget(max_steps=9))
    assert (await harness.resume("cut")).outcome is RunOutcome.SUCCESS


async def test_bad_arguments_are_config_errors(root: Path, store: Store) -> None:
    harness = Harness(looks_then_writes(5), store=store)
    stopped = await harness.run(contract(root, max_steps=1))
    with pytest.raises(ConfigError, match="message must be a non-empty string"):
        await harness.continue_run(stopped.run_id, budget=Budget(max_steps=3), message="  ")
    with pytest.raises(ConfigError, match="budget must be a Budget, not dict"):
        await harness.continue_run(stopped.run_id, budget={"max_steps": 3})  # type: ignore[arg-type]
    with pytest.raises(ResumeError):
        await harness.continue_run("no-such-run", budget=Budget(max_steps=3))


# -- ioh resume, against a loopback server speaking OpenAI's wire ---------------------------

KEY = "sk-test-continue-0123456789abcdef"
LIST = chat_stream("Looking.", tool_calls=[("call_l", "list_dir", "{}")], usage=usage(100, 5))
WRITE = chat_stream(
    "Writing.",
    tool_calls=[("call_w", "write_file", json.dumps({"path": "out.txt", "content": "hello\n"}))],
    usage=usage(100, 5),
)


class Cli:
    """A contract that wants ``hello`` in ``out.txt``, its store, and ``ioh`` on them."""

    def __init__(self, tmp_path: Path, budget: str) -> None:
        (tmp_path / "ws").mkdir()
        self.contract = tmp_path / "contract.toml"
        self.contract.write_text(
            'goal = "write hello to out.txt"\nroot = "ws"\n'
            '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
            f"[budget]\n{budget}\n"
        )
        self.store = str(tmp_path / "runs.db")

    def __call__(self, *argv: str) -> int:
        return main([*argv, "--store", self.store])


def served(monkeypatch: pytest.MonkeyPatch, script: list[Reply]) -> LoopbackServer:
    server = LoopbackServer(script)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
    monkeypatch.setenv("COLUMNS", "250")
    return server


def test_ioh_resume_continues_a_run_whose_provider_failed_and_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ioh = Cli(tmp_path, "max_retries = 0")
    outage = error_reply(503, "the model server is down")
    with served(monkeypatch, [LIST, outage, WRITE]) as server:
        assert ioh("run", str(ioh.contract), "--provider", "openai:gpt-test", "--run-id", "r1") == 1
        stopped = " ".join(capsys.readouterr().out.split())
        assert "outcome: provider_failed after 1 step" in stopped
        assert "continue it: ioh resume r1" in stopped

        assert ioh("resume", "r1", "--say", "the server is back: write it") == 0

        done = " ".join(capsys.readouterr().out.split())
        last = server.requests[-1].json["messages"][-1]
    assert "outcome: success after 2 steps" in done
    assert last == {"role": "user", "content": "the server is back: write it"}
    assert (tmp_path / "ws" / "out.txt").read_text() == "hello\n"
    with Store.open(ioh.store) as store:
        assert [s.step for s in store.trace("r1").steps] == [1, 2]
    assert ioh("show", "r1") == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "continued after step 1 (it had stopped: provider_failed)" in shown
    assert "said to the model: the server is back: write it" in shown


def test_ioh_resume_add_steps_gives_a_capped_run_more_and_records_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ioh = Cli(tmp_path, "max_steps = 1\nmax_retries = 0")
    with served(monkeypatch, [LIST, WRITE]):
        assert ioh("run", str(ioh.contract), "--provider", "openai:gpt-test", "--run-id", "r1") == 1
        assert "continue it: ioh resume r1" in capsys.readouterr().out
        assert ioh("resume", "r1") == 2  # a capped run without more is told what to give
        assert "--add-steps N" in capsys.readouterr().err

        assert ioh("resume", "r1", "--add-steps", "2") == 0

    assert "outcome: success after 2 steps" in " ".join(capsys.readouterr().out.split())
    with Store.open(ioh.store) as store:
        budget = json.loads(store.load_run("r1").contract_json)["budget"]
    assert budget["max_steps"] == 3
    assert ioh("resume", "r1", "--add-steps", "2") == 2
    assert "success is final" in capsys.readouterr().err


def test_a_continued_run_killed_mid_step_resumes_with_every_note_written_once(
    tmp_path: Path,
) -> None:
    root, db = tmp_path / "project", tmp_path / "runs.db"
    root.mkdir()
    with Store.open(db) as store:
        stopped = Harness(crash_worker.provider(0, "none"), store=store).run_sync(
            crash_worker.contract(root, max_steps=3), run_id="r"
        )
    assert stopped.outcome is RunOutcome.STEP_CAP_REACHED

    # Continued in another process, which dies by SIGKILL in step 5's model call.
    worker = [sys.executable, str(Path(crash_worker.__file__)), str(db), str(root)]
    died = subprocess.run(
        [*worker, "continue", "r", "5", "call"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert died.returncode == -signal.SIGKILL, died.stderr[-2000:]

    with Store.open(db) as store:
        done = Harness(crash_worker.provider(0, "none"), store=store).resume_sync("r")
        trace = store.trace("r")
    assert done.outcome is RunOutcome.SUCCESS and done.steps == crash_worker.STEPS
    assert [s.step for s in trace.steps] == list(range(1, crash_worker.STEPS + 1))
    notes = sorted(p.name for p in (root / "notes").iterdir())
    assert notes == [f"{turn}.txt" for turn in range(crash_worker.STEPS - 1)]
    assert [m.text for m in trace.messages if m.role == "user"][1:] == ["go on"]


async def test_continuing_works_alike_on_each_store_and_refuses_while_another_drives(
    root: Path, store_factory: StoreFactory
) -> None:
    store = store_factory()
    harness = Harness(looks_then_writes(2), store=store)
    stopped = await harness.run(contract(root, max_steps=1))

    other = store_factory()
    with other.lease(stopped.run_id), pytest.raises(ResumeError, match="another writer"):
        await harness.continue_run(stopped.run_id, budget=Budget(max_steps=5))
    done = await harness.continue_run(stopped.run_id, budget=Budget(max_steps=5), message="go")

    assert done.outcome is RunOutcome.SUCCESS and done.steps == 3
    assert [s.step for s in store.trace(done.run_id).steps] == [1, 2, 3]


async def test_a_continued_tree_root_stays_inside_its_trees_containment(root: Path) -> None:
    scripts = {
        "coordinate": [
            reply("first", [spawn("write a", "a.txt")], USAGE),
            reply("second", [spawn("write b", "b.txt")], USAGE),
            reply("finishing", [write("root.txt")], USAGE),
        ],
        "write a": child("a.txt"),
        "write b": child("b.txt"),
    }

    def answer(request: CompletionRequest) -> CompletionResponse:
        goal = goal_of(request)
        return scripts[goal][sum(m.role == "assistant" for m in request.messages)]

    store = Store.memory()
    harness = Harness(
        ScriptedProvider(answer),
        store=store,
        containment=Containment(max_depth=1, max_total_agents=2),  # the root and one child
    )
    root_contract = partial(contract, goal="coordinate", file="root.txt")
    stopped = await harness.run(root_contract(root, max_steps=1), run_id="root")
    assert stopped.outcome is RunOutcome.STEP_CAP_REACHED

    done = await harness.continue_run("root", budget=Budget(max_steps=5))

    assert done.outcome is RunOutcome.SUCCESS
    assert (root / "a.txt").exists() and not (root / "b.txt").exists()
    assert [node.run.id for node in store.tree("root")] == ["root", "root.1"]


async def test_a_finished_run_with_an_unknown_outcome_is_a_storage_error(
    root: Path, store_factory: StoreFactory
) -> None:
    store = store_factory()
    harness = Harness(looks_then_writes(5), store=store)
    stopped = await harness.run(contract(root, max_steps=1))
    store_factory.sql("UPDATE runs SET outcome = ? WHERE id = ?", "vanished", stopped.run_id)

    with pytest.raises(StorageError, match="row of runs that does not load: outcome"):
        await harness.continue_run(stopped.run_id, budget=Budget(max_steps=4))
