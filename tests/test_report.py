"""``ioh report`` and ``io_harness.report``: a run's trace as one self-contained HTML page.

Runs are made with the scripted model, a real SQLite file and the real tools;
the page is checked as text, and loaded in a real headless Chromium (Debian's
``chromium``, which ``make test`` installs) for console errors, the rendered
DOM, the layout at a laptop's width and a screenshot.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import markupsafe
import pytest

from chromium import CHROMIUM, Browser
from io_harness import (
    NO_SANDBOX,
    Compaction,
    CompletionRequest,
    CompletionResponse,
    Containment,
    Decision,
    FileContains,
    Harness,
    Policy,
    RunOutcome,
    Store,
    TaskContract,
    Usage,
    WorkspaceFileContains,
    run_sync,
)
from io_harness.cli import main
from io_harness.pricing import PriceTable
from io_harness.report import render_report, write_report
from io_harness.store._records import McpEventRow
from io_harness.testing import ScriptedProvider, call, reply

PAYLOAD = (
    '<script>window.__pwned = 1; console.error("pwned")</script><img src=x onerror="alert(1)">'
)
"""Markup a run's output holds: the report must show it as text, never run it."""
PRICES = PriceTable({"scripted": {"input": 1, "output": 2}}, currency="EUR")
USAGE = Usage(input_tokens=100, output_tokens=10)
"""One call costs 100 * 1 + 10 * 2 = 120 micro-units."""
POLICY = Policy.default().layer("team").deny_read("secret.txt").ask_write("data/*")


def eventful_run(project: Path, store: Store) -> str:
    """A run that does a little of everything: reads (one refused), a write that waits for
    a person's approval, edits whose checks fail and pass, a command whose output holds
    markup, a note remembered, a turn that ends too early and the feedback it gets."""
    (project / "secret.txt").write_text("hunter2\n")
    script = [
        reply(
            "Looking first.",
            [call("read_file", path="pkg/calc.py"), call("read_file", path="secret.txt")],
            USAGE,
        ),
        reply(
            "Notes, then a first try.",
            [
                call("write_file", path="data/notes.txt", content="alpha\nbeta\ndelta\n"),
                call("write_file", path="CHANGES.md", content="# Changes\n\n- add adds\n"),
                call("edit_file", path="pkg/calc.py", search="a - b", replace="a * b"),
            ],
            USAGE,
        ),
        reply(
            "Checking the output.",
            [
                call("exec", argv=["printf", "%s\\n", PAYLOAD]),
                call("remember", key="calc-style", value="keep functions small"),
            ],
            USAGE,
        ),
        reply("I think that is it.", usage=USAGE),
        reply(
            "Multiplying was wrong.",
            [call("edit_file", path="pkg/calc.py", search="a * b", replace="a + b")],
            USAGE,
        ),
    ]
    provider = ScriptedProvider(script)
    contract = TaskContract.workspace(
        "fix add <b>now</b>",
        project,
        WorkspaceFileContains("pkg/calc.py", "a + b"),
        tools=("exec",),
    )
    harness = Harness(
        provider, store=store, policy=POLICY, sandbox=NO_SANDBOX, prices=PRICES, memory=True
    )
    waiting = harness.run_sync(contract, run_id="eventful")
    assert waiting.outcome is RunOutcome.AWAITING_APPROVAL and waiting.request_id
    store.decide(waiting.request_id, Decision.approve(by="carol"))
    done = harness.resume_sync("eventful")
    assert done.outcome is RunOutcome.SUCCESS, done
    provider.assert_exhausted()
    return done.run_id


class _Page(HTMLParser):
    """A page's ids, ``data-*`` attributes, scripts, and its text (all of it, folds too)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.data: dict[str, set[str]] = {}
        self.scripts: list[str] = []
        self.tags: set[str] = set()
        self._inside: str | None = None
        self._text: list[str] = []
        self.feed(text)
        self.text = " ".join("".join(self._text).split())

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            elif name.startswith("data-") and value is not None:
                self.data.setdefault(name, set()).add(value)
        self._inside = tag if tag in {"script", "style"} else None

    def handle_endtag(self, tag: str) -> None:
        self._inside = None

    def handle_data(self, data: str) -> None:
        if self._inside == "script":
            self.scripts.append(data)
        elif self._inside is None:
            self._text.append(data)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The SQLite file the test's store is."""
    return tmp_path / "runs.db"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    opened = Store.open(db)
    yield opened
    opened.close()


