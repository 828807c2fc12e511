"""``ask_user``: the model asks the person; the run waits ``AWAITING_ANSWER`` as a deferred
approval does, and an answer given in any later process is the tool's result."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import support
from _stores import StoreFactory
from io_harness import (
    Answerer,
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Containment,
    Decision,
    Harness,
    Policy,
    Question,
    RunOutcome,
    StdinAnswerer,
    Store,
)
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply
from loopback import LoopbackServer
from support import USAGE, goal_of, observation, spawn, write
from wire_openai import chat_stream, usage

TESTS = Path(__file__).parent
ASK = call("ask_user", question="Which file should hold it?", choices=["done.txt", "other.txt"])


def asking() -> ScriptedProvider:
    return ScriptedProvider([reply("I need to know", [ASK])])


def writes() -> list[CompletionResponse]:
    return [reply("writing", [write("done.txt")]), reply("done")]


def answered_then_writes() -> ScriptedProvider:
    return ScriptedProvider(writes())


def python(*argv: str) -> subprocess.CompletedProcess[str]:
    """A new Python process given ``argv``, bounded in time."""
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, timeout=120, check=False
    )


def location(factory: StoreFactory) -> str:
    return str(factory.location)


async def test_a_question_waits_and_an_answer_in_a_new_process_reaches_the_model(
    tmp_path: Path, store_factory: StoreFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_factory()
    waiting = await Harness(asking(), store=store, ask=True).run(
        support.contract(tmp_path), run_id="q1"
    )

    assert waiting.outcome is RunOutcome.AWAITING_ANSWER
    assert waiting.request is not None
    assert waiting.request.question == "Which file should hold it?"
    assert waiting.request.choices == ("done.txt", "other.txt")
    assert store.load_run("q1").status == "awaiting"
    assert [row.run_id for row in store.approvals()] == ["q1"]
    assert main(["pending", "--store", location(store_factory)]) == 0
    pending = capsys.readouterr().out
    assert "Which file should hold it?" in pending and "ioh answer q1 TEXT" in pending

    script = tmp_path / "answer.py"
    script.write_text(
        "import asyncio, json, sys\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "from io_harness import Store, resume\n"
        "from test_ask_user import answered_then_writes\n"
        "from support import observation\n"
        "provider = answered_then_writes()\n"
        "with Store.open(sys.argv[1]) as store:\n"
        "    done = asyncio.run(resume('q1', provider, store=store, answer='done.txt'))\n"
        "print(json.dumps([done.outcome.value, observation(provider, 0)]))\n"
    )
    finished = await asyncio.to_thread(python, str(script), location(store_factory))

    assert finished.returncode == 0, finished.stderr
    assert json.loads(finished.stdout) == ["success", "done.txt"]
    assert store.approvals() == []
    (row,) = store.trace("q1").approvals
    assert row.status == "done" and row.decision is not None
    assert row.decision.kind == "answer" and row.decision.answer == "done.txt"
    assert main(["show", "q1", "--store", location(store_factory)]) == 0
    assert "answered by resume(): done.txt" in capsys.readouterr().out


async def test_ioh_answer_in_a_new_process_stores_the_answer_the_next_resume_uses(
    tmp_path: Path,
) -> None:
    store = Store.open(tmp_path / "runs.db")
    await Harness(asking(), store=store, ask=True).run(support.contract(tmp_path), run_id="q2")

    ioh = "import sys; from io_harness.cli import main; sys.exit(main())"
    store_path = str(tmp_path / "runs.db")
    argv = ["-c", ioh, "answer", "q2", "other.txt", "--no-resume", "--store", store_path]
    answered = await asyncio.to_thread(python, *argv)

    assert answered.returncode == 0, answered.stderr
    assert "answered: question 'Which file should hold it?'" in answered.stdout
    provider = answered_then_writes()
    done = await Harness(provider, store=store).resume("q2")
    assert done.outcome is RunOutcome.SUCCESS
    assert observation(provider, 0) == "other.txt"


async def test_an_answerer_answers_at_once(tmp_path: Path) -> None:
    asked: list[Question] = []

    async def answerer(question: Question) -> str | None:
        asked.append(question)
        return "done.txt"

    provider = ScriptedProvider([reply("asking", [ASK]), *writes()])
    result = await Harness(provider, ask=True, answerer=answerer).run(support.contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    assert [q.question for q in asked] == ["Which file should hold it?"]
    assert observation(provider, 1) == "done.txt"
    assert isinstance(StdinAnswerer(), Answerer)


async def test_an_approver_may_answer_and_an_answerer_may_defer(tmp_path: Path) -> None:
    from io_harness import CallbackApprover

    async def nobody(question: Question) -> str | None:
        return None

    approver = CallbackApprover(lambda request, context: Decision.answered("done.txt"))
    provider = ScriptedProvider([reply("asking", [ASK]), *writes()])
    harness = Harness(provider, ask=True, answerer=nobody, approver=approver)

    result = await harness.run(support.contract(tmp_path))

    assert result.outcome is RunOutcome.SUCCESS
    assert observation(provider, 1) == "done.txt"


async def test_an_answer_to_a_run_not_awaiting_one_is_refused_with_its_status(
    tmp_path: Path, store_factory: StoreFactory
) -> None:
    store = store_factory()
    done = await Harness(answered_then_writes(), store=store).run(support.contract(tmp_path))
    assert done.outcome is RunOutcome.SUCCESS

    with pytest.raises(ConfigError, match=r"not awaiting an answer \(it is finished: success\)"):
        await Harness(ScriptedProvider([]), store=store).resume(done.run_id, answer="x")

    approval = ScriptedProvider([reply("writing", [write("done.txt")])])
    waiting = await Harness(approval, store=store, policy=Policy.guarded()).run(
        support.contract(tmp_path, file="never.txt")
    )
    assert waiting.outcome is RunOutcome.AWAITING_APPROVAL
    with pytest.raises(ConfigError, match=r"awaits a decision on write done\.txt"):
        await Harness(ScriptedProvider([]), store=store).resume(waiting.run_id, answer="x")
    status = main(["answer", waiting.run_id, "x", "--store", location(store_factory)])
    assert status != 0
    assert store.approvals()[0].decision_json is None


async def test_an_answer_outside_the_choices_is_refused_and_the_question_still_waits(
    tmp_path: Path, store_factory: StoreFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_factory()
    waiting = await Harness(asking(), store=store, ask=True).run(support.contract(tmp_path))

    with pytest.raises(ConfigError, match="'elsewhere' is not one of the choices"):
        await Harness(ScriptedProvider([]), store=store).resume(waiting.run_id, answer="elsewhere")
    status = main(
        ["answer", waiting.run_id, "elsewhere", "--no-resume", "--store", location(store_factory)]
    )
    assert status != 0
    assert "not one of the choices" in capsys.readouterr().err

    (row,) = store.approvals()
    assert row.status == "pending" and row.decision_json is None
    with pytest.raises(ConfigError, match="awaits an answer"):
        await Harness(ScriptedProvider([]), store=store).resume(waiting.run_id)


async def test_an_unanswered_question_past_the_wall_budget_ends_the_run(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "runs.db")
    waiting = await Harness(asking(), store=store, ask=True).run(
        support.contract(tmp_path, max_wall_seconds=1)
    )
    assert waiting.outcome is RunOutcome.AWAITING_ANSWER
    await asyncio.sleep(1.1)  # nobody answers within the run's wall budget

    ended = await Harness(ScriptedProvider([]), store=store).resume(waiting.run_id)

    assert ended.outcome is RunOutcome.TIME_BUDGET_EXCEEDED
    (row,) = store.trace(waiting.run_id).approvals
    assert row.status == "done" and row.decision is not None and row.decision.kind == "deny"


async def test_a_contract_flag_offers_ask_user(tmp_path: Path) -> None:
    provider = asking()
    waiting = await Harness(provider).run(support.contract(tmp_path, tools=["ask_user"]))

    assert waiting.outcome is RunOutcome.AWAITING_ANSWER
    assert "ask_user" in [spec.name for spec in provider.requests[0].tools]


class Agents:
    """Each agent answered from its own script, by goal and turn."""

    def __init__(self, scripts: dict[str, list[CompletionResponse]]) -> None:
        self.scripts = scripts

    def __call__(self, request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        return self.scripts[goal_of(request)][turn]


async def test_a_childs_question_pauses_the_tree_and_is_answered_through_the_root(
    tmp_path: Path, store_factory: StoreFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    store = store_factory()
    child_asks = call("ask_user", question="What goes in c.txt?")
    agents = Agents(
        {
            "coordinate": [
                reply("delegate", [spawn("careful", "c.txt")], USAGE),
                reply("finishing", [write("root.txt")], USAGE),
            ],
            "careful": [
                reply("asking", [child_asks], USAGE),
                reply("writing", [write("c.txt")], USAGE),
                reply("written", usage=USAGE),
            ],
        }
    )
    harness = Harness(
        ScriptedProvider(agents), store=store, ask=True, containment=Containment(max_depth=1)
    )
    root = support.contract(tmp_path, goal="coordinate", file="root.txt")

    paused = await harness.run(root, run_id="t")

    assert paused.outcome is RunOutcome.AWAITING_ANSWER
    assert paused.request is not None and paused.request.question == "What goes in c.txt?"
    assert [row.run_id for row in store.approvals()] == ["t.1"]
    assert main(["tree", "t.1", "--store", location(store_factory)]) == 0
    tree = capsys.readouterr().out
    assert "t.1 awaits an answer: question 'What goes in c.txt?'" in tree
    assert "answer: ioh answer t TEXT" in tree

    resumed = await harness.resume("t", answer="the word done")

    assert resumed.outcome is RunOutcome.SUCCESS
    assert (tmp_path / "c.txt").read_text() == "done\n"
    (row,) = store.trace("t.1").approvals
    assert row.decision is not None and row.decision.answer == "the word done"


def by_turn(request: CompletionRequest) -> CompletionResponse:
    """Ask first, then write done.txt, then stop."""
    turn = sum(m.role == "assistant" for m in request.messages)
    return [reply("asking", [ASK]), *writes()][turn]


async def test_a_queued_run_that_asks_leaves_the_queue_until_answered(
    postgres_url: str, tmp_path: Path
) -> None:
    with Store.open(postgres_url) as store:
        harness = Harness(ScriptedProvider(by_turn), store=store, ask=True)
        run_id = await harness.enqueue(support.contract(tmp_path))
        heard: list[str] = []

        async def drain() -> None:
            await harness.work(
                concurrency=1,
                drain=True,
                heartbeat_timeout=3,
                on_drive=lambda d: heard.append(d.result.outcome.value if d.result else d.kind),
            )

        await asyncio.wait_for(drain(), 120)  # returns: the asking run is out of the queue
        assert heard == [RunOutcome.AWAITING_ANSWER.value]
        assert store.load_run(run_id).status == "awaiting"

        with pytest.raises(ConfigError, match="not one of the choices"):
            await harness.requeue(run_id, answer="elsewhere")
        await harness.requeue(run_id, answer="done.txt")
        await asyncio.wait_for(drain(), 120)
        assert heard[-1] == RunOutcome.SUCCESS.value


async def test_the_stdin_answerer_picks_a_choice_by_number_and_defers_on_an_empty_line() -> None:
    question = Question("r", 1, "c", "Which?\x1b[2J", ("a", "b"))
    out = io.StringIO()

    assert await StdinAnswerer(io.StringIO("nope\n2\n"), out)(question) == "b"
    assert "\\x1b[2J" in out.getvalue() and "'nope' is not one of the choices" in out.getvalue()
    assert await StdinAnswerer(io.StringIO("\n"), io.StringIO())(question) is None
    assert await StdinAnswerer(io.StringIO(""), io.StringIO())(question) is None


def test_ioh_run_ask_waits_and_ioh_answer_resumes_it_with_the_stored_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    ask = json.dumps({"question": "Which file?", "choices": ["done.txt", "other.txt"]})
    wrote = json.dumps({"path": "done.txt", "content": "done\n"})
    script = [
        chat_stream("A question.", tool_calls=[("call_a", "ask_user", ask)], usage=usage(10, 5)),
        chat_stream("Writing.", tool_calls=[("call_w", "write_file", wrote)], usage=usage(10, 5)),
        chat_stream("Done.", usage=usage(10, 5)),
    ]
    (tmp_path / "ws").mkdir()
    contract = tmp_path / "contract.toml"
    contract.write_text(
        'goal = "write done.txt"\nroot = "ws"\n[verify]\nkind = "workspace_file_contains"\n'
        'file = "done.txt"\nneedle = "done"\n[budget]\nmax_retries = 0\nmax_steps = 3\n'
    )
    store = ["--store", str(tmp_path / "runs.db")]
    with LoopbackServer(script) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-ask-0123456789")
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        run = ["run", str(contract), "--provider", "openai:gpt-test", "--run-id", "r1", "--ask"]

        assert main([*run, *store]) == 3
        out = capsys.readouterr().out
        assert "awaiting an answer: Which file?" in out and "ioh answer r1 TEXT" in out

        assert main(["answer", "r1", "done.txt", *store]) == 0
        out = capsys.readouterr().out
        assert "answered: question 'Which file?' (ask_user)" in out
        assert "outcome: success" in out
        assert b"done.txt" in server.requests[1].body
    assert main(["answer", "r1", "again", *store]) != 0
    assert "not awaiting an answer (it is finished: success)" in capsys.readouterr().err


async def test_ioh_approve_of_a_question_is_refused_and_ioh_deny_declines_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store.open(tmp_path / "runs.db")
    waiting = await Harness(asking(), store=store, ask=True).run(support.contract(tmp_path))
    where = ["--store", str(tmp_path / "runs.db")]

    assert main(["approve", waiting.run_id, "--no-resume", *where]) != 0
    assert "awaits an answer to question 'Which file should hold it?'" in capsys.readouterr().err
    deny = ["deny", waiting.run_id, "--reason", "decide yourself", "--no-resume", *where]
    assert main(deny) == 0

    provider = answered_then_writes()
    done = await Harness(provider, store=store).resume(waiting.run_id)
    assert done.outcome is RunOutcome.SUCCESS
    assert observation(provider, 0) == "ask_user: the person would not answer: decide yourself"
