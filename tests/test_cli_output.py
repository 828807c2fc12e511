"""What ``ioh`` prints: runs that fit a terminal, spend in its currency, whole lines in a pipe."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import crash_worker
from io_harness import (
    Budget,
    Record,
    Store,
    TaskContract,
    Usage,
    WorkspaceFileContains,
    run_sync,
)
from io_harness.cli import main
from io_harness.cli._text import shown
from io_harness.errors import ProviderError
from io_harness.testing import ScriptedProvider, call, reply
from support import run_id_in

IOH = Path(sys.executable).with_name("ioh")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
STARTED = re.compile(r"\d\d-\d\d \d\d:\d\d")
LONG_GOAL = "make every greeting in the notes file say hello to the whole wide world, politely"
PRICES = 'currency = "USD"\n[models."priced"]\ninput = 1\noutput = 1\n'
"""Prices for the served model ``priced`` only: a call served as ``other`` is unpriced."""
DEAR = 'currency = "EUR"\n[models."priced"]\ninput = 1000\noutput = 1000\n'
"""Prices so high that no call fits a budget of one micro-euro."""


@pytest.fixture(autouse=True)
def _piped_at_80_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a pipe or file gets by default; the terminal tests below say otherwise.
    for name in ("TTY_COMPATIBLE", "FORCE_COLOR", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "80")


def at_a_terminal(monkeypatch: pytest.MonkeyPatch, columns: int = 80) -> None:
    """Make ``ioh``'s console a terminal of ``columns`` (without colours to strip)."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("COLUMNS", str(columns))
    monkeypatch.setenv("LINES", "25")  # a dumb terminal's size is 80x25 unless both are said


class Workspace:
    """A contract (with an optional ``[budget]``), price tables, a store and cassettes."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        (tmp_path / "ws").mkdir()
        (tmp_path / "ws" / "notes.txt").write_text("say hello\n")
        self.store = tmp_path / "runs.db"
        self.prices = tmp_path / "prices.toml"
        self.prices.write_text(PRICES)
        self.dear = tmp_path / "dear.toml"
        self.dear.write_text(DEAR)

    def contract(self, name: str, budget: str = "max_steps = 2\n") -> Path:
        path = self.tmp / f"{name}.toml"
        path.write_text(
            f'goal = "{LONG_GOAL}"\nroot = "ws"\n'
            '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
            f"[budget]\n{budget}"
        )
        return path

    def cassette(self, model: str = "unlisted") -> Path:
        """Two answers: one served by the priced model, one by a model with no price; the
        provider's own ``model`` is what the cost budget is checked against."""
        cassette = self.tmp / f"{model}.jsonl"
        scripted = ScriptedProvider(
            [
                reply(
                    calls=[call("read_file", path="notes.txt")],
                    usage=Usage(input_tokens=1000, output_tokens=100),
                    model="priced",
                ),
                reply(
                    calls=[call("read_file", path="notes.txt")],
                    usage=Usage(input_tokens=1000, output_tokens=100),
                    model="other",
                ),
            ],
            model=model,
        )
        contract = TaskContract.from_toml(self.contract("record"))
        run_sync(contract, Record(scripted, cassette))
        return cassette

    def ioh(self, *argv: str) -> int:
        return main([*argv, "--store", str(self.store)])


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


@pytest.fixture
def three_runs(workspace: Workspace, capsys: pytest.CaptureFixture[str]) -> dict[str, str]:
    """A run with priced and unpriced calls, one stopped by its cost budget before its first
    call, one whose provider failed before any answer without a price table: by kind, ids."""
    cassette = workspace.cassette()
    ids = {}
    status = workspace.ioh(
        "run",
        str(workspace.contract("mixed")),
        "--provider",
        f"replay:{cassette}",
        "--prices",
        str(workspace.prices),
    )
    assert status == 1  # the step cap, after both answers
    ids["mixed"] = run_id_in(capsys.readouterr().out)
    status = workspace.ioh(
        "run",
        str(workspace.contract("broke", "max_cost = 0.000001\n")),
        "--provider",
        f"replay:{workspace.cassette('priced')}",
        "--prices",
        str(workspace.dear),
    )
    assert status == 1
    ids["broke"] = run_id_in(capsys.readouterr().out)
    failing = ScriptedProvider([ProviderError("auth", "no such key")])
    with Store.open(workspace.store) as store:
        contract = TaskContract.from_toml(workspace.contract("failed"))
        result = run_sync(contract, failing, store=store, run_id="failed-before-any-answer")
    assert result.outcome == "provider_failed"
    ids["failed"] = result.run_id
    return ids