@pytest.fixture
def eventful(project: Path, store: Store) -> str:
    return eventful_run(project, store)


def test_every_step_call_verdict_and_decision_of_a_run_is_in_its_report(
    eventful: str, store: Store
) -> None:
    trace = store.trace(eventful)
    page = _Page(render_report(store, eventful))

    assert {f"a0-s{row.step}" for row in trace.steps} <= page.ids
    assert len(trace.steps) == 5
    for tool_call in trace.tool_calls:
        assert f"a0-s{tool_call.step}-c{tool_call.seq}" in page.ids, tool_call.name
        assert tool_call.name in page.text
    for check in trace.verifications:
        assert f"a0-s{check.step}-v{check.seq}" in page.ids
        assert check.summary in page.text
    assert [c.passed for c in trace.verifications] == [False, False, True]
    assert page.data["data-permission"] == {str(p.seq) for p in trace.permissions}
    assert ("read", "secret.txt", "refused") in {
        (p.act, p.target, p.decision) for p in trace.permissions
    }
    assert "refused: read secret.txt (rule" in page.text
    assert "approved by carol: write data/notes.txt" in page.text
    (approval,) = trace.approvals
    assert page.data["data-approval"] == {approval.id}
    # The summary: goal, outcome, steps, tokens, spend in the run's currency, provider.
    assert "fix add <b>now</b>" in page.text
    assert "success" in page.text and "scripted (scripted)" in page.text
    assert f"{trace.run.tokens:,} tokens" in page.text
    assert "0.000600 EUR" in page.text  # 5 calls of 120 micro-units
    # The messages, the feedback a turn that ended early got, memory, the sandbox.
    assert "Multiplying was wrong." in page.text
    assert "The success condition does not hold yet." in page.text
    assert "memory set calc-style = keep functions small" in page.text
    assert "sandbox exec none argv: printf" in page.text
    assert "The model was not sent this output" in page.text  # a file_changed check's


def test_each_write_and_edit_shows_the_change_it_made(eventful: str, store: Store) -> None:
    text = _Page(render_report(store, eventful)).text

    # Created: the whole file, added.
    assert "created CHANGES.md — a new file" in text
    assert "+++ b/CHANGES.md @@ -0,0 +1,3 @@ +# Changes" in text
    # Edited after a whole-file read: a diff with context, against what the read showed.
    assert "edited pkg/calc.py — against its content as read at step 1" in text
    assert "def add(a, b): - return a - b + return a * b" in text
    # The command at step 3 may have changed any file: what was known is forgotten, and
    # the next edit shows only the replaced text, at the line the tool reported.
    assert "edited pkg/calc.py — the replaced text at line 2; the rest of the file is not" in text
    assert "@@ -2,1 +2,1 @@ -a * b +a + b" in text
    # Overwritten, never read: what the approver was shown (the trace holds it).
    assert "changed data/notes.txt — the diff the approver was shown" in text
    assert "-gamma +delta" in text


