"""Each criterion against real subjects, and PytestPasses against subjects that try to cheat."""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from pathlib import Path

import pytest

from io_harness import (
    AllOf,
    AnyOf,
    Command,
    ConfigError,
    FileContains,
    FileEquals,
    PytestPasses,
    PythonCompiles,
    TaskContract,
    WorkspaceFileContains,
)
from io_harness.sandbox import SandboxConfig, SandboxError, SandboxLimits, select
from io_harness.verify import Subject

CRITERION_TESTS = textwrap.dedent(
    """
    import calc

    def test_adds():
        assert calc.add(2, 3) == 5

    class TestSigns:
        def test_negative(self):
            assert calc.add(-1, -1) == -2
    """
)


def file_subject(path: Path) -> Subject:
    return Subject(mode="file", root=path.parent, file=path)


def workspace(root: Path) -> Subject:
    return Subject(mode="workspace", root=root)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


async def test_file_contains_and_file_equals_judge_the_contract_file(tmp_path: Path) -> None:
    target = write(tmp_path / "a.txt", "hello world\n")

    assert (await FileContains("world").check(file_subject(target))).passed
    assert not (await FileContains("moon").check(file_subject(target))).passed
    assert (await FileEquals("hello world\n").check(file_subject(target))).passed
    differs = await FileEquals("hello moon\n").check(file_subject(target))
    assert not differs.passed
    assert "-hello moon" in differs.output and "+hello world" in differs.output


async def test_a_missing_file_fails_file_criteria(tmp_path: Path) -> None:
    result = await FileContains("x").check(file_subject(tmp_path / "absent.txt"))

    assert not result.passed
    assert result.output == "the file does not exist"


async def test_workspace_file_contains_stays_inside_the_root(tmp_path: Path) -> None:
    write(tmp_path / "secret.txt", "token")
    root = tmp_path / "root"
    write(root / "notes.md", "token")

    assert (await WorkspaceFileContains("notes.md", "token").check(workspace(root))).passed
    escaped = await WorkspaceFileContains("../secret.txt", "token").check(workspace(root))
    assert not escaped.passed and ".." in escaped.output


async def test_a_command_passes_on_the_expected_exit_status(tmp_path: Path) -> None:
    ok = await Command(["python", "-c", "print('fine')"]).check(workspace(tmp_path))
    three = await Command(["python", "-c", "raise SystemExit(3)"], expect_exit=3).check(
        workspace(tmp_path)
    )

    assert ok.passed and "fine" in ok.output
    assert three.passed


async def test_a_command_runs_in_the_root_without_a_shell(tmp_path: Path) -> None:
    result = await Command(["python", "-c", "import os; print(os.getcwd())", "$HOME"]).check(
        workspace(tmp_path)
    )

    assert str(tmp_path) in result.output


async def test_a_command_that_cannot_start_fails_with_the_reason(tmp_path: Path) -> None:
    result = await Command(["no-such-program-ioh"]).check(workspace(tmp_path))

    assert not result.passed
    assert "could not start" in result.output


async def test_the_whole_process_group_is_killed_at_the_timeout(tmp_path: Path) -> None:
    marker = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    result = await Command(["python", "-c", script], timeout=4).check(workspace(tmp_path))

    assert not result.passed
    assert "killed at the timeout" in result.output
    grandchild = int(marker.read_text())
    for _ in range(100):  # the kill is delivered; reaping by init may lag a moment
        if not _alive(grandchild):
            break
        await asyncio.sleep(0.02)
    assert not _alive(grandchild)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


async def test_a_background_child_holding_the_output_open_does_not_hang_the_check(
    tmp_path: Path,
) -> None:
    script = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print('leader done')\n"
    )
    result = await Command(["python", "-c", script], timeout=30).check(workspace(tmp_path))

    assert result.passed and "leader done" in result.output


async def test_flooded_output_is_cut_in_the_middle_and_the_cut_is_said(tmp_path: Path) -> None:
    script = "import sys\nsys.stdout.write('head\\n' + 'x' * 3_000_000 + '\\ntail\\n')"
    result = await Command(["python", "-c", script]).check(workspace(tmp_path))

    assert "head" in result.output and "tail" in result.output
    assert "bytes of output cut here" in result.output


async def test_python_compiles_names_the_file_that_does_not(tmp_path: Path) -> None:
    write(tmp_path / "good.py", "x = 1\n")
    write(tmp_path / "pkg" / "bad.py", "def broken(:\n")

    everything = await PythonCompiles().check(workspace(tmp_path))
    only_good = await PythonCompiles(["good.py"]).check(workspace(tmp_path))

    assert not everything.passed
    assert "pkg/bad.py" in everything.output and "SyntaxError" in everything.output
    assert only_good.passed
    assert not list(tmp_path.rglob("__pycache__"))


async def test_all_of_checks_every_part_and_any_of_stops_at_the_first_pass(
    tmp_path: Path,
) -> None:
    write(tmp_path / "a.txt", "alpha")
    yes = WorkspaceFileContains("a.txt", "alpha")
    no = WorkspaceFileContains("a.txt", "omega")

    both = await AllOf(yes, no).check(workspace(tmp_path))
    either = await AnyOf(no, yes, no).check(workspace(tmp_path))

    assert not both.passed and len(both.parts) == 2 and both.summary == "1 of 2 conditions hold"
    assert either.passed and len(either.parts) == 2