# -- ioh runs fits a terminal of 80 columns ---------------------------------------------------


def test_every_runs_line_fits_80_columns_with_its_cells_aligned(
    workspace: Workspace,
    three_runs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    at_a_terminal(monkeypatch)

    assert workspace.ioh("runs") == 0

    lines = ANSI.sub("", capsys.readouterr().out).splitlines()
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    # A generated id leaves too little room: each id on a line of its own, whole.
    assert lines[0] == "run"
    header = lines[1]
    assert header.split() == ["status", "steps", "tokens", "spend", "started"]
    for run_id in three_runs.values():
        at = lines.index(run_id)
        row, below = lines[at + 1], lines[at + 2]
        started = STARTED.search(row)
        assert started is not None, row
        assert started.start() == header.index("started"), "\n".join(lines)
        assert below.startswith("  make every greeting")  # the goal on a line of its own
    # The outcome is whole; what did not fit is cut where it shows, never silently.
    assert any(line.split()[:1] == ["cost_budget_exceeded"] for line in lines)
    assert any(line.startswith("  make every") and line.endswith("…") for line in lines)


def test_a_wide_terminal_shows_every_cell_whole_and_the_goal_inline(
    workspace: Workspace,
    three_runs: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    at_a_terminal(monkeypatch, columns=240)  # a generated id is 40 characters

    assert workspace.ioh("runs") == 0

    lines = ANSI.sub("", capsys.readouterr().out).splitlines()
    (broke,) = [line for line in lines if line.startswith(three_runs["broke"])]
    assert "cost_budget_exceeded" in broke and LONG_GOAL in broke
    assert "…" not in "\n".join(lines)


def test_piped_runs_lines_are_whole(
    workspace: Workspace, three_runs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert workspace.ioh("runs") == 0

    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4  # the header and one line a run: nothing wrapped, nothing below
    (mixed,) = [line for line in lines if line.startswith(three_runs["mixed"])]
    assert "0.001100 USD + 1 unpriced call " in mixed and mixed.endswith(LONG_GOAL)
    assert "…" not in "\n".join(lines)


# -- spend: unpriced, never zero; the currency; why a cost budget stopped a run ------------------


def test_a_run_without_prices_is_unpriced_never_zero(
    workspace: Workspace, three_runs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    failed = three_runs["failed"]

    assert workspace.ioh("runs") == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith(failed)]
    assert workspace.ioh("show", failed) == 0
    shown = capsys.readouterr().out

    assert "0.000000" not in row and " unpriced " in row
    assert "spend: unpriced\n" in shown and "0.000000" not in shown


def test_spend_is_in_the_price_tables_currency(
    workspace: Workspace, three_runs: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    again = ["--provider", f"replay:{workspace.cassette()}", "--prices", str(workspace.prices)]
    # The same run once more, for its closing lines (ioh resume would continue a stopped run).
    assert workspace.ioh("run", str(workspace.contract("mixed")), *again) == 1
    closing = capsys.readouterr().out
    mixed = run_id_in(closing)
    assert workspace.ioh("show", mixed) == 0
    shown = capsys.readouterr().out

    # 1000 in and 100 out at 1 per million: 0.001100, and a call the table has no price for.
    assert "spend: 0.001100 USD + 1 unpriced call\n" in closing
    assert "spend: 0.001100 USD + 1 unpriced call\n" in shown
    assert "cost 0.001100 USD" in shown


def test_a_cost_budget_too_small_for_the_first_call_says_so(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = workspace.cassette("priced")

    status = workspace.ioh(
        "run",
        str(workspace.contract("broke", "max_cost = 0.000001\n")),
        "--provider",
        f"replay:{cassette}",
        "--prices",
        str(workspace.dear),
    )

    out = capsys.readouterr().out
    assert status == 1
    assert "outcome: cost_budget_exceeded after 0 steps" in out
    assert (
        "stopped: the cost budget of 0.000001 EUR could not cover the least the first call "
        "would cost" in out
    )
    assert "spend: 0.000000 EUR" in out  # priced, and nothing spent


# -- not at a terminal, lines are whole ------------------------------------------------------


def test_run_output_to_a_pipe_is_not_wrapped(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    cassette = workspace.cassette()
    deep = workspace.tmp / ("a-store-folder-with-a-long-name-" * 3)
    deep.mkdir()
    store = deep / "runs.db"

    main(
        [
            "run",
            str(workspace.contract("piped")),
            "--provider",
            f"replay:{cassette}",
            "--store",
            str(store),
            "--run-id",
            "piped",
        ]
    )

    out = capsys.readouterr().out
    assert f"trace: ioh show piped --store {store}\n" in out
    assert "provider error" not in out


def test_policy_show_to_a_pipe_keeps_long_rules_whole(
    workspace: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = workspace.tmp / "policy.toml"
    far = "a/" + "very-deeply-nested-folder/" * 4 + "file.txt"
    policy.write_text(f'[policy]\n[policy.layers.mine]\nask_write = ["{far}"]\n')

    assert main(["policy", "show", str(policy)]) == 0
    shown = capsys.readouterr().out

    assert any(far in line for line in shown.splitlines()), shown


def test_doctor_to_a_pipe_keeps_each_backend_on_one_line(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [str(IOH), "doctor"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "60"},
        cwd=tmp_path,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    names = [row.split("│")[1].strip() for row in rows]
    assert "" not in names, done.stdout  # no row folded onto a second line
    assert "floor" in names


def test_a_run_whose_process_died_shows_as_interrupted_with_its_resume_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()
    killed = subprocess.run(
        [sys.executable, crash_worker.__file__, str(db), str(root), "run", "crashy", "2", "call"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    assert main(["runs", "--store", str(db)]) == 0

    out = capsys.readouterr().out
    assert "interrupted" in out and "running" not in out
    assert f"ioh resume crashy --store {db} continues one" in out


def test_ioh_show_shows_what_it_can_of_a_run_with_text_that_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()
    done = subprocess.run(
        [sys.executable, crash_worker.__file__, str(db), str(root), "run", "odd", "0", "none"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with contextlib.closing(sqlite3.connect(db)) as raw:
        raw.execute("UPDATE tool_calls SET result = CAST(X'ff6f6b' AS TEXT) WHERE step = 1")
        raw.commit()

    assert main(["show", "odd", "--store", str(db)]) == 0

    out = capsys.readouterr().out
    assert "holds text that is not UTF-8 in tool_calls row 1, column result" in out
    assert "success" in out


def test_ioh_show_cuts_a_long_argument_visibly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()
    long_text = "y" * 200
    provider = ScriptedProvider(
        [reply(calls=[call("write_file", path="done.txt", content=f"done {long_text}")])]
    )
    contract = TaskContract.workspace("g", root, WorkspaceFileContains("done.txt", "done"))
    with Store.open(db) as store:
        run_sync(contract, provider, store=store, run_id="long")

    assert main(["show", "long", "--store", str(db)]) == 0

    out = capsys.readouterr().out
    assert 'path="done.txt"' in out  # a short argument is whole
    assert f'content="done {"y" * 34}… [+167 chars]' in out


# -- every text from a run is inert on a terminal -----------------------------------------------

HOSTILE = (
    "\x1b[2K\r\x1b]0;ok\x07\x9b1A\x9d0;ok\x07\u202etxt.exe\u2066\u2069\u200b\u2028\ufeff"
    "[bold red]styled[/] :white_check_mark:"
)
"""What a model writes to hide or redraw what ``ioh`` prints: erase the line and go back to its
start (ESC [2K, CR), retitle the window (OSC), a C1 CSI and OSC, a right-to-left override and
an isolate, a zero-width space, a line separator, a byte-order mark, rich markup and an emoji
code (``ioh``'s own marks are text and colour; a model's must not pass for them)."""
HOSTILE_SHOWN = (
    "\\x1b[2K\\r\\x1b]0;ok\\x07\\x9b1A\\x9d0;ok\\x07\\u202etxt.exe\\u2066\\u2069\\u200b\\u2028\\ufeff"
    "[bold red]styled[/] :white_check_mark:"
)
""":data:`HOSTILE` as ``ioh`` prints it: every character escaped, none dropped."""
ACTIVE = ["\x1b", "\x07", "\r", "\x9b", "\x9d", "\u202e", "\u2066", "\u2069", "\u200b", "\u2028"]
ACTIVE += ["\ufeff", "\u2705"]  # the byte-order mark, and the emoji :white_check_mark: names


def active_in(printed: str) -> list[str]:
    """The characters of :data:`ACTIVE` in what ``ioh`` printed, as the terminal gets them."""
    sent = printed.encode()
    return [char for char in ACTIVE if char.encode() in sent]


@pytest.fixture
def hostile_run(tmp_path: Path) -> tuple[Path, str]:
    """A store with one run whose id, goal, model text, tool calls and results hold
    :data:`HOSTILE`; the store, and the run's id."""
    root = tmp_path / "ws"
    root.mkdir()
    provider = ScriptedProvider(
        [
            reply(
                f"said {HOSTILE}\nand more",
                calls=[
                    call("write_file", path=f"n{HOSTILE}.txt", content=f"c{HOSTILE}"),
                    call("read_file", path=f"x{HOSTILE}"),
                ],
            )
        ]
    )
    contract = TaskContract.workspace(
        f"goal {HOSTILE}",
        root,
        WorkspaceFileContains("done.txt", "done"),
        budget=Budget(max_steps=1),
    )
    with Store.open(tmp_path / "runs.db") as store:
        result = run_sync(contract, provider, store=store, run_id=f"r{HOSTILE}")
    return tmp_path / "runs.db", result.run_id


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
@pytest.mark.parametrize("view", [[], ["--view", "model"]], ids=["transcript", "model"])
def test_ioh_show_prints_a_runs_hostile_text_inert_in_every_view(
    hostile_run: tuple[Path, str],
    view: list[str],
    terminal: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, run_id = hostile_run
    if terminal:
        at_a_terminal(monkeypatch, columns=400)

    assert main(["show", run_id, *view, "--store", str(store)]) == 0

    out = capsys.readouterr().out
    assert active_in(out) == [], out
    assert f"\ngoal: goal {HOSTILE_SHOWN}\n" in out
    assert f"r{HOSTILE_SHOWN}  " in out
    if view:
        assert f"\n  said {HOSTILE_SHOWN}\n  and more\n" in out  # the model's text, whole
    else:
        assert 'write_file(path="n\\u001b[2K\\r\\u001b]0;ok\\u0007\\u009b1A' in out


@pytest.mark.parametrize("terminal", [False, True], ids=["piped", "terminal"])
def test_ioh_runs_prints_a_hostile_run_id_and_goal_inert(
    hostile_run: tuple[Path, str],
    terminal: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store, _ = hostile_run
    if terminal:
        at_a_terminal(monkeypatch, columns=400)

    assert main(["runs", "--store", str(store)]) == 0

    out = capsys.readouterr().out
    assert active_in(out) == [], out
    (row,) = [line for line in out.splitlines() if line.startswith("r\\x1b")]
    assert row.startswith(f"r{HOSTILE_SHOWN}  ") and row.endswith(f"goal {HOSTILE_SHOWN}")


def test_ioh_show_json_escapes_control_and_format_characters_and_parses_to_the_stored_text(
    hostile_run: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id = hostile_run

    assert main(["show", run_id, "--json", "--store", str(store)]) == 0

    out = capsys.readouterr().out
    assert active_in(out) == [], out
    assert "\\u009b1A\\u009d0;ok\\u0007\\u202etxt.exe\\u2066\\u2069\\u200b\\u2028\\ufeff" in out
    with Store.open(store) as opened:
        stored = json.loads(opened.trace(run_id).model_dump_json())
    assert json.loads(out) == stored
    assert stored["run"]["goal"] == f"goal {HOSTILE}"


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("\x1b[31m", "\\x1b[31m"),
        ("\x00\x08\x0b\x0c\x7f", "\\x00\\x08\\x0b\\x0c\\x7f"),
        ("\x85\x9b\x9d\x9f", "\\x85\\x9b\\x9d\\x9f"),
        ("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e", "\\u061c\\u200e\\u200f\\u202a"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
        ("a\u200b\u200c\u200d\u2060b", "a\\u200b\\u200c\\u200d\\u2060b"),
        ("\ufeff\u00ad\u2028\u2029", "\\ufeff\\xad\\u2028\\u2029"),
        ("\u3164\u115f\U000e0041", "\\u3164\\u115f\\U000e0041"),
        ("\ud800", "\\ud800"),  # a lone surrogate, which no terminal encoding can write
        ("x\ufe0f\ufe0f", "x\ufe0f\\ufe0f"),  # one presentation selector styles x; two hide
        ("tab\tand\nnewline", "tab\tand\nnewline"),
        ("café ⚠\ufe0f 日本", "café ⚠\ufe0f 日本"),
    ],
)
def test_every_character_that_could_act_on_a_terminal_or_hide_text_is_printed_as_its_escape(
    text: str, printed: str
) -> None:
    assert printed in shown(text)
    assert shown(shown(text)) == shown(text)  # what is escaped is ASCII, never escaped again


def test_a_value_printed_on_one_line_shows_its_tabs_and_newlines() -> None:
    assert shown("a\tpath\nwants: x", one_line=True) == "a\\tpath\\nwants: x"
