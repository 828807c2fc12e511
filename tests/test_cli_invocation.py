"""How ``ioh`` is called and what it tells a shell user: ``--debug`` anywhere, commands (not
Python calls) in its messages, help and docs that match the parser, the demo's options and
its temporary folder."""

from __future__ import annotations

import argparse
import itertools
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from io_harness import Policy, RunOutcome, Store, TaskContract, run_sync
from io_harness._demo import CASSETTE
from io_harness.cli import main
from io_harness.cli._parser import ioh_parser
from io_harness.errors import HarnessError
from io_harness.testing import ScriptedProvider, call, reply
from loopback import CapturedRequest, LoopbackServer, Reply

IOH = Path(sys.executable).with_name("ioh")
DOCS = Path(__file__).parents[1] / "docs" / "cli.md"
CONTRACT = (
    'goal = "write hello to out.txt"\nroot = "ws"\n'
    '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
    "[budget]\nmax_retries = 0\nmax_steps = 3\n"
)


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # `ioh demo` puts the running interpreter first on PATH; keep that inside each test.
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))
    monkeypatch.setenv("COLUMNS", "80")
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_MODEL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def contract(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    path = tmp_path / "contract.toml"
    path.write_text(CONTRACT)
    return path


Parsers = dict[tuple[str, ...], argparse.ArgumentParser]


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Parsers:
    """Every command's parser, by its words (``("policy", "explain")``)."""
    found = {path: parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= commands(sub, (*path, name))
    return found


def options(parser: argparse.ArgumentParser) -> set[str]:
    return {
        option
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
        for option in action.option_strings
        if option.startswith("--") and option not in {"--help", "--debug"}
    }


# -- --debug after the command ------------------------------------------------------------


def test_debug_after_the_command_shows_the_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(HarnessError, match="cannot read the contract"):
        main(["run", "missing.toml", "--provider", "replay:x.jsonl", "--debug"])
    with pytest.raises(HarnessError, match=r"missing\.toml"):
        main(["policy", "explain", "missing.toml", "read", "x", "--debug"])


def test_every_command_takes_debug(capsys: pytest.CaptureFixture[str]) -> None:
    for path in commands(ioh_parser()):
        with pytest.raises(SystemExit):
            main([*path, "--help"])
        assert "--debug" in capsys.readouterr().out, path


# -- the shell's words, not Python's ---------------------------------------------------------


def test_a_run_id_in_use_names_the_ioh_resume_that_continues_it(
    tmp_path: Path, contract: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    with Store.open(store) as opened:
        run_sync(
            TaskContract.from_toml(contract),
            ScriptedProvider([reply("no")]),
            store=opened,
            run_id="taken",
        )

    status = main(
        [
            *("run", str(contract), "--provider", f"replay:{CASSETTE}"),
            *("--run-id", "taken", "--store", str(store)),
        ]
    )

    err = capsys.readouterr().err
    assert status == 2
    assert f"ioh resume taken --store {store} continues it" in err
    assert "resume()" not in err


def test_a_missing_key_says_which_variable_to_set_not_which_argument_to_pass(
    contract: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(contract), "--provider", "anthropic:claude-x"]) == 2

    err = capsys.readouterr().err
    assert "set ANTHROPIC_API_KEY" in err
    assert "api_key=" not in err


def test_pending_and_a_resume_without_a_decision_name_the_real_run(
    tmp_path: Path, contract: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    wants = ScriptedProvider([reply(calls=[call("write_file", path="out.txt", content="x")])])
    with Store.open(store) as opened:
        result = run_sync(
            TaskContract.from_toml(contract),
            wants,
            store=opened,
            policy=Policy.guarded(),
            run_id="asks",
        )
    assert result.outcome is RunOutcome.AWAITING_APPROVAL

    assert main(["pending", "--store", str(store)]) == 0
    pending = capsys.readouterr().out
    status = main(
        [
            *("resume", "asks", "--provider", "compatible:http://127.0.0.1:9/v1#m"),
            *("--approve", "defer", "--store", str(store)),
        ]
    )
    err = capsys.readouterr().err

    assert f"decide: ioh approve asks --store {store} [--remember]" in pending
    assert f"ioh deny asks --store {store} --reason TEXT" in pending
    assert "RUN_ID" not in pending
    assert status == 2
    assert f"decide it with ioh approve asks --store {store}" in err
    assert "decision=" not in err


def test_an_interrupted_run_names_the_ioh_resume_of_its_real_id(
    tmp_path: Path, contract: Path
) -> None:
    store = tmp_path / "runs.db"
    started = threading.Event()
    process: list[subprocess.Popen[str]] = []

    def interrupt(_request: CapturedRequest) -> Reply:
        started.wait(60)
        process[0].send_signal(signal.SIGINT)  # Ctrl-C while the model is answering
        return Reply(delay=120)

    with LoopbackServer(interrupt) as server:
        process.append(
            subprocess.Popen(
                [
                    *(str(IOH), "run", str(contract)),
                    *("--provider", f"compatible:{server.url}/v1#m", "--store", str(store)),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
            )
        )
        started.set()
        out, err = process[0].communicate(timeout=120)

    assert process[0].returncode == 130, out + err
    found = re.search(r"run (\S+) started", out)
    assert found, out
    assert f"(ioh resume {found[1]} --store {store} continues the run)" in err
    assert "RUN_ID" not in err


# -- help and docs say what the program does ---------------------------------------------------


def test_help_does_not_say_approve_and_deny_need_a_provider(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    said = " ".join(capsys.readouterr().out.split())

    assert "with --provider" not in said
    assert "approve the action a run awaits, then resume the run" in said
    assert "deny the action a run awaits, then resume the run" in said


def synopsis() -> dict[tuple[str, ...], set[str]]:
    """Each command in docs/cli.md's synopsis, with the options it lists."""
    block = DOCS.read_text().split("```")[1]
    entries: dict[tuple[str, ...], str] = {}
    last: tuple[str, ...] = ()
    for line in block.splitlines():
        if line.startswith("ioh "):
            words = line.split()[1:]
            last = tuple(itertools.takewhile(lambda word: re.fullmatch("[a-z]+", word), words))
            entries[last] = line
        elif line.strip() and last:
            entries[last] += " " + line
    return {path: set(re.findall(r"--[a-z-]+", text)) for path, text in entries.items()}


def test_the_docs_synopsis_lists_every_option_each_command_has() -> None:
    parsers = commands(ioh_parser())
    listed = synopsis()

    assert {("approve",), ("deny",), ("demo",)} <= set(listed)
    for path, documented in listed.items():
        assert documented == options(parsers[path]), path


# -- ioh demo ----------------------------------------------------------------------------------


def test_the_demo_takes_no_sandbox_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(
        ["demo", "--no-sandbox", "--dir", str(tmp_path / "d"), "--store", str(tmp_path / "r.db")]
    )

    out = capsys.readouterr().out
    assert status == 0, out
    assert "warning: --no-sandbox" in " ".join(out.split())
    assert "commands ran without a sandbox" in out
    with Store.open(tmp_path / "r.db") as store:
        assert store.trace(store.runs()[0].id).sandbox.backend == "none"  # type: ignore[union-attr]


def test_the_demo_removes_its_temporary_folder(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()

    done = subprocess.run(
        [str(IOH), "demo", "--store", str(tmp_path / "r.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(scratch)},
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "outcome: success" in done.stdout
    assert [p.name for p in scratch.iterdir() if p.name.startswith("ioh-demo-")] == []
    assert "removed the demo's folder" in done.stdout
