"""A contract file's mistakes said in the contract's words, with a hint, and ``ioh``'s counts
said in English (issue 24)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from io_harness import Record, Store, TaskContract, run_sync
from io_harness.cli import main
from io_harness.errors import ConfigError
from io_harness.testing import ScriptedProvider, call, reply

HEAD = 'goal = "g"\nroot = "."\n'


@pytest.fixture(autouse=True)
def _piped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))
    monkeypatch.setenv("COLUMNS", "80")


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            '[verify]\nkind = "command"\nargv = "python -m pytest"\n',
            'verify.argv: expected a list, not the string "python -m pytest"; '
            'argv is a list: ["python", "-m", "pytest"]',
        ),
        (
            '[verify]\nkind = "comand"\nargv = ["pytest"]\n',
            'verify.kind: "comand" is not a kind of criterion (did you mean "command"?); '
            "the kinds are: file_contains, file_equals, workspace_file_contains, command, "
            "python_compiles, pytest, all_of, any_of",
        ),
        (
            '[verify]\nargv = ["pytest"]\n',
            'verify.kind: missing; a criterion says which it is (kind = "command")',
        ),
        (
            '[verify]\nkind = "command"\nargv = []\n',
            "verify.argv: an empty list; it needs at least 1 item: the program and its "
            'arguments, as in ["python", "-m", "pytest"]',
        ),
        (
            '[verify]\nkind = "workspace_file_contains"\nfile = "a"\nnedle = "x"\n',
            "verify.needle: missing (a 'workspace_file_contains' criterion needs file and "
            'needle); verify.nedle: unknown key (did you mean "needle"?); the keys of a '
            "'workspace_file_contains' criterion are: kind, file, needle",
        ),
        (
            '[verify]\nkind = "all_of"\n[[verify.criteria]]\nkind = "fle_contains"\n',
            'verify.criteria.0.kind: "fle_contains" is not a kind of criterion '
            '(did you mean "file_contains"?)',
        ),
        (
            '[verify]\nkind = "pytest"\n',
            "verify.test_file: missing (a 'pytest' criterion needs test_file)",
        ),
        (
            '[verify]\nkind = "command"\nargv = ["pytest", 3]\n',
            "verify.argv.1: expected a string, not the number 3",
        ),
        (
            '[verify]\nkind = "command"\nargv = ["pytest"]\n[budget]\nmax_steps = "many"\n',
            'budget.max_steps: expected a whole number, not the string "many"',
        ),
        (
            '[verify]\nkind = "command"\nargv = ["pytest"]\n[budget]\nmax_step = 3\n',
            'budget.max_step: unknown key (did you mean "max_steps"?); the keys of budget '
            "are: max_steps, max_wall_seconds, max_tokens, max_retries, max_cost",
        ),
        (
            '[verify]\nkind = "command"\nargv = ["pytest"]\n[budget]\nmax_steps = 0\n',
            "budget.max_steps: must be at least 1, not the number 0",
        ),
        (
            'constraints = "Do not edit the tests"\n'
            '[verify]\nkind = "command"\nargv = ["pytest"]\n',
            'constraints: expected a list, not the string "Do not edit the tests"; '
            'constraints is a list: ["Do not edit the tests"]',
        ),
        ('verify = "pytest"\n', 'verify: expected a table (kind = "..." and its keys)'),
    ],
)
def test_a_mistake_in_a_contract_file_is_said_in_its_own_words(
    tmp_path: Path, body: str, said: str
) -> None:
    path = tmp_path / "contract.toml"
    path.write_text(HEAD + body)

    with pytest.raises(ConfigError) as raised:
        TaskContract.from_toml(path)

    assert str(raised.value).startswith(f"{path}: ")
    assert said in str(raised.value)
    assert "Input should" not in str(raised.value) and "Input tag" not in str(raised.value)


def test_ioh_run_says_a_string_argv_in_one_line_with_the_list_to_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "contract.toml"
    path.write_text(HEAD + '[verify]\nkind = "command"\nargv = "python -m pytest"\n')

    status = main(["run", str(path), "--provider", "replay:nowhere.jsonl"])

    err = capsys.readouterr().err
    assert status == 2
    assert err == (
        f'error: {path}: verify.argv: expected a list, not the string "python -m pytest"; '
        'argv is a list: ["python", "-m", "pytest"]\n'
    )


def test_a_criterion_program_not_on_path_is_said_as_a_sentence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "contract.toml"
    path.write_text(HEAD + '[verify]\nkind = "command"\nargv = ["no-such-checker-ioh"]\n')
    cassette = tmp_path / "c.jsonl"
    contract = TaskContract.from_toml(path)
    with pytest.raises(ConfigError):  # refused before any call: the cassette is never needed
        run_sync(contract, Record(ScriptedProvider([reply("done")]), cassette))

    status = main(["run", str(path), "--provider", f"replay:{cassette}"])

    err = capsys.readouterr().err
    assert status == 2
    assert "the criterion's program 'no-such-checker-ioh' is not found on PATH; it could " in err
    assert "runs 'no-such-checker-ioh' is not" not in err


def test_one_step_and_one_token_are_said_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ws").mkdir()
    path = tmp_path / "contract.toml"
    path.write_text(
        'goal = "write done.txt"\nroot = "ws"\n[verify]\nkind = "workspace_file_contains"\n'
        'file = "done.txt"\nneedle = "done"\n'
    )
    cassette = tmp_path / "c.jsonl"
    writes = ScriptedProvider(
        [reply("writing", [call("write_file", path="done.txt", content="done\n")])]
    )
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    run_sync(
        TaskContract.from_toml(path).model_copy(update={"root": recorded}),
        Record(writes, cassette),
        store=Store.memory(),
    )
    store = ["--store", str(tmp_path / "runs.db")]

    assert main(["run", str(path), "--provider", f"replay:{cassette}", *store]) == 0
    ran = capsys.readouterr().out
    run_id = ran.split("ioh show ")[1].split()[0]
    assert main(["show", run_id, *store]) == 0
    shown = capsys.readouterr().out

    assert "outcome: success after 1 step, 0 tokens" in ran
    assert "1 steps" not in ran and "1 steps" not in shown
    assert f"{run_id}  success  1 step  0 tokens" in shown
