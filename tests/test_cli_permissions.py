"""``ioh`` and the permission boundary: a [policy] in the contract, pending actions, decisions."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness import Policy, RunOutcome, Store, TaskContract, run
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply
from loopback import LoopbackServer, Reply
from support import HOSTILE, HOSTILE_SHOWN, active_in
from wire_openai import chat_stream, usage

KEY = "sk-test-permissions-0123456789"
WRITE = json.dumps({"path": "out.txt", "content": "hello\n"})
WANTS_HELLO = '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
POLICY = """
[policy]
base = "guarded"
[policy.layers.app]
allow_write = ["notes/*"]
deny_read = ["private/*"]
"""


def write_reply() -> Reply:
    return chat_stream("Writing.", tool_calls=[("call_w", "write_file", WRITE)], usage=usage(10, 5))


def text_reply(text: str = "I will stop.") -> Reply:
    return chat_stream(text, usage=usage(10, 5))


class Project:
    """A workspace and a contract (with ``policy``) that wants ``hello`` in ``out.txt``."""

    def __init__(self, tmp_path: Path, policy: str = POLICY, verify: str = "") -> None:
        self.root = tmp_path / "ws"
        self.root.mkdir()
        self.contract = tmp_path / "contract.toml"
        self.contract.write_text(
            'goal = "write hello to out.txt"\nroot = "ws"\n'
            + (verify or WANTS_HELLO)
            + "[budget]\nmax_retries = 0\nmax_steps = 3\n"
            + policy
        )
        self.store = tmp_path / "runs.db"

    def ioh(self, *argv: str) -> int:
        return main([*argv, "--store", str(self.store)])


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopbackServer]:
    with LoopbackServer([write_reply(), text_reply(), text_reply()]) as running:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{running.url}/v1")
        yield running


def test_an_ask_defers_without_a_terminal_and_ioh_approve_performs_it_with_the_stored_provider(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)

    status = project.ioh(
        "run", str(project.contract), "--provider", "openai:gpt-test", "--run-id", "r1"
    )

    out = capsys.readouterr().out
    assert status == 3, out
    assert "awaiting approval: write out.txt (write_file)" in out
    assert "ioh approve r1" in out
    assert not (project.root / "out.txt").exists()

    assert project.ioh("runs") == 0
    assert "awaiting" in capsys.readouterr().out
    assert project.ioh("pending") == 0
    pending = capsys.readouterr().out
    assert "r1 step 1: write out.txt (write_file)" in pending
    assert "the default for write" in pending and "+hello" in pending

    assert project.ioh("approve", "r1") == 0
    out = capsys.readouterr().out
    assert "approved: write out.txt (write_file)" in out
    assert "outcome: success" in out
    assert (project.root / "out.txt").read_text() == "hello\n"
    assert len(server.requests) == 1  # the approved write passed the check: no second call

    assert project.ioh("pending") == 0
    assert "no actions are awaiting approval" in capsys.readouterr().out
    assert project.ioh("show", "r1") == 0
    shown = capsys.readouterr().out
    assert "deferred by nobody write out.txt" in shown
    assert "(ioh approve) write out.txt" in shown


def test_a_denial_stored_without_resuming_is_performed_by_the_next_resume(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    project.ioh("run", str(project.contract), "--provider", "openai:gpt-test", "--run-id", "r1")
    capsys.readouterr()

    assert project.ioh("deny", "r1", "--reason", "write notes/out.txt instead", "--no-resume") == 0
    out = capsys.readouterr().out
    assert "denied: write out.txt" in out and "the next resume performs it: ioh resume r1" in out
    assert project.ioh("pending") == 0
    assert "(decided; resume performs it)" in capsys.readouterr().out
    assert project.ioh("approve", "r1") == 2
    assert "already decided" in capsys.readouterr().err

    assert project.ioh("resume", "r1") == 1
    assert not (project.root / "out.txt").exists()
    sent = server.requests[1].json["messages"][-1]
    assert sent["role"] == "tool" and "write notes/out.txt instead" in sent["content"]


def test_approve_all_and_deny_choices_decide_without_asking(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    argv = ["run", str(project.contract), "--provider", "openai:gpt-test"]

    assert project.ioh(*argv, "--run-id", "denied", "--approve", "deny") == 1
    assert not (project.root / "out.txt").exists()
    assert project.ioh("show", "denied") == 0
    assert "denied by DenyAll write out.txt" in capsys.readouterr().out


def test_policy_explain_names_the_rule_and_layer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)

    assert main(["policy", "explain", str(project.contract), "write", "keys/server.pem"]) == 0
    assert capsys.readouterr().out.strip() == (
        "write keys/server.pem: deny (rule 'deny write *.pem' in layer 'builtin-secrets')"
    )
    assert main(["policy", "explain", str(project.contract), "write", "notes/a.md"]) == 0
    assert "allow (rule 'allow write notes/*' in layer 'app')" in capsys.readouterr().out
    assert main(["policy", "show", str(project.contract)]) == 0
    assert "builtin-secrets" in capsys.readouterr().out

    assert main(["policy", "explain", str(project.contract), "delete", "x"]) == 2
    assert "unknown act 'delete'; the acts are: read, write, exec, net" in capsys.readouterr().err


def test_a_contract_without_a_policy_runs_under_the_default_and_explain_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path, policy="")

    assert main(["policy", "explain", str(project.contract), "write", ".env"]) == 0
    out = capsys.readouterr().out
    assert "has no [policy]; runs use the default one: write .env: allow" in out
    assert main(["policy", "explain", str(project.contract), "net", "pypi.org"]) == 0
    assert "net pypi.org: deny (the default for net)" in capsys.readouterr().out


def test_a_mistake_in_the_policy_table_is_one_line_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path, policy='[policy.layers.app]\nalow_write = ["x"]\n')

    status = project.ioh("run", str(project.contract), "--provider", "openai:gpt-test")

    err = capsys.readouterr().err
    assert status == 2
    assert "policy.layers.app.alow_write: unknown key" in err
    assert len(err.strip().splitlines()) == 1


def test_a_criterion_command_that_is_only_asked_about_stops_before_any_call(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path, verify='[verify]\nkind = "command"\nargv = ["true"]\n')

    status = project.ioh("run", str(project.contract), "--provider", "openai:gpt-test")

    assert status == 2
    assert "cannot wait for approval" in capsys.readouterr().err
    assert server.requests == []
    assert Store.open(project.store).runs() == []


def test_replace_policy_needs_the_policy_to_replace_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    project.store.touch()

    assert project.ioh("resume", "r1", "--provider", "openai:m", "--replace-policy") == 2
    assert "--replace-policy needs --policy FILE" in capsys.readouterr().err


async def test_a_run_not_started_by_ioh_needs_a_provider_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    contract = TaskContract.from_toml(project.contract)
    with Store.open(project.store) as store:
        waiting = await run(
            contract,
            ScriptedProvider([reply(calls=[call("write_file", path="out.txt", content="x")])]),
            store=store,
            policy=Policy.guarded(),
            run_id="lib",
        )
    assert waiting.outcome is RunOutcome.AWAITING_APPROVAL

    assert project.ioh("approve", "lib") == 0
    assert "the next resume performs it: ioh resume lib --provider SPEC" in capsys.readouterr().out
    assert project.ioh("resume", "lib") == 2
    assert "was not started by `ioh run`" in capsys.readouterr().err


def test_deny_with_an_approver_choice_still_denies(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    project.ioh("run", str(project.contract), "--provider", "openai:gpt-test", "--run-id", "r1")
    capsys.readouterr()

    status = project.ioh("deny", "r1", "--reason", "no", "--approve", "approve-all", "--no-resume")

    assert status == 0
    assert "denied: write out.txt" in capsys.readouterr().out
    with Store.open(project.store) as store:
        (row,) = store.approvals("r1")
        assert json.loads(row.decision_json or "{}")["kind"] == "deny"


def test_a_decision_names_the_request_it_was_made_for(
    tmp_path: Path, server: LoopbackServer, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    project.ioh("run", str(project.contract), "--provider", "openai:gpt-test", "--run-id", "r1")
    capsys.readouterr()

    assert project.ioh("approve", "r1", "--request", "0123abcd", "--no-resume") == 2
    assert "now awaits request" in capsys.readouterr().err
    with Store.open(project.store) as store:
        (row,) = store.approvals("r1")
        assert row.status == "pending"
        with store.lease("r1"):  # a resume in progress holds the run
            assert project.ioh("approve", "r1", "--request", row.id, "--no-resume") == 2
    assert "is being driven" in capsys.readouterr().err
    assert project.ioh("approve", "r1", "--request", row.id, "--no-resume") == 0


async def test_a_bad_provider_label_is_said_before_any_decision_is_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    contract = TaskContract.from_toml(project.contract)
    with Store.open(project.store) as store:
        await run(
            contract,
            ScriptedProvider([reply(calls=[call("write_file", path="out.txt", content="x")])]),
            store=store,
            policy=Policy.guarded(),
            run_id="lib",
            labels={"ioh.provider": "openai:gpt-5"},
        )

    assert project.ioh("approve", "lib") == 2
    assert "is not a JSON list of provider specs" in capsys.readouterr().err
    with Store.open(project.store) as store:
        (row,) = store.approvals("lib")
        assert row.status == "pending"


# -- what a model asks for is shown inert ------------------------------------------------------

HOSTILE_ARGV = ["echo", "a b", f"-c{HOSTILE}\nwants:  read x"]
ARGV_SHOWN = f"['echo', 'a b', '-c{HOSTILE_SHOWN}\\nwants:  read x']"
"""How :data:`HOSTILE_ARGV` is shown: each argument quoted, so none passes for two."""


def test_the_prompt_pending_and_a_decision_show_a_hostile_command_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = Project(tmp_path)
    project.contract.write_text(
        'goal = "run it"\nroot = "ws"\ntools = ["exec"]\n'
        + WANTS_HELLO
        + '[budget]\nmax_retries = 0\nmax_steps = 3\n[policy]\nbase = "guarded"\n'
    )
    running = chat_stream(
        "Running.",
        tool_calls=[("call_x", "exec", json.dumps({"argv": HOSTILE_ARGV}))],
        usage=usage(10, 5),
    )
    monkeypatch.setattr(sys, "stdin", io.StringIO("d\n"))  # the person at the prompt defers
    with LoopbackServer([running, text_reply()]) as server:
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        monkeypatch.setenv("OPENAI_BASE_URL", f"{server.url}/v1")
        status = project.ioh(
            "run", str(project.contract), "--provider", "openai:gpt-test", "--run-id", "r1",
            "--approve", "ask", "--no-sandbox",
        )  # fmt: skip
    asked = capsys.readouterr()
    assert project.ioh("pending") == 0
    pending = capsys.readouterr().out
    assert project.ioh("deny", "r1", "--reason", "no", "--no-resume") == 0
    denied = capsys.readouterr().out

    assert status == 3, asked
    assert "── approval needed" in asked.err
    for printed in (asked.err, asked.out, pending, denied):
        assert active_in(printed) == [], printed
    assert f"\ncommand:   {ARGV_SHOWN}\n" in asked.err
    assert f"\n  command: {ARGV_SHOWN}\n" in pending
    # What a one-line summary says of the command: its newline shown, not broken at.
    assert f"exec echo 'a b' '-c{HOSTILE_SHOWN}\\nwants:  read x' (exec)" in pending
    assert f"denied: exec echo 'a b' '-c{HOSTILE_SHOWN}\\nwants:  read x' (exec)" in denied