def test_each_criterion_renders_the_sentence_the_model_is_shown() -> None:
    assert FileContains("ok").describe() == "the file contains the text 'ok'"
    assert (
        Command(["python", "-m", "pytest", "-q"]).describe()
        == "the command `python -m pytest -q` exits with status 0"
    )
    combined = AllOf(WorkspaceFileContains("a", "b"), PythonCompiles()).describe()
    assert combined == "all of these hold:\n- a contains the text 'b'\n- the Python code compiles"
    assert "def test_adds" in PytestPasses(CRITERION_TESTS).describe()


def test_criteria_round_trip_through_json() -> None:
    contract = TaskContract.workspace(
        "x",
        "/tmp",
        AnyOf(AllOf(Command(["true"], timeout=5), PytestPasses(CRITERION_TESTS)), PythonCompiles()),
    )

    assert TaskContract.model_validate_json(contract.model_dump_json()) == contract


def test_pytest_passes_needs_a_test_source_that_defines_tests(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="defines no test functions"):
        TaskContract.workspace("x", tmp_path, PytestPasses("def helper(): pass\n"))
    with pytest.raises(ConfigError, match="does not parse"):
        TaskContract.workspace("x", tmp_path, PytestPasses("def test_(:\n"))


async def test_pytest_passes_imports_the_single_file_subject_by_its_stem(tmp_path: Path) -> None:
    subject = write(tmp_path / "calc.py", "def add(a, b):\n    return a + b\n")

    result = await PytestPasses(CRITERION_TESTS).check(file_subject(subject))

    assert result.passed, result.output
    assert result.summary == "all 2 criterion tests passed"


async def test_pytest_passes_imports_workspace_modules_under_the_root(tmp_path: Path) -> None:
    write(tmp_path / "calc.py", "from helpers import plus\nadd = plus\n")
    write(tmp_path / "helpers.py", "def plus(a, b):\n    return a + b\n")

    result = await PytestPasses(CRITERION_TESTS).check(workspace(tmp_path))

    assert result.passed, result.output


async def test_pytest_passes_names_the_tests_that_failed(tmp_path: Path) -> None:
    write(tmp_path / "calc.py", "def add(a, b):\n    return a - b\n")

    result = await PytestPasses(CRITERION_TESTS).check(workspace(tmp_path))

    assert not result.passed
    assert "test_adds: failed in call" in result.output
    assert "TestSigns::test_negative: failed in call" in result.output


CHEATS = {
    "sys.exit(0) at import": "import sys\nsys.exit(0)\n",
    "os._exit(0) at import": "import os\nos._exit(0)\n",
    "a module-level skip": "import pytest\npytest.skip('no', allow_module_level=True)\n",
    "KeyboardInterrupt at import": "raise KeyboardInterrupt\n",
    "atexit forcing status 0": (
        "import atexit, os\natexit.register(lambda: os._exit(0))\n"
        "def add(a, b):\n    return a - b\n"
    ),
    "an import error": "import does_not_exist\n",
}


@pytest.mark.parametrize("cheat", sorted(CHEATS))
async def test_a_subject_that_cheats_does_not_pass_pytest_passes(
    cheat: str, tmp_path: Path
) -> None:
    write(tmp_path / "calc.py", CHEATS[cheat])

    result = await PytestPasses(CRITERION_TESTS).check(workspace(tmp_path))

    assert not result.passed, result.output


async def test_a_test_that_is_never_collected_fails_the_criterion(tmp_path: Path) -> None:
    # The criterion imports the subject after defining its tests; the subject then
    # deletes one of them from the test module, so pytest never collects it.
    tests = (
        "def test_adds():\n    assert calc.add(1, 1) == 2\n\n"
        "class TestSigns:\n    def test_negative(self):\n        assert calc.add(-1, -1) == -2\n"
        "\nimport calc\n"
    )
    write(
        tmp_path / "calc.py",
        "import sys\ndef add(a, b):\n    return a + b\n"
        "del sys.modules['test_criterion'].TestSigns\n",
    )

    result = await PytestPasses(tests).check(workspace(tmp_path))

    assert not result.passed
    assert "the criterion's TestSigns.test_negative was removed" in result.output


PYTEST_COMMAND = ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]


def suite(root: Path, test_body: str = "    assert add(2, 3) == 5\n") -> Path:
    write(root / "calc.py", "def add(a, b):\n    return a + b\n")
    write(root / "test_calc.py", "from calc import add\n\ndef test_add():\n" + test_body)
    return root


async def test_a_pytest_command_passes_on_a_suite_that_ran_and_passed(tmp_path: Path) -> None:
    result = await Command(PYTEST_COMMAND).check(workspace(suite(tmp_path)))

    assert result.passed, result.output
    assert "1 tests passed" in result.output


