"""The ``ioh`` command, driven the way a user types it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from io_harness import Store
from io_harness._demo import CASSETTE
from io_harness.cli import main
from support import run_id_in

IOH = Path(sys.executable).with_name("ioh")


@pytest.fixture(autouse=True)
def _restore_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # `ioh demo` puts the running interpreter first on PATH; keep that inside each test.
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))


def test_the_demo_runs_offline_to_a_verified_result(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(IOH), "demo", "--dir", str(tmp_path / "demo"), "--store", str(tmp_path / "r.db")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "replayed from a recording" in done.stdout
    assert "outcome: success after 4 steps" in done.stdout
    assert "verified: the command `python -m pytest" in done.stdout
    assert "check: FAIL" in done.stdout and "check: PASS" in done.stdout
    fixed = (tmp_path / "demo" / "project" / "textstats.py").read_text()
    assert "text.split()" in fixed and "if not words" in fixed


def test_runs_and_show_report_what_the_demo_did(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    assert main(["demo", "--dir", str(tmp_path / "d"), "--store", str(store)]) == 0
    run_id = run_id_in(capsys.readouterr().out)

    assert main(["runs", "--store", str(store)]) == 0
    listing = capsys.readouterr().out
    assert run_id in listing and "success" in listing

    assert main(["show", run_id, "--store", str(store)]) == 0
    shown = capsys.readouterr().out
    assert "edit_file(" in shown
    assert "check (file changed): FAIL" in shown and "check (file changed): PASS" in shown
    assert "outcome: success" in shown


def test_ioh_run_takes_a_contract_file_and_a_replay_provider(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The demo's contract runs `python`; give it this interpreter, as an activated venv would.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    shutil.copytree(Path(CASSETTE).parent / "project", tmp_path / "work" / "project")
    shutil.copy(Path(CASSETTE).parent / "contract.toml", tmp_path / "work" / "contract.toml")

    status = main(
        [
            "run",
            str(tmp_path / "work" / "contract.toml"),
            "--provider",
            f"replay:{CASSETTE}",
            "--store",
            str(tmp_path / "runs.db"),
            "--run-id",
            "mine",
        ]
    )

    assert status == 0
    assert "ioh show mine" in capsys.readouterr().out
    with Store.open(tmp_path / "runs.db") as store:
        assert store.runs()[0].outcome == "success"


def test_resume_of_a_finished_run_prints_its_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "runs.db")
    main(["demo", "--dir", str(tmp_path / "d"), "--store", store])
    run_id = run_id_in(capsys.readouterr().out)

    status = main(["resume", run_id, "--provider", f"replay:{CASSETTE}", "--store", store])

    assert status == 0
    assert "outcome: success after 4 steps" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "missing.toml", "--provider", "replay:x.jsonl"], "cannot read the contract"),
        (["show", "nope"], "no store at"),
        (["resume", "nope", "--provider", "replay:x.jsonl"], "cassette: cannot read"),
        (["run", "c.toml", "--provider", "telepathy"], "unknown provider 'telepathy'"),
    ],
)
def test_errors_are_one_line_without_a_traceback(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.toml").write_text(
        'goal = "x"\nroot = "."\nverify = {kind="command", argv=["true"]}\n'
    )

    status = main(argv)

    err = capsys.readouterr().err
    assert status == 2
    assert message in err
    assert "Traceback" not in err
    assert err.startswith("error:")


def test_an_unknown_run_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "runs.db"
    Store.open(store).close()

    assert main(["show", "ghost", "--store", str(store)]) == 2
    assert "no run 'ghost'" in capsys.readouterr().err


def test_runs_on_an_empty_folder_says_there_are_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["runs"]) == 0
    assert "no runs yet" in capsys.readouterr().out


def test_debug_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(Exception, match="cannot read the contract"):
        main(["--debug", "run", "missing.toml", "--provider", "replay:x.jsonl"])


def test_model_text_that_looks_like_markup_is_printed_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from io_harness import Record, TaskContract, run_sync
    from io_harness.testing import ScriptedProvider, call, reply

    (tmp_path / "ws").mkdir()
    contract_file = tmp_path / "c.toml"
    contract_file.write_text(
        'goal = "[bold]x"\nroot = "ws"\n'
        'verify = { kind = "workspace_file_contains", file = "a", needle = "b" }\n'
        "[budget]\nmax_steps = 1\n"
    )
    scripted = ScriptedProvider([reply("[/oops] [red]", [call("[/oops]", path="[/x]")])])
    run_sync(TaskContract.from_toml(contract_file), Record(scripted, tmp_path / "c.jsonl"))
    store = str(tmp_path / "runs.db")

    status = main(
        [
            "run",
            str(contract_file),
            "--provider",
            f"replay:{tmp_path / 'c.jsonl'}",
            "--store",
            store,
            "--run-id",
            "markup",
        ]
    )
    live = capsys.readouterr()
    assert main(["show", "markup", "--store", store]) == 0
    shown = capsys.readouterr().out

    assert status == 1 and live.err == ""
    assert "error [/oops] -> unknown tool '[/oops]'" in live.out
    assert "[/oops] [red]" in live.out
    assert '[/oops](path="[/x]")' in shown
