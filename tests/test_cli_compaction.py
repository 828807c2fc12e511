"""``ioh show`` of a compacted run: the transcript whole, what was left out marked, the summaries
where they were made; ``--view model``: the messages the model was sent at the run's end.

The run is test_compaction's: a scripted agent reads big.txt until a scripted
compactor has to make room.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from io_harness import Compaction, Harness, RunOutcome, Store
from io_harness.cli import main
from io_harness.compaction._pass import SUMMARY_HEADING
from io_harness.store import Trace
from io_harness.testing import ScriptedProvider
from test_compaction import contract, respond, workspace

RUN = "compacted"


def _run(tmp_path: Path, compaction: Compaction | None) -> tuple[Path, Trace]:
    db = tmp_path / "runs.db"
    window = 3000 if compaction is not None else None
    with Store.open(db) as store:
        harness = Harness(
            ScriptedProvider(respond, context_window=window), store=store, compaction=compaction
        )
        result = harness.run_sync(contract(workspace(tmp_path)), run_id=RUN)
        assert result.outcome is RunOutcome.SUCCESS
        return db, store.trace(RUN)


@pytest.fixture
def compacted(tmp_path: Path) -> tuple[Path, Trace]:
    db, trace = _run(tmp_path, Compaction(at_share=0.8, keep_recent=2))
    assert trace.compactions, "the run was not compacted"
    return db, trace


def _show(db: Path, capsys: pytest.CaptureFixture[str], *more: str) -> str:
    capsys.readouterr()
    assert main(["show", RUN, "--store", str(db), *more]) == 0
    return capsys.readouterr().out


def _steps(shown: str) -> dict[int, str]:
    """The report's step blocks, by step."""
    blocks = re.split(r"^(?=step \d+ )", shown, flags=re.M)[1:]
    return {int(block.split()[1]): block for block in blocks}


def _headings(shown: str) -> list[tuple[int, str]]:
    """``--view model``'s messages: their positions in the transcript and roles, in order."""
    return [(int(n), role) for n, role in re.findall(r"^#(\d+) (\w+) \(", shown, re.M)]


def test_show_marks_what_each_pass_left_out_and_shows_its_summary_where_it_ran(
    compacted: tuple[Path, Trace], capsys: pytest.CaptureFixture[str]
) -> None:
    db, trace = compacted
    summaries = [c for c in trace.compactions if c.kind == "summary"]

    shown = _show(db, capsys)

    assert f"compaction: {len(summaries)} passes; --view model shows what" in shown
    steps = _steps(shown)
    assert sorted(steps) == [s.step for s in trace.steps]  # every step is still shown
    for summary in summaries:
        assert f"summary: {summary.text}" in steps[summary.step]
        assert "compaction pass answered by scripted" in steps[summary.step]
    # A deleted message's step is marked with the pass that left it out; the task never is.
    for edit in trace.compactions:
        if edit.kind == "delete":
            assert edit.message is not None and edit.message > 1
            note = f"[left out of the model's view by the compaction before step {edit.step}]"
            # #1 is the task; step n's answer is #2n and its results #2n+1.
            assert note in steps[edit.message // 2]
    last = max(steps)
    assert "left out of the model's view by" not in steps[last]
    assert shown.rstrip().endswith("outcome: success")


def test_show_view_model_shows_the_task_first_the_summaries_and_fewer_messages(
    compacted: tuple[Path, Trace], capsys: pytest.CaptureFixture[str]
) -> None:
    db, trace = compacted
    deleted = {c.message for c in trace.compactions if c.kind == "delete"}

    shown = _show(db, capsys, "--view", "model")

    headings = _headings(shown)
    assert headings[0] == (1, "user")
    assert len(headings) == len(trace.messages) - len(deleted) < len(trace.messages)
    assert not deleted & {n for n, _ in headings}
    task = shown.split("\n#1 user (the task)\n", 1)[1]
    assert task.startswith(f"  {trace.run.goal}\n  {SUMMARY_HEADING}\n")
    for summary in (c.text for c in trace.compactions if c.kind == "summary"):
        assert f"  {summary}\n" in task
    assert f"{len(headings)} of {len(trace.messages)} messages, after" in shown
    assert "write_file(path=" in shown  # the last step, which nothing left out


def test_piped_show_lines_are_whole(
    compacted: tuple[Path, Trace], capsys: pytest.CaptureFixture[str]
) -> None:
    db, _ = compacted
    shown = _show(db, capsys)
    read = [line for line in shown.splitlines() if "ok read_file(" in line]
    assert read and all(line.endswith("x ...") and len(line) > 80 for line in read)


def test_a_run_never_compacted_shows_as_before_and_its_view_is_the_transcript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, trace = _run(tmp_path, None)

    shown = _show(db, capsys)
    assert "compaction" not in shown and "left out" not in shown

    view = _show(db, capsys, "--view", "model")
    assert [n for n, _ in _headings(view)] == list(range(1, len(trace.messages) + 1))
    assert "no compaction: the whole transcript" in view
    assert SUMMARY_HEADING not in view


def test_show_refuses_an_unknown_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["show", RUN, "--store", str(tmp_path / "runs.db"), "--view", "raw"])
    assert "invalid choice: 'raw'" in capsys.readouterr().err
