"""Task contracts: the two modes, TOML files, and errors that name the key."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from io_harness import (
    AllOf,
    Budget,
    Command,
    ConfigError,
    FileContains,
    PytestPasses,
    PythonCompiles,
    TaskContract,
)


def toml(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_workspace_contract_from_toml_resolves_paths_against_its_folder(tmp_path: Path) -> None:
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "test_it.py").write_text("def test_x():\n    assert 1 + 1 == 2\n")
    path = toml(
        tmp_path / "contract.toml",
        """
        goal = "make it pass"
        root = "repo"
        constraints = ["keep the API"]

        [verify]
        kind = "all_of"

        [[verify.criteria]]
        kind = "command"
        argv = ["python", "-m", "pytest"]
        timeout = 60

        [[verify.criteria]]
        kind = "pytest"
        test_file = "checks/test_it.py"

        [budget]
        max_steps = 12
        max_tokens = 50000
        """,
    )

    contract = TaskContract.from_toml(path)

    assert contract == TaskContract.workspace(
        "make it pass",
        tmp_path / "repo",
        AllOf(
            Command(["python", "-m", "pytest"], timeout=60),
            PytestPasses("def test_x():\n    assert 1 + 1 == 2\n"),
        ),
        constraints=["keep the API"],
        budget=Budget(max_steps=12, max_tokens=50000),
    )


def test_a_single_file_contract_from_toml(tmp_path: Path) -> None:
    path = toml(
        tmp_path / "c.toml",
        """
        goal = "greet"
        file = "out/hello.txt"
        verify = { kind = "file_contains", needle = "hello" }
        """,
    )

    contract = TaskContract.from_toml(path)

    assert contract.mode == "file"
    assert contract.path == tmp_path / "out" / "hello.txt"
    assert contract.root == tmp_path / "out"
    assert contract.verify == FileContains("hello")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            'goal = "x"\nroot = "."\nverify = { kind = "command", argv = [] }\n',
            "verify.argv: an empty list; it needs at least 1 item",
        ),
        (
            'goal = "x"\nroot = "."\nverify = { kind = "command", argv = ["true"] }\n'
            "[budget]\nmax_steps = 'many'\n",
            'budget.max_steps: expected a whole number, not the string "many"',
        ),
        (
            'goal = "x"\nroot = "."\nverify = { kind = "command", argv = ["true"] }\n'
            "[budget]\nmax_step = 3\n",
            'budget.max_step: unknown key (did you mean "max_steps"?)',
        ),
        (
            'goal = "x"\nroot = "."\nverify = { kind = "magic" }\n',
            'verify.kind: "magic" is not a kind of criterion',
        ),
        ('goal = "x"\nroot = "."\n', "verify: missing"),
        (
            'goal = "x"\nroot = "."\nfile = "a"\n'
            'verify = { kind = "file_contains", needle = "a" }\n',
            "exactly one of 'root'",
        ),
        ('goal = "x"\nroot = "."\ncolour = "red"\n', "unknown key 'colour'"),
        (
            'goal = "x"\nroot = "."\nverify = { kind = "file_contains", needle = "a" }\n',
            "FileContains is a single-file criterion",
        ),
        (
            'goal = "x"\nroot = "."\nverify = { kind = "pytest", test_file = "nope.py" }\n',
            "verify.test_file: cannot read",
        ),
        ('goal = \nroot = "."\n', "not valid TOML"),
        (
            'goal = ""\nroot = "."\nverify = { kind = "command", argv = ["true"] }\n',
            "goal: must not be empty",
        ),
        (
            'goal = "g"\nroot = "."\n[verify]\nkind = "workspace_file_contains"\npath = "a"\n',
            "verify.file: missing (a 'workspace_file_contains' criterion needs file and needle); "
            "verify.needle: missing (a 'workspace_file_contains' criterion needs file and "
            "needle); verify.path: unknown key",
        ),
        (
            'goal = "g"\nroot = "."\nverify = { kind = "command", argv = "pytest" }\n',
            'verify.argv: expected a list, not the string "pytest"; argv is a list: ["pytest"]',
        ),
    ],
)
def test_a_bad_contract_file_is_a_config_error_naming_the_key(
    tmp_path: Path, body: str, message: str
) -> None:
    path = toml(tmp_path / "bad.toml", body)

    with pytest.raises(ConfigError, match=r"bad\.toml") as raised:
        TaskContract.from_toml(path)
    assert message in str(raised.value)


def test_a_missing_contract_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the contract"):
        TaskContract.from_toml(tmp_path / "absent.toml")


def test_an_empty_goal_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="goal"):
        TaskContract.workspace("", tmp_path, Command(["true"]))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: Budget(max_steps=0),
            "Budget: max_steps: Input should be greater than or equal to 1",
        ),
        (lambda: Budget(max_tokens=-5), "Budget: max_tokens"),
        (lambda: Command([]), "Command: argv: Tuple should have at least 1 item"),
        (lambda: Command(["true"], timeout=-1), "Command: timeout: Input should be greater than 0"),
        (
            lambda: FileContains(5),  # type: ignore[arg-type]  # deliberately not a str
            "FileContains: needle: Input should be a valid string",
        ),
        (lambda: Command("pytest"), "Command: argv: Input should be a valid tuple"),
        (lambda: PythonCompiles("a.py"), "PythonCompiles: paths: Input should be a valid tuple"),
        (AllOf, "AllOf: criteria: Field required"),
    ],
)
def test_a_bad_budget_or_criterion_built_in_python_is_a_config_error(
    build: object, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        build()  # type: ignore[operator]
    assert message in str(raised.value)


def test_constraints_given_as_one_string_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="list of sentences"):
        TaskContract.workspace("x", tmp_path, Command(["true"]), constraints="be nice")


async def test_a_single_file_contract_may_name_a_folder_that_does_not_exist_yet(
    tmp_path: Path,
) -> None:
    from io_harness import RunOutcome, run
    from io_harness.testing import ScriptedProvider, call, reply

    contract = TaskContract.file("write it", tmp_path / "out" / "haiku.txt", FileContains("rain"))
    provider = ScriptedProvider([reply(calls=[call("write_file", content="rain on the roof")])])

    result = await run(contract, provider)

    assert result.outcome is RunOutcome.SUCCESS
    assert (tmp_path / "out" / "haiku.txt").read_text() == "rain on the roof"