@pytest.mark.parametrize(
    ("cheat", "files"),
    [
        ("a conftest that exits 0 at import", {"conftest.py": "import os\nos._exit(0)\n"}),
        ("a conftest that calls sys.exit(0)", {"conftest.py": "import sys\nsys.exit(0)\n"}),
        (
            "a conftest that deselects every test",
            {"conftest.py": "def pytest_collection_modifyitems(items):\n    items.clear()\n"},
        ),
        (
            "a module-level skip",
            {"test_calc.py": "import pytest\npytest.skip('no', allow_module_level=True)\n"},
        ),
        ("an empty suite", {"test_calc.py": "# nothing here\n"}),
    ],
)
async def test_a_pytest_command_judges_the_session_not_only_the_exit_status(
    tmp_path: Path, cheat: str, files: dict[str, str]
) -> None:
    root = suite(tmp_path, "    assert add(2, 3) == 6\n")
    for name, text in files.items():
        write(root / name, text)

    result = await Command(PYTEST_COMMAND).check(workspace(root))

    assert not result.passed, f"{cheat}: {result.output}"


async def test_a_pytest_command_expected_to_fail_is_judged_by_its_exit_status(
    tmp_path: Path,
) -> None:
    root = suite(tmp_path, "    assert add(2, 3) == 6\n")

    result = await Command(PYTEST_COMMAND, expect_exit=1).check(workspace(root))

    assert result.passed


async def test_a_workspace_file_named_pytest_cannot_stand_in_for_pytest(tmp_path: Path) -> None:
    write(tmp_path / "calc.py", "def add(a, b):\n    return a - b\n")
    write(
        tmp_path / "pytest.py",
        "import json, os\n"
        "def main(*args, **kwargs):\n"
        "    path = os.environ['IOH_PYTEST_RECORD']\n"
        "    with open(path, 'a') as f:\n"
        "        f.write(json.dumps({'event': 'collected', 'nodeids': ['t::test_adds']}) + '\\n')\n"
        "        f.write(json.dumps({'event': 'report', 'nodeid': 't::test_adds',\n"
        "                            'when': 'call', 'outcome': 'passed'}) + '\\n')\n"
        "        f.write(json.dumps({'event': 'finished', 'exitstatus': 0}) + '\\n')\n"
        "    return 0\n",
    )

    result = await PytestPasses(CRITERION_TESTS).check(workspace(tmp_path))

    assert not result.passed, result.output


async def test_a_pytest_commands_record_written_without_the_key_is_rejected(
    tmp_path: Path,
) -> None:
    root = suite(tmp_path, "    assert add(2, 3) == 6\n")
    forged = [
        {"event": "collected", "nodeids": ["test_calc.py::test_add"], "seq": 1},
        {"event": "report", "nodeid": "test_calc.py::test_add", "when": "call", "seq": 2},
        {"event": "finished", "exitstatus": 0, "seq": 3},
    ]
    write(
        root / "conftest.py",
        "import json, os\n"
        "with open(os.environ['IOH_PYTEST_RECORD'], 'a') as f:\n"
        f"    for event in {forged!r}:\n"
        "        event.update(pid=os.getpid(), outcome='passed')\n"
        "        f.write('0' * 64 + ' ' + json.dumps(event, sort_keys=True) + '\\n')\n"
        "os._exit(0)\n",
    )

    result = await Command(PYTEST_COMMAND).check(workspace(root))

    assert not result.passed, result.output
    assert "is not signed with this run's key" in result.output


def sandboxed(root: Path, **limits: float) -> Subject:
    try:
        sandbox = select(SandboxConfig(limits=SandboxLimits(**limits)))
    except SandboxError as exc:
        pytest.skip(f"no sandbox on this machine: {exc}")
    return Subject(mode="workspace", root=root, sandbox=sandbox)


async def test_execution_criteria_run_in_the_subjects_sandbox(tmp_path: Path) -> None:
    root = suite(tmp_path)
    subject = sandboxed(root)

    command = await Command([sys.executable, "-c", "print('inside')"]).check(subject)
    compiles = await PythonCompiles().check(subject)
    tests = await PytestPasses(CRITERION_TESTS).check(subject)
    read_only_left = list(root.rglob("__pycache__"))
    suite_run = await Command([sys.executable, *PYTEST_COMMAND[1:]]).check(subject)

    assert command.passed and "inside" in command.output
    assert compiles.passed, compiles.output
    assert tests.passed, tests.output
    assert read_only_left == []
    assert suite_run.passed and "1 tests passed" in suite_run.output, suite_run.output
    kinds = [event.kind for event in subject.events]
    assert kinds.count("exec") == 4 and kinds.count("destroy") == 4
    assert {event.backend for event in subject.events} == {subject.sandbox.name}  # type: ignore[union-attr]


async def test_a_criterion_command_killed_at_a_cap_says_which(tmp_path: Path) -> None:
    subject = sandboxed(tmp_path, cpu_seconds=1, wall_seconds=20)

    result = await Command([sys.executable, "-c", "while True: pass"]).check(subject)

    assert not result.passed
    assert "killed at the cpu cap" in result.output
    assert result.summary.startswith("killed at the cpu cap")
