"""What ``ioh`` says and does, hardened (issue 24): text in brackets printed as written, a
failed check's output under it, the workspace a command looks at, the demo's enforced
constraint and its cassette, a deferred step's heading, the wait counted, lines that fit 80
columns, ``@tool`` without a docstring, and the MCP server the docs show."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness import (
    Budget,
    Command,
    Harness,
    McpServer,
    Policy,
    Record,
    Store,
    TaskContract,
    WorkspaceFileContains,
    run_sync,
    tool,
)
from io_harness._demo import CASSETTE, CONTRACT, PROJECT
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply

IOH = Path(sys.executable).with_name("ioh")
ROOT = Path(__file__).parents[1]
TOOLS_SERVER = Path(__file__).parent / "mcp_servers" / "tools_server.py"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
GENERATED_ID = re.compile(r"\d{8}-\d{6}-\d{3}-[0-9a-f]{20}")


@pytest.fixture(autouse=True)
def _piped(monkeypatch: pytest.MonkeyPatch) -> None:
    # `ioh demo` puts the running interpreter first on PATH: keep that inside each test. The
    # console is a pipe at 80 columns unless a test makes it a terminal.
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")


def at_a_terminal(monkeypatch: pytest.MonkeyPatch, columns: int = 80) -> None:
    """Make ``ioh``'s console a terminal of ``columns`` (without colours to strip)."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("LINES", "25")


def run_id_in(output: str) -> str:
    found = re.search(r"ioh show (\S+)", output)
    assert found, output
    return found.group(1)


