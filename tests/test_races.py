"""Racing processes against what the harness opens on the agent's behalf.

A real process (tests/racer.py) swaps a folder of the workspace for a symlink
leading out of it, atomically and in a loop, while the file tools, the
criteria and read_skill act on paths through that folder. The promise under
test: what is opened is what was checked — never a file outside the workspace,
however the swaps interleave — and a lost race is an observation, never a crash.
Each test shows the race was run: the racer's swap count, and both outcomes
(the folder seen real, and seen as the symlink) among the calls.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from io_harness import (
    Harness,
    RunOutcome,
    Store,
    TaskContract,
    ToolResult,
    WorkspaceFileContains,
)
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import RunTools, ToolOutcome, Workspace, workspace_tools
from io_harness.tools._read_skill import ReadSkillTool
from io_harness.tools._skills import discover_skills
from io_harness.verify import Subject

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="renameat2(RENAME_EXCHANGE) is Linux's"
)

RACER = Path(__file__).with_name("racer.py")
SECRET = "SECRET outside the workspace\n"
INSIDE = "inside\n"
CALLS = 300


@dataclass
class Race:
    swaps: int = 0


@contextmanager
def racing(first: Path, second: Path) -> Iterator[Race]:
    """A process exchanging ``first`` and ``second`` until the block ends."""
    proc = subprocess.Popen(
        [sys.executable, str(RACER), str(first), str(second)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout=30)
    race = Race()
    try:
        assert ready == ["ready\n"], f"the racer did not start: {ready}"
        yield race
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
        race.swaps = int(out.split()[-1]) if out.split() else 0


@pytest.fixture
def swapped(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A workspace whose folder ``d`` a racer exchanges with ``x``, a symlink leading out."""
    project = tmp_path / "project"
    (project / "d").mkdir(parents=True)
    (project / "d" / "f.txt").write_text(INSIDE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(SECRET)
    (project / "x").symlink_to(outside, target_is_directory=True)
    return project, outside, project / "x"


def toolbox(project: Path) -> RunTools:
    return RunTools(workspace_tools(Workspace(project)))


async def use(box: RunTools, tool: str, /, **arguments: Any) -> ToolOutcome:
    done = await box.dispatch(call(tool, **arguments))
    assert isinstance(done, ToolOutcome)
    return done


def seen_both_ways(outcomes: list[ToolOutcome]) -> bool:
    """Whether some calls found the real folder and others the swapped-in symlink."""
    swapped = [o.is_error and ("symlink" in o.content or "changed" in o.content) for o in outcomes]
    return any(swapped) and not all(swapped)


async def calls_until_both_ways(make: Callable[[], Awaitable[ToolOutcome]]) -> list[ToolOutcome]:
    """At least :data:`CALLS` outcomes, and more (bounded) until both ways were seen.

    On two busy cores the racer may sleep through a few hundred calls.
    """
    outcomes = [await make() for _ in range(CALLS)]
    while not seen_both_ways(outcomes) and len(outcomes) < 30 * CALLS:
        outcomes += [await make() for _ in range(CALLS)]
    return outcomes


async def test_read_file_never_returns_a_file_outside_while_a_folder_is_swapped(
    swapped: tuple[Path, Path, Path],
) -> None:
    project, _, link = swapped
    box = toolbox(project)

    with racing(project / "d", link) as race:
        outcomes = await calls_until_both_ways(lambda: use(box, "read_file", path="d/f.txt"))
        windows = await calls_until_both_ways(
            lambda: use(box, "read_file", path="d/f.txt", offset=1, limit=1)
        )

    assert race.swaps > 0
    assert seen_both_ways(outcomes) and seen_both_ways(windows)
    assert not any("SECRET outside" in o.content for o in outcomes + windows)
    assert all(o.content.endswith("\tinside\n") for o in outcomes + windows if not o.is_error)


@pytest.mark.parametrize(
    ("tool", "extra"),
    [
        ("write_file", {"content": "pwned\n"}),
        ("edit_file", {"search": "SECRET", "replace": "pwned"}),
        ("edit_file", {"search": "inside", "replace": "pwned"}),
    ],
)
async def test_writes_never_reach_a_file_outside_while_a_folder_is_swapped(
    swapped: tuple[Path, Path, Path], tool: str, extra: dict[str, Any]
) -> None:
    project, outside, link = swapped
    box = toolbox(project)

    with racing(project / "d", link) as race:
        outcomes = await calls_until_both_ways(lambda: use(box, tool, path="d/f.txt", **extra))
        outcomes += await calls_until_both_ways(lambda: use(box, tool, path="d/new.txt", **extra))

    assert race.swaps > 0
    assert seen_both_ways(outcomes)
    assert (outside / "f.txt").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert not any("SECRET outside" in o.content for o in outcomes)


async def test_walks_never_enter_a_folder_swapped_for_a_symlink(
    swapped: tuple[Path, Path, Path],
) -> None:
    project, _, link = swapped
    box = toolbox(project)

    with racing(project / "d", link) as race:
        greps = [await use(box, "grep", pattern="SECRET|inside") for _ in range(CALLS // 3)]
        listings = await calls_until_both_ways(lambda: use(box, "list_dir", path="d"))

    assert race.swaps > 0
    assert any("f.txt:1: inside" in g.content for g in greps)
    assert not any("SECRET outside" in g.content for g in greps)
    assert seen_both_ways(listings)


async def test_a_criterion_never_reads_a_file_outside_while_a_folder_is_swapped(
    swapped: tuple[Path, Path, Path],
) -> None:
    project, _, link = swapped
    criterion = WorkspaceFileContains("d/f.txt", "SECRET")
    inside = WorkspaceFileContains("d/f.txt", "inside")

    subject = Subject(mode="workspace", root=project)
    with racing(project / "d", link) as race:
        verdicts = [await criterion.check(subject) for _ in range(CALLS)]
        found = [await inside.check(subject) for _ in range(CALLS)]
        while (
            not (any(v.passed for v in found) and any("symlink" in v.output for v in found))
            and len(found) < 30 * CALLS
        ):
            found += [await inside.check(subject) for _ in range(CALLS)]

    assert race.swaps > 0
    assert not any(v.passed for v in verdicts)
    assert any(v.passed for v in found) and any("symlink" in v.output for v in found)


async def test_read_skill_never_reads_a_file_outside_while_its_folder_is_swapped(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    skill = project / "skills" / "pdf"
    (skill / "references").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\ndescription: PDFs\n---\nUse the api.\n")
    (skill / "references" / "api.md").write_text(INSIDE)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "api.md").write_text(SECRET)
    (skill / "away").symlink_to(outside, target_is_directory=True)
    skills = discover_skills([project / "skills"], within=Workspace(project))
    box = RunTools([ReadSkillTool(skills, project)])

    with racing(skill / "references", skill / "away") as race:
        outcomes = [
            await use(box, "read_skill", name="pdf", file="references/api.md") for _ in range(CALLS)
        ]

    assert race.swaps > 0
    assert seen_both_ways(outcomes)
    assert not any("SECRET outside" in o.content for o in outcomes)


async def test_a_run_whose_workspace_races_ends_with_observations_and_no_crash(
    swapped: tuple[Path, Path, Path], store: Store
) -> None:
    project, outside, link = swapped
    calls = [call("read_file", path="d/f.txt") for _ in range(40)]
    calls += [call("write_file", path="d/f.txt", content="pwned\n") for _ in range(40)]
    finish = call("write_file", path="marker.txt", content="finished\n")
    script = ScriptedProvider(
        [reply(calls=calls[i : i + 8]) for i in range(0, 80, 8)]
        + [reply(calls=[finish]), reply("done")]
    )
    harness = Harness(script, store=store)
    contract = TaskContract.workspace(
        "read d/f.txt", root=project, verify=WorkspaceFileContains("marker.txt", "finished")
    )

    with racing(project / "d", link) as race:
        result = await harness.run(contract)

    assert race.swaps > 0
    assert result.outcome is RunOutcome.SUCCESS
    observed = [
        block.content
        for message in store.load_run(result.run_id).messages
        for block in message.content
        if isinstance(block, ToolResult)
    ]
    assert len(observed) == 81
    assert not any("SECRET outside" in text for text in observed)
    assert (outside / "f.txt").read_text() == SECRET