def test_a_write_of_a_file_the_run_never_saw_shows_its_new_content_and_a_same_write_none(
    project: Path, store: Store
) -> None:
    provider = ScriptedProvider(
        [
            reply(calls=[call("write_file", path="data/notes.txt", content="one\ntwo\n")]),
            reply(
                calls=[
                    call("write_file", path="data/notes.txt", content="one\ntwo\n"),
                    call("edit_file", path="data/notes.txt", search="two", replace="2"),
                ]
            ),
            reply(calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")]),
        ]
    )
    contract = TaskContract.workspace("g", project, WorkspaceFileContains("pkg/calc.py", "a + b"))
    result = run_sync(contract, provider, store=store, sandbox=NO_SANDBOX)

    text = _Page(render_report(store, result.run_id)).text

    assert (
        "changed data/notes.txt — the file existed before this write; its earlier content" in text
    )
    assert "new content" in text and "one two" in text
    assert "unchanged data/notes.txt — the file already held this content" in text
    assert "edited data/notes.txt — against its content as written at step 2" in text
    # Never read nor written by the run: the replaced lines at the line the tool reported.
    assert "edited pkg/calc.py — the replaced text at line 2; the rest of the file is not" in text
    assert "@@ -2,1 +2,1 @@ -a - b +a + b" in text


def test_text_from_a_run_is_shown_never_run(eventful: str, store: Store) -> None:
    page_html = render_report(store, eventful)
    page = _Page(page_html)

    assert PAYLOAD not in page_html and "img" not in page.tags
    assert markupsafe.escape(PAYLOAD) in page_html
    assert PAYLOAD in page.text  # the reader sees it, as text
    assert len(page.scripts) == 1 and "pwned" not in page.scripts[0]
    assert "<b>now</b>" not in page_html
    # The page allows no network and only its own script.
    csp = re.search(r'Content-Security-Policy" content="([^"]+)"', page_html)
    assert csp is not None and "default-src 'none'" in csp.group(1)
    assert "script-src 'sha256-" in csp.group(1)


def test_control_characters_and_direction_overrides_are_shown_as_escapes(
    project: Path, store: Store
) -> None:
    provider = ScriptedProvider(
        [
            reply(
                "clear\x1b[2J \u202eevil \u200bzero\u2028line",
                [
                    call(
                        "write_file",
                        path="pkg/calc.py",
                        content="def add(a, b):\n    return a + b\n",
                    )
                ],
            )
        ]
    )
    contract = TaskContract.workspace("g", project, WorkspaceFileContains("pkg/calc.py", "a + b"))
    result = run_sync(contract, provider, store=store, sandbox=NO_SANDBOX)

    page_html = render_report(store, result.run_id)

    assert not {"\x1b", "\u202e", "\u200b", "\u2028"} & set(page_html)
    assert "clear\\x1b[2J \\u202eevil \\u200bzero\\u2028line" in page_html


def test_mcp_events_are_shown_in_their_step_and_in_a_table(eventful: str, store: Store) -> None:
    store.append_mcp_events(
        eventful,
        5,
        [McpEventRow("tickets", "close", json.dumps({"duration": 0.25, "error": "<gone>"}), 9.0)],
    )

    page = _Page(render_report(store, eventful))

    assert "a0-mcp" in page.ids
    assert "mcp close tickets duration: 0.25 s · error: <gone>" in page.text


def test_a_compacted_run_shows_each_pass_and_what_the_model_no_longer_saw(
    tmp_path: Path, store: Store
) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "big.txt").write_text("x" * 3000 + "\n")

    reads: list[CompletionRequest] = []

    def model(request: CompletionRequest) -> CompletionResponse:
        if request.system.startswith("You compact the conversation"):
            listing = str(request.messages[0].text)
            ids = [int(n) for n in re.findall(r"^#(\d+) \w+:", listing, re.M)]
            return reply(
                calls=[
                    call("write_summary", text="big.txt holds x's"),
                    call("mark_for_deletion", ids=ids),
                ]
            )
        reads.append(request)  # what a pass takes from the view, the agent still did
        if len(reads) <= 4:
            return reply("reading", [call("read_file", path="big.txt")])
        return reply("done", [call("write_file", path="done.txt", content="done\n")])

    contract = TaskContract.workspace(
        "read big.txt, then write done.txt",
        tmp_path / "work",
        WorkspaceFileContains("done.txt", "done"),
    )
    harness = Harness(
        ScriptedProvider(model, context_window=3000),
        store=store,
        sandbox=NO_SANDBOX,
        compaction=Compaction(at_share=0.8, keep_recent=2),
    )
    result = harness.run_sync(contract, run_id="compacted")
    trace = store.trace("compacted")
    assert result.outcome is RunOutcome.SUCCESS and trace.compactions

    text = _Page(render_report(store, "compacted")).text

    first = min(c.step for c in trace.compactions)
    assert "Compaction before this step: left" in text and "big.txt holds x's" in text
    assert f"left out of the model's view before step {first}" in text
    assert "the compaction pass answered by scripted" in text