class Demo:
    """One ``ioh demo --dir`` run, shared by the tests that read what it left."""

    def __init__(self, folder: Path, store: Path, out: str) -> None:
        self.folder, self.store, self.out = folder, store, out
        self.run_id = run_id_in(out)

    def ioh(self, *argv: str) -> int:
        return main([*argv, "--store", str(self.store)])


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    base = tmp_path_factory.mktemp("demo")
    done = subprocess.run(
        [str(IOH), "demo", "--dir", str(base / "d"), "--store", str(base / "runs.db")],
        capture_output=True,
        text=True,
        cwd=base,
        env={**os.environ, "COLUMNS": "80"},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    yield Demo(base / "d", base / "runs.db", done.stdout)


def shipped_demo(folder: Path) -> Path:
    """The bundled project and contract, untouched, in ``folder``; the contract's path."""
    shutil.copytree(PROJECT, folder / "project", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(CONTRACT, folder / "contract.toml")
    return folder / "contract.toml"


# -- 11: text in brackets is printed as written ---------------------------------------------


def test_mcp_list_of_a_contract_without_servers_names_the_table_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = tmp_path / "c.toml"
    contract.write_text(
        'goal = "g"\nroot = "."\n[verify]\nkind = "workspace_file_contains"\n'
        'file = "a"\nneedle = "b"\n'
    )

    assert main(["mcp", "list", str(contract)]) == 0

    assert f"{contract} has no [[mcp]] servers" in capsys.readouterr().out


def test_mcp_list_of_a_contract_without_a_policy_names_the_policy_table_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = tmp_path / "c.toml"
    contract.write_text(
        'goal = "g"\nroot = "."\n[verify]\nkind = "workspace_file_contains"\n'
        'file = "a"\nneedle = "b"\n'
        f'[[mcp]]\nname = "t"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(TOOLS_SERVER))}]\n"
    )

    assert main(["mcp", "list", str(contract)]) == 0

    out = capsys.readouterr().out
    assert f"{contract} has no [policy]; the verdicts are Policy.default()'s" in out
    assert "mcp__t__echo" in out


# -- 12: a failed check shows the end of its output --------------------------------------------


def test_show_prints_the_failing_assertion_under_a_failed_check(
    demo: Demo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo.ioh("show", demo.run_id) == 0

    lines = capsys.readouterr().out.splitlines()
    failed = next(i for i, line in enumerate(lines) if "check (file changed): FAIL" in line)
    passed = next(i for i, line in enumerate(lines) if "check (file changed): PASS" in line)
    under = lines[failed + 1 : failed + 1 + 13]
    assert under[0].startswith("    [... ") and f"ioh show {demo.run_id} --json" in under[0]
    tail = [line for line in under[1:] if line.startswith("    |")]
    assert any("ZeroDivisionError: division by zero" in line for line in tail), under
    assert tail[-1].startswith("    | 1 failed, 3 passed")
    assert not lines[passed + 1].startswith("    |")  # a passed check has no tail


def test_a_long_failed_output_is_capped_and_says_how_much_it_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ws").mkdir()
    printer = "for i in range(100): print(f'line {i}')\nraise SystemExit(1)"
    contract = TaskContract.workspace(
        "pass the check", tmp_path / "ws", Command([sys.executable, "-c", printer])
    )
    with Store.open(tmp_path / "runs.db") as store:
        result = Harness(ScriptedProvider([reply("done")]), store=store).run_sync(contract)

    assert main(["show", result.run_id, "--store", str(tmp_path / "runs.db")]) == 0

    lines = capsys.readouterr().out.splitlines()
    tail = [line for line in lines if line.startswith("    |")]
    assert tail == [f"    | line {i}" for i in range(88, 100)]
    assert f"    [... 88 earlier lines not shown: ioh show {result.run_id} --json" in "\n".join(
        lines
    )


# -- 13: the workspace a command looks at --------------------------------------------------------


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A contract whose root ``ws`` commits a schema, with its roles file beside it; the
    current folder is elsewhere, as a shell in a project's parent folder is."""
    folder = tmp_path / "app"
    schemas = folder / "ws" / "descriptions" / "tools"
    schemas.mkdir(parents=True)
    (schemas / "run_tests.json").write_text(json.dumps({"type": "object"}))
    (folder / "roles.toml").write_text('[roles.tester]\ntools = ["run_tests"]\n')
    (folder / "contract.toml").write_text(
        'goal = "g"\nroot = "ws"\nrole = "tester"\n[verify]\n'
        'kind = "workspace_file_contains"\nfile = "a"\nneedle = "b"\n'
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    return folder / "contract.toml"


def test_roles_check_with_a_contract_composes_against_its_root_and_says_so(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["roles", "check", "--contract", str(app)])
    out = capsys.readouterr().out

    root = app.parent / "ws"
    assert f"roles file {app.parent / 'roles.toml'}: 1 role; workspace {root}" in out
    assert f"(the root of {app})" in out
    assert "run_tests  elected  descriptions/tools/run_tests.json" in out


def test_roles_check_without_a_contract_says_it_used_the_current_folder(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main(["roles", "check", "--roles", str(app.parent / "roles.toml")])
    out = capsys.readouterr().out

    assert "workspace . (the current folder; --contract FILE looks at a contract's root)" in out
    assert "dropped (no schema in descriptions/tools/): run_tests" in out


def test_roles_check_refuses_a_folder_and_a_contract_at_once(
    app: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["roles", "check", ".", "--contract", str(app)]) == 2

    err = capsys.readouterr().err
    assert err.startswith("error: give DIR or --contract FILE, not both")
    assert "Traceback" not in err


def test_memory_with_a_contract_lists_and_forgets_the_notes_of_its_root(
    app: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    root = str((app.parent / "ws").resolve())
    with Store.open(db) as store:
        store.remember(root, "test-command", "pytest -q")

    assert main(["memory", "--store", str(db)]) == 0
    here = capsys.readouterr().out
    assert main(["memory", "--contract", str(app), "--store", str(db)]) == 0
    listed = capsys.readouterr().out
    assert (
        main(["memory", "forget", "test-command", "--contract", str(app), "--store", str(db)]) == 0
    )
    forgot = capsys.readouterr().out

    assert "no memory for workspace" in here and "(the current folder;" in here
    assert f"memory of workspace {root} (the root of {app})" in listed
    assert "test-command" in listed and "pytest -q" in listed
    assert f"forgot test-command (workspace {root} (the root of {app}))" in forgot
    with Store.open(db) as store:
        assert store.memory_entries(root) == []


# -- 14: the demo's constraint is enforced ---------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "content"),
    [
        ("test_textstats.py", "def test_everything():\n    assert True\n"),
        ("pytest.ini", "[pytest]\naddopts = -k 'not empty and not whitespace'\n"),
    ],
)
def test_an_agent_that_rewrites_the_demos_tests_is_refused_and_not_verified(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, content: str
) -> None:
    # A cheating model, recorded under the shipped contract's own policy, then replayed by
    # `ioh run` of a fresh copy, as a user's live model would be run.
    cheat = ScriptedProvider(
        [
            reply(
                "the tests are too strict; I'll relax them",
                [call("write_file", path=path, content=content)],
            ),
            reply("done"),
        ]
    )
    recorded = shipped_demo(tmp_path / "recorded")
    run_sync(
        TaskContract.from_toml(recorded),
        Record(cheat, tmp_path / "cheat.jsonl"),
        policy=Policy.from_toml(recorded),
        store=Store.memory(),
    )
    contract = shipped_demo(tmp_path / "work")
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"

    status = main(
        [
            *("run", str(contract), "--provider", f"replay:{tmp_path / 'cheat.jsonl'}"),
            *("--store", str(tmp_path / "runs.db")),
        ]
    )

    out = capsys.readouterr().out
    assert status == 1, out
    assert "outcome: success" not in out
    assert not (tmp_path / "work" / "project" / path).exists() or (
        (tmp_path / "work" / "project" / path).read_bytes() == (PROJECT / path).read_bytes()
    )
    assert main(["show", run_id_in(out), "--store", str(tmp_path / "runs.db")]) == 0
    shown = capsys.readouterr().out
    assert f'write_file(path="{path}"' in shown and "in layer 'tests'" in shown


def test_ioh_demo_runs_under_its_contracts_policy(demo: Demo) -> None:
    with Store.open(demo.store) as store:
        stored = store.load_run(demo.run_id).policy_json

    assert stored is not None and "test_*.py" in stored and '"tests"' in stored


# -- 17: a deferred step's heading, the wait counted, lines that fit ---------------------------


DEFERRING = (
    'goal = "write out.txt"\nroot = "ws"\n[verify]\nkind = "workspace_file_contains"\n'
    'file = "out.txt"\nneedle = "hello"\n[budget]\nmax_steps = 4\n'
    '[policy]\nbase = "default"\n[policy.layers.app]\nask_write = ["out.txt"]\n'
)


def test_a_deferred_act_is_printed_under_its_own_steps_heading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "x.txt").write_text("x\n")
    shutil.copytree(tmp_path / "ws", tmp_path / "recorded")
    contract = tmp_path / "c.toml"
    contract.write_text(DEFERRING)
    script = ScriptedProvider(
        [
            reply("look", [call("list_dir")]),
            reply(
                "write it",
                [
                    call("read_file", path="x.txt"),
                    call("write_file", path="out.txt", content="hello"),
                ],
            ),
            reply("done"),
        ]
    )
    recording = TaskContract.workspace(
        "write out.txt", tmp_path / "recorded", WorkspaceFileContains("out.txt", "hello")
    )
    run_sync(recording, Record(script, tmp_path / "c.jsonl"), store=Store.memory())
    store = ["--store", str(tmp_path / "runs.db")]

    status = main(
        [
            "run",
            str(contract),
            "--provider",
            f"replay:{tmp_path / 'c.jsonl'}",
            "--approve",
            "defer",
            *store,
        ]
    )
    ran = capsys.readouterr().out
    assert main(["pending", *store]) == 0
    pending = capsys.readouterr().out
    assert main(["show", run_id_in(ran), *store]) == 0
    shown = capsys.readouterr().out

    assert status == 3
    lines = ran.splitlines()
    heading = lines.index("step 2  awaits a decision")
    assert lines[heading - 1].startswith("  ok list_dir")  # step 1's block ends before it
    assert lines[heading + 1].startswith("  ok read_file")
    assert lines[heading + 2].startswith("  deferred write out.txt (write_file)")
    assert "outcome: awaiting_approval after 1 step, " in ran
    assert " step 2: write out.txt (write_file)" in pending
    assert "step 2  awaits a decision (not committed yet)" in shown


def test_the_status_line_counts_the_time_the_model_takes(tmp_path: Path) -> None:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [str(IOH), "demo", "--dir", str(tmp_path / "d"), "--store", str(tmp_path / "r.db")],
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        cwd=tmp_path,
        env={**os.environ, "TERM": "xterm", "COLUMNS": "100", "LINES": "30"},
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other end closed: the demo ended
                break
            if not chunk:
                break
            seen += chunk
        status = process.wait(timeout=60)
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()

    text = ANSI.sub("", seen.decode(errors="replace"))
    assert status == 0, text
    assert re.search(r"step 2: waiting for the model \(\d+ s\)", text), text


def test_show_at_80_columns_indents_every_continuation_under_its_line(
    demo: Demo, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    at_a_terminal(monkeypatch)

    assert demo.ioh("show", demo.run_id) == 0

    lines = ANSI.sub("", capsys.readouterr().out).splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    starts = ("step ", "after step", "goal:", "provider:", "spend:", "sandbox", "outcome:")
    at_column_0 = [
        line for line in lines if line and not line.startswith(" ") and not line.startswith(starts)
    ]
    assert at_column_0 == [lines[0]], "\n".join(lines)  # the run's own line only
    edit = next(i for i, line in enumerate(lines) if line.startswith("  ok edit_file("))
    assert lines[edit + 1].startswith("      ")  # the call's continuation, under its text


def test_runs_at_80_columns_keeps_the_outcome_and_a_generated_id_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "ws").mkdir()
    contract = TaskContract.workspace(
        "write done.txt",
        tmp_path / "ws",
        WorkspaceFileContains("done.txt", "done"),
        budget=Budget(max_steps=2),
    )
    looping = ScriptedProvider(lambda _: reply("looking", [call("list_dir")]))
    with Store.open(tmp_path / "runs.db") as store:
        result = Harness(looping, store=store).run_sync(contract)
    assert result.outcome == "step_cap_reached" and GENERATED_ID.fullmatch(result.run_id)
    at_a_terminal(monkeypatch)

    assert main(["runs", "--store", str(tmp_path / "runs.db")]) == 0

    lines = ANSI.sub("", capsys.readouterr().out).splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    assert result.run_id in lines
    assert any(line.split()[:1] == ["step_cap_reached"] for line in lines), "\n".join(lines)
    assert "…" not in "\n".join(lines)


# -- 18: the demo's cassette, @tool without a docstring, the MCP server of the docs -----------


def test_demo_dir_holds_the_cassette_its_banner_names(demo: Demo) -> None:
    copied = demo.folder / "cassette.jsonl"

    assert copied.read_bytes() == CASSETTE.read_bytes()
    assert f"replayed from a recording ({copied})" in demo.out


def test_tool_on_a_function_without_a_docstring_warns_at_the_decoration() -> None:
    with pytest.warns(
        UserWarning, match=r"@tool .*nameless: the function has no docstring"
    ) as caught:

        @tool
        def nameless(ticket_id: str) -> str:
            return ticket_id

    assert nameless.spec().description == ""
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


def test_tool_with_a_docstring_or_a_given_description_does_not_warn() -> None:
    @tool
    def described(ticket_id: str) -> str:
        """Look a ticket up."""
        return ticket_id

    @tool(description="")
    def meant_empty(ticket_id: str) -> str:
        return ticket_id

    assert described.spec().description == "Look a ticket up."
    assert meant_empty.spec().description == ""


def docs_server(folder: Path) -> Path:
    """The MCP server docs/mcp.md shows, saved as its reader would save it."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "mcp.md").read_text(), re.S)
    (server,) = [block for block in blocks if "MCPServer(" in block]
    path = folder / "tickets_server.py"
    path.write_text(server)
    return path


def test_the_mcp_server_the_docs_show_serves_its_tool(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = docs_server(tmp_path)
    (tmp_path / "ws").mkdir()
    contract = tmp_path / "contract.toml"
    contract.write_text(
        'goal = "g"\nroot = "ws"\n[verify]\nkind = "workspace_file_contains"\n'
        'file = "a"\nneedle = "b"\n'
        f'[[mcp]]\nname = "tickets"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(server))}]\n"
    )

    assert main(["mcp", "list", str(contract)]) == 0
    listed = capsys.readouterr().out
    asking = ScriptedProvider(
        [reply("look it up", [call("mcp__tickets__lookup_ticket", ticket_id="T-1")]), reply("ok")]
    )
    with Store.open(tmp_path / "runs.db") as store:
        mcp = [McpServer.stdio("tickets", sys.executable, [str(server)])]
        result = Harness(asking, store=store, mcp=mcp).run_sync(TaskContract.from_toml(contract))
        calls = store.trace(result.run_id).tool_calls

    assert "mcp__tickets__lookup_ticket" in listed
    assert "The title and status of a ticket, by its id (such as T-1)." in listed
    assert [c.result for c in calls] == ["Login fails on Safari (open)"]