def test_a_run_awaiting_approval_shows_the_request_undecided(tmp_path: Path, store: Store) -> None:
    (tmp_path / "one.txt").write_text("old\n")
    contract = TaskContract.file("say new", tmp_path / "one.txt", FileContains("new"))
    provider = ScriptedProvider([reply(calls=[call("write_file", content="new\n")])])
    waiting = run_sync(contract, provider, store=store, policy=Policy.guarded(), run_id="asks")
    assert waiting.outcome is RunOutcome.AWAITING_APPROVAL

    page = _Page(render_report(store, "asks"))

    assert page.data["data-approval"] == {waiting.request_id}
    assert "pending" in page.text and "no decision yet" in page.text
    assert "deferred by nobody: write one.txt" in page.text
    assert "--- a/one.txt +++ b/one.txt @@ -1 +1 @@ -old +new" in page.text
    assert '"content": "new\\n"' in page.text  # the call's arguments


def _tree(project: Path, store: Store) -> str:
    def model(request: CompletionRequest) -> CompletionResponse:
        goal = str(request.messages[0].text).split("\n\n", 1)[0]
        turn = sum(m.role == "assistant" for m in request.messages)
        if goal == "write the report":
            if turn == 0:
                verify = {"kind": "workspace_file_contains", "needle": "ok"}
                return reply(
                    "Two parts, two helpers.",
                    [
                        call(
                            "spawn_agent",
                            goal="write the intro",
                            verify={**verify, "file": "intro.md"},
                        ),
                        call(
                            "spawn_agent",
                            goal="write the body",
                            verify={**verify, "file": "body.md"},
                        ),
                    ],
                )
            return reply("Joining them.", [call("write_file", path="report.md", content="ok\n")])
        file = "intro.md" if "intro" in goal else "body.md"
        return reply(f"Writing {file}.", [call("write_file", path=file, content="ok\n")])

    contract = TaskContract.workspace(
        "write the report", project, WorkspaceFileContains("report.md", "ok")
    )
    result = run_sync(
        contract,
        ScriptedProvider(model),
        run_id="tree",
        store=store,
        sandbox=NO_SANDBOX,
        containment=Containment(max_depth=1, max_concurrent_agents=2),
    )
    assert result.outcome is RunOutcome.SUCCESS
    return "tree"


def test_a_tree_report_links_each_agent_from_the_tree(project: Path, store: Store) -> None:
    root = _tree(project, store)
    nodes = store.tree(root)
    page = _Page(render_report(store, root))

    assert len(nodes) == 3
    anchors = {f"a{i}" for i in range(3)}
    assert anchors <= page.ids and "tree" in page.ids
    for node in nodes:
        assert node.run.id in page.text and node.run.goal in page.text
    assert "total: 3 agents" in page.text
    # Each spawn call's card names the child it made, linked to its section.
    children = {node.spawn_call for node in nodes if node.parent_id == root}
    spawns = [c for c in store.trace(root).tool_calls if c.name == "spawn_agent"]
    assert {c.call_id for c in spawns} == children
    assert page.text.count("spawned tree.") == 2

    child = nodes[1].run.id
    one = _Page(render_report(store, child))
    assert f"{child} is an agent of the tree rooted at {root}" in one.text
    assert "a1" not in one.ids and nodes[2].run.id not in one.text.replace(child, "")


def test_ioh_report_writes_the_page_named_for_the_run(
    eventful: str,
    db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    location = str(db)

    assert main(["report", eventful, "--store", location]) == 0
    assert f"written to report-{eventful}.html" in capsys.readouterr().out
    assert (tmp_path / f"report-{eventful}.html").read_text().startswith("<!DOCTYPE html>")

    assert main(["report", eventful, "--store", location, "-o", "out/r.html"]) == 0
    assert (tmp_path / "out" / "r.html").is_file()


def test_an_unknown_run_is_the_one_line_error_ioh_show_gives(
    store: Store, db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(db)

    assert main(["show", "ghost", "--store", location]) == 2
    shown = capsys.readouterr().err
    assert main(["report", "ghost", "--store", location]) == 2
    reported = capsys.readouterr().err

    assert reported == shown and "no run 'ghost'" in reported
    assert reported.count("\n") == 1


def test_a_store_that_does_not_exist_is_said_and_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere" / "runs.db"

    assert main(["report", "x", "--store", str(missing)]) == 2

    err = capsys.readouterr().err
    assert err.startswith("error: no store at") and "Traceback" not in err
    assert not missing.parent.exists()


def test_a_damaged_store_still_gives_a_report_that_says_so(
    eventful: str, db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(db)
    with contextlib.closing(sqlite3.connect(location)) as raw:
        raw.execute("UPDATE tool_calls SET result = CAST(X'ff6f6b' AS TEXT) WHERE step = 1")
        raw.commit()

    assert main(["report", eventful, "--store", location, "-o", str(tmp_path / "r.html")]) == 0

    out = capsys.readouterr().out
    assert "holds text that is not UTF-8 in tool_calls row" in out
    text = _Page((tmp_path / "r.html").read_text()).text
    assert "Part of this store is damaged." in text and "\ufffdok" in text
    assert "success" in text


# -- in a real browser ---------------------------------------------------------------

SIDEWAYS = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
"""How wide the page is laid out, and how wide the window shows it."""


@pytest.fixture
def chromium() -> str:
    """Debian's chromium (``make test`` installs it); on another system, the test skips."""
    found = shutil.which(CHROMIUM) or shutil.which("chromium")
    if found is None:
        if sys.platform.startswith("linux"):
            pytest.fail(
                "chromium is not installed: `make test` installs it (apt-get install chromium) "
                "to load the HTML report in a real browser"
            )
        pytest.skip(f"the report's browser test drives Debian's chromium; none on {sys.platform}")
    return found


def test_the_report_loads_in_chromium_with_no_console_errors_and_every_step_shown(
    chromium: str, eventful: str, store: Store, tmp_path: Path
) -> None:
    trace = store.trace(eventful)
    page = write_report(store, eventful, tmp_path / "report.html")
    (tmp_path / "tree-work").mkdir()
    tree = write_report(store, _tree(tmp_path / "tree-work", store), tmp_path / "tree.html")

    with Browser(chromium, width=1366, height=768) as browser:
        browser.load(page)
        shot = browser.screenshot(tmp_path / "report.png")
        ids = set(browser.evaluate("[...document.querySelectorAll('[id]')].map(e => e.id)"))
        text = browser.evaluate("document.body.textContent")
        widths = browser.evaluate(SIDEWAYS)
        browser.resize(800, 900)
        narrow = browser.evaluate(SIDEWAYS)
        browser.resize(1366, 768)
        pwned = browser.evaluate("typeof window.__pwned")
        browser.evaluate("document.getElementById('unfold-all').click()")
        closed = browser.evaluate("document.querySelectorAll('details.fold:not([open])').length")
        browser.load(tree)
        browser.screenshot(tmp_path / "tree.png")
        agents = browser.evaluate("[...document.querySelectorAll('#tree a')].map(a => a.hash)")
        sections = browser.evaluate(
            "[...document.querySelectorAll('.agent-section')].map(e => e.id)"
        )

    assert browser.console == []
    assert pwned == "undefined" and PAYLOAD in text
    assert {f"a0-s{row.step}" for row in trace.steps} <= ids
    for check in trace.verifications:
        assert f"a0-s{check.step}-v{check.seq}" in ids and check.summary in text
    assert widths[0] <= widths[1], "the page scrolls sideways at 1366 px"
    assert narrow[0] <= narrow[1], "the page scrolls sideways at 800 px"
    assert closed == 0
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert agents == ["#a0", "#a1", "#a2"] and sections == ["a0", "a1", "a2"]
